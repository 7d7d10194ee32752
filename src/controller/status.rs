//! The CustomRun status the controller writes, computed as pure functions of the run, the
//! clock and the outcome. Results and the final condition always travel in one status write,
//! because the pipeline controller resolves `$(tasks.x.results.y)` the moment the run is done.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::api::{Condition, CustomRun, CustomRunResult, CustomRunStatus};

use super::checks::CheckOutcome;
use super::params::{Action, Request};

/// Condition reasons (Tekton's where the contract fixes them).
pub mod reason {
    /// The run has started (Tekton's `InitializeConditions`).
    pub(crate) const STARTED: &str = "Started";
    /// A failed attempt is being retried.
    pub(crate) const RETRYING: &str = "Retrying";
    /// `begin` marked the served tag Validating.
    pub(crate) const VALIDATING: &str = "Validating";
    /// The served tag now points at the validated digest.
    pub(crate) const PROMOTED: &str = "Promoted";
    /// The served tag already pointed at the digest: nothing written.
    pub(crate) const ALREADY_PROMOTED: &str = "AlreadyPromoted";
    /// The served tag points at the previous digest again.
    pub(crate) const ROLLED_BACK: &str = "RolledBack";
    /// Validation (pipeline status or a check) failed: served tag kept, marked UpdateFailed.
    pub(crate) const VALIDATION_FAILED: &str = "ValidationFailed";
    /// `promote` without `validation-status` (the ImagePromotion requires it): nothing written.
    pub(crate) const VALIDATION_REQUIRED: &str = "ValidationRequired";
    /// The run's service account may not `promote` the ImagePromotion: nothing written.
    pub(crate) const FORBIDDEN: &str = "Forbidden";
    /// The ImagePromotion asks for proof of validation and the run's PipelineRun does not give
    /// it: nothing written.
    pub(crate) const UNVERIFIED: &str = "Unverified";
    /// The candidate tag no longer points at the digest that was validated.
    pub(crate) const CANDIDATE_MOVED: &str = "CandidateMoved";
    /// `reject` marked the served tag UpdateFailed.
    pub(crate) const REJECTED: &str = "Rejected";
    /// Params or the ImagePromotion spec are unusable.
    pub const INVALID_PARAMS: &str = "InvalidParams";
    /// `promote` of, or `rollback` to, a digest that was rolled back, where nothing allows it:
    /// nothing written.
    pub(crate) const DIGEST_ROLLED_BACK: &str = "DigestRolledBack";
    /// A param or an inline spec names another stream or tag than the ImagePromotion that
    /// governs the stream (or the one the run names) sets, or asks for what it does not allow.
    pub(crate) const PARAM_OVERRIDES_POLICY: &str = "ParamOverridesPolicy";
    /// Two ImagePromotions that govern the stream disagree on a tag or on how to promote.
    pub(crate) const POLICY_CONFLICT: &str = "PolicyConflict";
    /// A rollback to a digest the gate never served on the served tag (neither promoted by it
    /// nor served before its first promotion).
    pub(crate) const NOT_SERVED_BY_GATE: &str = "NotServedByGate";
    /// The candidate is an image index (a manifest list): validation runs one platform, so the
    /// others would be served unvalidated; the served tag is marked UpdateFailed.
    pub(crate) const UNVALIDATED_PLATFORMS: &str = "UnvalidatedPlatforms";
    /// A signature policy asks for the publisher's signature and none over the candidate digest
    /// was found in its repository; the served tag keeps its image, marked UpdateFailed.
    pub(crate) const SIGNATURE_MISSING: &str = "SignatureMissing";
    /// Signatures over the candidate digest were found, but none by a key a signature policy
    /// trusts; the served tag keeps its image, marked UpdateFailed.
    pub(crate) const SIGNATURE_UNTRUSTED: &str = "SignatureUntrusted";
    /// The ImageStream does not exist (a missing named ImagePromotion is `InvalidParams`).
    pub(crate) const IMAGESTREAM_NOT_FOUND: &str = "ImageStreamNotFound";
    /// `spec.status: RunCancelled` (Tekton's exact reason, which PipelineRuns classify).
    pub(crate) const CANCELLED: &str = "CustomRunCancelled";
    /// The attempt ran past `spec.timeout` (Tekton's exact reason).
    pub(crate) const TIMED_OUT: &str = "CustomRunTimedOut";
}

