//! The keyless verifier against what the real Sigstore services made (tests/data/cosign/keyless:
//! Fulcio 1.8.8, Rekor v2 (rekor-tiles 2.3.0), timestamp-authority 2.1.3 and cosign 3.1.3), long
//! after the certificates expired: the timestamp's time is the one that counts. Each attack is a
//! real bundle or root with one thing changed.

use base64::Engine as _;
use serde_json::{Value, json};

use super::*;
use crate::controller::params::signature::SubjectRule;

const ROOT: &str = include_str!("../../../../tests/data/cosign/keyless/trusted_root.json");
const ALICE: &str = include_str!("../../../../tests/data/cosign/keyless/bundle-alice.json");
const BOB: &str = include_str!("../../../../tests/data/cosign/keyless/bundle-bob.json");
const OTHER: &str = include_str!("../../../../tests/data/cosign/keyless/bundle-other-digest.json");
const DIGEST: &str = include_str!("../../../../tests/data/cosign/keyless/digest.txt");
const OTHER_DIGEST: &str = include_str!("../../../../tests/data/cosign/keyless/other-digest.txt");
const ISSUER: &str = include_str!("../../../../tests/data/cosign/keyless/issuer.txt");

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
    let key_bundle = include_str!("../../../../tests/data/cosign/key-bundle_sha256-2b67ce55.json");
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
            "the proof is to another tree than the checkpoint's",
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

/// Every Rekor v2 log signs a checkpoint of its empty tree when it starts. `sigstore` links a
/// proof to its checkpoint by a consistency proof from the checkpoint's size, which from 0
/// holds for any tree: with that checkpoint, an entry never logged would prove included. Here
/// the log's key is the test's, so that it can sign the empty checkpoint as the log did.
#[test]
fn an_entry_is_not_proven_by_the_log_s_empty_checkpoint() {
    use sigstore::crypto::SigningScheme;
    let b64 = base64::engine::general_purpose::STANDARD;
    let log = SigningScheme::ECDSA_P256_SHA256_ASN1
        .create_signer()
        .unwrap();
    let spki = log
        .to_sigstore_keypair()
        .unwrap()
        .public_key_to_der()
        .unwrap();
    let key_id = ring::digest::digest(&ring::digest::SHA256, &spki)
        .as_ref()
        .to_vec();
    let root = edited(ROOT, |r| {
        r["tlogs"][0]["publicKey"]["rawBytes"] = json!(b64.encode(&spki));
        r["tlogs"][0]["logId"]["keyId"] = json!(b64.encode(&key_id));
    });
    let root = TrustRoot::parse(&root).unwrap();
    let checkpoint = |size: u64, hash: &[u8]| {
        let note = format!("127.0.0.1\n{size}\n{}\n", b64.encode(hash));
        let mut signed = key_id[..4].to_vec();
        signed.extend(log.sign(note.as_bytes()).unwrap());
        format!("{note}\n\u{2014} 127.0.0.1 {}\n", b64.encode(signed))
    };
    let empty = ring::digest::digest(&ring::digest::SHA256, b"");
    let forged = |envelope: String| {
        edited(ALICE, |b| {
            let entry = &mut b["verificationMaterial"]["tlogEntries"][0];
            let body = b64
                .decode(entry["canonicalizedBody"].as_str().unwrap())
                .unwrap();
            let leaf = ring::digest::digest(&ring::digest::SHA256, &[&[0u8][..], &body].concat());
            entry["logId"]["keyId"] = json!(b64.encode(&key_id));
            entry["inclusionProof"] = json!({"logIndex": "0", "treeSize": "1",
                "rootHash": b64.encode(leaf.as_ref()), "checkpoint": {"envelope": envelope}});
        })
    };
    let why = refused(&bundle(&forged(checkpoint(0, empty.as_ref()))), &root);
    assert_eq!(why, "log entry 0: the checkpoint is of an empty tree");
    // A checkpoint of another tree than the proof's is refused the same way.
    let why = refused(&bundle(&forged(checkpoint(2, &[9u8; 32]))), &root);
    assert_eq!(
        why,
        "log entry 0: the proof is to another tree than the checkpoint's (size 2)"
    );
    // The same forgery with the checkpoint of the one-leaf tree the proof is to: the log
    // signed it, so the entry is included (the checks above refuse the forgery, nothing else).
    let leaf_tree = |b: &str| {
        let v: Value = serde_json::from_str(b).unwrap();
        let root_hash =
            v["verificationMaterial"]["tlogEntries"][0]["inclusionProof"]["rootHash"].clone();
        b64.decode(root_hash.as_str().unwrap()).unwrap()
    };
    let honest = forged(String::new());
    let honest = forged(checkpoint(1, &leaf_tree(&honest)));
    let identities = [exact("alice", "alice@example.com")];
    assert!(bundle(&honest).verify(&root, &identities).is_ok());
}

#[test]
fn a_bundle_is_not_a_way_to_make_the_controller_check_thousands_of_signatures() {
    let many = edited(ALICE, |b| {
        let one =
            b["verificationMaterial"]["timestampVerificationData"]["rfc3161Timestamps"][0].clone();
        b["verificationMaterial"]["timestampVerificationData"]["rfc3161Timestamps"] =
            json!(vec![one; 33]);
    });
    let why = KeylessBundle::parse(many.as_bytes(), DIGEST).unwrap_err();
    assert_eq!(why, "33 timestamps and 1 log entries: at most 32 of each");
    // 32 timestamps that are not timestamps: a message of three reasons, not thirty-two.
    let junk = edited(ALICE, |b| {
        b["verificationMaterial"]["timestampVerificationData"]["rfc3161Timestamps"] =
            json!(vec![json!({}); 32]);
    });
    let why = refused(&bundle(&junk), &root());
    assert!(why.ends_with("; and 29 more"), "{why}");
    assert!(why.len() < 4 * 300, "{} characters", why.len());
    let long = summary(vec!["x".repeat(1000)]);
    assert_eq!(long.chars().count(), 303);
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
