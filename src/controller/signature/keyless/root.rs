//! The Sigstore trusted root a keyless policy names (`trusted_root.json`, as `cosign trusted-root
//! create` writes it and the Sigstore TUF repository serves it), read once per lookup into what
//! the verifier uses: the certificate authorities (Fulcio), the transparency logs (Rekor) and the
//! timestamp authorities, each with the time range it is trusted for. Certificate-transparency
//! logs are read past: nothing here checks SCTs (docs/security.md says so).
//!
//! Parsed by the Sigstore project's own protobuf types (`sigstore_protobuf_specs`, protojson).

use sigstore::crypto::CosignVerificationKey;
use sigstore_protobuf_specs::dev::sigstore::common::v1::TimeRange;
use sigstore_protobuf_specs::dev::sigstore::trustroot::v1::{CertificateAuthority, TrustedRoot};

/// The media types of a trusted root this verifier reads (v0.1 is what cosign 3 writes).
const MEDIA_TYPES: [&str; 2] = [
    "application/vnd.dev.sigstore.trustedroot+json;version=0.1",
    "application/vnd.dev.sigstore.trustedroot.v0.2+json",
];

/// A trusted root, ready for verification.
pub(crate) struct TrustRoot {
    /// The certificate authorities that issue signing certificates (Fulcio).
    pub cas: Vec<Authority>,
    /// The timestamp authorities whose RFC 3161 timestamps give the signing time.
    pub tsas: Vec<Authority>,
    /// The transparency logs (Rekor).
    pub logs: Vec<Log>,
}

/// One certificate authority: its chain, leaf side first, root last.
pub(crate) struct Authority {
    /// The URI the root names it by, for messages.
    pub uri: String,
    /// DER certificates, the issuing (or, for a TSA, signing) certificate first, the root last.
    pub chain: Vec<Vec<u8>>,
    /// When it is trusted, in seconds since the epoch.
    pub valid: Validity,
}

/// One transparency log.
pub(crate) struct Log {
    /// The host of its base URL: the origin its checkpoints must name.
    pub origin: String,
    /// Its log ID (the key ID a bundle's entry names).
    pub key_id: Vec<u8>,
    /// Its public key.
    pub key: CosignVerificationKey,
    /// When its key is trusted.
    pub valid: Validity,
}

/// A time range in seconds since the epoch; either end open.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Validity {
    pub start: Option<i64>,
    pub end: Option<i64>,
}

impl Validity {
    fn of(range: Option<&TimeRange>) -> Validity {
        Validity {
            start: range.and_then(|r| r.start.as_ref()).map(|t| t.seconds),
            end: range.and_then(|r| r.end.as_ref()).map(|t| t.seconds),
        }
    }

    /// Whether `at` (seconds since the epoch) is inside.
    pub(crate) fn covers(&self, at: i64) -> bool {
        self.start.is_none_or(|s| s <= at) && self.end.is_none_or(|e| at <= e)
    }
}

