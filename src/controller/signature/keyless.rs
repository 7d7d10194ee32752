//! Keyless signatures: a Sigstore bundle (v0.3, stored by cosign 3 as an OCI 1.1 referrer of the
//! digest) whose signature was made with a short-lived Fulcio certificate for an OIDC identity,
//! logged in Rekor v2 and timestamped by a timestamp authority. Verified offline against the
//! trusted root the platform gives (a ConfigMap of the controller's namespace), in this order:
//!
//! 1. the RFC 3161 timestamp over the signature is signed by a timestamp authority of the root
//!    ([`tsa`]): the signing time;
//! 2. the certificate chains to a certificate authority of the root, valid at that time
//!    ([`cert`]);
//! 3. the certificate's key made the DSSE signature over an in-toto statement of cosign's
//!    signature predicate that names exactly the candidate digest;
//! 4. a log of the root included an entry of exactly this signature, certificate and content, in
//!    a checkpoint it signed ([`tlog`]);
//! 5. the certificate's OIDC issuer and subject are one of the identities the policy trusts.
//!
//! Not verified (docs/security.md, "Keyless signatures"): that the log's checkpoint is the one it
//! shows everyone (no network access to Rekor, no witnesses), certificate transparency (no SCT is
//! read), revocation (the certificates live ten minutes), and the root's freshness (whatever the
//! ConfigMap holds). Written here, with a reason: `sigstore` 0.15 reads neither a Rekor v2 entry
//! nor a timestamp (its bundle verifier needs a Rekor v1 promise and an SCT); its key and
//! Merkle-proof types are used.

use der::Decode as _;
use sigstore::crypto::{CosignVerificationKey, Signature};
use sigstore_protobuf_specs::dev::sigstore::bundle::v1::{Bundle, bundle, verification_material};
use sigstore_protobuf_specs::dev::sigstore::rekor::v1::TransparencyLogEntry;
use x509_cert::Certificate;

use super::bundle::{BUNDLE_MEDIA_TYPE, names_digest};
use crate::controller::dsse::{IN_TOTO, pae};
use crate::controller::params::signature::TrustedIdentity;

pub(crate) mod cert;
pub(crate) mod root;
pub(crate) mod tlog;
pub(crate) mod tsa;

pub(crate) use root::TrustRoot;

/// The most timestamps, and the most log entries, one bundle may carry (sigstore-go's bounds).
const MAX_PER_BUNDLE: usize = 32;
/// The most reasons one message keeps, and the longest each may be: what a bundle names (a log's
/// origin, a kind) is the registry's, whoever may push there.
const MAX_REASONS: usize = 3;
const MAX_REASON_CHARS: usize = 300;

/// `reasons` for a message, bounded: the first [`MAX_REASONS`], each cut to
/// [`MAX_REASON_CHARS`] characters, and how many more there were.
pub(crate) fn summary(reasons: Vec<String>) -> String {
    let more = reasons.len().saturating_sub(MAX_REASONS);
    let mut kept: Vec<String> = (reasons.into_iter().take(MAX_REASONS))
        .map(|r| match r.char_indices().nth(MAX_REASON_CHARS) {
            Some((cut, _)) => format!("{}...", &r[..cut]),
            None => r,
        })
        .collect();
    if more > 0 {
        kept.push(format!("and {more} more"));
    }
    kept.join("; ")
}

/// A keyless bundle over the candidate digest, read but not yet verified.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct KeylessBundle {
    /// The signing certificate, DER.
    certificate: Vec<u8>,
    /// The DSSE pre-authentication encoding: the signed bytes.
    pae: Vec<u8>,
    /// The DSSE signature.
    signature: Vec<u8>,
    /// The RFC 3161 timestamps over the signature.
    timestamps: Vec<Vec<u8>>,
    /// The transparency-log entries.
    entries: Vec<TransparencyLogEntry>,
}

/// A keyless signature that verified, and who made it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Verified {
    /// The name of the identity it matched.
    pub identity: String,
    /// Who Fulcio certified.
    pub signer: cert::Signer,
}

