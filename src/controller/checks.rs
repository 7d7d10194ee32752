//! The checks a candidate image must pass before promotion: pure functions over the image's
//! metadata ([`ImageFacts`], fetched by the caller) and the parsed checks of an ImagePromotion.
//!
//! Each configured check yields one [`CheckOutcome`], in a fixed order, and the outcomes go into
//! the CustomRun's `checks` result as JSON. A check whose metadata is missing fails and says what
//! is missing: a gate that passes because it could not look is no gate.

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, SecondsFormat, TimeDelta, Utc};
use serde::Serialize;

use crate::api::Image;

/// `requiredLabels`: the JSON field name, used as the outcome's name.
pub const REQUIRED_LABELS: &str = "requiredLabels";
/// `allowedRegistries`.
pub const ALLOWED_REGISTRIES: &str = "allowedRegistries";
/// `allowedArchitectures`.
pub const ALLOWED_ARCHITECTURES: &str = "allowedArchitectures";
/// `allowedOS`.
pub const ALLOWED_OS: &str = "allowedOS";
/// `maxAge`.
pub const MAX_AGE: &str = "maxAge";
/// `maxSize`.
pub const MAX_SIZE: &str = "maxSize";
/// `nonRootUser`.
pub const NON_ROOT_USER: &str = "nonRootUser";

/// One entry of `requiredLabels`: `key` (present and non-empty) or `key=value` (equal).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LabelRequirement {
    /// The label key.
    pub key: String,
    /// The required value; `None` requires any non-empty value.
    pub value: Option<String>,
}

/// A parsed limit and the text it was written as, which the messages quote back.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Limit<T> {
    /// The parsed value.
    pub value: T,
    /// The text from the ImagePromotion (`720h`, `5Gi`).
    pub text: String,
}

/// The checks of an ImagePromotion, validated and parsed ([`super::crd::Checks::parse`]).
/// An empty list, `None` or `false` means the check is not configured.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ParsedChecks {
    /// Labels the image config must carry.
    pub required_labels: Vec<LabelRequirement>,
    /// Pull-spec prefixes, without a trailing `/`.
    pub allowed_registries: Vec<String>,
    /// Allowed CPU architectures.
    pub allowed_architectures: Vec<String>,
    /// Allowed operating systems.
    pub allowed_os: Vec<String>,
    /// Maximum age since the image was built.
    pub max_age: Option<Limit<Duration>>,
    /// Maximum size in bytes.
    pub max_size: Option<Limit<u64>>,
    /// Whether the image must name a non-root user.
    pub non_root_user: bool,
}

impl ParsedChecks {
    /// True when no check is configured, so [`evaluate`] returns no outcomes.
    pub fn is_empty(&self) -> bool {
        self == &ParsedChecks::default()
    }
}

/// What the checks read about a candidate image.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ImageFacts {
    /// The candidate's pull spec (the TagEvent's `dockerImageReference`).
    pub reference: String,
    /// Image config labels.
    pub labels: BTreeMap<String, String>,
    /// CPU architecture, if recorded.
    pub architecture: Option<String>,
    /// Operating system, if recorded.
    pub os: Option<String>,
    /// Build time, if recorded.
    pub created: Option<DateTime<Utc>>,
    /// Size in bytes, if recorded.
    pub size_bytes: Option<u64>,
    /// The image config's `User`, if set.
    pub user: Option<String>,
}

impl ImageFacts {
    /// The facts of `image`, reached through the candidate pull spec `reference`. Empty strings
    /// and negative sizes count as not recorded.
    pub fn from_image(reference: &str, image: &Image) -> ImageFacts {
        let metadata = image.docker_image_metadata.as_ref();
        let non_empty = |s: Option<&String>| s.filter(|s| !s.is_empty()).cloned();
        ImageFacts {
            reference: reference.to_string(),
            labels: image.labels().cloned().unwrap_or_default(),
            architecture: non_empty(metadata.and_then(|m| m.architecture.as_ref())),
            os: non_empty(metadata.and_then(|m| m.os.as_ref())),
            created: metadata
                .and_then(|m| m.created.as_ref())
                .and_then(|t| i64::try_from(t.0.as_nanosecond()).ok())
                .map(DateTime::from_timestamp_nanos),
            size_bytes: metadata
                .and_then(|m| m.size)
                .and_then(|s| u64::try_from(s).ok()),
            user: image.user().map(str::to_string),
        }
    }
}