/// Phases written to the served tag's `imagegate.dev/phase` annotation and the `phase` result.
pub mod phase {
    /// A candidate is being validated; the served tag still serves the old image.
    pub(crate) const VALIDATING: &str = "Validating";
    /// The served tag points at the validated candidate.
    pub(crate) const PROMOTED: &str = "Promoted";
    /// Validation failed; the served tag keeps the old image.
    pub(crate) const UPDATE_FAILED: &str = "UpdateFailed";
    /// The served tag points at the previous digest again.
    pub(crate) const ROLLED_BACK: &str = "RolledBack";
    /// The tag was moved by someone other than the gate (reported, not undone).
    pub(crate) const TAMPERED: &str = "Tampered";
}

/// Result names.
pub mod results {
    /// The digest the served tag points at after the run (empty if unchanged).
    pub(crate) const PROMOTED_DIGEST: &str = "promoted-digest";
    /// The digest the served tag pointed at before.
    pub(crate) const PREVIOUS_DIGEST: &str = "previous-digest";
    /// The served tag's phase after the run.
    pub(crate) const PHASE: &str = "phase";
    /// Every check's outcome, as a JSON array.
    pub(crate) const CHECKS: &str = "checks";
    /// The candidate's pull spec by digest (`<status.dockerImageRepository>@<digest>`): what
    /// the pipeline validates, so that the image validated is the digest promoted.
    pub const IMAGE: &str = "image";
}

/// What the run does, recorded in `status.extraFields.target` when it starts, so that a
/// restarted controller finishes the same run it began.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Target {
    /// The action.
    pub action: Action,
    /// The ImageStream (in the run's namespace).
    pub imagestream: String,
    /// The candidate tag.
    pub candidate_tag: String,
    /// The served tag.
    pub served_tag: String,
    /// The digest to promote, mark, or roll back to (None: rollback to the previous one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
}

impl Target {
    /// The target of a request.
    pub(crate) fn of(req: &Request) -> Target {
        Target {
            action: req.action,
            imagestream: req.imagestream.clone(),
            candidate_tag: req.candidate_tag.clone(),
            served_tag: req.served_tag.clone(),
            digest: req.digest.clone(),
        }
    }

    /// The target recorded in a run's status, if any.
    pub(crate) fn recorded(run: &CustomRun) -> Option<Target> {
        let v = run.status.as_ref()?.extra_fields.get("target")?;
        serde_json::from_value(v.clone()).ok()
    }
}

/// How a run (or one attempt of it) ended.
#[derive(Clone, Debug, PartialEq)]
pub struct Outcome {
    /// `Succeeded=True` or `False`.
    pub succeeded: bool,
    /// The condition reason (see [`reason`]).
    pub reason: &'static str,
    /// The condition message.
    pub message: String,
    /// The `promoted-digest` result.
    pub promoted_digest: String,
    /// The `previous-digest` result.
    pub previous_digest: String,
    /// The `phase` result.
    pub phase: String,
    /// The `checks` result.
    pub checks: Vec<CheckOutcome>,
    /// The `image` result (empty when the run names no digest or the stream was not read).
    pub image: String,
}

impl Outcome {
    /// A failure with no served-tag change.
    pub fn failed(reason: &'static str, message: impl Into<String>) -> Outcome {
        Outcome {
            succeeded: false,
            reason,
            message: message.into(),
            promoted_digest: String::new(),
            previous_digest: String::new(),
            phase: String::new(),
            checks: Vec::new(),
            image: String::new(),
        }
    }

    /// The same outcome reporting `image` as the `image` result.
    pub(crate) fn with_image(self, image: String) -> Outcome {
        Outcome { image, ..self }
    }

    fn results(&self) -> Vec<CustomRunResult> {
        let checks = serde_json::to_string(&self.checks).unwrap_or_else(|_| "[]".into());
        [
            (results::PROMOTED_DIGEST, self.promoted_digest.clone()),
            (results::PREVIOUS_DIGEST, self.previous_digest.clone()),
            (results::PHASE, self.phase.clone()),
            (results::CHECKS, checks),
            (results::IMAGE, self.image.clone()),
        ]
        .into_iter()
        .map(|(name, value)| CustomRunResult {
            name: name.into(),
            value,
        })
        .collect()
    }
}

