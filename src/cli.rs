//! The command line: one clap struct per subcommand; the operator commands' are in [`ops`],
//! the checks of values that need no API server in [`values`].

pub mod adopt;
pub mod ops;
pub mod values;

use std::net::SocketAddr;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::source::Mode;
use crate::source::deliver::{BackoffPolicy, ContentMode};

/// imagegate: validate-then-promote for OpenShift ImageStreams.
#[derive(Debug, Parser)]
#[command(name = "imagegate", version, about, long_about = None)]
pub struct Cli {
    /// Log format: `human` (for a terminal) or `json` (one object per line, for log shippers).
    /// The level comes from `RUST_LOG` (default `info`).
    #[arg(long, value_enum, default_value_t = LogFormat::Human, global = true, env = "IMAGEGATE_LOG_FORMAT")]
    pub log_format: LogFormat,

    /// What to run.
    #[command(subcommand)]
    pub command: Command,
}

/// Log output format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Human,
    /// JSON lines.
    Json,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Watch ImageStreams and deliver per-tag changes as CloudEvents to a sink.
    Source(Box<SourceArgs>),
    /// Reconcile Tekton CustomRuns of kind ImagePromotion (validate-then-promote).
    Controller(ControllerArgs),
    /// Serve Tekton Triggers as a ClusterInterceptor that passes on only a governed stream's
    /// current candidate, read from the API, with the PipelineRun's keyed id.
    Interceptor(InterceptorArgs),
    /// Serve registries' push notifications: import a governed candidate tag as soon as its
    /// registry says it was pushed, instead of at the next scheduled import.
    Receiver(ReceiverArgs),
    /// Print the CustomResourceDefinitions imagegate owns, as YAML.
    Crds(CrdsArgs),
    /// Turn an existing ImageStream into the gated shape, or check adopted streams for drift.
    Adopt(adopt::AdoptArgs),
    /// The operator commands (also `kubectl imagegate ...`): status, promote, rollback, reject,
    /// import.
    #[command(flatten)]
    Ops(ops::OpsCommand),
}

/// `imagegate source`.
#[derive(Debug, Args)]
pub struct SourceArgs {
    /// Serve every ImageStreamSource of the cluster from one process (one ImageStream watch of
    /// every namespace, a checkpoint per source in its namespace) instead of one source
    /// configured by the flags below, which it refuses.
    #[arg(long, conflicts_with_all = MULTI_TENANT_CONFLICTS)]
    pub multi_tenant: bool,

    /// With `--multi-tenant`: the cluster domain of the URLs of Services named as sinks
    /// (default `cluster.local`).
    #[arg(long)]
    pub cluster_domain: Option<String>,

