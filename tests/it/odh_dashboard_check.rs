//! The dashboard's model (`imagegate_demo::dashboard_model`) held to what the Open Data Hub dashboard's
//! own code showed (`../shared/reference/review/odh-dashboard-check.md`: its functions at
//! odh-dashboard b9d09633 run on the demo's ImageStreams): every state the demo passes through
//! (`tests/fixtures/DERIVED_imagegate-demo_notebooks_imagestream-states.yaml`, recorded from the
//! demo's watch history) and the check's edge cases E1-E9, each with the outcome the real code
//! gave. Where an outcome is not one the check recorded, the row says where it comes from.
//!
//! Every badge of the state table (the first workbench with and without an integrated registry,
//! without its commit annotation, a new one) was also checked on 2026-12-06 by running the
//! dashboard's `getNotebookImageData` (`useNotebookImageData.ts`, the version with
//! `isNotebookImageOutdated`, its two utility imports stubbed with their one-line bodies) with
//! tsx 4.23.15 on Node.js 20 over this fixture: the same 80 outcomes, and the same for the two
//! extra workbenches below (the build rolled back from, E2 as the check ran it). That harness is
//! not in CI: the dashboard's source cannot be fetched here.

use imagegate::api::ImageStream;
use imagegate::odh::key;
use imagegate_demo::dashboard_model::{self as dashboard, Badge, Workbench};
use serde_json::{Value, json};

use Badge::{Deprecated, Latest};

const MINIMAL: &str = "jupyter-minimal-notebook";
const DATASCIENCE: &str = "jupyter-datascience-notebook";
const PYTORCH: &str = "jupyter-pytorch-notebook";
const TRUSTYAI: &str = "jupyter-trustyai-notebook";

fn states() -> Vec<ImageStream> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/DERIVED_imagegate-demo_notebooks_imagestream-states.yaml"
    );
    let text = std::fs::read_to_string(path).unwrap();
    serde_norway::Deserializer::from_str(&text)
        .map(|d| serde_json::from_value(serde::Deserialize::deserialize(d).unwrap()).unwrap())
        .collect()
}

/// One demo state and what the dashboard showed for it.
struct Want {
    stream: &'static str,
    phase: Option<&'static str>,
    /// The default (only) tag's build commit.
    build: &'static str,
    /// The description carries imagegate's update-failed note.
    failed_note: bool,
    /// The workbench started from the stream's first state (the spawner's annotations), with an
    /// integrated registry (`<repo>:latest`) and without one (the webhook's digest reference).
    first: (Badge, Badge),
    /// That workbench as a Notebook without the commit annotation.
    without_commit: Badge,
    /// Where the outcome comes from.
    source: &'static str,
}

const CHECK: &str = "check: real code";
const CHECK_UNLISTED: &str =
    "check: real code agreed with the model on all 19 states; a row its table folds away";
const RULE: &str = "not a state the check ran; getNotebookImageData run on it here (module doc)";

fn want(stream: &'static str, phase: Option<&'static str>, build: &'static str) -> Want {
    Want {
        stream,
        phase,
        build,
        failed_note: false,
        first: (Latest, Latest),
        without_commit: Latest,
        source: CHECK,
    }
}

