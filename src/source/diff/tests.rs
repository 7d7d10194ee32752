//! Tests of the diff: the derived oracle sequence replayed step by step and across a restart,
//! the real fixtures (a failed re-import, a first import that failed, a two-entry history), and
//! each rule (history order, re-list, pruning, collapse, failures, deletions, uid, filter).

use super::*;
use crate::source::state::{TagStates, of_stream as state_of};
use serde::Deserialize;
use serde_json::json;

const A: &str = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
const B: &str = "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
const ANSIBLE: &str = "sha256:bd09ef403f2f90f2c6bd133d7533e939058903f69223c5f12557a49e3aed14bb";

fn path(name: &str) -> String {
    format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"))
}

/// A YAML fixture, or a JSON one wrapped in `{"object": …}`.
fn fixture(name: &str) -> ImageStream {
    let text = std::fs::read_to_string(path(name)).unwrap();
    if name.ends_with(".json") {
        let file: serde_json::Value = serde_json::from_str(&text).unwrap();
        serde_json::from_value(file["object"].clone()).unwrap()
    } else {
        serde_norway::from_str(&text).unwrap()
    }
}

/// The five states of the derived sequence: created, imported A, imported B, B promoted to
/// `served`, the remote tag deleted (import failed).
fn oracle() -> Vec<ImageStream> {
    let text = std::fs::read_to_string(path(
        "DERIVED_emulator_sequence_scheduled-import_promotion_tag-deleted.yaml",
    ))
    .unwrap();
    let steps: Vec<ImageStream> = serde_norway::Deserializer::from_str(&text)
        .map(|doc| ImageStream::deserialize(doc).unwrap())
        .collect();
    assert_eq!(steps.len(), 5);
    steps
}

fn stream(json: serde_json::Value) -> ImageStream {
    serde_json::from_value(json).unwrap()
}

/// The checkpoint key of a stream (`ObjectRef::from_obj` would panic without a name).
fn key(is: &ImageStream) -> ObjectRef<ImageStream> {
    let name = is.metadata.name.as_deref().unwrap_or_default();
    ObjectRef::new(name).within(is.metadata.namespace.as_deref().unwrap_or_default())
}

fn all() -> TagFilter {
    TagFilter::default()
}

/// A history entry created at second `generation` (mod 60) of 2024.
fn event(digest: &str, generation: i64) -> serde_json::Value {
    json!({
        "created": format!("2024-01-01T00:00:{:02}Z", generation.rem_euclid(60)),
        "dockerImageReference": format!("quay.io/org/nb@{digest}"),
        "image": digest,
        "generation": generation,
    })
}

/// Stream `ds/nb` (uid `u1`) whose tag `candidate` has `items` (newest first).
fn nb(items: serde_json::Value) -> ImageStream {
    nb_with(items, json!([]))
}

fn nb_with(items: serde_json::Value, conditions: serde_json::Value) -> ImageStream {
    stream(json!({
        "metadata": {"name": "nb", "namespace": "ds", "uid": "u1"},
        "spec": {},
        "status": {"tags": [{"tag": "candidate", "items": items, "conditions": conditions}]},
    }))
}

fn recorded(digest: &str, generation: i64) -> StreamState {
    StreamState {
        uid: "u1".into(),
        tags: TagStates::from([(
            "candidate".to_string(),
            TagState {
                digest: Some(digest.into()),
                generation,
                failure_generation: None,
            },
        )]),
    }
}

/// `(kind, tag, digest, previous digest, generation)` of each change, to compare at a glance.
type Brief = (ChangeKind, String, Option<String>, Option<String>, i64);

fn brief(changes: &[TagChange]) -> Vec<Brief> {
    changes
        .iter()
        .map(|c| {
            (
                c.kind,
                c.tag.clone(),
                c.digest.clone(),
                c.previous_digest.clone(),
                c.generation,
            )
        })
        .collect()
}

