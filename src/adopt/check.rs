//! How an adopted stream drifted from the gated shape (pure): what `imagegate adopt --check`
//! reports and what the controller counts and announces. The usual cause is a wholesale edit of
//! `spec.tags` (an `oc apply` of an old manifest, a client that writes the whole tag list it
//! knows): the candidate tag disappears, its scheduled import with it, and the stream silently
//! stops being validated. A stream gated by hand (an ImagePromotion governs it, adopt never
//! shaped it) is held to the one rule a hand-made setup most often misses ([`governed_drift`]):
//! a candidate tag the dashboard would offer.

use super::names;
use super::shape::{annotation, is_managed, pinned_by_digest};
use crate::api::ImageStream;
use crate::controller::crd::ImagePromotion;
use crate::controller::decide::annotation::ODH_OUTDATED;
use crate::controller::policy::governs;

/// One way an adopted stream differs from its gated shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Drift {
    /// The stream no longer records which tags adopt gave it.
    RecordMissing,
    /// The candidate tag is gone from `spec.tags`.
    CandidateMissing,
    /// The candidate tag is no longer imported on a schedule.
    CandidateNotScheduled,
    /// The candidate tag lost its `opendatahub.io/image-tag-outdated` mark, so spawners offer it.
    CandidateOffered,
    /// The served tag is gone from `spec.tags`.
    ServedMissing,
    /// The served tag follows a moving reference (or imports on a schedule) again.
    ServedNotPinned,
}

impl Drift {
    /// Every kind, in the order reported.
    pub(crate) const ALL: [Drift; 6] = [
        Drift::RecordMissing,
        Drift::CandidateMissing,
        Drift::CandidateNotScheduled,
        Drift::CandidateOffered,
        Drift::ServedMissing,
        Drift::ServedNotPinned,
    ];

    /// The metric label (`drift`).
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Drift::RecordMissing => "record_missing",
            Drift::CandidateMissing => "candidate_missing",
            Drift::CandidateNotScheduled => "candidate_not_scheduled",
            Drift::CandidateOffered => "candidate_offered",
            Drift::ServedMissing => "served_missing",
            Drift::ServedNotPinned => "served_not_pinned",
        }
    }

    /// The Kubernetes Event reason.
    pub(crate) fn reason(self) -> &'static str {
        match self {
            Drift::RecordMissing => "AdoptionRecordMissing",
            Drift::CandidateMissing => "CandidateTagMissing",
            Drift::CandidateNotScheduled => "CandidateNotScheduled",
            Drift::CandidateOffered => "CandidateTagOffered",
            Drift::ServedMissing => "ServedTagMissing",
            Drift::ServedNotPinned => "ServedTagNotPinned",
        }
    }
}

/// A drift found, with the sentence that explains it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Found {
    /// The kind.
    pub(crate) drift: Drift,
    /// What is wrong, naming the tag.
    pub(crate) message: String,
    /// The command that repairs it; `None`: `imagegate adopt` restores the shape it gave.
    pub(crate) remedy: Option<String>,
}

/// The drifts of `is`; empty for a stream in the gated shape, and for a stream adopt never
/// shaped (no [`names::MANAGED_LABEL`]).
pub(crate) fn drift(is: &ImageStream) -> Vec<Found> {
    if !is_managed(is) {
        return Vec::new();
    }
    let found = |drift, message: String| Found {
        drift,
        message,
        remedy: None,
    };
    let (Some(candidate), Some(served)) = (
        annotation(is, names::CANDIDATE_TAG),
        annotation(is, names::SERVED_TAG),
    ) else {
        return vec![found(
            Drift::RecordMissing,
            format!(
                "labelled {} but without the {} and {} annotations that name its tags",
                names::MANAGED_LABEL,
                names::CANDIDATE_TAG,
                names::SERVED_TAG
            ),
        )];
    };
    let mut out = Vec::new();
    match is.spec_tag(candidate) {
        None => out.push(found(
            Drift::CandidateMissing,
            format!(
                "the candidate tag {candidate:?} is gone from spec.tags (a wholesale edit of the \
                 tags?), so no new image is imported or validated"
            ),
        )),
        Some(tag) => {
            if !tag.import_policy.as_ref().is_some_and(|p| p.scheduled) {
                out.push(found(
                    Drift::CandidateNotScheduled,
                    format!("the candidate tag {candidate:?} is no longer imported on a schedule"),
                ));
            }
            let outdated = tag
                .annotations
                .as_ref()
                .and_then(|a| a.get(ODH_OUTDATED))
                .is_some_and(|v| !v.is_empty());
            if !outdated {
                out.push(found(
                    Drift::CandidateOffered,
                    format!(
                        "the candidate tag {candidate:?} lost {ODH_OUTDATED}, so spawners offer \
                         an image that is not validated"
                    ),
                ));
            }
        }
    }
    match is.spec_tag(served) {
        None => out.push(found(
            Drift::ServedMissing,
            format!("the served tag {served:?} is gone from spec.tags"),
        )),
        Some(tag) => {
            let from = tag
                .from
                .as_ref()
                .map(|f| serde_json::json!({"kind": f.kind, "name": f.name}));
            let scheduled = tag.import_policy.as_ref().is_some_and(|p| p.scheduled);
            if !pinned_by_digest(from.as_ref()) || scheduled {
                out.push(found(
                    Drift::ServedNotPinned,
                    format!(
                        "the served tag {served:?} is no longer pinned by digest, so it can move \
                         without validation"
                    ),
                ));
            }
        }
    }
    out
}

