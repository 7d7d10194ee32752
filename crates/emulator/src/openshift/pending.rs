//! Which spec tags of a stream OpenShift's image import controllers import, and when: the
//! decisions of openshift-controller-manager's `ImageStreamController` (`needsImport`,
//! `tagNeedsImport`, `LatestObservedTagGeneration` in `pkg/image/controller/`) and of its
//! `ScheduledImageStreamController` (`resetScheduledTags`), as
//! `../shared/reference/notes/openshift-imagestreams.md` §2.1 records them. Pure: the stream in,
//! the `ImageStreamImport` images out; `crate::imports` runs them.
//!
//! A tag is importable when it names a `DockerImage` and is not `reference: true`. The stream is
//! imported whole when it was never checked (no `openshift.io/image.dockerRepositoryCheck`), and
//! otherwise only the tags whose spec generation is ahead of the last one an import observed
//! (its `items[0]` or its `ImportSuccess` condition): a new tag, a changed `from`, `importMode`
//! or `reference` (the strategy gives those the stream's new generation), or `generation: 0`,
//! the API's "import now".

use serde_json::Value;

use super::import::ImportSpec;
use super::{DOCKER_REPOSITORY_CHECK_ANNOTATION, IMPORT_SUCCESS, Stream, TagReference};

fn importable(tag: &TagReference) -> bool {
    !tag.reference
        && tag
            .from
            .as_ref()
            .is_some_and(|f| f.kind == "DockerImage" && !f.name.is_empty())
}

/// The newest generation an import recorded for `tag`: its `items[0]` or its `ImportSuccess`
/// condition, whichever is later; 0 when it has none.
fn latest_observed(stream: &Stream, tag: &str) -> i64 {
    let Some(events) = stream.status_tags.get(tag) else {
        return 0;
    };
    let item = events
        .items
        .as_ref()
        .and_then(|i| i.first())
        .map_or(0, |e| e.generation);
    events
        .conditions
        .iter()
        .filter(|c| c.kind == IMPORT_SUCCESS)
        .map(|c| c.generation)
        .fold(item, i64::max)
}

fn needs_import(stream: &Stream, tag: &TagReference) -> bool {
    importable(tag)
        && match tag.generation {
            None => true,
            Some(g) => g > latest_observed(stream, &tag.name),
        }
}

fn checked(stream: &Stream) -> bool {
    stream
        .obj
        .get("metadata")
        .and_then(|m| m.get("annotations"))
        .and_then(|a| a.get(DOCKER_REPOSITORY_CHECK_ANNOTATION))
        .and_then(Value::as_str)
        .is_some_and(|s| !s.is_empty())
}

fn spec_of(stream: &Value, tag: &TagReference) -> Option<ImportSpec> {
    ImportSpec::for_spec_tag(stream, &tag.name)
}

/// What the `ImageStreamController` imports now for this stream: every importable tag of a stream
/// never checked, else the tags an import has not caught up with. Empty when nothing is due (and
/// for a malformed stream, which the real controller cannot decode either).
pub fn due_now(stream: &Value) -> Vec<ImportSpec> {
    let Ok(s) = Stream::parse(stream) else {
        return Vec::new();
    };
    let whole = !checked(&s);
    s.spec_tags
        .values()
        .filter(|t| {
            if whole {
                importable(t)
            } else {
                needs_import(&s, t)
            }
        })
        .filter_map(|t| spec_of(stream, t))
        .collect()
}

