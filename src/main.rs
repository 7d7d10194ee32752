//! The `imagegate` binary: parse the command line and hand over to the library.

use std::process::ExitCode;

use clap::Parser;
use imagegate::cli::{Cli, Command, LogFormat};

/// mimalloc instead of the system allocator: the source allocates and frees many small,
/// short-lived buffers per event (decode, encode, HTTP), where glibc's malloc took a third of
/// the catch-up's CPU (BENCHMARKS.md). Built without transparent huge pages (`no_thp`): with
/// them, each arena touched is resident in 2 MiB units, and the idle source held 18 MiB more.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let json_logs = cli.log_format == LogFormat::Json;
    imagegate::telemetry::init(cli.log_format, "info");
    imagegate::tls::install_crypto_provider();
    // The source waits on the network almost all the time: one thread keeps its memory small
    // (one allocator arena, one stack). The controller uses all cores.
    let runtime = match cli.command {
        Command::Source(_) => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build(),
        _ => tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build(),
    };
    let runtime = match runtime {
        Ok(r) => r,
        Err(e) => {
            eprintln!("imagegate: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        match cli.command {
            Command::Source(args) => imagegate::run::source(*args).await,
            Command::Controller(args) => imagegate::run::controller(args).await,
            Command::Crds(_) => imagegate::run::crds(),
            Command::Adopt(args) => imagegate::run::adopt(args).await,
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // Once: as a JSON log line for log shippers, else (or when the level hides errors)
            // as one plain line.
            let error = format!("{e:#}");
            if json_logs && tracing::enabled!(tracing::Level::ERROR) {
                tracing::error!(error, "imagegate failed");
            } else {
                eprintln!("imagegate: {error}");
            }
            ExitCode::FAILURE
        }
    }
}
