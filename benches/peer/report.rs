//! The peer benchmark's report: one markdown table, the adapter beside imagegate, then the
//! arithmetic for 1,000 sources.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::common::{ms, percentile};
use crate::phases::{Disruption, Latency, N, Rss};

const ADAPTER_SA: &str = "system:serviceaccount:bench:peer-adapter";
const SOURCE_SA: &str = "system:serviceaccount:imagegate-system:imagegate-source";

/// What the audit log says about one program's watches.
#[derive(Default)]
pub struct Watches {
    /// Watch requests by `resource (namespace)`.
    pub by_target: BTreeMap<String, usize>,
}

/// The watch requests of the adapter's ServiceAccount and of imagegate's (both imagegate
/// processes), from kube-apiserver's audit log: each watch logs `ResponseStarted` when it opens.
pub fn watches(audit: &[Value]) -> [Watches; 2] {
    [ADAPTER_SA, SOURCE_SA].map(|user| {
        let mut w = Watches::default();
        for e in audit.iter().filter(|e| {
            e["user"]["username"] == user && e["verb"] == "watch" && e["stage"] == "ResponseStarted"
        }) {
            let target = format!(
                "{} ({})",
                e["objectRef"]["resource"].as_str().unwrap_or("?"),
                e["objectRef"]["namespace"].as_str().unwrap_or("all")
            );
            *w.by_target.entry(target).or_default() += 1;
        }
        w
    })
}

pub struct Report {
    pub streams: usize,
    pub start: [f64; N],
    pub idle: Rss,
    pub after_paced: Rss,
    pub latency: Latency,
    pub restart: Disruption,
    pub gone: Disruption,
    pub watches: [Watches; 2],
    pub adds: [usize; N],
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

fn p50_p99(samples: &[f64]) -> String {
    let mut s = samples.to_vec();
    s.sort_by(f64::total_cmp);
    format!(
        "{} / {} (n={})",
        ms(percentile(&s, 0.5)),
        ms(percentile(&s, 0.99)),
        s.len()
    )
}

fn row(measure: &str, cells: [String; N]) {
    println!("| {measure} | {} |", cells.join(" | "));
}

fn disruption(name: &str, d: &Disruption) {
    row(
        &format!(
            "{name}: of {} changes, delivered / lost / duplicated",
            d.changes
        ),
        d.coverage
            .each_ref()
            .map(|c| format!("**{} / {} / {}**", c.delivered, c.lost, c.duplicated)),
    );
    row(
        &format!("{name}: first delivery after"),
        d.back_after.map(|s| format!("{s:.2} s")),
    );
    row(
        &format!("{name}: `add` events sent (existing streams)"),
        d.adds.map(|a| a.to_string()),
    );
}

impl Report {
    pub fn print(&self) {
        println!("## ApiServerSource's receive adapter against imagegate source, real API server");
        println!();
        println!(
            "{} ImageStreams x 3 tags in one namespace; the programs at once, one sink; {} cores",
            self.streams,
            std::thread::available_parallelism().map_or(0, |n| n.get())
        );
        println!();
        println!(
            "| measure | ApiServerSource adapter | imagegate source --mode resource | imagegate source (imagestreamtag) |"
        );
        println!("|---|---|---|---|");
        row(
            "start to first change delivered",
            self.start.map(|s| format!("{s:.2} s")),
        );
        let l = &self.latency;
        row(
            &format!(
                "paced ({} changes, 20 ms apart): import call to sink, p50 / p99",
                l.changes
            ),
            l.import_to_sink.each_ref().map(|s| p50_p99(s)),
        );
        row(
            "paced: the bench's own watch to sink, p50 / p99",
            l.watch_to_sink.each_ref().map(|s| p50_p99(s)),
        );
        row(
            "paced: delivered / lost / duplicated",
            l.coverage
                .each_ref()
                .map(|c| format!("{} / {} / {}", c.delivered, c.lost, c.duplicated)),
        );
        row(
            "RSS idle / after paced / peak (first life)",
            [0, 1, 2].map(|k| {
                format!(
                    "{:.1} / {:.1} / {:.1} MiB",
                    mib(self.idle[k].0),
                    mib(self.after_paced[k].0),
                    mib(self.after_paced[k].1)
                )
            }),
        );
        disruption("restart (SIGTERM, changes while down)", &self.restart);
        disruption("410 (watches end, changes, compaction)", &self.gone);
        let targets = |w: &Watches| {
            w.by_target
                .iter()
                .map(|(t, n)| format!("{t}: {n}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let [a, i] = &self.watches;
        row(
            "watch requests opened over the run (audit log; imagegate's two processes share one account)",
            [
                targets(a),
                format!("both: {}", targets(i)),
                "(with the left)".into(),
            ],
        );
        row(
            "`add` events over the run",
            self.adds.map(|a| a.to_string()),
        );
        self.thousand();
    }

    /// 1,000 sources, each one namespace and its own sink.
    fn thousand(&self) {
        let rss = |k: usize| mib(self.after_paced[k].0);
        // Each program holds one ImageStream watch per namespace it watches at a time.
        let open = |_: usize| 1;
        println!();
        println!("### 1,000 sources (one namespace and one sink each)");
        println!();
        println!("| deployment | processes | RSS | ImageStream watches open |");
        println!("|---|---|---|---|");
        println!(
            "| 1,000 ApiServerSources: one adapter each | 1,000 | {:.1} GiB ({:.1} MiB x 1,000) | {} |",
            rss(0) * 1000.0 / 1024.0,
            rss(0),
            open(0) * 1000
        );
        println!(
            "| imagegate source --mode resource, single mode: one process per sink | 1,000 | {:.1} GiB ({:.1} MiB x 1,000) | {} |",
            rss(1) * 1000.0 / 1024.0,
            rss(1),
            open(1) * 1000
        );
        println!(
            "| imagegate source (imagestreamtag), single mode: one process per sink | 1,000 | {:.1} GiB ({:.1} MiB x 1,000) | {} |",
            rss(2) * 1000.0 / 1024.0,
            rss(2),
            open(2) * 1000
        );
        println!(
            "| imagegate source --multi-tenant (issue 15): one process | 1 | (to be measured) | (to be measured) |"
        );
    }
}
