//! What an `ImageStreamImport` (`spec.import: true`) writes into the stream, as the import and
//! scheduled-import controllers drive it: openshift-apiserver
//! `registry/imagestreamimport/rest.go` (`importSuccessful`, `checkImportFailure`,
//! `ensureSpecTag`) stored through the `InternalStrategy`.
//!
//! Level-driven: an import that changes nothing writes nothing (the functions return None),
//! and a failure identical to the recorded one (type, status, reason, message) is not rewritten.

use serde_json::Value;

use super::strategy::update_stream;
use super::{
    DOCKER_REPOSITORY_CHECK_ANNOTATION, IMPORT_SUCCESS, ObjectReference, Settings, Stream,
    TagEvent, TagEventCondition, TagImportPolicy, TagReference, TagReferencePolicy, semantic_eq,
};

/// One `spec.images[]` entry of an ImageStreamImport: import `from` into `tag`.
#[derive(Clone, Debug, PartialEq)]
pub struct ImportSpec {
    /// The tag imported into (`spec.images[].to.name`).
    pub tag: String,
    /// The DockerImage pull spec imported from, e.g. `quay.io/org/nb:latest`.
    pub from: String,
    /// `importPolicy` (`{scheduled, insecure, importMode}`); null means defaults.
    pub import_policy: Value,
    /// `referencePolicy` (`{type}`); used only when the spec tag has none.
    pub reference_policy: Value,
}

impl ImportSpec {
    /// What the ImageStreamController sends for a spec tag: its `from.name` and policies.
    pub fn for_spec_tag(stream: &Value, tag: &str) -> Option<ImportSpec> {
        let s = Stream::parse(stream).ok()?;
        let t = s.spec_tags.get(tag)?;
        Some(ImportSpec {
            tag: tag.to_string(),
            from: t.from.as_ref().map(|f| f.name.clone()).unwrap_or_default(),
            import_policy: super::to_value(&t.import_policy),
            reference_policy: super::to_value(&t.reference_policy),
        })
    }

    /// The tag's import and reference policies with the API's defaults (`Legacy`, `Source`).
    pub(crate) fn policies(&self) -> (TagImportPolicy, TagReferencePolicy) {
        let mut import: TagImportPolicy =
            super::from_json(self.import_policy.clone()).unwrap_or_default();
        if import.import_mode.is_empty() {
            import.import_mode = "Legacy".into();
        }
        let mut reference: TagReferencePolicy =
            super::from_json(self.reference_policy.clone()).unwrap_or_default();
        if reference.kind.is_empty() {
            reference.kind = "Source".into();
        }
        (import, reference)
    }
}

fn spec_for(stream: &Value, tag: &str, fallback_from: &str) -> ImportSpec {
    ImportSpec::for_spec_tag(stream, tag).unwrap_or_else(|| ImportSpec {
        tag: tag.to_string(),
        from: fallback_from.to_string(),
        import_policy: Value::Null,
        reference_policy: Value::Null,
    })
}

/// A successful (scheduled) import of spec tag `tag` resolving to `digest` at `pull_spec`
/// (`registry/repo@sha256:…`). None when nothing changes (same image and reference as `items[0]`
/// and no pending spec generation): the real server then writes nothing. Otherwise the stream to
/// store: TagEvent added with generation = `metadata.generation + 1` (prepended, or collapsed
/// into `items[0]` when only the generation moves), that generation on the stream and the spec
/// tag, conditions cleared, `openshift.io/image.dockerRepositoryCheck` = `now`. A missing spec
/// tag is created (from `pull_spec`).
pub fn import_succeeded(
    stream: &Value,
    tag: &str,
    digest: &str,
    pull_spec: &str,
    now: &str,
) -> Option<Value> {
    import_spec_succeeded(
        stream,
        &spec_for(stream, tag, pull_spec),
        digest,
        pull_spec,
        now,
    )
}

