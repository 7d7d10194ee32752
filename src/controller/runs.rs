//! What the controller remembers about each CustomRun between reconciles, in one bounded map:
//!
//! - the resourceVersions its own status writes replaced: the reconcile of a cached copy at one
//!   of them is skipped, because that copy is older than our write and the watch event of the
//!   write triggers the next reconcile (without the skip, the write would be refused with a 409);
//! - how many reconciles in a row failed, and how many found the run not yet listed by its
//!   PipelineRun, which the error policy's backoffs grow with.
//!
//! resourceVersions are opaque strings: they are compared for equality, never parsed or
//! ordered. A status write is conditional on the version it replaces, so the versions a cached
//! copy can still have after our write are exactly the ones our writes replaced.
//!
//! An entry is dropped when its run is done, when it is deleted (or gone from a re-list), and,
//! the least recently used first, when the map is full. Losing an entry costs at most one
//! refused write or a shorter first retry, never a wrong status.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use kube::ResourceExt;

use crate::api::CustomRun;

/// How many runs the map remembers by default (an entry is a few hundred bytes).
pub(crate) const DEFAULT_CAPACITY: usize = 10_000;

/// How many replaced resourceVersions are kept per run: a reconcile writes at most three
/// statuses, and a cached copy is never older than the version the last reconcile read.
const REPLACED_KEPT: usize = 8;

/// A run's namespace and name (a run re-created under the same name is told apart by its uid).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct RunKey {
    /// The run's namespace.
    pub namespace: String,
    /// The run's name.
    pub name: String,
}

impl RunKey {
    /// The key of `run`.
    pub(crate) fn of(run: &CustomRun) -> RunKey {
        RunKey {
            namespace: run.namespace().unwrap_or_default(),
            name: run.name_any(),
        }
    }
}

/// The per-run memory of the controller (see the module doc).
#[derive(Debug)]
pub struct RunStates {
    capacity: usize,
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    entries: HashMap<RunKey, Entry>,
    /// A counter that orders uses, for evicting the least recently used entry.
    clock: u64,
}

#[derive(Debug, Default)]
struct Entry {
    uid: Option<String>,
    /// resourceVersions our status writes replaced, oldest first.
    replaced: VecDeque<String>,
    /// Reconciles that failed in a row.
    failures: u32,
    /// Reconciles in a row that found the run not yet listed by its PipelineRun.
    waits: u32,
    used: u64,
}

impl Default for RunStates {
    fn default() -> Self {
        RunStates::with_capacity(DEFAULT_CAPACITY)
    }
}

impl RunStates {
    /// A map that remembers at most `capacity` runs (at least one).
    pub(crate) fn with_capacity(capacity: usize) -> RunStates {
        RunStates {
            capacity: capacity.max(1),
            inner: Mutex::default(),
        }
    }

    /// Whether `run` is a cached copy older than a status this controller wrote: its
    /// resourceVersion is one that our writes replaced.
    pub(crate) fn is_stale(&self, run: &CustomRun) -> bool {
        let Some(version) = run.metadata.resource_version.as_deref() else {
            return false;
        };
        let inner = self.lock();
        inner
            .entries
            .get(&RunKey::of(run))
            .filter(|e| e.uid == run.metadata.uid)
            .is_some_and(|e| e.replaced.iter().any(|r| r == version))
    }

    /// Records a status write that replaced `before` (the copy the write was conditional on).
    pub(crate) fn wrote(&self, before: &CustomRun) {
        let Some(version) = before.metadata.resource_version.clone() else {
            return;
        };
        self.update(before, |entry| {
            if entry.replaced.len() == REPLACED_KEPT {
                entry.replaced.pop_front();
            }
            entry.replaced.push_back(version);
        });
    }

    /// Counts a failed reconcile of `run`; how many failed in a row, this one included.
    pub(crate) fn failed(&self, run: &CustomRun) -> u32 {
        self.count(run, |entry| &mut entry.failures)
    }

    /// Counts a reconcile of `run` that found it not yet listed by its PipelineRun; how many
    /// did in a row, this one included.
    pub(crate) fn waited(&self, run: &CustomRun) -> u32 {
        self.count(run, |entry| &mut entry.waits)
    }

    /// Adds one to the counter of `run` that `which` picks; its new value.
    fn count(&self, run: &CustomRun, which: impl FnOnce(&mut Entry) -> &mut u32) -> u32 {
        let mut now = 0;
        self.update(run, |entry| {
            let counter = which(entry);
            *counter = counter.saturating_add(1);
            now = *counter;
        });
        now
    }

    /// A reconcile of `run` succeeded: the next failure or wait starts its backoff anew.
    pub(crate) fn succeeded(&self, run: &CustomRun) {
        let mut inner = self.lock();
        if let Some(entry) = inner.entries.get_mut(&RunKey::of(run)) {
            entry.failures = 0;
            entry.waits = 0;
        }
    }

    /// Forgets a run (done, or deleted).
    pub(crate) fn forget(&self, key: &RunKey) {
        self.lock().entries.remove(key);
    }

    /// Keeps only the runs for which `keep` holds (after a re-list: the runs that still exist).
    pub(crate) fn retain(&self, mut keep: impl FnMut(&RunKey) -> bool) {
        self.lock().entries.retain(|key, _| keep(key));
    }

    /// How many runs are remembered.
    pub fn len(&self) -> usize {
        self.lock().entries.len()
    }

    /// Whether no run is remembered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Applies `change` to the entry of `run`, making one (evicting the least recently used
    /// entry when full) or starting it anew when the run was re-created with another uid.
    fn update(&self, run: &CustomRun, change: impl FnOnce(&mut Entry)) {
        let key = RunKey::of(run);
        let mut inner = self.lock();
        inner.clock += 1;
        let used = inner.clock;
        if !inner.entries.contains_key(&key) && inner.entries.len() >= self.capacity {
            let oldest = inner
                .entries
                .iter()
                .min_by_key(|(_, e)| e.used)
                .map(|(k, _)| k.clone());
            if let Some(oldest) = oldest {
                inner.entries.remove(&oldest);
            }
        }
        let entry = inner.entries.entry(key).or_default();
        if entry.uid != run.metadata.uid {
            *entry = Entry {
                uid: run.metadata.uid.clone(),
                ..Entry::default()
            };
        }
        entry.used = used;
        change(entry);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // The map holds no invariant a panic elsewhere could break half-way.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
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
}