fn b(kind: ChangeKind, tag: &str, digest: Option<&str>, previous: Option<&str>, g: i64) -> Brief {
    (
        kind,
        tag.to_string(),
        digest.map(str::to_string),
        previous.map(str::to_string),
        g,
    )
}

use ChangeKind::{Deleted, ImportFailed, Updated};

#[test]
fn each_oracle_step_diffed_against_the_previous_state_gives_exactly_its_change() {
    let steps = oracle();
    let stream = key(&steps[0]);
    let mut state = None;
    let mut sent = Vec::new();
    for step in &steps {
        sent.push(diff(&stream, state.as_ref(), Some(step), &all()));
        state = Some(state_of(step, &all()));
    }

    let first = TagChange {
        kind: Updated,
        namespace: "ds".into(),
        image_stream: "nb".into(),
        image_stream_uid: String::new(),
        tag: "candidate".into(),
        digest: Some(A.into()),
        previous_digest: None,
        docker_image_reference: Some(format!("quay.io/org/nb@{A}")),
        generation: 2,
        time: Some("2024-01-01T00:00:05Z".into()),
        reason: None,
        message: None,
    };
    let second = TagChange {
        digest: Some(B.into()),
        previous_digest: Some(A.into()),
        docker_image_reference: Some(format!("quay.io/org/nb@{B}")),
        generation: 3,
        time: Some("2024-01-01T00:15:40Z".into()),
        ..first.clone()
    };
    let promoted = TagChange {
        tag: "served".into(),
        previous_digest: None,
        generation: 4,
        time: Some("2024-01-01T00:20:00Z".into()),
        ..second.clone()
    };
    let failed = TagChange {
        kind: ImportFailed,
        previous_digest: None,
        generation: 5,
        time: Some("2024-01-01T00:31:10Z".into()),
        reason: Some("NotFound".into()),
        message: Some(r#"dockerimage.image.openshift.io "quay.io/org/nb:latest" not found"#.into()),
        ..second.clone()
    };
    assert_eq!(
        sent,
        [
            vec![],
            vec![first],
            vec![second.clone()],
            vec![promoted.clone()],
            vec![failed.clone()],
        ]
    );

    // A restart after step 2 that finds step 5: everything since, oldest first per tag.
    let state = state_of(&steps[1], &all());
    let caught_up = diff(&stream, Some(&state), Some(&steps[4]), &all());
    assert_eq!(caught_up, [second, failed, promoted]);
}

#[test]
fn a_stream_created_with_history_sends_every_entry_oldest_first() {
    let steps = oracle();
    assert_eq!(
        brief(&diff(&key(&steps[4]), None, Some(&steps[4]), &all())),
        [
            b(Updated, "candidate", Some(A), None, 2),
            b(Updated, "candidate", Some(B), Some(A), 3),
            b(ImportFailed, "candidate", Some(B), None, 5),
            b(Updated, "served", Some(B), None, 4),
        ]
    );

    // A real two-entry history (the docs swap the digests in the references; `image` wins).
    let ruby = fixture("openshift-docs_origin-ruby-sample_imagestream.yaml");
    let older = "sha256:47463d94eb5c049b2d23b03a9530bf944f8f967a0fe79147dd6b9135bf7dd13d";
    let newer = "sha256:909de62d1f609a717ec433cc25ca5cf00941545c83a01fb31527771e1fab3fc5";
    let changes = diff(&key(&ruby), None, Some(&ruby), &all());
    assert_eq!(
        brief(&changes),
        [
            b(Updated, "latest", Some(older), None, 1),
            b(Updated, "latest", Some(newer), Some(older), 2),
        ]
    );
    assert_eq!(
        changes[0].image_stream_uid,
        "ee2b9405-c68c-11e5-8a99-525400f25e34"
    );
    assert_eq!(changes[1].time.as_deref(), Some("2017-09-02T10:15:09Z"));
}

#[test]
fn several_imports_while_down_are_sent_oldest_first_with_previous_digests_chained() {
    let now = nb(json!([
        event("sha256:dd", 5),
        event("sha256:cc", 4),
        event("sha256:bb", 3),
        event("sha256:aa", 2),
    ]));
    let changes = diff(
        &key(&now),
        Some(&recorded("sha256:aa", 2)),
        Some(&now),
        &all(),
    );
    assert_eq!(
        brief(&changes),
        [
            b(
                Updated,
                "candidate",
                Some("sha256:bb"),
                Some("sha256:aa"),
                3
            ),
            b(
                Updated,
                "candidate",
                Some("sha256:cc"),
                Some("sha256:bb"),
                4
            ),
            b(
                Updated,
                "candidate",
                Some("sha256:dd"),
                Some("sha256:cc"),
                5
            ),
        ]
    );
    assert_eq!(changes[2].time.as_deref(), Some("2024-01-01T00:00:05Z"));
}

#[test]
fn an_image_imported_again_after_another_is_a_change() {
    let now = nb(json!([
        event("sha256:aa", 4),
        event("sha256:bb", 3),
        event("sha256:aa", 2),
    ]));
    assert_eq!(
        brief(&diff(
            &key(&now),
            Some(&recorded("sha256:aa", 2)),
            Some(&now),
            &all()
        )),
        [
            b(
                Updated,
                "candidate",
                Some("sha256:bb"),
                Some("sha256:aa"),
                3
            ),
            b(
                Updated,
                "candidate",
                Some("sha256:aa"),
                Some("sha256:bb"),
                4
            ),
        ]
    );
}

#[test]
fn a_relist_with_nothing_new_sends_nothing() {
    let mut streams = oracle();
    streams.extend(
        [
            "ci-note_ansible-runner_imagestream_import-failed.yaml",
            "rhpam-lab_rhpam-kieserver-rhel8_imagestream_never-imported.yaml",
            "openshift-docs_origin-ruby-sample_imagestream.yaml",
            "oc-testdata_ruby-20-centos7_imagestream_isimage-tag.yaml",
            "odh-notebook-controller_webhook-test_imagestream_TRANSCRIBED.json",
            "community-okd_python_imagestream_after-prune.json",
        ]
        .map(fixture),
    );
    for is in &streams {
        for filter in [all(), TagFilter(vec!["served".into(), "latest".into()])] {
            let state = state_of(is, &filter);
            assert_eq!(
                diff(&key(is), Some(&state), Some(is), &filter),
                [],
                "{is:?}"
            );
        }
    }
}

#[test]
fn a_history_pruned_below_the_recorded_entry_sends_the_newer_generations() {
    let now = nb(json!([event("sha256:dd", 5), event("sha256:cc", 4)]));
    assert_eq!(
        brief(&diff(
            &key(&now),
            Some(&recorded("sha256:aa", 2)),
            Some(&now),
            &all()
        )),
        [
            b(
                Updated,
                "candidate",
                Some("sha256:cc"),
                Some("sha256:aa"),
                4
            ),
            b(
                Updated,
                "candidate",
                Some("sha256:dd"),
                Some("sha256:cc"),
                5
            ),
        ]
    );

    // Everything pruned but the newest entry, which is the one recorded: nothing is newer.
    let now = nb(json!([event("sha256:dd", 5)]));
    assert_eq!(
        diff(
            &key(&now),
            Some(&recorded("sha256:dd", 5)),
            Some(&now),
            &all()
        ),
        []
    );
}

#[test]
fn the_collapse_rule_records_the_new_generation_without_an_event() {
    // Same image imported again: openshift only bumps items[0].generation.
    let now = nb(json!([event("sha256:aa", 5), event("sha256:00", 1)]));
    let before = recorded("sha256:aa", 2);
    assert_eq!(diff(&key(&now), Some(&before), Some(&now), &all()), []);
    assert_eq!(state_of(&now, &all()), recorded("sha256:aa", 5));
}

#[test]
fn an_import_failure_is_sent_once_and_again_only_with_a_new_generation() {
    let failed = fixture("ci-note_ansible-runner_imagestream_import-failed.yaml");
    let stream = key(&failed);
    let mut state = state_of(&failed, &all());
    let cleared = TagState {
        failure_generation: None,
        ..state.tags["latest"].clone()
    };
    state.tags.insert("latest", cleared);
    let changes = diff(&stream, Some(&state), Some(&failed), &all());
    assert_eq!(
        brief(&changes),
        [b(ImportFailed, "latest", Some(ANSIBLE), None, 3365)]
    );
    assert_eq!(changes[0].reason.as_deref(), Some("InternalError"));
    assert!(
        changes[0]
            .message
            .as_deref()
            .unwrap()
            .contains("toomanyrequests")
    );
    assert_eq!(changes[0].time.as_deref(), Some("2021-06-03T16:24:42Z"));
    assert_eq!(
        changes[0].docker_image_reference.as_deref(),
        Some(format!("docker.io/ansible/ansible-runner@{ANSIBLE}").as_str())
    );
    assert_eq!(
        changes[0].image_stream_uid,
        "ff02b090-c77d-441a-a60c-d5a26de66300"
    );

    // The same failure seen again (a re-list): nothing.
    let state = state_of(&failed, &all());
    assert_eq!(state.tags["latest"].failure_generation, Some(3365));
    assert_eq!(diff(&stream, Some(&state), Some(&failed), &all()), []);

    // The next attempt fails differently: a new condition with a new generation.
    let mut again = failed.clone();
    let condition = &mut again.status.as_mut().unwrap().tags[0].conditions[0];
    condition.generation = 3367;
    condition.reason = Some("Unauthorized".into());
    let changes = diff(&stream, Some(&state), Some(&again), &all());
    assert_eq!(
        brief(&changes),
        [b(ImportFailed, "latest", Some(ANSIBLE), None, 3367)]
    );
    assert_eq!(changes[0].reason.as_deref(), Some("Unauthorized"));
}

#[test]
fn a_success_after_a_failure_is_an_update_and_clears_the_failure() {
    let failed = fixture("ci-note_ansible-runner_imagestream_import-failed.yaml");
    let state = state_of(&failed, &all());
    let mut fixed = failed.clone();
    let tag = &mut fixed.status.as_mut().unwrap().tags[0];
    tag.conditions.clear();
    let next: TagEvent = serde_json::from_value(event("sha256:ee", 3367)).unwrap();
    tag.items.as_mut().unwrap().insert(0, next);

    let changes = diff(&key(&fixed), Some(&state), Some(&fixed), &all());
    assert_eq!(
        brief(&changes),
        [b(Updated, "latest", Some("sha256:ee"), Some(ANSIBLE), 3367)]
    );
    assert_eq!(
        state_of(&fixed, &all()).tags["latest"].failure_generation,
        None
    );
}

#[test]
fn a_first_import_that_failed_is_a_failure_without_a_digest() {
    let never = fixture("rhpam-lab_rhpam-kieserver-rhel8_imagestream_never-imported.yaml");
    let changes = diff(&key(&never), None, Some(&never), &all());
    assert_eq!(brief(&changes), [b(ImportFailed, "7.5.1", None, None, 2)]);
    assert_eq!(changes[0].namespace, "userNN-pam-dm1");
    assert_eq!(changes[0].docker_image_reference, None);

    // Then the import succeeds: a first import, no previous digest.
    let state = state_of(&never, &all());
    let mut imported = never.clone();
    let tag = &mut imported.status.as_mut().unwrap().tags[0];
    tag.conditions.clear();
    tag.items = Some(vec![serde_json::from_value(event("sha256:ff", 3)).unwrap()]);
    assert_eq!(
        brief(&diff(&key(&never), Some(&state), Some(&imported), &all())),
        [b(Updated, "7.5.1", Some("sha256:ff"), None, 3)]
    );
}

#[test]
fn a_tag_whose_status_is_gone_is_deleted_with_its_last_digest() {
    let steps = oracle();
    let state = state_of(&steps[3], &all());
    let mut gone = steps[3].clone();
    gone.spec.tags.retain(|t| t.name != "served");
    gone.status
        .as_mut()
        .unwrap()
        .tags
        .retain(|t| t.tag != "served");
    let changes = diff(&key(&gone), Some(&state), Some(&gone), &all());
    assert_eq!(brief(&changes), [b(Deleted, "served", Some(B), None, 4)]);
    assert_eq!(changes[0].time, None);
    assert_eq!(changes[0].image_stream, "nb");

    // Removing only the spec tag keeps its status history: not a deletion.
    let mut unspecced = steps[3].clone();
    unspecced.spec.tags.retain(|t| t.name != "served");
    assert_eq!(
        diff(&key(&gone), Some(&state), Some(&unspecced), &all()),
        []
    );
}

#[test]
fn a_deleted_stream_deletes_every_recorded_tag() {
    let steps = oracle();
    let state = state_of(&steps[4], &all());
    let changes = diff(&key(&steps[4]), Some(&state), None, &all());
    assert_eq!(
        brief(&changes),
        [
            b(Deleted, "candidate", Some(B), None, 3),
            b(Deleted, "served", Some(B), None, 4),
        ]
    );
    assert!(
        changes
            .iter()
            .all(|c| c.namespace == "ds" && c.image_stream == "nb")
    );
    assert_eq!(diff(&key(&steps[4]), None, None, &all()), []);
}

#[test]
fn a_stream_recreated_with_a_new_uid_is_deleted_then_sent_as_new() {
    let old = fixture("ci-note_ansible-runner_imagestream_import-failed.yaml");
    let state = state_of(&old, &all());
    let mut new = old.clone();
    new.metadata.uid = Some("new-uid".into());
    let tag = &mut new.status.as_mut().unwrap().tags[0];
    tag.conditions.clear();
    tag.items = Some(vec![serde_json::from_value(event(ANSIBLE, 2)).unwrap()]);

    let changes = diff(&key(&old), Some(&state), Some(&new), &all());
    assert_eq!(
        brief(&changes),
        [
            b(Deleted, "latest", Some(ANSIBLE), None, 3364),
            b(Updated, "latest", Some(ANSIBLE), None, 2),
        ]
    );
    assert_eq!(
        changes[0].image_stream_uid,
        "ff02b090-c77d-441a-a60c-d5a26de66300"
    );
    assert_eq!(changes[1].image_stream_uid, "new-uid");
    assert_eq!(state_of(&new, &all()).uid, "new-uid");
}

#[test]
fn tags_without_images_or_failures_send_nothing_and_are_not_recorded() {
    let empty = stream(json!({
        "metadata": {"name": "nb", "namespace": "ds", "uid": "u1"},
        "spec": {},
        "status": {"tags": [
            {"tag": "null", "items": null},
            {"tag": "empty", "items": []},
            {"tag": "reference", "items": [{"dockerImageReference": "quay.io/org/nb:latest", "generation": 2}]},
        ]},
    }));
    assert_eq!(diff(&key(&empty), None, Some(&empty), &all()), []);
    assert_eq!(existing(&empty, &all()), []);
    assert!(state_of(&empty, &all()).tags.is_empty());

    let pruned = fixture("community-okd_python_imagestream_after-prune.json");
    assert_eq!(diff(&key(&pruned), None, Some(&pruned), &all()), []);
}

#[test]
fn malformed_streams_never_panic() {
    let odd = stream(json!({
        "metadata": {},
        "spec": {"tags": null},
        "status": {"tags": [
            {"tag": "", "items": [{"created": null, "image": null, "dockerImageReference": "x@sha256:11", "generation": null}]},
            {"tag": "dup", "items": [event("sha256:22", 7)], "conditions": [{"type": "ImportSuccess", "status": "False"}]},
            {"tag": "dup", "items": [event("sha256:33", -1), event("sha256:33", 9)]},
        ]},
    }));
    let changes = diff(&key(&odd), None, Some(&odd), &all());
    assert_eq!(
        brief(&changes),
        [
            b(Updated, "", Some("sha256:11"), None, 0),
            b(Updated, "dup", Some("sha256:33"), None, 9),
        ]
    );
    assert_eq!(changes[0].time, None);
    assert_eq!(changes[0].image_stream, "");

    let nothing = stream(json!({"metadata": {"name": "x"}, "spec": {}}));
    assert_eq!(diff(&key(&nothing), None, Some(&nothing), &all()), []);
    let state = state_of(&odd, &all());
    assert_eq!(
        diff(&key(&odd), Some(&state), Some(&nothing), &all()).len(),
        2
    );
    assert_eq!(existing(&nothing, &all()), []);
}

#[test]
fn the_tag_filter_is_honoured_everywhere() {
    let steps = oracle();
    let served = TagFilter(vec!["served".into()]);
    assert!(served.allows("served") && !served.allows("candidate"));
    assert!(all().allows("anything"));

    let stream = key(&steps[4]);
    assert_eq!(
        brief(&diff(&stream, None, Some(&steps[4]), &served)),
        [b(Updated, "served", Some(B), None, 4)]
    );
    assert_eq!(
        state_of(&steps[4], &served).tags.keys().collect::<Vec<_>>(),
        ["served"]
    );
    assert_eq!(
        brief(&existing(&steps[4], &served)),
        brief(&diff(&stream, None, Some(&steps[4]), &served))
    );

    // A tag recorded under a wider filter is neither diffed nor deleted under a narrower one.
    let wide = state_of(&steps[2], &all());
    assert_eq!(
        brief(&diff(&stream, Some(&wide), Some(&steps[4]), &served)),
        [b(Updated, "served", Some(B), None, 4)]
    );
    assert_eq!(diff(&stream, Some(&wide), None, &served), []);
}

#[test]
fn existing_sends_each_tags_current_image_and_a_standing_failure() {
    let steps = oracle();
    assert_eq!(
        brief(&existing(&steps[4], &all())),
        [
            b(Updated, "candidate", Some(B), Some(A), 3),
            b(ImportFailed, "candidate", Some(B), None, 5),
            b(Updated, "served", Some(B), None, 4),
        ]
    );
    let failed = fixture("ci-note_ansible-runner_imagestream_import-failed.yaml");
    assert_eq!(
        brief(&existing(&failed, &all())),
        [
            b(Updated, "latest", Some(ANSIBLE), None, 3364),
            b(ImportFailed, "latest", Some(ANSIBLE), None, 3365),
        ]
    );
    let never = fixture("rhpam-lab_rhpam-kieserver-rhel8_imagestream_never-imported.yaml");
    assert_eq!(
        brief(&existing(&never, &all())),
        [b(ImportFailed, "7.5.1", None, None, 2)]
    );
    // After sending them, the checkpoint is state_of: a re-list sends nothing more.
    let state = state_of(&steps[4], &all());
    assert_eq!(
        diff(&key(&steps[4]), Some(&state), Some(&steps[4]), &all()),
        []
    );
}

#[test]
fn a_lost_record_resends_each_tags_current_image_once_with_its_first_id() {
    // History B (newest), A: diffed against one entry behind, B again, after A.
    let is = nb(json!([event(B, 3), event(A, 2)]));
    let behind = one_behind(&is, &all());
    assert_eq!(behind, recorded(A, 2));
    let changes = diff(&key(&is), Some(&behind), Some(&is), &all());
    // Generation 3 is B's own: the change, and so the event id, it was first sent with.
    assert_eq!(
        brief(&changes),
        [b(Updated, "candidate", Some(B), Some(A), 3)]
    );
}

#[test]
fn a_lost_record_of_a_collapsed_entry_resends_the_generation_that_first_had_the_image() {
    // The collapse rule bumped B's generation 4 to 5 without a new image: B was sent as 4.
    let is = nb(json!([event(B, 5), event(B, 4), event(A, 2)]));
    let changes = diff(&key(&is), Some(&one_behind(&is, &all())), Some(&is), &all());
    assert_eq!(
        brief(&changes),
        [b(Updated, "candidate", Some(B), Some(A), 4)]
    );
}

#[test]
fn a_lost_record_of_a_single_import_and_a_standing_failure_resends_both() {
    let failed = fixture("ci-note_ansible-runner_imagestream_import-failed.yaml");
    let behind = one_behind(&failed, &all());
    let changes = diff(&key(&failed), Some(&behind), Some(&failed), &all());
    let kinds: Vec<ChangeKind> = changes.iter().map(|c| c.kind).collect();
    assert_eq!(kinds, [Updated, ImportFailed], "{:?}", brief(&changes));
    // A tag with one image in its history has nothing behind it: that image is sent.
    let single = nb(json!([event(A, 1)]));
    assert!(one_behind(&single, &all()).tags.is_empty());
    let changes = diff(
        &key(&single),
        Some(&one_behind(&single, &all())),
        Some(&single),
        &all(),
    );
    assert_eq!(brief(&changes), [b(Updated, "candidate", Some(A), None, 1)]);
}

/// The state the receiver is in once every change of `changes` was acknowledged, each through
/// the acknowledgement step itself: what the checkpoint holds after a delivery.
fn acknowledged(before: Option<&StreamState>, changes: &[TagChange]) -> StreamState {
    let afters = crate::source::state::states_after(before, changes);
    let mut recorded = before.cloned();
    for (change, after) in changes.iter().cloned().zip(afters) {
        let pending = crate::source::pending::Pending::Tag {
            change,
            found: chrono::Utc::now(),
            after,
        };
        let acked = crate::source::ack::acknowledged(|_| recorded.clone(), pending);
        recorded = acked.expect("a tag's change records its stream").1;
    }
    recorded.unwrap_or_default()
}

#[test]
fn after_the_changes_of_any_diff_are_acknowledged_the_next_diff_is_empty() {
    // Every pair of states a stream can go through, in the oracle and the real fixtures, and
    // histories with collapses, prunes and failures: from nothing, or from what was delivered
    // about the earlier one, to the later one.
    let mut streams = oracle();
    streams.extend([
        fixture("ci-note_ansible-runner_imagestream_import-failed.yaml"),
        fixture("rhpam-lab_rhpam-kieserver-rhel8_imagestream_never-imported.yaml"),
        nb(json!([event(B, 5), event(B, 4), event(A, 2)])),
        nb(json!([event(A, 7), event(B, 6), event(A, 2)])),
        nb_with(
            json!([event(B, 3)]),
            json!([{"type": "ImportSuccess", "status": "False", "generation": 4}]),
        ),
    ]);
    for (i, earlier) in streams.iter().enumerate() {
        for later in &streams[i..] {
            let stream = key(later);
            for before in [None, Some(state_of(earlier, &all()))] {
                let changes = diff(&stream, before.as_ref(), Some(later), &all());
                let state = acknowledged(before.as_ref(), &changes);
                assert_eq!(
                    diff(&stream, Some(&state), Some(later), &all()),
                    [],
                    "{:?} then {:?}",
                    brief(&changes),
                    state
                );
            }
        }
    }
}

#[test]
fn the_streams_gone_after_a_relist_are_the_known_ones_of_its_scope_it_did_not_hold() {
    let key = |ns: &str, name: &str| -> StreamKey { (ns.into(), name.into()) };
    let known = [key("a", "x"), key("a", "y"), key("b", "x"), key("b", "z")];
    let listed: HashSet<StreamKey> = [key("a", "x"), key("b", "x"), key("c", "new")].into();
    assert_eq!(gone(&known, None, &listed), [key("a", "y"), key("b", "z")]);
    // A list of one namespace says nothing about the streams of another.
    assert_eq!(gone(&known, Some("b"), &listed), [key("b", "z")]);
    assert_eq!(gone(&known, Some("c"), &listed), Vec::<StreamKey>::new());
    // A key known twice (by two trackers) is deleted once.
    let twice = [key("a", "y"), key("a", "y")];
    assert_eq!(gone(&twice, None, &HashSet::new()), [key("a", "y")]);
}
