//! TagEvents: how a tag's history grows and how spec tags that point inside the cluster
//! become events.
//!
//! The history rules are openshift-apiserver `internal/imageutil/helpers.go`
//! (`LatestTaggedImage`, `AddTagEventToImageStream`, `ResolveImageID`, `UpdateTrackingTags`),
//! as methods on [`Stream`]. `tagsChanged` (registry/imagestream/strategy.go) runs them during
//! an ImageStream write: every new or changed spec tag whose `from` is an ImageStreamImage, an
//! ImageStreamTag or a `reference: true` DockerImage gets its TagEvent synchronously.

use std::collections::BTreeSet;

use super::{
    DockerRef, NamedTagEventList, ObjectReference, Settings, Stream, StreamLookup, TagEvent,
    TagReference, aggregate, digest_or_image_match, field,
};

impl Stream {
    /// `LatestTaggedImage`: the newest TagEvent of a tag ("" means "latest").
    pub fn latest(&self, tag: &str) -> Option<&TagEvent> {
        let tag = if tag.is_empty() { "latest" } else { tag };
        self.status_tags.get(tag)?.items.as_ref()?.first()
    }

    /// `AddTagEventToImageStream` (internal/imageutil/helpers.go): prepend a new image, collapse
    /// an identical one (only the generation moves, `created` stays), patch `items[0]` in place
    /// when only one of image/reference differs. Any change clears the tag's conditions.
    pub fn add_tag_event(&mut self, tag: &str, next: TagEvent) -> bool {
        let list = self.status_tags.entry(tag.to_string()).or_default();
        let Some(previous) = list.items.as_mut().and_then(|i| i.first_mut()) else {
            *list = NamedTagEventList {
                tag: tag.to_string(),
                items: Some(vec![next]),
                ..Default::default()
            };
            return true;
        };
        let same_ref = previous.docker_image_reference == next.docker_image_reference;
        let same_image = previous.image == next.image;
        match (same_ref, same_image) {
            _ if same_ref && same_image && previous.generation == next.generation => return false,
            (true, true) => {}
            (true, false) => previous.image = next.image.clone(),
            (false, true) => previous.docker_image_reference = next.docker_image_reference.clone(),
            (false, false) => {
                list.items.get_or_insert_with(Vec::new).insert(0, next);
                list.conditions.clear();
                return true;
            }
        }
        previous.generation = next.generation;
        list.conditions.clear();
        true
    }

    /// The distinct images of all status histories matching an ID or prefix
    /// (`imageutil.DigestOrImageMatch`), and the last matching event seen.
    pub fn matching_images(&self, id: &str) -> (BTreeSet<String>, Option<&TagEvent>) {
        let mut set = BTreeSet::new();
        let mut last = None;
        for event in self
            .status_tags
            .values()
            .flat_map(|t| t.items.iter().flatten())
        {
            if digest_or_image_match(&event.image, id) {
                set.insert(event.image.clone());
                last = Some(event);
            }
        }
        (set, last)
    }

    /// `ResolveImageID`: exactly one image of any history must match; the new event copies
    /// that history entry's reference and gets `created = now`.
    pub fn resolve_image_id(&self, id: &str, now: &str) -> Result<TagEvent, String> {
        let (set, last) = self.matching_images(id);
        match (set.len(), last) {
            (1, Some(e)) => Ok(TagEvent {
                created: Some(now.to_string()),
                docker_image_reference: e.docker_image_reference.clone(),
                image: e.image.clone(),
                ..Default::default()
            }),
            (0, _) | (_, None) => Err(format!(
                "imagestreamimage.image.openshift.io {id:?} not found"
            )),
            _ => Err(format!(
                "Operation cannot be fulfilled on imagestreamimage.image.openshift.io {id:?}: \
                 multiple images match the prefix {id:?}: {}",
                set.into_iter().collect::<Vec<_>>().join(", ")
            )),
        }
    }