/// What a scheduled check imports: the importable tags with `importPolicy.scheduled`, except a
/// tag that names a digest and already has a history (a digest does not move; the real
/// scheduler drops such a tag after its first successful import).
pub fn scheduled(stream: &Value) -> Vec<ImportSpec> {
    let Ok(s) = Stream::parse(stream) else {
        return Vec::new();
    };
    s.spec_tags
        .values()
        .filter(|t| importable(t) && t.import_policy.scheduled)
        .filter(|t| {
            let by_digest = t.from.as_ref().is_some_and(|f| f.name.contains("@sha256:"));
            let imported = s
                .status_tags
                .get(&t.name)
                .and_then(|e| e.items.as_ref())
                .is_some_and(|i| !i.is_empty());
            !(by_digest && imported)
        })
        .filter_map(|t| spec_of(stream, t))
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const A: &str = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";

    fn tags(specs: Vec<ImportSpec>) -> Vec<String> {
        specs.into_iter().map(|s| s.tag).collect()
    }

    fn stream(checked: bool, spec: Value, status: Value) -> Value {
        let annotations = if checked {
            json!({ DOCKER_REPOSITORY_CHECK_ANNOTATION: "2026-12-05T10:00:00Z" })
        } else {
            Value::Null
        };
        json!({
            "metadata": {"name": "nb", "namespace": "ns", "generation": 3, "annotations": annotations},
            "spec": {"tags": spec},
            "status": {"dockerImageRepository": "r/ns/nb", "tags": status},
        })
    }

    #[test]
    fn a_stream_never_checked_imports_every_importable_tag() {
        let s = stream(
            false,
            json!([
                {"name": "candidate", "from": {"kind": "DockerImage", "name": "quay.io/o/nb:1"}, "generation": 1},
                {"name": "ref", "from": {"kind": "DockerImage", "name": "quay.io/o/nb:2"}, "reference": true},
                {"name": "latest", "from": {"kind": "ImageStreamImage", "name": format!("nb@{A}")}},
            ]),
            json!([]),
        );
        assert_eq!(tags(due_now(&s)), ["candidate"]);
        let spec = &due_now(&s)[0];
        assert_eq!(spec.from, "quay.io/o/nb:1");
    }

    #[test]
    fn a_checked_stream_imports_only_the_tags_no_import_has_caught_up_with() {
        let s = stream(
            true,
            json!([
                {"name": "done", "from": {"kind": "DockerImage", "name": "q/o/nb:1"}, "generation": 2},
                {"name": "changed", "from": {"kind": "DockerImage", "name": "q/o/nb:2"}, "generation": 3},
                {"name": "failed", "from": {"kind": "DockerImage", "name": "q/o/nb:3"}, "generation": 2},
                {"name": "now", "from": {"kind": "DockerImage", "name": "q/o/nb:4"}, "generation": 0},
                {"name": "new", "from": {"kind": "DockerImage", "name": "q/o/nb:5"}},
            ]),
            json!([
                {"tag": "done", "items": [{"image": A, "dockerImageReference": "x", "generation": 2, "created": "c"}]},
                {"tag": "changed", "items": [{"image": A, "dockerImageReference": "x", "generation": 2, "created": "c"}]},
                {"tag": "failed", "items": null, "conditions": [
                    {"type": "ImportSuccess", "status": "False", "reason": "NotFound", "message": "m", "generation": 2}]},
                {"tag": "now", "items": [{"image": A, "dockerImageReference": "x", "generation": 2, "created": "c"}]},
            ]),
        );
        // `generation: 0` is behind every import: the strategy turns it into the stream's next
        // generation on the write that sets it, so the stored tag is ahead; here, as stored
        // before that, 0 is not ahead of 2.
        assert_eq!(tags(due_now(&s)), ["changed", "new"]);
    }

    #[test]
    fn scheduled_checks_take_scheduled_tags_but_not_a_digest_already_imported() {
        let s = stream(
            true,
            json!([
                {"name": "candidate", "from": {"kind": "DockerImage", "name": "q/o/nb:1"}, "importPolicy": {"scheduled": true}},
                {"name": "pinned", "from": {"kind": "DockerImage", "name": format!("q/o/nb@{A}")}, "importPolicy": {"scheduled": true}},
                {"name": "fresh", "from": {"kind": "DockerImage", "name": format!("q/o/nb@{A}")}, "importPolicy": {"scheduled": true}},
                {"name": "manual", "from": {"kind": "DockerImage", "name": "q/o/nb:2"}},
            ]),
            json!([
                {"tag": "pinned", "items": [{"image": A, "dockerImageReference": "x", "generation": 2, "created": "c"}]},
            ]),
        );
        assert_eq!(tags(scheduled(&s)), ["candidate", "fresh"]);
    }

    #[test]
    fn a_malformed_stream_imports_nothing() {
        let bad = json!({"metadata": {}, "spec": {"tags": "no"}});
        assert!(due_now(&bad).is_empty() && scheduled(&bad).is_empty());
    }
}
