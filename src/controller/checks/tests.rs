//! Tests of the checks: facts read from real image fixtures, and each check's pass, fail and
//! missing-metadata outcomes.

use super::*;
use serde_json::{Value, json};

fn at(text: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(text).unwrap().to_utc()
}

fn fixture(name: &str) -> Image {
    let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    let file: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    serde_json::from_value(file["object"].clone()).unwrap()
}

fn python_facts() -> ImageFacts {
    let image = fixture("community-okd_python_image.json");
    let reference = image.docker_image_reference.clone().unwrap();
    ImageFacts::from_image(&reference, &image)
}

fn pelorus_facts() -> ImageFacts {
    let image = fixture("pelorus_internal-registry_oci_image_TRANSCRIBED.json");
    let reference = image.docker_image_reference.clone().unwrap();
    ImageFacts::from_image(&reference, &image)
}

fn facts() -> ImageFacts {
    ImageFacts {
        reference: "quay.io/org/app@sha256:1111".into(),
        labels: BTreeMap::from([
            ("vcs-ref".to_string(), "abc123".to_string()),
            ("empty".to_string(), String::new()),
        ]),
        architecture: Some("amd64".into()),
        os: Some("linux".into()),
        created: Some(at("2026-10-01T00:00:00Z")),
        size_bytes: Some(300 << 20),
        user: Some("1001".into()),
        platforms: Vec::new(),
    }
}

fn limit<T>(value: T, text: &str) -> Limit<T> {
    Limit {
        value,
        text: text.into(),
    }
}

fn label(key: &str, value: Option<&str>) -> LabelRequirement {
    LabelRequirement {
        key: key.into(),
        value: value.map(str::to_string),
    }
}

fn only(checks: ParsedChecks, facts: &ImageFacts) -> CheckOutcome {
    let mut outcomes = evaluate(&checks, facts, at("2026-12-01T00:00:00Z"));
    assert_eq!(outcomes.len(), 1, "{outcomes:?}");
    outcomes.remove(0)
}

#[test]
fn facts_from_the_docker_hub_python_image_have_no_user_and_no_labels() {
    let facts = python_facts();
    assert_eq!(
        facts,
        ImageFacts {
            reference:
                "python@sha256:a874dcabc74ca202b92b826521ff79dede61caca00ceab0b65024e895baceb58"
                    .into(),
            labels: BTreeMap::new(),
            architecture: Some("amd64".into()),
            os: None,
            created: Some(at("2021-12-03T01:53:41Z")),
            size_bytes: Some(347_487_141),
            user: None,
            platforms: Vec::new(),
        }
    );
}

