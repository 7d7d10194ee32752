//! The served tag as a decision sees it (what it serves, served before, and says in its
//! annotations) and the one write that changes it: a strategic-merge patch of its annotations,
//! and of its `from` when it moves, conditional on the stream's resourceVersion.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::api::ImageStream;
use crate::api::imagestream::{KIND_DOCKER_IMAGE, KIND_IMAGE_STREAM_IMAGE};
use crate::controller::checks::CheckOutcome;
use crate::controller::crd::PromoteAs;
use crate::controller::status::{Outcome, Target, phase, reason};

use super::{Ask, Decision, annotation};

/// The annotations a write sets; a `None` value removes the key.
pub(super) type Marks<'a> = [(&'a str, Option<String>)];

pub(super) fn current_digest<'s>(is: &'s ImageStream, tag: &str) -> Option<&'s str> {
    is.current_digest(tag)
}

pub(super) fn served_annotations(is: &ImageStream, served: &str) -> BTreeMap<String, String> {
    is.spec_tag(served)
        .and_then(|t| t.annotations.clone())
        .unwrap_or_default()
}

/// The pull spec of `digest`, from the candidate tag's history first (that is the reference
/// the scheduled import resolved), else from any tag's.
pub(super) fn reference_of(is: &ImageStream, candidate: &str, digest: &str) -> Option<String> {
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

/// The `image` result: the pull spec of the run's digest through the stream,
/// `<status.dockerImageRepository>@<digest>`, or, where the stream has no repository (no
/// integrated registry), the digest's own pull spec from the tags' history; empty when the run
/// names no digest or the stream knows neither.
pub(super) fn pull_spec(is: &ImageStream, t: &Target) -> String {
    let Some(digest) = t.digest.as_deref() else {
        return String::new();
    };
    let repository = is
        .status
        .as_ref()
        .map(|s| s.docker_image_repository.as_str())
        .unwrap_or_default();
    if repository.is_empty() {
        reference_of(is, &t.candidate_tag, digest).unwrap_or_default()
    } else {
        format!("{repository}@{digest}")
    }
}

/// The strategic-merge patch of the served tag: `marks` and, when it moves, the fields [`pin`]
/// sets. Other fields of the tag are kept by the merge on `name`.
pub(super) fn patch(is: &ImageStream, served: &str, marks: &Marks, moved: Option<Value>) -> Value {
    let mut ann = serde_json::Map::new();
    for (k, v) in marks {
        ann.insert(
            (*k).into(),
            v.clone().map(Value::String).unwrap_or(Value::Null),
        );
    }
    let mut tag = json!({ "name": served, "annotations": ann });
    if let Some(Value::Object(fields)) = moved {
        for (k, v) in fields {
            tag[k] = v;
        }
    }
    json!({
        "metadata": { "resourceVersion": is.metadata.resource_version },
        "spec": { "tags": [tag] },
    })
}

/// The fields of the served tag that point it at `digest` (`from`, and for a DockerImage pin its
/// `importPolicy`), in the form the ImagePromotion asks for: `ImageStreamImage {is}@{digest}` as
/// `oc tag` writes it, or `DockerImage <repository>@<digest>` with the repository the digest was
/// imported from ([`reference_of`]; the stream's `status.dockerImageRepository` when no history
/// names one). A served tag with no history yet always gets the ImageStreamImage form, which the
/// server resolves in the same write: it has an image (a `status.tags` entry) the moment it
/// exists, as the ODH spawner and workbench webhook need; a DockerImage tag has none until the
/// import controller imports it.
///
/// A DockerImage pin is imported by the import controller with the served tag's own
/// `importPolicy`, so it takes the candidate's `insecure` and `importMode`: the real server left
/// a served tag without `insecure` on its old image (`ImportSuccess=False`) while the run said
/// Promoted, and imported a manifest list the candidate kept whole (`PreserveOriginal`) as one
/// platform's manifest under `Legacy`, another digest than the one validated
/// (`../shared/reference/objects/real-openshift/`, issue 33).
///
/// Either form takes the candidate's `referencePolicy` (where it names one): what consumers of
/// the served tag resolve it to (`Source`, the upstream pull spec, or `Local`, the integrated
/// registry's, which pulls through and can keep the layers when upstream loses them) is then
/// what the pipeline validated through the candidate tag.
pub(super) fn pin(ask: &Ask, is: &ImageStream, digest: &str) -> Value {
    let from = pin_from(ask, is, digest);
    let candidate = is.spec_tag(&ask.target.candidate_tag);
    let mut fields = json!({ "from": from });
    let reference = candidate
        .and_then(|t| t.reference_policy.as_ref())
        .map(|p| p.type_.as_str())
        .filter(|t| !t.is_empty());
    if let Some(reference) = reference {
        fields["referencePolicy"] = json!({ "type": reference });
    }
    if fields["from"]["kind"] != KIND_DOCKER_IMAGE {
        return fields;
    }
    let import = candidate.and_then(|t| t.import_policy.as_ref());
    let mut policy = json!({ "insecure": import.is_some_and(|p| p.insecure) });
    if let Some(mode) = import.and_then(|p| p.import_mode.as_deref()) {
        policy["importMode"] = json!(mode);
    }
    fields["importPolicy"] = policy;
    fields
}

fn pin_from(ask: &Ask, is: &ImageStream, digest: &str) -> Value {
    let t = ask.target;
    let name = is.metadata.name.clone().unwrap_or_default();
    let image_stream_image = json!({
        "kind": KIND_IMAGE_STREAM_IMAGE,
        "name": format!("{name}@{digest}"),
        "namespace": is.metadata.namespace,
    });
    let has_history = is.current_digest(&t.served_tag).is_some();
    if ask.promote_as != PromoteAs::DockerImage || !has_history {
        return image_stream_image;
    }
    let repository = reference_of(is, &t.candidate_tag, digest)
        .map(|r| repository_of(&r).to_string())
        .filter(|r| !r.is_empty())
        .or_else(|| {
            is.status
                .as_ref()
                .map(|s| s.docker_image_repository.clone())
                .filter(|r| !r.is_empty())
        });
    match repository {
        Some(repository) => {
            json!({"kind": KIND_DOCKER_IMAGE, "name": format!("{repository}@{digest}")})
        }
        None => image_stream_image,
    }
}

/// `quay.io/org/nb@sha256:…` or `quay.io/org/nb:tag` -> `quay.io/org/nb` (a registry port,
/// `host:5000/x`, is kept).
fn repository_of(reference: &str) -> &str {
    let no_digest = reference.split('@').next().unwrap_or(reference);
    match no_digest.rfind(':') {
        Some(i) if !no_digest[i..].contains('/') => &no_digest[..i],
        _ => no_digest,
    }
}

/// The digest the served tag's spec pins (`from.name` `…@sha256:…`, either form), which is
/// ahead of its history while a DockerImage pin waits for its import.
pub(super) fn pinned_digest<'s>(is: &'s ImageStream, served: &str) -> Option<&'s str> {
    let name = is.spec_tag(served)?.from.as_ref()?.name.as_deref()?;
    crate::api::imagestream::digest_from_reference(name)
}

