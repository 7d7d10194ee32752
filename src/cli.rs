//! The command line: one clap struct per subcommand.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

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
    Source(SourceArgs),
    /// Reconcile Tekton CustomRuns of kind ImagePromotion (validate-then-promote).
    Controller(ControllerArgs),
    /// Run the API emulator: a Kubernetes/OpenShift API server for tests and demos.
    Emulator(EmulatorArgs),
    /// Print the CustomResourceDefinitions imagegate owns, as YAML.
    Crds(CrdsArgs),
    /// Run the whole loop on the embedded emulator and print a timeline.
    Demo(DemoArgs),
}

/// `imagegate source` (filled in by the source issue).
#[derive(Debug, Args)]
pub struct SourceArgs {}

/// `imagegate controller` (filled in by the controller issue).
#[derive(Debug, Args)]
pub struct ControllerArgs {}

/// `imagegate crds` (filled in by the controller issue).
#[derive(Debug, Args)]
pub struct CrdsArgs {}

/// `imagegate demo` (filled in by the demo issue).
#[derive(Debug, Args)]
pub struct DemoArgs {}

/// `imagegate emulator`.
#[derive(Debug, Args)]
pub struct EmulatorArgs {
    /// Where to write a kubeconfig that points kubectl and imagegate at the emulator.
    #[arg(long, env = "KUBECONFIG_OUT")]
    pub kubeconfig: PathBuf,

    /// Address to listen on (port 0 picks a free port; the kubeconfig has the real one).
    #[arg(long, default_value = "127.0.0.1:0")]
    pub addr: SocketAddr,

    /// YAML or JSON files of objects to store at start (multi-document; `kind: List` too).
    #[arg(long = "seed", value_name = "FILE")]
    pub seed: Vec<PathBuf>,

    /// How many watch events are retained; a watch from an older resourceVersion gets
    /// `410 Expired`.
    #[arg(long, default_value_t = 100_000)]
    pub retained_events: usize,

    /// The internal registry host name the image API reports in `status.dockerImageRepository`.
    #[arg(
        long,
        default_value = "image-registry.openshift-image-registry.svc:5000"
    )]
    pub internal_registry: String,

    /// The user name the kubeconfig's token stands for in the request log.
    #[arg(long, default_value = "admin")]
    pub user: String,
}
