//! Only the gate moves a tag it served. One watch of the ImageStreams (every namespace, or each
//! `--namespace`) notices, within the watch's latency, a served or previous tag pinned to
//! something else than the gate wrote ([`detect`]), and answers with one conditional write: the
//! tag reported `Tampered`, or, when an ImagePromotion that governs the stream sets
//! `onTamper: Revert`, put back. Each answer is a Warning Event on the ImageStream and counted
//! (`imagegate_controller_tampers_total{action}`); the tags found tampered now are the gauge
//! `imagegate_controller_tampered_tags`, which the `ImagegateServedTagTampered` alert watches. It
//! runs beside the reconcilers, only while leading; a failed write is retried at the next event
//! of that stream or the watch's next re-list.

pub mod detect;

use std::collections::BTreeMap;

use futures::StreamExt;
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::runtime::WatchStreamExt;
use kube::runtime::events::{Event, EventType, Recorder};
use kube::runtime::watcher;
use kube::{Client, Resource};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::api::{ImageStream, status_code};

use self::detect::Tamper;
use super::crd::{ImagePromotion, OnTamper};
use super::policy::governs;

/// The label of the tamper counter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ActionLabels {
    /// `reported` or `reverted`.
    pub action: &'static str,
}

/// The tamper watch's metrics.
#[derive(Clone)]
pub struct TamperMetrics {
    /// `imagegate_controller_tampered_tags`: tags the gate served found pinned elsewhere now.
    pub tampered: Gauge,
    /// `imagegate_controller_tampers_total{action}`: tampers answered, by what was done.
    pub answered: Family<ActionLabels, Counter>,
}

impl TamperMetrics {
    /// Creates the metrics under `imagegate_controller`; both actions start at 0.
    pub fn register(registry: &mut Registry) -> TamperMetrics {
        let m = TamperMetrics {
            tampered: Gauge::default(),
            answered: Family::default(),
        };
        for action in ["reported", "reverted"] {
            m.answered.get_or_create(&ActionLabels { action }).inc_by(0);
        }
        let sub = registry.sub_registry_with_prefix("imagegate_controller");
        sub.register(
            "tampered_tags",
            "Tags the gate served that are now pinned to something else (moved outside the gate)",
            m.tampered.clone(),
        );
        sub.register(
            "tampers",
            "Tags found moved outside the gate and answered, by action (reported, reverted)",
            m.answered.clone(),
        );
        m
    }
}

/// Watches the ImageStreams of `namespaces` (all when empty) until `stop` is cancelled.
pub(crate) async fn watch(
    client: Client,
    namespaces: Vec<String>,
    metrics: TamperMetrics,
    recorder: Recorder,
    verdicts: Option<super::verdict::Verdicts>,
    stop: CancellationToken,
) {
    let mut found: Tampered = BTreeMap::new();
    let apis = super::drift::stream_apis(&client, &namespaces);
    let mut events = futures::stream::select_all(apis.into_iter().map(|api| {
        watcher(api, watcher::Config::default())
            .default_backoff()
            .boxed()
    }));
    loop {
        let event = tokio::select! {
            () = stop.cancelled() => return,
            event = events.next() => event,
        };
        let is = match event {
            None => return,
            Some(Err(e)) => {
                warn!(error = %e, "the ImageStream watch of the tamper check failed; retrying");
                continue;
            }
            Some(Ok(watcher::Event::Apply(is) | watcher::Event::InitApply(is))) => is,
            Some(Ok(watcher::Event::Delete(is))) => {
                found.remove(&key(&is));
                metrics.tampered.set(count(&found));
                continue;
            }
            Some(Ok(watcher::Event::Init | watcher::Event::InitDone)) => continue,
        };
        let tampers = detect::find(&is);
        if tampers.is_empty() {
            found.remove(&key(&is));
        } else {
            found.insert(key(&is), tampers.len());
        }
        metrics.tampered.set(count(&found));
        for t in &tampers {
            if answer(&client, &is, t, &metrics, &recorder).await
                && let Some(v) = &verdicts
            {
                v.send(tampered(&is, t));
            }
        }
    }
}

