//! Verdicts as CloudEvents: each verdict the gate reaches (a stream's served tag marked
//! `Validating`, promoted, `UpdateFailed`, rolled back; a served tag found tampered with; a
//! candidate lost) is sent to the sink the controller is given (`K_SINK`, so a Knative
//! SinkBinding works), with the source's delivery: the same id on every attempt ([`event::id`]),
//! retries with backoff, a dead-letter sink, and an event the sink refuses held and sent again
//! (at most a minute apart) until it is taken, counted meanwhile.
//!
//! Nothing acknowledged that was not taken: a run's verdict is written into its final status
//! (`status.extraFields.verdictEvent: {id, delivered: false}`, in the same write as the verdict)
//! and marked delivered (`"sink"`, `"deadLetterSink"`) only once taken. A controller that stops
//! in between finds the unmarked run when it lists the runs again and sends it then (receivers
//! drop the second copy by its id). The ledger's and the tamper check's verdicts (`lost`,
//! `tampered`) are sent while the controller runs; after a restart those checks judge the
//! streams again and page (and send) what still stands.

pub mod event;
pub mod of_run;

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use kube::api::{Api, PostParams};
use kube::{Client, ResourceExt};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use reqwest::Url;
use serde_json::{Value, json};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::api::CustomRun;
use crate::source::deliver::{self, ContentMode, Delivered, DeliverySpec, SinkClient};

use self::event::{Kind, Verdict};

/// Where `status.extraFields` keeps a run's verdict event.
pub const FIELD: &str = "verdictEvent";

/// Where verdicts go.
#[derive(Clone, Debug)]
pub struct Settings {
    /// The sink (`K_SINK`).
    pub sink: Url,
    /// Retries, backoff and the dead-letter sink.
    pub delivery: DeliverySpec,
    /// The content mode.
    pub mode: ContentMode,
    /// The `dataschema` base (`<base>verdict.json`).
    pub schema_base: Option<Url>,
    /// One attempt's timeout (None: the default, 30 s).
    pub timeout: Option<std::time::Duration>,
    /// A PEM bundle for an https sink (`K_CA_CERTS`).
    pub ca_pem: Option<String>,
    /// The tokens the sink takes, when it has an audience (`K_AUDIENCE`).
    pub oidc: Option<Arc<deliver::oidc::Oidc>>,
}

/// The delivery spec of verdict events: retried without end within a round (exponential from
/// 0.2 s, waits capped at 5 minutes), as the source's default is.
pub fn default_delivery() -> DeliverySpec {
    DeliverySpec {
        retry: None,
        backoff_policy: deliver::BackoffPolicy::Exponential,
        backoff_delay: std::time::Duration::from_millis(200),
        max_backoff: std::time::Duration::from_secs(300),
        dead_letter_sink: None,
    }
}

/// The labels of `imagegate_controller_verdict_events_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Labels {
    verdict: &'static str,
    /// `delivered`, `dead_lettered`, `refused` (a round the sink and the dead-letter sink
    /// refused: held and sent again).
    outcome: &'static str,
}

/// The verdict events' metrics (registered whether or not a sink is given).
#[derive(Clone)]
pub struct VerdictMetrics {
    events: Family<Labels, Counter>,
    held: Gauge,
}

impl VerdictMetrics {
    /// `imagegate_controller_verdict_events_total{verdict, outcome}` and
    /// `imagegate_controller_verdict_events_held`, every series at 0.
    pub fn register(registry: &mut Registry) -> VerdictMetrics {
        let events = Family::<Labels, Counter>::default();
        let held = Gauge::default();
        let sub = registry.sub_registry_with_prefix("imagegate_controller");
        sub.register(
            "verdict_events",
            "Verdict CloudEvents, by verdict and what became of a delivery round",
            events.clone(),
        );
        sub.register(
            "verdict_events_held",
            "Verdict CloudEvents the sink refused, held and sent again until it takes them",
            held.clone(),
        );
        for kind in Kind::ALL {
            for outcome in ["delivered", "dead_lettered", "refused"] {
                let _ = events.get_or_create(&Labels {
                    verdict: kind.name(),
                    outcome,
                });
            }
        }
        VerdictMetrics { events, held }
    }
}

