//! With `odh.enabled`, what a decision adds for the Open Data Hub dashboard, in the same write
//! (one conditional strategic-merge patch, no extra round trip):
//!
//! - the candidate tag carries `opendatahub.io/image-tag-outdated: "true"`, so no spawner offers
//!   it: added to every write, and `begin` writes it even when it has nothing else to write; the
//!   previous tag a promotion pins carries it too;
//! - once a promotion or rollback moves the served tag, the candidate and previous tags carry a
//!   `notebook-build-commit` of their own ([`CANDIDATE_BUILD`], [`PREVIOUS_BUILD`]), so that a
//!   workbench whose Notebook lacks the commit annotation turns Deprecated too;
//! - a promotion (and a rollback) sets the served tag's `notebook-software`,
//!   `notebook-python-dependencies` (the run's params, else the image's labels, else removed:
//!   a list that described the old image would be wrong) and `notebook-build-commit` (an image
//!   label, else the short digest), so that workbenches started from the old build show
//!   Deprecated, the dashboard's own "please update" signal;
//! - an `UpdateFailed` outcome appends [`UPDATE_FAILED_NOTE`] to the stream's
//!   `opendatahub.io/notebook-image-desc`, the one text the dashboard shows for every stream
//!   (there is no per-tag description, and a tag's import condition is shown only for custom
//!   images and is the import controller's to write); the next success removes it;
//! - the served tag is never created without an image: a mark on a served tag that has no
//!   history is left out (the spawner offers no tag without a `status.tags` entry, a custom
//!   image whose first tag has none is hidden, and the workbench webhook refuses Notebooks of a
//!   stream without `status.tags`).

use serde_json::{Value, json};

use crate::api::imagestream::digest_from_reference;
use crate::api::{ImageStream, TagReference};
use crate::controller::checks::ImageFacts;
use crate::controller::params::Action;
use crate::controller::params::odh::{OdhSettings, notebook_list};
use crate::controller::status::{Outcome, phase, reason};
use crate::odh::key;

use super::served::reference_of;
use super::{Ask, Decision, Fetched};

/// The `notebook-build-commit` the hidden candidate tag carries once a promotion or rollback has
/// moved the served tag. The dashboard calls a workbench Deprecated when no spec tag carries its
/// Notebook's commit annotation, and a Notebook without that annotation (made by the Jupyter
/// tile's backend, kubectl or GitOps) "carries" the commit of every tag that has none: so every
/// tag the gate writes carries one after a move. It is never a build's real commit (a slash
/// cannot be in one), so no workbench's recorded commit is kept alive by a hidden tag: the
/// candidate may still hold the digest a rollback left, and the previous tag the one a
/// promotion replaced.
pub(crate) const CANDIDATE_BUILD: &str = "imagegate/candidate: not offered";

/// The `notebook-build-commit` of the previous tag a promotion pins (see [`CANDIDATE_BUILD`]).
pub(crate) const PREVIOUS_BUILD: &str = "imagegate/previous: not offered";

/// Appended to the stream's description while the last update of its served tag failed.
pub const UPDATE_FAILED_NOTE: &str =
    "[Update failed: a newer build did not pass validation; this version is unchanged.]";

/// The decision with the dashboard's view added (or a request for the image it describes).
pub(super) fn apply(
    ask: &Ask,
    settings: &OdhSettings,
    is: &ImageStream,
    fetched: &Fetched,
    decision: Decision,
) -> Decision {
    let (mut patch, mut outcome, wrote) = match decision {
        Decision::Write { patch, outcome } => (patch, outcome, true),
        Decision::Final(outcome) => (bare_patch(is), outcome, false),
        need => return need,
    };
    let t = ask.target;
    let moved = wrote && matches!(outcome.reason, reason::PROMOTED | reason::ROLLED_BACK);
    if moved {
        let digest = outcome.promoted_digest.clone();
        let facts = fetched.image.as_ref().filter(|f| is_of(f, &digest));
        let Some(facts) = facts else {
            return Decision::NeedImage {
                reference: reference_of(is, &t.candidate_tag, &digest).unwrap_or_default(),
                digest,
            };
        };
        let (marks, notes) = describe(settings, facts, &digest);
        if let Some(served) = tag_mut(&mut patch, &t.served_tag) {
            for (k, v) in marks {
                served["annotations"][k] = v.map(Value::String).unwrap_or(Value::Null);
            }
        }
        for note in notes {
            outcome.message.push_str("; ");
            outcome.message.push_str(&note);
        }
    }
    if is.current_digest(&t.served_tag).is_none() {
        // Never create or mark a served tag that has no image: only a pin may touch it.
        if let Some(tags) = patch["spec"]["tags"].as_array_mut() {
            tags.retain(|tag| tag["name"] != t.served_tag.as_str() || tag.get("from").is_some());
        }
    }
    // The previous tag a promotion pins is for rollbacks, never for new workbenches.
    if let Some(previous) = tag_mut(&mut patch, ask.previous_tag) {
        previous["annotations"][key::TAG_OUTDATED] = json!("true");
        previous["annotations"][key::BUILD_COMMIT] = json!(PREVIOUS_BUILD);
    }
    let candidate = is.spec_tag(&t.candidate_tag);
    let hide = (wrote || t.action == Action::Begin) && !candidate_hidden(is, &t.candidate_tag);
    let mark = moved
        && candidate.is_some_and(|c| tag_annotation(c, key::BUILD_COMMIT) != Some(CANDIDATE_BUILD));
    if hide || mark {
        let mut annotations = json!({key::TAG_OUTDATED: "true"});
        if mark {
            annotations[key::BUILD_COMMIT] = json!(CANDIDATE_BUILD);
        }
        if let Some(tags) = patch["spec"]["tags"].as_array_mut() {
            tags.push(json!({"name": t.candidate_tag, "annotations": annotations}));
        }
    }
    let desc = stream_annotation(is, key::IMAGE_DESC);
    if let Some(want) = description_after(desc, &outcome)
        && want.as_deref() != desc
    {
        patch["metadata"]["annotations"] =
            json!({key::IMAGE_DESC: want.map(Value::String).unwrap_or(Value::Null)});
    }
    let changes = patch["spec"]["tags"]
        .as_array()
        .is_some_and(|t| !t.is_empty())
        || patch["metadata"].get("annotations").is_some();
    if changes {
        Decision::Write { patch, outcome }
    } else {
        Decision::Final(outcome)
    }
}

