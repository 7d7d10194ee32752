//! The virtual resources computed from an ImageStream: `imagestreamtags` (get, list, and writes
//! that become ImageStream writes) and `imagestreamimages` (get).
//!
//! Sources: openshift-apiserver `registry/imagestreamtag/{rest,strategy}.go`,
//! `registry/imagestreamimage/rest.go`, `internalimageutil.ResolveReferenceForTagEvent`.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::strategy::validate_tag_reference;
use super::{
    API_VERSION, DockerRef, StrategyError, Stream, TagEvent, TagReference, field, invalid,
    string_map, to_value,
};

/// Which ImageStreamTag verb a write is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IstagWrite {
    /// POST: fails AlreadyExists if the spec tag exists; creates the stream if missing.
    Create,
    /// PUT/PATCH: creates the stream if missing; the tag must be a spec tag unless `tag` is given.
    Update,
}

/// Parses `<is>:<tag>` (exactly one `:`, no `@`), as `imageutil.ParseImageStreamTagName`.
pub fn parse_istag_name(name: &str) -> Result<(&str, &str), StrategyError> {
    let bad =
        || StrategyError::BadRequest("ImageStreamTags must be retrieved with <name>:<tag>".into());
    if name.contains('@') {
        return Err(bad());
    }
    match name.split(':').collect::<Vec<_>>().as_slice() {
        [is, tag] if !is.is_empty() && !tag.is_empty() => Ok((is, tag)),
        _ => Err(bad()),
    }
}

/// Parses `<is>@<id>` (exactly one `@`), as `imageutil.ParseImageStreamImageName`.
pub fn parse_isimage_name(name: &str) -> Result<(&str, &str), StrategyError> {
    match name.split('@').collect::<Vec<_>>().as_slice() {
        [is, id] if !is.is_empty() && !id.is_empty() => Ok((is, id)),
        _ => Err(StrategyError::BadRequest(
            "ImageStreamImages must be retrieved with <name>@<id>".into(),
        )),
    }
}

fn istag_not_found(name: &str) -> StrategyError {
    StrategyError::NotFound(format!(
        "imagestreamtags.image.openshift.io {name:?} not found"
    ))
}

fn image_not_found(digest: &str) -> StrategyError {
    StrategyError::NotFound(format!("images.image.openshift.io {digest:?} not found"))
}

/// GET imagestreamtags/`<is>:<tag>` (`newISTag`). `stream` is the stored, decorated stream
/// (Local references resolve against its `status.dockerImageRepository`). NotFound when the tag
/// has no image in its history, or the Image is gone (pruned), with the real server's messages.
pub fn istag_view(
    stream: &Value,
    tag: &str,
    image_lookup: &dyn Fn(&str) -> Option<Value>,
) -> Result<Value, StrategyError> {
    let s = Stream::parse(stream)?;
    let event = s
        .latest(tag)
        .filter(|e| !e.image.is_empty())
        .ok_or_else(|| istag_not_found(&format!("{}:{tag}", s.name())))?;
    let image = image_lookup(&event.image).ok_or_else(|| image_not_found(&event.image))?;
    compose(&s, tag, Some(image), false)
}

/// The response body of an ImageStreamTag write: the view of the written stream, also when the
/// tag has no image yet (the Image is looked up if there is one).
pub fn istag_write_response(
    stream: &Value,
    tag: &str,
    image_lookup: &dyn Fn(&str) -> Option<Value>,
) -> Result<Value, StrategyError> {
    let s = Stream::parse(stream)?;
    let image = s
        .latest(tag)
        .filter(|e| !e.image.is_empty())
        .and_then(|e| image_lookup(&e.image));
    compose(&s, tag, image, true)
}

/// The ImageStreamTag a PATCH applies to: the view of `stream` (or of the stream that would be
/// created) without an image, with `metadata.annotations` = the spec tag's annotations, so that
/// a PATCH keeps them.
pub fn istag_patch_base(
    stream: Option<&Value>,
    namespace: &str,
    name: &str,
) -> Result<Value, StrategyError> {
    let (is, tag) = parse_istag_name(name)?;
    let s = match stream {
        Some(v) => Stream::parse(v)?,
        None => Stream::empty(namespace, is),
    };
    compose(&s, tag, None, true)
}

/// LIST imagestreamtags: one item per status tag with an image; `image` carries only
/// `metadata.name` and `dockerImageReference`.
pub fn istag_list(streams: &[Value]) -> Vec<Value> {
    let mut out = Vec::new();
    for s in streams.iter().filter_map(|v| Stream::parse(v).ok()) {
        out.extend(
            s.status_tags
                .keys()
                .filter_map(|tag| compose(&s, tag, None, false).ok()),
        );
    }
    out
}

