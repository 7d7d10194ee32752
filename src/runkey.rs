//! The run key: a secret of the install (32 random bytes in Secret `imagegate-run-key` of
//! imagegate's namespace) that names the PipelineRuns validating candidates.
//!
//! A PipelineRun's name is what makes a second delivery of one change start no second
//! validation (the API server refuses the second create, AlreadyExists). A name anyone can
//! compute is a name anyone can take first: a pipeline runner of a gated namespace who creates
//! a PipelineRun under it suppresses the candidate's real validation (security review F-4). So
//! the name is an HMAC-SHA256 of the candidate under this key: the same for every delivery and
//! every replica, unpredictable to whoever cannot read the Secret (no tenant can: it lives in
//! imagegate's namespace, readable by the interceptor and the controller only).
//!
//! [`ensure`] reads the Secret, creating it on first start (replicas that race read the
//! winner's); [`RunKey::run_id`] and [`RunKey::redrive_id`] are pure.

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::api::{ObjectMeta, PostParams};
use ring::hmac;

/// The Secret's default name.
pub const DEFAULT_SECRET: &str = "imagegate-run-key";
/// The Secret's data key.
pub(crate) const DATA_KEY: &str = "key";
/// How many bytes a key has.
const KEY_LEN: usize = 32;

/// The key.
#[derive(Clone)]
pub struct RunKey(hmac::Key);

impl std::fmt::Debug for RunKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RunKey(..)")
    }
}

/// A candidate, as the names are derived from it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Candidate<'a> {
    /// The stream's namespace.
    pub namespace: &'a str,
    /// The stream.
    pub imagestream: &'a str,
    /// The candidate tag.
    pub tag: &'a str,
    /// The candidate's digest.
    pub digest: &'a str,
    /// When the candidate tag came to point at it: the `created` of its history item, as the
    /// API server wrote it ("" when there is none). A digest that comes back after another
    /// (A, B, A) is a new candidate, with a new name, and validated again.
    pub since: &'a str,
}

impl RunKey {
    /// A key of these bytes (at least 32).
    pub fn from_bytes(bytes: &[u8]) -> Result<RunKey, String> {
        if bytes.len() < KEY_LEN {
            return Err(format!(
                "the run key has {} bytes; it needs at least {KEY_LEN}",
                bytes.len()
            ));
        }
        Ok(RunKey(hmac::Key::new(hmac::HMAC_SHA256, bytes)))
    }

    /// The id of the PipelineRun that validates `c` when its event arrives: 40 lowercase hex
    /// characters (the TriggerTemplate names the run `imagegate-<id>`).
    pub(crate) fn run_id(&self, c: &Candidate) -> String {
        self.id(&["run", c.namespace, c.imagestream, c.tag, c.digest, c.since])
    }

    /// The id of the controller's `attempt`-th re-drive of `c` (1, 2, ...): never a
    /// [`RunKey::run_id`], the same for every controller that re-drives it.
    pub fn redrive_id(&self, c: &Candidate, attempt: u32) -> String {
        let attempt = attempt.to_string();
        self.id(&[
            "redrive",
            c.namespace,
            c.imagestream,
            c.tag,
            c.digest,
            c.since,
            &attempt,
        ])
    }

    fn id(&self, parts: &[&str]) -> String {
        // Each part is length-prefixed, so no two lists of parts give one message.
        let mut message = b"imagegate-run-id-v1".to_vec();
        for p in parts {
            message.extend_from_slice(format!("/{}:", p.len()).as_bytes());
            message.extend_from_slice(p.as_bytes());
        }
        let tag = hmac::sign(&self.0, &message);
        tag.as_ref()
            .iter()
            .take(20)
            .map(|b| format!("{b:02x}"))
            .collect()
    }
}

