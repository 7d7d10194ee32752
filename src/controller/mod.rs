//! `imagegate controller`: a Tekton custom-task controller for `imagegate.dev/v1alpha1
//! ImagePromotion`. One module per step of a run, in the order the data flows:
//!
//! CustomRun -> [`reconcile`] (Tekton's fixed order; it only hands off) -> [`params`] (pure:
//! what the run asks, over its [`crd`] spec, the checks parsed) -> [`policy`] (pure: judged by
//! every ImagePromotion that governs the stream, whatever the run names) -> [`authorize`] (may
//! the run's service account promote through each of them: SubjectAccessReviews) -> [`promote`] (the one
//! ImageStream write: read, [`decide`] (pure, one function per action, with the candidate's
//! [`checks`] and the [`proof`] of validation), write conditionally, read again on a
//! conflict) -> [`status`] (pure: conditions and results), written by [`report`] with a
//! Kubernetes Event.
//!
//! [`error`] names what failed and requeues the run, [`metrics`] counts, and [`runs`] is what
//! the controller remembers per run (bounded; [`watch`] forgets deleted runs). [`run`]
//! reconciles CustomRuns inside the shared [`crate::runtime`] (admin server, leader election,
//! shutdown), after the [`preflight`] checks of the APIs it needs. Beside the runs, [`drift`]
//! watches the adopted ImageStreams for a lost candidate tag, and [`tamper`] every ImageStream for
//! a tag the gate served that someone else moved.

pub mod authorize;
pub mod checks;
pub mod context;
pub mod crd;
pub mod deadline;
pub mod decide;
pub mod drift;
pub mod dsse;
pub mod error;
pub mod fair;
pub mod keys;
pub mod ledger;
pub mod metrics;
pub mod params;
pub mod policy;
pub mod preflight;
pub mod promote;
pub mod proof;
pub mod reconcile;
pub mod report;
pub mod runs;
pub mod signature;
pub mod status;
pub mod tamper;
pub mod verdict;
pub mod watch;

use std::sync::Arc;
use std::time::Duration;

use backon::{ExponentialBuilder, Retryable};
use futures::StreamExt;
use kube::Client;
use kube::api::Api;
use kube::runtime::controller::{Config as ControllerConfig, Controller};
use kube::runtime::events::{Recorder, Reporter};
use prometheus_client::registry::Registry;
use tokio_util::sync::CancellationToken;

use crate::api::CustomRun;
use crate::runtime::admin::Health;
use crate::runtime::leader::LeaderConfig;
use crate::runtime::watch_errors::Refusals;
use crate::runtime::{self, Runtime};

use self::context::{Clock, Context};
use self::metrics::Metrics;
use self::runs::RunStates;

/// How the controller runs.
#[derive(Clone, Debug)]
pub struct Settings {
    /// Where `/livez`, `/readyz` and `/metrics` are served.
    pub admin_addr: std::net::SocketAddr,
    /// Reconcile at most this many CustomRuns at once.
    pub concurrency: u16,
    /// Reconcile only the runs of these namespaces, one watch each (empty: all namespaces).
    pub namespaces: Vec<String>,
    /// Lead through a Lease before reconciling (for more than one replica).
    pub leader: Option<LeaderConfig>,
    /// How often the adopted ImageStreams are checked for drift ([`drift`]); `None`: never.
    pub drift_interval: Option<Duration>,
    /// How long a governed stream's candidate may wait for its validation to begin (and a
    /// validation may show no verdict after its run ended) before the [`ledger`] pages.
    pub verdict_grace: Duration,
    /// The Secret (namespace, name) of the run key the [`ledger`] names its re-drives with
    /// ([`crate::runkey`]; made by `imagegate interceptor`).
    pub run_key: (String, String),
    /// Where verdicts are sent as CloudEvents ([`verdict`]); None: nowhere.
    pub verdicts: Option<verdict::Settings>,
}

