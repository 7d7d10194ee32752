//! `tekton.dev/v1beta1` CustomRun: one execution of a Tekton custom task.
//!
//! The pipeline controller creates it (name `<pipelinerun>-<task>`, params already substituted)
//! and may later set `spec.status: RunCancelled`; the custom-task controller never writes
//! `spec` and reports through the `/status` subresource (`Api::patch_status`). Shapes follow
//! tektoncd/pipeline `pkg/apis/pipeline/v1beta1/customrun_types.go` and
//! `pkg/apis/run/v1beta1/customrunstatus_types.go`.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::CustomResource;
use serde::{Deserialize, Serialize};

use super::null_as_default;

/// Names and values Tekton gives meaning to.
pub mod tekton {
    use std::time::Duration;

    /// The condition type Tekton reads to decide whether a CustomRun is done.
    pub(crate) const SUCCEEDED: &str = "Succeeded";
    /// `spec.status` value the pipeline controller sets to cancel a run (also on timeout).
    pub(crate) const SPEC_STATUS_CANCELLED: &str = "RunCancelled";
    /// `spec.statusMessage` when the owning PipelineRun timed out.
    pub const CANCELLED_BY_PIPELINE_TIMEOUT_MSG: &str =
        "CustomRun cancelled as the PipelineRun it belongs to has timed out.";
    /// Timeout of one attempt when `spec.timeout` is not set (a compile-time constant in
    /// Tekton, not the `config-defaults` ConfigMap).
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60 * 60);

    /// Condition statuses.
    pub mod status {
        /// Finished successfully.
        pub(crate) const TRUE: &str = "True";
        /// Finished unsuccessfully (after all retries).
        pub(crate) const FALSE: &str = "False";
        /// Running.
        pub const UNKNOWN: &str = "Unknown";
    }

    /// Condition reasons defined by Tekton (`CustomRunReason`). The PipelineRun treats a run
    /// as cancelled only if the reason is exactly [`reason::CANCELLED`].
    pub mod reason {
        /// The work is in progress.
        pub const RUNNING: &str = "Running";
        /// Stopped because `spec.status` is `RunCancelled`.
        pub const CANCELLED: &str = "CustomRunCancelled";
        /// Stopped because the attempt exceeded `spec.timeout`.
        pub const TIMED_OUT: &str = "CustomRunTimedOut";
    }

    /// Labels the pipeline controller puts on the CustomRuns it creates.
    pub mod label {
        /// Name of the pipeline task.
        pub const PIPELINE_TASK: &str = "tekton.dev/pipelineTask";
    }
}

/// Spec of a CustomRun; the derive generates [`CustomRun`].
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "tekton.dev",
    version = "v1beta1",
    kind = "CustomRun",
    plural = "customruns",
    namespaced,
    status = "CustomRunStatus",
    schema = "disabled",
    derive = "PartialEq",
    derive = "Default"
)]
#[serde(rename_all = "camelCase")]
pub struct CustomRunSpec {
    /// The custom task type (and optionally a named instance) to run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub custom_ref: Option<CustomTaskRef>,
    /// The custom task embedded in the run (exclusive with `customRef`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub custom_spec: Option<EmbeddedCustomRunSpec>,
    /// Parameters, after `$(...)` substitution by the pipeline controller.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub params: Vec<Param>,
    /// `RunCancelled` ([`tekton::SPEC_STATUS_CANCELLED`]) when the run must stop.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// Why it was cancelled (set together with `status`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_message: Option<String>,
    /// How many times the custom task may retry a failed attempt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retries: Option<i32>,
    /// Go duration of one attempt, e.g. `1h0m0s`; see [`CustomRun::timeout`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<String>,
    /// Service account the run executes as.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account_name: Option<String>,
    /// Workspace bindings, passed through unread.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub workspaces: Vec<serde_json::Value>,
}

/// `spec.customRef` (a Tekton `TaskRef`): custom task when `apiVersion` and `kind` are set.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct CustomTaskRef {
    /// API version of the custom task type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    /// Kind of the custom task type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Name of a custom task object, if the run refers to one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// `spec.customSpec`: a custom task embedded in the run.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct EmbeddedCustomRunSpec {
    /// API version of the custom task type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    /// Kind of the custom task type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// The task spec, free-form (`x-kubernetes-preserve-unknown-fields`).
    #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
    pub spec: serde_json::Value,
}

/// `spec.params[]`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct Param {
    /// Parameter name.
    #[serde(default, deserialize_with = "null_as_default")]
    pub name: String,
    /// Parameter value.
    #[serde(default)]
    pub value: ParamValue,
}

/// A Tekton parameter value: a string, an array of strings or an object of strings. Anything
/// else the (schemaless) CRD let through is kept as JSON so it survives a round-trip.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(untagged)]
pub enum ParamValue {
    /// `value: "text"`.
    String(String),
    /// `value: ["a", "b"]`.
    Array(Vec<String>),
    /// `value: {key: "v"}`.
    Object(BTreeMap<String, String>),
    /// Any other JSON (numbers, nested structures).
    Other(serde_json::Value),
}