    /// `UpdateTrackingTags`: spec tags of this stream whose `from` is the ImageStreamTag
    /// `updated` (`oc tag --alias`) follow its newest event.
    pub fn update_tracking_tags(&mut self, updated: &str, event: &TagEvent) -> usize {
        let (ns, name) = (self.namespace().to_string(), self.name().to_string());
        let trackers: Vec<String> = self
            .spec_tags
            .iter()
            .filter(|(_, r)| {
                let Some(from) = r.from.as_ref().filter(|f| f.kind == "ImageStreamTag") else {
                    return false;
                };
                let from_ns = if from.namespace.is_empty() {
                    ns.as_str()
                } else {
                    from.namespace.as_str()
                };
                let (stream, tag) = match from.name.split_once(':') {
                    Some((s, t)) => (s, if t.is_empty() { "latest" } else { t }),
                    None => (name.as_str(), from.name.as_str()),
                };
                from_ns == ns && stream == name && tag == updated
            })
            .map(|(t, _)| t.clone())
            .collect();
        trackers
            .iter()
            .filter(|t| self.add_tag_event(t, event.clone()))
            .count()
    }
}

/// `tagsChanged`: every new or changed spec tag with a `from` inside the cluster gets a TagEvent
/// now, with the stream's (new) generation. Returns field errors.
pub(super) fn tags_changed(
    old: Option<&Stream>,
    stream: &mut Stream,
    settings: &Settings,
    lookup: StreamLookup,
    now: &str,
) -> Vec<String> {
    let mut errs = Vec::new();
    let (ns, name) = (stream.namespace().to_string(), stream.name().to_string());
    let tags: Vec<String> = stream.spec_tags.keys().cloned().collect();
    for tag in tags {
        let mut tag_ref = stream.spec_tags[&tag].clone();
        if old
            .and_then(|o| o.spec_tags.get(&tag))
            .is_some_and(|o| !tag_ref_changed(o, &tag_ref, &ns))
        {
            continue;
        }
        let Some(from) = tag_ref.from.clone() else {
            continue;
        };
        tag_ref.generation = Some(stream.generation());
        let path = format!("spec.tags[{tag}].from.name");
        if from.kind == "DockerImage" && !from.name.is_empty() {
            if tag_ref.reference {
                let event = TagEvent {
                    created: Some(now.to_string()),
                    docker_image_reference: from.name.clone(),
                    generation: stream.generation(),
                    ..Default::default()
                };
                stream.spec_tags.insert(tag.clone(), tag_ref);
                stream.add_tag_event(&tag, event);
            }
            continue;
        }
        let Some((ref_name, tag_or_id)) = parse_from_reference(&name, &from) else {
            errs.push(field::invalid(
                &path,
                &from.name,
                "must be of the form <tag>, <repo>:<tag>, <id>, or <repo>@<id>",
            ));
            continue;
        };
        let ref_ns = if from.namespace.is_empty() {
            ns.clone()
        } else {
            from.namespace.clone()
        };
        let other = if ref_ns != ns || ref_name != name {
            match lookup(&ref_ns, &ref_name).map(|v| Stream::parse(&v)) {
                None => {
                    errs.push(field::not_found(&path, &from.name));
                    continue;
                }
                Some(Err(e)) => {
                    errs.push(field::invalid(
                        &path,
                        &from.name,
                        &format!("unable to retrieve image stream: {e}"),
                    ));
                    continue;
                }
                Some(Ok(s)) => Some(s),
            }
        } else {
            None
        };
        let source = other.as_ref().unwrap_or(&*stream);
        let event = match from.kind.as_str() {
            "ImageStreamImage" => source.resolve_image_id(&tag_or_id, now).map(Some),
            _ => Ok(source.latest(&tag_or_id).cloned()),
        };
        let (src_ns, src_name) = (source.namespace().to_string(), source.name().to_string());
        let mut event = match event {
            Ok(Some(e)) => e,
            Ok(None) => continue, // the referenced tag has no image yet, which is fine
            Err(e) => {
                errs.push(field::invalid(
                    &path,
                    &from.name,
                    &format!("error generating tag event: {e}"),
                ));
                continue;
            }
        };
        event.generation = stream.generation();
        if from.kind == "ImageStreamTag" && other.is_none() {
            // openshift-apiserver's `tagsChanged` sets the generation on what
            // `tagReferenceToTagEvent` returned: for a tag of this stream, a pointer to that tag's
            // own newest event, so the tracked tag's items[0].generation is rewritten as well
            // (`created` kept). The real server does it (loop/06-nb-*-track.json: 10 -> 14).
            let tracked = if tag_or_id.is_empty() {
                "latest"
            } else {
                tag_or_id.as_str()
            };
            if let Some(first) = stream
                .status_tags
                .get_mut(tracked)
                .and_then(|l| l.items.as_mut())
                .and_then(|i| i.first_mut())
            {
                first.generation = event.generation;
            }
        }
        // A copy of another stream's integrated-registry image is pulled through this stream.
        if !tag_ref.reference
            && let Ok(mut r) = DockerRef::parse(&event.docker_image_reference)
            && !settings.internal_registry.is_empty()
            && r.registry == settings.internal_registry
            && r.namespace == src_ns
            && r.name == src_name
        {
            r.namespace = ns.clone();
            r.name = name.clone();
            event.docker_image_reference = r.exact();
        }
        stream.spec_tags.insert(tag.clone(), tag_ref);
        stream.add_tag_event(&tag, event);
    }
    update_changed_tracking_tags(stream, old);
    errs
}

