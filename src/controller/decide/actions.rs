//! One decision per action, each over the stream as read: `begin` marks the served tag
//! `Validating`, `promote` moves it to the validated candidate (after the checks), `reject`
//! marks it `UpdateFailed`, `rollback` returns it to a digest it served before. None of them
//! writes when the served tag already says what the write would.

use crate::api::ImageStream;
use crate::controller::params::Validation;
use crate::controller::status::{Outcome, phase, reason};

use super::gates::{Checked, one_platform, proven, run_checks, signed};
use super::rollback::{
    gate_served, keep_previous, kept_previous, rolled_back, with_promoted, with_rolled_back,
    without_rolled_back,
};
use super::served::{
    MovedPast, already_serving, candidate_moved, current_digest, display, mark, mark_failed,
    moved_past, outcome, patch, pin, pinned_digest, served_annotations,
};
use super::{Ask, Decision, Fetched, annotation};

/// `begin`: marks the served tag `Validating` for the candidate, which it keeps serving.
pub(super) fn begin(ask: &Ask, is: &ImageStream, fetched: &Fetched) -> Decision {
    let t = ask.target;
    let served = t.served_tag.as_str();
    let served_now = current_digest(is, served).unwrap_or_default().to_string();
    let digest = t.digest.clone().unwrap_or_default();
    if current_digest(is, &t.candidate_tag) != Some(digest.as_str()) {
        return candidate_moved(is, t, &digest);
    }
    if served_now == digest {
        // Nothing to validate for users: leave no Validating mark a promote would not clear.
        return already_serving(is, served, &digest, phase::PROMOTED, vec![]);
    }
    // Fail fast: an index would be refused at promote after the whole validation.
    if let Some(refused) = one_platform(ask, is, fetched, &digest) {
        return refused;
    }
    // So would a candidate its publisher did not sign: the pipeline fails at once.
    let signed = match signed(ask, is, fetched, &digest) {
        Checked::Passed(signed) => signed,
        Checked::Decided(decided) => return decided,
    };
    let marks = [
        (annotation::PHASE, Some(phase::VALIDATING.to_string())),
        (annotation::CANDIDATE_DIGEST, Some(digest.clone())),
        (
            annotation::MESSAGE,
            Some(format!("validating candidate {digest}")),
        ),
        (annotation::CUSTOMRUN, Some(ask.run_name.to_string())),
    ];
    let message = format!(
        "{served} keeps serving {} while {digest} is validated",
        display(&served_now)
    );
    let result = outcome(
        true,
        reason::VALIDATING,
        message,
        "",
        &served_now,
        phase::VALIDATING,
        signed,
    );
    mark(is, served, &marks, result)
}

/// `reject`: marks the served tag `UpdateFailed` for the candidate, and fails.
pub(super) fn reject(ask: &Ask, is: &ImageStream) -> Decision {
    let digest = ask.target.digest.clone().unwrap_or_default();
    let message = validation_failed(ask, is, &digest);
    mark_failed(is, ask, &digest, reason::REJECTED, message, vec![])
}

