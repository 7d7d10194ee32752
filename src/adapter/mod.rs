//! `imagegate source --multi-tenant`: one process serving every ImageStreamSource of the
//! cluster, as Knative's multi-tenant PingSource adapter serves every PingSource. The custom
//! resource is [`crd`]; a source's status is [`reconcile`]d from its sink ([`sink`], resolved as
//! Knative resolves an addressable) and its service account's [`permissions`]. Each source runs
//! the single source's flow ([`crate::source`]).
//!
//! [`supervisor`] follows the sources and Namespaces and runs the rest: [`observe`] (the
//! status reconcile: sink, namespaces, permissions) -> [`index`] (what each source is served,
//! which feeds run, pure) -> [`feed`] (one ImageStream watch of every namespace, its changes
//! fanned out by namespace) -> [`join`] (each source's own lists of its namespaces, then the
//! feed's newer changes) -> [`filter`] (each source's `selector`, pure) -> [`pipeline`] (each
//! source's own checkpoint, tracker, queue and delivery: the single source's flow) ->
//! [`counters`] (`status.deliveries`). [`sinkrefs`] (which source references which sink object,
//! pure) and [`sinkwatch`] (one watch per sink kind in use) re-observe a source when its sink
//! object changes address. [`cleanup`] deletes the checkpoints of deleted
//! sources; [`settings`] turns a source's spec into its flow's settings; [`backlog`] sums the
//! sources' queue and checkpoint gauges into the process's ([`metrics`]).

pub mod backlog;
pub mod cleanup;
pub mod counters;
pub mod crd;
pub mod feed;
pub mod filter;
pub mod index;
pub mod join;
pub mod metrics;
pub mod observe;
pub mod permissions;
pub mod pipeline;
pub mod rbacwatch;
pub mod reconcile;
pub mod settings;
pub mod sink;
pub mod sinkrefs;
pub mod sinkwatch;
pub mod supervisor;

use prometheus_client::registry::Registry;

use crate::adapter::reconcile::Context;
use crate::runtime::admin::Health;
use crate::runtime::leader::LeaderConfig;
use crate::runtime::{self, Runtime};
use crate::source::metrics::Metrics;

use self::metrics::MtMetrics;

/// What the adapter runs with.
#[derive(Clone, Debug)]
pub(crate) struct MtSettings {
    /// Where `/livez`, `/readyz`, `/metrics` are served.
    pub admin_addr: std::net::SocketAddr,
    /// Leader election, when on.
    pub leader: Option<LeaderConfig>,
    /// The cluster domain of core Services' URLs.
    pub cluster_domain: String,
    /// What every source shares: the events' schema base, the API server's URL.
    pub shared: settings::Shared,
    /// The adapter's own ServiceAccount, whose tokens go to a sink with an audience (None:
    /// none is sent, and such a sink refuses the events: they are held).
    pub identity: Option<std::sync::Arc<crate::source::deliver::oidc::Identity>>,
}

/// Serves every ImageStreamSource until `shutdown` resolves, or until leadership is lost (an
/// error, so that the process restarts as a standby).
pub(crate) async fn run(
    client: kube::Client,
    settings: MtSettings,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let mut registry = Registry::default();
    let metrics = Metrics::register(&mut registry);
    let mt = MtMetrics::register(&mut registry);
    let health = Health::new();
    let wiring = runtime::Settings {
        admin_addr: settings.admin_addr,
        leader: settings.leader.clone(),
        until_ready: "the ImageStreamSources have not been listed yet",
    };
    let runtime =
        Runtime::start(client.clone(), wiring, registry, health.clone(), shutdown).await?;
    let mut settings = settings;
    settings.shared.fence = runtime.fence();
    runtime
        .run(|stop| async move {
            let ctx = Context {
                client,
                cluster_domain: settings.cluster_domain,
                api_server_url: settings.shared.api_server_url.clone(),
                identity: settings.identity,
                guard: (*settings.shared.guard).clone(),
            };
            let reports = supervisor::Reports {
                metrics,
                mt,
                health,
            };
            supervisor::run(ctx, settings.shared, reports, stop).await;
            Ok::<_, anyhow::Error>(())
        })
        .await
}
