//! The operator commands (`imagegate status|promote|rollback|reject|import|pin`, also
//! `kubectl imagegate ...`): what a platform engineer runs to see and act on gated streams. They
//! never write an ImageStream's tags themselves: `promote`, `rollback` and `reject` create the
//! same ImagePromotion CustomRun a pipeline would, so the controller's checks, proof and
//! permission review apply; `import` asks the API server to import now (an ImageStreamImport).
//!
//! - [`connect`]: the client and namespace from `--kubeconfig`, `--context`, `-n`, as kubectl.
//! - [`status`]: streams, ImagePromotions and CustomRuns -> one row per gated stream (pure).
//! - [`render`]: rows -> table, wide table, JSON or YAML (pure).
//! - [`runs`]: the CustomRun a command creates (pure), and which ImagePromotion it names.
//! - [`wait`]: create the run and follow it to its verdict, with progress lines.
//! - [`import`]: the ImageStreamImport of the candidate tag, and its answer.
//! - [`pin`]: the pins of what a PipelineRun's tasks ran, for an ImagePromotion's proof.
//! - [`plugin`]: running as `kubectl-imagegate`.
//!
//! Exit status, for every command: 0 done; 1 error (API, configuration, timeout); 2 usage;
//! 3 the gate said no (`status`: some stream is UpdateFailed; `promote`/`rollback`/`reject`: the
//! run ended `Succeeded=False`, except `reject`'s own `Rejected`; `import`: the import failed).

pub mod connect;
pub mod import;
pub mod pin;
pub mod plugin;
pub mod render;
pub mod runs;
pub mod status;
pub mod wait;

use std::process::ExitCode;

use anyhow::Context;

use crate::cli::ops::OpsCommand;

/// How an operator command ended (errors are `Err`, exit status 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Done (exit 0).
    Done,
    /// The gate said no (exit 3): see the module doc.
    Refused,
}

impl Verdict {
    /// The exit status.
    pub fn exit_code(self) -> ExitCode {
        match self {
            Verdict::Done => ExitCode::SUCCESS,
            Verdict::Refused => ExitCode::from(3),
        }
    }
}

/// Runs an operator command.
pub async fn run(command: OpsCommand) -> anyhow::Result<Verdict> {
    match command {
        OpsCommand::Status(args) => status_command(args).await,
        OpsCommand::Promote(args) => wait::promote(args).await,
        OpsCommand::Rollback(args) => wait::rollback(args).await,
        OpsCommand::Reject(args) => wait::reject(args).await,
        OpsCommand::Import(args) => import::run(args).await,
        OpsCommand::Pin(args) => pin::run(args).await,
    }
}

async fn status_command(args: crate::cli::ops::StatusArgs) -> anyhow::Result<Verdict> {
    let (client, default_ns) = connect::client(&args.kube).await?;
    let (scope, only) = match (&args.imagestream, args.all_namespaces) {
        (_, true) => (None, None),
        (Some(target), false) => {
            let (ns, name) =
                connect::split_target(target, args.kube.namespace.as_deref(), &default_ns)?;
            (Some(ns), Some(name))
        }
        (None, false) => (Some(default_ns), None),
    };
    let facts = status::Facts::read(&client, scope.as_deref())
        .await
        .context("cannot read the state of the gated streams")?;
    let mut rows = status::rows(&facts);
    if let Some(name) = &only {
        rows.retain(|r| &r.imagestream == name);
        if rows.is_empty() {
            anyhow::bail!(
                "ImageStream {:?} in namespace {:?} is not gated by imagegate (or does not exist)",
                name,
                scope.unwrap_or_default()
            );
        }
    }
    let now = k8s_openapi::jiff::Timestamp::now();
    print!(
        "{}",
        render::render(&rows, args.output, args.all_namespaces, now)?
    );
    Ok(status::verdict(&rows))
}