/// Runs the controller until `shutdown` resolves (or leadership is lost, which is an error so
/// that the process restarts as a standby, as client-go's leader election does).
pub async fn run(
    client: Client,
    settings: Settings,
    clock: Clock,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let mut registry = Registry::default();
    let metrics = Metrics::register(&mut registry);
    let drift_metrics = drift::DriftMetrics::register(&mut registry);
    let tamper_metrics = tamper::TamperMetrics::register(&mut registry);
    let ledger_metrics = ledger::LedgerMetrics::register(&mut registry);
    // Verdicts are sent while this process leads (the token is cancelled when it stops).
    let verdict_stop = CancellationToken::new();
    let verdict_metrics = verdict::VerdictMetrics::register(&mut registry);
    let verdicts = match settings.verdicts.clone() {
        Some(s) => Some(verdict::Verdicts::new(
            client.clone(),
            s,
            verdict_metrics,
            verdict_stop.clone(),
        )?),
        None => None,
    };
    let health = Health::new();
    let wiring = runtime::Settings {
        admin_addr: settings.admin_addr,
        leader: settings.leader.clone(),
        until_ready: "the CustomRun watch has not listed yet",
    };
    let runtime =
        Runtime::start(client.clone(), wiring, registry, health.clone(), shutdown).await?;
    runtime
        .run(|stop| async move {
            tokio::spawn({
                let stop = stop.clone();
                async move {
                    stop.cancelled().await;
                    verdict_stop.cancel();
                }
            });
            if let Some(interval) = settings.drift_interval {
                let recorder = Recorder::new(client.clone(), reporter());
                let (namespaces, stop) = (settings.namespaces.clone(), stop.clone());
                tokio::spawn(drift::watch(
                    client.clone(),
                    namespaces,
                    interval,
                    drift_metrics,
                    recorder,
                    stop,
                ));
            }
            // Only the gate moves a tag it served: noticed, reported or put back.
            tokio::spawn(tamper::watch(
                client.clone(),
                settings.namespaces.clone(),
                tamper_metrics,
                Recorder::new(client.clone(), reporter()),
                verdicts.clone(),
                stop.clone(),
            ));
            // Every candidate of a governed stream reaches a verdict, or someone is paged.
            tokio::spawn(ledger::watch(
                client.clone(),
                settings.namespaces.clone(),
                settings.verdict_grace,
                settings.run_key.clone(),
                ledger::Outputs {
                    metrics: ledger_metrics,
                    recorder: Recorder::new(client.clone(), reporter()),
                    verdicts: verdicts.clone(),
                },
                stop.clone(),
            ));
            let scopes = Scopes {
                namespaces: settings.namespaces,
                concurrency: settings.concurrency,
                own_namespace: settings.run_key.0,
            };
            reconcile_runs(client, scopes, metrics, clock, health, verdicts, stop).await?;
            Ok(())
        })
        .await
}

/// Who publishes the controller's Events.
fn reporter() -> Reporter {
    Reporter {
        controller: "imagegate-controller".into(),
        instance: std::env::var("POD_NAME").ok(),
    }
}

/// Where runs are watched, and how many are reconciled at once across all of them.
struct Scopes {
    namespaces: Vec<String>,
    concurrency: u16,
    /// The controller's own namespace (trusted keys are read there).
    own_namespace: String,
}

impl Scopes {
    /// The CustomRun APIs to watch: all namespaces, or each namespace given.
    fn apis(&self, client: &Client) -> Vec<(Option<String>, Api<CustomRun>)> {
        if self.namespaces.is_empty() {
            return vec![(None, Api::all(client.clone()))];
        }
        self.namespaces
            .iter()
            .map(|ns| (Some(ns.clone()), Api::namespaced(client.clone(), ns)))
            .collect()
    }
}