/// The result of one check, as it appears in the `checks` result
/// (`{"name":"maxAge","passed":false,"message":"..."}`).
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct CheckOutcome {
    /// The check's field name in the ImagePromotion (`maxAge`).
    pub name: &'static str,
    /// Whether the image passed.
    pub passed: bool,
    /// What was found, and on failure what was allowed.
    pub message: String,
}

impl CheckOutcome {
    fn new(name: &'static str, passed: bool, message: String) -> CheckOutcome {
        CheckOutcome {
            name,
            passed,
            message,
        }
    }
}

/// Evaluates every configured check against `facts` at time `now`, in the order
/// requiredLabels, allowedRegistries, allowedArchitectures, allowedOS, maxAge, maxSize,
/// nonRootUser. Checks that are not configured produce no outcome.
pub fn evaluate(
    checks: &ParsedChecks,
    facts: &ImageFacts,
    now: DateTime<Utc>,
) -> Vec<CheckOutcome> {
    let mut outcomes = Vec::new();
    if !checks.required_labels.is_empty() {
        outcomes.push(required_labels(&checks.required_labels, &facts.labels));
    }
    if !checks.allowed_registries.is_empty() {
        outcomes.push(allowed_registries(
            &checks.allowed_registries,
            &facts.reference,
        ));
    }
    if !checks.allowed_architectures.is_empty() {
        outcomes.push(one_of(
            ALLOWED_ARCHITECTURES,
            "architecture",
            &checks.allowed_architectures,
            facts.architecture.as_deref(),
        ));
    }
    if !checks.allowed_os.is_empty() {
        outcomes.push(one_of(
            ALLOWED_OS,
            "operating system",
            &checks.allowed_os,
            facts.os.as_deref(),
        ));
    }
    if let Some(limit) = &checks.max_age {
        outcomes.push(max_age(limit, facts.created, now));
    }
    if let Some(limit) = &checks.max_size {
        outcomes.push(max_size(limit, facts.size_bytes));
    }
    if checks.non_root_user {
        outcomes.push(non_root_user(facts.user.as_deref()));
    }
    outcomes
}

/// True when every outcome passed (and so for no outcomes at all).
pub fn all_passed(outcomes: &[CheckOutcome]) -> bool {
    outcomes.iter().all(|outcome| outcome.passed)
}

fn required_labels(
    requirements: &[LabelRequirement],
    labels: &BTreeMap<String, String>,
) -> CheckOutcome {
    let mut problems = Vec::new();
    for requirement in requirements {
        let key = &requirement.key;
        match (labels.get(key), &requirement.value) {
            (None, _) => problems.push(format!("label {key:?} is missing")),
            (Some(actual), None) if actual.is_empty() => {
                problems.push(format!("label {key:?} is empty"))
            }
            (Some(actual), Some(want)) if actual != want => {
                problems.push(format!("label {key:?} is {actual:?}, want {want:?}"))
            }
            _ => {}
        }
    }
    if problems.is_empty() {
        let keys: Vec<&str> = requirements.iter().map(|r| r.key.as_str()).collect();
        let message = format!("labels present: {}", keys.join(", "));
        CheckOutcome::new(REQUIRED_LABELS, true, message)
    } else {
        let mut message = problems.join("; ");
        if labels.is_empty() {
            message.push_str(" (the image has no labels)");
        }
        CheckOutcome::new(REQUIRED_LABELS, false, message)
    }
}

/// The reference with Docker Hub's short forms expanded, as `docker pull` reads it
/// (`python@sha256:..` is `docker.io/library/python@sha256:..`): the first path component is a
/// registry host only if it contains `.` or `:` or is `localhost`.
fn normalized_reference(reference: &str) -> String {
    match reference.split_once('/') {
        None => format!("docker.io/library/{reference}"),
        Some((first, _)) if first.contains(['.', ':']) || first == "localhost" => {
            reference.to_string()
        }
        Some(_) => format!("docker.io/{reference}"),
    }
}

/// Whether `reference` starts with `prefix` at a path boundary. `:` is a boundary only after a
/// repository path (a tag), never right after a bare host (where it would start a port).
fn under_prefix(reference: &str, prefix: &str) -> bool {
    match reference.strip_prefix(prefix) {
        Some("") => true,
        Some(rest) => {
            rest.starts_with(['/', '@']) || (rest.starts_with(':') && prefix.contains('/'))
        }
        None => false,
    }
}

