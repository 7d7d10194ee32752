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
        let timestamps = (material.timestamp_verification_data.iter())
            .flat_map(|t| {
                t.rfc3161_timestamps
                    .iter()
                    .map(|t| t.signed_timestamp.clone())
            })
            .collect();
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
            .ok_or_else(|| why.join("; "))?;
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
mod tests {
    // The keyless verifier against what the real Sigstore services made (tests/data/cosign/keyless:
    // Fulcio 1.8.8, Rekor v2 (rekor-tiles 2.3.0), timestamp-authority 2.1.3 and cosign 3.1.3), long
    // after the certificates expired: the timestamp's time is the one that counts. Each attack is a
    // real bundle or root with one thing changed.

    use base64::Engine as _;
    use serde_json::{Value, json};

    use super::*;
    use crate::controller::params::signature::SubjectRule;

    const ROOT: &str = include_str!("../../../tests/data/cosign/keyless/trusted_root.json");
    const ALICE: &str = include_str!("../../../tests/data/cosign/keyless/bundle-alice.json");
    const BOB: &str = include_str!("../../../tests/data/cosign/keyless/bundle-bob.json");
    const OTHER: &str = include_str!("../../../tests/data/cosign/keyless/bundle-other-digest.json");
    const DIGEST: &str = include_str!("../../../tests/data/cosign/keyless/digest.txt");
    const OTHER_DIGEST: &str = include_str!("../../../tests/data/cosign/keyless/other-digest.txt");
    const ISSUER: &str = include_str!("../../../tests/data/cosign/keyless/issuer.txt");

    fn exact(name: &str, subject: &str) -> TrustedIdentity {
        TrustedIdentity {
            name: name.into(),
            issuer: ISSUER.into(),
            subject: SubjectRule::Exact(subject.into()),
        }
    }

    fn root() -> TrustRoot {
        TrustRoot::parse(ROOT).unwrap()
    }

    fn bundle(json: &str) -> KeylessBundle {
        KeylessBundle::parse(json.as_bytes(), DIGEST).unwrap()
    }

    /// `json` with `edit` applied to its parsed form.
    fn edited(json: &str, edit: impl FnOnce(&mut Value)) -> String {
        let mut value: Value = serde_json::from_str(json).unwrap();
        edit(&mut value);
        value.to_string()
    }

    fn refused(bundle: &KeylessBundle, root: &TrustRoot) -> String {
        let identities = [
            exact("alice", "alice@example.com"),
            exact("bob", "bob@example.com"),
        ];
        match bundle.verify(root, &identities) {
            Ok(v) => panic!("verified: {v:?}"),
            Err(why) => why,
        }
    }

    #[test]
    fn a_real_keyless_signature_verifies_long_after_its_certificate_expired() {
        let identities = [exact("release", "alice@example.com")];
        let verified = bundle(ALICE).verify(&root(), &identities).unwrap();
        assert_eq!(verified.identity, "release");
        assert_eq!(verified.signer.subject, "alice@example.com");
        assert_eq!(verified.signer.issuer, ISSUER);
        // Bob's entry is the log's second: its inclusion proof has a hash to check.
        let identities = [exact("bob", "bob@example.com")];
        assert_eq!(
            bundle(BOB).verify(&root(), &identities).unwrap().identity,
            "bob"
        );
        // A pattern over the whole subject.
        let pattern = TrustedIdentity {
            name: "team".into(),
            issuer: ISSUER.into(),
            subject: SubjectRule::Pattern(r"[a-z]+@example\.com".into()),
        };
        assert_eq!(
            bundle(ALICE).verify(&root(), &[pattern]).unwrap().identity,
            "team"
        );
    }

    #[test]
    fn another_identity_or_issuer_is_refused_naming_the_signer() {
        let why = bundle(BOB)
            .verify(&root(), &[exact("alice", "alice@example.com")])
            .unwrap_err();
        assert_eq!(
            why,
            format!(
                "signed by bob@example.com (issuer {ISSUER}), an identity the policy does not trust"
            )
        );
        let other_issuer = TrustedIdentity {
            issuer: "https://accounts.google.com".into(),
            ..exact("alice", "alice@example.com")
        };
        assert!(bundle(ALICE).verify(&root(), &[other_issuer]).is_err());
    }

