//! The verdict a finished CustomRun reached (pure), read from what the run's status says: its
//! reason, its results (`phase`, `promoted-digest`, `previous-digest`), the target it recorded
//! and when it completed. A run that changed nothing on the served tag (`AlreadyPromoted`, a
//! refusal) reached none.

use chrono::{DateTime, Utc};
use kube::ResourceExt;

use crate::api::CustomRun;
use crate::controller::status::{Target, phase, reason, results};

use super::event::{Kind, Verdict};

/// The verdict of the finished `run`, if it reached one.
pub(crate) fn verdict(run: &CustomRun) -> Option<Verdict> {
    let status = run.status.as_ref()?;
    let condition = run.succeeded_condition()?;
    let target = Target::recorded(run)?;
    let result = |name: &str| {
        status
            .results
            .iter()
            .find(|r| r.name == name)
            .map(|r| r.value.clone())
            .unwrap_or_default()
    };
    let run_reason = condition.reason.clone().unwrap_or_default();
    let promoted = result(results::PROMOTED_DIGEST);
    let kind = match (run_reason.as_str(), result(results::PHASE).as_str()) {
        (reason::VALIDATING, phase::VALIDATING) => Kind::Validating,
        (reason::PROMOTED, phase::PROMOTED) if !promoted.is_empty() => Kind::Promoted,
        (reason::ROLLED_BACK, _) if !promoted.is_empty() => Kind::RolledBack,
        (_, phase::UPDATE_FAILED) if condition.status == "False" => Kind::UpdateFailed,
        _ => return None,
    };
    let digest = match kind {
        Kind::Promoted | Kind::RolledBack => promoted.clone(),
        _ => target.digest.clone().unwrap_or_default(),
    };
    let served = match kind {
        Kind::Promoted | Kind::RolledBack => promoted,
        _ => result(results::PREVIOUS_DIGEST),
    };
    let time = status
        .completion_time
        .as_ref()
        .and_then(|t| DateTime::parse_from_rfc3339(&t.0.to_string()).ok())
        .map_or(DateTime::<Utc>::UNIX_EPOCH, |t| t.with_timezone(&Utc));
    Some(Verdict {
        kind,
        namespace: run.namespace().unwrap_or_default(),
        imagestream: target.imagestream,
        served_tag: target.served_tag,
        digest,
        served_digest: served,
        previous_digest: match kind {
            Kind::Promoted | Kind::RolledBack => result(results::PREVIOUS_DIGEST),
            _ => String::new(),
        },
        reason: run_reason,
        message: condition.message.clone().unwrap_or_default(),
        customrun: Some(run.name_any()),
        key: run.uid().unwrap_or_else(|| run.name_any()),
        time,
    })
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    /// A finished run of `action` on `jupyter` that ended `reason` (`succeeded`), with results.
    fn run(action: &str, reason: &str, succeeded: bool, results: Value) -> CustomRun {
        serde_json::from_value(json!({
            "apiVersion": "tekton.dev/v1beta1", "kind": "CustomRun",
            "metadata": {"name": "pr-1-promote", "namespace": "notebooks", "uid": "u-1"},
            "spec": {"customRef": {"apiVersion": "imagegate.dev/v1alpha1", "kind": "ImagePromotion", "name": "notebooks"}},
            "status": {
                "conditions": [{"type": "Succeeded", "status": if succeeded {"True"} else {"False"}, "reason": reason, "message": "m"}],
                "completionTime": "2026-12-06T01:00:00Z",
                "results": results,
                "extraFields": {"target": {"action": action, "imagestream": "jupyter", "candidateTag": "candidate", "servedTag": "latest", "digest": "sha256:bb"}}
            }
        }))
        .unwrap()
    }

    fn results(promoted: &str, previous: &str, phase: &str) -> Value {
        json!([{"name": "promoted-digest", "value": promoted}, {"name": "previous-digest", "value": previous}, {"name": "phase", "value": phase}])
    }

    #[test]
    fn each_served_tag_change_is_a_verdict() {
        let v = verdict(&run(
            "promote",
            "Promoted",
            true,
            results("sha256:bb", "sha256:aa", "Promoted"),
        ))
        .unwrap();
        assert_eq!(
            (v.kind, v.digest.as_str(), v.previous_digest.as_str()),
            (Kind::Promoted, "sha256:bb", "sha256:aa")
        );
        assert_eq!(v.key, "u-1");
        assert_eq!(v.time.to_rfc3339(), "2026-12-06T01:00:00+00:00");
        let v = verdict(&run(
            "begin",
            "Validating",
            true,
            results("", "sha256:aa", "Validating"),
        ))
        .unwrap();
        assert_eq!(
            (v.kind, v.digest.as_str(), v.served_digest.as_str()),
            (Kind::Validating, "sha256:bb", "sha256:aa")
        );
        let v = verdict(&run(
            "reject",
            "Rejected",
            false,
            results("", "sha256:aa", "UpdateFailed"),
        ))
        .unwrap();
        assert_eq!(
            (v.kind, v.digest.as_str()),
            (Kind::UpdateFailed, "sha256:bb")
        );
        let v = verdict(&run(
            "promote",
            "ValidationFailed",
            false,
            results("", "sha256:aa", "UpdateFailed"),
        ))
        .unwrap();
        assert_eq!(v.kind, Kind::UpdateFailed);
        let v = verdict(&run(
            "rollback",
            "RolledBack",
            true,
            results("sha256:aa", "sha256:bb", "RolledBack"),
        ))
        .unwrap();
        assert_eq!((v.kind, v.digest.as_str()), (Kind::RolledBack, "sha256:aa"));
    }

    #[test]
    fn a_run_that_changed_nothing_reached_no_verdict() {
        assert_eq!(
            verdict(&run(
                "promote",
                "AlreadyPromoted",
                true,
                results("", "sha256:aa", "Promoted")
            )),
            None
        );
        assert_eq!(
            verdict(&run("promote", "Forbidden", false, json!([]))),
            None
        );
        assert_eq!(
            verdict(&run("begin", "CandidateMoved", false, results("", "", ""))),
            None
        );
    }
}
