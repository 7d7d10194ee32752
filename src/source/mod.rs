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
pub mod state;
pub mod tracker;
pub mod watch;

use std::sync::Arc;
use std::time::Duration;

use prometheus_client::registry::Registry;
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use tracing::info;

use crate::runtime::admin::Health;
use crate::runtime::leader::LeaderConfig;
use crate::runtime::watch_errors::Refusals;
use crate::runtime::{self, Runtime};

use self::checkpoint::{Checkpoint, CheckpointConfig};
use self::deliver::{ContentMode, DeliverySpec};
use self::event::EventSettings;
use self::metrics::Metrics;
use self::state::TagFilter;

// One enum for `--mode`, the ImageStreamSource's `spec.mode` (its doc is the CRD's
// description) and the flow.
/// What a source sends (the `--mode` of `imagegate source`).
#[derive(serde::Serialize, serde::Deserialize, schemars::JsonSchema, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Mode {
    /// One `dev.imagegate.imagestreamtag.*` event per tag change.
    #[default]
    #[serde(rename = "imagestreamtag")]
    #[value(name = "imagestreamtag")]
    ImageStreamTag,
    /// ApiServerSource's `dev.knative.apiserver.resource.*`, the ImageStream as data.
    Resource,
    /// ApiServerSource's `dev.knative.apiserver.ref.*`, an ObjectReference as data.
    Reference,
}

/// Everything the source runs with (built from the command line and the environment).
#[derive(Clone, Debug)]
pub struct Settings {
    /// The sink.
    pub sink: reqwest::Url,
    /// `K_CE_OVERRIDES`, parsed.
    pub overrides: Option<Value>,
    /// `K_CA_CERTS`.
    pub ca_pem: Option<String>,
    /// `K_SINK_TIMEOUT`.
    pub sink_timeout: Option<Duration>,
    /// The tokens sent to the sink when it has an audience (`K_AUDIENCE`).
    pub oidc: Option<std::sync::Arc<deliver::oidc::Oidc>>,
    /// Where a tenant's sink may not connect (the multi-tenant adapter's; None: anywhere, as
    /// the operator who configured the single source chose).
    pub sink_guard: Option<std::sync::Arc<deliver::guard::Guard>>,
    /// Namespaces to watch (empty: all).
    pub namespaces: Vec<String>,
    /// Label selector of the ImageStreams.
    pub selector: Option<String>,
    /// Tags to report.
    pub tags: TagFilter,
    /// What to send.
    pub mode: Mode,
    /// Binary or structured.
    pub content_mode: ContentMode,
    /// Retries, backoff, dead-letter sink.
    pub delivery: DeliverySpec,
    /// Send every existing tag on a first start.
    pub emit_existing: bool,
    /// Where `/livez`, `/readyz`, `/metrics` are served.
    pub admin_addr: std::net::SocketAddr,
    /// Where the checkpoint lives.
    pub checkpoint: CheckpointConfig,
    /// Leader election, when on.
    pub leader: Option<LeaderConfig>,
    /// `dataschema` of the events.
    pub events: EventSettings,
    /// How many tags are delivered at once.
    pub concurrency: usize,
    /// The API server's URL (the `source` of resource/reference events).
    pub api_server_url: String,
}

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