impl KeylessBundle {
    /// The bundle in `data` if it is a keyless cosign signature over exactly `digest`; why not,
    /// otherwise (a key-based bundle is [`super::bundle::KeyBundle`]'s).
    pub(crate) fn parse(data: &[u8], digest: &str) -> Result<KeylessBundle, String> {
        let bundle: Bundle =
            serde_json::from_slice(data).map_err(|e| format!("not a Sigstore bundle ({e})"))?;
        if bundle.media_type != BUNDLE_MEDIA_TYPE {
            return Err(format!(
                "bundle media type {:?} is not {BUNDLE_MEDIA_TYPE}",
                bundle.media_type
            ));
        }
        let material = bundle.verification_material.unwrap_or_default();
        let certificate = match material.content {
            Some(verification_material::Content::Certificate(c)) => c.raw_bytes,
            // Older bundles carry the chain, leaf first; only the leaf is the signer's.
            Some(verification_material::Content::X509CertificateChain(c)) => {
                (c.certificates.into_iter().next())
                    .map(|c| c.raw_bytes)
                    .unwrap_or_default()
            }
            _ => return Err("the bundle carries no certificate".into()),
        };
        let Some(bundle::Content::DsseEnvelope(envelope)) = bundle.content else {
            return Err("the bundle holds no DSSE envelope".into());
        };
        if envelope.payload_type != IN_TOTO {
            return Err(format!(
                "DSSE payload type {:?} is not {IN_TOTO}",
                envelope.payload_type
            ));
        }
        let [only] = envelope.signatures.as_slice() else {
            return Err(format!(
                "a DSSE envelope of a cosign signature has exactly one signature, this one {}",
                envelope.signatures.len()
            ));
        };
        names_digest(&envelope.payload, digest)?;
        let timestamps: Vec<Vec<u8>> = (material.timestamp_verification_data.iter())
            .flat_map(|t| {
                t.rfc3161_timestamps
                    .iter()
                    .map(|t| t.signed_timestamp.clone())
            })
            .collect();
        // sigstore-go's bounds: a bundle is not a way to make the controller check thousands
        // of signatures.
        let (stamps, entries) = (timestamps.len(), material.tlog_entries.len());
        if stamps > MAX_PER_BUNDLE || entries > MAX_PER_BUNDLE {
            return Err(format!(
                "{stamps} timestamps and {entries} log entries: at most {MAX_PER_BUNDLE} of each"
            ));
        }
        Ok(KeylessBundle {
            certificate,
            pae: pae(&envelope.payload_type, &envelope.payload),
            signature: only.sig.clone(),
            timestamps,
            entries: material.tlog_entries,
        })
    }

    /// The identity of `identities` this bundle is a verified signature of, under `root`; why
    /// not, otherwise. Every step is in the module's documentation; the first that fails is the
    /// reason.
    pub(crate) fn verify(
        &self,
        root: &TrustRoot,
        identities: &[TrustedIdentity],
    ) -> Result<Verified, String> {
        if self.timestamps.is_empty() {
            return Err("the bundle carries no signed timestamp (Rekor v2 gives no time)".into());
        }
        let mut why = Vec::new();
        let at = (self.timestamps.iter())
            .find_map(|t| {
                tsa::signed_time(t, &self.signature, root)
                    .map_err(|e| why.push(e))
                    .ok()
            })
            .ok_or_else(|| summary(why))?;
        cert::chained_to_ca(&self.certificate, &root.cas, at)?;
        let leaf = Certificate::from_der(&self.certificate)
            .map_err(|e| format!("the signing certificate: {e}"))?;
        let key = CosignVerificationKey::try_from(leaf.tbs_certificate().subject_public_key_info())
            .map_err(|e| format!("the certificate's key: {e}"))?;
        (key.verify_signature(Signature::Raw(&self.signature), &self.pae))
            .map_err(|_| "the signature is not the certificate's key's over the statement")?;
        let digest = ring::digest::digest(&ring::digest::SHA256, &self.pae);
        let expected = tlog::Expected {
            digest: digest.as_ref(),
            signature: &self.signature,
            certificate: &self.certificate,
        };
        tlog::included(&self.entries, &expected, root, at)?;
        let signer = cert::signer(&self.certificate)?;
        match identities
            .iter()
            .find(|i| i.matches(&signer.issuer, &signer.subject))
        {
            Some(identity) => Ok(Verified {
                identity: identity.name.clone(),
                signer,
            }),
            None => Err(format!(
                "signed by {} (issuer {}), an identity the policy does not trust",
                signer.subject, signer.issuer
            )),
        }
    }
}

#[cfg(test)]
mod tests;
