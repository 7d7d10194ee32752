//! Logging: `tracing` with a human or JSON formatter, level from `RUST_LOG` (default `info`).

use tracing_subscriber::EnvFilter;

use crate::cli::LogFormat;

/// Installs the global subscriber. Logs go to stderr so that stdout stays for output (the
/// CRDs, the demo's timeline).
pub fn init(format: LogFormat, default_level: &str) {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default_level));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    // A second init (tests) is not an error worth failing for.
    let _ = match format {
        LogFormat::Human => builder.try_init(),
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .try_init(),
    };
}
