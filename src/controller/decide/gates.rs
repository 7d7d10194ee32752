//! What must hold before the served tag moves to a candidate, each a pure gate over what was
//! read ([`super::Fetched`]): the proof of validation ([`proven`]), one platform
//! ([`one_platform`]), the publisher's signature ([`signed`]) and the checks ([`run_checks`]).
//! Each passes (with its outcomes for the `checks` result) or says the decision instead: read
//! something first, wait, or refuse.

use crate::api::ImageStream;
use crate::controller::checks::{self, CheckOutcome, ImageFacts};
use crate::controller::params::checks::ParsedChecks;
use crate::controller::proof::{self, Standing};
use crate::controller::status::{Outcome, reason};

use super::served::{current_digest, display, mark_failed, reference_of};
use super::{Ask, Decision, Fetched};

/// Whether the proofs asked for are shown: passed (with one `chains` outcome per proof that
/// asks for Tekton Chains' record; none asked: nothing), or the decision instead: read the
/// evidence first, wait for the PipelineRun to list the run or for Chains to sign, or
/// `Unverified` with all that is missing.
pub(super) fn proven(ask: &Ask, fetched: &Fetched, digest: &str, served_now: &str) -> Checked {
    let Some(first) = ask.proofs.first() else {
        return Checked::Passed(Vec::new());
    };
    let Some(evidence) = &fetched.evidence else {
        return Checked::Decided(Decision::NeedEvidence);
    };
    let missing = match proof::standing(evidence, ask.run_name) {
        Standing::NotListedYet(why) => return Checked::Decided(Decision::Wait(why)),
        Standing::Outside(why) => format!("{}, but {why}", first.asks()),
        Standing::Child => {
            let mut records = Vec::new();
            let mut missing: Vec<(String, bool)> = Vec::new();
            for (i, p) in ask.proofs.iter().enumerate() {
                match proof::verify(p, i, evidence, digest) {
                    Ok(shown) if !p.chains.is_empty() => records.push(CheckOutcome {
                        name: checks::CHAINS,
                        passed: true,
                        message: format!("{}: {shown}", p.asks()),
                    }),
                    Ok(_) => {}
                    Err(m) => missing.push((format!("{}: {}", p.asks(), m.why), m.not_yet)),
                }
            }
            if missing.is_empty() {
                return Checked::Passed(records);
            }
            let text: Vec<&str> = missing.iter().map(|(why, _)| why.as_str()).collect();
            // Only Chains' records still to come: a moment, not a failure.
            if missing.iter().all(|(_, not_yet)| *not_yet) {
                return Checked::Decided(Decision::Wait(text.join("; ")));
            }
            text.join("; ")
        }
    };
    let served = &ask.target.served_tag;
    Checked::Decided(Decision::Final(Outcome::failed(
        reason::UNVERIFIED,
        format!(
            "nothing proves that {digest} was validated: {missing}; {served} keeps {}",
            display(served_now)
        ),
    )))
}

/// The decision when the candidate is an image index (None: one image): a validation runs on
/// one platform, so promoting an index would serve every other platform unvalidated. Its
/// metadata is asked for first when it was not read.
pub(super) fn one_platform(
    ask: &Ask,
    is: &ImageStream,
    fetched: &Fetched,
    digest: &str,
) -> Option<Decision> {
    let t = ask.target;
    let Some(facts) = &fetched.image else {
        return Some(Decision::NeedImage {
            reference: reference_of(is, &t.candidate_tag, digest).unwrap_or_default(),
            digest: digest.to_string(),
        });
    };
    if facts.platforms.is_empty() {
        return None;
    }
    let platforms: Vec<&str> = facts.platforms.iter().map(|(p, _)| p.as_str()).collect();
    let served_now = current_digest(is, &t.served_tag).unwrap_or_default();
    let message = format!(
        "{digest} is an image index of {} platforms ({}); a validation runs on one of them, so \
         promoting it would serve the others unvalidated; import the candidate tag with \
         importMode: Legacy (one platform); {} keeps {}",
        platforms.len(),
        platforms.join(", "),
        t.served_tag,
        display(served_now)
    );
    let why = reason::UNVALIDATED_PLATFORMS;
    Some(mark_failed(is, ask, digest, why, message, vec![]))
}

