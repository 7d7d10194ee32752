//! `imagegate controller`: a Tekton custom-task controller for `imagegate.dev/v1alpha1
//! ImagePromotion`. One module per step of a run, in the order the data flows:
//!
//! CustomRun -> [`reconcile`] (Tekton's fixed order; it only hands off) -> [`params`] (pure:
//! what the run asks, over its [`crd`] spec, the checks parsed) -> [`promote`] (the one
//! ImageStream write: read, [`decide`] (pure, one function per action, with the candidate's
//! [`checks`]), write conditionally, read again on a conflict) -> [`status`] (pure: conditions
//! and results), written by [`report`] with a Kubernetes Event.
//!
//! [`error`] names what failed and [`metrics`] counts it. [`run`] reconciles CustomRuns inside
//! the shared [`crate::runtime`] (admin server, leader election, shutdown).

pub mod checks;
pub mod crd;
pub mod decide;
pub mod error;
pub mod metrics;
pub mod params;
pub mod promote;
pub mod reconcile;
pub mod report;
pub mod status;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use backon::{ExponentialBuilder, Retryable};
use futures::StreamExt;
use kube::api::Api;
use kube::runtime::controller::{Action as Requeue, Config as ControllerConfig, Controller};
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::watcher;
use kube::{Client, ResourceExt};
use prometheus_client::registry::Registry;
use tokio_util::sync::CancellationToken;
use tracing::warn;

use crate::admin::Health;
use crate::api::CustomRun;
use crate::leader::LeaderConfig;
use crate::runtime::{self, Runtime};

use self::error::Error;
use self::metrics::{ErrorLabels, Metrics};
use self::reconcile::{Clock, Context};

/// How the controller runs.
#[derive(Clone, Debug)]
pub struct Settings {
    /// Where `/livez`, `/readyz` and `/metrics` are served.
    pub admin_addr: std::net::SocketAddr,
    /// Reconcile at most this many CustomRuns at once.
    pub concurrency: u16,
    /// Lead through a Lease before reconciling (for more than one replica).
    pub leader: Option<LeaderConfig>,
}

/// Per-run retry backoff of the error policy: 0.5 s doubling to 60 s, reset by a success.
#[derive(Default)]
struct Backoff(Mutex<HashMap<String, u32>>);

impl Backoff {
    fn next(&self, key: &str) -> Duration {
        let mut m = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let n = m.entry(key.to_string()).or_insert(0);
        *n = (*n + 1).min(8);
        Duration::from_millis((500u64 << (*n - 1)).min(60_000))
    }

    fn reset(&self, key: &str) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).remove(key);
    }
}

struct Shared {
    ctx: Arc<Context>,
    backoff: Backoff,
}

fn key(run: &CustomRun) -> String {
    format!("{}/{}", run.namespace().unwrap_or_default(), run.name_any())
}

fn error_policy(run: Arc<CustomRun>, error: &Error, shared: Arc<Shared>) -> Requeue {
    shared
        .ctx
        .metrics
        .reconcile_errors
        .get_or_create(&ErrorLabels { kind: error.kind() })
        .inc();
    let mut delay = shared.backoff.next(&key(&run));
    // Never sleep past the attempt's timeout: it must be reported when it happens.
    if let Ok(Some(deadline)) = reconcile::deadline(&run) {
        let left = deadline.as_second() - (shared.ctx.clock)().as_second();
        delay = delay.min(Duration::from_secs(left.max(0) as u64 + 1));
    }
    warn!(
        namespace = %run.namespace().unwrap_or_default(),
        customrun = %run.name_any(),
        error = %error,
        retry_in = ?delay,
        "reconcile failed; retrying"
    );
    Requeue::requeue(delay)
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
            reconcile_runs(client, settings.concurrency, metrics, clock, health, stop).await;
            Ok(())
        })
        .await
}

/// Reconciles CustomRuns until `stop` is cancelled.
async fn reconcile_runs(
    client: Client,
    concurrency: u16,
    metrics: Metrics,
    clock: Clock,
    health: Arc<Health>,
    stop: CancellationToken,
) {
    let reporter = Reporter {
        controller: "imagegate-controller".into(),
        instance: std::env::var("POD_NAME").ok(),
    };
    let ctx = Arc::new(Context {
        client: client.clone(),
        recorder: Recorder::new(client.clone(), reporter),
        metrics,
        clock,
        last_written: Default::default(),
    });
    let shared = Arc::new(Shared {
        ctx,
        backoff: Backoff::default(),
    });
    let runs: Api<CustomRun> = Api::all(client.clone());
    let controller = Controller::new(runs, watcher::Config::default())
        .with_config(ControllerConfig::default().concurrency(concurrency));
    tokio::spawn(ready_once_listed(Api::all(client), health));
    controller
        .graceful_shutdown_on(stop.cancelled_owned())
        .run(
            |run, shared: Arc<Shared>| async move {
                let k = key(&run);
                let result = reconcile::reconcile(run, shared.ctx.clone()).await;
                if result.is_ok() {
                    shared.backoff.reset(&k);
                }
                result
            },
            error_policy,
            shared,
        )
        .for_each(|_| futures::future::ready(()))
        .await;
}

/// Marks the controller ready once CustomRuns can be listed (the API is reachable and RBAC
/// allows the watch), retrying from 200 ms up to every 10 s.
async fn ready_once_listed(runs: Api<CustomRun>, health: Arc<Health>) {
    let one = kube::api::ListParams::default().limit(1);
    let list = || runs.list_metadata(&one);
    let backoff = ExponentialBuilder::new()
        .with_min_delay(Duration::from_millis(200))
        .with_max_delay(Duration::from_secs(10))
        .with_factor(2.0)
        .without_max_times();
    let listed = list
        .retry(backoff)
        .notify(|e, _| health.set_not_ready(format!("cannot list CustomRuns: {e}")))
        .await;
    if listed.is_ok() {
        health.set_ready(true);
    }
}