/// A failed import of spec tag `tag`: condition ImportSuccess=False `{reason, message,
/// generation: metadata.generation + 1, lastTransitionTime: now}` replacing the tag's conditions,
/// the same generation on the stream and the spec tag, items untouched. None if an identical
/// condition (type, status, reason, message) is already recorded.
pub fn import_failed(
    stream: &Value,
    tag: &str,
    reason: &str,
    message: &str,
    now: &str,
) -> Option<Value> {
    import_spec_failed(stream, &spec_for(stream, tag, ""), reason, message, now)
}

/// [`import_succeeded`] for an explicit import request (`ImageStreamImport.spec.images[]`).
pub fn import_spec_succeeded(
    stream: &Value,
    spec: &ImportSpec,
    digest: &str,
    pull_spec: &str,
    now: &str,
) -> Option<Value> {
    let original = parsed(stream)?;
    let mut s = original.clone();
    let tag = spec.tag.as_str();
    let (import_policy, reference_policy) = spec.policies();
    let event = TagEvent {
        created: Some(now.to_string()),
        docker_image_reference: pull_spec.to_string(),
        image: digest.to_string(),
        generation: s.generation().saturating_add(1),
        ..Default::default()
    };
    let different_event = s.latest(tag).is_none_or(|p| {
        p.docker_image_reference != event.docker_image_reference || p.image != event.image
    });
    let pending_generation = match (
        s.spec_tags.get(tag).and_then(|t| t.generation),
        s.latest(tag),
    ) {
        (Some(spec_gen), Some(latest)) => spec_gen > latest.generation,
        _ => true,
    };
    if different_event || pending_generation || !s.spec_tags.contains_key(tag) {
        ensure_spec_tag(
            &mut s,
            tag,
            &spec.from,
            &import_policy,
            &reference_policy,
            true,
        );
        s.add_tag_event(tag, event);
    }
    if let Some(t) = s.spec_tags.get_mut(tag) {
        t.import_policy = import_policy;
    }
    s.status_tags
        .entry(tag.to_string())
        .or_default()
        .conditions
        .clear();
    store(original, s, now)
}

/// [`import_failed`] for an explicit import request; a missing spec tag is created from
/// `spec.from` (when given).
pub fn import_spec_failed(
    stream: &Value,
    spec: &ImportSpec,
    reason: &str,
    message: &str,
    now: &str,
) -> Option<Value> {
    let original = parsed(stream)?;
    let mut s = original.clone();
    let tag = spec.tag.as_str();
    let condition = TagEventCondition {
        kind: IMPORT_SUCCESS.into(),
        status: "False".into(),
        last_transition_time: Some(now.to_string()),
        reason: reason.to_string(),
        message: if message.is_empty() {
            "unknown error prevented import".into()
        } else {
            message.to_string()
        },
        generation: s.generation().saturating_add(1),
        ..Default::default()
    };
    let recorded = s.status_tags.get(tag).is_some_and(|t| {
        t.conditions.iter().any(|c| {
            (&c.kind, &c.status, &c.reason, &c.message)
                == (
                    &condition.kind,
                    &condition.status,
                    &condition.reason,
                    &condition.message,
                )
        })
    });
    if !recorded {
        s.status_tags.entry(tag.to_string()).or_default().conditions = vec![condition];
        if let Some(t) = s.spec_tags.get_mut(tag) {
            t.generation = Some(0);
        }
    }
    if !spec.from.is_empty() {
        let (import_policy, reference_policy) = spec.policies();
        ensure_spec_tag(
            &mut s,
            tag,
            &spec.from,
            &import_policy,
            &reference_policy,
            false,
        );
    }
    store(original, s, now)
}

fn parsed(stream: &Value) -> Option<Stream> {
    let mut s = Stream::parse(stream).ok()?;
    s.apply_defaults();
    Some(s)
}

/// `ensureSpecTag`: (re)point the spec tag at the DockerImage, generation 0 ("import pending"),
/// keeping an explicit reference policy.
fn ensure_spec_tag(
    s: &mut Stream,
    tag: &str,
    from: &str,
    import: &TagImportPolicy,
    reference: &TagReferencePolicy,
    reset: bool,
) {
    if s.spec_tags.contains_key(tag) && !reset {
        return;
    }
    let t = s
        .spec_tags
        .entry(tag.to_string())
        .or_insert_with(|| TagReference {
            name: tag.to_string(),
            ..Default::default()
        });
    t.from = Some(ObjectReference {
        kind: "DockerImage".into(),
        name: from.to_string(),
        ..Default::default()
    });
    t.generation = Some(0);
    t.import_policy = import.clone();
    if t.reference_policy.kind.is_empty() {
        t.reference_policy = reference.clone();
    }
}

