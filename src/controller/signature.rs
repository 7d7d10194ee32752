//! The candidate's publisher signatures, read for [`super::decide`] when a signature policy asks
//! for them ([`super::params::signature`]): the trusted keys (inline, or from a ConfigMap of the
//! controller's own namespace), the registry credentials (the named dockerconfigjson
//! Secrets), then the signatures cosign stored for exactly the candidate digest in the
//! candidate's own repository, verified with the Sigstore project's Rust client (`sigstore`,
//! over `oci-client`): the `sha256-<hex>.sig` tag and the OCI 1.1 referrers of the digest
//! (cosign 3's key-based bundles, which `sigstore` 0.15 does not read, in [`bundle`]).
//!
//! What is verified offline: the signature over the payload, by each trusted key, and that the
//! payload names the candidate digest (a signature over another digest, or a registry that
//! answers for another digest, proves nothing). Nothing is asked of Rekor: a transparency-log
//! bundle stored with a key-based signature is not needed and not checked.
//!
//! The decision itself is pure: this module only reports, per requirement, which key matched
//! ([`Signatures`]).

use std::collections::BTreeMap;
use std::time::Duration;

use base64::Engine as _;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::Api;
use sigstore::cosign::verification_constraint::{PublicKeyVerifier, VerificationConstraint};
use sigstore::cosign::{ClientBuilder, CosignCapabilities, SignatureLayer};
use sigstore::registry::{Auth, ClientConfig, ClientProtocol, OciReference};

use self::bundle::KeyBundle;
use self::keyless::{KeylessBundle, TrustRoot};
use super::error::Error;
use super::params::signature::{KeySource, SignatureRequirement, public_key};
use crate::api::status_code;

pub mod bundle;
pub(crate) mod keyless;

/// How long one lookup of a candidate's signatures may take (every registry round trip of it):
/// a registry that does not answer is retried by the error policy, never waited on forever.
pub(crate) const REGISTRY_TIMEOUT: Duration = Duration::from_secs(30);

/// Where a lookup reads what the policy names.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Namespaces<'a> {
    /// The run's: its pull secrets.
    pub run: &'a str,
    /// The controller's own: the ConfigMaps of trusted keys.
    pub keys: &'a str,
}

/// Where the candidate is and how to reach its registry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Candidate<'a> {
    /// Its pull spec from the candidate tag's history (`quay.io/org/app@sha256:...`).
    pub reference: &'a str,
    /// The digest the run validates (the signatures must name exactly this one).
    pub digest: &'a str,
    /// The candidate tag's `importPolicy.insecure`: the registry is reached over plain HTTP, as
    /// OpenShift's import reaches it.
    pub insecure: bool,
}

/// What the registry showed about the candidate's signatures, per requirement.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Signatures {
    /// The candidate's pull spec by digest, as looked up.
    pub looked_up: String,
    /// How many signatures over exactly the candidate digest were found.
    pub found: usize,
    /// One per requirement, in order.
    pub findings: Vec<Finding>,
}

/// Whether one requirement is met.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Finding {
    /// Who asks (`ImagePromotion "nb"`).
    pub by: String,
    /// What the first signature that verified was made by (`key "publisher-2026"`,
    /// `identity "release" (release@example.com from https://issuer.example)`); `None`: none.
    pub matched: Option<String>,
    /// Keys (or a trusted root) that could not be used, with why (a missing ConfigMap, a key
    /// that is not PEM, a trusted root that is not one).
    pub unusable: Vec<String>,
    /// The names of the keys and identities tried.
    pub tried: Vec<String>,
    /// Why each keyless signature found did not verify (`keyless signature 1: ...`).
    pub rejected: Vec<String>,
}