/// The outcomes of the signature policy when every requirement is met (none asked: none), or
/// the decision instead ([`Checked`]): read the signatures first, or refuse
/// (`SignatureMissing`, `SignatureUntrusted`) and mark the served tag `UpdateFailed` for the
/// candidate, keeping its image: the candidate's verdict. At `begin` no `reject` follows (the
/// Pipeline skips `validate`, and its `finally` tasks run on `validate`'s status), so without
/// the mark the candidate would have none, and the ledger would page it as never validated.
pub(super) fn signed(ask: &Ask, is: &ImageStream, fetched: &Fetched, digest: &str) -> Checked {
    if ask.signatures.is_empty() {
        return Checked::Passed(Vec::new());
    }
    let t = ask.target;
    let Some(found) = &fetched.signatures else {
        let insecure = (is.spec_tag(&t.candidate_tag))
            .and_then(|tag| tag.import_policy.as_ref())
            .is_some_and(|p| p.insecure);
        let reference = reference_of(is, &t.candidate_tag, digest).filter(|r| !r.is_empty());
        let Some(reference) = reference else {
            // Nowhere to look: the candidate tag's history no longer names a pull spec of it.
            let message = format!(
                "{digest} has no pull spec in {}:{}'s history, so its signatures cannot be looked \
                 up; {} keeps {}",
                t.imagestream,
                t.candidate_tag,
                t.served_tag,
                display(current_digest(is, &t.served_tag).unwrap_or_default())
            );
            let why = reason::SIGNATURE_MISSING;
            return Checked::Decided(mark_failed(is, ask, digest, why, message, Vec::new()));
        };
        return Checked::Decided(Decision::NeedSignatures {
            reference,
            digest: digest.to_string(),
            insecure,
        });
    };
    let outcomes: Vec<CheckOutcome> = (found.findings.iter())
        .map(|f| CheckOutcome {
            name: checks::SIGNATURE,
            passed: f.matched.is_some(),
            message: signature_message(f, digest),
        })
        .collect();
    if checks::all_passed(&outcomes) {
        return Checked::Passed(outcomes);
    }
    let served_now = current_digest(is, &t.served_tag).unwrap_or_default();
    let unmet: Vec<&str> = (outcomes.iter())
        .filter(|o| !o.passed)
        .map(|o| o.message.as_str())
        .collect();
    let (why, what) = if found.found == 0 {
        (
            reason::SIGNATURE_MISSING,
            format!(
                "no signature over {digest} was found in {} (neither the .sig tag nor a referrer)",
                found.looked_up
            ),
        )
    } else {
        (
            reason::SIGNATURE_UNTRUSTED,
            format!(
                "{} signature(s) over {digest} found in {}, none by a trusted key or identity",
                found.found, found.looked_up
            ),
        )
    };
    let message = format!(
        "{what}: {}; {} keeps {}",
        unmet.join("; "),
        t.served_tag,
        display(served_now)
    );
    Checked::Decided(mark_failed(is, ask, digest, why, message, outcomes))
}

/// What the `checks` result says about one signature requirement.
fn signature_message(f: &crate::controller::signature::Finding, digest: &str) -> String {
    let mut message = match &f.matched {
        Some(by) => format!("{digest} is signed by {by} ({} asks)", f.by),
        None if f.tried.is_empty() => format!("{} trusts no key that could be used", f.by),
        None => format!(
            "no signature by a key or identity {} trusts ({})",
            f.by,
            (f.tried.iter())
                .map(|k| format!("{k:?}"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    if !f.unusable.is_empty() {
        message.push_str(&format!("; unusable: {}", f.unusable.join("; ")));
    }
    if f.matched.is_none() && !f.rejected.is_empty() {
        message.push_str(&format!("; {}", f.rejected.join("; ")));
    }
    message
}

/// What the checks (or the signature policy) say about the candidate.
pub(super) enum Checked {
    /// All configured checks passed (none configured: no outcomes).
    Passed(Vec<CheckOutcome>),
    /// The decision instead: fetch the image first, or mark the served tag `UpdateFailed`.
    Decided(Decision),
}

pub(super) fn run_checks(
    ask: &Ask,
    is: &ImageStream,
    image: Option<&ImageFacts>,
    now: chrono::DateTime<chrono::Utc>,
    digest: &str,
) -> Checked {
    if ask.checks.iter().all(ParsedChecks::is_empty) {
        return Checked::Passed(Vec::new());
    }
    let t = ask.target;
    let Some(facts) = image else {
        return Checked::Decided(Decision::NeedImage {
            reference: reference_of(is, &t.candidate_tag, digest).unwrap_or_default(),
            digest: digest.to_string(),
        });
    };
    let done: Vec<CheckOutcome> = (ask.checks.iter())
        .flat_map(|set| checks::evaluate(set, facts, now))
        .collect();
    if checks::all_passed(&done) {
        return Checked::Passed(done);
    }
    let failed: Vec<String> = done
        .iter()
        .filter(|c| !c.passed)
        .map(|c| format!("{}: {}", c.name, c.message))
        .collect();
    let served_now = current_digest(is, &t.served_tag).unwrap_or_default();
    let message = format!(
        "{digest} failed {}; {} keeps {}",
        failed.join("; "),
        t.served_tag,
        display(served_now)
    );
    let why = reason::VALIDATION_FAILED;
    Checked::Decided(mark_failed(is, ask, digest, why, message, done))
}
