//! The image import controllers of openshift-controller-manager, run by the emulator as a real
//! cluster runs them beside openshift-apiserver: the `ImageStreamController` imports a new or
//! changed `DockerImage` spec tag within moments of the write that made it (the real one took
//! tens of milliseconds, `../shared/reference/objects/real-openshift/`), and the
//! `ScheduledImageStreamController` imports every `importPolicy.scheduled` tag again each
//! interval (OpenShift's 900 s unless configured). Both go through the same import as
//! `POST imagestreamimports` ([`Cluster::import_images`]), as the real controllers post
//! ImageStreamImports, so an import writes what a real one writes and, when nothing changed,
//! writes nothing.
//!
//! What is imported when is decided by [`crate::openshift::due_now`] and
//! [`crate::openshift::scheduled`]; this module only runs them: it watches ImageStreams from the
//! store (relisting all of them if it fell behind, as an informer does after a lost watch),
//! and ticks the schedule. The real scheduler spreads streams over the interval in buckets
//! and limits them to 60 a minute; here every scheduled stream is checked once per interval.

use std::sync::Arc;
use std::time::Duration;

use chrono::{SecondsFormat, Utc};
use serde_json::Value;
use tokio::sync::broadcast::error::RecvError;
use tokio::task::JoinHandle;

use crate::openshift::{self, ImportSpec};
use crate::store::EventType;
use crate::upstream::Answer;
use crate::verbs::Cluster;

const IMAGE_GROUP: &str = "image.openshift.io";
const IMAGESTREAMS: &str = "imagestreams";

/// OpenShift's `ScheduledImageImportMinimumIntervalSeconds` default.
pub const DEFAULT_SCHEDULED_INTERVAL: Duration = Duration::from_secs(900);

/// How the import controllers run.
#[derive(Clone, Debug)]
pub struct Imports {
    /// Whether the controllers run at all. Off, an import happens only when a client posts an
    /// ImageStreamImport or a test calls the control API, as before the emulator had them.
    pub enabled: bool,
    /// How often every scheduled tag is imported again (OpenShift's 900 s by default).
    pub scheduled_interval: Duration,
    /// The registries (`host:port`) imports read over the network, over HTTPS, or plain HTTP
    /// where the tag says `insecure` ([`crate::pull`]); every other pull spec resolves from the
    /// answers recorded through the control API. This applies to every import, a posted
    /// ImageStreamImport too, whether or not the controllers run.
    pub registries: Vec<String>,
    /// Registries also read over plain HTTP whatever the tag says (OpenShift's
    /// `registrySources.insecureRegistries`); read over the network like [`Imports::registries`].
    pub insecure_registries: Vec<String>,
}

impl Default for Imports {
    fn default() -> Self {
        Imports {
            enabled: true,
            scheduled_interval: DEFAULT_SCHEDULED_INTERVAL,
            registries: Vec::new(),
            insecure_registries: Vec::new(),
        }
    }
}

/// What `spec` resolves to now: read from its registry when that is one the emulator reaches,
/// else the answer recorded for it.
pub async fn resolve(cluster: &Cluster, spec: &ImportSpec, now: &str) -> Answer {
    let host = crate::pull::registry_of(&spec.from);
    let added = cluster
        .registries_added
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .iter()
        .find(|(h, _)| *h == host)
        .map(|(_, insecure)| *insecure);
    let listed_insecure =
        cluster.imports.insecure_registries.contains(&host) || added == Some(true);
    if !listed_insecure && !cluster.imports.registries.contains(&host) && added.is_none() {
        return cluster.upstream.resolve(&spec.from);
    }
    let (policy, _) = spec.policies();
    let insecure = policy.insecure || listed_insecure;
    crate::pull::pull(&spec.from, &policy.import_mode, insecure, now).await
}

/// [`resolve`] for each spec, in order.
pub async fn resolve_all(cluster: &Cluster, specs: &[ImportSpec], now: &str) -> Vec<Answer> {
    let mut answers = Vec::with_capacity(specs.len());
    for spec in specs {
        answers.push(resolve(cluster, spec, now).await);
    }
    answers
}

/// Starts the controllers on `cluster`; None when they are disabled. Abort the task to stop them.
pub fn spawn(cluster: Arc<Cluster>, config: &Imports) -> Option<JoinHandle<()>> {
    if !config.enabled {
        return None;
    }
    cluster.schedule.send_replace(config.scheduled_interval);
    Some(tokio::spawn(run(cluster)))
}

/// The scheduled imports' ticks, every `interval` from now.
fn ticks(interval: Duration) -> tokio::time::Interval {
    let interval = interval.max(Duration::from_millis(100));
    let mut schedule = tokio::time::interval_at(tokio::time::Instant::now() + interval, interval);
    schedule.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    schedule
}

async fn run(cluster: Arc<Cluster>) {
    let mut interval = cluster.schedule.subscribe();
    let mut schedule = ticks(*interval.borrow_and_update());
    'relist: loop {
        let (streams, _, mut events) =
            cluster
                .store
                .subscribe_current(IMAGE_GROUP, IMAGESTREAMS, None);
        for s in streams {
            import_due(&cluster, &s.value()).await;
        }
        loop {
            tokio::select! {
                event = events.recv() => match event {
                    Ok(e) => {
                        let ours = e.res.0 == IMAGE_GROUP && e.res.1 == IMAGESTREAMS;
                        if ours && e.kind != EventType::Deleted {
                            import_due(&cluster, &e.object.value()).await;
                        }
                    }
                    Err(RecvError::Lagged(_)) => continue 'relist,
                    Err(RecvError::Closed) => return,
                },
                changed = interval.changed() => {
                    if changed.is_ok() {
                        schedule = ticks(*interval.borrow_and_update());
                    }
                }
                _ = schedule.tick() => {
                    let (streams, _) = cluster.store.list(IMAGE_GROUP, IMAGESTREAMS, None);
                    for s in streams {
                        let stream = s.value();
                        run_import(&cluster, &stream, &openshift::scheduled(&stream)).await;
                    }
                }
            }
        }
    }
}

async fn import_due(cluster: &Cluster, stream: &Value) {
    if cluster.is_as_seeded(stream) {
        return;
    }
    run_import(cluster, stream, &openshift::due_now(stream)).await;
}

async fn run_import(cluster: &Cluster, stream: &Value, specs: &[ImportSpec]) {
    if specs.is_empty() {
        return;
    }
    let meta = |k: &str| {
        stream
            .pointer(&format!("/metadata/{k}"))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let (ns, name, seen) = (meta("namespace"), meta("name"), meta("resourceVersion"));
    let at = Utc::now().to_rfc3339_opts(SecondsFormat::Secs, true);
    let answers = resolve_all(cluster, specs, &at).await;
    // A stream deleted meanwhile is a 404, one written meanwhile a 409: either way its own
    // event (if any) brings it back, decided afresh.
    if let Err(e) = cluster.import_images(&ns, &name, specs, answers, true, &at, Some(&seen)) {
        tracing::debug!(namespace = %ns, imagestream = %name, error = %e.message, "import not written");
    }
}
