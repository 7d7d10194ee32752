//! The phases of the multi-tenant benchmark. Every change is an import with a digest of its
//! own (`common::digest` with a new round), so the sink tells which change each event carries
//! and at which source's path it arrived; a change's latency runs from the bench's import call
//! (the emulator is in this process) to its first arrival at the path of each source that
//! should deliver it.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use imagegate_emulator::Emulator;

use crate::common::digest;
use crate::world::{self, SINGLE, STREAMS_PER_NS, Sink, ns};

/// A change made: who should deliver it, its digest, when the import call began.
pub type Made = (u32, String, Instant);

pub struct Bench<'a> {
    pub emu: &'a Emulator,
    pub sink: Sink,
    /// The sink's base URL.
    pub sink_url: String,
    /// Team namespaces (the last one's source is the one added while the others are busy).
    pub teams: usize,
    round: AtomicUsize,
}

/// What adding the last source while the others were busy showed.
pub struct Added {
    /// From its creation to its first event at its sink, s.
    pub first_delivery: f64,
    /// From its creation until the adapter counted every source Ready, s (polled every 20 ms).
    pub all_ready: f64,
    /// The latencies of the changes to the busy sources meanwhile (sorted).
    pub busy_latency: Vec<f64>,
}

/// A burst of one change per stream.
pub struct Burst {
    pub changes: usize,
    pub written: f64,
    pub delivered: f64,
}

impl<'a> Bench<'a> {
    pub fn new(emu: &'a Emulator, sink: Sink, sink_url: String, teams: usize) -> Self {
        Bench {
            emu,
            sink,
            sink_url,
            teams,
            round: AtomicUsize::new(0),
        }
    }

    /// One import into `t-k/nb-j:t{tag}` with a new round; who delivers it (team 0's changes
    /// twice: source 0 and the single source), its digest and when the call began.
    fn change(&self, k: usize, j: usize, tag: usize) -> Vec<Made> {
        let round = self.round.fetch_add(1, Ordering::Relaxed) + 1;
        let d = digest(k * STREAMS_PER_NS + j, tag, round);
        let t = Instant::now();
        self.emu
            .import(&ns(k), &format!("nb-{j}"), &format!("t{tag}"), Some(&d))
            .unwrap();
        let mut made = vec![(k as u32, d.clone(), t)];
        if k == 0 {
            made.push((SINGLE, d, t));
        }
        made
    }

