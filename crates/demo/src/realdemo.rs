//! The `imagegate-realdemo` binary: `imagegate demo`'s scenarios on the cluster `scripts/realcluster
//! up --tekton` started, with the real Tekton. `scripts/realcluster demo` builds everything, starts
//! the cluster, runs this and stops the cluster again.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;

/// imagegate-realdemo: the whole loop on real Kubernetes, Tekton Pipelines and Triggers.
#[derive(Debug, Parser)]
#[command(name = "imagegate-realdemo", version, about, long_about = None)]
struct Cli {
    /// The directory of `scripts/realcluster up --tekton` (its admin.kubeconfig, env, logs/).
    #[arg(long, value_name = "DIR")]
    cluster: PathBuf,

    /// The `imagegate` binary run as the source and the controller.
    #[arg(long, value_name = "PATH")]
    imagegate: PathBuf,

    /// The repository: config/, tekton/, examples/ and scripts/realcluster are read from here.
    #[arg(long, value_name = "DIR", default_value = ".")]
    root: PathBuf,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    imagegate::runtime::telemetry::init(imagegate::cli::LogFormat::Human, "error");
    imagegate::runtime::tls::install_crypto_provider();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("imagegate-realdemo: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(imagegate_demo::real::run(
        imagegate_demo::real::RealOptions {
            cluster: cli.cluster,
            imagegate: cli.imagegate,
            root: cli.root,
        },
    ));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("imagegate-realdemo: {e:#}");
            ExitCode::FAILURE
        }
    }
}