/// The demo's states in order (the check's ev numbers in comments; this run has one state
/// more, the pytorch scenario now promoting 666 before 777).
fn table() -> Vec<Want> {
    let deprecated = |w: Want| Want {
        first: (Deprecated, Deprecated),
        without_commit: Deprecated,
        ..w
    };
    let failed = |w: Want| Want {
        failed_note: true,
        ..w
    };
    let unlisted = |w: Want| Want {
        source: CHECK_UNLISTED,
        ..w
    };
    vec![
        want(MINIMAL, None, "build-1111111"),               // ev 0
        want(DATASCIENCE, None, "build-2222222"),           // ev 1
        want(PYTORCH, None, "build-5555555"),               // ev 2
        want(TRUSTYAI, None, "build-8888888"),              // ev 3
        want(MINIMAL, None, "build-1111111"),               // ev 4: candidate imported
        want(MINIMAL, Some("Validating"), "build-1111111"), // ev 5
        // ev 6: the first workbench Deprecated as the check saw; without the annotation it
        // stayed Latest then (E2), and is Deprecated now that the hidden tags carry a commit
        // (getNotebookImageData run here).
        Want {
            without_commit: Deprecated,
            ..deprecated(want(MINIMAL, Some("Promoted"), "build-3333333"))
        },
        unlisted(want(DATASCIENCE, None, "build-2222222")), // ev 7
        want(DATASCIENCE, Some("Validating"), "build-2222222"), // ev 8
        failed(want(DATASCIENCE, Some("UpdateFailed"), "build-2222222")), // ev 9
        unlisted(want(TRUSTYAI, None, "build-8888888")),    // ev 10
        want(TRUSTYAI, Some("Validating"), "build-8888888"), // ev 11
        failed(want(TRUSTYAI, Some("UpdateFailed"), "build-8888888")), // ev 12
        unlisted(want(PYTORCH, None, "build-5555555")),     // ev 13
        want(PYTORCH, Some("Validating"), "build-5555555"), // ev 14
        want(PYTORCH, Some("Validating"), "build-5555555"), // ev 15: candidate 666 -> 777
        want(PYTORCH, Some("Validating"), "build-5555555"), // ev 16
        // New: 666 promoted while 777 validates (the served tag says Validating 777).
        Want {
            source: RULE,
            ..deprecated(want(PYTORCH, Some("Validating"), "build-6666666"))
        },
        deprecated(want(PYTORCH, Some("Promoted"), "build-7777777")), // ev 17
        // ev 18: back to 1111111; which build a Notebook without the annotation runs cannot be
        // told, and a promotion happened since it was made: Deprecated (getNotebookImageData
        // run here).
        Want {
            without_commit: Deprecated,
            ..want(MINIMAL, Some("RolledBack"), "build-1111111")
        },
    ]
}

fn without_registry(is: &ImageStream) -> ImageStream {
    let mut is = is.clone();
    if let Some(status) = is.status.as_mut() {
        status.docker_image_repository.clear();
    }
    is
}

fn served_annotation<'a>(is: &'a ImageStream, k: &str) -> Option<&'a str> {
    is.spec_tag("latest")?
        .annotations
        .as_ref()?
        .get(k)
        .map(String::as_str)
}

#[test]
fn every_demo_state_shows_what_the_dashboards_code_showed() {
    let states = states();
    let table = table();
    assert_eq!(states.len(), table.len(), "one row per recorded state");
    let first_of = |name: &str| {
        states
            .iter()
            .find(|s| s.metadata.name.as_deref() == Some(name))
            .unwrap()
    };
    for (i, (is, want)) in states.iter().zip(&table).enumerate() {
        let at = format!(
            "state {i} ({}, {:?}; {})",
            want.stream, want.phase, want.source
        );
        assert_eq!(is.metadata.name.as_deref(), Some(want.stream), "{at}");
        assert_eq!(
            served_annotation(is, "imagegate.dev/phase"),
            want.phase,
            "{at}"
        );
        let view = dashboard::view(is);
        assert!(view.listed, "{at}");
        // Only the served tag is offered, as Latest, with no version selector and no build
        // date (an ImageStreamImage pin): the candidate and previous tags never.
        let offered: Vec<(&str, bool)> = view
            .offered
            .iter()
            .map(|o| (o.tag.as_str(), o.recommended))
            .collect();
        assert_eq!(offered, [("latest", true)], "{at}");
        assert!(!view.selector_shown(), "{at}");
        assert_eq!(
            view.offered[0].build_commit.as_deref(),
            Some(want.build),
            "{at}"
        );
        assert_eq!(view.offered[0].build_date, None, "{at}");
        let note = view
            .description
            .as_deref()
            .is_some_and(|d| d.ends_with(imagegate::controller::decide::UPDATE_FAILED_NOTE));
        assert_eq!(note, want.failed_note, "{at}");

        let first = first_of(want.stream);
        let reg = Workbench::started_from(first, "latest");
        let noreg = Workbench::started_from(&without_registry(first), "latest");
        assert!(noreg.image.contains("@sha256:"), "{}", noreg.image);
        let got = (
            dashboard::workbench_status(is, &reg),
            dashboard::workbench_status(&without_registry(is), &noreg),
        );
        assert_eq!(got, want.first, "{at}: the first workbench");
        assert_eq!(
            dashboard::workbench_status(is, &reg.clone().without_commit()),
            want.without_commit,
            "{at}: the first workbench without the commit annotation"
        );
        let new = Workbench::started_from(is, view.default_tag().unwrap());
        assert_eq!(
            dashboard::workbench_status(is, &new),
            Latest,
            "{at}: a new workbench"
        );
    }
    // After the rollback, a workbench started from the promoted build (state 6) is Deprecated.
    let promoted = Workbench::started_from(&states[6], "latest");
    assert_eq!(promoted.last_commit.as_deref(), Some("build-3333333"));
    assert_eq!(
        dashboard::workbench_status(&states[19], &promoted),
        Deprecated
    );
}