fn allowed_registries(prefixes: &[String], reference: &str) -> CheckOutcome {
    if reference.is_empty() {
        let message = "the candidate has no image reference".to_string();
        return CheckOutcome::new(ALLOWED_REGISTRIES, false, message);
    }
    let normalized = normalized_reference(reference);
    match prefixes.iter().find(|p| under_prefix(&normalized, p)) {
        Some(prefix) => {
            let message = format!("{normalized} is under {prefix}");
            CheckOutcome::new(ALLOWED_REGISTRIES, true, message)
        }
        None => {
            let message = format!("{normalized} is not under any of {}", prefixes.join(", "));
            CheckOutcome::new(ALLOWED_REGISTRIES, false, message)
        }
    }
}

fn one_of(
    name: &'static str,
    what: &str,
    allowed: &[String],
    actual: Option<&str>,
) -> CheckOutcome {
    match actual {
        None => {
            let message = format!("the image metadata records no {what}");
            CheckOutcome::new(name, false, message)
        }
        Some(actual) if allowed.iter().any(|a| a == actual) => {
            CheckOutcome::new(name, true, format!("{what} {actual} is allowed"))
        }
        Some(actual) => {
            let message = format!("{what} {actual} is not one of {}", allowed.join(", "));
            CheckOutcome::new(name, false, message)
        }
    }
}

fn max_age(
    limit: &Limit<Duration>,
    created: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
) -> CheckOutcome {
    let Some(created) = created else {
        let message = "the image metadata records no creation time".to_string();
        return CheckOutcome::new(MAX_AGE, false, message);
    };
    let age = now - created;
    let max = TimeDelta::from_std(limit.value).unwrap_or(TimeDelta::MAX);
    let when = if age < TimeDelta::zero() {
        format!("{} in the future", human(-age))
    } else {
        format!("{} ago", human(age))
    };
    let message = format!(
        "created {}, {when}; allowed at most {}",
        created.to_rfc3339_opts(SecondsFormat::Secs, true),
        limit.text
    );
    CheckOutcome::new(MAX_AGE, age <= max, message)
}

/// A coarse, readable span: `61 days`, `1 day`, `5h`, `12m`, `30s`.
fn human(span: TimeDelta) -> String {
    match span.num_days() {
        0 if span.num_hours() > 0 => format!("{}h", span.num_hours()),
        0 if span.num_minutes() > 0 => format!("{}m", span.num_minutes()),
        0 => format!("{}s", span.num_seconds()),
        1 => "1 day".to_string(),
        days => format!("{days} days"),
    }
}

fn max_size(limit: &Limit<u64>, size: Option<u64>) -> CheckOutcome {
    let Some(size) = size else {
        let message = "the image metadata records no size".to_string();
        return CheckOutcome::new(MAX_SIZE, false, message);
    };
    let message = format!(
        "size {size} bytes ({}); allowed at most {}",
        binary_size(size),
        limit.text
    );
    CheckOutcome::new(MAX_SIZE, size <= limit.value, message)
}

/// `331.4Mi`: the size in the largest binary unit it reaches, one decimal.
fn binary_size(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];
    if bytes < 1024 {
        return format!("{bytes}B");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1}{}", UNITS[unit])
}

/// Whether a Docker `User` (`name`, `uid`, `name:group`, `uid:gid`) runs as root: an empty user
/// part means the runtime's default, root.
fn runs_as_root(user: &str) -> bool {
    let name = user.split(':').next().unwrap_or_default();
    name.is_empty() || name == "root" || name.parse::<u32>() == Ok(0)
}

fn non_root_user(user: Option<&str>) -> CheckOutcome {
    match user {
        None | Some("") => {
            let message = "the image sets no user, so it runs as root".to_string();
            CheckOutcome::new(NON_ROOT_USER, false, message)
        }
        Some(user) if runs_as_root(user) => {
            CheckOutcome::new(NON_ROOT_USER, false, format!("user {user:?} is root"))
        }
        Some(user) => CheckOutcome::new(NON_ROOT_USER, true, format!("user {user:?} is not root")),
    }
}

#[cfg(test)]
mod tests {
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
            }
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
            (Some("jovyan"), true),
            (Some("nobody:nogroup"), true),
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
}