/// The write decision and the `InternalStrategy` update: nothing to write if the stream was
/// already checked once and did not change; else stamp the check annotation and apply the
/// generation bookkeeping and tracking tags of a normal update (status as computed).
fn store(original: Stream, mut s: Stream, now: &str) -> Option<Value> {
    s.apply_defaults();
    let changed = !semantic_eq(&original.clone().into_value(), &s.clone().into_value());
    if original.has_annotation(DOCKER_REPOSITORY_CHECK_ANNOTATION) && !changed {
        return None;
    }
    s.set_annotation(DOCKER_REPOSITORY_CHECK_ANNOTATION, now);
    let no_registry = Settings {
        internal_registry: String::new(),
    };
    update_stream(&original, &mut s, false, &no_registry, &|_, _| None, now).ok()?;
    Some(s.into_value())
}

#[cfg(test)]
pub(crate) mod tests {
    use serde_json::{Value, json};

    use super::super::testdata::{doc, docs, fixture, without_rv};
    use super::super::{IstagWrite, Settings, istag_write, prepare_create, prepare_update};
    use super::*;

    const A: &str = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    const B: &str = "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
    const C: &str = "sha256:cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc";

    fn at(digest: &str) -> String {
        format!("quay.io/org/nb@{digest}")
    }

    fn items(v: &Value, tag: &str) -> Vec<Value> {
        let tags = v
            .pointer("/status/tags")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let t = tags
            .into_iter()
            .find(|t| t["tag"] == tag)
            .unwrap_or(Value::Null);
        t["items"].as_array().cloned().unwrap_or_default()
    }

    #[test]
    fn the_derived_oracle_sequence_replays_exactly() {
        let seq: Vec<Value> = docs(&fixture(ORACLE_FILE, ORACLE))
            .into_iter()
            .map(without_rv)
            .collect();
        assert_eq!(seq.len(), 5);
        let no_streams = |_: &str, _: &str| None;

        // [1] POST imagestreams with the user's body.
        let mut one = json!({
            "apiVersion": "image.openshift.io/v1", "kind": "ImageStream",
            "metadata": {"name": "nb", "namespace": "ds", "labels": {"opendatahub.io/notebook-image": "true"}},
            "spec": {"lookupPolicy": {"local": true}, "tags": [
                {"name": "candidate", "from": {"kind": "DockerImage", "name": "quay.io/org/nb:latest"}, "importPolicy": {"scheduled": true}}]}
        });
        prepare_create(
            &mut one,
            &Settings::default(),
            &no_streams,
            "2024-01-01T00:00:00Z",
        )
        .unwrap();
        assert_eq!(one, seq[0]);

        // [2] the first import; then an unchanged scheduled re-import writes nothing.
        let two = import_succeeded(&one, "candidate", A, &at(A), "2024-01-01T00:00:05Z")
            .expect("first import writes");
        assert_eq!(two, seq[1]);
        assert_eq!(
            import_succeeded(&two, "candidate", A, &at(A), "2024-01-01T00:15:00Z"),
            None
        );

        // [3] a new digest is prepended.
        let three = import_succeeded(&two, "candidate", B, &at(B), "2024-01-01T00:15:40Z")
            .expect("new digest writes");
        assert_eq!(three, seq[2]);

        // [4] `oc tag ds/nb@sha256:bbbb… ds/nb:served` = PUT imagestreamtags/nb:served.
        let body = docs(&fixture(REQUEST_FILE, REQUEST_A)).remove(0);
        let mut four = istag_write(Some(&three), "ds", &body, IstagWrite::Update).unwrap();
        four["status"] = three["status"].clone();
        prepare_update(
            &three,
            &mut four,
            &Settings::default(),
            &no_streams,
            "2024-01-01T00:20:00Z",
        )
        .unwrap();
        assert_eq!(four, seq[3]);

        // [5] the remote tag is gone; the same failure again writes nothing.
        let msg = "dockerimage.image.openshift.io \"quay.io/org/nb:latest\" not found";
        let five = import_failed(&four, "candidate", "NotFound", msg, "2024-01-01T00:31:10Z")
            .expect("failure writes");
        assert_eq!(five, seq[4]);
        assert_eq!(
            import_failed(&five, "candidate", "NotFound", msg, "2024-01-01T00:46:00Z"),
            None
        );

        // A later success clears the condition and prepends with the next generation.
        let six = import_succeeded(&five, "candidate", C, &at(C), "2024-01-01T01:00:00Z").unwrap();
        let images: Vec<Value> = items(&six, "candidate")
            .into_iter()
            .map(|i| i["image"].clone())
            .collect();
        assert_eq!(images, [C, B, A]);
        assert_eq!(six["status"]["tags"][0].get("conditions"), None);
        assert_eq!(
            (
                six["metadata"]["generation"].as_i64(),
                six["spec"]["tags"][0]["generation"].as_i64()
            ),
            (Some(6), Some(6))
        );
        assert_eq!(
            six["spec"]["tags"][1], five["spec"]["tags"][1],
            "served is untouched"
        );
    }

