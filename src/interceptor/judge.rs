//! Whether an event names a stream's current candidate (pure): the interceptor believes nothing
//! the event says that it can read from the API instead. It passes on only what the API says:
//! the stream of the Trigger's own namespace, governed by an ImagePromotion, the candidate tag
//! that policy names, the digest that tag points at now, and the PipelineRun id keyed by the
//! install's [`RunKey`] (so nobody can take the name first).

use serde_json::{Map, Value, json};

use crate::api::ImageStream;
use crate::controller::crd::ImagePromotion;
use crate::controller::policy::governs;
use crate::runkey::{self, Candidate, RunKey};

use super::wire::{Claimed, code};

/// The extensions key the interceptor writes under (`$(extensions.imagegate.<field>)`).
pub(crate) const EXTENSION: &str = "imagegate";

/// Why an event is refused: a bounded reason (the metric's label), the gRPC code and a message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Refused {
    /// One of [`reason`].
    pub(crate) reason: &'static str,
    /// The gRPC code Triggers is answered.
    pub(crate) code: u32,
    /// What was wrong, for the EventListener's log.
    pub(crate) message: String,
}

/// The reasons an event is refused.
pub(crate) mod reason {
    /// Not a CloudEvent `updated` with every field.
    pub(crate) const MALFORMED: &str = "malformed";
    /// The request names no Trigger namespace, or the stream is of another namespace.
    pub(crate) const OTHER_NAMESPACE: &str = "other_namespace";
    /// The stream does not exist.
    pub(crate) const NO_STREAM: &str = "no_stream";
    /// No ImagePromotion governs the stream.
    pub(crate) const NOT_GOVERNED: &str = "not_governed";
    /// The governing ImagePromotions name different candidate tags.
    pub(crate) const POLICY_CONFLICT: &str = "policy_conflict";
    /// The tag is not the policy's candidate tag.
    pub(crate) const NOT_CANDIDATE_TAG: &str = "not_candidate_tag";
    /// The digest is not what the candidate tag points at now.
    pub(crate) const NOT_CURRENT: &str = "not_current";
    /// Every served tag the governing policies name already serves the digest: nothing to
    /// validate (the candidate tag `imagegate adopt` adds is imported at once on it).
    pub(crate) const ALREADY_SERVED: &str = "already_served";
    /// The API could not be read.
    pub(crate) const API: &str = "api";
    /// Every reason, for the metric's series.
    pub(crate) const ALL: [&str; 9] = [
        MALFORMED,
        OTHER_NAMESPACE,
        NO_STREAM,
        NOT_GOVERNED,
        POLICY_CONFLICT,
        NOT_CANDIDATE_TAG,
        NOT_CURRENT,
        ALREADY_SERVED,
        API,
    ];
}

impl Refused {
    /// A refusal.
    pub(crate) fn new(reason: &'static str, code: u32, message: impl Into<String>) -> Refused {
        Refused {
            reason,
            code,
            message: message.into(),
        }
    }
}

/// Whether the stream the event claims is of the Trigger's namespace (the PipelineRun is
/// created there: a listener of one namespace never validates another's streams).
pub(crate) fn namespace(claimed: &Claimed, trigger_namespace: Option<&str>) -> Result<(), Refused> {
    match trigger_namespace {
        Some(ns) if ns == claimed.namespace => Ok(()),
        Some(ns) => Err(Refused::new(
            reason::OTHER_NAMESPACE,
            code::FAILED_PRECONDITION,
            format!(
                "the event is for ImageStream {}/{}, the Trigger is of namespace {ns:?}",
                claimed.namespace, claimed.imagestream
            ),
        )),
        None => Err(Refused::new(
            reason::OTHER_NAMESPACE,
            code::INVALID_ARGUMENT,
            "the request names no Trigger (context.trigger_id namespaces/<ns>/triggers/<name>)",
        )),
    }
}

/// What passes: the extensions for the binding.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Passed {
    /// `{"imagegate": {...}}`.
    pub(crate) extensions: Map<String, Value>,
    /// The run id (for the log).
    pub(crate) run_id: String,
}

