use super::*;
use crate::controller::crd::{KeylessIdentity, SignatureKey, TrustedRootRef};

/// A P-256 public key, made by `cosign generate-key-pair` for these tests.
pub const PEM: &str = "-----BEGIN PUBLIC KEY-----
MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEs6KMWj33XQN1XirOUl/w1UVQjCbu
NOIrkuoE2weCZSv5W9PzEhK4gp5t3i2zDIv8itaZPiseKVdiC9exT8cB9Q==
-----END PUBLIC KEY-----
";

fn key(name: &str) -> SignatureKey {
    SignatureKey {
        name: name.to_string(),
        public_key: Some(PEM.to_string()),
        ..SignatureKey::default()
    }
}

#[test]
fn keys_from_each_source_are_taken_in_order() {
    let spec = Signature {
        keyless: None,
        keys: vec![
            key("inline"),
            SignatureKey {
                name: "from-configmap".into(),
                config_map_key_ref: Some(KeyRef {
                    name: "publisher-keys".into(),
                    key: "cosign.pub".into(),
                }),
                ..SignatureKey::default()
            },
        ],
        pull_secrets: vec!["quay-pull".into()],
    };
    let parsed = spec.parse("ImagePromotion \"nb\"").unwrap();
    assert_eq!(parsed.by, "ImagePromotion \"nb\"");
    let names: Vec<&str> = parsed.keys.iter().map(|k| k.name.as_str()).collect();
    assert_eq!(names, ["inline", "from-configmap"]);
    assert!(matches!(parsed.keys[0].source, KeySource::Inline(_)));
    assert!(
        matches!(&parsed.keys[1].source, KeySource::ConfigMap(r) if r.name == "publisher-keys")
    );
    assert!(parsed.names_objects());
    assert_eq!(parsed.pull_secrets, ["quay-pull"]);
}

#[test]
fn every_problem_is_named_by_its_field_and_no_key_is_quoted() {
    let garbage = "-----BEGIN PUBLIC KEY-----\nbm90IGEga2V5\n-----END PUBLIC KEY-----\n";
    let spec = Signature {
        keyless: None,
        keys: vec![
            key("dup"),
            key("dup"),
            SignatureKey {
                name: "two-sources".into(),
                public_key: Some(PEM.into()),
                config_map_key_ref: Some(KeyRef {
                    name: "k".into(),
                    key: "k".into(),
                }),
            },
            SignatureKey {
                name: "none".into(),
                ..SignatureKey::default()
            },
            SignatureKey {
                name: "garbage".into(),
                public_key: Some(garbage.into()),
                ..SignatureKey::default()
            },
            SignatureKey {
                name: "bad-ref".into(),
                config_map_key_ref: Some(KeyRef {
                    name: "Not_A_Name".into(),
                    key: "cosign.pub".into(),
                }),
                ..SignatureKey::default()
            },
        ],
        pull_secrets: vec!["../etc".into()],
    };
    let err = spec.parse("x").unwrap_err();
    for want in [
        "signature.keys[1].name: \"dup\" is named twice",
        "signature.keys[2]: set exactly one of publicKey, configMapKeyRef",
        "signature.keys[3]: set exactly one of",
        "signature.keys[4].publicKey: not a PEM public key",
        "signature.keys[5]: \"Not_A_Name\" is not an object name",
        "signature.pullSecrets[0]: \"../etc\" is not a Secret name",
    ] {
        assert!(err.contains(want), "{want:?} not in {err}");
    }
    assert!(!err.contains("bm90IGEga2V5"), "the key is quoted: {err}");
    assert!(
        Signature::default()
            .parse("x")
            .unwrap_err()
            .contains("signature: name at least one public key (keys) or keyless identity")
    );
}

#[test]
fn the_crd_s_bounds_hold_for_an_inline_spec_too() {
    let many = Signature {
        keyless: None,
        keys: (0..17).map(|i| key(&format!("k{i}"))).collect(),
        pull_secrets: vec![],
    };
    let err = many.parse("the inline spec").unwrap_err();
    assert!(
        err.contains("at most 16 keys and 8 pullSecrets (there are 17 and 0)"),
        "{err}"
    );
    let secrets = Signature {
        keyless: None,
        keys: vec![key("k")],
        pull_secrets: (0..9).map(|i| format!("s{i}")).collect(),
    };
    assert!(secrets.parse("x").is_err());
    let inline_only = Signature {
        keyless: None,
        keys: vec![key("k")],
        pull_secrets: vec![],
    };
    assert!(!inline_only.parse("x").unwrap().names_objects());
}

