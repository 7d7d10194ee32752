//! The decision of a run, as a pure function of what it asks for and what the ImageStream and
//! the candidate image look like now: which one write (if any) to make to the served tag, and
//! the outcome to report. [`decide`] first recognises a write of this run that already landed,
//! then hands over to the run's action, one function each (`decide/actions.rs`); what a write
//! puts on the served tag is built in `decide/served.rs`. Every write is conditional on the
//! resourceVersion the decision was made from, so a concurrent change makes the caller re-read
//! and decide again.

mod actions;
mod gates;
mod odh;
mod rollback;
mod served;

use serde_json::Value;

use crate::api::ImageStream;

use super::checks::ImageFacts;
use super::crd::PromoteAs;
use super::params::checks::ParsedChecks;
use super::params::odh::OdhSettings;
use super::params::signature::SignatureRequirement;
use super::params::{Action, Validation};
use super::proof::{Evidence, Proof};
use super::signature::Signatures;
use super::status::{Outcome, Target, phase, reason};

pub use self::odh::UPDATE_FAILED_NOTE;
use self::served::{current_digest, outcome, pull_spec, served_annotations};

/// The served-tag annotations imagegate maintains.
pub mod annotation {
    /// `Validating`, `Promoted`, `UpdateFailed`, `RolledBack` or `Tampered`.
    pub const PHASE: &str = "imagegate.dev/phase";
    /// The candidate digest the phase is about.
    pub(crate) const CANDIDATE_DIGEST: &str = "imagegate.dev/candidate-digest";
    /// The digest served before the last promotion or rollback (what a rollback returns to).
    pub(crate) const PREVIOUS_DIGEST: &str = "imagegate.dev/previous-digest";
    /// A human-readable explanation of the phase.
    pub(crate) const MESSAGE: &str = "imagegate.dev/message";
    /// The CustomRun that set the phase.
    pub(crate) const CUSTOMRUN: &str = "imagegate.dev/customrun";
    /// The digests rolled back from the served tag, comma-separated, oldest first (at most
    /// [`super::ROLLED_BACK_KEPT`]): `promote` refuses them unless `allow-rolled-back`.
    pub(crate) const ROLLED_BACK_DIGESTS: &str = "imagegate.dev/rolled-back-digests";
    /// The digests the gate served on the served tag, comma-separated, oldest first (at most
    /// [`super::PROMOTED_KEPT`]): the one served before its first promotion, then each it
    /// promoted. A rollback returns only to one of them.
    pub(crate) const PROMOTED_DIGESTS: &str = "imagegate.dev/promoted-digests";
    /// On the served tag and the previous tag: the digest the gate pinned the tag to with its last
    /// write. A `from` that pins another digest was moved by someone else: tampered
    /// ([`crate::controller::tamper`]).
    pub(crate) const SERVED_DIGEST: &str = "imagegate.dev/served-digest";
    /// On a tampered tag: the digest it was found pinned to (the tamper already reported).
    pub(crate) const TAMPERED_DIGEST: &str = "imagegate.dev/tampered-digest";
    /// On the previous tag: the served tag whose previous digest it keeps.
    pub(crate) const PREVIOUS_OF: &str = "imagegate.dev/previous-of";
    /// OpenShift's annotation that hides a tag from the console and from spawners' image lists.
    pub(crate) const HIDDEN: &str = "hidden";
    /// Open Data Hub's annotation that keeps a tag out of its spawner's image list; the previous
    /// tag carries it where the candidate tag does.
    pub(crate) const ODH_OUTDATED: &str = "opendatahub.io/image-tag-outdated";
}

/// How many rolled-back digests the served tag remembers (the oldest is forgotten first).
pub(crate) const ROLLED_BACK_KEPT: usize = 10;
/// How many digests the gate served the served tag remembers as rollback targets (the oldest
/// is forgotten first).
pub(crate) const PROMOTED_KEPT: usize = 10;

/// Everything a decision needs besides the stream.
#[derive(Clone, Debug)]
pub(crate) struct Ask<'a> {
    /// The recorded target.
    pub target: &'a Target,
    /// The run's name (written to the served tag).
    pub run_name: &'a str,
    /// The raw `validation-status`.
    pub validation_status: &'a str,
    /// What that status means for `promote`.
    pub validation: Validation,
    /// The checks to run on the candidate image, one set per ImagePromotion that asks.
    pub checks: &'a [ParsedChecks],
    /// Every proof of validation asked for (none: no proof is asked).
    pub proofs: &'a [Proof],
    /// The publisher signatures asked for, one requirement per ImagePromotion that asks.
    pub signatures: &'a [SignatureRequirement],
    /// The hidden tag that keeps the digest served before a promotion.
    pub previous_tag: &'a str,
    /// Whether `promote` may promote, and `rollback` return to, a digest that was rolled back.
    pub allow_rolled_back: bool,
    /// How `promote` and `rollback` pin the served tag.
    pub promote_as: PromoteAs,
    /// What the Open Data Hub dashboard is told, when the ImagePromotion enables it.
    pub odh: Option<&'a OdhSettings>,
}