    fn missing<'m>(&self, made: &'m [Made]) -> Vec<&'m Made> {
        let a = self.sink.lock().unwrap();
        made.iter()
            .filter(|(s, d, _)| !a.first.contains_key(&(*s, d.clone())))
            .collect()
    }

    /// Waits until every change arrived where it should, failing after 60 s without progress;
    /// the moment the last arrived.
    async fn settle(&self, made: &[Made], what: &str) -> Instant {
        let (mut left, mut progress) = (usize::MAX, Instant::now());
        loop {
            let missing = self.missing(made);
            if missing.is_empty() {
                let a = self.sink.lock().unwrap();
                return made
                    .iter()
                    .map(|(s, d, _)| a.first[&(*s, d.clone())])
                    .max()
                    .unwrap_or_else(Instant::now);
            }
            if missing.len() < left {
                (left, progress) = (missing.len(), Instant::now());
            }
            assert!(
                progress.elapsed() < Duration::from_secs(60),
                "{what}: nothing new for 60 s; {} of {} missing, the first at sender {}",
                missing.len(),
                made.len(),
                missing[0].0
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Each change's latency to `sender`'s path (None: every multi-tenant source's), sorted.
    pub fn latencies(&self, made: &[Made], sender: Option<u32>) -> Vec<f64> {
        let a = self.sink.lock().unwrap();
        let mut out: Vec<f64> = made
            .iter()
            .filter(|(s, _, _)| sender.map_or(*s != SINGLE, |want| want == *s))
            .filter_map(|(s, d, t)| a.first.get(&(*s, d.clone())).map(|at| *at - *t))
            .map(|d| d.as_secs_f64())
            .collect();
        out.sort_by(f64::total_cmp);
        out
    }

    /// Imports into `nb-{last}:t2` of each of the first `teams` namespaces until each of their
    /// sources (and the single source) delivered one: from then on every source is past its
    /// first list, and a change is a change. A change made before a source's first list is
    /// part of the state it records silently, hence the retries (every 2 s).
    pub async fn prime(&self, teams: usize) {
        let mut waiting: Vec<Made> = (0..teams)
            .flat_map(|k| self.change(k, STREAMS_PER_NS - 1, 2))
            .collect();
        let deadline = Instant::now() + Duration::from_secs(300);
        loop {
            tokio::time::sleep(Duration::from_secs(2)).await;
            let missing: Vec<u32> = self.missing(&waiting).iter().map(|m| m.0).collect();
            if missing.is_empty() {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{} sources never delivered, the first {}",
                missing.len(),
                missing[0]
            );
            waiting.clear();
            let mut teams: Vec<usize> = missing
                .iter()
                .map(|s| if *s == SINGLE { 0 } else { *s as usize })
                .collect();
            teams.dedup();
            for k in teams {
                waiting.extend(self.change(k, STREAMS_PER_NS - 1, 2));
            }
        }
    }

    /// `n` changes to team 0's streams (`t0`), `gap` apart: each delivered by source 0 of the
    /// multi-tenant process and by the single source, the like-for-like comparison.
    pub async fn paced_team0(&self, n: usize, gap: Duration) -> Vec<Made> {
        let mut made = Vec::new();
        for i in 0..n {
            made.extend(self.change(0, i % (STREAMS_PER_NS - 1), 0));
            tokio::time::sleep(gap).await;
        }
        self.settle(&made, "paced, team 0").await;
        made
    }

    /// `n` changes round-robin over the first `teams` namespaces, `gap` apart.
    pub async fn paced_spread(&self, n: usize, teams: usize, gap: Duration) -> Vec<Made> {
        let mut made = Vec::new();
        for i in 0..n {
            let k = i % teams;
            made.extend(self.change(k, (i / teams) % (STREAMS_PER_NS - 1), 0));
            tokio::time::sleep(gap).await;
        }
        self.settle(&made, "paced over every source").await;
        made
    }

    /// [`Bench::paced_spread`] while the noisy tenant (team `self.teams`, its sink refusing
    /// everything) gets a change every `noisy_gap`; `sample` is called every 200 ms meanwhile
    /// (RSS, gauges). The healthy changes, and how many the noisy tenant was given.
    pub async fn noisy_spread(
        &self,
        n: usize,
        teams: usize,
        gap: Duration,
        noisy_gap: Duration,
        mut sample: impl FnMut(),
    ) -> (Vec<Made>, usize) {
        let done = AtomicBool::new(false);
        let noisy = async {
            let mut i = 0usize;
            while !done.load(Ordering::Relaxed) {
                let round = self.round.fetch_add(1, Ordering::Relaxed) + 1;
                let j = i % STREAMS_PER_NS;
                let d = digest(self.teams * STREAMS_PER_NS + j, 0, round);
                self.emu
                    .import(&ns(self.teams), &format!("nb-{j}"), "t0", Some(&d))
                    .unwrap();
                i += 1;
                tokio::time::sleep(noisy_gap).await;
            }
            i
        };
        let healthy = async {
            let mut made = Vec::new();
            let mut last = Instant::now();
            for i in 0..n {
                let k = i % teams;
                made.extend(self.change(k, (i / teams) % (STREAMS_PER_NS - 1), 0));
                tokio::time::sleep(gap).await;
                if last.elapsed() >= Duration::from_millis(200) {
                    sample();
                    last = Instant::now();
                }
            }
            self.settle(&made, "paced over every source, beside the noisy one")
                .await;
            done.store(true, Ordering::Relaxed);
            made
        };
        let (made, given) = tokio::join!(healthy, noisy);
        (made, given)
    }

    /// While the first `teams - 1` sources get a change every `gap` (round-robin), the last
    /// team's source is created through the API (with `emitExisting`, so it delivers as soon
    /// as it has listed): the time to its first event at its sink, and to every source Ready.
    pub async fn busy_add(&self, gap: Duration, mt_admin: u16, expect_ready: usize) -> Added {
        let busy_teams = self.teams - 1;
        let done = AtomicBool::new(false);
        let busy = async {
            let mut made = Vec::new();
            let mut i = 0;
            while !done.load(Ordering::Relaxed) {
                let k = i % busy_teams;
                made.extend(self.change(k, (i / busy_teams) % (STREAMS_PER_NS - 1), 0));
                i += 1;
                tokio::time::sleep(gap).await;
            }
            made
        };
        let add = async {
            tokio::time::sleep(Duration::from_secs(2)).await;
            let last = busy_teams;
            let t = Instant::now();
            world::create_source(self.emu, last, &self.sink_url, true).await;
            let first = loop {
                if let Some(at) = self.sink.lock().unwrap().any.get(&(last as u32)) {
                    break *at;
                }
                assert!(
                    t.elapsed() < Duration::from_secs(120),
                    "the added source never delivered"
                );
                tokio::time::sleep(Duration::from_millis(2)).await;
            };
            let ready = "imagegate_source_multi_tenant_sources{ready=\"True\"}";
            while world::gauge(mt_admin, ready).await < expect_ready as f64 {
                assert!(
                    t.elapsed() < Duration::from_secs(120),
                    "not every source became Ready"
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            let all_ready = t.elapsed().as_secs_f64();
            tokio::time::sleep(Duration::from_secs(3)).await;
            done.store(true, Ordering::Relaxed);
            ((first - t).as_secs_f64(), all_ready)
        };
        let (made, (first_delivery, all_ready)) = tokio::join!(busy, add);
        self.settle(&made, "busy sources").await;
        Added {
            first_delivery,
            all_ready,
            busy_latency: self.latencies(&made, None),
        }
    }

    /// One change per stream of every namespace (`t1`), back to back.
    pub async fn burst(&self) -> Burst {
        let t = Instant::now();
        let mut made = Vec::new();
        for k in 0..self.teams {
            for j in 0..STREAMS_PER_NS {
                made.extend(self.change(k, j, 1));
                if made.len() % 500 == 0 {
                    tokio::task::yield_now().await;
                }
            }
        }
        let written = t.elapsed().as_secs_f64();
        let last = self.settle(&made, "burst").await;
        Burst {
            changes: made.iter().filter(|m| m.0 != SINGLE).count(),
            written,
            delivered: (last - t).as_secs_f64(),
        }
    }
}
