use super::*;

fn basic(auth: Option<Auth>) -> Option<(String, String)> {
    match auth? {
        Auth::Basic(user, password) => Some((user, password)),
        _ => None,
    }
}

#[test]
fn the_entry_for_the_registry_host_is_used_in_either_form() {
    let config = serde_json::json!({"auths": {
        "https://quay.io/v1/": {"auth": "cXVheTpwYXNz"},
        "registry.example:5000": {"username": "u", "password": "p"},
        "docker.io": {"auth": "aHViOmh1YnBhc3M="}
    }});
    let bytes = serde_json::to_vec(&config).unwrap();
    assert_eq!(
        basic(registry_auth(&bytes, "quay.io")),
        Some(("quay".into(), "pass".into()))
    );
    assert_eq!(
        basic(registry_auth(&bytes, "registry.example:5000")),
        Some(("u".into(), "p".into()))
    );
    assert_eq!(
        basic(registry_auth(&bytes, "docker.io")),
        Some(("hub".into(), "hubpass".into()))
    );
    // Another host's credentials are never sent.
    assert!(registry_auth(&bytes, "registry.example").is_none());
    assert!(registry_auth(&bytes, "evil.example").is_none());
    // The legacy .dockercfg holds the entries alone.
    let legacy = serde_json::to_vec(&config["auths"]).unwrap();
    assert_eq!(
        basic(registry_auth(&legacy, "quay.io")),
        Some(("quay".into(), "pass".into()))
    );
    assert!(registry_auth(b"not json", "quay.io").is_none());
}

#[test]
fn the_lookup_is_by_the_run_digest_whatever_the_pull_spec_carries() {
    let candidate = Candidate {
        reference: "quay.io/org/app@sha256:1111111111111111111111111111111111111111111111111111111111111111",
        digest: "sha256:2222222222222222222222222222222222222222222222222222222222222222",
        insecure: false,
    };
    let image = by_digest(&candidate).unwrap();
    assert_eq!(
        image.whole(),
        "quay.io/org/app@sha256:2222222222222222222222222222222222222222222222222222222222222222"
    );
    let bad = Candidate {
        reference: "",
        ..candidate
    };
    assert!(by_digest(&bad).is_err());
}