fn state(i: usize) -> ImageStream {
    states().remove(i)
}

fn edit(is: &ImageStream, f: impl FnOnce(&mut Value)) -> ImageStream {
    let mut v = serde_json::to_value(is).unwrap();
    f(&mut v);
    serde_json::from_value(v).unwrap()
}

fn tags(v: &mut Value) -> &mut Vec<Value> {
    v["spec"]["tags"].as_array_mut().unwrap()
}

#[test]
fn e1_a_deprecated_workbench_is_described_by_the_new_build() {
    // Its row and its update dialog read the tag it matches, `latest`, now the new build,
    // though the pod still runs the old one (the check, mismatch 3).
    let (before, after) = (state(0), state(6));
    let wb = Workbench::started_from(&before, "latest");
    assert_eq!(dashboard::workbench_status(&after, &wb), Deprecated);
    let streams = [after];
    let (_, tag) = dashboard::matched(&streams, &wb).unwrap();
    assert_eq!(tag.name, "latest");
    assert_eq!(
        tag.annotations.as_ref().unwrap()[key::BUILD_COMMIT],
        "build-3333333"
    );
}

#[test]
fn e2_a_notebook_without_the_commit_annotation_after_a_promotion() {
    let wb = Workbench::started_from(&state(0), "latest").without_commit();
    // As the check ran it (the hidden tags without a build commit): Latest, the mismatch.
    let unmarked = edit(&state(6), |v| {
        for t in tags(v) {
            if t["name"] != "latest" {
                t["annotations"]
                    .as_object_mut()
                    .unwrap()
                    .remove(key::BUILD_COMMIT);
            }
        }
    });
    assert_eq!(dashboard::workbench_status(&unmarked, &wb), Latest);
    // E2b: with the served tag alone, Deprecated.
    let alone = edit(&state(6), |v| tags(v).retain(|t| t["name"] == "latest"));
    assert_eq!(dashboard::workbench_status(&alone, &wb), Deprecated);
    // As imagegate writes it now.
    assert_eq!(dashboard::workbench_status(&state(6), &wb), Deprecated);
}

fn unhide(is: &ImageStream, tag: &str) -> ImageStream {
    edit(is, |v| {
        for t in tags(v) {
            if t["name"] == tag {
                t["annotations"]
                    .as_object_mut()
                    .unwrap()
                    .remove(key::TAG_OUTDATED);
            }
        }
    })
}

#[test]
fn e3_an_unhidden_candidate_with_the_shipped_names_is_offered_in_a_dropdown() {
    let view = dashboard::view(&unhide(&state(4), "candidate"));
    let offered: Vec<&str> = view.offered.iter().map(|o| o.tag.as_str()).collect();
    assert_eq!(offered, ["latest", "candidate"]);
    assert!(view.selector_shown());
    assert_eq!(view.default_tag(), Some("latest"));
}

/// A custom (BYON) image gated by hand as `latest` + `latest-candidate`, both imported.
fn byon(candidate: Value, candidate_status: Value) -> ImageStream {
    let item = |d: &str| json!({"created": "2026-12-01T00:00:00Z", "dockerImageReference": format!("quay.io/me/img@{d}"), "image": d, "generation": 1});
    let a = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    let mut c = candidate;
    c["name"] = json!("latest-candidate");
    c["from"] = json!({"kind": "DockerImage", "name": "quay.io/me/img:latest"});
    let mut cs = candidate_status;
    cs["tag"] = json!("latest-candidate");
    serde_json::from_value(json!({
        "apiVersion": "image.openshift.io/v1", "kind": "ImageStream",
        "metadata": {"name": "custom-my-image", "namespace": "redhat-ods-applications",
            "labels": {key::CREATED_BY: key::BYON, key::NOTEBOOK_IMAGE: "true"}},
        "spec": {"tags": [
            {"name": "latest", "from": {"kind": "ImageStreamImage", "name": format!("custom-my-image@{a}")}},
            c
        ]},
        "status": {"dockerImageRepository": "", "tags": [
            {"tag": "latest", "items": [item(a)]},
            cs
        ]}
    }))
    .unwrap()
}