/// Judges `claimed` against the stream as the API has it (`None`: there is none) and the
/// ImagePromotions of its namespace.
pub(crate) fn candidate(
    claimed: &Claimed,
    stream: Option<&ImageStream>,
    policies: &[ImagePromotion],
    key: &RunKey,
) -> Result<Passed, Refused> {
    let (ns, name) = (&claimed.namespace, &claimed.imagestream);
    let Some(is) = stream else {
        return Err(Refused::new(
            reason::NO_STREAM,
            code::FAILED_PRECONDITION,
            format!("ImageStream {ns}/{name} does not exist"),
        ));
    };
    let governing: Vec<(&str, String, String)> = policies
        .iter()
        .filter(|p| p.metadata.namespace.as_deref() == Some(ns.as_str()))
        .filter(|p| governs(&p.spec, ns, name))
        .map(|p| {
            let (tag, served) = (
                p.spec.candidate_tag_or_default(),
                p.spec.served_tag_or_default(),
            );
            (
                p.metadata.name.as_deref().unwrap_or(""),
                tag.to_string(),
                served.to_string(),
            )
        })
        .collect();
    let Some((first, tag, _)) = governing.first() else {
        return Err(Refused::new(
            reason::NOT_GOVERNED,
            code::FAILED_PRECONDITION,
            format!(
                "no ImagePromotion of namespace {ns:?} governs ImageStream {name:?}: only a \
                 governed stream's candidate is validated"
            ),
        ));
    };
    if let Some((other, t, _)) = governing.iter().find(|(_, t, _)| t != tag) {
        return Err(Refused::new(
            reason::POLICY_CONFLICT,
            code::FAILED_PRECONDITION,
            format!(
                "ImagePromotions {first:?} and {other:?} both govern ImageStream {ns}/{name} and \
                 set candidateTag {tag:?} and {t:?}"
            ),
        ));
    }
    if claimed.tag != *tag {
        return Err(Refused::new(
            reason::NOT_CANDIDATE_TAG,
            code::FAILED_PRECONDITION,
            format!(
                "tag {:?} of ImageStream {ns}/{name} is not its candidate tag {tag:?} \
                 (ImagePromotion {first:?})",
                claimed.tag
            ),
        ));
    }
    let current = is.status_tag(tag).and_then(|t| t.current());
    let Some(item) = current.filter(|i| i.digest() == Some(claimed.digest.as_str())) else {
        let now = current
            .and_then(|i| i.digest())
            .map_or("nothing".to_string(), |d| format!("{d:?}"));
        return Err(Refused::new(
            reason::NOT_CURRENT,
            code::FAILED_PRECONDITION,
            format!(
                "digest {:?} is not the candidate of ImageStream {ns}/{name}: tag {tag:?} points \
                 at {now}",
                claimed.digest
            ),
        ));
    };
    // Nothing to validate where every served tag already serves it. The ledger counts such a
    // candidate as having its verdict (`ledger::judge`), so no page follows the refusal.
    let served: Vec<&str> = governing.iter().map(|(_, _, s)| s.as_str()).collect();
    if served
        .iter()
        .all(|s| is.current_digest(s) == Some(claimed.digest.as_str()))
    {
        return Err(Refused::new(
            reason::ALREADY_SERVED,
            code::FAILED_PRECONDITION,
            format!(
                "{} already serve{} {:?} of ImageStream {ns}/{name}: nothing to validate",
                served.join(" and "),
                if served.len() == 1 { "s" } else { "" },
                claimed.digest
            ),
        ));
    }
    let since = runkey::since(item.created.as_ref());
    let run_id = key.run_id(&Candidate {
        namespace: ns,
        imagestream: name,
        tag,
        digest: &claimed.digest,
        since: &since,
    });
    let mut extensions = Map::new();
    extensions.insert(
        EXTENSION.into(),
        json!({
            "namespace": ns,
            "imageStream": name,
            "tag": tag,
            "digest": claimed.digest,
            "runId": run_id,
            "eventId": claimed.id,
        }),
    );
    Ok(Passed { extensions, run_id })
}

#[cfg(test)]
mod tests;
