//! The `imagegate-emulator` binary: parse the command line, serve until SIGINT or SIGTERM.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Parser, ValueEnum};
use imagegate_emulator::{Config, Emulator, Imports, aggregated, control};
use tracing_subscriber::EnvFilter;

/// imagegate-emulator: a Kubernetes/OpenShift API server for tests and demos.
#[derive(Debug, Parser)]
#[command(name = "imagegate-emulator", version, about, long_about = None)]
struct Cli {
    /// Log format: `human` (for a terminal) or `json` (one object per line, for log shippers).
    /// The level comes from `RUST_LOG` (default `info`).
    #[arg(long, value_enum, default_value_t = LogFormat::Human, env = "IMAGEGATE_LOG_FORMAT")]
    log_format: LogFormat,

    /// Where to write a kubeconfig that points kubectl and imagegate at the emulator (not with
    /// --serve-image-api-only, where clients go through kube-apiserver).
    #[arg(
        long,
        env = "KUBECONFIG_OUT",
        required_unless_present = "serve_image_api_only",
        conflicts_with = "serve_image_api_only"
    )]
    kubeconfig: Option<PathBuf>,

    /// Address to listen on (port 0 picks a free port; the kubeconfig has the real one).
    #[arg(long, default_value = "127.0.0.1:0")]
    addr: SocketAddr,

    /// YAML or JSON files of objects to store at start (multi-document; `kind: List` too).
    #[arg(long = "seed", value_name = "FILE")]
    seed: Vec<PathBuf>,

    /// The most events of one resource the watch window keeps; a watch from an older
    /// resourceVersion gets `410 Expired` (kube-apiserver's watch cache: 100 × 1024 at most).
    #[arg(long, default_value_t = imagegate_emulator::DEFAULT_RETAINED_EVENTS)]
    retained_events: usize,

    /// Keep every event from the first (until --retained-events) and send watch bookmarks every
    /// second. Real servers do neither: their watch cache starts when they start, drops events
    /// older than 75 s beyond the last 100 of a resource, and sends a bookmark about once a
    /// minute.
    #[arg(long)]
    lenient_watch: bool,

    /// The internal registry host name the image API reports in `status.dockerImageRepository`.
    #[arg(
        long,
        default_value = "image-registry.openshift-image-registry.svc:5000"
    )]
    internal_registry: String,

    /// Do not run the image import controllers: a tag is imported only when a client posts an
    /// ImageStreamImport or the control API is called (OpenShift always runs them).
    #[arg(long)]
    no_import_controllers: bool,

    /// How often every `importPolicy.scheduled` tag is imported again, in seconds (OpenShift's
    /// `ScheduledImageImportMinimumIntervalSeconds`, 900 by default).
    #[arg(long, default_value_t = 900, value_parser = clap::value_parser!(u64).range(1..))]
    scheduled_import_interval: u64,

    /// A registry (`host:port`) imports read over the registry v2 API (HTTPS, or plain HTTP for a
    /// tag with `importPolicy.insecure`); pull specs of any other registry resolve from what the
    /// control API recorded. Repeatable.
    #[arg(long = "registry", value_name = "HOST")]
    registries: Vec<String>,

    /// A registry read over the network and over plain HTTP whatever the tag says (OpenShift's
    /// `registrySources.insecureRegistries`). Repeatable.
    #[arg(long = "insecure-registry", value_name = "HOST")]
    insecure_registries: Vec<String>,

    /// The user name the kubeconfig's token stands for in the request log.
    #[arg(long, default_value = "admin")]
    user: String,

    #[command(flatten)]
    image_api: aggregated::Options,
}

/// Log output format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum LogFormat {
    /// Human-readable lines.
    Human,
    /// JSON lines.
    Json,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging(cli.log_format);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("imagegate-emulator: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(serve(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = format!("{e:#}"), "imagegate-emulator failed");
            eprintln!("imagegate-emulator: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Logs to stderr (stdout says where the emulator serves), level from `RUST_LOG`.
fn init_logging(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let _ = match format {
        LogFormat::Human => builder.try_init(),
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .try_init(),
    };
}

/// Starts the emulator, seeds it, writes the kubeconfig, and serves until interrupted.
async fn serve(cli: Cli) -> anyhow::Result<()> {
    if cli.image_api.serve_image_api_only {
        return serve_image_api(cli).await;
    }
    let Some(kubeconfig) = cli.kubeconfig.clone() else {
        anyhow::bail!("--kubeconfig is required");
    };
    let emu = Emulator::start(Config {
        addr: cli.addr,
        retained_events: cli.retained_events,
        lenient_watch: cli.lenient_watch,
        internal_registry: cli.internal_registry.clone(),
        imports: imports(&cli),
        ..Config::default()
    })
    .await
    .with_context(|| format!("cannot listen on {}", cli.addr))?;
    for file in &cli.seed {
        let names = emu
            .seed_file(file)
            .with_context(|| format!("cannot seed {}", file.display()))?;
        tracing::info!(file = %file.display(), objects = names.len(), "seeded");
    }
    emu.write_kubeconfig(&kubeconfig, &cli.user)
        .with_context(|| format!("cannot write {}", kubeconfig.display()))?;
    tracing::info!(
        url = %emu.url(),
        kubeconfig = %kubeconfig.display(),
        control = format!("{}{}", emu.url(), control::PREFIX),
        "emulator serving"
    );
    println!("imagegate-emulator serving at {}", emu.url());
    println!("kubeconfig: {}", kubeconfig.display());
    println!("  export KUBECONFIG={}", kubeconfig.display());
    shutdown_signal().await;
    tracing::info!("shutting down");
    emu.shutdown().await;
    Ok(())
}

/// The image-API-only mode: HTTPS, behind kube-apiserver's aggregator.
async fn serve_image_api(cli: Cli) -> anyhow::Result<()> {
    imagegate_emulator::aggregated::tls::install_crypto_provider();
    let api = aggregated::start(
        &cli.image_api,
        cli.internal_registry.clone(),
        if cli.lenient_watch {
            imagegate_emulator::window::Window::lenient(cli.retained_events)
        } else {
            imagegate_emulator::window::Window::real(cli.retained_events)
        },
        &imports(&cli),
    )
    .await?;
    for file in &cli.seed {
        let text = std::fs::read_to_string(file)
            .with_context(|| format!("cannot read {}", file.display()))?;
        let names = api
            .cluster()
            .seed_str(&text)
            .with_context(|| format!("cannot seed {}", file.display()))?;
        tracing::info!(file = %file.display(), objects = names.len(), "seeded");
    }
    let url = format!("https://{}", api.addr());
    tracing::info!(%url, control = format!("{url}{}", control::PREFIX), "image API serving");
    println!("imagegate-emulator serving the image API at {url}");
    shutdown_signal().await;
    tracing::info!("shutting down");
    api.shutdown().await;
    Ok(())
}

fn imports(cli: &Cli) -> Imports {
    Imports {
        enabled: !cli.no_import_controllers,
        scheduled_interval: std::time::Duration::from_secs(cli.scheduled_import_interval),
        registries: cli.registries.clone(),
        insecure_registries: cli.insecure_registries.clone(),
    }
}

/// Resolves on SIGINT or SIGTERM.
async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = term => {},
    }
}
