//! The decision of a run, as a pure function of what it asks for and what the ImageStream and
//! the candidate image look like now: which one write (if any) to make to the served tag, and
//! the outcome to report. Every branch that writes is conditional on the resourceVersion the
//! decision was made from, so a concurrent change makes the caller re-read and decide again.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::api::ImageStream;

use super::checks::{self, CheckOutcome, ImageFacts};
use super::params::checks::ParsedChecks;

use super::params::Action;
use super::status::{Outcome, Target, phase, reason};

/// The served-tag annotations imagegate maintains.
pub mod annotation {
    /// `Validating`, `Promoted`, `UpdateFailed` or `RolledBack`.
    pub const PHASE: &str = "imagegate.dev/phase";
    /// The candidate digest the phase is about.
    pub const CANDIDATE_DIGEST: &str = "imagegate.dev/candidate-digest";
    /// The digest served before the last promotion or rollback (what a rollback returns to).
    pub const PREVIOUS_DIGEST: &str = "imagegate.dev/previous-digest";
    /// A human-readable explanation of the phase.
    pub const MESSAGE: &str = "imagegate.dev/message";
    /// The CustomRun that set the phase.
    pub const CUSTOMRUN: &str = "imagegate.dev/customrun";
}

/// Everything a decision needs besides the stream.
#[derive(Clone, Debug)]
pub struct Ask<'a> {
    /// The recorded target.
    pub target: &'a Target,
    /// The run's name (written to the served tag).
    pub run_name: &'a str,
    /// The raw `validation-status`.
    pub validation_status: &'a str,
    /// Whether that status means validation failed.
    pub validation_failed: bool,
    /// The checks to run on the candidate image.
    pub checks: &'a ParsedChecks,
}

/// What to do next.
#[derive(Clone, Debug, PartialEq)]
pub enum Decision {
    /// The run is over without a write.
    Final(Outcome),
    /// The checks need the candidate image's metadata (`imagestreamimages/{is}@{digest}`).
    NeedImage {
        /// The candidate digest.
        digest: String,
        /// Its pull spec from the candidate tag's history (what allowed registries check).
        reference: String,
    },
    /// Patch the ImageStream (strategic merge with a resourceVersion precondition), then
    /// report the outcome.
    Write {
        /// The patch body.
        patch: Value,
        /// The outcome once the patch is applied.
        outcome: Outcome,
    },
}

fn current_digest<'s>(is: &'s ImageStream, tag: &str) -> Option<&'s str> {
    is.current_digest(tag)
}

fn served_annotations(is: &ImageStream, served: &str) -> BTreeMap<String, String> {
    is.spec_tag(served)
        .and_then(|t| t.annotations.clone())
        .unwrap_or_default()
}

/// Whether the served tag has served `digest` before (a rollback only returns to those: a
/// digest that was only ever a candidate was never validated for users).
fn served_before(is: &ImageStream, served: &str, digest: &str) -> bool {
    is.status.as_ref().is_some_and(|s| {
        s.tags
            .iter()
            .filter(|t| t.tag == served)
            .any(|t| t.items.iter().flatten().any(|e| e.digest() == Some(digest)))
    })
}

/// The pull spec of `digest`, from the candidate tag's history first (that is the reference
/// the scheduled import resolved), else from any tag's.
fn reference_of(is: &ImageStream, candidate: &str, digest: &str) -> Option<String> {
    is.status.as_ref().and_then(|s| {
        let mut tags: Vec<_> = s.tags.iter().collect();
        tags.sort_by_key(|t| t.tag != candidate);
        tags.into_iter().find_map(|t| {
            t.items
                .iter()
                .flatten()
                .find(|e| e.digest() == Some(digest))
                .map(|e| e.docker_image_reference.clone())
        })
    })
}