    /// With `--multi-tenant`: a host a tenant's sink may name although it is loopback,
    /// link-local or the API server (repeatable; exact host or IP). Without it, such a sink is
    /// refused (`SinkNotAllowed`) and no name of a sink is sent to an address of those kinds.
    #[arg(
        long = "allow-sink-host",
        value_name = "HOST",
        requires = "multi_tenant"
    )]
    pub allow_sink_hosts: Vec<String>,

    /// With `--multi-tenant`: let an ImageStreamSource's sink or dead-letter sink ref name an
    /// object in another namespace than the source's, when the source's service account may
    /// `knsubscribe` it (Knative's `cross-namespace-event-links`). Off: such a ref is refused
    /// (`SinkNotAllowed`) before anything is read.
    #[arg(long, requires = "multi_tenant")]
    pub allow_cross_namespace_sinks: bool,

    /// With `--multi-tenant`: each source's bound, in events not yet delivered. Past it the
    /// source takes no changes until its queue has drained to half, then catches up with a
    /// list of its namespaces (nothing is lost; one tenant's dead sink holds about this many
    /// events in memory, never more).
    #[arg(long, value_name = "EVENTS", default_value_t = crate::adapter::join::DEFAULT_BOUND,
          value_parser = clap::builder::TypedValueParser::map(
              clap::value_parser!(u64).range(2..=1_000_000), |n| n as usize),
          requires = "multi_tenant")]
    pub max_queued_per_source: usize,

    /// With `--multi-tenant`: the most each source's checkpoint may hold, in bytes of entries
    /// (about 160 bytes a stream; ConfigMaps: one per 256 KiB, at least 8). A source whose
    /// checkpoint is past it is not served, alone: `Ready=False`, `CheckpointTooLarge`.
    #[arg(long, value_name = "BYTES", default_value_t = 16 * 1024 * 1024,
          value_parser = clap::builder::TypedValueParser::map(
              clap::value_parser!(u64).range(65_536..=1 << 34), |n| n as usize),
          requires = "multi_tenant")]
    pub max_checkpoint_bytes_per_source: usize,

    /// The CloudEvents sink (a Tekton EventListener, a Knative Broker, any HTTP receiver).
    /// Set by a Knative SinkBinding or ContainerSource through `K_SINK`. Required, except with
    /// `--multi-tenant`.
    #[arg(long, env = "K_SINK")]
    pub sink: Option<String>,

    /// `{"extensions": {...}}` applied to every event last (Knative's `K_CE_OVERRIDES`).
    #[arg(long, env = "K_CE_OVERRIDES")]
    pub ce_overrides: Option<String>,

    /// A PEM bundle of CA certificates for an https sink (Knative's `K_CA_CERTS`).
    #[arg(long, env = "K_CA_CERTS")]
    pub ca_certs: Option<String>,

    /// The sink's OIDC audience (Knative's `K_AUDIENCE`): with it, every event carries a token
    /// of `--oidc-service-account` for that audience (`Authorization: Bearer`), requested
    /// with a TokenRequest and renewed before it expires. A Broker with Knative's
    /// `authentication-oidc` on refuses a sender without one. With `--multi-tenant`, each
    /// source's sink gives its own audience (its `status.address.audience`, or the
    /// destination's `audience`).
    #[arg(long, env = "K_AUDIENCE")]
    pub sink_audience: Option<String>,

    /// The ServiceAccount (in `POD_NAMESPACE`) whose tokens are sent to a sink with an
    /// audience (Knative's `K_OIDC_SERVICE_ACCOUNT`); config/ sets it to the pod's own.
    #[arg(long, env = "K_OIDC_SERVICE_ACCOUNT")]
    pub oidc_service_account: Option<String>,

    /// Seconds to wait for the sink's answer to one attempt (Knative's `K_SINK_TIMEOUT`;
    /// default 30: a sink that never answers is given up on and sent the event again).
    #[arg(long, env = "K_SINK_TIMEOUT", value_parser = clap::value_parser!(u64).range(1..))]
    pub sink_timeout: Option<u64>,

    /// Watch only this namespace (repeatable; default: all namespaces).
    #[arg(long = "namespace", value_name = "NS", value_parser = values::namespace)]
    pub namespaces: Vec<String>,

    /// Watch only ImageStreams matching this label selector.
    #[arg(long, value_parser = values::label_selector)]
    pub selector: Option<String>,

    /// Report only this tag (repeatable; default: all tags).
    #[arg(long = "tag", value_name = "NAME", value_parser = values::tag)]
    pub tags: Vec<String>,

    /// What to send: per-tag changes (`imagestreamtag`), or what Knative's ApiServerSource
    /// sends for ImageStreams (`resource`, `reference`).
    #[arg(long, value_enum, default_value_t = Mode::ImageStreamTag)]
    pub mode: Mode,

    /// The CloudEvents HTTP content mode.
    #[arg(long, value_enum, default_value_t = ContentMode::Binary)]
    pub content_mode: ContentMode,

    /// Attempts after the first before the dead-letter sink (Knative's `retry`); without it,
    /// a change is retried until the sink takes it, with capped backoff.
    #[arg(long)]
    pub retry: Option<u32>,

    /// Knative's `backoffPolicy`.
    #[arg(long, value_enum, default_value_t = BackoffPolicy::Exponential)]
    pub backoff_policy: BackoffPolicy,

    /// Knative's `backoffDelay`, an ISO-8601 duration.
    #[arg(long, default_value = "PT0.2S")]
    pub backoff_delay: String,

    /// Where an event goes when the sink refused it for good (Knative's `deadLetterSink`).
    #[arg(long)]
    pub dead_letter_sink: Option<String>,

    /// On a first start (no checkpoint), send an event for every existing tag instead of
    /// recording the current state silently. In modes `resource` and `reference`: an `add` for
    /// every existing stream on each start (they keep no checkpoint).
    #[arg(long)]
    pub emit_existing: bool,

    /// Where `/livez`, `/readyz` and `/metrics` are served.
    #[arg(long, env = "IMAGEGATE_ADMIN_ADDR", default_value = "0.0.0.0:8080")]
    pub admin_addr: SocketAddr,

    /// The namespace of the checkpoint ConfigMaps (the pod's own).
    #[arg(long, env = "POD_NAMESPACE", default_value = "imagegate-system")]
    pub checkpoint_namespace: String,

    /// The name prefix of the checkpoint ConfigMaps.
    #[arg(long, default_value = "imagegate-source-checkpoint")]
    pub checkpoint_prefix: String,

    /// Where the events' `dataschema` points (the JSON Schemas in `schemas/`).
    #[arg(long, default_value = "https://imagegate.dev/schemas/")]
    pub dataschema_base: String,

    #[command(flatten)]
    pub leader: LeaderArgs,
}