/// `tagRefChanged`: namespace, name, `reference`, `importMode`, or a generation reset to 0.
/// (`from.kind` alone is not compared, as in the original.)
pub(super) fn tag_ref_changed(old: &TagReference, next: &TagReference, ns: &str) -> bool {
    let Some(nf) = next
        .from
        .as_ref()
        .filter(|f| !(f.kind.is_empty() && f.name.is_empty()))
    else {
        return false;
    };
    let empty = ObjectReference::default();
    let of = old.from.as_ref().unwrap_or(&empty);
    let or_ns = |n: &str| {
        if n.is_empty() {
            ns.to_string()
        } else {
            n.to_string()
        }
    };
    or_ns(&of.namespace) != or_ns(&nf.namespace)
        || of.name != nf.name
        || old.reference != next.reference
        || old.import_policy.import_mode != next.import_policy.import_mode
        || matches!((old.generation, next.generation), (Some(o), Some(0)) if o != 0)
}

/// `updateChangedTrackingTags`: tags whose newest event changed drive the tags tracking them.
pub(crate) fn update_changed_tracking_tags(stream: &mut Stream, old: Option<&Stream>) {
    let tags: Vec<String> = stream.status_tags.keys().cloned().collect();
    for tag in tags {
        let Some(first) = stream.latest(&tag).cloned() else {
            continue;
        };
        if old.is_some_and(|o| o.latest(&tag) == Some(&first)) {
            continue;
        }
        stream.update_tracking_tags(&tag, &first);
    }
}

/// `parseFromReference`: `<tag>` / `<id>` (this stream) or `<stream>:<tag>` / `<stream>@<id>`.
fn parse_from_reference(stream: &str, from: &ObjectReference) -> Option<(String, String)> {
    let sep = match from.kind.as_str() {
        "ImageStreamTag" => ':',
        "ImageStreamImage" => '@',
        _ => return None,
    };
    let parts: Vec<&str> = from.name.split(sep).collect();
    match parts.as_slice() {
        [one] => Some((stream.to_string(), one.to_string())),
        [s, t] => Some((s.to_string(), t.to_string())),
        _ => None,
    }
}

