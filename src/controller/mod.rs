//! `imagegate controller`: a Tekton custom-task controller for `imagegate.dev/v1alpha1
//! ImagePromotion`. It reads the data in one direction:
//!
//! CustomRun -> [`params`] (pure: what the run asks, with its [`crd`] spec) -> [`decide`]
//! (pure: over the ImageStream and the candidate's [`checks`]) -> the one write of the served
//! tag -> [`status`] (pure: conditions and results in one write). [`reconcile`] does the I/O
//! in Tekton's fixed order; [`metrics`] counts it. [`run`] wires the watch, leader election
//! and the admin server.

pub mod checks;
pub mod crd;
pub mod decide;
pub mod metrics;
pub mod params;
pub mod reconcile;
pub mod status;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use kube::api::Api;
use kube::runtime::controller::{Action as Requeue, Config as ControllerConfig, Controller};
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::watcher;
use kube::{Client, ResourceExt};
use prometheus_client::registry::Registry;
use tracing::{info, warn};

use crate::admin::{self, Health};
use crate::api::CustomRun;
use crate::leader::{self, LeaderConfig};

use self::metrics::{ErrorLabels, Metrics};
use self::reconcile::{Clock, Context, Error};

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
    health.set_not_ready("the CustomRun watch has not listed yet");
    let listener = tokio::net::TcpListener::bind(settings.admin_addr).await?;
    info!(addr = %listener.local_addr()?, "admin server listening");
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let stopped = {
        let mut rx = stop_rx.clone();
        async move {
            let _ = rx.wait_for(|s| *s).await;
        }
    };
    let admin_task = tokio::spawn(admin::serve(
        listener,
        admin::router(health.clone(), Arc::new(registry)),
        stopped,
    ));
    tokio::spawn({
        let stop_tx = stop_tx.clone();
        async move {
            shutdown.await;
            let _ = stop_tx.send(true);
        }
    });

    let mut leading = None;
    let mut election = None;
    if let Some(cfg) = settings.leader.clone() {
        let mut rx = stop_rx.clone();
        let (is_leader, task) = leader::spawn(client.clone(), cfg.clone(), async move {
            let _ = rx.wait_for(|s| *s).await;
        });
        election = Some(task);
        let mut waiting = is_leader.clone();
        info!(lease = %cfg.lease_name, identity = %cfg.identity, "waiting to lead");
        health.set_ready(true);
        let mut stop = stop_rx.clone();
        tokio::select! {
            _ = crate::leader::until(&mut waiting, true) => info!(lease = %cfg.lease_name, "leading"),
            _ = crate::leader::until(&mut stop, true) => {
                if let Some(task) = election {
                    let _ = task.await;
                }
                let _ = admin_task.await;
                return Ok(());
            }
        }
        health.set_not_ready("the CustomRun watch has not listed yet");
        leading = Some(is_leader);
    }

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
        .with_config(ControllerConfig::default().concurrency(settings.concurrency));
    // Ready once CustomRuns can be listed (the API is reachable and RBAC allows the watch).
    tokio::spawn({
        let health = health.clone();
        let runs: Api<CustomRun> = Api::all(client.clone());
        async move {
            let mut delay = Duration::from_millis(200);
            loop {
                match runs
                    .list_metadata(&kube::api::ListParams::default().limit(1))
                    .await
                {
                    Ok(_) => {
                        health.set_ready(true);
                        return;
                    }
                    Err(e) => {
                        health.set_not_ready(format!("cannot list CustomRuns: {e}"));
                        tokio::time::sleep(delay).await;
                        delay = (delay * 2).min(Duration::from_secs(10));
                    }
                }
            }
        }
    });
    let mut stop = stop_rx.clone();
    let lost = async move {
        match leading {
            Some(mut l) => {
                let _ = l.wait_for(|l| !*l).await;
            }
            None => std::future::pending::<()>().await,
        }
    };
    let (lost_tx, mut lost_rx) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(async move {
        lost.await;
        let _ = lost_tx.send(());
    });
    let graceful = async move {
        tokio::select! {
            _ = crate::leader::until(&mut stop, true) => {},
            _ = &mut lost_rx => {},
        }
    };
    let backoff_shared = shared.clone();
    controller
        .graceful_shutdown_on(graceful)
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
    drop(backoff_shared);
    let lost_leadership = !*stop_rx.borrow();
    let _ = stop_tx.send(true);
    // Let the election release the Lease, so that a standby takes over at once.
    if let Some(task) = election {
        let _ = task.await;
    }
    info!("stopped");
    let _ = admin_task.await;
    if lost_leadership && settings.leader.is_some() {
        anyhow::bail!("lost the leader lease; exiting so that a standby takes over");
    }
    Ok(())
}
