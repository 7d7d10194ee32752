//! The plan over the real streams of `tests/fixtures/`: one of each kind adopted, each plan
//! planned again (nothing to write), and every refusal with its reason.

use serde_json::{Value, json};

use super::{Plan, WriteKind, plan};
use crate::adopt::Options;
use crate::adopt::names;

const B: &str = "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
const A: &str = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";

/// The `n`th YAML document of a fixture, as JSON.
pub(crate) fn fixture(file: &str, n: usize) -> Value {
    let path = format!("{}/tests/fixtures/{file}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap();
    let docs: Vec<Value> = serde_norway::Deserializer::from_str(&text)
        .map(|d| serde::Deserialize::deserialize(d).unwrap())
        .filter(|v: &Value| !v.is_null())
        .collect();
    docs[n].clone()
}

fn tag<'a>(stream: &'a Value, name: &str) -> &'a Value {
    crate::adopt::shape::tag_value(stream, name).unwrap_or(&Value::Null)
}

fn tag_names(stream: &Value) -> Vec<&str> {
    stream["spec"]["tags"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect()
}

fn one_write(p: Plan) -> (WriteKind, Value) {
    match p {
        Plan::Write(mut writes, _) if writes.len() == 1 => {
            let w = writes.remove(0);
            (w.kind, w.after)
        }
        other => panic!("expected one write, got {other:?}"),
    }
}

fn refusal(stream: &Value, options: &Options) -> String {
    plan(stream, None, options).expect_err("a refusal")
}

/// The real ansible-runner stream (one `latest` tag following docker.io, `Local`).
fn plain() -> Value {
    fixture("ci-note_ansible-runner_imagestream_import-failed.yaml", 0)
}

#[test]
fn a_plain_single_tag_stream_is_gated_in_place() {
    let (kind, after) = one_write(plan(&plain(), None, &Options::default()).unwrap());
    assert_eq!(kind, WriteKind::Replace);
    assert_eq!(tag_names(&after), ["candidate", "latest"]);
    let digest = "sha256:bd09ef403f2f90f2c6bd133d7533e939058903f69223c5f12557a49e3aed14bb";
    assert_eq!(
        tag(&after, "latest")["from"],
        json!({"kind": "ImageStreamImage", "name": format!("ansible-runner@{digest}")})
    );
    assert_eq!(
        tag(&after, "latest")["importPolicy"],
        json!({"importMode": "Legacy"})
    );
    let candidate = tag(&after, "candidate");
    assert_eq!(
        candidate["from"],
        json!({"kind": "DockerImage", "name": "docker.io/ansible/ansible-runner:latest"})
    );
    assert_eq!(
        candidate["importPolicy"],
        json!({"scheduled": true, "importMode": "Legacy"})
    );
    assert_eq!(candidate["referencePolicy"], json!({"type": "Local"}));
    assert_eq!(
        candidate["annotations"],
        json!({"hidden": "true", "opendatahub.io/image-tag-outdated": "true",
               "imagegate.dev/role": "candidate"})
    );
    let meta = &after["metadata"];
    assert_eq!(meta["labels"][names::MANAGED_LABEL], "true");
    assert_eq!(meta["annotations"][names::SERVED_TAG], "latest");
    assert_eq!(meta["annotations"][names::CANDIDATE_TAG], "candidate");
    assert_eq!(
        meta["annotations"][names::CANDIDATE_FROM],
        "docker.io/ansible/ansible-runner:latest"
    );
    // Fields adopt does not know are carried through unchanged.
    assert_eq!(meta["uid"], plain()["metadata"]["uid"]);
    assert_eq!(meta["resourceVersion"], "2932387480");
    assert_eq!(after["status"], plain()["status"]);
}

#[test]
fn planning_an_adopted_stream_again_writes_nothing() {
    let (_, after) = one_write(plan(&plain(), None, &Options::default()).unwrap());
    match plan(&after, None, &Options::default()).unwrap() {
        Plan::Adopted(summary) => {
            assert_eq!(summary.served, "latest");
            assert_eq!(summary.candidate, "candidate");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_served_tag_with_history_gets_a_previous_tag_pinned_to_the_digest_before() {
    let mut stream = plain();
    stream["status"]["tags"][0]["items"] = json!([
        {"created": "2026-11-02T00:00:00Z", "dockerImageReference": format!("docker.io/ansible/ansible-runner@{B}"), "image": B, "generation": 3},
        {"created": "2026-11-01T00:00:00Z", "dockerImageReference": format!("docker.io/ansible/ansible-runner@{A}"), "image": A, "generation": 2},
    ]);
    let (_, after) = one_write(plan(&stream, None, &Options::default()).unwrap());
    assert_eq!(
        tag_names(&after),
        ["candidate", "latest", "latest-previous"]
    );
    let previous = tag(&after, "latest-previous");
    assert_eq!(
        previous["from"],
        json!({"kind": "ImageStreamImage", "name": format!("ansible-runner@{A}")})
    );
    assert_eq!(
        previous["annotations"]["imagegate.dev/previous-of"],
        "latest"
    );
    assert_eq!(previous["annotations"]["hidden"], "true");
    assert_eq!(previous["referencePolicy"], json!({"type": "Local"}));
}

#[test]
fn the_reference_policy_asked_for_is_set_on_every_tag_adopt_writes() {
    let options = Options {
        reference_policy: Some("Source".into()),
        ..Options::default()
    };
    let (_, after) = one_write(plan(&plain(), None, &options).unwrap());
    for t in ["latest", "candidate"] {
        assert_eq!(
            tag(&after, t)["referencePolicy"],
            json!({"type": "Source"}),
            "{t}"
        );
    }
}

/// The dashboard-created custom image of the BYON import pipeline, its placeholders filled, as
/// the import left it: one tag `latest`, no scheduled import.
pub(crate) fn custom() -> Value {
    let mut stream = fixture(
        "byon_import-pipeline_imagestream_created-then-patched.yaml",
        0,
    );
    let patch = fixture(
        "byon_import-pipeline_imagestream_created-then-patched.yaml",
        1,
    );
    json_patch::merge(&mut stream, &patch);
    let text = stream
        .to_string()
        .replace("$(params.url)", "quay.io/org/custom-nb:latest")
        .replace("$(params.name)", "My notebook")
        .replace("$(params.desc)", "A custom notebook")
        .replace("$(params.creator)", "alice")
        .replace("$(context.pipelineRun.name)", "custom-my-notebook")
        .replace("$(context.pipelineRun.namespace)", "ds")
        .replace("$IMAGE_TAG", "latest")
        .replace("$PHASE", "Succeeded");
    let mut stream: Value = serde_json::from_str(&text).unwrap();
    stream["status"] = json!({"dockerImageRepository": "", "tags": [{"tag": "latest", "items": [
        {"created": "2026-11-01T00:00:00Z", "dockerImageReference": format!("quay.io/org/custom-nb@{A}"), "image": A, "generation": 2}]}]});
    stream
}

#[test]
fn a_custom_image_keeps_its_served_tag_first_and_its_candidate_sorts_after_it() {
    let (_, after) = one_write(plan(&custom(), None, &Options::default()).unwrap());
    assert_eq!(
        tag_names(&after),
        ["latest", "latest-candidate"],
        "the dashboard judges a custom image by spec.tags[0]"
    );
    assert_eq!(
        tag(&after, "latest-candidate")["from"]["name"],
        "quay.io/org/custom-nb:latest"
    );
    assert_eq!(
        tag(&after, "latest")["from"],
        json!({"kind": "ImageStreamImage", "name": format!("custom-my-notebook@{A}")})
    );
    let Plan::Write(_, summary) = plan(&custom(), None, &Options::default()).unwrap() else {
        panic!()
    };
    assert!(summary.previous.is_none());
    assert!(
        summary.notes[0].starts_with("no previous tag yet"),
        "{:?}",
        summary.notes
    );
}

#[test]
fn a_custom_image_refuses_a_candidate_that_would_sort_first() {
    let options = Options {
        candidate_tag: Some("candidate".into()),
        ..Options::default()
    };
    assert!(
        refusal(&custom(), &options).contains("sorts before the served tag \"latest\""),
        "{}",
        refusal(&custom(), &options)
    );
}

/// The shipped jupyter-minimal-notebook manifest as the operator applies it: the placeholders
/// replaced by digests, its ownership labels, and the imports done.
pub(crate) fn shipped() -> Value {
    let manifest = fixture(
        "odh-notebooks_jupyter-minimal-notebook_imagestream_manifest.yaml",
        0,
    );
    let text = manifest
        .to_string()
        .replace(
            "odh-workbench-jupyter-minimal-cpu-py312-ubi9-n_PLACEHOLDER",
            &format!("quay.io/opendatahub/workbench-images@{B}"),
        )
        .replace(
            "odh-workbench-jupyter-minimal-cpu-py311-ubi9-n-1_PLACEHOLDER",
            &format!("quay.io/opendatahub/workbench-images@{A}"),
        )
        .replace("-commit-n_PLACEHOLDER", "-commit-b")
        .replace("-commit-n-1_PLACEHOLDER", "-commit-a");
    let mut stream: Value = serde_json::from_str(&text).unwrap();
    stream["metadata"]["namespace"] = json!("opendatahub");
    stream["metadata"]["labels"]["app.opendatahub.io/workbenches"] = json!("true");
    stream["metadata"]["labels"]["app.kubernetes.io/part-of"] = json!("workbenches");
    stream["status"] = json!({"dockerImageRepository": "", "tags": [
        {"tag": "2025.1", "items": [{"created": "2026-10-01T00:00:00Z", "dockerImageReference": format!("quay.io/opendatahub/workbench-images@{A}"), "image": A, "generation": 1}]},
        {"tag": "2025.2", "items": [{"created": "2026-11-01T00:00:00Z", "dockerImageReference": format!("quay.io/opendatahub/workbench-images@{B}"), "image": B, "generation": 1}]}]});
    stream
}

const FOLLOW: &str = "quay.io/opendatahub/workbench-images:jupyter-minimal-cpu-py312-ubi9";

#[test]
fn a_shipped_stream_pinned_by_digest_needs_the_tag_to_follow() {
    let reason = refusal(&shipped(), &Options::default());
    assert!(reason.contains("--candidate-from"), "{reason}");
    assert!(
        reason.contains("the served tag \"2025.2\" imports DockerImage"),
        "{reason}"
    );
}

#[test]
fn a_shipped_stream_is_copied_and_the_original_hidden() {
    let options = Options {
        candidate_from: Some(FOLLOW.into()),
        ..Options::default()
    };
    let Plan::Write(writes, summary) = plan(&shipped(), None, &options).unwrap() else {
        panic!()
    };
    assert_eq!(summary.gated, "opendatahub/jupyter-minimal-notebook-gated");
    assert_eq!(
        summary.served, "2025.2",
        "the recommended tag is the served one"
    );
    let kinds: Vec<WriteKind> = writes.iter().map(|w| w.kind).collect();
    assert_eq!(
        kinds,
        [WriteKind::Create, WriteKind::HideOriginal],
        "the copy first"
    );
    let copy = &writes[0].after;
    assert_eq!(copy["metadata"]["name"], "jupyter-minimal-notebook-gated");
    assert_eq!(
        copy["metadata"]["labels"],
        json!({"opendatahub.io/notebook-image": "true", "imagegate.dev/managed": "true"}),
        "listed by the dashboard, not claimed by the operator"
    );
    assert_eq!(
        copy["metadata"]["annotations"][names::COPY_OF],
        "jupyter-minimal-notebook"
    );
    assert_eq!(
        copy["metadata"]["annotations"]["opendatahub.io/notebook-image-name"],
        "Jupyter | Minimal | CPU | Python 3.12"
    );
    assert!(copy.get("status").is_none());
    assert_eq!(tag_names(copy), ["2025.1", "2025.2", "candidate"]);
    assert_eq!(
        tag(copy, "2025.2")["from"],
        json!({"kind": "DockerImage", "name": format!("quay.io/opendatahub/workbench-images@{B}")})
    );
    assert_eq!(
        tag(copy, "2025.2")["annotations"]["opendatahub.io/workbench-image-recommended"],
        "true"
    );
    assert_eq!(tag(copy, "candidate")["from"]["name"], FOLLOW);
    assert_eq!(
        tag(copy, "candidate")["referencePolicy"],
        json!({"type": "Source"})
    );
    assert_eq!(
        writes[1].hide_patch(),
        json!({"metadata": {"annotations": {"opendatahub.io/notebook-image-hidden": "true",
               "imagegate.dev/gated-copy": "jupyter-minimal-notebook-gated"}}})
    );
}

#[test]
fn a_shipped_stream_with_its_copy_in_place_is_already_adopted() {
    let options = Options {
        candidate_from: Some(FOLLOW.into()),
        ..Options::default()
    };
    let Plan::Write(writes, _) = plan(&shipped(), None, &options).unwrap() else {
        panic!()
    };
    let mut copy = writes[0].after.clone();
    copy["status"] = shipped()["status"].clone();
    let hidden = writes[1].after.clone();
    // Neither the flag nor anything else is needed the second time.
    match plan(&hidden, Some(&copy), &Options::default()).unwrap() {
        Plan::Adopted(s) => assert_eq!(s.gated, "opendatahub/jupyter-minimal-notebook-gated"),
        other => panic!("{other:?}"),
    }
    // The original not hidden yet (a first run stopped halfway): only the hide is left.
    let Plan::Write(writes, _) = plan(&shipped(), Some(&copy), &Options::default()).unwrap() else {
        panic!()
    };
    assert_eq!(writes.len(), 1);
    assert_eq!(writes[0].kind, WriteKind::HideOriginal);
}

#[test]
fn a_copy_name_taken_by_another_stream_is_refused() {
    let options = Options {
        candidate_from: Some(FOLLOW.into()),
        ..Options::default()
    };
    let other = plain();
    let reason = plan(&shipped(), Some(&other), &options).unwrap_err();
    assert!(
        reason.contains("is not imagegate's copy of jupyter-minimal-notebook"),
        "{reason}"
    );
}

#[test]
fn an_operator_opt_out_is_adopted_in_place() {
    let mut stream = shipped();
    stream["metadata"]["annotations"]["opendatahub.io/managed"] = json!("false");
    let options = Options {
        candidate_from: Some(FOLLOW.into()),
        ..Options::default()
    };
    let (kind, after) = one_write(plan(&stream, None, &options).unwrap());
    assert_eq!(kind, WriteKind::Replace);
    assert_eq!(after["metadata"]["name"], "jupyter-minimal-notebook");
}

#[test]
fn a_dropped_candidate_is_restored_from_what_adopt_recorded() {
    let (_, mut after) = one_write(plan(&plain(), None, &Options::default()).unwrap());
    let adopted = after.clone();
    after["spec"]["tags"]
        .as_array_mut()
        .unwrap()
        .retain(|t| t["name"] != "candidate");
    let (_, restored) = one_write(plan(&after, None, &Options::default()).unwrap());
    assert_eq!(restored, adopted);
}

#[test]
fn streams_that_cannot_be_adopted_are_refused_with_the_reason() {
    let mut no_tags = plain();
    no_tags["spec"]["tags"] = json!([]);
    let mut two = plain();
    two["spec"]["tags"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "stable", "from": {"kind": "DockerImage", "name": "docker.io/x:1"}}));
    let never = fixture(
        "rhpam-lab_rhpam-kieserver-rhel8_imagestream_never-imported.yaml",
        0,
    );
    let by_hand = fixture("../../examples/notebook-imagestreams.yaml", 1);
    let mut taken = plain();
    taken["spec"]["tags"].as_array_mut().unwrap().push(
        json!({"name": "candidate", "from": {"kind": "DockerImage", "name": "docker.io/x:1"}}),
    );
    let cases = [
        (no_tags, Options::default(), "it has no spec tags"),
        (
            two.clone(),
            Options::default(),
            "several tags could be the served one (latest, stable)",
        ),
        (
            two,
            Options {
                served_tag: Some("nope".into()),
                ..Options::default()
            },
            "it has no tag \"nope\"",
        ),
        (
            never,
            Options::default(),
            "the served tag \"7.5.1\" has no image yet",
        ),
        (
            by_hand,
            Options::default(),
            "already gated differently (tag \"candidate\" carries imagegate.dev/role)",
        ),
        (
            taken,
            Options {
                served_tag: Some("latest".into()),
                ..Options::default()
            },
            "it already has a tag \"candidate\"",
        ),
        (
            plain(),
            Options {
                candidate_from: Some(format!("docker.io/x@{A}")),
                ..Options::default()
            },
            "a digest never moves",
        ),
    ];
    for (stream, options, reason) in cases {
        let got = refusal(&stream, &options);
        assert!(got.contains(reason), "{reason:?} not in {got:?}");
    }
}

#[test]
fn an_adopted_stream_asked_with_other_names_is_refused() {
    let (_, after) = one_write(plan(&plain(), None, &Options::default()).unwrap());
    let options = Options {
        candidate_tag: Some("next".into()),
        ..Options::default()
    };
    assert!(refusal(&after, &options).contains("already gated differently"));
}