/// `promote`: after a successful validation, its proof and passing checks, points the served
/// tag at the candidate; a failed validation or check marks it `UpdateFailed` instead, and a
/// missing status or proof refuses without a write.
pub(super) fn promote(
    ask: &Ask,
    is: &ImageStream,
    fetched: &Fetched,
    now: chrono::DateTime<chrono::Utc>,
) -> Decision {
    let t = ask.target;
    let served = t.served_tag.as_str();
    let served_now = current_digest(is, served).unwrap_or_default().to_string();
    let digest = t.digest.clone().unwrap_or_default();
    match ask.validation {
        Validation::Passed => {}
        // Fail closed: no evidence, no promotion, and nothing written.
        Validation::Missing => {
            return Decision::Final(Outcome::failed(
                reason::VALIDATION_REQUIRED,
                format!(
                    "promote needs the validation-status param (e.g. $(tasks.validate.status)) to be Succeeded or Completed; it is missing, so {served} keeps {}",
                    display(&served_now)
                ),
            ));
        }
        Validation::Failed => {
            let message = validation_failed(ask, is, &digest);
            return mark_failed(is, ask, &digest, reason::VALIDATION_FAILED, message, vec![]);
        }
    }
    let rolled = rolled_back(is, served);
    let was_rolled_back = rolled.contains(&digest);
    if was_rolled_back && !ask.allow_rolled_back {
        return Decision::Final(Outcome::failed(
            reason::DIGEST_ROLLED_BACK,
            format!(
                "{digest} was rolled back from {served} ({} lists it); promote it again only \
                 where the ImagePromotion that governs the stream sets allowRolledBack (or, where \
                 none governs it, with the param allow-rolled-back: \"true\"); {served} keeps {}",
                annotation::ROLLED_BACK_DIGESTS,
                display(&served_now)
            ),
        ));
    }
    // The candidate may have moved on while this digest was validated: it is still promoted if
    // it is newer than what is served, so a candidate that moves faster than validation
    // finishes cannot starve the served tag; never backwards.
    let moved_on = current_digest(is, &t.candidate_tag)
        .filter(|now| *now != digest)
        .map(str::to_string);
    if moved_on.is_some()
        && let MovedPast::NotNewer(why) = moved_past(is, t, &digest, &served_now)
    {
        return Decision::Final(Outcome::failed(reason::CANDIDATE_MOVED, why));
    }
    let mut checks_done = match proven(ask, fetched, &digest, &served_now) {
        Checked::Passed(records) => records,
        Checked::Decided(decided) => return decided,
    };
    if let Some(refused) = one_platform(ask, is, fetched, &digest) {
        return refused;
    }
    match signed(ask, is, fetched, &digest) {
        Checked::Passed(signed) => checks_done.extend(signed),
        Checked::Decided(decided) => return decided,
    };
    match run_checks(ask, is, fetched.image.as_ref(), now, &digest) {
        Checked::Passed(outcomes) => checks_done.extend(outcomes),
        Checked::Decided(decision) => return decision,
    };
    // A DockerImage pin that waits for its import already serves the digest as far as a
    // promotion goes; one whose import failed does not (the real server kept the old image
    // served, and said so only in a condition): it is pinned again, and imported again.
    let pinned = pinned_digest(is, served) == Some(digest.as_str());
    let failed_pin = pinned && served_now != digest && is.import_failure(served).is_some();
    if served_now == digest || (pinned && !failed_pin) {
        return already_serving(is, served, &digest, phase::PROMOTED, checks_done);
    }
    let mut message = format!(
        "{served} promoted from {} to {digest}",
        display(&served_now)
    );
    if let Some(now) = &moved_on {
        message.push_str(&format!(
            "; {}:{} has since moved on to {now}, which gets its own run",
            t.imagestream, t.candidate_tag
        ));
    }
    if failed_pin {
        let why = is.import_failure(served).and_then(|c| c.message.clone());
        message.push_str(&format!(
            "; its pin's last import had failed ({}): pinned and imported again",
            why.unwrap_or_default()
        ));
    }
    let mut marks = vec![
        (annotation::PHASE, Some(phase::PROMOTED.to_string())),
        (annotation::CANDIDATE_DIGEST, Some(digest.clone())),
        (
            annotation::PREVIOUS_DIGEST,
            Some(served_now.clone()).filter(|d| !d.is_empty()),
        ),
        (annotation::MESSAGE, Some(message.clone())),
        (annotation::CUSTOMRUN, Some(ask.run_name.to_string())),
        (annotation::SERVED_DIGEST, Some(digest.clone())),
        (annotation::TAMPERED_DIGEST, None),
    ];
    // The candidate moved on and its own validation has begun (the served tag says
    // `Validating` for it): that mark stays, so that what is validated now is still shown, and
    // still counted as begun by the ledger; this promotion writes only what is served.
    let newer_validating = moved_on.as_deref().is_some_and(|now| {
        let ann = served_annotations(is, served);
        ann.get(annotation::PHASE).map(String::as_str) == Some(phase::VALIDATING)
            && ann.get(annotation::CANDIDATE_DIGEST).map(String::as_str) == Some(now)
    });
    if newer_validating {
        let validation_marks = [
            annotation::PHASE,
            annotation::CANDIDATE_DIGEST,
            annotation::MESSAGE,
            annotation::CUSTOMRUN,
        ];
        marks.retain(|(key, _)| !validation_marks.contains(key));
    }
    if was_rolled_back {
        // Promoted again on purpose: no longer refused.
        let rest = without_rolled_back(&rolled, &digest);
        marks.push((annotation::ROLLED_BACK_DIGESTS, rest));
    }
    let gate_served = with_promoted(is, served, &served_now, &digest);
    marks.push((annotation::PROMOTED_DIGESTS, Some(gate_served)));
    let mut moved = pin(ask, is, &digest);
    if failed_pin {
        // The same `from` again changes nothing the import controller watches: generation 0 is
        // the API's "import now" (the TagReference.generation field's own comment).
        moved["generation"] = serde_json::json!(0);
    }
    let mut write = patch(is, served, &marks, Some(moved));
    if !served_now.is_empty() {
        let tags = (t.candidate_tag.as_str(), served, ask.previous_tag);
        keep_previous(&mut write, is, tags, &served_now);
    }
    Decision::Write {
        patch: write,
        outcome: outcome(
            true,
            reason::PROMOTED,
            message,
            &digest,
            &served_now,
            if newer_validating {
                phase::VALIDATING
            } else {
                phase::PROMOTED
            },
            checks_done,
        ),
    }
}