/// `newISTag`.
fn compose(
    s: &Stream,
    tag: &str,
    image: Option<Value>,
    allow_empty: bool,
) -> Result<Value, StrategyError> {
    let name = format!("{}:{tag}", s.name());
    let event = match s.latest(tag).filter(|e| !e.image.is_empty()) {
        Some(e) => e.clone(),
        None if allow_empty => TagEvent {
            created: Some(s.meta_str("creationTimestamp").to_string()).filter(|c| !c.is_empty()),
            ..Default::default()
        },
        None => return Err(istag_not_found(&name)),
    };
    let spec_tag = s.spec_tags.get(tag).map(|t| TagReference {
        name: tag.to_string(),
        ..t.clone()
    });
    let annotations = spec_tag
        .as_ref()
        .and_then(|t| t.annotations.clone())
        .unwrap_or_default();

    let mut meta = Map::new();
    meta.insert("name".into(), json!(name));
    for key in ["namespace", "uid", "resourceVersion"] {
        if !s.meta_str(key).is_empty() {
            meta.insert(key.into(), json!(s.meta_str(key)));
        }
    }
    meta.insert("creationTimestamp".into(), json!(event.created));
    let labels = s.labels();
    if !labels.is_empty() {
        meta.insert("labels".into(), json!(labels));
    }
    if !annotations.is_empty() {
        meta.insert("annotations".into(), json!(annotations));
    }

    let mut img = match image {
        Some(Value::Object(mut img)) => {
            for key in [
                "kind",
                "apiVersion",
                "dockerImageManifest",
                "dockerImageConfig",
            ] {
                img.remove(key);
            }
            if spec_tag.is_some() && !annotations.is_empty() {
                let m = super::section(super::section(&mut img, "metadata"), "annotations");
                m.extend(annotations.iter().map(|(k, v)| (k.clone(), json!(v))));
            }
            img
        }
        _ if event.image.is_empty() => {
            // No image (a reference tag, a tag not imported yet): the real server serializes
            // the zero Image, which has no pull spec (probes2/09-istag-create-new-stream.json).
            let zero = json!({
                "metadata": {},
                "dockerImageMetadata": {"kind": "DockerImage", "apiVersion": "image.openshift.io/1.0",
                                        "Id": "", "Created": null, "ContainerConfig": {}},
                "dockerImageMetadataVersion": "1.0",
            });
            match zero {
                Value::Object(m) => m,
                _ => Map::new(),
            }
        }
        _ => {
            let mut img = Map::new();
            img.insert("metadata".into(), json!({"name": event.image}));
            img
        }
    };
    if !event.image.is_empty() {
        img.insert(
            "dockerImageReference".into(),
            json!(resolve_reference(s, tag, &event)),
        );
    }

    let mut view = json!({
        "kind": "ImageStreamTag", "apiVersion": API_VERSION, "metadata": meta,
        "tag": spec_tag.map_or(Value::Null, to_value),
        "generation": event.generation,
        "lookupPolicy": s.obj.get("spec").and_then(|sp| sp.get("lookupPolicy")).cloned().unwrap_or_else(|| json!({"local": false})),
        "image": img,
    });
    if let Some(c) = s.status_tags.get(tag).filter(|t| !t.conditions.is_empty()) {
        view["conditions"] = to_value(&c.conditions);
    }
    Ok(view)
}

/// `ResolveReferenceForTagEvent`: Source → the event's reference; Local → pull-through
/// `<status.dockerImageRepository>@<digest>` (falls back to Source without either).
fn resolve_reference(s: &Stream, tag: &str, event: &TagEvent) -> String {
    let local = s
        .spec_tags
        .get(tag)
        .is_some_and(|t| t.reference_policy.kind == "Local");
    let repo = s.status_str("dockerImageRepository");
    match DockerRef::parse(repo) {
        Ok(mut r) if local && !event.image.is_empty() => {
            r.tag.clear();
            r.id = event.image.clone();
            r.exact()
        }
        _ => event.docker_image_reference.clone(),
    }
}

