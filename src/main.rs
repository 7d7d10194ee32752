//! The `imagegate` binary: parse the command line and hand over to the library.

use std::process::ExitCode;

use clap::Parser;
use imagegate::cli::{Cli, Command, LogFormat};

/// mimalloc instead of the system allocator: the source allocates and frees many small,
/// short-lived buffers per event (decode, encode, HTTP), where glibc's malloc took a third of
/// the catch-up's CPU (BENCHMARKS.md). Built without transparent huge pages (`no_thp`): with
/// them, each arena touched is resident in 2 MiB units, and the idle source held 18 MiB more.
/// (The `system-alloc` feature leaves the system allocator in place, for heap profilers.)
#[cfg(not(feature = "system-alloc"))]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    if imagegate::ops::plugin::invoked_as_plugin(std::env::args_os().next().as_deref()) {
        return plugin_main();
    }
    let cli = Cli::parse();
    let json_logs = cli.log_format == LogFormat::Json;
    // The operator commands print what they do themselves; logs only for warnings.
    let level = match cli.command {
        Command::Ops(_) => "warn",
        _ => "info",
    };
    imagegate::runtime::telemetry::init(cli.log_format, level);
    imagegate::runtime::tls::install_crypto_provider();
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
            Command::Source(args) => imagegate::run::source(*args)
                .await
                .map(|()| ExitCode::SUCCESS),
            Command::Controller(args) => imagegate::run::controller(args)
                .await
                .map(|()| ExitCode::SUCCESS),
            Command::Interceptor(args) => imagegate::run::interceptor(args)
                .await
                .map(|()| ExitCode::SUCCESS),
            Command::Receiver(args) => imagegate::run::receiver(args)
                .await
                .map(|()| ExitCode::SUCCESS),
            Command::Crds(args) => imagegate::run::crds(&args).map(|()| ExitCode::SUCCESS),
            Command::Ops(command) => imagegate::ops::run(command).await.map(|v| v.exit_code()),
            Command::Adopt(args) => imagegate::run::adopt(args)
                .await
                .map(|()| ExitCode::SUCCESS),
        }
    });
    match result {
        Ok(code) => code,
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

/// `kubectl imagegate ...`: the operator commands alone, errors as one line on stderr.
fn plugin_main() -> ExitCode {
    let cli = imagegate::cli::ops::KubectlImagegate::parse();
    imagegate::runtime::telemetry::init(LogFormat::Human, "warn");
    imagegate::runtime::tls::install_crypto_provider();
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("kubectl imagegate: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(imagegate::ops::run(cli.command)) {
        Ok(verdict) => verdict.exit_code(),
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