fn condition(status: &str, reason: &str, message: &str, now: Timestamp) -> Condition {
    Condition {
        type_: "Succeeded".into(),
        status: status.into(),
        severity: None,
        last_transition_time: Some(Time(now)),
        reason: Some(reason.into()),
        message: Some(message.into()),
    }
}

fn current(run: &CustomRun) -> CustomRunStatus {
    run.status.clone().unwrap_or_default()
}

/// The first status of a run: `startTime`, `Succeeded=Unknown/Started`, and the target.
pub(crate) fn started(run: &CustomRun, target: &Target, now: Timestamp) -> CustomRunStatus {
    let mut s = current(run);
    s.start_time = Some(Time(now));
    s.conditions = vec![condition(
        "Unknown",
        reason::STARTED,
        &format!(
            "{} {}:{} in {}",
            target.action.as_str(),
            target.imagestream,
            target.served_tag,
            run.metadata.namespace.as_deref().unwrap_or_default()
        ),
        now,
    )];
    s.observed_generation = run.metadata.generation;
    set_target(&mut s, target);
    s
}

fn set_target(s: &mut CustomRunStatus, target: &Target) {
    if !s.extra_fields.is_object() {
        s.extra_fields = json!({});
    }
    s.extra_fields["target"] = serde_json::to_value(target).unwrap_or(Value::Null);
}

/// The status of a run whose input could not be read yet (an API error): `startTime` and
/// `Succeeded=Unknown/Started`, so that its timeout runs while the error is retried.
pub(crate) fn pending(run: &CustomRun, now: Timestamp) -> CustomRunStatus {
    let mut s = current(run);
    s.start_time = Some(Time(now));
    s.conditions = vec![condition(
        "Unknown",
        reason::STARTED,
        "reading the ImagePromotion spec",
        now,
    )];
    s.observed_generation = run.metadata.generation;
    s
}

/// The terminal status: the condition, `completionTime` and every result, in one write.
/// A run whose start was never written (bad params found first) gets its `startTime` here.
pub fn finished(run: &CustomRun, outcome: &Outcome, now: Timestamp) -> CustomRunStatus {
    let mut s = current(run);
    if s.start_time.is_none() {
        s.start_time = Some(Time(now));
    }
    s.conditions = vec![condition(
        if outcome.succeeded { "True" } else { "False" },
        outcome.reason,
        &outcome.message,
        now,
    )];
    s.completion_time = Some(Time(now));
    s.results = outcome.results();
    s.observed_generation = run.metadata.generation;
    s
}

/// A failed attempt with retries left: the attempt is archived in `retriesStatus` and a new
/// attempt starts (`Succeeded` stays Unknown, as the contract requires until retries are
/// exhausted; the timeout counts per attempt from the new `startTime`).
pub(crate) fn retrying(run: &CustomRun, failed: &Outcome, now: Timestamp) -> CustomRunStatus {
    let mut attempt = finished(run, failed, now);
    attempt.retries_status = Vec::new();
    attempt.extra_fields = Value::Null;
    let mut s = current(run);
    s.retries_status.push(attempt);
    let n = s.retries_status.len();
    s.start_time = Some(Time(now));
    s.completion_time = None;
    s.results = Vec::new();
    s.conditions = vec![condition(
        "Unknown",
        reason::RETRYING,
        &format!(
            "attempt {n} failed ({}): {}; retrying",
            failed.reason, failed.message
        ),
        now,
    )];
    s
}

/// Whether an attempt that failed this way is retried: everything but a cancellation, while
/// `spec.retries` exceeds the attempts archived.
pub(crate) fn should_retry(run: &CustomRun, failed: &Outcome) -> bool {
    !failed.succeeded
        && failed.reason != reason::CANCELLED
        && run.spec.retries.unwrap_or(0).max(0) as usize > run.retry_count()
}

