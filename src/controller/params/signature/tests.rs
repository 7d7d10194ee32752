use super::*;
use crate::controller::crd::SignatureKey;

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
            .contains("signature.keys: name at least one")
    );
}

#[test]
fn the_crd_s_bounds_hold_for_an_inline_spec_too() {
    let many = Signature {
        keys: (0..17).map(|i| key(&format!("k{i}"))).collect(),
        pull_secrets: vec![],
    };
    let err = many.parse("the inline spec").unwrap_err();
    assert!(
        err.contains("at most 16 keys and 8 pullSecrets (there are 17 and 0)"),
        "{err}"
    );
    let secrets = Signature {
        keys: vec![key("k")],
        pull_secrets: (0..9).map(|i| format!("s{i}")).collect(),
    };
    assert!(secrets.parse("x").is_err());
    let inline_only = Signature {
        keys: vec![key("k")],
        pull_secrets: vec![],
    };
    assert!(!inline_only.parse("x").unwrap().names_objects());
}