/// `rollback`: points the served tag back at the digest given, else the one it served before
/// (its annotation, the previous tag), and records the digest it leaves. It returns only to a
/// digest the gate served on the tag, and never to one rolled back unless that is allowed.
pub(super) fn rollback(ask: &Ask, is: &ImageStream) -> Decision {
    let t = ask.target;
    let served = t.served_tag.as_str();
    let served_now = current_digest(is, served).unwrap_or_default().to_string();
    let kept = kept_previous(is, ask.previous_tag, served);
    let to = t
        .digest
        .clone()
        .or_else(|| served_annotations(is, served).remove(annotation::PREVIOUS_DIGEST))
        .or_else(|| kept.map(str::to_string));
    let Some(to) = to.filter(|d| !d.is_empty()) else {
        return Decision::Final(Outcome::failed(
            reason::INVALID_PARAMS,
            format!("{served} has no previous digest to roll back to; give the digest param"),
        ));
    };
    let keeps = format!("{served} keeps {}", display(&served_now));
    if !gate_served(is, served, ask.previous_tag).contains(&to) {
        return Decision::Final(Outcome::failed(
            reason::NOT_SERVED_BY_GATE,
            format!(
                "{to} was never served by the gate on {}:{served} (it lists what it served in \
                 {}); a rollback returns only to a digest the gate promoted, or to the one served \
                 before its first promotion; {keeps}",
                t.imagestream,
                annotation::PROMOTED_DIGESTS
            ),
        ));
    }
    let rolled = rolled_back(is, served);
    let was_rolled_back = rolled.contains(&to);
    if was_rolled_back && !ask.allow_rolled_back {
        return Decision::Final(Outcome::failed(
            reason::DIGEST_ROLLED_BACK,
            format!(
                "{to} was rolled back from {served} ({} lists it); a rollback serves it again only \
                 where the ImagePromotion that governs the stream sets allowRolledBack; {keeps}",
                annotation::ROLLED_BACK_DIGESTS
            ),
        ));
    }
    if served_now == to {
        return already_serving(is, served, &to, "", vec![]);
    }
    let message = format!("{served} rolled back from {} to {to}", display(&served_now));
    let mut marks = vec![
        (annotation::PHASE, Some(phase::ROLLED_BACK.to_string())),
        (
            annotation::PREVIOUS_DIGEST,
            Some(served_now.clone()).filter(|d| !d.is_empty()),
        ),
        (annotation::MESSAGE, Some(message.clone())),
        (annotation::CUSTOMRUN, Some(ask.run_name.to_string())),
        (annotation::SERVED_DIGEST, Some(to.clone())),
        (annotation::TAMPERED_DIGEST, None),
    ];
    let rolled = if was_rolled_back {
        without_rolled_back(&rolled, &to).map(|rest| rest.split(',').map(str::to_string).collect())
    } else {
        Some(rolled)
    };
    if !served_now.is_empty() {
        let rolled = with_rolled_back(&rolled.unwrap_or_default(), &served_now);
        marks.push((annotation::ROLLED_BACK_DIGESTS, Some(rolled)));
    } else if was_rolled_back {
        marks.push((annotation::ROLLED_BACK_DIGESTS, rolled.map(|r| r.join(","))));
    }
    Decision::Write {
        patch: patch(is, served, &marks, Some(pin(ask, is, &to))),
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

/// The message of a validation the pipeline reported as failed.
fn validation_failed(ask: &Ask, is: &ImageStream, digest: &str) -> String {
    let served = &ask.target.served_tag;
    let served_now = current_digest(is, served).unwrap_or_default();
    format!(
        "validation of {digest} failed (validation-status {:?}); {served} keeps {}",
        ask.validation_status,
        display(served_now)
    )
}