/// POST/PUT/PATCH of an ImageStreamTag as the ImageStream to write (`imagestreamtag/rest.go`
/// `Create` / `update`). The result has no generation bookkeeping yet: store it through
/// `prepare_update` (existing stream, status as stored) or `prepare_create` (`stream` None).
///
/// - Update sets the spec tag from `tag` and **its annotations to `metadata.annotations`**
///   (a PUT without annotations clears them, as on a real cluster); without `tag` the tag must
///   already be a spec tag (400). A `metadata.resourceVersion` must match the stream's (409), or
///   the stream must exist (404); labels other than the stream's are rejected (422).
/// - Create fails AlreadyExists if the spec tag exists and copies `tag` as given (the real
///   server does not apply `metadata.annotations` on create); `tag.annotations` other than
///   `metadata.annotations` are rejected (422).
pub fn istag_write(
    stream: Option<&Value>,
    namespace: &str,
    istag: &Value,
    mode: IstagWrite,
) -> Result<Value, StrategyError> {
    let Value::Object(body) = istag else {
        return Err(StrategyError::BadRequest(
            "obj is not an ImageStreamTag".into(),
        ));
    };
    let full = body
        .get("metadata")
        .and_then(|m| m.get("name"))
        .and_then(Value::as_str)
        .unwrap_or_default();
    let (is, tag) = parse_istag_name(full)?;
    let meta_str = |k: &str| {
        body.get("metadata")
            .and_then(|m| m.get(k))
            .and_then(Value::as_str)
            .unwrap_or_default()
    };
    let annotations = match body.get("metadata").and_then(|m| m.get("annotations")) {
        None | Some(Value::Null) => None,
        Some(v) => Some(
            serde_json::from_value::<BTreeMap<String, String>>(v.clone()).map_err(|e| {
                invalid(&[field::invalid("metadata.annotations", "", &e.to_string())])
            })?,
        ),
    };
    let tag_ref = match body.get("tag") {
        None | Some(Value::Null) => None,
        Some(v) => Some(
            super::from_json::<TagReference>(v.clone())
                .map_err(|e| invalid(&[field::invalid("tag", "", &e.to_string())]))?,
        ),
    };
    let existing = stream.map(Stream::parse).transpose()?;
    if let Some(s) = existing.as_ref().filter(|s| s.name() != is) {
        return Err(StrategyError::BadRequest(format!(
            "ImageStreamTag {full:?} does not belong to ImageStream {:?}",
            s.name()
        )));
    }
    let creating = existing.is_none();
    let mut target = existing.unwrap_or_else(|| Stream::empty(namespace, is));
    let mut tag_ref = tag_ref.map(|t| TagReference {
        name: tag.to_string(),
        ..t
    });
    tag_ref.iter_mut().for_each(TagReference::apply_defaults);

    let mut errs = Vec::new();
    if let Some(t) = &mut tag_ref {
        if mode == IstagWrite::Update && !creating {
            // Strategy.PrepareForUpdate: "callers can't be required to set both annotation locations".
            t.annotations = annotations.clone();
        }
        errs.extend(validate_tag_reference("tag", t));
        if t.annotations.is_some()
            && t.annotations.clone().unwrap_or_default() != annotations.clone().unwrap_or_default()
        {
            errs.push(field::invalid("tag.annotations", "<map>", "tag annotations must not be provided or must be equal to the object meta annotations"));
        }
    }
    if mode == IstagWrite::Update && !creating {
        let labels = string_map(body.get("metadata").and_then(|m| m.get("labels")));
        if !labels.is_empty() && labels != target.labels() {
            errs.push(field::invalid(
                "metadata",
                "",
                "may not update fields other than metadata.annotations",
            ));
        }
    }
    if !errs.is_empty() {
        return Err(invalid(&errs));
    }

    match mode {
        IstagWrite::Create => {
            if target.spec_tags.contains_key(tag) {
                return Err(StrategyError::AlreadyExists(format!(
                    "imagestreamtag.image.openshift.io {full:?} already exists"
                )));
            }
            if let Some(t) = tag_ref {
                target.spec_tags.insert(tag.to_string(), t);
            }
        }
        IstagWrite::Update => {
            let rv = meta_str("resourceVersion");
            let stream_rv = target.meta_str("resourceVersion").to_string();
            if !rv.is_empty() && creating {
                return Err(istag_not_found(full));
            }
            if !rv.is_empty() && rv != stream_rv {
                return Err(StrategyError::Conflict(format!(
                    "Operation cannot be fulfilled on imagestreamtags.image.openshift.io {full:?}: \
                     another caller has updated the resource version to {stream_rv}"
                )));
            }
            let mut r = match (tag_ref, target.spec_tags.get(tag)) {
                (Some(t), _) => t,
                (None, Some(existing)) => existing.clone(),
                (None, None) => {
                    return Err(StrategyError::BadRequest(format!(
                        "imagestreamtag {tag} is not a spec tag in imagestream {}/{is}, cannot be updated",
                        target.namespace()
                    )));
                }
            };
            r.annotations = annotations;
            target.spec_tags.insert(tag.to_string(), r);
        }
    }
    Ok(target.into_value())
}