    #[test]
    fn a_signature_over_another_digest_is_not_read_as_one_over_the_candidate() {
        let why = KeylessBundle::parse(OTHER.as_bytes(), DIGEST).unwrap_err();
        assert_eq!(why, format!("the statement does not name {DIGEST}"));
        assert!(KeylessBundle::parse(OTHER.as_bytes(), OTHER_DIGEST).is_ok());
        // A key-based bundle is not a keyless one.
        let key_bundle = include_str!("../../../tests/data/cosign/key-bundle_sha256-2b67ce55.json");
        let why = KeylessBundle::parse(key_bundle.as_bytes(), DIGEST).unwrap_err();
        assert_eq!(why, "the bundle carries no certificate");
    }

    #[test]
    fn a_root_from_another_sigstore_is_refused() {
        // The certificate authority replaced by the timestamp authority's chain: same shape, other keys.
        let root = edited(ROOT, |r| {
            r["certificateAuthorities"][0]["certChain"] =
                r["timestampAuthorities"][0]["certChain"].clone();
        });
        let why = refused(&bundle(ALICE), &TrustRoot::parse(&root).unwrap());
        assert!(
            why.starts_with("the signing certificate not issued by"),
            "{why}"
        );
        // The log's key replaced by another (the Fulcio root's key is no log's).
        let root = edited(ROOT, |r| {
            let other = r["tlogs"][0]["publicKey"]["rawBytes"]
                .as_str()
                .unwrap()
                .replace('A', "B");
            r["tlogs"][0]["publicKey"]["rawBytes"] = json!(other);
        });
        match TrustRoot::parse(&root) {
            Ok(root) => {
                let why = refused(&bundle(ALICE), &root);
                assert!(why.contains("not included in log 127.0.0.1"), "{why}");
            }
            Err(why) => assert!(why.contains("tlogs[0].publicKey"), "{why}"),
        }
        // The log named by another log ID: the entry is from a log the root does not name.
        let root = edited(ROOT, |r| {
            r["tlogs"][0]["logId"]["keyId"] = json!("AAAAAAAA")
        });
        let why = refused(&bundle(ALICE), &TrustRoot::parse(&root).unwrap());
        assert_eq!(
            why,
            "log entry 0: from a log the trusted root does not name"
        );
        // The log under another origin: its checkpoint names 127.0.0.1.
        let root = edited(ROOT, |r| {
            r["tlogs"][0]["baseUrl"] = json!("http://rekor.example")
        });
        let why = refused(&bundle(ALICE), &TrustRoot::parse(&root).unwrap());
        assert!(
            why.contains("the checkpoint is of \"127.0.0.1\", not of log rekor.example"),
            "{why}"
        );
    }

    #[test]
    fn authorities_are_trusted_only_inside_their_validity() {
        let ended = |field: &str| {
            edited(ROOT, |r| {
                r[field][0]["validFor"] =
                    json!({"start": "2020-01-01T00:00:00Z", "end": "2021-01-01T00:00:00Z"});
            })
        };
        let why = refused(
            &bundle(ALICE),
            &TrustRoot::parse(&ended("certificateAuthorities")).unwrap(),
        );
        assert!(why.contains("is not trusted at 20"), "{why}");
        let why = refused(
            &bundle(ALICE),
            &TrustRoot::parse(&ended("timestampAuthorities")).unwrap(),
        );
        assert!(
            why.starts_with("the timestamp is") && why.contains("not trusted at"),
            "{why}"
        );
    }

    #[test]
    fn a_root_without_a_timestamp_authority_or_a_log_is_refused_whole() {
        for (field, named) in [
            ("timestampAuthorities", "timestampAuthorities"),
            ("tlogs", "tlogs (Rekor)"),
            ("certificateAuthorities", "certificateAuthorities (Fulcio)"),
        ] {
            let root = edited(ROOT, |r| r[field] = json!([]));
            let Err(why) = TrustRoot::parse(&root) else {
                panic!("a root without {field} was taken")
            };
            assert!(why.contains(named), "{why}");
        }
    }

