//! The phases of the peer benchmark, each over both programs at once: start, paced changes,
//! a restart of both with changes made while they are down, and a 410.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
use kube::runtime::{WatchStreamExt, watcher};

use crate::NS;
use crate::common::{self, Cluster, digest, rss_kib};
use crate::programs::Program;
use crate::sink::{self, Coverage, Log};

/// The programs measured.
pub const N: usize = 3;
/// The senders (each program's `bench` extension), in the order of [`Bench::programs`].
pub const SENDERS: [&str; N] = ["adapter", "imagegate-resource", "imagegate"];

/// RSS of each program now and its peak so far, KiB.
pub type Rss = [(u64, u64); N];

/// Latency samples of each program, seconds: import call to sink, bench's watch to sink.
#[derive(Default)]
pub struct Latency {
    pub import_to_sink: [Vec<f64>; N],
    pub watch_to_sink: [Vec<f64>; N],
    pub coverage: [Coverage; N],
    pub changes: usize,
}

/// What each program did across a disruption.
pub struct Disruption {
    pub changes: usize,
    pub coverage: [Coverage; N],
    /// From the programs' start (or the watches' return) to each one's first delivery, s.
    pub back_after: [f64; N],
    /// `add` (`created`) events each sent in the phase.
    pub adds: [usize; N],
}

pub struct Bench<'a> {
    cluster: &'a Cluster,
    log: Log,
    programs: [Program; N],
    streams: usize,
    admins: [u16; 2],
    round: u64,
}

impl<'a> Bench<'a> {
    pub fn new(
        cluster: &'a Cluster,
        log: Log,
        programs: [Program; N],
        streams: usize,
        admins: [u16; 2],
    ) -> Self {
        Bench {
            cluster,
            log,
            programs,
            streams,
            admins,
            round: 0,
        }
    }

    /// One import into `nb-{i}:t{tag}` with a new round; its round and when the call began.
    async fn change(&mut self, i: usize, tag: usize) -> (u64, Instant) {
        self.round += 1;
        let t = Instant::now();
        let d = digest(i, tag, self.round as usize);
        self.cluster
            .import(NS, &format!("nb-{i}"), &format!("t{tag}"), &d)
            .await;
        (self.round, t)
    }

    fn delivered(&self, sender: &str, round: u64) -> bool {
        let log = self.log.lock().unwrap();
        sink::coverage(&log, sender, &[round]).delivered == 1
    }