/// Sends verdicts; cloned into the reconciler, the ledger and the tamper check.
#[derive(Clone)]
pub struct Verdicts {
    inner: Arc<Inner>,
}

struct Inner {
    client: Client,
    sink: SinkClient,
    settings: Settings,
    events: Family<Labels, Counter>,
    held: Gauge,
    /// Runs (by uid) whose verdict is being delivered now: one delivery each.
    in_flight: Mutex<HashSet<String>>,
    /// At most this many deliveries at once.
    slots: Semaphore,
    stop: CancellationToken,
}

impl Verdicts {
    /// Verdicts to `settings.sink`, counted in `metrics`; sending stops when `stop` is
    /// cancelled. The error is a CA bundle that does not parse.
    pub fn new(
        client: Client,
        settings: Settings,
        metrics: VerdictMetrics,
        stop: CancellationToken,
    ) -> anyhow::Result<Verdicts> {
        let sink = SinkClient::new(settings.timeout, settings.ca_pem.as_deref())
            .map_err(|e| anyhow::anyhow!("the verdict sink's client: {e}"))?
            .with_oidc(settings.oidc.clone());
        let VerdictMetrics { events, held } = metrics;
        Ok(Verdicts {
            inner: Arc::new(Inner {
                client,
                sink,
                settings,
                events,
                held,
                in_flight: Mutex::new(HashSet::new()),
                slots: Semaphore::new(16),
                stop,
            }),
        })
    }

    /// The mark a run's final status gets when it reaches a verdict: its event's id,
    /// undelivered.
    pub(crate) fn mark(v: &Verdict) -> Value {
        json!({"id": event::id(v), "delivered": false})
    }

    /// Whether a finished run's verdict event waits to be delivered.
    pub(crate) fn pending(run: &CustomRun) -> bool {
        run.status
            .as_ref()
            .and_then(|s| s.extra_fields.get(FIELD))
            .is_some_and(|m| m["delivered"] == false)
    }

    /// Sends the verdict of the finished `run`, just written by this controller, unless it is
    /// being sent now, then marks it delivered in the run's status.
    pub(crate) fn send_run(&self, run: &CustomRun) {
        let _ = self.spawn_send(run, false);
    }

    /// Sends the verdict of a finished run found unmarked in the cache (the controller stopped
    /// before marking it), unless it is being sent now. The cache may be older than a mark
    /// this controller wrote a moment ago (the delivery and the mark can both be done before
    /// the watch brings the verdict's own write), so the run is read again first and sent only
    /// if it still waits: no second copy for a verdict already taken. The task sending it, if
    /// one was started.
    pub fn send_pending(&self, run: &CustomRun) -> Option<tokio::task::JoinHandle<()>> {
        self.spawn_send(run, true)
    }

    fn spawn_send(&self, run: &CustomRun, read_again: bool) -> Option<tokio::task::JoinHandle<()>> {
        of_run::verdict(run)?;
        let uid = run.uid().unwrap_or_default();
        if !self.inner.lock().insert(uid.clone()) {
            return None;
        }
        let (inner, run) = (self.inner.clone(), run.clone());
        Some(tokio::spawn(async move {
            let ns = run.namespace().unwrap_or_default();
            let name = run.name_any();
            let current = if read_again {
                inner.read_again(&ns, &name, &uid).await
            } else {
                Some(run)
            };
            if let Some(v) = current.as_ref().and_then(of_run::verdict)
                && let Some(how) = inner.deliver(&v).await
            {
                inner.mark_delivered(&ns, &name, &uid, how).await;
            }
            inner.lock().remove(&uid);
        }))
    }

    /// Sends a verdict no run reached (the ledger's, the tamper check's).
    pub(crate) fn send(&self, v: Verdict) {
        let inner = self.inner.clone();
        tokio::spawn(async move {
            inner.deliver(&v).await;
        });
    }
}

impl Inner {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashSet<String>> {
        self.in_flight.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn count(&self, v: &Verdict, outcome: &'static str) {
        self.events
            .get_or_create(&Labels {
                verdict: v.kind.name(),
                outcome,
            })
            .inc();
    }

