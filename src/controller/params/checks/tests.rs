//! Parsing the checks of an ImagePromotion: Kubernetes quantities, valid checks into limits and
//! requirements, and invalid ones refused with a message naming the field.

use super::*;

#[test]
fn quantities_parse_as_kubernetes_does() {
    for (text, bytes) in [
        ("1200000", 1_200_000),
        ("500M", 500_000_000),
        ("5Gi", 5 * 1024 * 1024 * 1024),
        ("1.5Gi", 1_610_612_736),
        ("1k", 1_000),
        ("64Ki", 65_536),
        ("12e6", 12_000_000),
        ("12E6", 12_000_000),
        ("1E", 1_000_000_000_000_000_000),
        ("+10", 10),
        ("0.5", 1),
        ("1.0001k", 1_001),
        ("15e-1", 2),
        ("1e-40", 1),
        ("0", 0),
        (".5Ki", 512),
    ] {
        assert_eq!(parse_quantity_bytes(text), Ok(bytes), "{text}");
    }
    for (text, error) in [
        ("", QuantityError::Invalid),
        ("5 GB", QuantityError::Invalid),
        ("5GB", QuantityError::Invalid),
        ("-1", QuantityError::Invalid),
        ("Gi", QuantityError::Invalid),
        ("1.2.3", QuantityError::Invalid),
        ("1e", QuantityError::Invalid),
        ("500m", QuantityError::Milli),
        ("20Ei", QuantityError::TooLarge),
        ("1e30", QuantityError::TooLarge),
        // Exponents whose negation or sum overflows an i32 (a panic with overflow checks on).
        ("1e-2147483648", QuantityError::Invalid),
        ("1.5e-2147483647", QuantityError::Invalid),
        ("1e2147483648", QuantityError::Invalid),
        ("1e4294967296", QuantityError::Invalid),
    ] {
        assert_eq!(parse_quantity_bytes(text), Err(error), "{text}");
    }
}

#[test]
fn valid_checks_parse_into_limits_and_requirements() {
    let checks = Checks {
        required_labels: vec!["vcs-ref".into(), "vendor=Red Hat, Inc.".into()],
        allowed_registries: vec!["quay.io/org/".into()],
        allowed_architectures: vec!["amd64".into()],
        allowed_os: vec!["linux".into()],
        max_age: Some("720h".into()),
        max_size: Some("5Gi".into()),
        non_root_user: true,
    };
    let parsed = checks.parse().unwrap();
    assert_eq!(
        parsed.required_labels,
        vec![
            LabelRequirement {
                key: "vcs-ref".into(),
                value: None
            },
            LabelRequirement {
                key: "vendor".into(),
                value: Some("Red Hat, Inc.".into())
            },
        ]
    );
    assert_eq!(parsed.allowed_registries, vec!["quay.io/org".to_string()]);
    assert_eq!(
        parsed.max_age,
        Some(Limit {
            value: Duration::from_secs(720 * 3600),
            text: "720h".into()
        })
    );
    assert_eq!(
        parsed.max_size,
        Some(Limit {
            value: 5 << 30,
            text: "5Gi".into()
        })
    );
    assert!(parsed.non_root_user);
    assert_eq!(Checks::default().parse().unwrap(), ParsedChecks::default());
}

#[test]
fn invalid_checks_are_refused_with_a_message_naming_the_field() {
    let table: &[(Checks, &str)] = &[
        (
            Checks {
                max_age: Some("7 days".into()),
                ..Checks::default()
            },
            r#"checks.maxAge: "7 days" is not a duration (use e.g. "168h")"#,
        ),
        (
            Checks {
                max_age: Some("0s".into()),
                ..Checks::default()
            },
            r#"checks.maxAge: "0s" must be greater than zero"#,
        ),
        (
            Checks {
                max_size: Some("5 GB".into()),
                ..Checks::default()
            },
            r#"checks.maxSize: "5 GB" is not a quantity (use e.g. "5Gi", "500M" or "1200000")"#,
        ),
        (
            Checks {
                max_size: Some("500m".into()),
                ..Checks::default()
            },
            r#"checks.maxSize: "500m" is milli-bytes (the suffix m means 1/1000); use e.g. "500M" or "500Mi""#,
        ),
        (
            Checks {
                required_labels: vec!["ok".into(), "=value".into()],
                ..Checks::default()
            },
            r#"checks.requiredLabels[1]: "=value" is not a label requirement (use "key" or "key=value")"#,
        ),
        (
            Checks {
                allowed_registries: vec!["/".into()],
                ..Checks::default()
            },
            r#"checks.allowedRegistries[0]: "/" is not a registry or repository prefix (use e.g. "quay.io/org")"#,
        ),
        (
            Checks {
                allowed_os: vec![" ".into()],
                ..Checks::default()
            },
            "checks.allowedOS[0]: must not be empty",
        ),
        (
            Checks {
                max_age: Some("1x".into()),
                max_size: Some("big".into()),
                ..Checks::default()
            },
            r#"checks.maxAge: "1x" is not a duration (use e.g. "168h"); checks.maxSize: "big" is not a quantity (use e.g. "5Gi", "500M" or "1200000")"#,
        ),
    ];
    for (checks, message) in table {
        assert_eq!(checks.parse().unwrap_err(), *message);
    }
}
