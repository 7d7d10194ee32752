//! The `imagegate-demo` binary: parse the command line and run the demo.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use imagegate::cli::LogFormat;

/// imagegate-demo: the whole loop (emulator, source, controller, a Tekton stand-in) on one
/// machine, with a timeline.
#[derive(Debug, Parser)]
#[command(name = "imagegate-demo", version, about, long_about = None)]
struct Cli {
    /// Log format of the programs: `human` or `json` (one object per line). The level comes from
    /// `RUST_LOG` (default `error`: the timeline is the output).
    #[arg(long, value_enum, default_value_t = LogFormat::Human, env = "IMAGEGATE_LOG_FORMAT")]
    log_format: LogFormat,

    /// After the scenarios, leave the emulator, the source, the controller and the Tekton
    /// stand-in running (until Ctrl-C) and write a kubeconfig for kubectl.
    #[arg(long)]
    keep_running: bool,

    /// Where `--keep-running` writes the kubeconfig.
    #[arg(long, default_value = "/tmp/imagegate-demo.kubeconfig")]
    kubeconfig: PathBuf,

    /// Run the Tekton files of this directory (an edited copy of `tekton/`) instead of the ones
    /// compiled into the binary.
    #[arg(long, value_name = "DIR")]
    tekton_dir: Option<PathBuf>,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // The demo prints its own timeline; the programs' logs would drown it (RUST_LOG brings them
    // back).
    imagegate::runtime::telemetry::init(cli.log_format, "error");
    imagegate::runtime::tls::install_crypto_provider();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("imagegate-demo: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(imagegate_demo::run(imagegate_demo::Options {
        keep_running: cli.keep_running,
        kubeconfig: cli.kubeconfig,
        tekton_dir: cli.tekton_dir,
    }));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = format!("{e:#}"), "imagegate-demo failed");
            eprintln!("imagegate-demo: {e:#}");
            ExitCode::FAILURE
        }
    }
}
