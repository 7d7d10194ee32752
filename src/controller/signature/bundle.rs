//! cosign 3's default signature with a key: a Sigstore bundle (v0.3) stored as an OCI 1.1
//! referrer of the digest (the referrers tag `sha256-<hex>` where the registry has no referrers
//! API), whose verification material is a public-key hint and whose content is a DSSE envelope
//! around an in-toto statement that names the digest.
//!
//! Written here, with a reason: `sigstore` 0.15 reads a bundle only with a Fulcio certificate and
//! one Rekor entry (`SignatureLayer::from_sigstore_bundle` refuses a public-key bundle), and keeps
//! its DSSE and in-toto helpers private. So this module reads that one format: the referrers come
//! from `oci-client` (`pull_referrers`, with the tag-schema fallback, and `pull`), the bundle is
//! parsed as JSON, the DSSE pre-authentication encoding is built as its specification says, and
//! the signature is checked by `sigstore`'s own `CosignVerificationKey`. A bundle with a
//! certificate is left to `sigstore` (keyless); one whose statement is not cosign's signature
//! predicate (an attestation, say) or does not name the digest proves nothing.

use base64::Engine as _;
use oci_client::Reference;
use oci_client::client::Client;
use oci_client::manifest::OciManifest;
use oci_client::secrets::RegistryAuth;
use serde_json::Value;
use sigstore::crypto::{CosignVerificationKey, Signature};

use crate::controller::dsse::{IN_TOTO, pae};

/// The media type of a Sigstore bundle v0.3, as cosign stores it (artifact and layer).
pub(crate) const BUNDLE_MEDIA_TYPE: &str = "application/vnd.dev.sigstore.bundle.v0.3+json";
/// The in-toto statement type cosign writes.
const STATEMENT_V1: &str = "https://in-toto.io/Statement/v1";
/// The predicate of a cosign signature (`cosign sign`), as opposed to an attestation.
const COSIGN_SIGN_V1: &str = "https://sigstore.dev/cosign/sign/v1";
/// At most this many referrers of one digest are read (each a manifest and a layer).
pub(crate) const MAX_REFERRERS: usize = 32;

/// A key-based bundle over the candidate digest: what was signed and the signature.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct KeyBundle {
    /// The DSSE pre-authentication encoding of the envelope's payload: the signed bytes.
    pae: Vec<u8>,
    /// The envelope's one signature.
    signature: Vec<u8>,
}