/// The single-source flags `--multi-tenant` refuses: each source's spec says these.
const MULTI_TENANT_CONFLICTS: [&str; 16] = [
    "sink",
    "sink_audience",
    "ce_overrides",
    "ca_certs",
    "sink_timeout",
    "namespaces",
    "selector",
    "tags",
    "mode",
    "content_mode",
    "retry",
    "backoff_policy",
    "backoff_delay",
    "dead_letter_sink",
    "emit_existing",
    "checkpoint_prefix",
];

/// `imagegate controller`.
#[derive(Debug, Args)]
pub struct ControllerArgs {
    /// Where `/livez`, `/readyz` and `/metrics` are served.
    #[arg(long, env = "IMAGEGATE_ADMIN_ADDR", default_value = "0.0.0.0:8080")]
    pub admin_addr: SocketAddr,

    /// Reconcile at most this many CustomRuns at once; one namespace gets at most half of
    /// them (at least one).
    #[arg(long, env = "IMAGEGATE_CONCURRENCY", default_value_t = 8, value_parser = clap::value_parser!(u16).range(1..))]
    pub concurrency: u16,

    /// Reconcile only the CustomRuns of this namespace (repeatable; default: all namespaces):
    /// one watch per namespace, so RBAC can be granted per namespace too.
    #[arg(long = "namespace", value_name = "NS", value_parser = values::namespace)]
    pub namespaces: Vec<String>,