/// Reconciles CustomRuns until `stop` is cancelled: one kube-runtime Controller per watched
/// scope (a reflector's store holds one list, so scopes cannot share one), all of them together
/// reconciling at most `concurrency` runs at once. A permanent refusal found by the
/// [`preflight`] checks ends it first.
async fn reconcile_runs(
    client: Client,
    scopes: Scopes,
    metrics: Metrics,
    clock: Clock,
    health: Arc<Health>,
    verdicts: Option<verdict::Verdicts>,
    stop: CancellationToken,
) -> Result<(), preflight::PreflightError> {
    let ctx = Arc::new(Context {
        client: client.clone(),
        recorder: Recorder::new(client.clone(), reporter()),
        metrics,
        clock,
        runs: Arc::new(RunStates::default()),
        verdicts,
        own_namespace: scopes.own_namespace.clone(),
    });
    let apis = scopes.apis(&client);
    preflight::check(&client, &apis).await?;
    let refusals = Refusals::new(health.clone(), "CustomRun");
    tokio::spawn(ready_once_listed(apis.clone(), health));
    let slots = Arc::new(fair::FairSlots::new(usize::from(scopes.concurrency)));
    let controllers = apis.into_iter().map(|(namespace, api)| {
        let reporting = watch::Reporting {
            namespace,
            refusals: refusals.clone(),
            restarts: ctx.metrics.watch_restarts.clone(),
        };
        let (store, runs) = watch::customruns(api, ctx.runs.clone(), reporting);
        let slots = slots.clone();
        let reconcile = move |run: Arc<crate::api::CustomRun>, ctx| {
            let slots = slots.clone();
            async move {
                // The watch hands on only this task's runs (`watch::ours`); should another
                // task's come here all the same, it is left at once, taking no slot. The
                // reconcile is boxed: kube-runtime holds every pending run's future (F-10).
                if !params::is_ours(&run) {
                    return Ok(kube::runtime::controller::Action::await_change());
                }
                let namespace = run.metadata.namespace.clone().unwrap_or_default();
                let _slot = slots.acquire(&namespace).await;
                Box::pin(reconcile::reconcile(run, ctx)).await
            }
        };
        // The fair slots limit the reconciles; kube-runtime's own limit would count the runs
        // waiting for their namespace's share too, and let them hold up the others.
        Controller::for_stream(runs, store)
            .with_config(ControllerConfig::default().concurrency(0))
            .graceful_shutdown_on(stop.clone().cancelled_owned())
            .run(reconcile, error::error_policy, ctx.clone())
            .for_each(|_| futures::future::ready(()))
    });
    futures::future::join_all(controllers).await;
    Ok(())
}

/// Marks the controller ready once CustomRuns can be listed in every watched scope (the API is
/// reachable and RBAC allows the watch), retrying each from 200 ms up to every 10 s.
async fn ready_once_listed(scopes: Vec<(Option<String>, Api<CustomRun>)>, health: Arc<Health>) {
    let one = kube::api::ListParams::default().limit(1);
    for (namespace, runs) in &scopes {
        let list = || runs.list_metadata(&one);
        let backoff = ExponentialBuilder::new()
            .with_min_delay(Duration::from_millis(200))
            .with_max_delay(Duration::from_secs(10))
            .with_factor(2.0)
            .without_max_times();
        let listed = list
            .retry(backoff)
            .notify(|e, _| {
                // `/readyz` names the failure, never the API server's message (the log has it).
                let code = crate::api::status_code(e)
                    .map_or("no answer".to_string(), |c| c.to_string());
                tracing::warn!(namespace = namespace.as_deref().unwrap_or(""), error = %e, "cannot list CustomRuns; retrying");
                let reason = match namespace {
                    None => format!("cannot list CustomRuns ({code})"),
                    Some(ns) => format!("cannot list CustomRuns in namespace {ns:?} ({code})"),
                };
                health.set_not_ready(reason)
            })
            .await;
        if listed.is_err() {
            return;
        }
    }
    health.set_ready(true);
}
