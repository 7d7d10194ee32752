//! What the source runs with: [`Settings`] (built from the command line and the environment, or
//! by the multi-tenant adapter from a source's spec) and the [`Mode`] it sends in. Its own module,
//! so that the steps import it downwards, from here, not from the source's root.

use std::time::Duration;

use serde_json::Value;

use super::checkpoint::CheckpointConfig;
use super::deliver::{self, ContentMode, DeliverySpec};
use super::event::EventSettings;
use super::state::TagFilter;
use crate::runtime::leader::LeaderConfig;

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
