//! Benchmark of `imagegate source --multi-tenant` at the scale, on the embedded
//! emulator: `TEAMS` (default 1,000) ImageStreamSources in one adapter process, each selecting
//! its own namespace of 10 ImageStreams x 3 tags and posting to its own sink path. Beside it,
//! in the same run against the same emulator, a single-source `imagegate source` watching team
//! 0's namespace: the floor its latency is compared with. Measured: RSS (VmRSS, VmHWM) after
//! every source is Ready and after each phase; the ImageStream watches each opened (from the
//! emulator's request log) against the number of distinct namespace sets; change-to-sink
//! p50/p99 of paced changes (team 0's, delivered by both; and spread over every source); the
//! time from creating the last source, while the others get a steady stream of changes, to its
//! first delivered event; a burst of one change per stream. Not a test: nothing is asserted
//! about time.
//!
//! `cargo bench --bench source_mt`. `TEAMS` (default 1000), `PACED` (default 300), `SPREAD`
//! (default 2000), `SOURCE_LOG` (both programs' logs, appended), `MT_ENV` (`KEY=VALUE` pairs added to
//! the adapter's environment: a heap profiler's preload, on a build with `--features system-alloc`).

mod common;
#[path = "source_mt/phases.rs"]
mod phases;
#[path = "source_mt/world.rs"]
mod world;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use common::{Killed, cpu_seconds, env_usize, free_port, ms, percentile, rss_kib};
use imagegate_emulator::control::RequestRecord;
use imagegate_emulator::{Config, Emulator};
use phases::Bench;
use world::{MT_USER, SINGLE, SINGLE_USER};

fn main() {
    common::run(bench());
}

/// VmRSS and VmHWM of `p`, MiB, and what the resident pages are: anonymous (heap, stacks,
/// allocator) or file-backed (the binary's and libraries' pages read so far); its threads and
/// open sockets (each connection holds buffers).
fn rss(p: &Killed) -> String {
    let mib = |f| rss_kib(p.pid(), f) as f64 / 1024.0;
    let sockets = std::fs::read_dir(format!("/proc/{}/fd", p.pid())).map_or(0, |fds| {
        fds.filter_map(Result::ok)
            .filter_map(|fd| std::fs::read_link(fd.path()).ok())
            .filter(|target| target.to_string_lossy().starts_with("socket:"))
            .count()
    });
    format!(
        "{:.1} / {:.1} MiB (anon {:.1}, file {:.1}; {} threads, {sockets} sockets)",
        mib("VmRSS:"),
        mib("VmHWM:"),
        mib("RssAnon:"),
        mib("RssFile:"),
        rss_kib(p.pid(), "Threads:"),
    )
}

fn pct(sorted: &[f64]) -> String {
    format!(
        "{} / {} ({} changes)",
        ms(percentile(sorted, 0.5)),
        ms(percentile(sorted, 0.99)),
        sorted.len()
    )
}

/// What the phase beside a noisy tenant showed.
struct Noisy {
    latency: Vec<f64>,
    given: usize,
    per_minute: f64,
    peak_mib: f64,
    hwm_before_mib: f64,
    depth: f64,
    sheds: f64,
    refused: usize,
}

/// The adapter's requests so far, by verb and resource.
fn mt_requests(emu: &Emulator) -> BTreeMap<String, usize> {
    let mut by_kind = BTreeMap::new();
    for r in emu.requests().iter().filter(|r| r.user == MT_USER) {
        let sub = if r.subresource.is_empty() {
            String::new()
        } else {
            format!("/{}", r.subresource)
        };
        *by_kind
            .entry(format!("{} {}{sub}", r.verb, r.resource))
            .or_default() += 1;
    }
    by_kind
}

/// What `after` counts more than `before`, by kind (kinds with none left out).
fn delta(
    before: &BTreeMap<String, usize>,
    after: &BTreeMap<String, usize>,
) -> BTreeMap<String, usize> {
    after
        .iter()
        .map(|(k, n)| (k.clone(), n - before.get(k).copied().unwrap_or(0)))
        .filter(|(_, n)| *n > 0)
        .collect()
}