    /// Seconds between two checks of the adopted and ImagePromotion-governed ImageStreams for
    /// drift (a candidate tag lost to a wholesale edit, one the dashboard offers: metric
    /// `imagegate_controller_streams_drifted`, a Warning Event on the stream); 0 turns the check
    /// off.
    #[arg(
        long,
        env = "IMAGEGATE_DRIFT_CHECK_INTERVAL",
        value_name = "SECONDS",
        default_value_t = 300
    )]
    pub drift_check_interval: u64,

    /// Seconds a governed stream's candidate may wait for its validation to begin, and a
    /// validation may show no verdict after its run ended, before the controller pages (an
    /// Event, `imagegate_controller_candidates_without_verdict`).
    #[arg(
        long,
        env = "IMAGEGATE_VERDICT_GRACE",
        value_name = "SECONDS",
        default_value_t = 600,
        value_parser = clap::value_parser!(u64).range(1..)
    )]
    pub verdict_grace: u64,

    /// Where the controller sends each verdict as a CloudEvent (`dev.imagegate.verdict.*`:
    /// validating, promoted, updatefailed, rolledback, tampered, lost; docs/events.md). Set by
    /// a Knative SinkBinding through `K_SINK`. Default: none is sent.
    #[arg(long, env = "K_SINK")]
    pub verdict_sink: Option<String>,

    /// Where a verdict event goes when the sink refused it for good (Knative's
    /// `deadLetterSink`); without it, a refused event is held and sent again until the sink
    /// takes it.
    #[arg(long, requires = "verdict_sink")]
    pub verdict_dead_letter_sink: Option<String>,

    /// Seconds to wait for the verdict sink's answer to one attempt (Knative's
    /// `K_SINK_TIMEOUT`; default 30).
    #[arg(long, env = "K_SINK_TIMEOUT", value_parser = clap::value_parser!(u64).range(1..))]
    pub verdict_sink_timeout: Option<u64>,

    /// A PEM bundle of CA certificates for an https verdict sink (Knative's `K_CA_CERTS`).
    #[arg(long, env = "K_CA_CERTS")]
    pub verdict_ca_certs: Option<String>,

    /// The verdict sink's OIDC audience (Knative's `K_AUDIENCE`): every verdict event then
    /// carries a token of `--oidc-service-account` for it.
    #[arg(long, env = "K_AUDIENCE", requires = "verdict_sink")]
    pub verdict_sink_audience: Option<String>,

    /// The ServiceAccount (in `POD_NAMESPACE`) whose tokens go to a verdict sink with an
    /// audience (Knative's `K_OIDC_SERVICE_ACCOUNT`).
    #[arg(long, env = "K_OIDC_SERVICE_ACCOUNT")]
    pub oidc_service_account: Option<String>,

    /// The Secret of the run key (in the controller's own namespace, `POD_NAMESPACE`) that
    /// `imagegate interceptor` makes: a re-drive names its PipelineRun with it, so nobody can
    /// take the name first.
    #[arg(long, default_value = crate::runkey::DEFAULT_SECRET)]
    pub run_key_secret: String,

    #[command(flatten)]
    pub leader: LeaderArgs,
}

/// `imagegate interceptor`.
#[derive(Debug, Args)]
pub struct InterceptorArgs {
    /// Where `/livez`, `/readyz` and `/metrics` are served (plain http).
    #[arg(long, env = "IMAGEGATE_ADMIN_ADDR", default_value = "0.0.0.0:8080")]
    pub admin_addr: SocketAddr,

    /// Where Tekton Triggers' requests are served (https).
    #[arg(
        long,
        env = "IMAGEGATE_INTERCEPTOR_ADDR",
        default_value = "0.0.0.0:8443"
    )]
    pub addr: SocketAddr,

    /// The interceptor's namespace (the pod's own, from the downward API): its certificate's
    /// Secret and the run key's are there.
    #[arg(long, env = "POD_NAMESPACE", default_value = "imagegate-system", value_parser = values::namespace)]
    pub namespace: String,

    /// The Service in front of the interceptor: its DNS names are the certificate's.
    #[arg(long, default_value = "imagegate-interceptor")]
    pub service: String,

    /// The cluster's DNS domain.
    #[arg(long, default_value = "cluster.local")]
    pub cluster_domain: String,

    /// Another DNS name for the certificate (repeatable): the host of a ClusterInterceptor URL
    /// that does not go through the Service.
    #[arg(long = "tls-name", value_name = "NAME")]
    pub tls_names: Vec<String>,

    /// The Secret that keeps the serving certificate and its CA (made and renewed by the
    /// interceptor).
    #[arg(long, default_value = "imagegate-interceptor-tls")]
    pub tls_secret: String,

    /// The Secret of the run key the PipelineRuns' names are made with (made by the interceptor
    /// on first start; the controller reads it to re-drive).
    #[arg(long, default_value = crate::runkey::DEFAULT_SECRET)]
    pub run_key_secret: String,

    /// The ClusterInterceptor whose `caBundle` the interceptor keeps.
    #[arg(long, default_value = "imagegate")]
    pub cluster_interceptor: String,
}

/// `imagegate receiver`.
#[derive(Debug, Args)]
pub struct ReceiverArgs {
    /// Where `/livez`, `/readyz` and `/metrics` are served (plain http).
    #[arg(long, env = "IMAGEGATE_ADMIN_ADDR", default_value = "0.0.0.0:8080")]
    pub admin_addr: SocketAddr,