    /// Probes (imports into the probe stream, the last one, one a second) until every program
    /// delivers one; the seconds from `since` until each first did.
    async fn until_both_deliver(&mut self, since: Instant) -> [f64; N] {
        let mut back = [f64::NAN; N];
        let deadline = Instant::now() + Duration::from_secs(120);
        while back.iter().any(|b| b.is_nan()) && Instant::now() < deadline {
            let (r, _) = self.change(self.streams, 1).await;
            let until = Instant::now() + Duration::from_secs(1);
            while Instant::now() < until {
                for (k, s) in SENDERS.iter().enumerate() {
                    if back[k].is_nan() && self.delivered(s, r) {
                        back[k] = since.elapsed().as_secs_f64();
                    }
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
        back
    }

    /// Waits until both delivered every round (or `timeout`), then 2 s more for duplicates.
    async fn settle(&self, rounds: &[u64], timeout: Duration) {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            let done = {
                let log = self.log.lock().unwrap();
                SENDERS
                    .iter()
                    .all(|s| sink::coverage(&log, s, rounds).lost == 0)
            };
            if done {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }

    fn coverage(&self, rounds: &[u64]) -> [Coverage; N] {
        let log = self.log.lock().unwrap();
        SENDERS.map(|s| sink::coverage(&log, s, rounds))
    }

    /// Adds each sender sent from log position `from` on.
    fn adds_since(&self, from: usize) -> [usize; N] {
        let log = self.log.lock().unwrap();
        let tail = &log[from.min(log.len())..];
        SENDERS.map(|s| sink::count_kind(tail, s, ".add") + sink::count_kind(tail, s, ".created"))
    }

    /// Adds each sender sent over the whole run.
    pub fn adds(&self) -> [usize; N] {
        self.adds_since(0)
    }

    pub fn rss(&self) -> Rss {
        self.programs
            .each_ref()
            .map(|p| (rss_kib(p.pid(), "VmRSS:"), rss_kib(p.pid(), "VmHWM:")))
    }

    async fn start_programs(&mut self) -> [f64; N] {
        let t = Instant::now();
        for p in &mut self.programs {
            p.start();
        }
        for a in self.admins {
            common::wait_ready(a).await;
        }
        self.until_both_deliver(t).await
    }

    /// Starts both; seconds until each delivered its first change.
    pub async fn start_all(&mut self) -> [f64; N] {
        self.start_programs().await
    }

    pub fn stop_all(&mut self) {
        for p in &mut self.programs {
            p.stop();
        }
    }

    /// `n` changes 10 streams round-robin, 20 ms apart; both programs' latencies. The bench
    /// keeps its own watch of the streams through kube-apiserver (admin), and the moment it
    /// sees a change is the "watch" moment.
    pub async fn paced(&mut self, n: usize) -> Latency {
        let seen: Arc<Mutex<HashMap<u64, Instant>>> = Arc::default();
        let watch = tokio::spawn(bench_watch(self.cluster.client().await, seen.clone()));
        tokio::time::sleep(Duration::from_secs(1)).await;
        let mut made = Vec::with_capacity(n);
        for k in 0..n {
            made.push(self.change(k % self.streams, 0).await);
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let rounds: Vec<u64> = made.iter().map(|(r, _)| *r).collect();
        self.settle(&rounds, Duration::from_secs(60)).await;
        watch.abort();
        let seen = seen.lock().unwrap();
        let log = self.log.lock().unwrap();
        let mut lat = Latency {
            changes: n,
            ..Latency::default()
        };
        for (k, s) in SENDERS.iter().enumerate() {
            for (r, t) in &made {
                let first = log
                    .iter()
                    .find(|e| e.sender == *s && sink::is_update(&e.kind) && e.round == *r);
                if let Some(e) = first {
                    lat.import_to_sink[k].push((e.at - *t).as_secs_f64());
                    if let Some(w) = seen.get(r) {
                        lat.watch_to_sink[k].push(e.at.saturating_duration_since(*w).as_secs_f64());
                    }
                }
            }
            lat.coverage[k] = sink::coverage(&log, s, &rounds);
        }
        lat
    }

    /// Both programs stopped (SIGTERM), one change per stream made while they are down, both
    /// started again.
    pub async fn restart(&mut self) -> Disruption {
        let from = self.log.lock().unwrap().len();
        self.stop_all();
        let mut rounds = Vec::new();
        for i in 0..self.streams {
            rounds.push(self.change(i, 2).await.0);
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
        let back_after = self.start_programs().await;
        self.settle(&rounds, Duration::from_secs(30)).await;
        Disruption {
            changes: rounds.len(),
            coverage: self.coverage(&rounds),
            back_after,
            adds: self.adds_since(from),
        }
    }

    /// A 410: the image API holds the next N ImageStream watches (the programs' resumed ones)
    /// for 3 s, ends every watch, one change per stream is made, and it compacts: the resumed
    /// watches, from before the compaction, get `410 Gone` and both programs list again.
    pub async fn gone(&mut self) -> Disruption {
        let from = self.log.lock().unwrap().len();
        let fault = serde_json::json!({"verb": "watch", "resource": "imagestreams", "count": N, "delayMs": 3000});
        let c = self.cluster;
        c.control(reqwest::Method::POST, "faults", Some(fault.to_string()))
            .await;
        c.control(reqwest::Method::POST, "drop-watches", None).await;
        let t = Instant::now();
        let mut rounds = Vec::new();
        for i in 0..self.streams {
            rounds.push(self.change(i, 1).await.0);
        }
        c.control(reqwest::Method::POST, "compact", None).await;
        tokio::time::sleep(Duration::from_secs(3)).await;
        let back_after = self.until_both_deliver(t).await;
        c.control(reqwest::Method::DELETE, "faults", None).await;
        self.settle(&rounds, Duration::from_secs(30)).await;
        Disruption {
            changes: rounds.len(),
            coverage: self.coverage(&rounds),
            back_after,
            adds: self.adds_since(from),
        }
    }
}

/// The bench's own watch: the first moment it sees each round.
async fn bench_watch(client: kube::Client, seen: Arc<Mutex<HashMap<u64, Instant>>>) {
    let gvk = GroupVersionKind::gvk("image.openshift.io", "v1", "ImageStream");
    let ar = ApiResource::from_gvk_with_plural(&gvk, "imagestreams");
    let api: Api<DynamicObject> = Api::namespaced_with(client, NS, &ar);
    let mut events = watcher(api, watcher::Config::default())
        .applied_objects()
        .boxed();
    while let Some(Ok(obj)) = events.next().await {
        let r = sink::newest_round(&obj.data);
        seen.lock().unwrap().entry(r).or_insert_with(Instant::now);
    }
}