/// Reads the keys and credentials the requirements name, looks up the candidate's signatures
/// and verifies each requirement's keys against them. An API or registry failure is an
/// [`Error`] (retried); everything else is in the [`Signatures`].
pub(crate) async fn read(
    client: &kube::Client,
    namespaces: Namespaces<'_>,
    candidate: &Candidate<'_>,
    requirements: &[SignatureRequirement],
) -> Result<Signatures, Error> {
    let image = by_digest(candidate)?;
    let looked_up = image.whole();
    let mut keys = Vec::new();
    for requirement in requirements {
        let mut resolved = Vec::new();
        for key in &requirement.keys {
            resolved.push((
                key.name.clone(),
                pem_of(client, namespaces.keys, &key.source).await?,
            ));
        }
        keys.push(resolved);
    }
    let mut roots = Vec::new();
    for requirement in requirements {
        let root = match &requirement.keyless {
            None => None,
            Some(keyless) => {
                Some(trust_root(client, namespaces.keys, &keyless.trusted_root).await?)
            }
        };
        roots.push(root);
    }
    let pull_secrets: Vec<&str> = (requirements.iter())
        .flat_map(|r| r.pull_secrets.iter().map(String::as_str))
        .collect();
    // Over plain HTTP too where the candidate tag says `insecure`, as OpenShift's own import
    // sends them (docs/custom-task.md says to keep `insecure` off registries that need them).
    let auth = credentials(client, namespaces.run, &pull_secrets, image.registry()).await?;
    let (layers, mut bundles) = lookup(&image, &auth, candidate, &looked_up).await?;
    // The same bundle twice (under two referrers) is checked once.
    bundles.sort_unstable();
    bundles.dedup();
    let digest = candidate.digest.to_string();
    let requirements = requirements.to_vec();
    // The checks are CPU work (a keyless bundle is a timestamp's, a chain's, a signature's and a
    // Merkle proof's), bounded by the lookup's bounds, on the blocking pool: never on the
    // runtime's workers, which serve every other run.
    let judged = tokio::task::spawn_blocking(move || {
        let layers: Vec<SignatureLayer> = (layers.into_iter())
            .filter(|l| l.simple_signing.critical.image.docker_manifest_digest == digest)
            .collect();
        let keyless: Vec<KeylessBundle> = (bundles.iter())
            .filter_map(|b| KeylessBundle::parse(b, &digest).ok())
            .collect();
        let bundles: Vec<KeyBundle> = (bundles.iter())
            .filter_map(|b| KeyBundle::parse(b, &digest).ok())
            .collect();
        let signed = Signed {
            layers: &layers,
            bundles: &bundles,
            keyless: &keyless,
        };
        let findings = (requirements.iter().zip(keys).zip(roots))
            .map(|((requirement, keys), root)| judge(requirement, keys, root, &signed))
            .collect();
        (layers.len() + bundles.len() + keyless.len(), findings)
    });
    let (found, findings) = judged.await.map_err(|e| Error::Registry {
        reference: looked_up.clone(),
        message: format!("the signatures' check did not finish ({e})"),
    })?;
    Ok(Signatures {
        looked_up,
        found,
        findings,
    })
}

/// The candidate's repository at the run's digest, whatever digest its pull spec carries.
fn by_digest(candidate: &Candidate) -> Result<OciReference, Error> {
    let bad = |message: String| Error::Registry {
        reference: candidate.reference.to_string(),
        message,
    };
    let parsed: OciReference = candidate
        .reference
        .parse()
        .map_err(|e| bad(format!("not a pull spec: {e}")))?;
    Ok(OciReference::with_digest(
        parsed.registry().to_string(),
        parsed.repository().to_string(),
        candidate.digest.to_string(),
    ))
}

/// What was found over the candidate digest: simple-signing layers (`sigstore`'s), key-based
/// bundles ([`bundle`]) and keyless bundles ([`keyless`]).
struct Signed<'a> {
    layers: &'a [SignatureLayer],
    bundles: &'a [KeyBundle],
    keyless: &'a [KeylessBundle],
}

/// The trusted root a keyless requirement names, or why it cannot be used (its ConfigMap or key
/// is missing, or it is not a trusted root). An API failure other than a 404 is an [`Error`].
async fn trust_root(
    client: &kube::Client,
    keys_namespace: &str,
    r: &crate::controller::crd::KeyRef,
) -> Result<Result<TrustRoot, String>, Error> {
    let json = pem_of(client, keys_namespace, &KeySource::ConfigMap(r.clone())).await?;
    Ok(json.and_then(|json| {
        TrustRoot::parse(&json).map_err(|e| format!("ConfigMap {} key {:?}: {e}", r.name, r.key))
    }))
}

