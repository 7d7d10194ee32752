//! The dashboard's rules over the real ODH manifests in `tests/fixtures/` (given the status an
//! import would write): each test names the rule of the notes it pins.

use super::*;
use serde_json::{Value, json};

fn fixture(name: &str) -> Value {
    let path = format!("{}/../../tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap();
    let doc = serde_norway::Deserializer::from_str(&text).next().unwrap();
    serde::Deserialize::deserialize(doc).unwrap()
}

const N: &str = "sha256:1111111111111111111111111111111111111111111111111111111111111111";
const N1: &str = "sha256:2222222222222222222222222222222222222222222222222222222222222222";

/// The shipped jupyter-minimal stream (N `2025.2`, N-1 `2025.1`), its placeholders replaced by
/// digests as the operator's kustomize does, imported, plus a gated candidate tag.
fn minimal(candidate: Value) -> ImageStream {
    let mut v = fixture("odh-notebooks_jupyter-minimal-notebook_imagestream_manifest.yaml");
    v["metadata"]["namespace"] = json!("redhat-ods-applications");
    let repo = "quay.io/opendatahub/workbench-images";
    v["spec"]["tags"][0]["from"]["name"] = json!(format!("{repo}@{N}"));
    v["spec"]["tags"][1]["from"]["name"] = json!(format!("{repo}@{N1}"));
    v["spec"]["tags"][0]["annotations"][key::BUILD_COMMIT] = json!("abc123");
    v["spec"]["tags"][1]["annotations"][key::BUILD_COMMIT] = json!("def456");
    if !candidate.is_null() {
        v["spec"]["tags"].as_array_mut().unwrap().push(candidate);
    }
    let item = |d: &str, at: &str| json!({"created": at, "dockerImageReference": format!("{repo}@{d}"), "image": d, "generation": 2});
    v["status"] = json!({
        "dockerImageRepository": "image-registry.openshift-image-registry.svc:5000/redhat-ods-applications/jupyter-minimal-notebook",
        "tags": [
            {"tag": "2025.1", "items": [item(N1, "2025-06-01T00:00:00Z")]},
            {"tag": "2025.2", "items": [item(N, "2025-12-01T00:00:00Z")]},
            {"tag": "zz-candidate", "items": [item(N, "2025-12-01T00:00:00Z")]}
        ]
    });
    serde_json::from_value(v).unwrap()
}

fn tags(view: &View) -> Vec<&str> {
    view.offered.iter().map(|o| o.tag.as_str()).collect()
}

#[test]
fn the_shipped_stream_offers_n_first_and_n_minus_1_with_build_dates() {
    // §1.3 getExistingVersionsForImageStream and compareTagVersions.
    let view = view(&minimal(Value::Null));
    assert!(view.listed && !view.byon);
    assert_eq!(tags(&view), ["2025.2", "2025.1"]);
    assert_eq!(view.default_tag(), Some("2025.2"));
    assert!(view.offered[0].recommended);
    assert_eq!(view.offered[0].build_commit.as_deref(), Some("abc123"));
    // §1.3 "Build date": the item whose reference is the DockerImage from.
    assert_eq!(
        view.offered[1].build_date.as_deref(),
        Some("2025-06-01T00:00:00Z")
    );
    assert_eq!(view.error, None);
}

#[test]
fn an_outdated_candidate_and_a_never_imported_tag_are_not_offered() {
    // §1.4: any non-empty image-tag-outdated; §1.3: no status entry, not offered.
    let hidden = json!({"name": "zz-candidate", "annotations": {key::TAG_OUTDATED: "true"},
        "from": {"kind": "DockerImage", "name": "quay.io/opendatahub/workbench-images:minimal"}});
    assert_eq!(tags(&view(&minimal(hidden))), ["2025.2", "2025.1"]);
    let visible = json!({"name": "zz-candidate", "annotations": null,
        "from": {"kind": "DockerImage", "name": "quay.io/opendatahub/workbench-images:minimal"}});
    assert_eq!(
        tags(&view(&minimal(visible))),
        ["2025.2", "zz-candidate", "2025.1"],
        "an unhidden candidate is offered to every user"
    );
    let never = json!({"name": "2026.1", "from": {"kind": "DockerImage", "name": "quay.io/x/y:1"}});
    assert_eq!(tags(&view(&minimal(never))), ["2025.2", "2025.1"]);
}

#[test]
fn a_hidden_shipped_stream_and_an_unlabelled_one_are_not_listed() {
    let mut is = minimal(Value::Null);
    is.metadata
        .annotations
        .get_or_insert_default()
        .insert(key::IMAGE_HIDDEN.into(), "true".into());
    assert!(!view(&is).listed);
    let mut is = minimal(Value::Null);
    is.metadata.labels = None;
    assert!(!view(&is).listed);
}

/// A custom image with one tag `latest` as the dashboard creates it (§3), and what a gate adds.
fn byon(first_status: Value) -> ImageStream {
    serde_json::from_value(json!({
        "apiVersion": "image.openshift.io/v1", "kind": "ImageStream",
        "metadata": {"name": "custom-my-image", "namespace": "redhat-ods-applications",
            "labels": {key::CREATED_BY: key::BYON, key::NOTEBOOK_IMAGE: "true"}},
        "spec": {"tags": [
            {"name": "candidate", "annotations": {key::TAG_OUTDATED: "true"}, "from": {"kind": "DockerImage", "name": "quay.io/me/img:latest"}},
            {"name": "latest", "from": {"kind": "ImageStreamImage", "name": format!("custom-my-image@{N}")}}
        ]},
        "status": {"dockerImageRepository": "", "tags": [
            first_status,
            {"tag": "latest", "items": [{"created": "2025-12-01T00:00:00Z", "dockerImageReference": format!("quay.io/me/img@{N}"), "image": N, "generation": 1}]}
        ]}
    }))
    .unwrap()
}

#[test]
fn a_custom_image_is_judged_by_its_first_tag_which_sorts_by_name() {
    // §1.1 isInvalidBYONImageStream and §1.2 the error of spec.tags[0]: `candidate` sorts
    // before `latest`, so a failed first import of the candidate hides the whole image.
    let failed = json!({"tag": "candidate", "items": null, "conditions": [
        {"type": "ImportSuccess", "status": "False", "reason": "NotFound", "message": "manifest unknown", "generation": 2}]});
    let view = view(&byon(failed));
    assert!(view.byon && !view.listed);
    assert_eq!(view.error.as_deref(), Some("manifest unknown"));
    assert_eq!(tags(&view), ["latest"]);
    let ok = json!({"tag": "candidate", "items": [{"created": "2025-12-01T00:00:00Z", "dockerImageReference": format!("quay.io/me/img@{N}"), "image": N, "generation": 1}]});
    let view = super::view(&byon(ok));
    assert!(view.listed);
    assert_eq!(view.error, None);
}

#[test]
fn a_workbench_is_latest_until_its_build_commit_leaves_every_tag() {
    // §1.4 DEPRECATED: no spec tag carries the workbench's commit any more.
    let is = minimal(Value::Null);
    let wb = Workbench::started_from(&is, "2025.2");
    assert_eq!(wb.last_commit.as_deref(), Some("abc123"));
    assert_eq!(workbench_status(&is, &wb), Badge::Latest);
    assert_eq!(
        workbench_status(&is, &Workbench::started_from(&is, "2025.1")),
        Badge::Current
    );
    let mut promoted = is.clone();
    promoted.spec.tags[0]
        .annotations
        .get_or_insert_default()
        .insert(key::BUILD_COMMIT.into(), "fff999".into());
    assert_eq!(workbench_status(&promoted, &wb), Badge::Deprecated);
}

#[test]
fn a_workbench_of_an_outdated_or_removed_tag_is_deprecated_or_deleted() {
    let is = minimal(Value::Null);
    let wb = Workbench::started_from(&is, "2025.1");
    let mut outdated = is.clone();
    outdated.spec.tags[1]
        .annotations
        .get_or_insert_default()
        .insert(key::TAG_OUTDATED.into(), "true".into());
    assert_eq!(workbench_status(&outdated, &wb), Badge::Deprecated);
    let mut removed = is.clone();
    removed.spec.tags.retain(|t| t.name != "2025.1");
    // §1.4 matching (c) needs the selected spec tag; without it nothing matches.
    assert_eq!(workbench_status(&removed, &wb), Badge::Deleted);
}

#[test]
fn a_tag_without_a_build_commit_makes_its_workbenches_deprecated() {
    // §1.4 derived: stored '' never equals a missing annotation.
    let is = byon(json!({"tag": "candidate", "items": []}));
    let mut shipped = is.clone();
    shipped.metadata.labels = Some([(key::NOTEBOOK_IMAGE.to_string(), "true".to_string())].into());
    let wb = Workbench::started_from(&shipped, "latest");
    assert_eq!(wb.last_commit.as_deref(), Some(""));
    assert_eq!(workbench_status(&shipped, &wb), Badge::Deprecated);
    // Custom images skip the commit rule.
    assert_eq!(workbench_status(&is, &wb), Badge::Current);
}

#[test]
fn the_webhook_resolved_image_matches_through_the_tags_history() {
    // §1.4 matching (c): the webhook wrote items[0].dockerImageReference, not is:tag.
    let is = minimal(Value::Null);
    let wb = Workbench {
        image: format!("quay.io/opendatahub/workbench-images@{N}"),
        last_image_selection: Some("jupyter-minimal-notebook:2025.2".into()),
        last_commit: Some("abc123".into()),
    };
    // (b) also matches: the spec from is that DockerImage.
    assert_eq!(workbench_status(&is, &wb), Badge::Latest);
    let mut pinned = is.clone();
    pinned.spec.tags[0].from.as_mut().unwrap().name = Some(format!("jupyter-minimal-notebook@{N}"));
    assert_eq!(workbench_status(&pinned, &wb), Badge::Latest, "by history");
    assert_eq!(
        view(&pinned).offered[0].build_date,
        None,
        "an ImageStreamImage pin shows no build date"
    );
}

#[test]
fn any_non_empty_outdated_value_hides_a_tag_even_the_documented_false() {
    // §1.4 `!!annotations[OUTDATED]`: the notebooks repository's documented example sets
    // `image-tag-outdated: 'false'`, which the dashboard reads as outdated.
    let mut v = fixture("odh-notebooks_docs_example-workbench-imagestream.yaml");
    v["metadata"]["namespace"] = json!("redhat-ods-applications");
    v["status"] = json!({"dockerImageRepository": "", "tags": [{"tag": "example-tag-name", "items": [
        {"created": "2025-12-01T00:00:00Z", "dockerImageReference": "quay.io/opendatahub/workbench-images@sha256:value-of-the-image-tag", "image": "sha256:value-of-the-image-tag", "generation": 1}]}]});
    let is: ImageStream = serde_json::from_value(v).unwrap();
    let view = view(&is);
    assert!(view.listed);
    assert!(view.offered.is_empty(), "{view:?}");
    let mut unset = is.clone();
    unset.spec.tags[0]
        .annotations
        .as_mut()
        .unwrap()
        .remove(key::TAG_OUTDATED);
    assert_eq!(tags(&super::view(&unset)), ["example-tag-name"]);
}