impl KeyBundle {
    /// The bundle in `data` if it is a key-based cosign signature over exactly `digest`
    /// (`sha256:<hex>`); why not, otherwise.
    pub(crate) fn parse(data: &[u8], digest: &str) -> Result<KeyBundle, String> {
        let bundle: Value =
            serde_json::from_slice(data).map_err(|e| format!("not a Sigstore bundle: {e}"))?;
        let media = bundle["mediaType"].as_str().unwrap_or_default();
        if media != BUNDLE_MEDIA_TYPE {
            return Err(format!(
                "bundle media type {media:?} is not {BUNDLE_MEDIA_TYPE}"
            ));
        }
        if bundle["verificationMaterial"]["publicKey"].is_null() {
            return Err("the bundle carries a certificate, not a key hint".into());
        }
        let envelope = &bundle["dsseEnvelope"];
        let payload_type = envelope["payloadType"].as_str().unwrap_or_default();
        if payload_type != IN_TOTO {
            return Err(format!(
                "DSSE payload type {payload_type:?} is not {IN_TOTO}"
            ));
        }
        let b64 = base64::engine::general_purpose::STANDARD;
        let payload = b64
            .decode(envelope["payload"].as_str().unwrap_or_default())
            .map_err(|e| format!("DSSE payload: {e}"))?;
        let signatures = envelope["signatures"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let [only] = signatures.as_slice() else {
            return Err(format!(
                "a DSSE envelope of a cosign signature has exactly one signature, this one {}",
                signatures.len()
            ));
        };
        let signature = b64
            .decode(only["sig"].as_str().unwrap_or_default())
            .map_err(|e| format!("DSSE signature: {e}"))?;
        names_digest(&payload, digest)?;
        Ok(KeyBundle {
            pae: pae(payload_type, &payload),
            signature,
        })
    }

    /// Whether `key` made the signature.
    pub(crate) fn verified_by(&self, key: &CosignVerificationKey) -> bool {
        key.verify_signature(Signature::Raw(&self.signature), &self.pae)
            .is_ok()
    }
}

/// The statement is cosign's signature predicate and one of its subjects is `digest`.
pub(crate) fn names_digest(payload: &[u8], digest: &str) -> Result<(), String> {
    let statement: Value =
        serde_json::from_slice(payload).map_err(|e| format!("in-toto statement: {e}"))?;
    let kind = statement["_type"].as_str().unwrap_or_default();
    if kind != STATEMENT_V1 {
        return Err(format!("statement type {kind:?} is not {STATEMENT_V1}"));
    }
    let predicate = statement["predicateType"].as_str().unwrap_or_default();
    if predicate != COSIGN_SIGN_V1 {
        return Err(format!(
            "predicate {predicate:?} is not a signature ({COSIGN_SIGN_V1})"
        ));
    }
    let hex = digest.strip_prefix("sha256:").unwrap_or_default();
    let subjects = statement["subject"].as_array().cloned().unwrap_or_default();
    if hex.is_empty() || !subjects.iter().any(|s| s["digest"]["sha256"] == hex) {
        return Err(format!("the statement does not name {digest}"));
    }
    Ok(())
}

/// The bundles stored as referrers of `image` (by digest), at most [`MAX_REFERRERS`], raw. A
/// registry that has neither the referrers API nor the referrers tag has none. A bundle is read
/// only if its descriptor says it is at most [`MAX_BUNDLE_BYTES`], and no further than that
/// whatever the registry sends: the candidate's registry is the namespace editor's choice, and
/// the controller serves every namespace.
pub(crate) async fn referred(
    client: &Client,
    image: &Reference,
    auth: &RegistryAuth,
) -> Result<Vec<Vec<u8>>, String> {
    client
        .store_auth_if_needed(image.resolve_registry(), auth)
        .await;
    let index = match client.pull_referrers(image, None).await {
        Ok(index) => index,
        // No referrers tag either: nothing was ever attached.
        Err(oci_client::errors::OciDistributionError::ImageManifestNotFoundError(_)) => {
            return Ok(Vec::new());
        }
        Err(e) => return Err(format!("the referrers of {image}: {e}")),
    };
    let mut found = Vec::new();
    // By the layers' media type, not the index's artifactType: some registries list a bundle as
    // `application/vnd.oci.empty.v1+json` there.
    for entry in index.manifests.iter().take(MAX_REFERRERS) {
        if found.len() >= MAX_REFERRERS {
            break;
        }
        // One referrer that cannot be read (another tool's, a broken one anyone who may push
        // could attach) is skipped, never allowed to block the others.
        if let Err(why) = bundles_of(client, image, auth, &entry.digest, &mut found).await {
            tracing::warn!(referrer = %entry.digest, %why, "a referrer of the candidate was skipped");
        }
    }
    Ok(found)
}

/// The bundles (bounded) of one referrer manifest, added to `found`.
async fn bundles_of(
    client: &Client,
    image: &Reference,
    auth: &RegistryAuth,
    digest: &str,
    found: &mut Vec<Vec<u8>>,
) -> Result<(), String> {
    let referrer = image.clone_with_digest(digest.to_string());
    let (manifest, _) = (client.pull_manifest(&referrer, auth).await)
        .map_err(|e| format!("the referrer {digest}: {e}"))?;
    let OciManifest::Image(manifest) = manifest else {
        return Ok(());
    };
    let layers = (manifest.layers.iter()).filter(|l| l.media_type == BUNDLE_MEDIA_TYPE);
    for layer in layers.take(MAX_REFERRERS) {
        // At most that many bundles in all, whatever the referrers hold.
        if found.len() >= MAX_REFERRERS {
            break;
        }
        if !(0..=MAX_BUNDLE_BYTES as i64).contains(&layer.size) {
            continue;
        }
        let mut out = Bounded::default();
        (client.pull_blob(&referrer, layer, &mut out).await)
            .map_err(|e| format!("the bundle {}: {e}", layer.digest))?;
        found.push(out.data);
    }
    Ok(())
}

/// The most a bundle may hold; cosign's are under 10 KiB (one certificate at most).
pub(crate) const MAX_BUNDLE_BYTES: usize = 256 * 1024;

/// A sink that takes at most [`MAX_BUNDLE_BYTES`] and fails the download past it.
#[derive(Default)]
struct Bounded {
    data: Vec<u8>,
}

impl tokio::io::AsyncWrite for Bounded {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        if self.data.len() + buf.len() > MAX_BUNDLE_BYTES {
            let too_large = std::io::Error::other("the bundle is larger than its bound");
            return std::task::Poll::Ready(Err(too_large));
        }
        self.data.extend_from_slice(buf);
        std::task::Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    //! A key-based bundle as cosign 3.1.3 stored it (`cosign sign --key` with a signing config
    //! without a transparency log, against a distribution registry), and its public key: the
    //! files of `tests/data/cosign/`.