/// The signature layers `sigstore` found and checked the form of, and the raw bundles among the
/// digest's referrers, within [`REGISTRY_TIMEOUT`].
async fn lookup(
    image: &OciReference,
    auth: &Auth,
    candidate: &Candidate<'_>,
    looked_up: &str,
) -> Result<(Vec<SignatureLayer>, Vec<Vec<u8>>), Error> {
    use oci_client::client::ClientProtocol as OciProtocol;
    use oci_client::secrets::RegistryAuth;
    let registry_error = |message: String| Error::Registry {
        reference: looked_up.to_string(),
        message,
    };
    let host = image.registry().to_string();
    let (protocol, oci_protocol) = if candidate.insecure {
        (
            ClientProtocol::HttpsExcept(vec![host.clone()]),
            OciProtocol::HttpsExcept(vec![host]),
        )
    } else {
        (ClientProtocol::Https, OciProtocol::Https)
    };
    let config = ClientConfig {
        protocol,
        ..ClientConfig::default()
    };
    let mut client = ClientBuilder::default()
        .with_oci_client_config(config)
        .build()
        .map_err(|e| registry_error(format!("the registry client: {e}")))?;
    let referrers = oci_client::Client::new(oci_client::client::ClientConfig {
        protocol: oci_protocol,
        ..Default::default()
    });
    let oci_auth = match auth {
        Auth::Basic(user, password) => RegistryAuth::Basic(user.clone(), password.clone()),
        Auth::Bearer(token) => RegistryAuth::Bearer(token.clone()),
        Auth::Anonymous => RegistryAuth::Anonymous,
    };
    let reference: oci_client::Reference =
        (looked_up.parse()).map_err(|e| registry_error(format!("not a pull spec: {e}")))?;
    let both = async {
        let layers = (client.trusted_signature_layers(auth, image).await)
            .map_err(|e| registry_error(e.to_string()))?;
        let bundles = bundle::referred(&referrers, &reference, &oci_auth)
            .await
            .map_err(registry_error)?;
        Ok((layers, bundles))
    };
    let waited = tokio::time::timeout(REGISTRY_TIMEOUT, both).await;
    waited.map_err(|_| {
        let secs = REGISTRY_TIMEOUT.as_secs();
        registry_error(format!("no answer within {secs} s"))
    })?
}

/// Whether a signature by one of the requirement's usable keys, or a keyless one by one of its
/// identities, is among those found.
fn judge(
    requirement: &SignatureRequirement,
    keys: Vec<(String, Result<String, String>)>,
    root: Option<Result<TrustRoot, String>>,
    signed: &Signed,
) -> Finding {
    let mut finding = Finding {
        by: requirement.by.clone(),
        matched: None,
        unusable: Vec::new(),
        tried: Vec::new(),
        rejected: Vec::new(),
    };
    for (name, pem) in keys {
        let verifier = pem.and_then(|pem| {
            let key = public_key(&pem)?;
            let verifier = PublicKeyVerifier::try_from(pem.trim().as_bytes())
                .map_err(|e| format!("not a public key cosign can verify with ({e})"))?;
            Ok((key, verifier))
        });
        let (key, verifier) = match verifier {
            Ok(v) => v,
            Err(why) => {
                finding.unusable.push(format!("{name:?}: {why}"));
                continue;
            }
        };
        finding.tried.push(name.clone());
        // A layer the key cannot verify is no match; an error verifying one is none either.
        let by_layer = (signed.layers.iter()).any(|l| verifier.verify(l).unwrap_or(false));
        if by_layer || signed.bundles.iter().any(|b| b.verified_by(&key)) {
            finding.matched = Some(format!("key {name:?}"));
            return finding;
        }
    }
    let (Some(keyless), Some(root)) = (&requirement.keyless, root) else {
        return finding;
    };
    let root = match root {
        Ok(root) => root,
        Err(why) => {
            finding.unusable.push(format!("trusted root: {why}"));
            return finding;
        }
    };
    (finding.tried).extend(keyless.identities.iter().map(|i| i.name.clone()));
    let mut rejected = Vec::new();
    for (i, bundle) in signed.keyless.iter().enumerate() {
        match bundle.verify(&root, &keyless.identities) {
            Ok(v) => {
                let (subject, issuer) = (&v.signer.subject, &v.signer.issuer);
                let identity = &v.identity;
                finding.matched = Some(format!("identity {identity:?} ({subject} from {issuer})"));
                return finding;
            }
            Err(why) => rejected.push(format!("keyless signature {}: {why}", i + 1)),
        }
    }
    if !rejected.is_empty() {
        finding.rejected.push(keyless::summary(rejected));
    }
    finding
}