impl TrustRoot {
    /// The trusted root in `json`, or why it is not one. A root with no certificate authority,
    /// no timestamp authority or no transparency log cannot verify a keyless signature and is
    /// refused whole, naming what is missing; a log whose key cannot be read is refused too,
    /// never skipped.
    pub(crate) fn parse(json: &str) -> Result<TrustRoot, String> {
        let root: TrustedRoot =
            serde_json::from_str(json).map_err(|e| format!("not a Sigstore trusted root ({e})"))?;
        if !MEDIA_TYPES.contains(&root.media_type.as_str()) {
            return Err(format!(
                "media type {:?} is none of {}",
                root.media_type,
                MEDIA_TYPES.join(", ")
            ));
        }
        let cas = authorities(&root.certificate_authorities, "certificateAuthorities")?;
        let tsas = authorities(&root.timestamp_authorities, "timestampAuthorities")?;
        let mut logs = Vec::new();
        for (i, tlog) in root.tlogs.iter().enumerate() {
            let field = format!("tlogs[{i}]");
            let key = tlog.public_key.as_ref();
            let der = key.and_then(|k| k.raw_bytes.as_deref()).unwrap_or_default();
            let verifier = CosignVerificationKey::try_from_der(der)
                .map_err(|e| format!("{field}.publicKey: not a key to verify with ({e})"))?;
            let key_id = (tlog.log_id.as_ref()).map(|l| l.key_id.clone());
            let key_id = key_id
                .filter(|k| !k.is_empty())
                .ok_or_else(|| format!("{field}.logId: missing"))?;
            let origin = origin_of(&tlog.base_url)
                .ok_or_else(|| format!("{field}.baseUrl: {:?} is not a URL", tlog.base_url))?;
            logs.push(Log {
                origin,
                key_id,
                key: verifier,
                valid: Validity::of(key.and_then(|k| k.valid_for.as_ref())),
            });
        }
        let missing = [
            (cas.is_empty(), "certificateAuthorities (Fulcio)"),
            (tsas.is_empty(), "timestampAuthorities"),
            (logs.is_empty(), "tlogs (Rekor)"),
        ];
        let missing: Vec<&str> = (missing.iter())
            .filter(|(empty, _)| *empty)
            .map(|(_, what)| *what)
            .collect();
        if !missing.is_empty() {
            return Err(format!(
                "it trusts no {}, which a keyless signature is verified with",
                missing.join(", no ")
            ));
        }
        Ok(TrustRoot { cas, tsas, logs })
    }
}

fn authorities(found: &[CertificateAuthority], field: &str) -> Result<Vec<Authority>, String> {
    let mut out = Vec::new();
    for (i, ca) in found.iter().enumerate() {
        let chain: Vec<Vec<u8>> = (ca.cert_chain.iter())
            .flat_map(|c| c.certificates.iter().map(|c| c.raw_bytes.clone()))
            .collect();
        if chain.is_empty() || chain.iter().any(Vec::is_empty) {
            return Err(format!("{field}[{i}].certChain: no certificates"));
        }
        out.push(Authority {
            uri: ca.uri.clone(),
            chain,
            valid: Validity::of(ca.valid_for.as_ref()),
        });
    }
    Ok(out)
}

/// The host of a log's base URL (`https://rekor.sigstore.dev` -> `rekor.sigstore.dev`, an IPv6
/// address without its brackets): what a Rekor v2 checkpoint names as its origin (sigstore-go
/// verifies with Go's `URL.Hostname()`, the same).
pub(crate) fn origin_of(base_url: &str) -> Option<String> {
    match url::Url::parse(base_url).ok()?.host()? {
        url::Host::Domain(domain) => Some(domain.to_string()),
        url::Host::Ipv4(v4) => Some(v4.to_string()),
        url::Host::Ipv6(v6) => Some(v6.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_origin_is_the_host_of_the_base_url() {
        assert_eq!(
            origin_of("https://log2025-1.rekor.sigstore.dev").as_deref(),
            Some("log2025-1.rekor.sigstore.dev")
        );
        assert_eq!(
            origin_of("http://127.0.0.1:3000").as_deref(),
            Some("127.0.0.1")
        );
        assert_eq!(origin_of("http://[::1]:3000/x").as_deref(), Some("::1"));
        assert_eq!(origin_of("rekor.example"), None);
        assert_eq!(origin_of("http://"), None);
    }

    #[test]
    fn a_range_covers_what_lies_between_its_ends() {
        let open = Validity::default();
        assert!(open.covers(0));
        let from = Validity {
            start: Some(10),
            end: Some(20),
        };
        assert!(from.covers(10) && from.covers(20));
        assert!(!from.covers(9) && !from.covers(21));
    }

    #[test]
    fn a_root_missing_an_authority_or_a_log_is_refused_naming_it() {
        let bare = r#"{"mediaType": "application/vnd.dev.sigstore.trustedroot+json;version=0.1"}"#;
        let Err(why) = TrustRoot::parse(bare) else {
            panic!("an empty root was taken")
        };
        assert!(
            why.contains("certificateAuthorities") && why.contains("timestampAuthorities"),
            "{why}"
        );
        let other = r#"{"mediaType": "application/json"}"#;
        let refused = |json: &str| TrustRoot::parse(json).err().unwrap_or_default();
        assert!(refused(other).contains("media type"));
        assert!(refused("[]").contains("not a Sigstore trusted root"));
    }
}