impl Default for ParamValue {
    fn default() -> Self {
        Self::String(String::new())
    }
}

impl ParamValue {
    /// The value if it is a string.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Self::String(s) => Some(s),
            _ => None,
        }
    }

    /// The value if it is an array of strings.
    pub fn as_array(&self) -> Option<&[String]> {
        match self {
            Self::Array(items) => Some(items),
            _ => None,
        }
    }

    /// The value if it is an object of strings.
    pub fn as_object(&self) -> Option<&BTreeMap<String, String>> {
        match self {
            Self::Object(map) => Some(map),
            _ => None,
        }
    }
}

impl From<&str> for ParamValue {
    fn from(value: &str) -> Self {
        Self::String(value.to_owned())
    }
}

/// `status` of a CustomRun, written by the custom-task controller through `/status`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct CustomRunStatus {
    /// Conditions; Tekton reads only `Succeeded` ([`tekton::SUCCEEDED`]).
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub conditions: Vec<Condition>,
    /// `metadata.generation` the controller last acted on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Free-form status annotations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<BTreeMap<String, String>>,
    /// When the current attempt started; timeouts are measured from here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<Time>,
    /// When the run finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_time: Option<Time>,
    /// Results for later tasks (`$(tasks.<name>.results.<result>)`); strings only.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub results: Vec<CustomRunResult>,
    /// Status of each failed earlier attempt.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub retries_status: Vec<CustomRunStatus>,
    /// Anything else the controller wants to record (unknown top-level status keys are pruned
    /// by the CRD, so they must live here).
    #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
    pub extra_fields: serde_json::Value,
}

/// A Knative-style condition (`status.conditions[]`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    /// Condition type, `Succeeded` for the one Tekton reads.
    #[serde(rename = "type", default, deserialize_with = "null_as_default")]
    pub type_: String,
    /// `True`, `False` or `Unknown` (see [`tekton::status`]).
    #[serde(default, deserialize_with = "null_as_default")]
    pub status: String,
    /// `Error` (default when absent), `Warning` or `Info`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub severity: Option<String>,
    /// When the status last changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
    /// Machine-readable reason (see [`tekton::reason`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Human-readable message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

impl Condition {
    /// `status: True`.
    pub fn is_true(&self) -> bool {
        self.status == tekton::status::TRUE
    }

    /// `status: False`.
    pub fn is_false(&self) -> bool {
        self.status == tekton::status::FALSE
    }
}

/// `status.results[]`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct CustomRunResult {
    /// Result name.
    #[serde(default, deserialize_with = "null_as_default")]
    pub name: String,
    /// Result value; arrays are passed as JSON strings.
    #[serde(default, deserialize_with = "null_as_default")]
    pub value: String,
}

impl CustomRun {
    /// Whether the run targets the custom task type `api_version`/`kind`, through `customRef`
    /// or `customSpec` (Tekton's `FilterCustomRunRef`).
    pub fn is_for(&self, api_version: &str, kind: &str) -> bool {
        let matches = |v: Option<&str>, k: Option<&str>| v == Some(api_version) && k == Some(kind);
        self.spec
            .custom_ref
            .as_ref()
            .is_some_and(|r| matches(r.api_version.as_deref(), r.kind.as_deref()))
            || self
                .spec
                .custom_spec
                .as_ref()
                .is_some_and(|s| matches(s.api_version.as_deref(), s.kind.as_deref()))
    }

    /// The value of parameter `name`.
    pub fn param(&self, name: &str) -> Option<&ParamValue> {
        self.spec
            .params
            .iter()
            .find(|p| p.name == name)
            .map(|p| &p.value)
    }

    /// The value of parameter `name` if it is a string.
    pub fn param_str(&self, name: &str) -> Option<&str> {
        self.param(name)?.as_str()
    }

    /// The `Succeeded` condition, if the controller has reported one.
    pub fn succeeded_condition(&self) -> Option<&Condition> {
        self.status
            .as_ref()?
            .conditions
            .iter()
            .find(|c| c.type_ == tekton::SUCCEEDED)
    }

    /// Whether the run has finished (`Succeeded` is `True` or `False`).
    pub fn is_done(&self) -> bool {
        self.succeeded_condition()
            .is_some_and(|c| c.is_true() || c.is_false())
    }

    /// Whether the pipeline controller asked the run to stop (`spec.status: RunCancelled`).
    pub fn is_cancelled(&self) -> bool {
        self.spec.status.as_deref() == Some(tekton::SPEC_STATUS_CANCELLED)
    }

    /// Whether the current attempt has started (`status.startTime` is set).
    pub fn has_started(&self) -> bool {
        self.status.as_ref().is_some_and(|s| s.start_time.is_some())
    }

    /// How many attempts have failed and been retried (`len(status.retriesStatus)`).
    pub fn retry_count(&self) -> usize {
        self.status.as_ref().map_or(0, |s| s.retries_status.len())
    }

