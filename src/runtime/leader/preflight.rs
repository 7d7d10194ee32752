//! Whether the Lease can be used at all, asked once at start: a Lease the program may not read
//! or write (RBAC), in a namespace that does not exist, or with a name the API server refuses,
//! would otherwise leave every replica standing by, ready and idle, for ever (security review
//! F-12): a total outage that looks healthy. The writes are dry runs (`dryRun=All`: checked by
//! authorization, admission and validation, never stored), so asking changes nothing; errors
//! that may pass (5xx, a connection refused) are left to the election, which retries them.

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, PostParams};

use super::LeaderConfig;

/// The Lease cannot be used: the one line to end the program with.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("{0}")]
pub struct LeaseRefused(pub String);

/// Reads the Lease and tries the write the election would make first (create, or update), as
/// dry runs; refused for good when the API server answers 403, 404 or 422.
pub(crate) async fn check(client: kube::Client, cfg: &LeaderConfig) -> Result<(), LeaseRefused> {
    let api = Api::<Lease>::namespaced(client, &cfg.namespace);
    let dry = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let (verb, answer) = match api.get_opt(&cfg.lease_name).await {
        Err(e) => ("get", Err(e)),
        Ok(None) => {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(cfg.lease_name.clone()),
                    namespace: Some(cfg.namespace.clone()),
                    ..ObjectMeta::default()
                },
                spec: None,
            };
            ("create", api.create(&dry, &lease).await.map(drop))
        }
        Ok(Some(lease)) => (
            "update",
            api.replace(&cfg.lease_name, &dry, &lease).await.map(drop),
        ),
    };
    match answer {
        Err(kube::Error::Api(status)) => match refusal(cfg, verb, status.code, &status.message) {
            Some(line) => Err(LeaseRefused(line)),
            None => Ok(()),
        },
        _ => Ok(()),
    }
}

/// The line for the API server's answer `code` (and `message`) to `verb` on the Lease, if it
/// refuses for good (pure).
pub(crate) fn refusal(cfg: &LeaderConfig, verb: &str, code: u16, message: &str) -> Option<String> {
    let lease = format!("{}/{}", cfg.namespace, cfg.lease_name);
    let what = match code {
        403 => format!(
            "the program may not {verb} it: grant get, create and update on leases \
             (coordination.k8s.io) named {} in namespace {} (the program's ClusterRole in \
             config/), or point --lease-name at the Lease its role names",
            cfg.lease_name, cfg.namespace
        ),
        404 => format!(
            "namespace {} does not exist: point --lease-namespace (POD_NAMESPACE) at the \
             namespace the program runs in",
            cfg.namespace
        ),
        422 => "the API server refuses it (an invalid --lease-name or --lease-namespace)".into(),
        _ => return None,
    };
    Some(format!(
        "the leader Lease {lease} cannot be used: {what} (the API server says: {message})"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> LeaderConfig {
        LeaderConfig::new("imagegate-source", "imagegate-system", "pod-1")
    }

    #[test]
    fn only_a_refusal_for_good_ends_the_program() {
        for code in [403, 404, 422] {
            let line = refusal(&cfg(), "create", code, "no").unwrap();
            assert!(
                line.starts_with(
                    "the leader Lease imagegate-system/imagegate-source cannot be used: "
                ),
                "{line}"
            );
            assert!(line.ends_with("(the API server says: no)"), "{line}");
            assert_eq!(line.lines().count(), 1);
        }
        assert!(
            refusal(&cfg(), "get", 403, "x")
                .unwrap()
                .contains("may not get it")
        );
        for code in [409, 429, 500, 503] {
            assert_eq!(refusal(&cfg(), "create", code, "x"), None, "{code}");
        }
    }
}