    use super::*;

    const BUNDLE: &str = include_str!("../../../tests/data/cosign/key-bundle_sha256-2b67ce55.json");
    const KEY: &str = include_str!("../../../tests/data/cosign/key-bundle_cosign.pub");
    const DIGEST: &str = "sha256:2b67ce550208cf06b2b9ab43b7617678631796c2d794293efeb0951718bfa103";
    /// Another key, made by `cosign generate-key-pair` for this test.
    const OTHER: &str = "-----BEGIN PUBLIC KEY-----\nMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEGbICoNwXsm+yDWXirqGwDZLeER/I\nModt6OoYtia2zFU8uXEcmkoDo4f2VYrejLHxOXNHYpyWyinzMmTH89giNg==\n-----END PUBLIC KEY-----\n";

    fn key(pem: &str) -> CosignVerificationKey {
        CosignVerificationKey::try_from_pem(pem.as_bytes()).unwrap()
    }

    fn edited(edit: impl FnOnce(&mut Value)) -> Vec<u8> {
        let mut bundle: Value = serde_json::from_str(BUNDLE).unwrap();
        edit(&mut bundle);
        serde_json::to_vec(&bundle).unwrap()
    }

    fn statement() -> Value {
        let bundle: Value = serde_json::from_str(BUNDLE).unwrap();
        let payload = bundle["dsseEnvelope"]["payload"].as_str().unwrap();
        let b64 = base64::engine::general_purpose::STANDARD;
        serde_json::from_slice(&b64.decode(payload).unwrap()).unwrap()
    }

    fn with_statement(statement: &Value) -> Vec<u8> {
        let b64 = base64::engine::general_purpose::STANDARD;
        let payload = b64.encode(serde_json::to_vec(statement).unwrap());
        edited(|b| b["dsseEnvelope"]["payload"] = Value::String(payload))
    }

    #[test]
    fn the_publisher_s_key_verifies_its_bundle_and_no_other_key_does() {
        let bundle = KeyBundle::parse(BUNDLE.as_bytes(), DIGEST).unwrap();
        assert!(bundle.verified_by(&key(KEY)));
        assert!(!bundle.verified_by(&key(OTHER)));
    }

    #[test]
    fn a_bundle_over_another_digest_or_not_a_signature_proves_nothing() {
        let other = "sha256:1111111111111111111111111111111111111111111111111111111111111111";
        let err = KeyBundle::parse(BUNDLE.as_bytes(), other).unwrap_err();
        assert!(err.contains("does not name"), "{err}");
        // An attestation by the same key names the digest, but is not a signature.
        let mut attestation = statement();
        attestation["predicateType"] = "https://spdx.dev/Document".into();
        let err = KeyBundle::parse(&with_statement(&attestation), DIGEST).unwrap_err();
        assert!(err.contains("is not a signature"), "{err}");
        // A certificate bundle is keyless: sigstore's to verify, not this module's.
        let keyless = edited(|b| {
            b["verificationMaterial"] = serde_json::json!({"certificate": {"rawBytes": "AAAA"}})
        });
        assert!(KeyBundle::parse(&keyless, DIGEST).is_err());
        let two = edited(|b| {
            let sig = b["dsseEnvelope"]["signatures"][0].clone();
            b["dsseEnvelope"]["signatures"] = serde_json::json!([sig.clone(), sig]);
        });
        assert!(
            KeyBundle::parse(&two, DIGEST)
                .unwrap_err()
                .contains("exactly one signature")
        );
        assert!(KeyBundle::parse(b"{}", DIGEST).is_err());
        assert!(KeyBundle::parse(b"not json", DIGEST).is_err());
    }

    #[test]
    fn a_statement_edited_to_name_the_candidate_no_longer_verifies() {
        // Someone rewrites a signed statement to name their own digest: it parses, and no key
        // verifies it, since the signature covers the payload (and its type, through the PAE).
        let forged_digest =
            "sha256:2222222222222222222222222222222222222222222222222222222222222222";
        let mut forged = statement();
        forged["subject"][0]["digest"]["sha256"] =
            forged_digest.trim_start_matches("sha256:").into();
        let bundle = KeyBundle::parse(&with_statement(&forged), forged_digest).unwrap();
        assert!(!bundle.verified_by(&key(KEY)));
    }

    #[test]
    fn the_pre_authentication_encoding_is_dsse_s() {
        // DSSE's own example: https://github.com/secure-systems-lab/dsse/blob/master/protocol.md
        assert_eq!(
            pae("http://example.com/HelloWorld", b"hello world"),
            b"DSSEv1 29 http://example.com/HelloWorld 11 hello world".to_vec()
        );
    }
}