    /// Delivers `v` in rounds until the sink (or the dead-letter sink) takes it: which took
    /// it, or None when the controller stops first.
    async fn deliver(&self, v: &Verdict) -> Option<&'static str> {
        let s = &self.settings;
        let make = || event::event(v, s.schema_base.as_ref());
        let mut round = 1u32;
        let mut held = false;
        let taken = loop {
            let outcome = {
                let _slot = self.slots.acquire().await.ok()?;
                deliver::deliver(&self.sink, &s.sink, &make, s.mode, &s.delivery, &self.stop).await
            };
            match outcome {
                Err(deliver::Stopped) => break None,
                Ok(Delivered::Sink { .. }) => {
                    self.count(v, "delivered");
                    break Some("sink");
                }
                Ok(Delivered::DeadLettered { .. }) => {
                    self.count(v, "dead_lettered");
                    break Some("deadLetterSink");
                }
                Ok(Delivered::Failed { attempts, error }) => {
                    self.count(v, "refused");
                    if !held {
                        held = true;
                        self.held.inc();
                    }
                    round += 1;
                    let wait = deliver::hold_delay(round);
                    warn!(id = %event::id(v), verdict = v.kind.name(), attempts, error, wait_s = wait.as_secs(), "the verdict sink refused the event; holding it and sending it again");
                    tokio::select! {
                        () = tokio::time::sleep(wait) => {}
                        () = self.stop.cancelled() => break None,
                    }
                }
            }
        };
        if held {
            self.held.dec();
        }
        if let Some(to) = taken {
            info!(id = %event::id(v), verdict = v.kind.name(), namespace = %v.namespace, imagestream = %v.imagestream, to, "verdict event delivered");
        }
        taken
    }

    /// Run `ns/name` as the API server has it now, if it is still `uid` and its verdict still
    /// waits to be delivered. A read that fails is retried (waits doubling from a second to
    /// half a minute) until it succeeds or the controller stops: the verdict is not dropped.
    async fn read_again(&self, ns: &str, name: &str, uid: &str) -> Option<CustomRun> {
        let api: Api<CustomRun> = Api::namespaced(self.client.clone(), ns);
        let mut wait = std::time::Duration::from_secs(1);
        loop {
            match api.get_opt(name).await {
                Ok(Some(r)) if r.uid().as_deref() == Some(uid) => {
                    return Verdicts::pending(&r).then_some(r);
                }
                Ok(_) => return None,
                Err(e) => {
                    warn!(customrun = name, error = %e, "cannot read a run whose verdict event waits");
                    tokio::select! {
                        () = tokio::time::sleep(wait) => {}
                        () = self.stop.cancelled() => return None,
                    }
                    wait = (wait * 2).min(std::time::Duration::from_secs(30));
                }
            }
        }
    }

    /// Marks run `ns/name` (still `uid`) delivered `how`, conditional on the version read.
    async fn mark_delivered(&self, ns: &str, name: &str, uid: &str, how: &str) {
        let api: Api<CustomRun> = Api::namespaced(self.client.clone(), ns);
        for _ in 0..5 {
            let mut run = match api.get_opt(name).await {
                Ok(Some(r)) if r.uid().as_deref() == Some(uid) => r,
                Ok(_) => return,
                Err(e) => {
                    warn!(customrun = name, error = %e, "cannot read a run to mark its verdict event delivered");
                    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                    continue;
                }
            };
            let Some(status) = run.status.as_mut() else {
                return;
            };
            if !status.extra_fields.is_object() {
                status.extra_fields = json!({});
            }
            status.extra_fields[FIELD]["delivered"] = Value::String(how.to_string());
            run.metadata.managed_fields = None;
            match api.replace_status(name, &PostParams::default(), &run).await {
                Ok(_) => return,
                Err(kube::Error::Api(e)) if e.code == 409 => continue,
                Err(e) => {
                    warn!(customrun = name, error = %e, "cannot mark a run's verdict event delivered");
                    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                }
            }
        }
    }
}
