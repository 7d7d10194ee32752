//! The `imagegate` binary: parse the command line and hand over to the library.

use std::process::ExitCode;

use clap::Parser;
use imagegate::cli::{Cli, Command};

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    imagegate::telemetry::init(cli.log_format);
    imagegate::tls::install_crypto_provider();
    let result = match cli.command {
        Command::Emulator(args) => imagegate::run::emulator(args).await,
        Command::Source(args) => imagegate::run::source(*args).await,
        Command::Controller(args) => imagegate::run::controller(args).await,
        Command::Crds(_) => imagegate::run::crds(),
        Command::Demo(_) => imagegate::run::not_implemented("demo", 5),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = format!("{e:#}"), "imagegate failed");
            eprintln!("imagegate: {e:#}");
            ExitCode::FAILURE
        }
    }
}