    /// The PipelineRun that controls the run: the name and uid of its controlling owner
    /// reference (kind PipelineRun in `tekton.dev`, with a uid); None when it has none. The
    /// `tekton.dev/pipelineRun` label is not read: anyone who creates a CustomRun writes its
    /// labels, and a name without a uid may be any PipelineRun of that name.
    pub fn pipeline_run(&self) -> Option<(String, String)> {
        self.metadata
            .owner_references
            .iter()
            .flatten()
            .find(|o| {
                o.kind == "PipelineRun"
                    && o.api_version.starts_with("tekton.dev/")
                    && o.controller == Some(true)
                    && !o.uid.is_empty()
            })
            .map(|o| (o.name.clone(), o.uid.clone()))
    }

    /// The timeout of one attempt: [`tekton::DEFAULT_TIMEOUT`] when `spec.timeout` is unset,
    /// `None` when it is zero (no timeout).
    pub fn timeout(&self) -> Result<Option<Duration>, ParseDurationError> {
        let timeout = match self.spec.timeout.as_deref() {
            None => tekton::DEFAULT_TIMEOUT,
            Some(text) => parse_go_duration(text)?,
        };
        Ok((!timeout.is_zero()).then_some(timeout))
    }
}

/// A Go duration string (`time.ParseDuration`) that could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseDurationError {
    /// The text is not `[0-9.]+unit` repeated, e.g. `10` or `1x`.
    #[error("invalid duration {0:?}")]
    Invalid(String),
    /// The duration is negative; a timeout cannot be.
    #[error("negative duration {0:?}")]
    Negative(String),
    /// The duration does not fit in 64-bit nanoseconds (about 292 years).
    #[error("duration {0:?} out of range")]
    Overflow(String),
}

/// Parses a Go duration string such as `1h0m0s`, `90s`, `1.5h` or `300ms` (units `ns`, `us`,
/// `µs`, `ms`, `s`, `m`, `h`; `0` alone is allowed). Negative durations are rejected.
///
/// Written here because no crate parses exactly Go's `time.ParseDuration` grammar, which Tekton
/// writes `spec.timeout` in: `go-parse-duration` (0.1.1) panics on `µs` and refuses the largest
/// durations Go accepts; `go-duration` (0.2) refuses `0`, Tekton's "no timeout"; `humantime` (2)
/// and `duration-str` (0.17) read another grammar (`1h 30m`, `1d`) and refuse parts of Go's
/// (`+5s`, `.5s`; `duration-str` also `1.5h`).
pub fn parse_go_duration(text: &str) -> Result<Duration, ParseDurationError> {
    let invalid = || ParseDurationError::Invalid(text.to_owned());
    let (negative, unsigned) = match text.strip_prefix('-') {
        Some(unsigned) => (true, unsigned),
        None => (false, text.strip_prefix('+').unwrap_or(text)),
    };
    if unsigned == "0" {
        return Ok(Duration::ZERO);
    }
    if unsigned.is_empty() {
        return Err(invalid());
    }
    let mut total_nanos: u128 = 0;
    let mut rest = unsigned;
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(invalid)?;
        let (number, tail) = rest.split_at(number_len);
        let unit_len = tail
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(tail.len());
        let (unit, tail) = tail.split_at(unit_len);
        let unit_nanos: u128 = match unit {
            "ns" => 1,
            "us" | "µs" | "μs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60 * 1_000_000_000,
            "h" => 60 * 60 * 1_000_000_000,
            _ => return Err(invalid()),
        };
        let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
        if (whole.is_empty() && fraction.is_empty()) || fraction.contains('.') {
            return Err(invalid());
        }
        let overflow = || ParseDurationError::Overflow(text.to_owned());
        let whole: u128 = if whole.is_empty() {
            0
        } else {
            whole.parse().map_err(|_| overflow())?
        };
        // Digits past nanosecond precision cannot change the result; ignore them. The at most
        // 18 ASCII digits left are read as they are, so reading them cannot fail.
        let fraction = &fraction[..fraction.len().min(18)];
        let digits = fraction
            .bytes()
            .fold(0u128, |n, digit| n * 10 + u128::from(digit - b'0'));
        let fraction_nanos = digits * unit_nanos / 10u128.pow(fraction.len() as u32);
        total_nanos = whole
            .checked_mul(unit_nanos)
            .and_then(|n| n.checked_add(fraction_nanos))
            .and_then(|n| n.checked_add(total_nanos))
            .ok_or_else(overflow)?;
        rest = tail;
    }
    let nanos = u64::try_from(total_nanos)
        .ok()
        .filter(|n| *n <= i64::MAX as u64)
        .ok_or_else(|| ParseDurationError::Overflow(text.to_owned()))?;
    if negative && nanos > 0 {
        return Err(ParseDurationError::Negative(text.to_owned()));
    }
    Ok(Duration::from_nanos(nanos))
}

#[cfg(test)]
mod tests;
