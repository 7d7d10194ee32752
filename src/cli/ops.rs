//! The operator commands' command line: `imagegate status|promote|rollback|reject|import`, and
//! the same commands as the kubectl plugin (`kubectl imagegate ...`, [`KubectlImagegate`]).
//! What they do is in [`crate::ops`].

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

use super::values;

/// `kubectl imagegate`: the operator commands, when the binary runs as `kubectl-imagegate`.
#[derive(Debug, Parser)]
#[command(
    name = "kubectl-imagegate",
    bin_name = "kubectl imagegate",
    version,
    about = "imagegate's operator commands, as a kubectl plugin: see and act on gated ImageStreams."
)]
pub struct KubectlImagegate {
    /// What to run.
    #[command(subcommand)]
    pub command: OpsCommand,
}

/// The operator commands.
#[derive(Debug, Subcommand)]
pub enum OpsCommand {
    /// Show each gated ImageStream: served and candidate digests, phase, last run and its
    /// outcome. Exit status 3 when any stream is UpdateFailed.
    Status(StatusArgs),
    /// Promote the candidate by hand: create an ImagePromotion CustomRun (`action: promote`)
    /// and wait for the controller's verdict. Exit status 3 when it refuses.
    Promote(PromoteArgs),
    /// Point the served tag back at the previous digest: a CustomRun with `action: rollback`.
    Rollback(RollbackArgs),
    /// Mark the candidate as failed (served tag UpdateFailed, image kept): `action: reject`.
    Reject(RejectArgs),
    /// Import the candidate tag now (an ImageStreamImport, what `oc import-image` sends)
    /// instead of waiting for the scheduled import. Exit status 3 when the import fails.
    Import(ImportArgs),
    /// Print the pins of what a PipelineRun's tasks ran (`spec.validation.pins` of an
    /// ImagePromotion), read from what Tekton recorded: pin a run that validated as it should.
    Pin(PinArgs),
}

/// `imagegate pin`.
#[derive(Debug, Args)]
pub struct PinArgs {
    /// The PipelineRun (`NAME` or `NAMESPACE/NAME`) whose TaskRuns to pin.
    #[arg(value_name = "PIPELINERUN")]
    pub pipelinerun: String,

    /// Only these pipeline tasks (default: every task that ran a TaskRun).
    #[arg(long = "task", value_name = "NAME")]
    pub tasks: Vec<String>,

    #[command(flatten)]
    pub kube: KubeArgs,
}

/// How to reach the cluster, as kubectl's flags of the same names.
#[derive(Debug, Args, Clone, Default)]
pub struct KubeArgs {
    /// The kubeconfig file (default: `KUBECONFIG`, else `~/.kube/config`, else in-cluster).
    #[arg(long, value_name = "PATH")]
    pub kubeconfig: Option<PathBuf>,

    /// The kubeconfig context to use (default: its current context).
    #[arg(long, value_name = "NAME")]
    pub context: Option<String>,

    /// The namespace (default: the context's namespace, else `default`).
    #[arg(short = 'n', long, value_name = "NS", value_parser = values::namespace)]
    pub namespace: Option<String>,
}

/// `-o` of `status`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    /// The table (default).
    #[default]
    Table,
    /// The table with full digests, the previous digest, the tags and the candidate's import.
    Wide,
    /// `{"items": [...]}` as JSON.
    Json,
    /// The same as YAML.
    Yaml,
}

/// `status`.
#[derive(Debug, Args)]
pub struct StatusArgs {
    /// Only this ImageStream (`NAME` or `NAMESPACE/NAME`).
    #[arg(value_name = "IMAGESTREAM")]
    pub imagestream: Option<String>,

    /// Every namespace.
    #[arg(short = 'A', long, conflicts_with_all = ["namespace", "imagestream"])]
    pub all_namespaces: bool,

    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value_t = OutputFormat::Table)]
    pub output: OutputFormat,

    #[command(flatten)]
    pub kube: KubeArgs,
}

/// What every run-creating command takes.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// The ImageStream (`NAME` or `NAMESPACE/NAME`).
    #[arg(value_name = "IMAGESTREAM")]
    pub imagestream: String,

    /// The ImagePromotion the run names (`customRef.name`): its checks, proof and tags apply.
    /// Default: the one naming this stream in `spec.imageStream`, else the namespace's only one.
    #[arg(long, value_name = "NAME")]
    pub promotion: Option<String>,

    /// The service account the run executes as; the controller checks that it may `promote`.
    #[arg(long, value_name = "NAME", default_value = "imagegate-pipeline")]
    pub service_account: String,

    /// The candidate tag (default: the ImagePromotion's, else `candidate`).
    #[arg(long, value_name = "TAG", value_parser = values::tag)]
    pub candidate_tag: Option<String>,

    /// The served tag (default: the ImagePromotion's, else `latest`).
    #[arg(long, value_name = "TAG", value_parser = values::tag)]
    pub served_tag: Option<String>,

    /// How long the run may take (its `spec.timeout`) and the command waits, as a Go duration.
    #[arg(long, value_name = "DURATION", default_value = "5m", value_parser = values::go_duration)]
    pub timeout: std::time::Duration,

    /// Create the run and exit without waiting for its result.
    #[arg(long)]
    pub no_wait: bool,

    #[command(flatten)]
    pub kube: KubeArgs,
}

/// `promote`.
#[derive(Debug, Args)]
pub struct PromoteArgs {
    #[command(flatten)]
    pub run: RunArgs,

    /// The digest to promote (default: what the candidate tag points at now).
    #[arg(long, value_name = "DIGEST", value_parser = values::digest)]
    pub digest: Option<String>,

    /// The validation evidence, passed as the run's `validation-status` param only when given:
    /// say `Succeeded` only if you validated this digest yourself. Without it the controller
    /// refuses (`ValidationRequired`); an ImagePromotion that asks for proof of validation
    /// refuses any promotion by hand (`Unverified`).
    #[arg(long, value_name = "STATUS")]
    pub validation_status: Option<String>,

    /// Promote a digest that was rolled back (`allow-rolled-back: "true"`).
    #[arg(long)]
    pub allow_rolled_back: bool,
}

/// `rollback`.
#[derive(Debug, Args)]
pub struct RollbackArgs {
    #[command(flatten)]
    pub run: RunArgs,

    /// The digest to return to (default: the controller's choice, the previous digest).
    #[arg(long, value_name = "DIGEST", value_parser = values::digest)]
    pub digest: Option<String>,
}

/// `reject`.
#[derive(Debug, Args)]
pub struct RejectArgs {
    #[command(flatten)]
    pub run: RunArgs,

    /// The digest rejected (default: what the candidate tag points at now).
    #[arg(long, value_name = "DIGEST", value_parser = values::digest)]
    pub digest: Option<String>,

    /// What the run's message quotes as the validation's status.
    #[arg(long, value_name = "STATUS", default_value = "Failed")]
    pub validation_status: String,
}

/// `import`.
#[derive(Debug, Args)]
pub struct ImportArgs {
    /// The ImageStream (`NAME` or `NAMESPACE/NAME`).
    #[arg(value_name = "IMAGESTREAM")]
    pub imagestream: String,

    /// The tag to import (default: the ImagePromotion's candidate tag, else `candidate`).
    #[arg(long, value_name = "TAG", value_parser = values::tag)]
    pub tag: Option<String>,

    #[command(flatten)]
    pub kube: KubeArgs,
}
