//! The per-run map: opaque resourceVersions, the failure count, and its bounds.

use super::*;
use serde_json::json;

fn run(name: &str, uid: &str, version: &str) -> CustomRun {
    serde_json::from_value(json!({
        "apiVersion": "tekton.dev/v1beta1", "kind": "CustomRun",
        "metadata": {"name": name, "namespace": "ds", "uid": uid, "resourceVersion": version},
        "spec": {}
    }))
    .unwrap()
}

#[test]
fn a_copy_at_a_version_our_write_replaced_is_stale_and_versions_are_never_parsed() {
    let runs = RunStates::default();
    // Versions that are not integers, and whose text order is the reverse of their age.
    let read = run("r", "u1", "zz-9");
    assert!(!runs.is_stale(&read), "nothing written yet");
    runs.wrote(&read);
    assert!(runs.is_stale(&read), "the copy our write replaced");
    assert!(
        !runs.is_stale(&run("r", "u1", "aa-1")),
        "the version we wrote"
    );
    assert!(
        !runs.is_stale(&run("r", "u1", "b/7")),
        "someone else's later write"
    );

    // A second write in the same reconcile replaced our first one: both are older now.
    runs.wrote(&run("r", "u1", "aa-1"));
    assert!(runs.is_stale(&run("r", "u1", "zz-9")));
    assert!(runs.is_stale(&run("r", "u1", "aa-1")));
}

#[test]
fn a_run_re_created_under_the_same_name_starts_anew() {
    let runs = RunStates::default();
    runs.wrote(&run("r", "old", "5"));
    runs.failed(&run("r", "old", "6"));
    assert!(!runs.is_stale(&run("r", "new", "5")), "another uid");
    assert_eq!(runs.failed(&run("r", "new", "7")), 1);
    assert!(
        !runs.is_stale(&run("r", "old", "5")),
        "the old entry is gone"
    );
}

#[test]
fn failures_count_in_a_row_until_a_success() {
    let runs = RunStates::default();
    let r = run("r", "u", "1");
    assert_eq!(runs.failed(&r), 1);
    assert_eq!(runs.failed(&r), 2);
    assert_eq!(runs.failed(&r), 3);
    runs.succeeded(&r);
    assert_eq!(runs.failed(&r), 1);
    runs.succeeded(&run("other", "u2", "1"));
    assert_eq!(runs.len(), 1, "a success alone remembers nothing");
}

#[test]
fn the_map_is_bounded_and_evicts_the_least_recently_used_run() {
    let runs = RunStates::with_capacity(3);
    for name in ["a", "b", "c"] {
        runs.wrote(&run(name, name, "1"));
    }
    // Using "a" again makes "b" the least recently used.
    runs.failed(&run("a", "a", "2"));
    runs.wrote(&run("d", "d", "1"));
    assert_eq!(runs.len(), 3);
    assert!(runs.is_stale(&run("a", "a", "1")));
    assert!(!runs.is_stale(&run("b", "b", "1")), "b was evicted");
    assert!(runs.is_stale(&run("c", "c", "1")));
    assert!(runs.is_stale(&run("d", "d", "1")));

    let many = RunStates::with_capacity(100);
    for i in 0..1_000 {
        let name = format!("run-{i}");
        many.wrote(&run(&name, &name, "1"));
    }
    assert_eq!(many.len(), 100);
}

#[test]
fn only_the_last_replaced_versions_are_kept_per_run() {
    let runs = RunStates::default();
    for v in 0..20 {
        runs.wrote(&run("r", "u", &format!("v{v}")));
    }
    assert!(!runs.is_stale(&run("r", "u", "v11")));
    assert!(runs.is_stale(&run("r", "u", "v12")));
    assert!(runs.is_stale(&run("r", "u", "v19")));
}

#[test]
fn forgotten_and_unretained_runs_are_gone() {
    let runs = RunStates::default();
    for name in ["a", "b", "c"] {
        runs.wrote(&run(name, name, "1"));
    }
    runs.forget(&RunKey::of(&run("a", "a", "1")));
    assert!(!runs.is_stale(&run("a", "a", "1")));
    runs.retain(|key| key.name == "c");
    assert_eq!(runs.len(), 1);
    assert!(runs.is_stale(&run("c", "c", "1")));
    runs.forget(&RunKey::of(&run("c", "c", "1")));
    assert!(runs.is_empty());
}