/// The strategic-merge patch of the served tag: `annotations` (a `None` value removes the
/// key) and, when promoting, `from: ImageStreamImage {is}@{digest}` as `oc tag` writes it.
/// Other fields of the tag are kept by the merge on `name`.
fn patch(
    is: &ImageStream,
    served: &str,
    annotations: &[(&str, Option<String>)],
    to: Option<&str>,
) -> Value {
    let name = is.metadata.name.clone().unwrap_or_default();
    let mut ann = serde_json::Map::new();
    for (k, v) in annotations {
        ann.insert(
            (*k).into(),
            v.clone().map(Value::String).unwrap_or(Value::Null),
        );
    }
    let mut tag = json!({ "name": served, "annotations": ann });
    if let Some(digest) = to {
        tag["from"] = json!({
            "kind": "ImageStreamImage",
            "name": format!("{name}@{digest}"),
            "namespace": is.metadata.namespace,
        });
    }
    json!({
        "metadata": { "resourceVersion": is.metadata.resource_version },
        "spec": { "tags": [tag] },
    })
}

/// Whether the served tag's annotations already say what a write would make them say.
fn annotations_hold(is: &ImageStream, served: &str, want: &[(&str, Option<String>)]) -> bool {
    let have = served_annotations(is, served);
    want.iter().all(|(k, v)| have.get(*k) == v.as_ref())
}

fn outcome(
    succeeded: bool,
    reason: &'static str,
    message: String,
    promoted: &str,
    previous: &str,
    phase: &str,
    checks: Vec<CheckOutcome>,
) -> Outcome {
    Outcome {
        succeeded,
        reason,
        message,
        promoted_digest: promoted.into(),
        previous_digest: previous.into(),
        phase: phase.into(),
        checks,
    }
}

/// Marks the served tag `UpdateFailed` for `digest` (old image kept, not hidden) and fails.
fn mark_failed(
    is: &ImageStream,
    ask: &Ask,
    digest: &str,
    why: &'static str,
    message: String,
    checks: Vec<CheckOutcome>,
) -> Decision {
    let served = &ask.target.served_tag;
    let previous = current_digest(is, served).unwrap_or_default().to_string();
    let want = [
        (annotation::PHASE, Some(phase::UPDATE_FAILED.to_string())),
        (annotation::CANDIDATE_DIGEST, Some(digest.to_string())),
        (annotation::MESSAGE, Some(message.clone())),
        (annotation::CUSTOMRUN, Some(ask.run_name.to_string())),
    ];
    let result = outcome(
        false,
        why,
        message,
        "",
        &previous,
        phase::UPDATE_FAILED,
        checks,
    );
    if annotations_hold(is, served, &want) {
        return Decision::Final(result);
    }
    Decision::Write {
        patch: patch(is, served, &want, None),
        outcome: result,
    }
}

/// The outcome of this run if its write is already on the served tag (the served tag's
/// `imagegate.dev/customrun` names it, with the phase its action writes): a restarted or
/// cancelled run reports what happened instead of deciding again.
pub fn landed(ask: &Ask, is: &ImageStream) -> Option<Outcome> {
    let t = ask.target;
    let served = t.served_tag.as_str();
    let ann = served_annotations(is, served);
    if ann.get(annotation::CUSTOMRUN).map(String::as_str) != Some(ask.run_name) {
        return None;
    }
    let phase_now = ann
        .get(annotation::PHASE)
        .map(String::as_str)
        .unwrap_or_default();
    let candidate = ann
        .get(annotation::CANDIDATE_DIGEST)
        .cloned()
        .unwrap_or_default();
    let previous = ann
        .get(annotation::PREVIOUS_DIGEST)
        .cloned()
        .unwrap_or_default();
    let message = ann.get(annotation::MESSAGE).cloned().unwrap_or_default();
    let served_now = current_digest(is, served).unwrap_or_default().to_string();
    let digest = t.digest.clone().unwrap_or_default();
    let (ok, why, promoted) = match (t.action, phase_now) {
        (Action::Promote, phase::PROMOTED) if served_now == digest => {
            (true, reason::PROMOTED, digest.as_str())
        }
        (Action::Rollback, phase::ROLLED_BACK) => (true, reason::ROLLED_BACK, served_now.as_str()),
        (Action::Begin, phase::VALIDATING) if candidate == digest => (true, reason::VALIDATING, ""),
        (Action::Reject, phase::UPDATE_FAILED) if candidate == digest => {
            (false, reason::REJECTED, "")
        }
        _ => return None,
    };
    Some(outcome(
        ok,
        why,
        message,
        promoted,
        &previous,
        phase_now,
        vec![],
    ))
}