    /// Where notifications are served (plain http; a Route or Ingress terminates TLS).
    #[arg(long, env = "IMAGEGATE_RECEIVER_ADDR", default_value = "0.0.0.0:8090")]
    pub addr: SocketAddr,

    /// A file holding the secret a CNCF Distribution registry sends as `Authorization: Bearer
    /// <secret>` (at least 16 bytes; a mounted Secret's key). Serves `POST /v1/distribution`.
    #[arg(long, env = "IMAGEGATE_RECEIVER_DISTRIBUTION_SECRET_FILE")]
    pub distribution_secret_file: Option<std::path::PathBuf>,

    /// A file holding the secret Harbor sends as its webhook policy's auth header (set it to
    /// `Bearer <secret>`; at least 16 bytes). Serves `POST /v1/harbor` (both payload formats).
    #[arg(long, env = "IMAGEGATE_RECEIVER_HARBOR_SECRET_FILE")]
    pub harbor_secret_file: Option<std::path::PathBuf>,

    /// A file holding a GitHub webhook's secret (at least 16 bytes), which GitHub signs each body
    /// with (`X-Hub-Signature-256`). Serves `POST /v1/github`: the `package` and
    /// `registry_package` events of GitHub Container Registry.
    #[arg(long, env = "IMAGEGATE_RECEIVER_GITHUB_SECRET_FILE")]
    pub github_secret_file: Option<std::path::PathBuf>,

    /// A file holding the secret of Quay's repository notifications (at least 16 bytes, only
    /// letters, digits, `-`, `.`, `_`, `~`): Quay sends no header or signature, so the secret is
    /// the URL's last segment. Serves `POST /v1/quay/<secret>`.
    #[arg(long, env = "IMAGEGATE_RECEIVER_QUAY_SECRET_FILE")]
    pub quay_secret_file: Option<std::path::PathBuf>,

    /// A file holding the secret of Docker Hub's webhooks (as `--quay-secret-file`: in the URL).
    /// Serves `POST /v1/dockerhub/<secret>`.
    #[arg(long, env = "IMAGEGATE_RECEIVER_DOCKERHUB_SECRET_FILE")]
    pub dockerhub_secret_file: Option<std::path::PathBuf>,

    /// Read only the ImagePromotions of this namespace (repeatable; default: every namespace).
    #[arg(long = "namespace", value_name = "NAMESPACE", value_parser = values::namespace)]
    pub namespaces: Vec<String>,

    /// The least time between two imports of one tag on pushes, in seconds: pushes meanwhile
    /// become one import at the end of it.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub min_interval_seconds: u64,

    /// The most imports a minute, of all tags together.
    #[arg(long, default_value_t = 120, value_parser = clap::value_parser!(u32).range(1..=6000))]
    pub max_imports_per_minute: u32,
}

/// Leader election flags, shared by the source and the controller.
#[derive(Debug, Args)]
pub struct LeaderArgs {
    /// Run only while holding a `coordination.k8s.io` Lease, so that several replicas can run
    /// and exactly one acts.
    #[arg(long, env = "IMAGEGATE_LEADER_ELECT")]
    pub leader_elect: bool,

    /// The Lease's name (default: `imagegate-<program>`: `imagegate-source`,
    /// `imagegate-source-multi-tenant`, `imagegate-controller`).
    #[arg(long)]
    pub lease_name: Option<String>,

    /// The Lease's namespace (the pod's own, from the downward API).
    #[arg(
        long,
        visible_alias = "pod-namespace",
        env = "POD_NAMESPACE",
        default_value = "imagegate-system"
    )]
    pub lease_namespace: String,

    /// This replica's identity in the Lease (the pod's name, from the downward API).
    #[arg(long, visible_alias = "pod-name", env = "POD_NAME")]
    pub identity: Option<String>,
}

/// `imagegate crds`.
#[derive(Debug, Args)]
pub struct CrdsArgs {
    /// Only this CRD, by its plural (`imagepromotions` or `imagestreamsources`); default: all.
    pub resource: Option<String>,
}