impl<'a> Ask<'a> {
    /// What `request` asks of the decisions about `target`, for run `run_name`.
    pub(crate) fn of(
        request: &'a super::params::Request,
        target: &'a Target,
        run_name: &'a str,
    ) -> Ask<'a> {
        Ask {
            target,
            run_name,
            validation_status: &request.validation_status,
            validation: request.validation(),
            checks: &request.checks,
            proofs: &request.proofs,
            signatures: &request.signatures,
            previous_tag: &request.previous_tag,
            allow_rolled_back: request.allow_rolled_back,
            promote_as: request.promote_as,
            odh: request.odh.as_ref(),
        }
    }
}

/// What a decision asked to be read ([`Decision::NeedImage`], [`Decision::NeedEvidence`]),
/// once it was read.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Fetched {
    /// The candidate image's metadata, for the checks.
    pub image: Option<ImageFacts>,
    /// The run's PipelineRun and TaskRuns, for the proof of validation.
    pub evidence: Option<Evidence>,
    /// The candidate's signatures, for the signature policy.
    pub signatures: Option<Signatures>,
}

/// What to do next.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Decision {
    /// The run is over without a write.
    Final(Outcome),
    /// The checks need the candidate image's metadata (`imagestreamimages/{is}@{digest}`).
    NeedImage {
        /// The candidate digest.
        digest: String,
        /// Its pull spec from the candidate tag's history (what allowed registries check).
        reference: String,
    },
    /// The proof of validation needs the run's PipelineRun and its TaskRuns.
    NeedEvidence,
    /// The signature policy needs the candidate's signatures from its registry.
    NeedSignatures {
        /// The candidate digest.
        digest: String,
        /// Its pull spec from the candidate tag's history (where its signatures are).
        reference: String,
        /// The candidate tag's `importPolicy.insecure` (plain HTTP to its registry).
        insecure: bool,
    },
    /// Nothing to decide yet (the run's PipelineRun has not listed it): look again soon.
    Wait(String),
    /// Patch the ImageStream (strategic merge with a resourceVersion precondition), then
    /// report the outcome.
    Write {
        /// The patch body.
        patch: Value,
        /// The outcome once the patch is applied.
        outcome: Outcome,
    },
}

/// Decides a run against the current stream, with what earlier decisions asked to be read.
pub(crate) fn decide(
    ask: &Ask,
    is: &ImageStream,
    fetched: &Fetched,
    now: chrono::DateTime<chrono::Utc>,
) -> Decision {
    // A restart after our own write landed: finish, never write twice.
    if let Some(done) = landed(ask, is) {
        return Decision::Final(done);
    }
    let decision = match ask.target.action {
        Action::Begin => actions::begin(ask, is, fetched),
        Action::Promote => actions::promote(ask, is, fetched, now),
        Action::Reject => actions::reject(ask, is),
        Action::Rollback => actions::rollback(ask, is),
    };
    let decision = match ask.odh {
        Some(settings) => odh::apply(ask, settings, is, fetched, decision),
        None => decision,
    };
    let image = pull_spec(is, ask.target);
    match decision {
        Decision::Final(o) => Decision::Final(o.with_image(image)),
        Decision::Write { patch, outcome } => Decision::Write {
            patch,
            outcome: outcome.with_image(image),
        },
        need => need,
    }
}

/// The outcome of this run if its write is already on the served tag (the served tag's
/// `imagegate.dev/customrun` names it, with the phase its action writes): a restarted or
/// cancelled run reports what happened instead of deciding again.
pub(crate) fn landed(ask: &Ask, is: &ImageStream) -> Option<Outcome> {
    let t = ask.target;
    let served = t.served_tag.as_str();
    let ann = served_annotations(is, served);
    if ann.get(annotation::CUSTOMRUN).map(String::as_str) != Some(ask.run_name) {
        return None;
    }
    let get = |k: &str| ann.get(k).cloned().unwrap_or_default();
    let phase_now = get(annotation::PHASE);
    let candidate = get(annotation::CANDIDATE_DIGEST);
    let served_now = current_digest(is, served).unwrap_or_default().to_string();
    let digest = t.digest.clone().unwrap_or_default();
    let pinned = served::pinned_digest(is, served).unwrap_or_default();
    let (ok, why, promoted) = match (t.action, phase_now.as_str()) {
        (Action::Promote, phase::PROMOTED) if served_now == digest || pinned == digest => {
            (true, reason::PROMOTED, digest.as_str())
        }
        (Action::Rollback, phase::ROLLED_BACK) => (true, reason::ROLLED_BACK, served_now.as_str()),
        (Action::Begin, phase::VALIDATING) if candidate == digest => (true, reason::VALIDATING, ""),
        (Action::Reject, phase::UPDATE_FAILED) if candidate == digest => {
            (false, reason::REJECTED, "")
        }
        _ => return None,
    };
    let done = outcome(
        ok,
        why,
        get(annotation::MESSAGE),
        promoted,
        &get(annotation::PREVIOUS_DIGEST),
        &phase_now,
        vec![],
    );
    Some(done.with_image(pull_spec(is, t)))
}

#[cfg(test)]
mod tests;
