//! `imagegate source`: ImageStream tag changes as CloudEvents, delivered without loss.
//!
//! The data flows one way, one module per step:
//! [`watch`] (list and watch ImageStreams, decoded leniently) -> [`state`] (what receivers have
//! been told, and the one rule that moves it) -> [`diff`] (pure: state against state, per
//! tag) -> [`tracker`] (what to send for each stream seen) -> [`event`] (pure: one CloudEvent
//! per [`change::TagChange`]) -> [`queue`] (per-tag order, many tags in flight) -> [`deliver`]
//! (retries, backoff, dead-letter sink) -> [`ack`] (the delivered state) -> [`checkpoint`]
//! (persisted in the cluster). [`apiserver`] holds the modes that send what Knative's
//! ApiServerSource sends. [`flow`] wires the steps; [`run`] adds leader election, the admin
//! server and shutdown. The ImageStreamSource custom resource, a source a team `kubectl apply`s,
//! and the multi-tenant adapter that runs this flow for each of them are [`crate::adapter`].

pub mod ack;
pub mod apiserver;
pub mod change;
pub mod checkpoint;
pub mod deliver;
pub mod diff;
pub mod event;
pub mod flow;
pub mod metrics;
pub mod pending;
pub mod preflight;
pub mod queue;
pub mod settings;
pub mod state;
pub mod tracker;
pub mod watch;

use std::sync::Arc;

use prometheus_client::registry::Registry;
use tokio_util::sync::CancellationToken;
use tracing::info;

use crate::runtime::admin::Health;
use crate::runtime::watch_errors::Refusals;
use crate::runtime::{self, Runtime};

use self::checkpoint::Checkpoint;
use self::metrics::Metrics;

pub use self::settings::{Mode, Settings};

/// Runs the source until `shutdown` resolves, or until leadership is lost (an error, so that
/// the process restarts as a standby).
pub(crate) async fn run(
    client: kube::Client,
    settings: Settings,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    run_with_listed(
        client,
        settings,
        shutdown,
        tokio::sync::watch::channel(false).0,
    )
    .await
}

/// [`run`], telling `listed` once the first list of every watch scope is recorded: from then on
/// the source is watching, and every change is delivered. What a program that embeds the
/// source (the demo) waits for, instead of polling `/readyz`.
pub async fn run_with_listed(
    client: kube::Client,
    settings: Settings,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    listed: tokio::sync::watch::Sender<bool>,
) -> anyhow::Result<()> {
    let mut registry = Registry::default();
    let metrics = Metrics::register(&mut registry);
    let health = Health::new();
    let wiring = runtime::Settings {
        admin_addr: settings.admin_addr,
        leader: settings.leader.clone(),
        until_ready: "the ImageStreams have not been listed yet",
    };
    let runtime =
        Runtime::start(client.clone(), wiring, registry, health.clone(), shutdown).await?;
    let fence = runtime.fence();
    runtime
        .run(|stop| async move {
            let scopes = watch::scopes(&settings.namespaces);
            preflight::check(&client, &scopes, settings.selector.as_deref()).await?;
            let (mut checkpoint, loaded) =
                Checkpoint::load(client.clone(), settings.checkpoint.clone()).await?;
            checkpoint.set_fence(fence);
            checkpoint.probe().await?;
            let checkpoint = Arc::new(checkpoint);
            if loaded.first_start {
                info!("no checkpoint: first start");
            }
            health.set_condition("checkpoint", checkpoint.not_ready());
            // The flusher has its own token, cancelled once the flow and its acknowledgements
            // are done: its last flush then holds everything acknowledged, and a flow that
            // failed before its first list flushes nothing.
            let flushed = CancellationToken::new();
            let flusher = tokio::spawn(checkpoint.clone().run_once_listed(
                listed.subscribe(),
                metrics.clone(),
                health.clone(),
                flushed.clone(),
                || (),
            ));
            let settings = Arc::new(settings);
            let reports = flow::Reports {
                metrics,
                refusals: Refusals::new(health.clone(), "ImageStream"),
            };
            let flowed =
                flow::run(client, settings, checkpoint, loaded, reports, listed, stop).await;
            flushed.cancel();
            let _ = flusher.await;
            flowed
        })
        .await
}