/// A patch that changes nothing yet, conditional on the resourceVersion read.
fn bare_patch(is: &ImageStream) -> Value {
    json!({
        "metadata": { "resourceVersion": is.metadata.resource_version },
        "spec": { "tags": [] },
    })
}

fn tag_mut<'p>(patch: &'p mut Value, name: &str) -> Option<&'p mut Value> {
    patch["spec"]["tags"]
        .as_array_mut()?
        .iter_mut()
        .find(|t| t["name"] == name)
}

/// Whether the facts are about `digest` (their pull spec names it, or names no digest).
fn is_of(facts: &ImageFacts, digest: &str) -> bool {
    digest_from_reference(&facts.reference).is_none_or(|d| d == digest)
}

fn candidate_hidden(is: &ImageStream, candidate: &str) -> bool {
    // A candidate with no spec tag is offered by no spawner (nothing to hide, nothing to create).
    let Some(tag) = is.spec_tag(candidate) else {
        return true;
    };
    tag_annotation(tag, key::TAG_OUTDATED) == Some("true")
}

fn tag_annotation<'t>(tag: &'t TagReference, k: &str) -> Option<&'t str> {
    tag.annotations.as_ref()?.get(k).map(String::as_str)
}

fn stream_annotation<'s>(is: &'s ImageStream, k: &str) -> Option<&'s str> {
    is.metadata.annotations.as_ref()?.get(k).map(String::as_str)
}

/// The served tag's ODH annotations for the image `digest` (a `None` value removes the key), and
/// a note for each list that could not be found.
pub(super) fn describe(
    settings: &OdhSettings,
    facts: &ImageFacts,
    digest: &str,
) -> (Vec<(&'static str, Option<String>)>, Vec<String>) {
    let mut notes = Vec::new();
    let mut list = |k: &'static str, param: &Option<String>, label: &str| {
        if let Some(given) = param {
            return (k, Some(given.clone()));
        }
        match facts.labels.get(label).map(|l| notebook_list(l)) {
            Some(Ok(list)) => (k, Some(list)),
            Some(Err(why)) => {
                notes.push(format!("{k} removed: the image label {label:?} {why}"));
                (k, None)
            }
            None => {
                notes.push(format!(
                    "{k} removed: no param and no image label {label:?} describes the new image"
                ));
                (k, None)
            }
        }
    };
    let software = list(key::SOFTWARE, &settings.software, &settings.software_label);
    let dependencies = list(
        key::PYTHON_DEPENDENCIES,
        &settings.python_dependencies,
        &settings.python_dependencies_label,
    );
    let commit = settings
        .build_commit_labels
        .iter()
        .find_map(|l| {
            facts
                .labels
                .get(l)
                .map(|v| v.trim())
                .filter(|v| !v.is_empty())
        })
        .map(str::to_string)
        .unwrap_or_else(|| short_digest(digest));
    let marks = vec![software, dependencies, (key::BUILD_COMMIT, Some(commit))];
    (marks, notes)
}

/// `sha256:` and the first 12 hex digits.
fn short_digest(digest: &str) -> String {
    digest.chars().take("sha256:".len() + 12).collect()
}

/// The stream description the outcome asks for: with [`UPDATE_FAILED_NOTE`] after an
/// `UpdateFailed`, without it after a success that leaves the served tag on a validated image
/// (`None` inside: no description at all); `None` when the outcome says nothing about it.
pub(super) fn description_after(desc: Option<&str>, outcome: &Outcome) -> Option<Option<String>> {
    let base = desc
        .map(|d| d.strip_suffix(UPDATE_FAILED_NOTE).unwrap_or(d).trim_end())
        .unwrap_or_default();
    if !outcome.succeeded && outcome.phase == phase::UPDATE_FAILED {
        return Some(Some(if base.is_empty() {
            UPDATE_FAILED_NOTE.to_string()
        } else {
            format!("{base} {UPDATE_FAILED_NOTE}")
        }));
    }
    let cleared = matches!(
        outcome.reason,
        reason::PROMOTED | reason::ROLLED_BACK | reason::ALREADY_PROMOTED
    );
    if outcome.succeeded && cleared {
        if desc.is_some_and(|d| d.ends_with(UPDATE_FAILED_NOTE)) {
            return Some((!base.is_empty()).then(|| base.to_string()));
        }
        return Some(desc.map(str::to_string));
    }
    None
}
