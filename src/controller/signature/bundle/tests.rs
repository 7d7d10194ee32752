//! A key-based bundle as cosign 3.1.3 stored it (`cosign sign --key` with a signing config
//! without a transparency log, against a distribution registry), and its public key: the
//! files of `tests/data/cosign/`.

use super::*;

const BUNDLE: &str = include_str!("../../../../tests/data/cosign/key-bundle_sha256-2b67ce55.json");
const KEY: &str = include_str!("../../../../tests/data/cosign/key-bundle_cosign.pub");
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
    let forged_digest = "sha256:2222222222222222222222222222222222222222222222222222222222222222";
    let mut forged = statement();
    forged["subject"][0]["digest"]["sha256"] = forged_digest.trim_start_matches("sha256:").into();
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