async fn bench() {
    let teams = env_usize("TEAMS", 1000);
    let paced = env_usize("PACED", 300);
    let spread = env_usize("SPREAD", 2000);
    let idle_for = env_usize("IDLE", 60);
    let noisy = env_usize("NOISY", 1) > 0;
    let served = teams - 1 + usize::from(noisy);
    assert!(teams >= 2, "TEAMS must be at least 2");
    let emu = Emulator::start(Config {
        retained_events: 200_000,
        ..Config::default()
    })
    .await
    .unwrap();
    let (sink_url, sink) = world::start_sink().await;
    let t = Instant::now();
    // The last team's source is created later, while the others are busy.
    world::seed(&emu, teams, teams - 1, &sink_url, noisy).await;
    eprintln!(
        "seeded {teams} namespaces x {} ImageStreams, {} sources, in {:?}",
        world::STREAMS_PER_NS,
        teams - 1,
        t.elapsed()
    );
    let dir = tempfile::tempdir().unwrap();
    let (mt_admin, single_admin) = (free_port(), free_port());
    let t_start = Instant::now();
    let mt = world::start_mt(&emu, dir.path(), mt_admin);
    let single = world::start_single(&emu, dir.path(), &sink_url, single_admin);
    common::wait_ready(mt_admin).await;
    common::wait_ready(single_admin).await;
    let ready = "imagegate_source_multi_tenant_sources{ready=\"True\"}";
    while world::gauge(mt_admin, ready).await < served as f64 {
        assert!(
            t_start.elapsed() < Duration::from_secs(600),
            "the sources never all became Ready"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let all_ready = t_start.elapsed().as_secs_f64();
    let rss_ready = rss(&mt);
    let b = Bench::new(&emu, sink.clone(), sink_url.clone(), teams);
    b.prime(teams - 1).await;
    let all_delivering = t_start.elapsed().as_secs_f64();
    eprintln!(
        "{} sources Ready after {all_ready:.1} s, delivering after {all_delivering:.1} s",
        teams - 1
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (rss_idle, rss_single_idle) = (rss(&mt), rss(&single));
    // Idle: what the adapter asks of the API server while nothing changes, once the delivery
    // counters of the priming changes are written (at most every 30 s per source).
    tokio::time::sleep(imagegate::adapter::counters::INTERVAL + Duration::from_secs(3)).await;
    let before_idle = mt_requests(&emu);
    tokio::time::sleep(Duration::from_secs(idle_for as u64)).await;
    let idle = delta(&before_idle, &mt_requests(&emu));

    let team0 = b.paced_team0(paced, Duration::from_millis(20)).await;
    let before_spread = mt_requests(&emu);
    let spread_made = b
        .paced_spread(spread, teams - 1, Duration::from_millis(5))
        .await;
    let per_change = delta(&before_spread, &mt_requests(&emu));
    let rss_paced = rss(&mt);
    // The same paced phase beside a noisy tenant: its sink refuses everything while its
    // streams change 10,000 times a minute.
    let noisy_run = if noisy {
        let hwm0 = rss_kib(mt.pid(), "VmHWM:");
        let mut peak = rss_kib(mt.pid(), "VmRSS:");
        let t = Instant::now();
        let (made, given) = b
            .noisy_spread(
                spread,
                teams - 1,
                Duration::from_millis(5),
                Duration::from_millis(4),
                || peak = peak.max(rss_kib(mt.pid(), "VmRSS:")),
            )
            .await;
        let depth = world::gauge(mt_admin, "imagegate_source_queue_depth ").await;
        let sheds = world::gauge(mt_admin, "imagegate_source_multi_tenant_sheds_total").await;
        let refused = sink.lock().unwrap().refused;
        Some(Noisy {
            latency: b.latencies(&made, None),
            given,
            per_minute: given as f64 / t.elapsed().as_secs_f64() * 60.0,
            peak_mib: peak as f64 / 1024.0,
            hwm_before_mib: hwm0 as f64 / 1024.0,
            depth,
            sheds,
            refused,
        })
    } else {
        None
    };
    let rss_noisy = rss(&mt);
    let added = b
        .busy_add(Duration::from_millis(5), mt_admin, served + 1)
        .await;
    let rss_added = rss(&mt);
    let watches_gauge = world::gauge(mt_admin, "imagegate_source_multi_tenant_watches").await;
    // Every source is served now; a watch the server ended (its timeoutSeconds) is opened
    // again, so the whole run's count is read against this one and the elapsed times.
    let (early, early_at) = (emu.requests(), t_start.elapsed().as_secs_f64());
    let burst = b.burst().await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (rss_burst, rss_single_end) = (rss(&mt), rss(&single));
    let (mt_cpu, single_cpu) = (cpu_seconds(mt.pid()), cpu_seconds(single.pid()));
    let requests = emu.requests();

    let mt0 = b.latencies(&team0, Some(0));
    let single0 = b.latencies(&team0, Some(SINGLE));
    let spread_lat = b.latencies(&spread_made, None);
    let end_at = t_start.elapsed().as_secs_f64();
    let watches = |log: &[RequestRecord], user: &str| {
        let w: Vec<_> = log
            .iter()
            .filter(|r| r.user == user && r.resource == "imagestreams" && r.verb == "watch")
            .collect();
        let namespaces: BTreeSet<&str> = w.iter().map(|r| r.namespace.as_str()).collect();
        let timeout = w.first().map_or(String::new(), |r| {
            form_urlencoded::parse(r.query.as_bytes())
                .find(|(k, _)| k == "timeoutSeconds")
                .map_or("none".into(), |(_, v)| v.into_owned())
        });
        (w.len(), namespaces.len(), timeout)
    };
    let (mt_early, mt_early_ns, mt_timeout) = watches(&early, MT_USER);
    let (mt_w, mt_ns, _) = watches(&requests, MT_USER);
    let (single_w, _, single_timeout) = watches(&requests, SINGLE_USER);
    let mut by_kind: BTreeMap<String, usize> = BTreeMap::new();
    for r in requests.iter().filter(|r| r.user == MT_USER) {
        let sub = if r.subresource.is_empty() {
            String::new()
        } else {
            format!("/{}", r.subresource)
        };
        *by_kind
            .entry(format!("{} {}{sub}", r.verb, r.resource))
            .or_default() += 1;
    }
    let mut by_kind: Vec<_> = by_kind.into_iter().collect();
    by_kind.sort_by_key(|k| std::cmp::Reverse(k.1));

    common::report_header(
        "imagegate source --multi-tenant",
        &format!(
            "{teams} ImageStreamSources, each its own namespace of {} ImageStreams x 3 tags and its own sink path; embedded emulator",
            world::STREAMS_PER_NS
        ),
    );
    let row = |m: &str, v: String| println!("| {m} | {v} |");
    row(
        &format!("start to {} sources Ready / all delivering", teams - 1),
        format!("{all_ready:.2} s / {all_delivering:.2} s"),
    );
    row("mt RSS now / peak: all Ready", rss_ready);
    row("mt RSS now / peak: delivering, idle", rss_idle);
    row("mt RSS now / peak: after the paced phases", rss_paced);
    row(
        &format!("mt RSS now / peak: {teams} sources, after the busy phase"),
        rss_added,
    );
    row("mt RSS now / peak: after the burst", rss_burst);
    row(
        "single source RSS now / peak: idle; end",
        format!("{rss_single_idle}; {rss_single_end}"),
    );
    row(
        &format!(
            "ImageStream watches opened by mt, {early_at:.0} s after its start, all {teams} served (namespaces) / distinct namespace sets / its watches gauge"
        ),
        format!("{mt_early} ({mt_early_ns}) / {teams} / {watches_gauge}"),
    );
    row(
        &format!(
            "ImageStream watches opened by mt over the run, {end_at:.0} s (namespaces); timeoutSeconds asked"
        ),
        format!("{mt_w} ({mt_ns}); {mt_timeout}"),
    );
    row(
        "ImageStream watches opened by the single source over the run; timeoutSeconds asked",
        format!("{single_w}; {single_timeout}"),
    );
    row(
        &format!("paced team 0 ({paced}, 20 ms apart): mt source 0, p50 / p99"),
        pct(&mt0),
    );
    row(
        "paced team 0: single source (the floor), p50 / p99",
        pct(&single0),
    );
    row(
        "paced team 0: mt p50 / single p50",
        format!("{:.2}x", percentile(&mt0, 0.5) / percentile(&single0, 0.5)),
    );
    row(
        &format!(
            "paced over {} sources ({spread}, 5 ms apart): p50 / p99",
            teams - 1
        ),
        pct(&spread_lat),
    );
    let per_source_minute = |d: &BTreeMap<String, usize>| {
        let total: usize = d.values().sum();
        let kinds: Vec<String> = d.iter().map(|(k, n)| format!("{k} {n}")).collect();
        format!(
            "{:.3} ({total} requests in {idle_for} s: {})",
            total as f64 / served as f64 / (idle_for as f64 / 60.0),
            kinds.join(", ")
        )
    };
    row(
        &format!("idle {idle_for} s: mt requests per source per minute"),
        per_source_minute(&idle),
    );
    {
        let total: usize = per_change.values().sum();
        let kinds: Vec<String> = per_change.iter().map(|(k, n)| format!("{k} {n}")).collect();
        row(
            &format!("paced over {} sources: mt requests per change", teams - 1),
            format!(
                "{:.2} ({total} requests for {spread} changes: {})",
                total as f64 / spread as f64,
                kinds.join(", ")
            ),
        );
    }
    if let Some(n) = &noisy_run {
        row(
            &format!(
                "beside a noisy tenant ({} changes, {:.0} a minute, its sink refusing every event): the {} healthy sources' p50 / p99",
                n.given,
                n.per_minute,
                teams - 1
            ),
            pct(&n.latency),
        );
        row(
            "healthy p50 beside the noisy tenant / without it (same run)",
            format!(
                "{:.2}x",
                percentile(&n.latency, 0.5) / percentile(&spread_lat, 0.5)
            ),
        );
        row(
            "mt RSS during the noisy phase: peak sampled every 200 ms (VmHWM before it); after it",
            format!(
                "{:.1} MiB ({:.1} MiB); {rss_noisy}",
                n.peak_mib, n.hwm_before_mib
            ),
        );
        row(
            "the noisy source at the end of the phase: events waiting (all sources) / sheds / refusals at its sink",
            format!("{} / {} / {}", n.depth, n.sheds, n.refused),
        );
    }
    row(
        "source added while the others are busy: creation to first event / to all Ready",
        format!("{:.3} s / {:.3} s", added.first_delivery, added.all_ready),
    );
    row(
        "busy sources meanwhile (a change every 5 ms): p50 / p99",
        pct(&added.busy_latency),
    );
    row(
        &format!(
            "burst: {} changes (one per stream) written / all delivered",
            burst.changes
        ),
        format!(
            "{:.2} s / {:.2} s ({:.0} events/s)",
            burst.written,
            burst.delivered,
            burst.changes as f64 / burst.delivered
        ),
    );
    row(
        "CPU over the run: mt / single",
        format!("{mt_cpu:.1} s / {single_cpu:.1} s"),
    );
    {
        let a = sink.lock().unwrap();
        row(
            "events at the sink / duplicates",
            format!("{} / {}", a.events, a.duplicates),
        );
    }
    let top: Vec<String> = by_kind
        .iter()
        .take(8)
        .map(|(k, n)| format!("{k} {n}"))
        .collect();
    row(
        &format!(
            "mt's requests ({} in all), most frequent",
            requests.iter().filter(|r| r.user == MT_USER).count()
        ),
        top.join(", "),
    );
    row(
        "bench process (emulator, sink) RSS peak",
        format!("{} MiB", rss_kib(std::process::id(), "VmHWM:") / 1024),
    );
    drop((mt, single));
    emu.shutdown().await;
}