#[test]
fn e4_an_unhidden_custom_candidate_becomes_the_default() {
    let b = "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
    let imported = json!({"items": [{"created": "2026-12-02T00:00:00Z", "dockerImageReference": format!("quay.io/me/img@{b}"), "image": b, "generation": 2}]});
    let view = dashboard::view(&byon(json!({}), imported.clone()));
    assert_eq!(view.default_tag(), Some("latest-candidate"), "{view:?}");
    let hidden = byon(
        json!({"annotations": {key::TAG_OUTDATED: "true"}}),
        imported,
    );
    assert_eq!(dashboard::view(&hidden).default_tag(), Some("latest"));
}

#[test]
fn e5_a_custom_image_whose_first_tag_failed_to_import_is_hidden_with_its_error() {
    // `candidate` sorts before `latest`: spec.tags[0] judges the whole image.
    let is: ImageStream = serde_json::from_value(json!({
        "apiVersion": "image.openshift.io/v1", "kind": "ImageStream",
        "metadata": {"name": "custom-my-image", "namespace": "redhat-ods-applications",
            "labels": {key::CREATED_BY: key::BYON, key::NOTEBOOK_IMAGE: "true"}},
        "spec": {"tags": [
            {"name": "candidate", "annotations": {key::TAG_OUTDATED: "true"}, "from": {"kind": "DockerImage", "name": "quay.io/me/img:latest"}},
            {"name": "latest", "from": {"kind": "ImageStreamImage", "name": "custom-my-image@sha256:aa"}}
        ]},
        "status": {"dockerImageRepository": "", "tags": [
            {"tag": "candidate", "items": null, "conditions": [{"type": "ImportSuccess", "status": "False", "reason": "NotFound", "message": "manifest unknown", "generation": 2}]},
            {"tag": "latest", "items": [{"created": "2026-12-01T00:00:00Z", "dockerImageReference": "quay.io/me/img@sha256:aa", "image": "sha256:aa", "generation": 1}]}
        ]}
    }))
    .unwrap();
    let view = dashboard::view(&is);
    assert!(!view.listed);
    assert_eq!(view.error.as_deref(), Some("manifest unknown"));
}

#[test]
fn e6_e7_tag_order_follows_the_browsers_sort() {
    // The orders Node.js gave (the unit tests of the model's `order` hold more): a stream whose
    // tags are all imported, none recommended.
    let with_tags = |names: &[&str]| {
        edit(&state(0), |v| {
            let from = json!({"kind": "DockerImage", "name": "quay.io/x/y:1"});
            v["spec"]["tags"] = names
                .iter()
                .map(|n| json!({"name": n, "from": from}))
                .collect();
            let items = v["status"]["tags"][0]["items"].clone();
            v["status"]["tags"] = names
                .iter()
                .map(|n| json!({"tag": n, "items": items}))
                .collect();
        })
    };
    for (names, want) in [
        (
            &["Latest", "candidate", "latest-candidate", "latest_x"][..],
            &["latest-candidate", "latest_x", "Latest", "candidate"][..],
        ),
        (&["V2", "v10"], &["V2", "v10"]),
        (&["1.2.3.4.10", "1.2.3.4.5"], &["1.2.3.4.5", "1.2.3.4.10"]),
    ] {
        let view = dashboard::view(&with_tags(names));
        let got: Vec<&str> = view.offered.iter().map(|o| o.tag.as_str()).collect();
        assert_eq!(got, want, "{names:?}");
    }
}

#[test]
fn e9_a_digest_workbench_matches_the_first_stream_whose_history_has_it() {
    // Without an integrated registry, path (c) takes the first stream listed whose status tag
    // of the selected name holds the image, whatever the stream's name; path (b) wants the
    // selected stream's name.
    let minimal = without_registry(&state(0));
    let wb = Workbench::started_from(&minimal, "latest");
    let mut copy = minimal.clone();
    copy.metadata.name = Some("jupyter-minimal-notebook-gated".into());
    let streams = [copy, minimal];
    let (is, _) = dashboard::matched(&streams, &wb).unwrap();
    assert_eq!(
        is.metadata.name.as_deref(),
        Some("jupyter-minimal-notebook-gated")
    );
    let by_from = Workbench {
        image: "quay.io/x/y:1".into(),
        last_image_selection: Some("other:latest".into()),
        last_commit: None,
    };
    let tagged = edit(&streams[1], |v| {
        tags(v)[1]["from"] = json!({"kind": "DockerImage", "name": "quay.io/x/y:1"})
    });
    assert!(dashboard::matched(std::slice::from_ref(&tagged), &by_from).is_none());
}
