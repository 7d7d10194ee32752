//! One job of the queue, delivered: the queue's [`Work`] for the source. The event is built
//! once from the change, delivered with retries along the route of the moment (waiting while
//! there is none), held and sent again while the sink refuses it, and counted; what became of
//! it goes on to the acknowledgement ([`crate::source::ack::Recorder`]).

use std::sync::Arc;
use std::time::Instant;

use tokio_util::sync::CancellationToken;
use tracing::{error, warn};

use crate::source::deliver::{self, Delivered, DeliverySpec, SinkClient, Stopped};
use crate::source::metrics::Metrics;
use crate::source::pending::Pending;
use crate::source::queue::{Job, Work};
use crate::source::settings::Settings;

/// How a job's delivery ended: delivered (to the sink or the dead-letter sink), or stopped.
pub(crate) type Outcome = Result<Delivered, Stopped>;

/// Where the events go now: the sink and the dead-letter sink. The single source's never
/// changes; the multi-tenant adapter re-resolves a source's while its flow runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Route {
    /// The sink.
    pub sink: reqwest::Url,
    /// The dead-letter sink, if any.
    pub dead_letter_sink: Option<reqwest::Url>,
    /// The OIDC tokens the sink takes (None: it has no audience).
    pub auth: Option<Arc<deliver::oidc::Oidc>>,
    /// Whether the sink's refusal bodies are kept (`knativeerrordata`): not for a tenant's
    /// raw-URI sink.
    pub error_bodies: bool,
}

/// The route of each delivery, read when it starts: None holds deliveries (they wait in the
/// queue) until a route is sent.
pub(crate) type Routes = tokio::sync::watch::Receiver<Option<Route>>;

/// Told of every delivery that ended (the multi-tenant adapter's per-source counters).
pub(crate) type Tally = Arc<dyn Fn(&Delivered) + Send + Sync>;

/// What the queue runs for each job: the event built once, delivered with retries along the
/// route of the moment (waiting while there is none), counted.
pub(crate) struct Sender {
    /// The source's settings: the events' attributes, the delivery spec, the content mode.
    pub settings: Arc<Settings>,
    /// The HTTP client of the sinks.
    pub sink: Arc<SinkClient>,
    /// Where deliveries are counted.
    pub metrics: Metrics,
    /// The route of each delivery, read when it starts.
    pub routes: Routes,
    /// Told of every delivery that ended, if anyone asked.
    pub tally: Option<Tally>,
    /// Cancelled on shutdown: a delivery in flight ends [`Stopped`].
    pub stop: CancellationToken,
}

impl Work<Pending, Outcome> for Sender {
    async fn work(self: Arc<Self>, job: Job<Pending>) -> (Job<Pending>, Outcome) {
        let outcome = self.deliver(&job).await;
        (job, outcome)
    }
}

impl Sender {
    /// Delivers the job's event until the sink or the dead-letter sink takes it: a round that
    /// ends [`Delivered::Failed`] (refused, no dead-letter sink took it) is counted, and the
    /// event is held (not acknowledged, its stream's later changes behind it) and sent again
    /// after [`deliver::hold_delay`], along the route of that moment. Only a stop ends it
    /// otherwise, unacknowledged, so the next start sends it again.
    async fn deliver(&self, job: &Job<Pending>) -> Outcome {
        let mut held: Option<HeldGauge> = None;
        let mut round = 0u32;
        loop {
            round = round.saturating_add(1);
            if round > 1 {
                let wait = deliver::hold_delay(round);
                tokio::select! {
                    () = self.stop.cancelled() => return Err(Stopped),
                    () = tokio::time::sleep(wait) => {}
                }
            }
            match self.deliver_once(job).await? {
                Delivered::Failed { .. } => {
                    if held.is_none() {
                        held = Some(HeldGauge::new(&self.metrics.held));
                    }
                }
                taken => return Ok(taken),
            }
        }
    }

    /// One round of delivery: the event built once, delivered with retries along the route of
    /// the moment (waiting while there is none), counted.
    async fn deliver_once(&self, job: &Job<Pending>) -> Outcome {
        let route = self.route().await?;
        let settings = &self.settings;
        let make = || {
            job.item
                .event(&settings.events, settings.overrides.as_ref())
        };
        let spec = if route.dead_letter_sink == settings.delivery.dead_letter_sink {
            std::borrow::Cow::Borrowed(&settings.delivery)
        } else {
            std::borrow::Cow::Owned(DeliverySpec {
                dead_letter_sink: route.dead_letter_sink.clone(),
                ..settings.delivery.clone()
            })
        };
        let client = match (&route.auth, route.error_bodies) {
            (None, true) => std::borrow::Cow::Borrowed(&*self.sink),
            _ => std::borrow::Cow::Owned(
                self.sink
                    .with_oidc(route.auth.clone())
                    .with_error_bodies(route.error_bodies),
            ),
        };
        let outcome = deliver::deliver(
            &client,
            &route.sink,
            &make,
            settings.content_mode,
            &spec,
            &self.stop,
        )
        .await;
        if let Ok(delivered) = &outcome {
            count(&self.metrics, &route.sink, &job.item, delivered, job.seen);
            if let Some(tally) = &self.tally {
                tally(delivered);
            }
        }
        outcome
    }

    /// The route now; waits while there is none (the sink does not resolve).
    async fn route(&self) -> Result<Route, Stopped> {
        let mut routes = self.routes.clone();
        tokio::select! {
            () = self.stop.cancelled() => Err(Stopped),
            route = routes.wait_for(Option::is_some) => match route {
                Ok(route) => route.clone().ok_or(Stopped),
                Err(_) => Err(Stopped),
            },
        }
    }
}

/// One held event in `imagegate_source_events_held`, for as long as it lives.
struct HeldGauge(prometheus_client::metrics::gauge::Gauge);

impl HeldGauge {
    fn new(gauge: &prometheus_client::metrics::gauge::Gauge) -> Self {
        gauge.inc();
        Self(gauge.clone())
    }
}

impl Drop for HeldGauge {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// Counts a delivery's end in the metrics; logs what did not reach the sink.
fn count(
    metrics: &Metrics,
    sink: &reqwest::Url,
    item: &Pending,
    delivered: &Delivered,
    seen: Instant,
) {
    let ty = Metrics::of(item.ty());
    let failed_attempts = match delivered {
        Delivered::Sink { attempts } => {
            metrics.sent.get_or_create(&ty).inc();
            metrics.latency.observe(seen.elapsed().as_secs_f64());
            attempts - 1
        }
        Delivered::DeadLettered { attempts, .. } => {
            metrics.dead_lettered.get_or_create(&ty).inc();
            warn!(event_id = %item.id(), sink = %sink, "event sent to the dead-letter sink");
            *attempts
        }
        Delivered::Failed { error, attempts } => {
            metrics.failed.get_or_create(&ty).inc();
            error!(event_id = %item.id(), sink = %sink, error = %error, "the sink refused an event and no dead-letter sink took it; holding it and sending it again");
            *attempts
        }
    };
    if failed_attempts > 0 {
        metrics
            .attempts_failed
            .get_or_create(&ty)
            .inc_by(u64::from(failed_attempts));
    }
}