/// Decides a run against the current stream. `image` is the candidate's metadata once
/// [`Decision::NeedImage`] asked for it.
pub fn decide(
    ask: &Ask,
    is: &ImageStream,
    image: Option<&ImageFacts>,
    now: chrono::DateTime<chrono::Utc>,
) -> Decision {
    let t = ask.target;
    let served = t.served_tag.as_str();
    let served_now = current_digest(is, served).unwrap_or_default().to_string();
    let ann = served_annotations(is, served);
    // A restart after our own write landed: finish, never write twice.
    if let Some(done) = landed(ask, is) {
        return Decision::Final(done);
    }
    match t.action {
        Action::Begin => {
            let digest = t.digest.clone().unwrap_or_default();
            if current_digest(is, &t.candidate_tag) != Some(digest.as_str()) {
                return candidate_moved(is, t, &digest);
            }
            if served_now == digest {
                // Nothing to validate for users: leave no Validating mark a promote would not clear.
                return already_serving(served, &digest, &ann, phase::PROMOTED, vec![]);
            }
            let message = format!("validating candidate {digest}");
            let want = [
                (annotation::PHASE, Some(phase::VALIDATING.to_string())),
                (annotation::CANDIDATE_DIGEST, Some(digest.clone())),
                (annotation::MESSAGE, Some(message.clone())),
                (annotation::CUSTOMRUN, Some(ask.run_name.to_string())),
            ];
            let result = outcome(
                true,
                reason::VALIDATING,
                format!(
                    "{served} keeps serving {} while {digest} is validated",
                    display(&served_now)
                ),
                "",
                &served_now,
                phase::VALIDATING,
                vec![],
            );
            if annotations_hold(is, served, &want) {
                return Decision::Final(result);
            }
            Decision::Write {
                patch: patch(is, served, &want, None),
                outcome: result,
            }
        }
        Action::Reject => {
            let digest = t.digest.clone().unwrap_or_default();
            let message = format!(
                "validation of {digest} failed (validation-status {:?}); {served} keeps {}",
                ask.validation_status,
                display(&served_now)
            );
            mark_failed(is, ask, &digest, reason::REJECTED, message, vec![])
        }
        Action::Promote => {
            let digest = t.digest.clone().unwrap_or_default();
            if ask.validation_failed {
                let message = format!(
                    "validation of {digest} failed (validation-status {:?}); {served} keeps {}",
                    ask.validation_status,
                    display(&served_now)
                );
                return mark_failed(is, ask, &digest, reason::VALIDATION_FAILED, message, vec![]);
            }
            if current_digest(is, &t.candidate_tag) != Some(digest.as_str()) {
                return candidate_moved(is, t, &digest);
            }
            let mut checks_done = Vec::new();
            if !ask.checks.is_empty() {
                let Some(facts) = image else {
                    return Decision::NeedImage {
                        reference: reference_of(is, &t.candidate_tag, &digest).unwrap_or_default(),
                        digest,
                    };
                };
                checks_done = checks::evaluate(ask.checks, facts, now);
                if !checks::all_passed(&checks_done) {
                    let failed: Vec<String> = checks_done
                        .iter()
                        .filter(|c| !c.passed)
                        .map(|c| format!("{}: {}", c.name, c.message))
                        .collect();
                    let message = format!(
                        "{digest} failed {}; {served} keeps {}",
                        failed.join("; "),
                        display(&served_now)
                    );
                    return mark_failed(
                        is,
                        ask,
                        &digest,
                        reason::VALIDATION_FAILED,
                        message,
                        checks_done,
                    );
                }
            }
            if served_now == digest {
                return already_serving(served, &digest, &ann, phase::PROMOTED, checks_done);
            }
            let message = format!(
                "{served} promoted from {} to {digest}",
                display(&served_now)
            );
            let want = [
                (annotation::PHASE, Some(phase::PROMOTED.to_string())),
                (annotation::CANDIDATE_DIGEST, Some(digest.clone())),
                (
                    annotation::PREVIOUS_DIGEST,
                    Some(served_now.clone()).filter(|d| !d.is_empty()),
                ),
                (annotation::MESSAGE, Some(message.clone())),
                (annotation::CUSTOMRUN, Some(ask.run_name.to_string())),
            ];
            Decision::Write {
                patch: patch(is, served, &want, Some(&digest)),
                outcome: outcome(
                    true,
                    reason::PROMOTED,
                    message,
                    &digest,
                    &served_now,
                    phase::PROMOTED,
                    checks_done,
                ),
            }
        }
        Action::Rollback => {
            let to = t
                .digest
                .clone()
                .or_else(|| ann.get(annotation::PREVIOUS_DIGEST).cloned())
                .or_else(|| previous_in_history(is, served, &served_now));
            let Some(to) = to.filter(|d| !d.is_empty()) else {
                return Decision::Final(Outcome::failed(
                    reason::INVALID_PARAMS,
                    format!(
                        "{served} has no previous digest to roll back to; give the digest param"
                    ),
                ));
            };
            if !served_before(is, served, &to) {
                return Decision::Final(Outcome::failed(
                    reason::INVALID_PARAMS,
                    format!(
                        "{to} is not in the history of {}:{served}; a rollback returns only to a digest the served tag served before",
                        t.imagestream
                    ),
                ));
            }
            if served_now == to {
                return already_serving(served, &to, &ann, "", vec![]);
            }
            let message = format!("{served} rolled back from {} to {to}", display(&served_now));
            let want = [
                (annotation::PHASE, Some(phase::ROLLED_BACK.to_string())),
                (
                    annotation::PREVIOUS_DIGEST,
                    Some(served_now.clone()).filter(|d| !d.is_empty()),
                ),
                (annotation::MESSAGE, Some(message.clone())),
                (annotation::CUSTOMRUN, Some(ask.run_name.to_string())),
            ];
            Decision::Write {
                patch: patch(is, served, &want, Some(&to)),
                outcome: outcome(
                    true,
                    reason::ROLLED_BACK,
                    message,
                    &to,
                    &served_now,
                    phase::ROLLED_BACK,
                    vec![],
                ),
            }
        }
    }
}

