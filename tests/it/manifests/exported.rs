//! The metrics the two programs export, asked of the code: each program's registry, built as the
//! program builds it (the source's with `--multi-tenant`'s gauges too) (`Metrics::register` on an empty registry), with one child in every labelled
//! family so that its label names show, rendered as the admin server renders `/metrics` and read
//! back. The series names are the ones a query uses (`_total` of a counter, `_bucket`, `_sum` and
//! `_count` of a histogram).

use std::collections::{BTreeMap, BTreeSet};

use imagegate::adapter::metrics::MtMetrics;
use imagegate::controller::metrics::{ErrorLabels, Metrics as ControllerMetrics, OutcomeLabels};
use imagegate::source::metrics::Metrics as SourceMetrics;
use prometheus_client::encoding::text::encode;
use prometheus_client::registry::Registry;

/// Series name -> its label names, over both programs.
pub type Series = BTreeMap<String, BTreeSet<String>>;

/// The series both programs export.
pub fn series() -> Series {
    let mut out = Series::new();
    let mut registry = Registry::default();
    let source = SourceMetrics::register(&mut registry);
    for family in [
        &source.sent,
        &source.failed,
        &source.dead_lettered,
        &source.attempts_failed,
    ] {
        family.get_or_create(&SourceMetrics::of("t")).inc();
    }
    source
        .checkpoint_write_failures
        .get_or_create(&SourceMetrics::reason("r"))
        .inc();
    // `imagegate source --multi-tenant` registers its own beside them.
    let mt = MtMetrics::register(&mut registry);
    mt.set_sources(["True"].into_iter());
    read(&registry, &mut out);

    let mut registry = Registry::default();
    let controller = ControllerMetrics::register(&mut registry);
    controller
        .runs
        .get_or_create(&OutcomeLabels {
            reason: "r",
            succeeded: "s",
        })
        .inc();
    controller
        .reconcile_errors
        .get_or_create(&ErrorLabels { kind: "k" })
        .inc();
    // The tamper watch registers its own beside them (its counter starts at 0 for each action).
    imagegate::controller::tamper::TamperMetrics::register(&mut registry);
    imagegate::controller::ledger::LedgerMetrics::register(&mut registry);
    imagegate::controller::verdict::VerdictMetrics::register(&mut registry);
    // Every program's runtime registers whether it leads.
    imagegate::runtime::register_leader(&mut registry, "imagegate-controller");
    read(&registry, &mut out);

    // `imagegate interceptor`.
    let mut registry = Registry::default();
    let interceptor = imagegate::interceptor::metrics::Metrics::register(&mut registry);
    interceptor.duration.observe(0.01);
    read(&registry, &mut out);

    // `imagegate receiver`, every sender configured (its series are made for each at start).
    let mut registry = Registry::default();
    let receiver = imagegate::receiver::metrics::Metrics::register(
        &mut registry,
        &imagegate::receiver::serve::SENDERS,
    );
    receiver.duration.observe(0.01);
    imagegate::runtime::register_leader(&mut registry, "");
    read(&registry, &mut out);
    out
}

/// Adds the series of `registry`'s OpenMetrics text to `out`.
fn read(registry: &Registry, out: &mut Series) {
    let mut text = String::new();
    encode(&mut text, registry).expect("a registry encodes");
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let name_end = line.find(['{', ' ']).unwrap_or(line.len());
        let labels = out.entry(line[..name_end].to_string()).or_default();
        if let Some(rest) = line[name_end..].strip_prefix('{') {
            let inner = &rest[..rest.find('}').expect("a closed label set")];
            for pair in inner.split(',') {
                let (label, _) = pair.split_once('=').expect("label=\"value\"");
                labels.insert(label.to_string());
            }
        }
    }
}

#[test]
fn the_exported_series_are_read_with_their_labels() {
    let s = series();
    assert_eq!(
        s["imagegate_source_events_sent_total"],
        BTreeSet::from(["type".to_string()])
    );
    assert_eq!(
        s["imagegate_controller_runs_total"],
        BTreeSet::from(["reason".to_string(), "succeeded".to_string()])
    );
    assert!(s["imagegate_source_delivery_latency_seconds_bucket"].contains("le"));
    assert!(s.contains_key("imagegate_source_queue_depth"));
    assert!(s.contains_key("imagegate_source_multi_tenant_backlog_stalled_seconds"));
    assert_eq!(
        s["imagegate_source_multi_tenant_sources"],
        BTreeSet::from(["ready".to_string()])
    );
}