/// DELETE imagestreamtags/`<is>:<tag>`: removes both the spec tag and the status history
/// (NotFound if neither exists). Generation +1 when the spec changed, as the internal update
/// that stores it does; store the result as is (its status is the new status).
pub fn istag_delete(stream: &Value, tag: &str) -> Result<Value, StrategyError> {
    let mut s = Stream::parse(stream)?;
    let had_status = s.status_tags.remove(tag).is_some();
    let had_spec = s.spec_tags.remove(tag).is_some();
    if !had_status && !had_spec {
        return Err(istag_not_found(&format!("{}:{tag}", s.name())));
    }
    if had_spec {
        let g = s.generation();
        s.set_generation(g.saturating_add(1));
    }
    Ok(s.into_value())
}

/// GET imagestreamimages/`<is>@<digest or unique prefix>`: the Image (manifest and config
/// blanked) if its digest is in some status history of the stream. NotFound if in none or if
/// the Image is gone, Conflict if a prefix matches several images.
pub fn isimage_view(
    stream: &Value,
    name: &str,
    image_lookup: &dyn Fn(&str) -> Option<Value>,
) -> Result<Value, StrategyError> {
    let (is, id) = parse_isimage_name(name)?;
    let s = Stream::parse(stream)?;
    let (images, _) = s.matching_images(id);
    let digest = match images.len() {
        0 => {
            return Err(StrategyError::NotFound(format!(
                "imagestreamimage.image.openshift.io {name:?} not found"
            )));
        }
        1 => images.into_iter().next().unwrap_or_default(),
        _ => {
            return Err(StrategyError::Conflict(format!(
                "Operation cannot be fulfilled on imagestreamimage.image.openshift.io {name:?}: multiple images match the prefix {id:?}: {}",
                images.into_iter().collect::<Vec<_>>().join(", ")
            )));
        }
    };
    let Some(Value::Object(mut image)) = image_lookup(&digest) else {
        return Err(image_not_found(&digest));
    };
    for key in [
        "kind",
        "apiVersion",
        "dockerImageManifest",
        "dockerImageConfig",
    ] {
        image.remove(key);
    }
    let first_tagged = s
        .status_tags
        .values()
        .flat_map(|t| t.items.iter().flatten())
        .filter(|e| e.image == digest)
        .filter_map(|e| e.created.clone())
        .min();
    let mut meta = json!({"name": format!("{is}@{digest}"), "creationTimestamp": first_tagged});
    for key in ["namespace", "uid"] {
        if !s.meta_str(key).is_empty() {
            meta[key] = json!(s.meta_str(key));
        }
    }
    Ok(
        json!({"kind": "ImageStreamImage", "apiVersion": API_VERSION, "metadata": meta, "image": image}),
    )
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::super::import::tests::{CI_NOTE, CI_NOTE_FILE};
    use super::super::testdata::{doc, fixture};
    use super::*;

    const DA: &str = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    const DB: &str = "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

    fn image(digest: &str, reference: &str) -> Value {
        json!({"kind": "Image", "apiVersion": API_VERSION, "metadata": {"name": digest, "annotations": {"a": "image"}},
               "dockerImageReference": reference, "dockerImageManifest": "{}", "dockerImageConfig": "{}"})
    }

    /// nb with candidate [bbb, aaa] (annotated spec tag) and a status-only tag `pushed`.
    fn nb() -> Value {
        json!({
            "apiVersion": API_VERSION, "kind": "ImageStream",
            "metadata": {"name": "nb", "namespace": "ds", "uid": "u-1", "resourceVersion": "7", "labels": {"team": "ds"}, "generation": 3},
            "spec": {"lookupPolicy": {"local": true}, "tags": [
                {"name": "candidate", "annotations": {"opendatahub.io/notebook-software": "[]"}, "from": {"kind": "DockerImage", "name": "quay.io/org/nb:latest"},
                 "generation": 3, "importPolicy": {"importMode": "Legacy"}, "referencePolicy": {"type": "Source"}},
                {"name": "future", "annotations": null, "from": {"kind": "DockerImage", "name": "quay.io/org/nb:next"},
                 "generation": 3, "importPolicy": {"importMode": "Legacy"}, "referencePolicy": {"type": "Source"}}]},
            "status": {"dockerImageRepository": "image-registry.openshift-image-registry.svc:5000/ds/nb", "tags": [
                {"tag": "candidate", "items": [
                    {"created": "2024-01-01T00:15:40Z", "dockerImageReference": format!("quay.io/org/nb@{DB}"), "image": DB, "generation": 3},
                    {"created": "2024-01-01T00:00:05Z", "dockerImageReference": format!("quay.io/org/nb@{DA}"), "image": DA, "generation": 2}]},
                {"tag": "pushed", "items": [
                    {"created": "2023-12-31T00:00:00Z", "dockerImageReference": format!("quay.io/org/nb@{DA}"), "image": DA, "generation": 1}]}]}
        })
    }

    fn images(digest: &str) -> Option<Value> {
        [DA, DB]
            .contains(&digest)
            .then(|| image(digest, &format!("quay.io/org/nb@{digest}")))
    }

    #[test]
    fn the_istag_view_matches_the_derived_python_fixture() {
        let derived = doc(&fixture(DERIVED_ISTAG_FILE, DERIVED_ISTAG));
        let mut stream = doc(&fixture(OKD_STREAM_FILE, OKD_STREAM));
        stream["status"]["tags"] = json!([{"tag": "3.8.12", "items": [{"created": "2021-12-07T07:55:30Z",
            "dockerImageReference": "python@sha256:a874dcabc74ca202b92b826521ff79dede61caca00ceab0b65024e895baceb58",
            "image": "sha256:a874dcabc74ca202b92b826521ff79dede61caca00ceab0b65024e895baceb58", "generation": 1}]}]);
        // The stored Image: the view's image plus what the view must strip.
        let mut stored = derived["image"].clone();
        stored["kind"] = json!("Image");
        stored["apiVersion"] = json!(API_VERSION);
        stored["dockerImageManifest"] = json!("{\"schemaVersion\": 2}");
        let lookup = |d: &str| {
            (Some(d) == stored.pointer("/metadata/name").and_then(Value::as_str))
                .then(|| stored.clone())
        };
        assert_eq!(istag_view(&stream, "3.8.12", &lookup).unwrap(), derived);
        // The same tag after the prune (no status item) is 404.
        let pruned = doc(&fixture(OKD_STREAM_FILE, OKD_STREAM));
        let err = istag_view(&pruned, "3.8.12", &lookup).unwrap_err();
        assert!(
            matches!(&err, StrategyError::NotFound(m) if m == "imagestreamtags.image.openshift.io \"python:3.8.12\" not found"),
            "{err:?}"
        );
    }

    #[test]
    fn a_local_reference_policy_pulls_through_the_integrated_registry() {
        let stream = doc(&fixture(CI_NOTE_FILE, CI_NOTE));
        let partial = doc(&fixture(CI_NOTE_ISTAG_FILE, CI_NOTE_ISTAG));
        let digest = "sha256:bd09ef403f2f90f2c6bd133d7533e939058903f69223c5f12557a49e3aed14bb";
        let lookup = |d: &str| {
            (d == digest).then(|| image(d, &format!("docker.io/ansible/ansible-runner@{d}")))
        };
        let view = istag_view(&stream, "latest", &lookup).unwrap();
        assert_eq!(
            view["image"]["dockerImageReference"],
            format!(
                "image-registry.openshift-image-registry.svc:5000/openshift/ansible-runner@{digest}"
            )
        );
        assert_eq!(
            (&view["generation"], &view["conditions"]),
            (&partial["generation"], &partial["conditions"])
        );
        assert_eq!(
            view["tag"]["generation"], 3365,
            "the spec tag is ahead: the last import failed"
        );
        assert_eq!(
            view["metadata"]["creationTimestamp"],
            "2020-06-02T11:50:06Z"
        );
    }

    #[test]
    fn the_istag_view_merges_tag_annotations_and_strips_the_manifest() {
        let view = istag_view(&nb(), "candidate", &images).unwrap();
        assert_eq!(
            view["metadata"],
            json!({"name": "nb:candidate", "namespace": "ds", "uid": "u-1", "resourceVersion": "7",
            "creationTimestamp": "2024-01-01T00:15:40Z", "labels": {"team": "ds"}, "annotations": {"opendatahub.io/notebook-software": "[]"}})
        );
        assert_eq!(
            view["image"],
            json!({"metadata": {"name": DB, "annotations": {"a": "image", "opendatahub.io/notebook-software": "[]"}},
            "dockerImageReference": format!("quay.io/org/nb@{DB}")})
        );
        assert_eq!(
            (
                &view["lookupPolicy"],
                &view["generation"],
                view.get("conditions")
            ),
            (&json!({"local": true}), &json!(3), None)
        );

        let pushed = istag_view(&nb(), "pushed", &images).unwrap();
        assert_eq!(
            (&pushed["tag"], pushed["metadata"].get("annotations")),
            (&Value::Null, None)
        );
        let err = istag_view(&nb(), "candidate", &|_: &str| None).unwrap_err();
        assert!(
            matches!(&err, StrategyError::NotFound(m) if m.starts_with("images.image.openshift.io")),
            "{err:?}"
        );
        assert!(matches!(
            istag_view(&nb(), "future", &images),
            Err(StrategyError::NotFound(_))
        ));
    }

    #[test]
    fn istag_names_need_exactly_one_colon_and_no_at() {
        assert_eq!(parse_istag_name("nb:served").unwrap(), ("nb", "served"));
        for bad in ["nb", "nb:a:b", ":t", "nb:", "nb@sha256:abc", ""] {
            let err = parse_istag_name(bad).unwrap_err();
            assert!(
                matches!(&err, StrategyError::BadRequest(m) if m == "ImageStreamTags must be retrieved with <name>:<tag>"),
                "{bad}"
            );
        }
        assert_eq!(
            parse_isimage_name("nb@sha256:abc").unwrap(),
            ("nb", "sha256:abc")
        );
        assert!(matches!(
            parse_isimage_name("nb:x"),
            Err(StrategyError::BadRequest(_))
        ));
    }

    #[test]
    fn the_istag_list_has_one_item_per_status_tag_with_a_slim_image() {
        let list = istag_list(&[nb(), json!("not a stream")]);
        let names: Vec<&str> = list
            .iter()
            .map(|i| i["metadata"]["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["nb:candidate", "nb:pushed"]);
        assert_eq!(
            list[1]["image"],
            json!({"metadata": {"name": DA}, "dockerImageReference": format!("quay.io/org/nb@{DA}")})
        );
    }

    fn promote(annotations: Option<Value>) -> Value {
        let mut body = json!({"kind": "ImageStreamTag", "apiVersion": API_VERSION, "metadata": {"name": "nb:candidate", "namespace": "ds"},
            "tag": {"name": "candidate", "from": {"kind": "ImageStreamImage", "name": format!("nb@{DA}"), "namespace": "ds"}}});
        if let Some(a) = annotations {
            body["metadata"]["annotations"] = a;
        }
        body
    }

    fn candidate(v: &Value) -> Value {
        v["spec"]["tags"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == "candidate")
            .cloned()
            .unwrap()
    }

    #[test]
    fn an_istag_put_without_annotations_wipes_them_as_the_real_server_does() {
        let written = istag_write(Some(&nb()), "ds", &promote(None), IstagWrite::Update).unwrap();
        assert_eq!(candidate(&written)["annotations"], Value::Null);
        assert_eq!(candidate(&written)["from"]["name"], format!("nb@{DA}"));
        assert_eq!(written["status"], nb()["status"]);
        let kept = istag_write(
            Some(&nb()),
            "ds",
            &promote(Some(json!({"k": "v"}))),
            IstagWrite::Update,
        )
        .unwrap();
        assert_eq!(candidate(&kept)["annotations"], json!({"k": "v"}));
    }

    #[test]
    fn an_istag_patch_keeps_annotations_because_its_base_carries_them() {
        let mut base = istag_patch_base(Some(&nb()), "ds", "nb:candidate").unwrap();
        assert_eq!(base["metadata"]["resourceVersion"], "7");
        base["tag"]["from"] = json!({"kind": "ImageStreamImage", "name": format!("nb@{DA}")});
        let written = istag_write(Some(&nb()), "ds", &base, IstagWrite::Update).unwrap();
        assert_eq!(
            candidate(&written)["annotations"],
            json!({"opendatahub.io/notebook-software": "[]"})
        );
    }

    #[test]
    fn istag_writes_enforce_existence_versions_and_annotations() {
        let err = istag_write(Some(&nb()), "ds", &promote(None), IstagWrite::Create).unwrap_err();
        assert!(
            matches!(&err, StrategyError::AlreadyExists(m) if m == "imagestreamtag.image.openshift.io \"nb:candidate\" already exists"),
            "{err:?}"
        );

        let mut body = promote(Some(json!({"a": "1"})));
        body["metadata"]["name"] = json!("nb:new");
        body["tag"]["annotations"] = json!({"a": "2"});
        let err = istag_write(Some(&nb()), "ds", &body, IstagWrite::Create)
            .unwrap_err()
            .to_string();
        assert!(err.contains("tag annotations must not be provided or must be equal to the object meta annotations"), "{err}");

        let mut untagged = promote(None);
        untagged.as_object_mut().unwrap().remove("tag");
        untagged["metadata"]["name"] = json!("nb:pushed");
        let err = istag_write(Some(&nb()), "ds", &untagged, IstagWrite::Update).unwrap_err();
        assert!(
            matches!(&err, StrategyError::BadRequest(m) if m == "imagestreamtag pushed is not a spec tag in imagestream ds/nb, cannot be updated"),
            "{err:?}"
        );

        let mut stale = promote(None);
        stale["metadata"]["resourceVersion"] = json!("6");
        assert!(matches!(
            istag_write(Some(&nb()), "ds", &stale, IstagWrite::Update),
            Err(StrategyError::Conflict(_))
        ));
        assert!(matches!(
            istag_write(None, "ds", &stale, IstagWrite::Update),
            Err(StrategyError::NotFound(_))
        ));

        let mut relabel = promote(None);
        relabel["metadata"]["labels"] = json!({"team": "other"});
        assert!(matches!(
            istag_write(Some(&nb()), "ds", &relabel, IstagWrite::Update),
            Err(StrategyError::Invalid(_))
        ));

        for bad in [
            json!("x"),
            json!({"metadata": {"name": "nb"}}),
            json!({"metadata": {"name": "nb:t"}, "tag": 5}),
        ] {
            assert!(
                istag_write(Some(&nb()), "ds", &bad, IstagWrite::Update).is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn an_istag_write_into_a_missing_stream_yields_a_stream_to_create() {
        let mut body = promote(None);
        body["metadata"]["name"] = json!("fresh:served");
        let new = istag_write(None, "ds", &body, IstagWrite::Create).unwrap();
        assert_eq!(
            (
                &new["metadata"]["name"],
                &new["metadata"]["namespace"],
                &new["spec"]["tags"][0]["name"]
            ),
            (&json!("fresh"), &json!("ds"), &json!("served"))
        );
        let response = istag_write_response(&new, "served", &images).unwrap();
        assert_eq!(
            (&response["metadata"]["name"], &response["image"]),
            (
                &json!("fresh:served"),
                &json!({"metadata": {},
                        "dockerImageMetadata": {"kind": "DockerImage", "apiVersion": "image.openshift.io/1.0",
                                                "Id": "", "Created": null, "ContainerConfig": {}},
                        "dockerImageMetadataVersion": "1.0"})
            )
        );
    }

    #[test]
    fn an_istag_delete_removes_spec_and_history() {
        let after = istag_delete(&nb(), "candidate").unwrap();
        assert_eq!(after["spec"]["tags"].as_array().map(Vec::len), Some(1));
        assert_eq!(after["status"]["tags"][0]["tag"], "pushed");
        assert_eq!(after["metadata"]["generation"], 4);
        let status_only = istag_delete(&nb(), "pushed").unwrap();
        assert_eq!(
            status_only["metadata"]["generation"], 3,
            "no spec change, no new generation"
        );
        let err = istag_delete(&nb(), "nope").unwrap_err();
        assert!(
            matches!(&err, StrategyError::NotFound(m) if m == "imagestreamtags.image.openshift.io \"nb:nope\" not found"),
            "{err:?}"
        );
    }

    #[test]
    fn an_isimage_resolves_a_unique_prefix_to_the_full_digest() {
        let view = isimage_view(&nb(), "nb@aaaa", &images).unwrap();
        assert_eq!(
            view["metadata"],
            json!({"name": format!("nb@{DA}"), "namespace": "ds", "uid": "u-1", "creationTimestamp": "2023-12-31T00:00:00Z"})
        );
        assert_eq!(
            view["image"],
            json!({"metadata": {"name": DA, "annotations": {"a": "image"}}, "dockerImageReference": format!("quay.io/org/nb@{DA}")})
        );
        assert_eq!(view["kind"], "ImageStreamImage");
        assert!(matches!(
            isimage_view(&nb(), "nb@sha256:", &images),
            Err(StrategyError::Conflict(_))
        ));
        let err = isimage_view(&nb(), "nb@cccc", &images).unwrap_err();
        assert!(
            matches!(&err, StrategyError::NotFound(m) if m == "imagestreamimage.image.openshift.io \"nb@cccc\" not found"),
            "{err:?}"
        );
        assert!(matches!(
            isimage_view(&nb(), &format!("nb@{DB}"), &|_: &str| None),
            Err(StrategyError::NotFound(_))
        ));
        assert!(matches!(
            isimage_view(&nb(), "nb", &images),
            Err(StrategyError::BadRequest(_))
        ));
    }

    const OKD_STREAM_FILE: &str = "community-okd_python_imagestream_after-prune.json";
    const DERIVED_ISTAG_FILE: &str = "DERIVED_istag_GET_python-3.8.12.json";
    const CI_NOTE_ISTAG_FILE: &str = "ci-note_ansible-runner_istag_PARTIAL.yaml";

    /// Inline copy of community-okd_python_imagestream_after-prune.json (real CRC cluster).
    const OKD_STREAM: &str = r#"{"object": {
      "apiVersion": "image.openshift.io/v1", "kind": "ImageStream",
      "metadata": {"annotations": {"openshift.io/image.dockerRepositoryCheck": "2021-12-07T07:55:30Z"},
        "creationTimestamp": "2021-12-07T07:55:30Z", "generation": 1, "name": "python", "namespace": "images",
        "resourceVersion": "1139215", "uid": "443bad2c-9fd4-4c8f-8a24-3eca4426b07f"},
      "spec": {"lookupPolicy": {"local": false}, "tags": [{"annotations": null, "from": {"kind": "DockerImage", "name": "python:3.8.12"},
        "generation": 1, "importPolicy": {"insecure": true}, "name": "3.8.12", "referencePolicy": {"type": "Source"}}]},
      "status": {"dockerImageRepository": "image-registry.openshift-image-registry.svc:5000/images/python",
        "publicDockerImageRepository": "default-route-openshift-image-registry.apps-crc.testing/images/python", "tags": []}}}"#;

    /// Inline copy of DERIVED_istag_GET_python-3.8.12.json, with the image's layer list and
    /// Docker metadata shortened (the test takes the stored Image from this same object).
    const DERIVED_ISTAG: &str = r#"{"object": {
      "kind": "ImageStreamTag", "apiVersion": "image.openshift.io/v1",
      "metadata": {"name": "python:3.8.12", "namespace": "images", "uid": "443bad2c-9fd4-4c8f-8a24-3eca4426b07f",
        "resourceVersion": "1139215", "creationTimestamp": "2021-12-07T07:55:30Z"},
      "tag": {"name": "3.8.12", "annotations": null, "from": {"kind": "DockerImage", "name": "python:3.8.12"}, "generation": 1,
        "importPolicy": {"insecure": true}, "referencePolicy": {"type": "Source"}},
      "generation": 1, "lookupPolicy": {"local": false},
      "image": {
        "dockerImageLayers": [{"mediaType": "application/vnd.docker.image.rootfs.diff.tar.gzip",
          "name": "sha256:5e0b432e8ba9d9029a000e627840b98ffc1ed0c5172075b7d3e869be0df0fe9b", "size": 54932878}],
        "dockerImageManifestMediaType": "application/vnd.docker.distribution.manifest.v2+json",
        "dockerImageMetadata": {"Architecture": "amd64", "Created": "2021-12-03T01:53:41Z", "Size": 347487141,
          "apiVersion": "image.openshift.io/1.0", "kind": "DockerImage"},
        "dockerImageMetadataVersion": "1.0",
        "dockerImageReference": "python@sha256:a874dcabc74ca202b92b826521ff79dede61caca00ceab0b65024e895baceb58",
        "metadata": {"annotations": {"image.openshift.io/dockerLayersOrder": "ascending"}, "creationTimestamp": "2021-12-07T07:55:30Z",
          "name": "sha256:a874dcabc74ca202b92b826521ff79dede61caca00ceab0b65024e895baceb58", "resourceVersion": "1139214",
          "uid": "33be6ab4-af79-4f44-a0fd-4925bd473c1f"}}}}"#;

    /// Inline copy of ci-note_ansible-runner_istag_PARTIAL.yaml (real, truncated at the source).
    const CI_NOTE_ISTAG: &str = r#"
apiVersion: image.openshift.io/v1
conditions:
- generation: 3365
  lastTransitionTime: "2021-06-03T16:24:42Z"
  message: 'Internal error occurred: docker.io/ansible/ansible-runner:latest: toomanyrequests:
    You have reached your pull rate limit. You may increase the limit by authenticating
    and upgrading: https://www.docker.com/increase-rate-limit'
  reason: InternalError
  status: "False"
  type: ImportSuccess
generation: 3364
"#;
}
