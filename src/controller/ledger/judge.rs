//! Where a governed stream's candidate stands, read from the stream alone (pure): settled (it
//! has its verdict, or there is no candidate), waiting for its validation to begin (since the
//! candidate's import), or being validated (the served tag says `Validating` for it); and
//! whether the candidate tag's last import failed and the served tag is `UpdateFailed`.

use crate::api::ImageStream;
use crate::controller::decide::annotation;
use crate::controller::status::phase;

/// The candidate and served tag names the stream's policy sets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Tags {
    /// The candidate tag (scheduled import).
    pub candidate: String,
    /// The served tag.
    pub served: String,
}

/// Where the current candidate stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Standing {
    /// No candidate, or it has its verdict: served, failed, or rolled back from.
    Settled,
    /// Nothing began validating `digest`, which the candidate tag has pointed at since `since`
    /// (its import; None when the stream does not say).
    Waiting {
        digest: String,
        since: Option<k8s_openapi::jiff::Timestamp>,
    },
    /// The served tag says `Validating` for `digest`, marked by the `begin` CustomRun `run`.
    Validating { digest: String, run: String },
}

/// What the ledger reads of one stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Judged {
    /// Where its candidate stands.
    pub standing: Standing,
    /// The candidate tag's failed import (`ImportSuccess=False`): its message.
    pub import_failing: Option<String>,
    /// Whether the served tag's phase is `UpdateFailed`.
    pub update_failed: bool,
}

/// Judges `is` under `tags`.
pub(crate) fn judge(is: &ImageStream, tags: &Tags) -> Judged {
    let served = is
        .spec_tag(&tags.served)
        .and_then(|t| t.annotations.clone())
        .unwrap_or_default();
    let get = |k: &str| served.get(k).map(String::as_str).unwrap_or("");
    let import_failing = is.import_failure(&tags.candidate).map(|c| {
        c.message
            .clone()
            .or_else(|| c.reason.clone())
            .unwrap_or_else(|| "the import failed".into())
    });
    let update_failed = get(annotation::PHASE) == phase::UPDATE_FAILED;
    let judged = |standing| Judged {
        standing,
        import_failing: import_failing.clone(),
        update_failed,
    };
    let Some(current) = is.status_tag(&tags.candidate).and_then(|t| t.current()) else {
        return judged(Standing::Settled);
    };
    let Some(digest) = current.digest().map(str::to_string) else {
        return judged(Standing::Settled);
    };
    let listed = |key: &str| get(key).split(',').any(|d| d.trim() == digest);
    let marked = get(annotation::CANDIDATE_DIGEST) == digest;
    let verdict = is.current_digest(&tags.served) == Some(digest.as_str())
        || (marked && get(annotation::PHASE) == phase::UPDATE_FAILED)
        // A rolled-back digest is refused at promote unless a policy allows it: its verdict.
        || listed(annotation::ROLLED_BACK_DIGESTS);
    if verdict {
        return judged(Standing::Settled);
    }
    if marked && get(annotation::PHASE) == phase::VALIDATING {
        return judged(Standing::Validating {
            digest,
            run: get(annotation::CUSTOMRUN).to_string(),
        });
    }
    judged(Standing::Waiting {
        digest,
        since: current.created.as_ref().map(|t| t.0),
    })
}

#[cfg(test)]
mod tests {
    //! Each way a candidate can stand, read from the stream.

    use serde_json::{Value, json};

    use super::*;

    const A: &str = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    const B: &str = "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

    fn tags() -> Tags {
        Tags {
            candidate: "candidate".into(),
            served: "latest".into(),
        }
    }

    /// `nb` whose candidate points at `candidate` (imported at 10:00), served `served`, with the
    /// served tag's `annotations` and the candidate's `conditions`.
    fn stream(
        candidate: Option<&str>,
        served: &str,
        annotations: Value,
        conditions: Value,
    ) -> ImageStream {
        let ev = |d: &str| json!({"created": "2026-12-01T10:00:00Z", "dockerImageReference": format!("quay.io/org/nb@{d}"), "image": d, "generation": 2});
        let items: Vec<Value> = candidate.into_iter().map(ev).collect();
        serde_json::from_value(json!({
        "metadata": {"name": "nb", "namespace": "ds"},
        "spec": {"tags": [
            {"name": "candidate", "from": {"kind": "DockerImage", "name": "quay.io/org/nb:latest"}},
            {"name": "latest", "annotations": annotations, "from": {"kind": "ImageStreamImage", "name": format!("nb@{served}")}}
        ]},
        "status": {"dockerImageRepository": "", "tags": [
            {"tag": "candidate", "items": if items.is_empty() { Value::Null } else { json!(items) }, "conditions": conditions},
            {"tag": "latest", "items": [ev(served)]}
        ]}
    }))
    .unwrap()
    }

    #[test]
    fn a_candidate_nothing_began_validating_waits_since_its_import() {
        let j = judge(&stream(Some(B), A, json!({}), json!([])), &tags());
        assert_eq!(
            j.standing,
            Standing::Waiting {
                digest: B.into(),
                since: Some("2026-12-01T10:00:00Z".parse().unwrap())
            }
        );
        // Marked for an older candidate: this one still waits.
        let older = json!({annotation::PHASE: "Validating", annotation::CANDIDATE_DIGEST: A});
        assert!(matches!(
            judge(&stream(Some(B), A, older, json!([])), &tags()).standing,
            Standing::Waiting { .. }
        ));
    }

    #[test]
    fn a_candidate_being_validated_names_its_begin_run() {
        let marked = json!({annotation::PHASE: "Validating", annotation::CANDIDATE_DIGEST: B, annotation::CUSTOMRUN: "imagegate-1-begin"});
        assert_eq!(
            judge(&stream(Some(B), A, marked, json!([])), &tags()).standing,
            Standing::Validating {
                digest: B.into(),
                run: "imagegate-1-begin".into()
            }
        );
    }

    #[test]
    fn a_candidate_with_its_verdict_is_settled() {
        let cases = [
            // Served.
            stream(
                Some(B),
                B,
                json!({annotation::PHASE: "Promoted"}),
                json!([]),
            ),
            // Failed, the served tag kept.
            stream(
                Some(B),
                A,
                json!({annotation::PHASE: "UpdateFailed", annotation::CANDIDATE_DIGEST: B}),
                json!([]),
            ),
            // Rolled back from: refused at promote.
            stream(
                Some(B),
                A,
                json!({annotation::PHASE: "RolledBack", annotation::ROLLED_BACK_DIGESTS: format!("{A}, {B}")}),
                json!([]),
            ),
            // No candidate yet.
            stream(None, A, json!({}), json!([])),
        ];
        for is in &cases {
            assert_eq!(judge(is, &tags()).standing, Standing::Settled, "{is:?}");
        }
    }

    #[test]
    fn a_failing_import_and_a_failed_update_are_read() {
        let failing = json!([{"type": "ImportSuccess", "status": "False", "reason": "Unauthorized", "message": "unauthorized: access to quay.io/org/nb denied", "generation": 3}]);
        let failed = json!({annotation::PHASE: "UpdateFailed", annotation::CANDIDATE_DIGEST: B});
        let j = judge(&stream(Some(B), A, failed, failing), &tags());
        assert_eq!(
            j.import_failing.as_deref(),
            Some("unauthorized: access to quay.io/org/nb denied")
        );
        assert!(j.update_failed);
        let j = judge(&stream(Some(B), B, json!({}), json!([])), &tags());
        assert_eq!((j.import_failing, j.update_failed), (None, false));
    }
}