#[test]
fn an_image_index_the_real_image_api_imported_names_each_platform_and_has_no_config() {
    let path = format!(
        "{}/tests/fixtures/real-openshift_ml_isimage-index.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let file: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let image: Image = serde_json::from_value(file["object"]["image"].clone()).unwrap();
    let facts = ImageFacts::from_image("127.0.0.1:5000/ml@sha256:8a8c", &image);
    assert_eq!(
        facts.platforms,
        vec![
            (
                "linux/amd64".to_string(),
                "sha256:e64d140c1525b1aa24b1c9971415dd1856d5c5aa272712f7c02f31181fee3c0c"
                    .to_string()
            ),
            (
                "linux/arm64".to_string(),
                "sha256:84b49d25e5d3cc3e4fd029ee89008df4659ab815eacf719a2654274b5743bc5d"
                    .to_string()
            ),
        ]
    );
    assert_eq!(
        (facts.architecture, facts.user, facts.size_bytes),
        (None, None, None)
    );
}

#[test]
fn facts_from_the_internal_registry_s2i_image_have_user_1001_and_labels() {
    let facts = pelorus_facts();
    assert!(facts.reference.starts_with(
        "image-registry.openshift-image-registry.svc:5000/basic-python-tekton/basic-python-tekton@sha256:"
    ));
    assert_eq!(facts.user.as_deref(), Some("1001"));
    assert_eq!(facts.architecture.as_deref(), Some("amd64"));
    assert_eq!(facts.created, Some(at("2022-08-23T15:46:59Z")));
    assert_eq!(facts.size_bytes, Some(316_923_595));
    assert_eq!(
        facts.labels.get("vcs-ref").map(String::as_str),
        Some("a42d712a71400035853b25d40f54b5bc3ebf84ec")
    );
}

#[test]
fn an_image_without_metadata_has_no_facts_but_its_reference() {
    let facts = ImageFacts::from_image("quay.io/org/app@sha256:1", &Image::default());
    assert_eq!(
        facts,
        ImageFacts {
            reference: "quay.io/org/app@sha256:1".into(),
            ..ImageFacts::default()
        }
    );
}

#[test]
fn the_real_images_meet_the_checks_a_platform_team_would_set() {
    let checks = ParsedChecks {
        required_labels: vec![
            label("vcs-ref", None),
            label("vendor", Some("Red Hat, Inc.")),
        ],
        allowed_registries: vec!["image-registry.openshift-image-registry.svc:5000".into()],
        allowed_architectures: vec!["amd64".into(), "arm64".into()],
        max_age: Some(limit(Duration::from_secs(720 * 3600), "720h")),
        max_size: Some(limit(1 << 30, "1Gi")),
        non_root_user: true,
        ..ParsedChecks::default()
    };
    let now = at("2022-09-01T00:00:00Z");
    let outcomes = evaluate(&checks, &pelorus_facts(), now);
    assert!(all_passed(&outcomes), "{outcomes:#?}");
    assert_eq!(
        outcomes.iter().map(|o| o.name).collect::<Vec<_>>(),
        [
            REQUIRED_LABELS,
            ALLOWED_REGISTRIES,
            ALLOWED_ARCHITECTURES,
            MAX_AGE,
            MAX_SIZE,
            NON_ROOT_USER
        ]
    );

    let outcomes = evaluate(&checks, &python_facts(), now);
    let failed: Vec<(&str, &str)> = outcomes
        .iter()
        .filter(|o| !o.passed)
        .map(|o| (o.name, o.message.as_str()))
        .collect();
    assert_eq!(
        failed,
        [
            (
                REQUIRED_LABELS,
                "label \"vcs-ref\" is missing; label \"vendor\" is missing (the image has no labels)"
            ),
            (
                ALLOWED_REGISTRIES,
                "docker.io/library/python@sha256:a874dcabc74ca202b92b826521ff79dede61caca00ceab0b65024e895baceb58 \
                 is not under any of image-registry.openshift-image-registry.svc:5000"
            ),
            (
                MAX_AGE,
                "created 2021-12-03T01:53:41Z, 271 days ago; allowed at most 720h"
            ),
            (NON_ROOT_USER, "the image sets no user, so it runs as root"),
        ]
    );
    assert!(!all_passed(&outcomes));
}

#[test]
fn all_checks_run_in_the_fixed_order_and_unconfigured_ones_produce_nothing() {
    let all = ParsedChecks {
        required_labels: vec![label("vcs-ref", None)],
        allowed_registries: vec!["quay.io/org".into()],
        allowed_architectures: vec!["amd64".into()],
        allowed_os: vec!["linux".into()],
        max_age: Some(limit(Duration::from_secs(720 * 3600), "720h")),
        max_size: Some(limit(1 << 30, "1Gi")),
        non_root_user: true,
    };
    let names: Vec<&str> = evaluate(&all, &facts(), at("2026-10-02T00:00:00Z"))
        .iter()
        .map(|o| o.name)
        .collect();
    assert_eq!(
        names,
        [
            REQUIRED_LABELS,
            ALLOWED_REGISTRIES,
            ALLOWED_ARCHITECTURES,
            ALLOWED_OS,
            MAX_AGE,
            MAX_SIZE,
            NON_ROOT_USER
        ]
    );
    let none = evaluate(&ParsedChecks::default(), &facts(), Utc::now());
    assert!(none.is_empty());
    assert!(all_passed(&none));
}

#[test]
fn an_outcome_serializes_as_the_checks_result_expects() {
    let checks = ParsedChecks {
        max_age: Some(limit(Duration::from_secs(720 * 3600), "720h")),
        ..ParsedChecks::default()
    };
    let outcome = only(checks, &facts());
    assert_eq!(
        serde_json::to_value(&outcome).unwrap(),
        json!({
            "name": "maxAge",
            "passed": false,
            "message": "created 2026-10-01T00:00:00Z, 61 days ago; allowed at most 720h"
        })
    );
}

#[test]
fn required_labels_need_presence_or_an_exact_value() {
    let table: &[(LabelRequirement, bool, &str)] = &[
        (label("vcs-ref", None), true, "labels present: vcs-ref"),
        (
            label("vcs-ref", Some("abc123")),
            true,
            "labels present: vcs-ref",
        ),
        (
            label("vcs-ref", Some("def456")),
            false,
            "label \"vcs-ref\" is \"abc123\", want \"def456\"",
        ),
        (label("empty", None), false, "label \"empty\" is empty"),
        (label("empty", Some("")), true, "labels present: empty"),
        (label("absent", None), false, "label \"absent\" is missing"),
    ];
    for (requirement, passed, message) in table {
        let checks = ParsedChecks {
            required_labels: vec![requirement.clone()],
            ..ParsedChecks::default()
        };
        let outcome = only(checks, &facts());
        assert_eq!(
            (outcome.passed, outcome.message.as_str()),
            (*passed, *message),
            "{requirement:?}"
        );
    }
}

#[test]
fn allowed_registries_match_at_a_path_boundary() {
    let table: &[(&str, &str, bool)] = &[
        ("quay.io/org", "quay.io/org/x@sha256:1", true),
        ("quay.io/org", "quay.io/organization/x@sha256:1", false),
        ("quay.io/org/x", "quay.io/org/x@sha256:1", true),
        ("quay.io/org/x", "quay.io/org/x:v1@sha256:1", true),
        ("quay.io/org/x", "quay.io/org/xy@sha256:1", false),
        ("quay.io", "quay.io/org/x@sha256:1", true),
        ("quay.io", "quay.io:8443/org/x@sha256:1", false),
        ("quay.io", "quay.io.evil.com/org/x@sha256:1", false),
        ("docker.io/library", "python@sha256:1", true),
        ("docker.io/bitnami", "bitnami/redis@sha256:1", true),
        ("docker.io/library", "bitnami/redis@sha256:1", false),
        ("localhost:5000", "localhost:5000/x@sha256:1", true),
        ("registry.local", "localhost/x@sha256:1", false),
    ];
    for (prefix, reference, passed) in table {
        let checks = ParsedChecks {
            allowed_registries: vec![prefix.to_string()],
            ..ParsedChecks::default()
        };
        let facts = ImageFacts {
            reference: reference.to_string(),
            ..ImageFacts::default()
        };
        assert_eq!(only(checks, &facts).passed, *passed, "{prefix} {reference}");
    }
}

#[test]
fn missing_metadata_fails_each_check_that_needs_it() {
    let checks = ParsedChecks {
        required_labels: vec![label("vcs-ref", None)],
        allowed_registries: vec!["quay.io".into()],
        allowed_architectures: vec!["amd64".into()],
        allowed_os: vec!["linux".into()],
        max_age: Some(limit(Duration::from_secs(3600), "1h")),
        max_size: Some(limit(1 << 30, "1Gi")),
        non_root_user: true,
    };
    let outcomes = evaluate(&checks, &ImageFacts::default(), Utc::now());
    let got: Vec<(&str, bool, &str)> = outcomes
        .iter()
        .map(|o| (o.name, o.passed, o.message.as_str()))
        .collect();
    assert_eq!(
        got,
        [
            (
                REQUIRED_LABELS,
                false,
                "label \"vcs-ref\" is missing (the image has no labels)"
            ),
            (
                ALLOWED_REGISTRIES,
                false,
                "the candidate has no image reference"
            ),
            (
                ALLOWED_ARCHITECTURES,
                false,
                "the image metadata records no architecture"
            ),
            (
                ALLOWED_OS,
                false,
                "the image metadata records no operating system"
            ),
            (
                MAX_AGE,
                false,
                "the image metadata records no creation time"
            ),
            (MAX_SIZE, false, "the image metadata records no size"),
            (
                NON_ROOT_USER,
                false,
                "the image sets no user, so it runs as root"
            ),
        ]
    );
}

#[test]
fn architecture_and_os_must_be_listed_exactly() {
    let checks = ParsedChecks {
        allowed_architectures: vec!["arm64".into(), "ppc64le".into()],
        allowed_os: vec!["linux".into()],
        ..ParsedChecks::default()
    };
    let outcomes = evaluate(&checks, &facts(), Utc::now());
    assert_eq!(
        outcomes,
        [
            CheckOutcome::new(
                ALLOWED_ARCHITECTURES,
                false,
                "architecture amd64 is not one of arm64, ppc64le".into()
            ),
            CheckOutcome::new(ALLOWED_OS, true, "operating system linux is allowed".into()),
        ]
    );
}

#[test]
fn an_image_is_too_old_only_past_the_limit() {
    let table: &[(&str, &str, bool, &str)] = &[
        (
            "2026-10-01T00:00:00Z",
            "720h",
            false,
            "created 2026-10-01T00:00:00Z, 61 days ago; allowed at most 720h",
        ),
        (
            "2026-11-01T00:00:00Z",
            "720h",
            true,
            "created 2026-11-01T00:00:00Z, 30 days ago; allowed at most 720h",
        ),
        (
            "2026-11-30T19:00:00Z",
            "30m",
            false,
            "created 2026-11-30T19:00:00Z, 5h ago; allowed at most 30m",
        ),
        (
            "2026-11-30T23:45:00Z",
            "30m",
            true,
            "created 2026-11-30T23:45:00Z, 15m ago; allowed at most 30m",
        ),
        (
            "2026-12-01T00:02:00Z",
            "30m",
            true,
            "created 2026-12-01T00:02:00Z, 2m in the future; allowed at most 30m",
        ),
        // Beyond the clock skew allowed, a build date in the future is the image's own claim,
        // not a build time: refused, whatever the limit.
        (
            "2026-12-01T01:00:00Z",
            "720h",
            false,
            "created 2026-12-01T01:00:00Z, 1h in the future; a build date more than 5m ahead of \
             the controller's clock is refused",
        ),
        (
            "2126-12-01T00:00:00Z",
            "720h",
            false,
            "created 2126-12-01T00:00:00Z, 36524 days in the future; a build date more than 5m \
             ahead of the controller's clock is refused",
        ),
    ];
    for (created, text, passed, message) in table {
        let value = crate::api::parse_go_duration(text).unwrap();
        let checks = ParsedChecks {
            max_age: Some(limit(value, text)),
            ..ParsedChecks::default()
        };
        let facts = ImageFacts {
            created: Some(at(created)),
            ..facts()
        };
        let outcome = only(checks, &facts);
        assert_eq!(
            (outcome.passed, outcome.message.as_str()),
            (*passed, *message)
        );
    }
}

#[test]
fn an_image_is_too_large_only_past_the_limit() {
    let table: &[(u64, u64, &str, bool, &str)] = &[
        (
            347_487_141,
            5 << 30,
            "5Gi",
            true,
            "size 347487141 bytes (331.4Mi); allowed at most 5Gi",
        ),
        (
            347_487_141,
            300_000_000,
            "300M",
            false,
            "size 347487141 bytes (331.4Mi); allowed at most 300M",
        ),
        (
            1_200_000,
            1_200_000,
            "1200000",
            true,
            "size 1200000 bytes (1.1Mi); allowed at most 1200000",
        ),
        (
            512,
            1_000,
            "1k",
            true,
            "size 512 bytes (512B); allowed at most 1k",
        ),
    ];
    for (size, value, text, passed, message) in table {
        let checks = ParsedChecks {
            max_size: Some(limit(*value, text)),
            ..ParsedChecks::default()
        };
        let facts = ImageFacts {
            size_bytes: Some(*size),
            ..facts()
        };
        let outcome = only(checks, &facts);
        assert_eq!(
            (outcome.passed, outcome.message.as_str()),
            (*passed, *message)
        );
    }
}

#[test]
fn only_a_set_user_other_than_root_is_non_root() {
    let table: &[(Option<&str>, bool)] = &[
        (Some("1001"), true),
        (Some("1001:0"), true),
        (Some("1001:1001"), true),
        // A name's uid is in the image's /etc/passwd, which nothing reads before the pod runs:
        // the kubelet's runAsNonRoot refuses such a user, and so does the check.
        (Some("jovyan"), false),
        (Some("nobody:nogroup"), false),
        (Some("toor"), false),
        (Some(""), false),
        (None, false),
        (Some("0"), false),
        (Some("00"), false),
        (Some("root"), false),
        (Some("0:0"), false),
        (Some("root:root"), false),
        (Some(":1001"), false),
    ];
    for (user, passed) in table {
        let checks = ParsedChecks {
            non_root_user: true,
            ..ParsedChecks::default()
        };
        let facts = ImageFacts {
            user: user.map(str::to_string),
            ..ImageFacts::default()
        };
        assert_eq!(only(checks, &facts).passed, *passed, "{user:?}");
    }
}

#[test]
fn an_image_without_a_user_is_not_non_root() {
    let checks = ParsedChecks {
        non_root_user: true,
        ..ParsedChecks::default()
    };
    let outcome = only(checks, &python_facts());
    assert!(!outcome.passed);
    assert_eq!(
        outcome.message,
        "the image sets no user, so it runs as root"
    );
}