fn identity(name: &str, subject: Option<&str>, pattern: Option<&str>) -> KeylessIdentity {
    KeylessIdentity {
        name: name.into(),
        issuer: "https://issuer.example".into(),
        subject: subject.map(str::to_string),
        subject_reg_exp: pattern.map(str::to_string),
    }
}

fn keyless(identities: Vec<KeylessIdentity>) -> Signature {
    Signature {
        keys: vec![],
        keyless: Some(Keyless {
            trusted_root: TrustedRootRef {
                config_map_key_ref: KeyRef {
                    name: "sigstore-root".into(),
                    key: "trusted_root.json".into(),
                },
            },
            identities,
        }),
        pull_secrets: vec![],
    }
}

#[test]
fn a_keyless_policy_alone_is_a_policy_and_names_an_object() {
    let spec = keyless(vec![
        identity("release", Some("release@example.com"), None),
        identity("ci", None, Some(r"https://ci\.example/org/.+")),
    ]);
    let parsed = spec.parse("ImagePromotion \"nb\"").unwrap();
    assert!(parsed.keys.is_empty());
    let rules = parsed.keyless.as_ref().unwrap();
    assert_eq!(rules.trusted_root.name, "sigstore-root");
    assert_eq!(
        rules.identities[1].subject,
        SubjectRule::Pattern(r"https://ci\.example/org/.+".into())
    );
    // The trusted root is a ConfigMap: a CustomRun's inline spec may not name one.
    assert!(parsed.names_objects());
}

#[test]
fn an_identity_matches_its_issuer_exactly_and_its_whole_subject() {
    let spec = keyless(vec![
        identity("release", Some("release@example.com"), None),
        identity("team", None, Some(r".*@example\.com")),
    ]);
    let parsed = spec.parse("x").unwrap();
    let [exact, pattern] = parsed.keyless.unwrap().identities.try_into().unwrap();
    let issuer = "https://issuer.example";
    assert!(exact.matches(issuer, "release@example.com"));
    assert!(!exact.matches(issuer, "Release@example.com"));
    assert!(!exact.matches("https://issuer.example/", "release@example.com"));
    assert!(!exact.matches("https://evil.example", "release@example.com"));
    assert!(pattern.matches(issuer, "anyone@example.com"));
    // A pattern that would close the anchoring group itself is refused, not wrapped.
    let escape = keyless(vec![identity("escape", None, Some(r"a@x\.com)|(.*"))]);
    let err = escape.parse("x").unwrap_err();
    assert!(
        err.contains("subjectRegExp: not a regular expression"),
        "{err}"
    );
    // Anchored at both ends: cosign's unanchored match would take these.
    assert!(!pattern.matches(issuer, "x@example.com.evil.example"));
    assert!(!pattern.matches(issuer, "x@example-com"));
    assert!(!pattern.matches("https://evil.example", "anyone@example.com"));
}

#[test]
fn every_keyless_problem_is_named_by_its_field() {
    let mut spec = keyless(vec![
        identity("dup", Some("a@example.com"), None),
        identity("dup", Some("b@example.com"), None),
        identity("both", Some("a@example.com"), Some(".*")),
        identity("neither", None, None),
        identity("bad-pattern", None, Some("(unclosed")),
        KeylessIdentity {
            issuer: " ".into(),
            ..identity("no-issuer", Some("a@example.com"), None)
        },
    ]);
    spec.keys = vec![key("k")];
    spec.keyless
        .as_mut()
        .unwrap()
        .identities
        .push(identity("k", Some("c@example.com"), None));
    spec.keyless
        .as_mut()
        .unwrap()
        .trusted_root
        .config_map_key_ref
        .name = "Bad_Name".into();
    let err = spec.parse("x").unwrap_err();
    for want in [
        "signature.keyless.trustedRoot.configMapKeyRef: \"Bad_Name\" is not an object name",
        "signature.keyless.identities[1].name: \"dup\" is named twice",
        "signature.keyless.identities[2]: set exactly one of subject, subjectRegExp",
        "signature.keyless.identities[3]: set exactly one of subject, subjectRegExp",
        "signature.keyless.identities[4].subjectRegExp: not a regular expression",
        "signature.keyless.identities[5].issuer: name the OIDC issuer",
        "signature.keyless.identities[6].name: \"k\" is named twice",
    ] {
        assert!(err.contains(want), "{want:?} not in {err}");
    }
    let none = keyless(vec![]);
    assert!(
        none.parse("x")
            .unwrap_err()
            .contains("name 1 to 16 identities (there are 0)")
    );
}