/// The drifts of a stream that `promotions` (the ImagePromotions of its namespace) govern,
/// adopted or not:
/// - a candidate tag that imports from a registry (a `DockerImage` by tag) but not on a schedule
///   gets a new upstream image only from a push notification (`imagegate receiver`) or an
///   import by hand, and a notification lost is never made up for ([`Drift::CandidateNotScheduled`]);
/// - a stream the Open Data Hub dashboard lists (`opendatahub.io/notebook-image: "true"`) whose
///   candidate tag has no `opendatahub.io/image-tag-outdated` is offered, not yet validated, to
///   every user as soon as the tag imports (`begin` marks it only after that import).
///
/// Empty for a stream no ImagePromotion governs.
pub(crate) fn governed_drift(is: &ImageStream, promotions: &[ImagePromotion]) -> Vec<Found> {
    let listed = is
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(names::ODH_NOTEBOOK_IMAGE))
        .is_some_and(|v| v == "true");
    let (Some(ns), Some(name)) = (
        is.metadata.namespace.as_deref(),
        is.metadata.name.as_deref(),
    ) else {
        return Vec::new();
    };
    let mut out: Vec<Found> = Vec::new();
    let mut seen: Vec<&str> = Vec::new();
    for p in promotions
        .iter()
        .filter(|p| p.metadata.namespace.as_deref() == Some(ns) && governs(&p.spec, ns, name))
    {
        let candidate = p.spec.candidate_tag_or_default();
        let Some(tag) = is.spec_tag(candidate) else {
            continue;
        };
        if seen.contains(&candidate) {
            continue;
        }
        seen.push(candidate);
        let governor = p.metadata.name.as_deref().unwrap_or_default();
        if let Some(found) = not_scheduled(is, candidate, governor) {
            out.push(found);
        }
        let hidden = tag
            .annotations
            .as_ref()
            .and_then(|a| a.get(ODH_OUTDATED))
            .is_some_and(|v| !v.is_empty());
        if hidden || !listed {
            continue;
        }
        let patch = serde_json::json!({"spec": {"tags": [
            {"name": candidate, "annotations": {ODH_OUTDATED: "true"}}
        ]}});
        out.push(Found {
            drift: Drift::CandidateOffered,
            message: format!(
                "the candidate tag {candidate:?} (ImagePromotion {governor} governs the stream) \
                 has no {ODH_OUTDATED}, so the dashboard offers it, not yet validated, to every \
                 user as soon as it imports; mark the tag before it imports"
            ),
            // A strategic-merge patch (kubectl's default): the server merges `spec.tags` by name.
            remedy: Some(format!(
                "kubectl patch imagestream {name} -n {ns} -p '{patch}'"
            )),
        });
    }
    out
}

/// [`Drift::CandidateNotScheduled`] for `candidate` of `is` (governed by ImagePromotion
/// `governor`) where it imports from a registry by tag without a schedule.
fn not_scheduled(is: &ImageStream, candidate: &str, governor: &str) -> Option<Found> {
    let tag = is.spec_tag(candidate)?;
    let from = tag.from.as_ref()?;
    let moving = from.kind.as_deref() == Some(crate::api::imagestream::KIND_DOCKER_IMAGE)
        && !from.name.as_deref().unwrap_or_default().contains('@');
    if !moving || tag.import_policy.as_ref().is_some_and(|p| p.scheduled) {
        return None;
    }
    let (ns, name) = (
        is.metadata.namespace.as_deref().unwrap_or_default(),
        is.metadata.name.as_deref().unwrap_or_default(),
    );
    let patch = serde_json::json!({"spec": {"tags": [
        {"name": candidate, "importPolicy": {"scheduled": true}}
    ]}});
    Some(Found {
        drift: Drift::CandidateNotScheduled,
        message: format!(
            "the candidate tag {candidate:?} (ImagePromotion {governor} governs the stream) \
             imports {} but not on a schedule: a new build reaches validation only through a \
             push notification or an import by hand, and one lost is never made up for",
            from.name.as_deref().unwrap_or_default()
        ),
        remedy: Some(format!(
            "kubectl patch imagestream {name} -n {ns} -p '{patch}'"
        )),
    })
}

/// Every drift of `is`: adopt's shape ([`drift`]) and, where ImagePromotions govern it,
/// [`governed_drift`], each kind once.
///
/// What repairs them ([`remedies`]) follows.
pub(crate) fn all_drift(is: &ImageStream, promotions: &[ImagePromotion]) -> Vec<Found> {
    let mut found = drift(is);
    for f in governed_drift(is, promotions) {
        if !found.iter().any(|d| d.drift == f.drift) {
            found.push(f);
        }
    }
    found
}

/// The lines that say how to repair `found` on `is`: each command a drift names, and
/// `imagegate adopt <ns>/<name>` where adopt shaped the stream and a drift has no command.
pub(crate) fn remedies(is: &ImageStream, found: &[Found]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for f in found {
        let line = match &f.remedy {
            Some(command) => format!("repair it with: {command}"),
            None if is_managed(is) => format!(
                "restore it with: imagegate adopt {}/{}",
                is.metadata.namespace.as_deref().unwrap_or_default(),
                is.metadata.name.as_deref().unwrap_or_default()
            ),
            None => continue,
        };
        if !out.contains(&line) {
            out.push(line);
        }
    }
    out
}

#[cfg(test)]
mod tests;