/// Writes `marks` on the served tag and reports `result`, or only reports it when the marks
/// already hold (a write that would change nothing is not made).
pub(super) fn mark(is: &ImageStream, served: &str, marks: &Marks, result: Outcome) -> Decision {
    let have = served_annotations(is, served);
    if marks.iter().all(|(k, v)| have.get(*k) == v.as_ref()) {
        return Decision::Final(result);
    }
    Decision::Write {
        patch: patch(is, served, marks, None),
        outcome: result,
    }
}

pub(super) fn outcome(
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
        image: String::new(),
    }
}

/// Marks the served tag `UpdateFailed` for `digest` (old image kept, not hidden) and fails.
pub(super) fn mark_failed(
    is: &ImageStream,
    ask: &Ask,
    digest: &str,
    why: &'static str,
    message: String,
    checks: Vec<CheckOutcome>,
) -> Decision {
    let served = &ask.target.served_tag;
    let previous = current_digest(is, served).unwrap_or_default().to_string();
    let marks = [
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
    mark(is, served, &marks, result)
}

/// `AlreadyPromoted`: the served tag already serves `digest`; nothing is written, and the
/// results report the tag's annotations as they are (`phase` defaults to `default_phase`).
pub(super) fn already_serving(
    is: &ImageStream,
    served: &str,
    digest: &str,
    default_phase: &str,
    checks: Vec<CheckOutcome>,
) -> Decision {
    let ann = served_annotations(is, served);
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

/// `CandidateMoved`: the candidate tag no longer points at the digest the pipeline validated.
pub(super) fn candidate_moved(is: &ImageStream, t: &Target, digest: &str) -> Decision {
    let now = current_digest(is, &t.candidate_tag).unwrap_or("nothing");
    Decision::Final(Outcome::failed(
        reason::CANDIDATE_MOVED,
        format!(
            "{}:{} now points at {now}, not at the validated {digest}; the newer candidate gets its own run",
            t.imagestream, t.candidate_tag
        ),
    ))
}

/// Where a promotion of `digest` stands when the candidate tag has moved past it: whether it
/// may still be promoted (never starved by a candidate that moves faster than validation
/// finishes, never backwards).
#[derive(Debug, PartialEq, Eq)]
pub(super) enum MovedPast {
    /// It was a candidate after what the served tag serves (or the tag serves nothing): it
    /// may be promoted.
    Newer,
    /// It was never a candidate, or not after what is served, or what is served was never a
    /// candidate (nothing to order by): `CandidateMoved`.
    NotNewer(String),
}

/// Orders `digest` against `served_now` by the candidate tag's history (newest first; a digest
/// counts at its latest import).
pub(super) fn moved_past(
    is: &ImageStream,
    t: &Target,
    digest: &str,
    served_now: &str,
) -> MovedPast {
    let history: Vec<&str> = is
        .status
        .as_ref()
        .and_then(|s| s.tags.iter().find(|tag| tag.tag == t.candidate_tag))
        .map(|tag| {
            tag.items
                .iter()
                .flatten()
                .filter_map(|e| e.digest())
                .collect()
        })
        .unwrap_or_default();
    let at = |d: &str| history.iter().position(|h| *h == d);
    let now = current_digest(is, &t.candidate_tag).unwrap_or("nothing");
    let why = |what: String| {
        MovedPast::NotNewer(format!(
            "{}:{} now points at {now}, not at the validated {digest}, and {what}; the newer \
             candidate gets its own run",
            t.imagestream, t.candidate_tag
        ))
    };
    match (at(digest), at(served_now)) {
        (None, _) => why(format!("{digest} was never a candidate")),
        (Some(_), _) if served_now.is_empty() => MovedPast::Newer,
        (Some(d), Some(s)) if d < s => MovedPast::Newer,
        (Some(_), Some(_)) => why(format!(
            "it is not newer than what {} serves ({served_now})",
            t.served_tag
        )),
        (Some(_), None) => why(format!(
            "what {} serves ({served_now}) was never a candidate, so nothing says it is older",
            t.served_tag
        )),
    }
}

/// A digest for a message (`nothing` when the tag serves nothing).
pub(super) fn display(digest: &str) -> &str {
    if digest.is_empty() { "nothing" } else { digest }
}

#[cfg(test)]
mod tests {
    use super::repository_of;

    #[test]
    fn the_repository_of_a_reference_keeps_a_registry_port_and_drops_tag_and_digest() {
        let d = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
        assert_eq!(
            repository_of(&format!("quay.io/org/nb@{d}")),
            "quay.io/org/nb"
        );
        assert_eq!(repository_of("quay.io/org/nb:2025.2"), "quay.io/org/nb");
        assert_eq!(
            repository_of(&format!("registry.example:5000/org/nb@{d}")),
            "registry.example:5000/org/nb"
        );
        assert_eq!(
            repository_of("registry.example:5000/org/nb"),
            "registry.example:5000/org/nb"
        );
    }
}