/// `AlreadyPromoted`: the served tag already serves `digest`; nothing is written, and the
/// results report the tag's annotations as they are (`phase` defaults to `default_phase`).
fn already_serving(
    served: &str,
    digest: &str,
    ann: &BTreeMap<String, String>,
    default_phase: &str,
    checks: Vec<CheckOutcome>,
) -> Decision {
    let get = |k: &str| ann.get(k).map(String::as_str);
    Decision::Final(outcome(
        true,
        reason::ALREADY_PROMOTED,
        format!("{served} already serves {digest}"),
        digest,
        get(annotation::PREVIOUS_DIGEST).unwrap_or(""),
        get(annotation::PHASE).unwrap_or(default_phase),
        checks,
    ))
}

fn display(digest: &str) -> &str {
    if digest.is_empty() { "nothing" } else { digest }
}

fn candidate_moved(is: &ImageStream, t: &Target, digest: &str) -> Decision {
    let now = current_digest(is, &t.candidate_tag).unwrap_or("nothing");
    Decision::Final(Outcome::failed(
        reason::CANDIDATE_MOVED,
        format!(
            "{}:{} now points at {now}, not at the validated {digest}; the newer candidate gets its own run",
            t.imagestream, t.candidate_tag
        ),
    ))
}

/// The digest the served tag pointed at before its current one.
fn previous_in_history(is: &ImageStream, served: &str, current: &str) -> Option<String> {
    is.status
        .as_ref()?
        .tags
        .iter()
        .find(|t| t.tag == served)?
        .items
        .iter()
        .flatten()
        .filter_map(|e| e.digest())
        .find(|d| *d != current)
        .map(str::to_string)
}

#[cfg(test)]
mod tests;