/// The [`Candidate::since`] of a history item: its `created` as the API writes it.
pub fn since(created: Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>) -> String {
    created
        .and_then(|t| serde_json::to_value(t).ok())
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

/// Reads the key from Secret `name` of `namespace`, creating it (32 random bytes) when there is
/// none. The error is one line naming the Secret.
pub(crate) async fn ensure(
    client: kube::Client,
    namespace: &str,
    name: &str,
) -> anyhow::Result<RunKey> {
    let api: Api<Secret> = Api::namespaced(client, namespace);
    let read = |s: Secret| -> anyhow::Result<RunKey> {
        let bytes = s
            .data
            .and_then(|mut d| d.remove(DATA_KEY))
            .ok_or_else(|| anyhow::anyhow!("Secret {namespace}/{name} has no {DATA_KEY:?}"))?;
        RunKey::from_bytes(&bytes.0).map_err(|e| anyhow::anyhow!("Secret {namespace}/{name}: {e}"))
    };
    match api.get_opt(name).await {
        Ok(Some(s)) => return read(s),
        Ok(None) => {}
        Err(e) => anyhow::bail!("cannot read the run key, Secret {namespace}/{name}: {e}"),
    }
    let mut bytes = [0u8; KEY_LEN];
    ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut bytes)
        .map_err(|_| anyhow::anyhow!("the system has no random numbers for the run key"))?;
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some(
                [(
                    "app.kubernetes.io/part-of".to_string(),
                    "imagegate".to_string(),
                )]
                .into(),
            ),
            ..Default::default()
        },
        data: Some([(DATA_KEY.to_string(), ByteString(bytes.to_vec()))].into()),
        type_: Some("Opaque".into()),
        ..Default::default()
    };
    match api.create(&PostParams::default(), &secret).await {
        Ok(s) => read(s),
        // Another replica made it first: its key is the key.
        Err(kube::Error::Api(s)) if s.code == 409 => read(api.get(name).await.map_err(|e| {
            anyhow::anyhow!("cannot read the run key, Secret {namespace}/{name}: {e}")
        })?),
        Err(e) => anyhow::bail!("cannot create the run key, Secret {namespace}/{name}: {e}"),
    }
}

/// Reads the key from Secret `name` of `namespace` without creating it: `None` when there is
/// none (the interceptor makes it).
pub async fn read(
    client: kube::Client,
    namespace: &str,
    name: &str,
) -> Result<Option<RunKey>, String> {
    let api: Api<Secret> = Api::namespaced(client, namespace);
    let secret = api
        .get_opt(name)
        .await
        .map_err(|e| format!("cannot read the run key, Secret {namespace}/{name}: {e}"))?;
    let Some(secret) = secret else {
        return Ok(None);
    };
    let bytes = secret
        .data
        .and_then(|mut d| d.remove(DATA_KEY))
        .ok_or_else(|| format!("Secret {namespace}/{name} has no {DATA_KEY:?}"))?;
    RunKey::from_bytes(&bytes.0)
        .map(Some)
        .map_err(|e| format!("Secret {namespace}/{name}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(digest: &str) -> Candidate<'_> {
        Candidate {
            namespace: "notebooks",
            imagestream: "jupyter",
            tag: "candidate",
            digest,
            since: "2026-12-06T01:00:00Z",
        }
    }

    #[test]
    fn ids_are_40_hex_the_same_for_one_candidate_and_differ_for_another_key_or_candidate() {
        let k = RunKey::from_bytes(&[7; 32]).unwrap();
        let id = k.run_id(&c("sha256:aa"));
        assert_eq!(id.len(), 40);
        assert!(
            id.bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
        );
        assert_eq!(k.run_id(&c("sha256:aa")), id);
        assert_ne!(k.run_id(&c("sha256:ab")), id);
        let other = RunKey::from_bytes(&[8; 32]).unwrap();
        assert_ne!(
            other.run_id(&c("sha256:aa")),
            id,
            "the key changes every name"
        );
        assert_ne!(k.redrive_id(&c("sha256:aa"), 1), id);
        assert_ne!(
            k.redrive_id(&c("sha256:aa"), 1),
            k.redrive_id(&c("sha256:aa"), 2)
        );
        assert_eq!(
            k.redrive_id(&c("sha256:aa"), 1),
            k.redrive_id(&c("sha256:aa"), 1)
        );
        let again = Candidate {
            since: "2026-12-06T02:00:00Z",
            ..c("sha256:aa")
        };
        assert_ne!(
            k.run_id(&again),
            id,
            "a digest that comes back is a new candidate"
        );
    }

    #[test]
    fn parts_cannot_run_into_each_other() {
        let k = RunKey::from_bytes(&[7; 32]).unwrap();
        let a = Candidate {
            namespace: "a",
            imagestream: "b/c",
            tag: "t",
            digest: "d",
            since: "",
        };
        let b = Candidate {
            namespace: "a/b",
            imagestream: "c",
            tag: "t",
            digest: "d",
            since: "",
        };
        assert_ne!(k.run_id(&a), k.run_id(&b));
    }

    #[test]
    fn a_short_key_is_refused() {
        assert!(
            RunKey::from_bytes(&[1; 16])
                .unwrap_err()
                .contains("at least 32")
        );
    }
}
