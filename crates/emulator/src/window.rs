//! The watch window: which past events a watch can resume from, kept the way kube-apiserver's
//! watch cache keeps them (k8s.io/apiserver `pkg/storage/cacher/watch_cache.go`, v0.35):
//!
//! - **Per resource.** Each resource has its own window: a burst of ConfigMap writes does not
//!   push ImageStream events out.
//! - **From the start.** The cache is filled by a list when the server starts; a watch from an
//!   older resourceVersion gets `410 Expired` at once ("too old resource version: 1 (413)", as the
//!   real openshift-apiserver answered: `tests/real-openshift/86-watch-from-old-resourceversion.json`).
//! - **Fresh events, and at least 100.** The cache keeps at least 100 events of a resource and
//!   grows (up to 100 × 1024) while its oldest event is younger than 75 s
//!   (`DefaultEventFreshDuration`); an older one goes once a newer event needs its room. Modelled
//!   here as: a new event drops the oldest while more than [`LEAST`] are kept and the oldest is
//!   older than [`Window::fresh`], or while more than [`Window::most`] are.
//! - **Bookmarks about once a minute** (`defaultBookmarkFrequency`), and 2 s before the watch's
//!   timeout: the real kube-apiserver sent none within ten seconds.
//!
//! [`Window::lenient`] keeps what the emulator did before (every event from the first, until
//! `most`; a bookmark every second), for tests that need it; off by default.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::store::{Event, ResKey};

/// kube-apiserver's least watch cache capacity: this many events of a resource are always kept.
pub const LEAST: usize = 100;

/// How long the watch window keeps events, and how often watches get a BOOKMARK.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    /// The most events of one resource kept.
    pub most: usize,
    /// Events younger than this are kept (up to `most`); older ones only while no more than
    /// [`LEAST`] are. None: every event is kept until `most` (lenient).
    pub fresh: Option<Duration>,
    /// How often an idle watch that allows bookmarks gets one.
    pub bookmark_every: Duration,
    /// Whether watches can resume from before the server started.
    pub from_first_event: bool,
}

impl Window {
    /// The real servers' window, keeping at most `most` events of a resource.
    pub fn real(most: usize) -> Window {
        Window {
            most: most.max(1),
            fresh: Some(Duration::from_secs(75)),
            bookmark_every: Duration::from_secs(60),
            from_first_event: false,
        }
    }

    /// Every event from the first, until `most` of a resource; a bookmark every second.
    pub fn lenient(most: usize) -> Window {
        Window {
            most: most.max(1),
            fresh: None,
            bookmark_every: Duration::from_secs(1),
            from_first_event: true,
        }
    }
}

/// The events kept for watches, per resource.
pub struct Log {
    window: Window,
    /// Watches can resume from no older resourceVersion than this (the server's start, or the
    /// last compaction).
    floor: u64,
    kept: HashMap<ResKey, Kept>,
}

#[derive(Default)]
struct Kept {
    events: VecDeque<(Instant, Arc<Event>)>,
    /// The resourceVersion of the last event dropped: a watch can resume from it, not before.
    dropped: u64,
}

impl Log {
    /// An empty log keeping `window`.
    pub fn new(window: Window) -> Log {
        Log {
            window,
            floor: 1,
            kept: HashMap::new(),
        }
    }

    /// The window kept.
    pub fn window(&self) -> Window {
        self.window
    }

    /// Keeps `event`, committed at `now`, and drops what no longer fits.
    pub fn push(&mut self, event: Arc<Event>, now: Instant) {
        let kept = match self.kept.get_mut(&event.res) {
            Some(k) => k,
            None => self.kept.entry(event.res.clone()).or_default(),
        };
        kept.events.push_back((now, event));
        loop {
            let n = kept.events.len();
            let stale = kept.events.front().is_some_and(|(at, _)| {
                self.window
                    .fresh
                    .is_some_and(|f| now.saturating_duration_since(*at) > f)
            });
            if !(n > self.window.most || (n > LEAST && stale)) {
                break;
            }
            if let Some((_, old)) = kept.events.pop_front() {
                kept.dropped = old.rv;
            }
        }
    }

    /// The kept events of `res` after `from` (exclusive), or the oldest resourceVersion a watch
    /// of `res` can resume from when `from` is older.
    pub fn since(&self, res: &ResKey, from: u64) -> Result<Vec<Arc<Event>>, u64> {
        let kept = self.kept.get(res);
        let oldest = self.floor.max(kept.map_or(0, |k| k.dropped));
        if from < oldest {
            return Err(oldest);
        }
        Ok(kept
            .map(|k| {
                k.events
                    .iter()
                    .filter(|(_, e)| e.rv > from)
                    .map(|(_, e)| e.clone())
                    .collect()
            })
            .unwrap_or_default())
    }

    /// Forgets every event: a watch from before `rv` gets `410 Expired`.
    pub fn clear(&mut self, rv: u64) {
        self.kept.clear();
        self.floor = rv;
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::store::{EventType, Stored};

    fn event(rv: u64, plural: &str) -> Arc<Event> {
        Arc::new(Event {
            rv,
            res: (String::new(), plural.to_string()),
            namespace: "ns".into(),
            kind: EventType::Added,
            object: Arc::new(Stored::new(&json!({"metadata": {"name": rv.to_string()}}))),
            previous: None,
        })
    }

    fn res(plural: &str) -> ResKey {
        (String::new(), plural.to_string())
    }

    #[test]
    fn events_older_than_the_fresh_window_go_once_more_than_the_least_are_kept() {
        let mut log = Log::new(Window::real(100 * 1024));
        let t0 = Instant::now();
        for rv in 1..=150 {
            log.push(event(rv, "configmaps"), t0);
        }
        // All within 75 s: all kept.
        assert_eq!(log.since(&res("configmaps"), 1).unwrap().len(), 149);
        // 80 s later, one new event: the stale ones beyond the last 100 go.
        log.push(event(151, "configmaps"), t0 + Duration::from_secs(80));
        assert_eq!(log.since(&res("configmaps"), 50).err(), Some(51));
        assert_eq!(log.since(&res("configmaps"), 51).unwrap().len(), 100);
    }

    #[test]
    fn each_resource_has_its_own_window() {
        let mut log = Log::new(Window::real(10));
        log.push(event(2, "imagestreams"), Instant::now());
        for rv in 3..=40 {
            log.push(event(rv, "configmaps"), Instant::now());
        }
        assert_eq!(log.since(&res("imagestreams"), 1).unwrap().len(), 1);
        assert_eq!(log.since(&res("configmaps"), 29).err(), Some(30));
    }

    #[test]
    fn a_lenient_window_keeps_stale_events_until_it_is_full() {
        let mut log = Log::new(Window::lenient(1000));
        let t0 = Instant::now();
        for rv in 1..=500 {
            log.push(event(rv, "configmaps"), t0);
        }
        log.push(event(501, "configmaps"), t0 + Duration::from_secs(3600));
        assert_eq!(log.since(&res("configmaps"), 1).unwrap().len(), 500);
    }

    #[test]
    fn nothing_before_the_floor_is_served() {
        let mut log = Log::new(Window::real(10));
        log.push(event(2, "configmaps"), Instant::now());
        log.clear(7);
        assert_eq!(log.since(&res("configmaps"), 6).err(), Some(7));
        assert_eq!(log.since(&res("configmaps"), 7).unwrap().len(), 0);
        assert_eq!(log.since(&res("secrets"), 3).err(), Some(7));
    }
}