/// openshift-apiserver reports `tagsChanged` errors wrapped twice: an Invalid for `imagestreams`
/// inside an InternalError field error.
pub(super) fn wrap_tag_errors(name: &str, errs: Vec<String>) -> Option<String> {
    (!errs.is_empty()).then(|| {
        format!(
            ": Internal error: imagestreams {name:?} is invalid: {}",
            aggregate(&errs)
        )
    })
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::super::strategy::tests::{REPO, app_with_history, created, digest, images, updated};
    use super::super::{
        DEFAULT_INTERNAL_REGISTRY, IMPORT_SUCCESS, Settings, StrategyError, TagEventCondition,
        import_succeeded, prepare_create,
    };
    use super::*;

    const DEFAULT_REG: &str = DEFAULT_INTERNAL_REGISTRY;

    fn ev(image: &str, reference: &str, generation: i64, created: &str) -> TagEvent {
        TagEvent {
            created: Some(created.into()),
            docker_image_reference: reference.into(),
            image: image.into(),
            generation,
            ..Default::default()
        }
    }

    fn stream_with(tag: &str, items: Vec<TagEvent>) -> Stream {
        let mut s = Stream::empty("ds", "nb");
        s.status_tags.insert(
            tag.into(),
            NamedTagEventList {
                tag: tag.into(),
                items: Some(items),
                ..Default::default()
            },
        );
        s
    }

    fn spec_tag<'a>(v: &'a Value, name: &str) -> &'a Value {
        v["spec"]["tags"]
            .as_array()
            .and_then(|t| t.iter().find(|t| t["name"] == name))
            .unwrap_or(&Value::Null)
    }

    fn set_latest(v: &mut Value, from: Value) {
        let tags = v["spec"]["tags"].as_array_mut().unwrap();
        tags.retain(|t| t["name"] != "latest");
        tags.push(json!({"name": "latest", "from": from}));
    }

    #[test]
    fn a_new_image_is_prepended_and_clears_conditions() {
        let mut s = stream_with("t", vec![ev("sha256:a", "r@sha256:a", 2, "t1")]);
        s.status_tags
            .get_mut("t")
            .unwrap()
            .conditions
            .push(TagEventCondition {
                kind: IMPORT_SUCCESS.into(),
                ..Default::default()
            });
        assert!(s.add_tag_event("t", ev("sha256:b", "r@sha256:b", 3, "t2")));
        let list = &s.status_tags["t"];
        let images: Vec<&str> = list
            .items
            .iter()
            .flatten()
            .map(|e| e.image.as_str())
            .collect();
        assert_eq!(images, ["sha256:b", "sha256:a"]);
        assert!(list.conditions.is_empty());
    }

    #[test]
    fn the_same_image_and_reference_collapse_to_a_generation_update() {
        let mut s = stream_with("t", vec![ev("sha256:a", "r@sha256:a", 2, "t1")]);
        assert!(s.add_tag_event("t", ev("sha256:a", "r@sha256:a", 5, "t9")));
        assert_eq!(
            s.status_tags["t"].items,
            Some(vec![ev("sha256:a", "r@sha256:a", 5, "t1")])
        );
        assert!(
            !s.add_tag_event("t", ev("sha256:a", "r@sha256:a", 5, "t10")),
            "identical event is a no-op"
        );
    }

    #[test]
    fn only_the_reference_changing_patches_the_newest_event_in_place() {
        let mut s = stream_with("t", vec![ev("sha256:a", "old@sha256:a", 2, "t1")]);
        s.add_tag_event("t", ev("sha256:a", "new@sha256:a", 3, "t2"));
        assert_eq!(
            s.status_tags["t"].items,
            Some(vec![ev("sha256:a", "new@sha256:a", 3, "t1")])
        );
    }

    #[test]
    fn image_ids_resolve_by_unique_prefix_across_all_histories() {
        let mut s = stream_with("a", vec![ev("sha256:abc1", "r@sha256:abc1", 1, "t")]);
        s.status_tags.insert(
            "b".into(),
            NamedTagEventList {
                items: Some(vec![ev("sha256:abd2", "q@sha256:abd2", 1, "t")]),
                ..Default::default()
            },
        );
        assert_eq!(
            s.resolve_image_id("abd", "now")
                .unwrap()
                .docker_image_reference,
            "q@sha256:abd2"
        );
        assert_eq!(
            s.resolve_image_id("sha256:abc1", "now")
                .unwrap()
                .created
                .as_deref(),
            Some("now")
        );
        assert!(
            s.resolve_image_id("ab", "now")
                .unwrap_err()
                .contains("multiple images match the prefix")
        );
        assert!(
            s.resolve_image_id("ff", "now")
                .unwrap_err()
                .ends_with("not found")
        );
    }

    #[test]
    fn create_resolves_an_image_of_another_stream_and_rewrites_internal_pulls_to_itself() {
        let src = json!({"metadata": {"name": "src", "namespace": "other"}, "status": {"tags": [{"tag": "v1", "items": [
            {"created": "t0", "dockerImageReference": format!("{DEFAULT_REG}/other/src@{}", digest('a')), "image": digest('a'), "generation": 4}]}]}});
        let lookup = |ns: &str, name: &str| (ns == "other" && name == "src").then(|| src.clone());
        let mut obj = json!({"metadata": {"name": "dst", "namespace": "ns"}, "spec": {"tags": [
            {"name": "copy", "from": {"kind": "ImageStreamImage", "name": format!("src@{}", digest('a')), "namespace": "other"}},
            {"name": "alias", "from": {"kind": "ImageStreamTag", "name": "src:v1", "namespace": "other"}}]}});
        prepare_create(
            &mut obj,
            &Settings::default(),
            &lookup,
            "2024-05-05T00:00:00Z",
        )
        .unwrap();
        let tags = &obj["status"]["tags"];
        assert_eq!(tags[1]["tag"], "copy");
        assert_eq!(
            tags[1]["items"][0],
            json!({"created": "2024-05-05T00:00:00Z", "dockerImageReference": format!("{DEFAULT_REG}/ns/dst@{}", digest('a')), "image": digest('a'), "generation": 1})
        );
        assert_eq!(
            tags[0]["items"][0]["created"], "t0",
            "an ImageStreamTag copy keeps the source event's time"
        );
        assert_eq!(tags[0]["items"][0]["generation"], 1);

        let mut missing = json!({"metadata": {"name": "dst", "namespace": "ns"}, "spec": {"tags": [{"name": "c", "from": {"kind": "ImageStreamImage", "name": "gone@sha256:1", "namespace": "other"}}]}});
        let err = prepare_create(&mut missing, &Settings::default(), &lookup, "now")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("spec.tags[c].from.name: Not found: \"gone@sha256:1\""),
            "{err}"
        );
    }

    #[test]
    fn a_reference_tag_gets_an_event_with_only_the_pull_spec() {
        let is = created(
            json!({"metadata": {"name": "r", "namespace": "ns"}, "spec": {"tags": [
            {"name": "ext", "reference": true, "from": {"kind": "DockerImage", "name": "quay.io/x/y:1"}}]}}),
        );
        assert_eq!(
            is["status"]["tags"][0]["items"],
            json!([{"created": "2024-01-01T00:00:00Z", "dockerImageReference": "quay.io/x/y:1", "image": "", "generation": 1}])
        );
        assert_eq!(spec_tag(&is, "ext")["reference"], true);
    }

    #[test]
    fn an_image_stream_image_tag_resolves_synchronously_from_the_history() {
        let old = app_with_history();
        let new = updated(&old, |o| {
            set_latest(
                o,
                json!({"kind": "ImageStreamImage", "name": format!("app@{}", digest('b'))}),
            )
        })
        .unwrap();
        let names: Vec<&str> = new["spec"]["tags"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["candidate", "latest", "zeta"]);
        let item = &new["status"]["tags"][1]["items"][0];
        assert_eq!(
            item,
            &json!({"created": "2024-01-01T00:10:00Z", "dockerImageReference": format!("{REPO}/app@{}", digest('b')), "image": digest('b'), "generation": 2})
        );
        assert_eq!(
            (
                &spec_tag(&new, "latest")["generation"],
                &new["metadata"]["generation"]
            ),
            (&json!(2), &json!(2))
        );
        assert_eq!(
            spec_tag(&new, "candidate")["generation"],
            1,
            "untouched tags keep their generation"
        );
    }

    #[test]
    fn a_digest_in_no_history_is_invalid_and_changes_nothing() {
        let old = updated(&app_with_history(), |o| {
            set_latest(
                o,
                json!({"kind": "ImageStreamImage", "name": format!("app@{}", digest('b'))}),
            )
        })
        .unwrap();
        let err = updated(&old, |o| {
            set_latest(
                o,
                json!({"kind": "ImageStreamImage", "name": format!("app@{}", digest('c'))}),
            )
        })
        .unwrap_err();
        let StrategyError::Invalid(msg) = err else {
            panic!("want Invalid, got {err:?}")
        };
        assert!(
            msg.contains("error generating tag event") && msg.contains("not found"),
            "{msg}"
        );
    }

    #[test]
    fn an_ambiguous_prefix_is_invalid_with_the_conflict_message() {
        let mut old = app_with_history();
        old["status"]["tags"][0]["items"][1]["image"] =
            json!(format!("sha256:b{}", "e".repeat(63)));
        let err = updated(&old, |o| {
            set_latest(o, json!({"kind": "ImageStreamImage", "name": "app@b"}))
        })
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("multiple images match the prefix \"b\""),
            "{err}"
        );
        assert!(err.contains("is invalid"), "{err}");
    }

    #[test]
    fn retagging_to_an_older_history_entry_prepends_a_new_event() {
        let old = updated(&app_with_history(), |o| {
            set_latest(
                o,
                json!({"kind": "ImageStreamImage", "name": format!("app@{}", digest('b'))}),
            )
        })
        .unwrap();
        let new = updated(&old, |o| {
            set_latest(
                o,
                json!({"kind": "ImageStreamImage", "name": format!("app@{}", digest('a'))}),
            )
        })
        .unwrap();
        assert_eq!(images(&new, "latest"), [digest('a'), digest('b')]);
        assert_eq!(new["metadata"]["generation"], 3);
    }

    #[test]
    fn an_alias_tag_follows_the_tag_it_tracks() {
        let old = app_with_history();
        let aliased = updated(&old, |o| {
            set_latest(
                o,
                json!({"kind": "ImageStreamTag", "name": "app:candidate"}),
            )
        })
        .unwrap();
        assert_eq!(images(&aliased, "latest"), [digest('b')]);
        // openshift-apiserver sets the new tag's generation on the event it copies, which is the
        // tracked tag's own newest event, not a copy: the tracked tag's items[0].generation is
        // rewritten too, and its `created` kept (the real server: loop/06-nb-*-track.json, 10 -> 14).
        let generation = aliased["metadata"]["generation"].clone();
        let first = |v: &Value, tag: &str| {
            v["status"]["tags"]
                .as_array()
                .unwrap()
                .iter()
                .find(|t| t["tag"] == tag)
                .unwrap()["items"][0]
                .clone()
        };
        assert_eq!(first(&aliased, "candidate")["generation"], generation);
        assert_eq!(first(&aliased, "latest")["generation"], generation);
        assert_eq!(
            first(&aliased, "candidate")["created"],
            first(&old, "candidate")["created"]
        );
        assert_ne!(first(&old, "candidate")["generation"], generation);
        // A new candidate image (a scheduled import) moves the alias in the same write.
        let pull_spec = format!("{REPO}/app@{}", digest('c'));
        let imported =
            import_succeeded(&aliased, "candidate", &digest('c'), &pull_spec, "t9").unwrap();
        assert_eq!(images(&imported, "candidate")[0], digest('c'));
        assert_eq!(images(&imported, "latest"), [digest('c'), digest('b')]);
    }
}
