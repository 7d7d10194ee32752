//! `imagegate receiver`: a registry's push notification starts validation in seconds instead
//! of at the next scheduled import (OpenShift's every 15 minutes at most). A notification is a
//! nudge, never trusted for the digest: it names a repository and tag; the receiver finds the
//! governed candidate tags whose `from` names them and asks the API server to import each now
//! (an ImageStreamImport, as `oc import-image` and `imagegate import` do), and the API server
//! reads the registry. The source then reports the new candidate like any import.
//!
//! Its own program, ServiceAccount and Deployment (`config/receiver/`), not part of the source
//! or the controller: it is the one imagegate endpoint reachable from outside the cluster, so it
//! holds only what a nudge needs (read ImagePromotions and ImageStreams, create
//! ImageStreamImports), no promote right and no sink. The data flows one way:
//!
//! request -> [`auth`] (the sender's secret) -> [`wire`] (the pushes it names) -> [`nudge`]
//! (queued; the governed tags they concern, [`targets`], pure; each imported, rate-limited) ->
//! counted by [`metrics`]. [`serve`] holds the endpoints.
//!
//! Stateless: a push queued when the process stops is left to the scheduled import, which the
//! receiver only brings forward.

pub(crate) mod auth;
pub mod metrics;
pub(crate) mod nudge;
pub mod serve;
pub(crate) mod targets;
pub(crate) mod wire;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context as _;
use prometheus_client::registry::Registry;
use tracing::info;

use crate::runtime::admin::Health;
use crate::runtime::{self, Runtime};

/// How the receiver runs.
#[derive(Debug)]
pub(crate) struct Settings {
    /// Where `/livez`, `/readyz` and `/metrics` are served.
    pub(crate) admin_addr: SocketAddr,
    /// Where notifications are served (plain http).
    pub(crate) addr: SocketAddr,
    /// The senders served (names of [`serve::SENDERS`]) and their secrets.
    pub(crate) senders: Vec<(&'static str, auth::Secret)>,
    /// How pushes become imports.
    pub(crate) nudge: nudge::Settings,
}

/// Runs the receiver until `shutdown` resolves.
pub(crate) async fn run(
    client: kube::Client,
    settings: Settings,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    crate::runtime::tls::install_crypto_provider();
    let mut registry = Registry::default();
    let senders: Vec<&'static str> = settings.senders.iter().map(|(s, _)| *s).collect();
    let metrics = metrics::Metrics::register(&mut registry, &senders);
    let health = Health::new();
    let rt = Runtime::start(
        client.clone(),
        runtime::Settings {
            admin_addr: settings.admin_addr,
            leader: None,
            until_ready: "listening for notifications",
        },
        registry,
        health.clone(),
        shutdown,
    )
    .await
    .with_context(|| format!("cannot serve the admin routes on {}", settings.admin_addr))?;
    rt.run(|token| async move {
        let listener = tokio::net::TcpListener::bind(settings.addr)
            .await
            .with_context(|| format!("cannot listen on {}", settings.addr))?;
        info!(addr = %listener.local_addr()?, senders = ?senders, "serving push notifications over http");
        let (queue, pushes) = nudge::Queue::new();
        let worker = tokio::spawn(nudge::run(
            client,
            settings.nudge.clone(),
            metrics.clone(),
            pushes,
            token.clone(),
        ));
        let ctx = Arc::new(serve::Context {
            senders: settings.senders,
            queue,
            metrics,
        });
        health.set_ready(true);
        serve::serve(listener, serve::router(ctx), token.cancelled_owned()).await;
        worker.abort();
        anyhow::Ok(())
    })
    .await
}