/// Whether two statuses differ only in timestamps (then nothing needs writing).
pub(crate) fn same_ignoring_timestamps(a: &CustomRunStatus, b: &CustomRunStatus) -> bool {
    fn strip(s: &CustomRunStatus) -> CustomRunStatus {
        let mut s = s.clone();
        for c in &mut s.conditions {
            c.last_transition_time = None;
        }
        s.start_time = s.start_time.as_ref().map(|_| Time(Timestamp::UNIX_EPOCH));
        s.completion_time = s
            .completion_time
            .as_ref()
            .map(|_| Time(Timestamp::UNIX_EPOCH));
        s.retries_status = s.retries_status.iter().map(strip).collect();
        s
    }
    strip(a) == strip(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(retries: i32) -> CustomRun {
        serde_json::from_value(json!({
            "apiVersion": "tekton.dev/v1beta1", "kind": "CustomRun",
            "metadata": {"name": "r", "namespace": "ds", "generation": 1},
            "spec": {"customRef": {"apiVersion": "imagegate.dev/v1alpha1", "kind": "ImagePromotion"},
                     "retries": retries}
        }))
        .unwrap()
    }

    fn target() -> Target {
        Target {
            action: Action::Promote,
            imagestream: "nb".into(),
            candidate_tag: "candidate".into(),
            served_tag: "latest".into(),
            digest: Some("sha256:aa".into()),
        }
    }

    fn ts(s: i64) -> Timestamp {
        Timestamp::from_second(s).unwrap()
    }

    #[test]
    fn a_started_run_records_its_target_and_is_unknown() {
        let s = started(&run(0), &target(), ts(100));
        assert_eq!(s.conditions[0].status, "Unknown");
        assert_eq!(s.conditions[0].reason.as_deref(), Some(reason::STARTED));
        assert_eq!(s.start_time, Some(Time(ts(100))));
        let mut r = run(0);
        r.status = Some(s);
        assert_eq!(Target::recorded(&r), Some(target()));
    }

    #[test]
    fn a_finished_run_has_every_result_and_the_condition_in_one_status() {
        let outcome = Outcome {
            succeeded: true,
            reason: reason::PROMOTED,
            message: "promoted".into(),
            promoted_digest: "sha256:bb".into(),
            previous_digest: "sha256:aa".into(),
            phase: phase::PROMOTED.into(),
            checks: vec![],
            image: "registry/ds/nb@sha256:bb".into(),
        };
        let s = finished(&run(0), &outcome, ts(200));
        assert_eq!(s.conditions[0].status, "True");
        assert_eq!(s.completion_time, Some(Time(ts(200))));
        let names: Vec<_> = s.results.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(
            names,
            vec![
                "promoted-digest",
                "previous-digest",
                "phase",
                "checks",
                "image"
            ]
        );
        assert_eq!(s.results[3].value, "[]");
        assert_eq!(s.results[4].value, "registry/ds/nb@sha256:bb");
    }

    #[test]
    fn failures_are_retried_while_retries_remain_and_cancellations_never() {
        let failed = Outcome::failed(reason::TIMED_OUT, "too slow");
        let mut r = run(1);
        r.status = Some(started(&r, &target(), ts(100)));
        assert!(should_retry(&r, &failed));
        let s = retrying(&r, &failed, ts(300));
        assert_eq!(s.retries_status.len(), 1);
        assert_eq!(
            s.retries_status[0].conditions[0].reason.as_deref(),
            Some(reason::TIMED_OUT)
        );
        assert_eq!(s.retries_status[0].conditions[0].status, "False");
        assert_eq!(s.conditions[0].status, "Unknown");
        assert_eq!(s.start_time, Some(Time(ts(300))));
        assert!(
            Target::recorded(&CustomRun {
                status: Some(s.clone()),
                ..r.clone()
            })
            .is_some()
        );
        r.status = Some(s);
        assert!(!should_retry(&r, &failed), "one retry only");
        assert!(!should_retry(
            &run(3),
            &Outcome::failed(reason::CANCELLED, "stop")
        ));
    }

    #[test]
    fn timestamps_alone_do_not_make_a_status_different() {
        let a = started(&run(0), &target(), ts(100));
        let b = started(&run(0), &target(), ts(999));
        assert!(same_ignoring_timestamps(&a, &b));
        let mut other = target();
        other.digest = Some("sha256:cc".into());
        assert!(!same_ignoring_timestamps(
            &a,
            &started(&run(0), &other, ts(100))
        ));
    }
}
