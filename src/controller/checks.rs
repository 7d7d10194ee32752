//! The checks a candidate image must pass before promotion: pure functions over the image's
//! metadata ([`ImageFacts`], fetched by the caller) and the parsed checks of an ImagePromotion ([`super::params::checks`]).
//!
//! Each configured check yields one [`CheckOutcome`], in a fixed order, and the outcomes go into
//! the CustomRun's `checks` result as JSON. A check whose metadata is missing fails and says what
//! is missing: a gate that passes because it could not look is no gate.

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, SecondsFormat, TimeDelta, Utc};
use serde::Serialize;

use crate::api::Image;

use super::params::checks::{LabelRequirement, Limit, ParsedChecks};

/// `requiredLabels`: the JSON field name, used as the outcome's name.
pub(crate) const REQUIRED_LABELS: &str = "requiredLabels";
/// `allowedRegistries`.
pub(crate) const ALLOWED_REGISTRIES: &str = "allowedRegistries";
/// `allowedArchitectures`.
pub(crate) const ALLOWED_ARCHITECTURES: &str = "allowedArchitectures";
/// `allowedOS`.
pub(crate) const ALLOWED_OS: &str = "allowedOS";
/// `maxAge`.
pub(crate) const MAX_AGE: &str = "maxAge";
/// `maxSize`.
pub(crate) const MAX_SIZE: &str = "maxSize";
/// `nonRootUser`.
pub(crate) const NON_ROOT_USER: &str = "nonRootUser";
/// `signature`: one outcome per ImagePromotion whose signature policy was checked.
pub(crate) const SIGNATURE: &str = "signature";
/// `chains`: one outcome per proof of validation that asks for Tekton Chains' signed record,
/// naming the key each TaskRun's record was signed by.
pub(crate) const CHAINS: &str = "chains";

/// How far ahead of the controller's clock a build date may be before `maxAge` refuses it (the
/// builder's and the controller's clocks differ by seconds, not minutes).
pub(crate) const MAX_CLOCK_SKEW: TimeDelta = TimeDelta::minutes(5);

/// What the checks read about a candidate image.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct ImageFacts {
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
    /// When the image is an index (a manifest list, imported with `importMode:
    /// PreserveOriginal`): each platform it holds, as `os/architecture[/variant]`, with its digest.
    pub platforms: Vec<(String, String)>,
}

impl ImageFacts {
    /// The facts of `image`, reached through the candidate pull spec `reference`. Empty strings
    /// and negative sizes count as not recorded.
    pub(crate) fn from_image(reference: &str, image: &Image) -> ImageFacts {
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
            platforms: image
                .docker_image_manifests
                .iter()
                .map(|m| {
                    let mut platform = format!("{}/{}", m.os, m.architecture);
                    if let Some(v) = m.variant.as_deref().filter(|v| !v.is_empty()) {
                        platform.push('/');
                        platform.push_str(v);
                    }
                    (platform, m.digest.clone())
                })
                .collect(),
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
pub(crate) fn evaluate(
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
pub(crate) fn all_passed(outcomes: &[CheckOutcome]) -> bool {
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
    let stamp = created.to_rfc3339_opts(SecondsFormat::Secs, true);
    if age < -MAX_CLOCK_SKEW {
        // The build date is the image's own claim: one in the future would pass any limit.
        let message = format!(
            "created {stamp}, {} in the future; a build date more than {} ahead of the \
             controller's clock is refused",
            human(-age),
            human(MAX_CLOCK_SKEW)
        );
        return CheckOutcome::new(MAX_AGE, false, message);
    }
    let when = if age < TimeDelta::zero() {
        format!("{} in the future", human(-age))
    } else {
        format!("{} ago", human(age))
    };
    let message = format!("created {stamp}, {when}; allowed at most {}", limit.text);
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
/// The uid of an image config's `User` (`uid` or `uid:gid`), when it is numeric.
fn numeric_uid(user: &str) -> Option<u32> {
    let uid = user.split(':').next().unwrap_or_default();
    uid.bytes()
        .all(|b| b.is_ascii_digit())
        .then(|| uid.parse().ok())
        .flatten()
}

/// A user passes only as a numeric uid other than 0: a name's uid is in the image's own
/// `/etc/passwd` (a named user may be uid 0), and the kubelet's `runAsNonRoot` refuses to start
/// a container whose user is not numeric, so an image that names one would not run as tested.
fn non_root_user(user: Option<&str>) -> CheckOutcome {
    let (passed, message) = match user {
        None | Some("") => (
            false,
            "the image sets no user, so it runs as root".to_string(),
        ),
        Some(user) => match numeric_uid(user) {
            Some(0) => (false, format!("user {user:?} is root")),
            None if user.split(':').next() == Some("root") => {
                (false, format!("user {user:?} is root"))
            }
            Some(_) => (true, format!("user {user:?} is not root")),
            None => (
                false,
                format!(
                    "user {user:?} is not a numeric uid, so nothing shows it is not root (the \
                     kubelet's runAsNonRoot refuses such a user too)"
                ),
            ),
        },
    };
    CheckOutcome::new(NON_ROOT_USER, passed, message)
}

#[cfg(test)]
mod tests;