    #[test]
    fn a_bundle_with_one_part_from_another_signature_is_refused() {
        let bob: Value = serde_json::from_str(BOB).unwrap();
        let from_bob = |path: &[&str]| {
            let mut part = &bob;
            for p in path {
                part = &part[*p];
            }
            part.clone()
        };
        let set = |path: &[&str], value: Value| {
            edited(ALICE, |b| {
                let mut part = b;
                for p in path {
                    part = &mut part[*p];
                }
                *part = value;
            })
        };
        let vm = "verificationMaterial";
        let cases = [
            // Bob's timestamp is over bob's signature.
            (
                set(
                    &[vm, "timestampVerificationData"],
                    from_bob(&[vm, "timestampVerificationData"]),
                ),
                "the timestamp is over another signature",
            ),
            // Bob's log entry names bob's signature and certificate.
            (
                set(&[vm, "tlogEntries"], from_bob(&[vm, "tlogEntries"])),
                "log entry 0: the entry's body names another signature",
            ),
            // Bob's body in alice's entry: cosign rebuilds the body and takes this; the body is what
            // the proof is for, so it must be this signature's.
            (
                edited(ALICE, |b| {
                    b[vm]["tlogEntries"][0]["canonicalizedBody"] =
                        bob[vm]["tlogEntries"][0]["canonicalizedBody"].clone();
                }),
                "log entry 0: the entry's body names another signature",
            ),
            // The proof's root is not the checkpoint's (cosign reads only the checkpoint's).
            (
                edited(ALICE, |b| {
                    b[vm]["tlogEntries"][0]["inclusionProof"]["rootHash"] =
                        json!(base64::engine::general_purpose::STANDARD.encode([7u8; 32]));
                }),
                "not included in log 127.0.0.1",
            ),
            // The proof is for another index than the entry's.
            (
                edited(ALICE, |b| {
                    b[vm]["tlogEntries"][0]["inclusionProof"]["logIndex"] = json!("1")
                }),
                "the proof is for index 1, the entry is at 0",
            ),
            (
                set(&[vm, "tlogEntries"], json!([])),
                "the bundle has no transparency-log entry",
            ),
            (
                set(&[vm, "timestampVerificationData"], json!({})),
                "the bundle carries no signed timestamp (Rekor v2 gives no time)",
            ),
        ];
        for (json, want) in cases {
            let why = refused(&bundle(&json), &root());
            assert!(why.contains(want), "{want:?} not in {why:?}");
        }
        // Bob's certificate with alice's signature: bob's was issued after alice's timestamp (so
        // it was not valid then), and its key did not make alice's signature either.
        let swapped = set(&[vm, "certificate"], from_bob(&[vm, "certificate"]));
        let why = refused(&bundle(&swapped), &root());
        assert!(
            why.contains("CertNotValidYet")
                || why == "the signature is not the certificate's key's over the statement",
            "{why}"
        );
    }

    #[test]
    fn a_changed_signature_or_statement_proves_nothing() {
        // The statement with a byte changed in its predicate: the signature is not over it.
        let changed = edited(ALICE, |b| {
            let b64 = base64::engine::general_purpose::STANDARD;
            let payload = b64
                .decode(b["dsseEnvelope"]["payload"].as_str().unwrap())
                .unwrap();
            let text = String::from_utf8(payload)
                .unwrap()
                .replace("\"predicate\":{}", "\"predicate\":{\"x\":1}");
            b["dsseEnvelope"]["payload"] = json!(b64.encode(text));
        });
        let why = refused(&bundle(&changed), &root());
        assert_eq!(
            why,
            "the signature is not the certificate's key's over the statement"
        );
        // Two signatures in the envelope: not cosign's.
        let two = edited(ALICE, |b| {
            let sig = b["dsseEnvelope"]["signatures"][0].clone();
            b["dsseEnvelope"]["signatures"] = json!([sig.clone(), sig]);
        });
        assert!(
            KeylessBundle::parse(two.as_bytes(), DIGEST)
                .unwrap_err()
                .contains("exactly one signature")
        );
    }
}