    #[test]
    fn a_first_import_that_fails_leaves_items_null_at_generation_two_like_rhpam() {
        let after = doc(&fixture(RHPAM_FILE, RHPAM));
        let mut before = after.clone();
        before["metadata"]["generation"] = json!(1);
        before["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("annotations");
        before["spec"]["tags"][0]["generation"] = json!(1);
        before["status"].as_object_mut().unwrap().remove("tags");
        let cond = &after["status"]["tags"][0]["conditions"][0];
        let written = import_failed(
            &before,
            "7.5.1",
            "InternalError",
            cond["message"].as_str().unwrap(),
            "2019-12-11T08:47:50Z",
        )
        .unwrap();

        let mut expected = after.clone();
        expected["spec"]["tags"][0]["importPolicy"] = json!({"importMode": "Legacy"}); // v1 defaulting since 4.13
        assert_eq!(written, expected);
    }

    #[test]
    fn a_failed_reimport_keeps_the_last_good_item_like_the_ci_cluster() {
        let stream = doc(&fixture(CI_NOTE_FILE, CI_NOTE));
        let cond = stream["status"]["tags"][0]["conditions"][0].clone();
        let same = import_failed(
            &stream,
            "latest",
            "InternalError",
            cond["message"].as_str().unwrap(),
            "2021-06-03T16:40:00Z",
        );
        assert_eq!(same, None, "an identical failure is not rewritten");

        let w = import_failed(
            &stream,
            "latest",
            "Unauthorized",
            "you may not have access",
            "2021-06-03T17:00:00Z",
        )
        .unwrap();
        assert_eq!(items(&w, "latest"), items(&stream, "latest"));
        let c = &w["status"]["tags"][0]["conditions"];
        assert_eq!(
            (
                c.as_array().map(Vec::len),
                c[0]["generation"].as_i64(),
                c[0]["reason"].as_str()
            ),
            (Some(1), Some(3367), Some("Unauthorized"))
        );
        assert_eq!(
            (
                w["metadata"]["generation"].as_i64(),
                w["spec"]["tags"][0]["generation"].as_i64()
            ),
            (Some(3367), Some(3367))
        );
        assert_eq!(
            w["metadata"]["annotations"][DOCKER_REPOSITORY_CHECK_ANNOTATION],
            "2021-06-03T17:00:00Z"
        );
    }

    #[test]
    fn a_success_with_the_same_image_after_a_failure_only_moves_the_generation() {
        let stream = doc(&fixture(CI_NOTE_FILE, CI_NOTE));
        let old = items(&stream, "latest")[0].clone();
        let (digest, pull) = (
            old["image"].as_str().unwrap(),
            old["dockerImageReference"].as_str().unwrap(),
        );
        let w = import_succeeded(&stream, "latest", digest, pull, "2021-06-04T00:00:00Z")
            .expect("pending generation writes");
        let mut collapsed = old.clone();
        collapsed["generation"] = json!(3367);
        assert_eq!(
            items(&w, "latest"),
            [collapsed],
            "created stays, only the generation moves"
        );
        assert_eq!(w["status"]["tags"][0].get("conditions"), None);
        assert_eq!(
            w["spec"]["tags"][0]["referencePolicy"]["type"], "Local",
            "an import keeps the reference policy"
        );
    }

    #[test]
    fn an_import_into_a_tag_without_a_spec_tag_creates_it() {
        let stream = json!({"metadata": {"name": "nb", "namespace": "ds", "generation": 1}, "spec": {}, "status": {"dockerImageRepository": "r/ds/nb"}});
        let w = import_succeeded(&stream, "pushed", A, &at(A), "2024-01-01T00:00:00Z").unwrap();
        assert_eq!(
            w["spec"]["tags"][0]["from"],
            json!({"kind": "DockerImage", "name": at(A)})
        );
        assert_eq!(
            (
                w["spec"]["tags"][0]["generation"].as_i64(),
                w["metadata"]["generation"].as_i64()
            ),
            (Some(2), Some(2))
        );
        assert_eq!(items(&w, "pushed")[0]["generation"], 2);
    }

    #[test]
    fn imports_into_malformed_streams_write_nothing() {
        assert_eq!(import_succeeded(&json!("x"), "t", A, &at(A), "now"), None);
        assert_eq!(
            import_failed(&json!({"spec": {"tags": 5}}), "t", "NotFound", "m", "now"),
            None
        );
    }

    pub(crate) const ORACLE_FILE: &str =
        "DERIVED_emulator_sequence_scheduled-import_promotion_tag-deleted.yaml";
    pub(crate) const REQUEST_FILE: &str = "DERIVED_request-bodies_promote-and-import.yaml";
    pub(crate) const RHPAM_FILE: &str =
        "rhpam-lab_rhpam-kieserver-rhel8_imagestream_never-imported.yaml";
    pub(crate) const CI_NOTE_FILE: &str = "ci-note_ansible-runner_imagestream_import-failed.yaml";

    /// Inline copy of ../shared/reference/objects/DERIVED_emulator_sequence_… (comments dropped):
    /// [1] created, [2] first import, [3] new digest, [4] promoted to served, [5] import failed.
    const ORACLE: &str = r#"
apiVersion: image.openshift.io/v1
kind: ImageStream
metadata: {name: nb, namespace: ds, generation: 1, resourceVersion: "1001", labels: {opendatahub.io/notebook-image: "true"}}
spec:
  lookupPolicy: {local: true}
  tags:
  - {name: candidate, annotations: null, from: {kind: DockerImage, name: quay.io/org/nb:latest}, generation: 1,
     importPolicy: {scheduled: true, importMode: Legacy}, referencePolicy: {type: Source}}
status:
  dockerImageRepository: image-registry.openshift-image-registry.svc:5000/ds/nb
---
apiVersion: image.openshift.io/v1
kind: ImageStream
metadata: {name: nb, namespace: ds, generation: 2, resourceVersion: "1002", labels: {opendatahub.io/notebook-image: "true"},
           annotations: {openshift.io/image.dockerRepositoryCheck: "2024-01-01T00:00:05Z"}}
spec:
  lookupPolicy: {local: true}
  tags:
  - {name: candidate, annotations: null, from: {kind: DockerImage, name: quay.io/org/nb:latest}, generation: 2,
     importPolicy: {scheduled: true, importMode: Legacy}, referencePolicy: {type: Source}}
status:
  dockerImageRepository: image-registry.openshift-image-registry.svc:5000/ds/nb
  tags:
  - tag: candidate
    items:
    - {created: "2024-01-01T00:00:05Z", dockerImageReference: quay.io/org/nb@sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa, generation: 2, image: sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa}
---
apiVersion: image.openshift.io/v1
kind: ImageStream
metadata: {name: nb, namespace: ds, generation: 3, resourceVersion: "1377", labels: {opendatahub.io/notebook-image: "true"},
           annotations: {openshift.io/image.dockerRepositoryCheck: "2024-01-01T00:15:40Z"}}
spec:
  lookupPolicy: {local: true}
  tags:
  - {name: candidate, annotations: null, from: {kind: DockerImage, name: quay.io/org/nb:latest}, generation: 3,
     importPolicy: {scheduled: true, importMode: Legacy}, referencePolicy: {type: Source}}
status:
  dockerImageRepository: image-registry.openshift-image-registry.svc:5000/ds/nb
  tags:
  - tag: candidate
    items:
    - {created: "2024-01-01T00:15:40Z", dockerImageReference: quay.io/org/nb@sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb, generation: 3, image: sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb}
    - {created: "2024-01-01T00:00:05Z", dockerImageReference: quay.io/org/nb@sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa, generation: 2, image: sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa}
---
apiVersion: image.openshift.io/v1
kind: ImageStream
metadata: {name: nb, namespace: ds, generation: 4, resourceVersion: "1502", labels: {opendatahub.io/notebook-image: "true"},
           annotations: {openshift.io/image.dockerRepositoryCheck: "2024-01-01T00:15:40Z"}}
spec:
  lookupPolicy: {local: true}
  tags:
  - {name: candidate, annotations: null, from: {kind: DockerImage, name: quay.io/org/nb:latest}, generation: 3,
     importPolicy: {scheduled: true, importMode: Legacy}, referencePolicy: {type: Source}}
  - {name: served, annotations: null, from: {kind: ImageStreamImage, name: "nb@sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb", namespace: ds},
     generation: 4, importPolicy: {importMode: Legacy}, referencePolicy: {type: Source}}
status:
  dockerImageRepository: image-registry.openshift-image-registry.svc:5000/ds/nb
  tags:
  - tag: candidate
    items:
    - {created: "2024-01-01T00:15:40Z", dockerImageReference: quay.io/org/nb@sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb, generation: 3, image: sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb}
    - {created: "2024-01-01T00:00:05Z", dockerImageReference: quay.io/org/nb@sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa, generation: 2, image: sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa}
  - tag: served
    items:
    - {created: "2024-01-01T00:20:00Z", dockerImageReference: quay.io/org/nb@sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb, generation: 4, image: sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb}
---
apiVersion: image.openshift.io/v1
kind: ImageStream
metadata: {name: nb, namespace: ds, generation: 5, resourceVersion: "1733", labels: {opendatahub.io/notebook-image: "true"},
           annotations: {openshift.io/image.dockerRepositoryCheck: "2024-01-01T00:31:10Z"}}
spec:
  lookupPolicy: {local: true}
  tags:
  - {name: candidate, annotations: null, from: {kind: DockerImage, name: quay.io/org/nb:latest}, generation: 5,
     importPolicy: {scheduled: true, importMode: Legacy}, referencePolicy: {type: Source}}
  - {name: served, annotations: null, from: {kind: ImageStreamImage, name: "nb@sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb", namespace: ds},
     generation: 4, importPolicy: {importMode: Legacy}, referencePolicy: {type: Source}}
status:
  dockerImageRepository: image-registry.openshift-image-registry.svc:5000/ds/nb
  tags:
  - tag: candidate
    conditions:
    - {type: ImportSuccess, status: "False", lastTransitionTime: "2024-01-01T00:31:10Z", reason: NotFound,
       message: "dockerimage.image.openshift.io \"quay.io/org/nb:latest\" not found", generation: 5}
    items:
    - {created: "2024-01-01T00:15:40Z", dockerImageReference: quay.io/org/nb@sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb, generation: 3, image: sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb}
    - {created: "2024-01-01T00:00:05Z", dockerImageReference: quay.io/org/nb@sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa, generation: 2, image: sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa}
  - tag: served
    items:
    - {created: "2024-01-01T00:20:00Z", dockerImageReference: quay.io/org/nb@sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb, generation: 4, image: sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb}
"#;

    /// Inline copy of request body (A) of DERIVED_request-bodies_promote-and-import.yaml.
    const REQUEST_A: &str = r#"
kind: ImageStreamTag
apiVersion: image.openshift.io/v1
metadata: {name: "nb:served", namespace: ds}
tag:
  name: served
  from: {kind: ImageStreamImage, name: nb@sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb, namespace: ds}
  importPolicy: {importMode: Legacy}
  referencePolicy: {type: Source}
"#;

    /// Inline copy of rhpam-lab_rhpam-kieserver-rhel8_imagestream_never-imported.yaml (real).
    const RHPAM: &str = r#"
kind: ImageStream
apiVersion: image.openshift.io/v1
metadata:
 name: rhpam-kieserver-rhel8
 namespace: userNN-pam-dm1
 selfLink: >-
   /apis/image.openshift.io/v1/namespaces/pam-dm1/imagestreams/rhpam-kieserver-rhel8
 uid: e98c73cd-1bf2-11ea-8a25-0a580a800019
 resourceVersion: '23540'
 generation: 2
 creationTimestamp: '2019-12-11T08:47:50Z'
 annotations:
   openshift.io/image.dockerRepositoryCheck: '2019-12-11T08:47:50Z'
spec:
 lookupPolicy:
   local: false
 tags:
   - name: 7.5.1
     annotations: null
     from:
       kind: DockerImage
       name: 'registry.redhat.io/rhpam-7/rhpam-kieserver-rhel8:7.5.1'
     generation: 2
     importPolicy: {}
     referencePolicy:
       type: Local
status:
 dockerImageRepository: >-
   image-registry.openshift-image-registry.svc:5000/pam-dm1/rhpam-kieserver-rhel8
 tags:
   - tag: 7.5.1
     items: null
     conditions:
       - type: ImportSuccess
         status: 'False'
         lastTransitionTime: '2019-12-11T08:47:50Z'
         reason: InternalError
         message: >-
           Internal error occurred: Get
           https://registry.redhat.io/v2/rhpam-7/rhpam-kieserver-rhel8/manifests/7.5.1:
           unauthorized: Please login to the Red Hat Registry using your
           Customer Portal credentials. Further instructions can be found here:
           https://access.redhat.com/RegistryAuthentication
         generation: 2
"#;

    /// Inline copy of ci-note_ansible-runner_imagestream_import-failed.yaml (real, 2021).
    pub(crate) const CI_NOTE: &str = r#"
apiVersion: image.openshift.io/v1
kind: ImageStream
metadata:
  annotations:
    openshift.io/image.dockerRepositoryCheck: "2021-06-03T16:24:42Z"
  creationTimestamp: "2020-05-29T13:52:00Z"
  generation: 3366
  name: ansible-runner
  namespace: openshift
  resourceVersion: "2932387480"
  uid: ff02b090-c77d-441a-a60c-d5a26de66300
spec:
  lookupPolicy:
    local: true
  tags:
  - annotations: null
    from:
      kind: DockerImage
      name: docker.io/ansible/ansible-runner:latest
    generation: 3365
    importPolicy:
      importMode: Legacy
    name: latest
    referencePolicy:
      type: Local
status:
  dockerImageRepository: image-registry.openshift-image-registry.svc:5000/openshift/ansible-runner
  publicDockerImageRepository: registry.ci.openshift.org/openshift/ansible-runner
  tags:
  - conditions:
    - generation: 3365
      lastTransitionTime: "2021-06-03T16:24:42Z"
      message: 'Internal error occurred: docker.io/ansible/ansible-runner:latest:
        toomanyrequests: You have reached your pull rate limit. You may increase the
        limit by authenticating and upgrading: https://www.docker.com/increase-rate-limit'
      reason: InternalError
      status: "False"
      type: ImportSuccess
    items:
    - created: "2020-06-02T11:50:06Z"
      dockerImageReference: docker.io/ansible/ansible-runner@sha256:bd09ef403f2f90f2c6bd133d7533e939058903f69223c5f12557a49e3aed14bb
      generation: 3364
      image: sha256:bd09ef403f2f90f2c6bd133d7533e939058903f69223c5f12557a49e3aed14bb
    tag: latest
"#;
}
