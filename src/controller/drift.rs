//! The drift watch: every `--drift-check-interval`, list the adopted ImageStreams
//! (`imagegate.dev/managed=true`, in the controller's namespaces) and those an ImagePromotion
//! governs ([`crate::adopt::listing`]), count each kind of drift
//! ([`crate::adopt::check`], the same rule as `imagegate adopt --check`) in the gauge
//! `imagegate_controller_streams_drifted{drift}`, and publish a Warning Event on a stream when
//! its drift first appears or changes. A stream that lost its candidate tag imports nothing, so
//! no run would ever notice it: this is where it becomes visible. It runs beside the
//! reconcilers, only while leading, and a failed list is counted and retried at the next tick.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use kube::Client;
use kube::api::Api;
use kube::runtime::events::{Event, EventType, Recorder};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::adopt::check::Drift;
use crate::adopt::listing::{self, Drifted};
use crate::api::ImageStream;

/// The label of a drift gauge.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct DriftLabels {
    /// The kind of drift (`candidate_missing`, ...).
    pub drift: &'static str,
}

/// The label of a scan counter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct ScanLabels {
    /// `ok` or `error`.
    pub outcome: &'static str,
}

/// The drift watch's metrics.
#[derive(Clone)]
pub(crate) struct DriftMetrics {
    /// `imagegate_controller_streams_drifted{drift}`: adopted streams with that drift, at the
    /// last scan.
    pub drifted: Family<DriftLabels, Gauge>,
    /// `imagegate_controller_drift_scans_total{outcome}`.
    pub scans: Family<ScanLabels, Counter>,
}

impl DriftMetrics {
    /// Creates the metrics and registers them under `imagegate_controller`; every kind starts
    /// at 0 so that an alert on it has a series before the first drift.
    pub(crate) fn register(registry: &mut Registry) -> DriftMetrics {
        let m = DriftMetrics {
            drifted: Family::default(),
            scans: Family::default(),
        };
        for d in Drift::ALL {
            m.drifted
                .get_or_create(&DriftLabels { drift: d.as_str() })
                .set(0);
        }
        let sub = registry.sub_registry_with_prefix("imagegate_controller");
        sub.register(
            "streams_drifted",
            "Adopted or governed ImageStreams whose gated shape drifted, by kind, at the last scan",
            m.drifted.clone(),
        );
        sub.register(
            "drift_scans",
            "Scans of the adopted and governed ImageStreams, by outcome",
            m.scans.clone(),
        );
        m
    }
}

/// Scans every `interval` until `stop` is cancelled, the first time at once.
pub(crate) async fn watch(
    client: Client,
    namespaces: Vec<String>,
    interval: Duration,
    metrics: DriftMetrics,
    recorder: Recorder,
    stop: CancellationToken,
) {
    let mut seen = BTreeMap::new();
    loop {
        scan(&client, &namespaces, &metrics, &recorder, &mut seen).await;
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(interval) => {}
        }
    }
}

/// The ImageStream APIs of `namespaces`: every namespace's when it is empty (also the tamper
/// watch's, [`super::tamper`]).
pub(super) fn stream_apis(client: &Client, namespaces: &[String]) -> Vec<Api<ImageStream>> {
    if namespaces.is_empty() {
        return vec![Api::all(client.clone())];
    }
    namespaces
        .iter()
        .map(|ns| Api::namespaced(client.clone(), ns))
        .collect()
}

/// What each drifted stream was last announced with, so that an Event marks a change only.
type Seen = BTreeMap<(String, String), BTreeSet<Drift>>;

async fn scan(
    client: &Client,
    namespaces: &[String],
    metrics: &DriftMetrics,
    recorder: &Recorder,
    seen: &mut Seen,
) {
    let checked = match listing::check(client, namespaces).await {
        Ok(checked) => checked,
        Err(e) => {
            warn!(error = %e, "the drift check cannot read what it checks");
            metrics
                .scans
                .get_or_create(&ScanLabels { outcome: "error" })
                .inc();
            return;
        }
    };
    metrics
        .scans
        .get_or_create(&ScanLabels { outcome: "ok" })
        .inc();
    let mut counts: BTreeMap<Drift, i64> = BTreeMap::new();
    let mut now: Seen = BTreeMap::new();
    for d in &checked.drifted {
        let key = (d.namespace.clone(), d.name.clone());
        let kinds: BTreeSet<Drift> = d.found.iter().map(|f| f.drift).collect();
        for k in &kinds {
            *counts.entry(*k).or_default() += 1;
        }
        if seen.get(&key) != Some(&kinds) {
            announce(recorder, d).await;
        }
        now.insert(key, kinds);
    }
    for d in Drift::ALL {
        metrics
            .drifted
            .get_or_create(&DriftLabels { drift: d.as_str() })
            .set(counts.get(&d).copied().unwrap_or(0));
    }
    *seen = now;
}

async fn announce(recorder: &Recorder, d: &Drifted) {
    let Some(first) = d.found.first() else { return };
    let (namespace, name) = (&d.namespace, &d.name);
    let note: String = d
        .found
        .iter()
        .map(|f| f.message.as_str())
        .collect::<Vec<_>>()
        .join("; ");
    info!(
        namespace = %namespace,
        imagestream = %name,
        reason = first.drift.reason(),
        "a gated ImageStream drifted"
    );
    let event = Event {
        type_: EventType::Warning,
        reason: first.drift.reason().into(),
        note: Some(
            std::iter::once(note)
                .chain(d.remedies.iter().cloned())
                .collect::<Vec<_>>()
                .join("; ")
                .chars()
                .take(1000)
                .collect(),
        ),
        action: "CheckDrift".into(),
        secondary: None,
    };
    // Events are for humans; failing to publish one must not stop the watch.
    if let Err(e) = recorder.publish(&event, &d.reference).await {
        warn!(namespace = %namespace, imagestream = %name, error = %e, "cannot publish a Kubernetes Event");
    }
}
