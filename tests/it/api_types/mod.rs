//! Pins the types in `imagegate::api` to the real APIs.
//!
//! (a) group, version, kind and URL of every type; (b) a round-trip over every document of every
//! file in `tests/fixtures/` (see its README for where each comes from), checking that nothing we
//! emit differs from the input and nothing we model is lost; (c) spot checks of the values the
//! product reads from those fixtures, through the helper methods.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::path::{Path, PathBuf};
use std::time::Duration;

mod pipelinerun;

use imagegate::api::imagestream::IMPORT_SUCCESS;
use imagegate::api::{
    CustomRun, CustomRunStatus, Image, ImageStream, ImageStreamImage, ImageStreamImport,
    ImageStreamTag, ParamValue, ParseDurationError, PipelineRun, TagEvent, TaskRun,
    parse_go_duration, tekton,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::Resource;
use kube::api::{Patch, PatchParams};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

const DIGEST_A: &str = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
const DIGEST_B: &str = "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

// ------------------------------------------------------------------------------------------------
// (a) group, version, kind, URL

#[test]
fn imagestream_is_namespaced_in_image_openshift_io_v1() {
    assert_eq!(ImageStream::api_version(&()), "image.openshift.io/v1");
    assert_eq!(ImageStream::kind(&()), "ImageStream");
    assert_eq!(
        ImageStream::url_path(&(), Some("ns")),
        "/apis/image.openshift.io/v1/namespaces/ns/imagestreams"
    );
}

#[test]
fn imagestreamtag_is_namespaced_in_image_openshift_io_v1() {
    assert_eq!(ImageStreamTag::api_version(&()), "image.openshift.io/v1");
    assert_eq!(ImageStreamTag::kind(&()), "ImageStreamTag");
    assert_eq!(
        ImageStreamTag::url_path(&(), Some("ns")),
        "/apis/image.openshift.io/v1/namespaces/ns/imagestreamtags"
    );
}

#[test]
fn imagestreamimage_is_namespaced_in_image_openshift_io_v1() {
    assert_eq!(ImageStreamImage::api_version(&()), "image.openshift.io/v1");
    assert_eq!(ImageStreamImage::kind(&()), "ImageStreamImage");
    assert_eq!(
        ImageStreamImage::url_path(&(), Some("ns")),
        "/apis/image.openshift.io/v1/namespaces/ns/imagestreamimages"
    );
}

#[test]
fn imagestreamimport_is_namespaced_in_image_openshift_io_v1() {
    assert_eq!(ImageStreamImport::api_version(&()), "image.openshift.io/v1");
    assert_eq!(ImageStreamImport::kind(&()), "ImageStreamImport");
    assert_eq!(
        ImageStreamImport::url_path(&(), Some("ns")),
        "/apis/image.openshift.io/v1/namespaces/ns/imagestreamimports"
    );
}

#[test]
fn imagestreamimport_reads_the_request_oc_import_image_sends() {
    // Body (E) of DERIVED_request-bodies_promote-and-import.yaml.
    let body = json!({
        "kind": "ImageStreamImport", "apiVersion": "image.openshift.io/v1",
        "metadata": {"name": "nb", "namespace": "ds"},
        "spec": {"import": true, "images": [{
            "from": {"kind": "DockerImage", "name": "quay.io/org/nb:latest"},
            "to": {"name": "candidate"},
            "importPolicy": {"scheduled": true, "importMode": "Legacy"},
            "referencePolicy": {"type": "Source"}}]},
    });
    let isi: ImageStreamImport = serde_json::from_value(body.clone()).unwrap();
    assert!(isi.spec.import);
    assert_eq!(isi.spec.images[0].to.as_ref().unwrap().name, "candidate");
    assert_eq!(serde_json::to_value(&isi).unwrap(), body);
}

#[test]
fn image_is_cluster_scoped_in_image_openshift_io_v1() {
    assert_eq!(Image::api_version(&()), "image.openshift.io/v1");
    assert_eq!(Image::kind(&()), "Image");
    assert_eq!(
        Image::url_path(&(), None),
        "/apis/image.openshift.io/v1/images"
    );
}

#[test]
fn customrun_is_namespaced_in_tekton_dev_v1beta1() {
    assert_eq!(CustomRun::api_version(&()), "tekton.dev/v1beta1");
    assert_eq!(CustomRun::kind(&()), "CustomRun");
    assert_eq!(
        CustomRun::url_path(&(), Some("ns")),
        "/apis/tekton.dev/v1beta1/namespaces/ns/customruns"
    );
}

#[test]
fn pipelinerun_and_taskrun_are_namespaced_in_tekton_dev_v1() {
    assert_eq!(PipelineRun::api_version(&()), "tekton.dev/v1");
    assert_eq!(PipelineRun::kind(&()), "PipelineRun");
    assert_eq!(
        PipelineRun::url_path(&(), Some("ns")),
        "/apis/tekton.dev/v1/namespaces/ns/pipelineruns"
    );
    assert_eq!(TaskRun::api_version(&()), "tekton.dev/v1");
    assert_eq!(TaskRun::kind(&()), "TaskRun");
    assert_eq!(
        TaskRun::url_path(&(), Some("ns")),
        "/apis/tekton.dev/v1/namespaces/ns/taskruns"
    );
}

#[test]
fn request_bodies_always_carry_api_version_and_kind() {
    let bodies = [
        serde_json::to_value(ImageStream::default()).unwrap(),
        serde_json::to_value(ImageStreamTag::default()).unwrap(),
        serde_json::to_value(ImageStreamImage::default()).unwrap(),
        serde_json::to_value(CustomRun::default()).unwrap(),
    ];
    let kinds: Vec<(&str, &str)> = bodies
        .iter()
        .map(|b| {
            (
                b["apiVersion"].as_str().unwrap(),
                b["kind"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        kinds,
        [
            ("image.openshift.io/v1", "ImageStream"),
            ("image.openshift.io/v1", "ImageStreamTag"),
            ("image.openshift.io/v1", "ImageStreamImage"),
            ("tekton.dev/v1beta1", "CustomRun"),
        ]
    );
}

/// Compile-time check: CustomRun status is written through the `/status` subresource.
#[allow(dead_code)]
async fn customrun_status_is_patchable(api: kube::Api<CustomRun>) -> kube::Result<CustomRun> {
    let status = CustomRunStatus::default();
    let patch = Patch::Merge(json!({ "status": status }));
    api.patch_status("run", &PatchParams::default(), &patch)
        .await
}

// ------------------------------------------------------------------------------------------------
// (b) round-trip over every fixture

fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// The documents of a fixture file: every YAML document, or the JSON `object` envelope's body.
fn documents(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap();
    match path.extension().and_then(|e| e.to_str()) {
        Some("json") => {
            let value: Value = serde_json::from_str(&text).unwrap();
            vec![value.get("object").cloned().unwrap_or(value)]
        }
        Some("yaml") => serde_norway::Deserializer::from_str(&text)
            .map(|doc| serde::Deserialize::deserialize(doc).unwrap())
            .filter(|doc: &Value| !doc.is_null())
            .collect(),
        _ => Vec::new(),
    }
}

/// The documents of one fixture, by file name relative to `tests/fixtures`.
fn fixture(name: &str) -> Vec<Value> {
    let docs = documents(&fixtures_dir().join(name));
    assert!(!docs.is_empty(), "{name}: no documents");
    docs
}

/// Document `index` of fixture `name`, round-tripped and parsed as `T`.
fn parse<T: Serialize + DeserializeOwned + PartialEq + Debug>(name: &str, index: usize) -> T {
    round_trip(&fixture(name)[index], &format!("{name}[{index}]"))
}

fn all_fixture_files() -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut dirs = vec![fixtures_dir()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if matches!(
                path.extension().and_then(|e| e.to_str()),
                Some("json" | "yaml")
            ) {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

/// Documents without a `kind`, named here so they are not skipped by accident.
const KINDLESS: &[(&str, usize, &str)] = &[
    (
        "ci-note_ansible-runner_istag_PARTIAL.yaml",
        0,
        "ImageStreamTag",
    ),
    (
        "byon_import-pipeline_imagestream_created-then-patched.yaml",
        1,
        "(merge patch)",
    ),
    (
        "DERIVED_request-bodies_promote-and-import.yaml",
        2,
        "(strategic merge patch)",
    ),
    (
        "discovery_image.openshift.io_v1_verbs_ocp3-era.json",
        0,
        "(discovery)",
    ),
];

/// Kinds in the fixtures that imagegate does not model.
const NOT_OURS: &[&str] = &[
    "ImageStreamImport",
    "CustomResourceDefinition",
    "Deployment",
    "CustomRuntimeEnvironment",
    "(merge patch)",
    "(strategic merge patch)",
    "(discovery)",
];

#[test]
fn every_fixture_document_of_our_kinds_round_trips() {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for path in all_fixture_files() {
        let file = path.file_name().unwrap().to_str().unwrap().to_owned();
        for (index, doc) in documents(&path).iter().enumerate() {
            let what = format!("{file}[{index}]");
            let kind = match doc.get("kind").and_then(Value::as_str) {
                Some(kind) => kind,
                None => KINDLESS
                    .iter()
                    .find(|(f, i, _)| *f == file && *i == index)
                    .map(|(_, _, kind)| *kind)
                    .unwrap_or_else(|| panic!("{what}: no kind; add it to KINDLESS")),
            };
            match kind {
                "ImageStream" => drop(round_trip::<ImageStream>(doc, &what)),
                "ImageStreamTag" => drop(round_trip::<ImageStreamTag>(doc, &what)),
                "ImageStreamImage" => drop(round_trip::<ImageStreamImage>(doc, &what)),
                "Image" => drop(round_trip::<Image>(doc, &what)),
                "CustomRun" => drop(round_trip::<CustomRun>(doc, &what)),
                "PipelineRun" => {
                    let modelled = without(doc, PIPELINERUN_UNMODELLED);
                    drop(round_trip::<PipelineRun>(&modelled, &what))
                }
                "TaskRun" => drop(round_trip::<TaskRun>(
                    &without(doc, TASKRUN_UNMODELLED),
                    &what,
                )),
                // Not ours, but its `image` block is the Image shape embedded in an istag.
                "ImageStreamMapping" => drop(round_trip::<Image>(&doc["image"], &what)),
                other if NOT_OURS.contains(&other) => {}
                other => panic!("{what}: kind {other} is neither ours nor in NOT_OURS"),
            }
            *seen.entry(kind.to_owned()).or_default() += 1;
        }
    }
    // Lower bounds, so that a fixture that silently stops parsing into documents is noticed.
    for (kind, at_least) in [
        ("ImageStream", 14),
        ("ImageStreamTag", 4),
        ("Image", 2),
        ("ImageStreamMapping", 1),
        ("CustomRun", 13),
        ("PipelineRun", 1),
        ("TaskRun", 2),
    ] {
        let count = seen.get(kind).copied().unwrap_or(0);
        assert!(
            count >= at_least,
            "{kind}: {count} documents, expected at least {at_least}"
        );
    }
}

/// The fields of a PipelineRun the type does not model (the controller reads only the Pipeline's
/// name and the children), as JSON pointers.
const PIPELINERUN_UNMODELLED: &[&str] = &[
    "/spec/params",
    "/spec/taskRunTemplate",
    "/spec/timeouts",
    "/status/startTime",
    "/status/completionTime",
    "/status/results",
];

/// The fields of a TaskRun the type does not model (the controller reads its params and
/// condition).
const TASKRUN_UNMODELLED: &[&str] = &[
    "/spec/serviceAccountName",
    "/spec/taskRef",
    "/spec/timeout",
    "/status/podName",
    "/status/startTime",
    "/status/completionTime",
    "/status/results",
];

/// The fields a document's kind does not model, by path (the others, by key, in
/// [`is_unmodelled`]).
fn unmodelled_fields(doc: &Value) -> &'static [&'static str] {
    match doc["kind"].as_str() {
        Some("PipelineRun") => PIPELINERUN_UNMODELLED,
        Some("TaskRun") => TASKRUN_UNMODELLED,
        _ => &[],
    }
}

/// `doc` without the fields at `pointers` (each named, so nothing else is dropped unnoticed).
fn without(doc: &Value, pointers: &[&str]) -> Value {
    let mut doc = doc.clone();
    for pointer in pointers {
        let (parent, key) = pointer.rsplit_once('/').unwrap();
        if let Some(Value::Object(o)) = doc.pointer_mut(parent) {
            o.remove(key);
        }
    }
    doc
}

/// Parses `original` as `T`, serializes it back and checks the result against the input:
/// typed -> JSON -> typed is the identity, every field we emit has the input's value (or is a
/// Go zero value for a field the input lacked, as Go's `json` emits for fields without
/// `omitempty`), and every input field we model is emitted again.
fn round_trip<T: Serialize + DeserializeOwned + PartialEq + Debug>(
    original: &Value,
    what: &str,
) -> T {
    let original = &without(original, unmodelled_fields(original));
    let typed: T = serde_json::from_value(original.clone())
        .unwrap_or_else(|e| panic!("{what}: does not parse: {e}"));
    let emitted = serde_json::to_value(&typed).unwrap();
    let again: T = serde_json::from_value(emitted.clone())
        .unwrap_or_else(|e| panic!("{what}: our own output does not parse: {e}"));
    assert_eq!(
        typed, again,
        "{what}: typed -> JSON -> typed changed the value"
    );
    assert_emitted_match_input(original, &emitted, "", what);
    assert_nothing_modelled_lost(original, &emitted, "", what);
    typed
}

/// The root `apiVersion`/`kind` are written from the Rust type, not copied from the input.
fn is_root_type_meta(path: &str, key: &str) -> bool {
    path.is_empty() && matches!(key, "apiVersion" | "kind")
}

fn assert_emitted_match_input(input: &Value, emitted: &Value, path: &str, what: &str) {
    match (input, emitted) {
        (Value::Object(input), Value::Object(emitted)) => {
            for (key, out) in emitted {
                let here = format!("{path}/{key}");
                match input.get(key) {
                    _ if is_root_type_meta(path, key) => {}
                    Some(value) => assert_emitted_match_input(value, out, &here, what),
                    None => assert!(is_go_zero(out), "{what}: {here} = {out} was invented"),
                }
            }
        }
        (Value::Array(input), Value::Array(emitted)) => {
            assert_eq!(input.len(), emitted.len(), "{what}: {path} changed length");
            for (i, (value, out)) in input.iter().zip(emitted).enumerate() {
                assert_emitted_match_input(value, out, &format!("{path}/{i}"), what);
            }
        }
        (value, out) => assert_eq!(value, out, "{what}: {path} changed"),
    }
}

fn assert_nothing_modelled_lost(input: &Value, emitted: &Value, path: &str, what: &str) {
    match (input, emitted) {
        (Value::Object(input), Value::Object(emitted)) => {
            let parent = path.rsplit('/').find(|s| s.parse::<usize>().is_err());
            for (key, value) in input {
                let here = format!("{path}/{key}");
                match emitted.get(key) {
                    Some(out) => assert_nothing_modelled_lost(value, out, &here, what),
                    None => assert!(
                        is_go_zero(value) || is_unmodelled(parent.unwrap_or(""), key),
                        "{what}: {here} = {value} was lost (model it or list it in is_unmodelled)"
                    ),
                }
            }
        }
        (Value::Array(input), Value::Array(emitted)) => {
            for (i, (value, out)) in input.iter().zip(emitted).enumerate() {
                assert_nothing_modelled_lost(value, out, &format!("{path}/{i}"), what);
            }
        }
        _ => {}
    }
}

/// A value Go's `omitempty` drops, and that Go emits for an unset field without it.
fn is_go_zero(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.values().all(is_go_zero),
    }
}

/// Input fields the types deliberately do not model, by the key of the object holding them.
fn is_unmodelled(parent: &str, key: &str) -> bool {
    match parent {
        // Docker image metadata: only what the checks read is modelled.
        "dockerImageMetadata" => {
            !matches!(key, "Config" | "Architecture" | "Os" | "Created" | "Size")
        }
        "Config" => !matches!(key, "Labels" | "User"),
        // openshift-docs writes `selflink` (sic); the real field `selfLink` is modelled.
        "metadata" => key == "selflink",
        // tekton docs retries example uses the v1alpha1 field `ref`; the CRD prunes it.
        "spec" => key == "ref",
        _ => false,
    }
}

// ------------------------------------------------------------------------------------------------
// (c) spot checks and helpers: ImageStream

const SEQUENCE: &str = "DERIVED_emulator_sequence_scheduled-import_promotion_tag-deleted.yaml";

fn time(text: &str) -> Time {
    Time(text.parse().unwrap())
}

#[test]
fn scheduled_import_sequence_moves_the_candidate_digest_and_keeps_history() {
    let streams: Vec<ImageStream> = (0..5).map(|i| parse(SEQUENCE, i)).collect();
    let digests: Vec<Option<&str>> = streams
        .iter()
        .map(|s| s.current_digest("candidate"))
        .collect();
    assert_eq!(
        digests,
        [
            None,
            Some(DIGEST_A),
            Some(DIGEST_B),
            Some(DIGEST_B),
            Some(DIGEST_B)
        ]
    );
    let history: Vec<usize> = streams
        .iter()
        .map(|s| s.history("candidate").len())
        .collect();
    assert_eq!(history, [0, 1, 2, 2, 2]);
    assert_eq!(streams[2].history("candidate")[1].image, DIGEST_A);
    assert_eq!(
        streams[2].history("candidate")[0].created,
        Some(time("2024-01-01T00:15:40Z"))
    );
    assert_eq!(streams[2].metadata.generation, Some(3));
}

#[test]
fn promoted_tag_points_at_the_validated_digest_through_an_imagestreamimage() {
    let stream: ImageStream = parse(SEQUENCE, 3);
    let served = stream.spec_tag("served").unwrap();
    let from = served.from.as_ref().unwrap();
    assert_eq!(from.kind.as_deref(), Some("ImageStreamImage"));
    assert_eq!(
        from.name.as_deref(),
        Some(ImageStreamImage::name_for("nb", DIGEST_B).as_str())
    );
    assert_eq!(stream.current_digest("served"), Some(DIGEST_B));
    assert_eq!(served.annotations, None);
    assert_eq!(served.generation, Some(4));
}

#[test]
fn deleted_remote_tag_fails_the_import_but_keeps_the_last_good_digest() {
    let stream: ImageStream = parse(SEQUENCE, 4);
    let failure = stream.import_failure("candidate").unwrap();
    assert_eq!(failure.reason.as_deref(), Some("NotFound"));
    assert_eq!(failure.generation, 5);
    assert_eq!(stream.current_digest("candidate"), Some(DIGEST_B));
    assert_eq!(stream.import_failure("served"), None);
}

#[test]
fn spec_tag_annotations_null_is_sent_back_as_null() {
    let original = &fixture(SEQUENCE)[0];
    let stream: ImageStream = round_trip(original, "sequence[0]");
    let emitted = serde_json::to_value(&stream).unwrap();
    assert_eq!(emitted["spec"]["tags"][0]["annotations"], Value::Null);
    assert!(
        emitted["spec"]["tags"][0]
            .as_object()
            .unwrap()
            .contains_key("annotations")
    );
}

#[test]
fn never_imported_stream_has_no_current_digest() {
    let name = "rhpam-lab_rhpam-kieserver-rhel8_imagestream_never-imported.yaml";
    let stream: ImageStream = parse(name, 0);
    let tag = stream.status_tag("7.5.1").unwrap();
    assert_eq!(tag.items, None);
    assert!(stream.history("7.5.1").is_empty());
    assert_eq!(stream.current_digest("7.5.1"), None);
    let failure = stream.import_failure("7.5.1").unwrap();
    assert_eq!(failure.reason.as_deref(), Some("InternalError"));
    assert!(failure.message.as_deref().unwrap().contains("unauthorized"));
    let emitted = serde_json::to_value(&stream).unwrap();
    let status_tag = emitted["status"]["tags"][0].as_object().unwrap();
    assert_eq!(status_tag.get("items"), Some(&Value::Null));
}

#[test]
fn failed_reimport_keeps_the_last_good_digest() {
    let name = "ci-note_ansible-runner_imagestream_import-failed.yaml";
    let stream: ImageStream = parse(name, 0);
    assert_eq!(
        stream.current_digest("latest"),
        Some("sha256:bd09ef403f2f90f2c6bd133d7533e939058903f69223c5f12557a49e3aed14bb")
    );
    assert_eq!(stream.history("latest").len(), 1);
    assert_eq!(stream.history("latest")[0].generation, 3364);
    let failure = stream.import_failure("latest").unwrap();
    assert_eq!(failure.type_, IMPORT_SUCCESS);
    assert_eq!(failure.reason.as_deref(), Some("InternalError"));
    assert_eq!(failure.generation, 3365);
    let spec = stream.spec_tag("latest").unwrap();
    assert_eq!(spec.reference_policy.as_ref().unwrap().type_, "Local");
    let status = stream.status.as_ref().unwrap();
    assert_eq!(
        status.public_docker_image_repository.as_deref(),
        Some("registry.ci.openshift.org/openshift/ansible-runner")
    );
}

#[test]
fn pruned_stream_has_a_spec_tag_but_no_history() {
    let stream: ImageStream = parse("community-okd_python_imagestream_after-prune.json", 0);
    assert!(
        stream
            .spec_tag("3.8.12")
            .unwrap()
            .import_policy
            .as_ref()
            .unwrap()
            .insecure
    );
    assert!(stream.status.as_ref().unwrap().tags.is_empty());
    assert_eq!(stream.status_tag("3.8.12"), None);
    assert_eq!(stream.current_digest("3.8.12"), None);
}

#[test]
fn image_field_wins_over_the_digest_in_the_pull_spec() {
    // The openshift-docs example swaps the digests between `image` and `dockerImageReference`.
    let stream: ImageStream = parse("openshift-docs_origin-ruby-sample_imagestream.yaml", 0);
    let current = &stream.history("latest")[0];
    assert!(
        current
            .docker_image_reference
            .ends_with("@sha256:47463d94eb5c049b2d23b03a9530bf944f8f967a0fe79147dd6b9135bf7dd13d")
    );
    assert_eq!(
        stream.current_digest("latest"),
        Some("sha256:909de62d1f609a717ec433cc25ca5cf00941545c83a01fb31527771e1fab3fc5")
    );
    assert_eq!(stream.history("latest").len(), 2);
    assert_eq!(stream.spec_tag("latest"), None);
}

#[test]
fn current_digest_falls_back_to_the_pull_spec_digest() {
    let event = TagEvent {
        docker_image_reference: format!("quay.io/org/nb@{DIGEST_A}"),
        ..TagEvent::default()
    };
    assert_eq!(event.digest(), Some(DIGEST_A));
    let by_tag = TagEvent {
        docker_image_reference: "quay.io/org/nb:latest".to_owned(),
        ..TagEvent::default()
    };
    assert_eq!(by_tag.digest(), None);
}

#[test]
fn tag_pinned_to_an_imagestreamimage_reports_its_digest() {
    let stream: ImageStream = parse(
        "oc-testdata_ruby-20-centos7_imagestream_isimage-tag.yaml",
        0,
    );
    let prod = stream.spec_tag("prod").unwrap();
    assert_eq!(
        prod.from.as_ref().unwrap().kind.as_deref(),
        Some("ImageStreamImage")
    );
    assert_eq!(
        stream.current_digest("prod"),
        Some("sha256:5c1bee506fe2522c20eba9662bf956082310fa3e94890906415e77f8f0d21caf")
    );
    // A status tag without a spec tag (pushed image), whose item has no generation.
    assert_eq!(stream.spec_tag("latest"), None);
    assert_eq!(stream.history("latest")[0].generation, 0);
}

#[test]
fn odh_webhook_stream_reports_not_found_without_a_message() {
    let name = "odh-notebook-controller_webhook-test_imagestream_TRANSCRIBED.json";
    let stream: ImageStream = parse(name, 0);
    let failure = stream.import_failure("some-tag").unwrap();
    assert_eq!(failure.reason.as_deref(), Some("NotFound"));
    assert_eq!((failure.message.as_deref(), failure.generation), (None, 0));
    assert_eq!(
        stream.current_digest("some-tag"),
        Some("sha256:76e6af79c601a323f75a58e7005de0beac66b8cccc3d2b67efb6d11d85f0cfa1")
    );
    assert_eq!(stream.status.as_ref().unwrap().docker_image_repository, "");
    assert!(stream.spec.tags.is_empty());
}

#[test]
fn workbench_manifest_tags_keep_their_annotations() {
    let name = "odh-notebooks_jupyter-minimal-notebook_imagestream_manifest.yaml";
    let stream: ImageStream = parse(name, 0);
    let names: Vec<&str> = stream.spec.tags.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["2025.2", "2025.1"]);
    let annotations = stream
        .spec_tag("2025.2")
        .unwrap()
        .annotations
        .as_ref()
        .unwrap();
    assert_eq!(annotations["opendatahub.io/default-image"], "true");
    assert_eq!(stream.status, None);
    assert_eq!(
        stream.spec.lookup_policy.as_ref().map(|p| p.local),
        Some(true)
    );
}

#[test]
fn byon_template_stream_starts_with_no_tags() {
    let name = "byon_import-pipeline_imagestream_created-then-patched.yaml";
    let stream: ImageStream = parse(name, 0);
    assert!(stream.spec.tags.is_empty());
    assert_eq!(
        stream.metadata.annotations.as_ref().unwrap()["opendatahub.io/notebook-image-phase"],
        "Validating"
    );
}

#[test]
fn nulls_real_servers_send_deserialize_as_empty() {
    let stream: ImageStream = serde_json::from_value(json!({
        "metadata": {"name": "nb", "annotations": null},
        "spec": {"tags": null, "lookupPolicy": {"local": null}},
        "status": {"dockerImageRepository": null, "tags": [
            {"tag": "t", "items": null, "conditions": null}
        ]}
    }))
    .unwrap();
    assert!(stream.spec.tags.is_empty());
    assert_eq!(stream.history("t"), &[] as &[TagEvent]);
    assert_eq!(stream.import_failure("t"), None);
    assert_eq!(stream.status.unwrap().docker_image_repository, "");
}

// ------------------------------------------------------------------------------------------------
// (c) ImageStreamTag, ImageStreamImage, Image

#[test]
fn istag_get_carries_the_image_metadata() {
    let istag: ImageStreamTag = parse("DERIVED_istag_GET_python-3.8.12.json", 0);
    assert_eq!(istag.stream_and_tag(), Some(("python", "3.8.12")));
    assert_eq!(istag.generation, 1);
    let tag = istag.tag.as_ref().unwrap();
    assert_eq!(
        tag.from.as_ref().unwrap().name.as_deref(),
        Some("python:3.8.12")
    );
    let image = &istag.image;
    assert_eq!(
        image.metadata.name.as_deref(),
        Some("sha256:a874dcabc74ca202b92b826521ff79dede61caca00ceab0b65024e895baceb58")
    );
    assert_eq!(image.docker_image_layers.len(), 9);
    let meta = image.docker_image_metadata.as_ref().unwrap();
    assert_eq!(meta.architecture.as_deref(), Some("amd64"));
    assert_eq!(meta.size, Some(347487141));
    assert_eq!(meta.created, Some(time("2021-12-03T01:53:41Z")));
    assert_eq!((image.labels(), image.user()), (None, None));
    // Embedded images carry no apiVersion/kind and we add none.
    assert_eq!((&image.api_version, &image.kind), (&None, &None));
}

#[test]
fn partial_istag_generation_is_the_history_generation() {
    let istag: ImageStreamTag = parse("ci-note_ansible-runner_istag_PARTIAL.yaml", 0);
    assert_eq!(istag.generation, 3364);
    assert_eq!(istag.conditions[0].generation, 3365);
    assert_eq!(istag.conditions[0].reason.as_deref(), Some("InternalError"));
    assert_eq!(istag.tag, None);
}

#[test]
fn promotion_put_body_pins_the_served_tag_to_an_imagestreamimage() {
    let name = "DERIVED_request-bodies_promote-and-import.yaml";
    let promote: ImageStreamTag = parse(name, 0);
    assert_eq!(
        promote.metadata.name.as_deref(),
        Some(ImageStreamTag::name_for("nb", "served").as_str())
    );
    let from = promote.tag.as_ref().unwrap().from.as_ref().unwrap();
    assert_eq!(
        (
            from.kind.as_deref(),
            from.name.as_deref(),
            from.namespace.as_deref()
        ),
        (
            Some("ImageStreamImage"),
            Some(&*format!("nb@{DIGEST_B}")),
            Some("ds")
        )
    );
    let import: ImageStreamTag = parse(name, 1);
    let tag = import.tag.as_ref().unwrap();
    assert_eq!(tag.generation, Some(0));
    assert!(tag.import_policy.as_ref().unwrap().scheduled);
}

#[test]
fn imagestreamimage_round_trips_with_its_embedded_image() {
    let isimage: ImageStreamImage = round_trip(
        &json!({
            "apiVersion": "image.openshift.io/v1",
            "kind": "ImageStreamImage",
            "metadata": {"name": format!("nb@{DIGEST_A}"), "namespace": "ds"},
            "image": {
                "metadata": {"name": DIGEST_A},
                "dockerImageReference": format!("quay.io/org/nb@{DIGEST_A}"),
                "dockerImageMetadata": {"Config": {"User": "1001", "Labels": {"vendor": "x"}}},
                "dockerImageManifests": [{"digest": DIGEST_B, "mediaType": "m", "manifestSize": 1,
                                          "architecture": "arm64", "os": "linux", "variant": "v8"}]
            }
        }),
        "isimage",
    );
    assert_eq!(isimage.image.label("vendor"), Some("x"));
    assert_eq!(
        isimage.image.docker_image_manifests[0].variant.as_deref(),
        Some("v8")
    );
}

#[test]
fn image_labels_and_user_come_from_the_config() {
    let image: Image = parse("pelorus_internal-registry_oci_image_TRANSCRIBED.json", 0);
    assert_eq!(image.label("name"), Some("ubi8/python-38"));
    assert_eq!(image.label("vendor"), Some("Red Hat, Inc."));
    assert_eq!(image.user(), Some("1001"));
    assert_eq!(image.labels().unwrap().len(), 27);
    let meta = image.docker_image_metadata.as_ref().unwrap();
    assert_eq!(meta.size, Some(316923595));
    assert_eq!(meta.created, Some(time("2022-08-23T15:46:59Z")));
    assert_eq!(meta.os, None);
    assert_eq!(
        image.docker_image_manifest_media_type.as_deref(),
        Some("application/vnd.oci.image.manifest.v1+json")
    );
    assert_eq!(image.api_version.as_deref(), Some("image.openshift.io/v1"));
}

#[test]
fn python_image_has_no_labels() {
    let image: Image = parse("community-okd_python_image.json", 0);
    assert_eq!((image.labels(), image.user()), (None, None));
    let meta = image.docker_image_metadata.as_ref().unwrap();
    assert_eq!(meta.architecture.as_deref(), Some("amd64"));
}

#[test]
fn imagestreammapping_image_block_parses_as_an_image() {
    let name = "openshift-docs_origin-ruby-sample_imagestreammapping_full-image.yaml";
    let image: Image = round_trip(&fixture(name)[0]["image"], name);
    assert_eq!(
        image.label("io.openshift.build.commit.id"),
        Some("00cadc392d39d5ef9117cbc8a31db0889eedd442")
    );
    assert_eq!(image.label("build-date"), Some("2015-12-23"));
    assert_eq!(image.user(), Some("1001"));
    let meta = image.docker_image_metadata.as_ref().unwrap();
    assert_eq!(meta.created, Some(time("2016-01-29T13:40:00Z")));
    assert_eq!(meta.size, Some(441976279));
    assert_eq!(image.docker_image_layers[0].media_type, "");
}

// ------------------------------------------------------------------------------------------------
// (c) CustomRun

const LIFECYCLE: &str = "DERIVED_customrun_promote-lifecycle.yaml";
const DOCS: &str = "tekton-docs_customruns_examples.yaml";

#[test]
fn created_customrun_reads_string_array_and_object_params() {
    let run: CustomRun = parse(LIFECYCLE, 0);
    assert!(run.is_for("imagegate.example.dev/v1alpha1", "Promotion"));
    assert!(!run.is_for("imagegate.example.dev/v1alpha1", "Other"));
    assert_eq!(run.param_str("imagestream"), Some("nb"));
    assert_eq!(run.param_str("digest"), Some(DIGEST_B));
    assert_eq!(
        run.param("checks").and_then(ParamValue::as_array),
        Some(&["labels".to_owned(), "user".to_owned()][..])
    );
    let labels = run
        .param("requiredLabels")
        .and_then(ParamValue::as_object)
        .unwrap();
    assert_eq!(labels["vendor"], "Red Hat, Inc.");
    assert_eq!(run.param_str("checks"), None);
    assert_eq!(run.param("missing"), None);
    assert_eq!(run.timeout(), Ok(Some(Duration::from_secs(3600))));
    assert_eq!(run.spec.retries, Some(1));
    assert_eq!(run.status, None);
    assert!(!run.has_started() && !run.is_done() && !run.is_cancelled());
    assert_eq!(
        run.metadata.labels.as_ref().unwrap()[tekton::label::PIPELINE_TASK],
        "promote"
    );
}

#[test]
fn running_customrun_has_started_but_is_not_done() {
    let run: CustomRun = parse(LIFECYCLE, 1);
    assert!(run.has_started());
    assert!(!run.is_done());
    let succeeded = run.succeeded_condition().unwrap();
    assert_eq!(succeeded.status, tekton::status::UNKNOWN);
    assert_eq!(succeeded.reason.as_deref(), Some(tekton::reason::RUNNING));
}

#[test]
fn timed_out_pipeline_cancels_the_customrun() {
    let run: CustomRun = parse(LIFECYCLE, 2);
    assert!(run.is_cancelled());
    assert_eq!(
        run.spec.status_message.as_deref(),
        Some(tekton::CANCELLED_BY_PIPELINE_TIMEOUT_MSG)
    );
    assert!(run.is_done());
    let succeeded = run.succeeded_condition().unwrap();
    assert!(succeeded.is_false());
    assert_eq!(succeeded.reason.as_deref(), Some(tekton::reason::CANCELLED));
    assert_eq!(run.status.as_ref().unwrap().observed_generation, Some(2));
}

#[test]
fn succeeded_customrun_reports_results_and_extra_fields() {
    let run: CustomRun = parse(LIFECYCLE, 3);
    assert!(run.is_done() && run.succeeded_condition().unwrap().is_true());
    let status = run.status.as_ref().unwrap();
    let results: Vec<(&str, &str)> = status
        .results
        .iter()
        .map(|r| (r.name.as_str(), r.value.as_str()))
        .collect();
    assert_eq!(results[0], ("promotedDigest", DIGEST_B));
    assert_eq!(results[3], ("checks", r#"["labels","user"]"#));
    assert_eq!(status.extra_fields["checks"][1]["name"], "user");
    assert_eq!(status.completion_time, Some(time("2024-01-01T00:20:00Z")));
    assert_eq!(status.annotations.as_ref().unwrap().len(), 1);
    assert_eq!(run.timeout(), Ok(Some(tekton::DEFAULT_TIMEOUT)));
}

#[test]
fn retrying_customrun_counts_archived_attempts() {
    let run: CustomRun = parse(LIFECYCLE, 4);
    assert_eq!(run.retry_count(), 1);
    let archived = &run.status.as_ref().unwrap().retries_status[0];
    assert_eq!(
        archived.conditions[0].reason.as_deref(),
        Some(tekton::reason::TIMED_OUT)
    );
    assert!(!run.is_done());
    assert_eq!(run.timeout(), Ok(Some(Duration::from_secs(600))));
}

#[test]
fn docs_examples_parse_with_their_quirks() {
    let embedded: CustomRun = parse(DOCS, 2);
    assert!(embedded.is_for("example.dev/v1beta1", "Example"));
    assert_eq!(
        embedded.spec.custom_spec.as_ref().unwrap().spec["field1"],
        "value1"
    );
    let with_timeout: CustomRun = parse(DOCS, 3);
    assert_eq!(with_timeout.timeout(), Ok(Some(Duration::from_secs(10))));
    // `ref:` is not a v1beta1 field: the run has no custom task reference at all.
    let with_retries: CustomRun = parse(DOCS, 4);
    assert_eq!(with_retries.spec.custom_ref, None);
    assert_eq!(with_retries.spec.retries, Some(3));
    let named: CustomRun = parse(DOCS, 5);
    assert_eq!(
        named.spec.custom_ref.as_ref().unwrap().name.as_deref(),
        Some("my-example-task")
    );
    let params: CustomRun = parse(DOCS, 7);
    assert_eq!(params.param_str("my-first-param"), Some("i'm number one"));
}

#[test]
fn param_values_of_any_json_shape_survive_a_round_trip() {
    let run: CustomRun = round_trip(
        &json!({
            "apiVersion": "tekton.dev/v1beta1",
            "kind": "CustomRun",
            "metadata": {"name": "r"},
            "spec": {"params": [
                {"name": "n", "value": 3},
                {"name": "nested", "value": [["a"]]},
                {"name": "s", "value": ""}
            ]}
        }),
        "params",
    );
    assert_eq!(run.param("n"), Some(&ParamValue::Other(json!(3))));
    assert_eq!(
        run.param("nested"),
        Some(&ParamValue::Other(json!([["a"]])))
    );
    assert_eq!(run.param_str("s"), Some(""));
}

#[test]
fn zero_timeout_means_no_timeout() {
    let mut run = CustomRun::default();
    run.spec.timeout = Some("0s".to_owned());
    assert_eq!(run.timeout(), Ok(None));
    run.spec.timeout = Some("soon".to_owned());
    assert!(run.timeout().is_err());
}

#[test]
fn go_durations_parse_like_time_parse_duration() {
    let ok = [
        ("1h0m0s", Duration::from_secs(3600)),
        ("10m", Duration::from_secs(600)),
        ("90s", Duration::from_secs(90)),
        ("1.5h", Duration::from_secs(5400)),
        ("300ms", Duration::from_millis(300)),
        ("2h45m30.5s", Duration::from_millis(9_930_500)),
        (".5s", Duration::from_millis(500)),
        ("1us", Duration::from_micros(1)),
        ("1µs", Duration::from_micros(1)),
        ("7ns", Duration::from_nanos(7)),
        ("0", Duration::ZERO),
        ("+5s", Duration::from_secs(5)),
        ("-0s", Duration::ZERO),
    ];
    for (text, expected) in ok {
        assert_eq!(parse_go_duration(text), Ok(expected), "{text}");
    }
    for text in ["", "10", "1x", "h", "1.2.3s", ".s", "s1", "1h 2m"] {
        assert_eq!(
            parse_go_duration(text),
            Err(ParseDurationError::Invalid(text.to_owned())),
            "{text}"
        );
    }
    assert_eq!(
        parse_go_duration("-1s"),
        Err(ParseDurationError::Negative("-1s".to_owned()))
    );
    assert_eq!(
        parse_go_duration("3000000h"),
        Err(ParseDurationError::Overflow("3000000h".to_owned()))
    );
}

// ------------------------------------------------------------------------------------------------
// The round-trip check itself

#[derive(serde::Serialize, serde::Deserialize, PartialEq, Debug)]
struct Probe {
    name: String,
    #[serde(default = "one")]
    count: i64,
}

fn one() -> i64 {
    1
}

#[test]
fn round_trip_check_catches_lost_and_invented_fields() {
    let fine = json!({"name": "a", "count": 2, "unmodelled": null});
    assert_eq!(round_trip::<Probe>(&fine, "fine").count, 2);
    let lost = json!({"name": "a", "count": 2, "tag": "t"});
    assert!(std::panic::catch_unwind(|| round_trip::<Probe>(&lost, "lost")).is_err());
    let invented = json!({"name": "a"});
    assert!(std::panic::catch_unwind(|| round_trip::<Probe>(&invented, "invented")).is_err());
}