/// The PEM of a key, or why it cannot be had (the ConfigMap or its data key is missing). An API
/// failure other than a 404 is an [`Error`].
pub(crate) async fn pem_of(
    client: &kube::Client,
    keys_namespace: &str,
    source: &KeySource,
) -> Result<Result<String, String>, Error> {
    match source {
        KeySource::Inline(pem) => Ok(Ok(pem.clone())),
        KeySource::ConfigMap(r) => {
            let api: Api<ConfigMap> = Api::namespaced(client.clone(), keys_namespace);
            let what = format!("ConfigMap {}", r.name);
            let Some(cm) = get_opt(&api, &r.name, &what).await? else {
                return Ok(Err(format!(
                    "{what} does not exist in namespace {keys_namespace}"
                )));
            };
            let data = cm.data.unwrap_or_default();
            Ok(data
                .get(&r.key)
                .cloned()
                .ok_or_else(|| format!("{what} has no key {:?}", r.key)))
        }
    }
}

async fn get_opt<K>(api: &Api<K>, name: &str, what: &str) -> Result<Option<K>, Error>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    match api.get(name).await {
        Ok(found) => Ok(Some(found)),
        Err(e) if status_code(&e) == Some(404) => Ok(None),
        Err(source) => Err(Error::ReadSignatureSetting {
            what: what.to_string(),
            source,
        }),
    }
}

/// The credentials for `registry` from the first named dockerconfigjson Secret that has an
/// entry for it; anonymous when none has.
async fn credentials(
    client: &kube::Client,
    namespace: &str,
    pull_secrets: &[&str],
    registry: &str,
) -> Result<Auth, Error> {
    let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
    for name in pull_secrets {
        let what = format!("Secret {name}");
        let Some(secret) = get_opt(&api, name, &what).await? else {
            continue;
        };
        let data = secret.data.unwrap_or_default();
        let config = data
            .get(".dockerconfigjson")
            .or_else(|| data.get(".dockercfg"));
        if let Some(auth) = config.and_then(|c| registry_auth(&c.0, registry)) {
            return Ok(auth);
        }
    }
    Ok(Auth::Anonymous)
}

/// The entry for `registry` in a `.dockerconfigjson` (`{"auths": {...}}`) or a `.dockercfg`
/// (the entries alone), keyed by host or by URL: `username`/`password`, or `auth` (base64 of
/// `user:password`).
///
/// Written here: the crates that read Docker's config (`docker_credential`) read the user's file
/// and credential helpers from disk, not a Secret's bytes, and oci-client takes only the
/// resolved user and password.
pub(crate) fn registry_auth(config: &[u8], registry: &str) -> Option<Auth> {
    #[derive(serde::Deserialize, Default)]
    struct Entry {
        #[serde(default)]
        username: String,
        #[serde(default)]
        password: String,
        #[serde(default)]
        auth: String,
    }
    let value: serde_json::Value = serde_json::from_slice(config).ok()?;
    let entries = value.get("auths").unwrap_or(&value);
    let entries: BTreeMap<String, serde_json::Value> =
        serde_json::from_value(entries.clone()).ok()?;
    let host_of = |key: &str| {
        let key = key
            .trim_start_matches("https://")
            .trim_start_matches("http://");
        key.split('/').next().unwrap_or_default().to_string()
    };
    let wanted = match registry {
        // Docker Hub's entries are written under its index's address.
        "docker.io" | "index.docker.io" | "registry-1.docker.io" => "index.docker.io",
        other => other,
    };
    let entry = entries.iter().find_map(|(key, entry)| {
        let host = host_of(key);
        let host = if host == "docker.io" {
            "index.docker.io".to_string()
        } else {
            host
        };
        (host == wanted).then_some(entry)
    })?;
    let entry: Entry = serde_json::from_value(entry.clone()).unwrap_or_default();
    if !entry.username.is_empty() {
        return Some(Auth::Basic(entry.username, entry.password));
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(entry.auth.trim())
        .ok()?;
    let decoded = String::from_utf8(decoded).ok()?;
    let (user, password) = decoded.split_once(':')?;
    Some(Auth::Basic(user.to_string(), password.to_string()))
}

#[cfg(test)]
mod tests;