/// Per stream (namespace, name), how many of its tags are tampered now.
type Tampered = BTreeMap<(String, String), usize>;

fn key(is: &ImageStream) -> (String, String) {
    (
        is.metadata.namespace.clone().unwrap_or_default(),
        is.metadata.name.clone().unwrap_or_default(),
    )
}

fn count(found: &Tampered) -> i64 {
    found.values().map(|n| *n as i64).sum()
}

/// The verdict of a tamper that was answered.
fn tampered(is: &ImageStream, t: &Tamper) -> super::verdict::event::Verdict {
    let (namespace, name) = key(is);
    let found = crate::api::digest_from_reference(&t.found)
        .unwrap_or("")
        .to_string();
    super::verdict::event::Verdict {
        kind: super::verdict::event::Kind::Tampered,
        message: t.describe(&name),
        namespace,
        imagestream: name,
        served_tag: t.tag.clone(),
        digest: found,
        served_digest: String::new(),
        previous_digest: t.expected.clone(),
        reason: "Tampered".into(),
        customrun: None,
        key: format!(
            "{}/{}",
            is.metadata.uid.clone().unwrap_or_default(),
            t.found
        ),
        time: chrono::Utc::now(),
    }
}

/// Reports or reverts one tamper, with one write conditional on the resourceVersion read;
/// whether it was answered now.
async fn answer(
    client: &Client,
    is: &ImageStream,
    t: &Tamper,
    metrics: &TamperMetrics,
    recorder: &Recorder,
) -> bool {
    let (namespace, name) = key(is);
    let revert = match reverts(client, &namespace, &name).await {
        Ok(revert) => revert,
        Err(e) => {
            // Reported meanwhile; the next event of the stream asks again.
            warn!(namespace = %namespace, imagestream = %name, error = %e, "cannot list the ImagePromotions that govern a tampered stream");
            false
        }
    };
    if t.reported && !revert {
        return false;
    }
    let (patch, action, verb) = if revert {
        (detect::revert(is, t), "reverted", "put back")
    } else {
        (detect::report(is, t), "reported", "reported")
    };
    let api: Api<ImageStream> = Api::namespaced(client.clone(), &namespace);
    match api
        .patch(&name, &PatchParams::default(), &Patch::Strategic(&patch))
        .await
    {
        Ok(_) => {}
        // Changed since read: its next event brings the tamper (or not) again.
        Err(e) if status_code(&e) == Some(409) => return false,
        Err(e) => {
            warn!(namespace = %namespace, imagestream = %name, tag = %t.tag, error = %e, "cannot answer a tampered tag");
            return false;
        }
    }
    metrics
        .answered
        .get_or_create(&ActionLabels { action })
        .inc();
    let what = t.describe(&name);
    info!(namespace = %namespace, imagestream = %name, tag = %t.tag, digest = %t.expected, action, "{what}");
    let event = Event {
        type_: EventType::Warning,
        reason: "Tampered".into(),
        note: Some(format!("{what}; {verb}").chars().take(1000).collect()),
        action: "CheckTamper".into(),
        secondary: None,
    };
    if let Err(e) = recorder.publish(&event, &is.object_ref(&())).await {
        warn!(namespace = %namespace, imagestream = %name, error = %e, "cannot publish a Kubernetes Event");
    }
    true
}

/// Whether an ImagePromotion that governs `ns/stream` sets `onTamper: Revert`.
async fn reverts(client: &Client, ns: &str, stream: &str) -> Result<bool, kube::Error> {
    let api: Api<ImagePromotion> = Api::namespaced(client.clone(), ns);
    let all = match api.list(&ListParams::default()).await {
        Ok(list) => list.items,
        Err(e) if status_code(&e) == Some(404) => return Ok(false),
        Err(e) => return Err(e),
    };
    Ok(all
        .iter()
        .any(|p| governs(&p.spec, ns, stream) && p.spec.on_tamper == OnTamper::Revert))
}
