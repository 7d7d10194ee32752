//! The subcommands' entry points: the binary's edge, where errors become `anyhow`.

use anyhow::{Context, bail};

use std::sync::Arc;

use crate::cli::{ControllerArgs, EmulatorArgs, LeaderArgs};
use crate::emulator::{Config, Emulator};
use crate::leader::LeaderConfig;

/// A subcommand a later issue fills in: says so and fails, never pretends to work.
pub fn not_implemented(command: &str, issue: u32) -> anyhow::Result<()> {
    bail!("`imagegate {command}` is not implemented yet (tracked in issue {issue})")
}

/// `imagegate crds`: the CustomResourceDefinitions imagegate owns, as YAML on stdout.
pub fn crds() -> anyhow::Result<()> {
    print!("{}", crate::controller::crd::crd_yaml());
    Ok(())
}

/// The Lease settings of a program, when `--leader-elect` is on.
fn leader_config(args: &LeaderArgs, program: &str) -> Option<LeaderConfig> {
    if !args.leader_elect {
        return None;
    }
    let identity = args.identity.clone().unwrap_or_else(|| {
        let host = std::env::var("HOSTNAME").unwrap_or_else(|_| "imagegate".into());
        format!("{host}-{}", &uuid::Uuid::new_v4().simple().to_string()[..8])
    });
    Some(LeaderConfig::new(
        args.lease_name
            .clone()
            .unwrap_or_else(|| format!("imagegate-{program}")),
        args.lease_namespace.clone(),
        identity,
    ))
}

/// `imagegate controller`: reconcile ImagePromotion CustomRuns until SIGTERM.
pub async fn controller(args: ControllerArgs) -> anyhow::Result<()> {
    let client = kube::Client::try_default()
        .await
        .context("cannot build a Kubernetes client (in-cluster config or KUBECONFIG)")?;
    let settings = crate::controller::Settings {
        admin_addr: args.admin_addr,
        concurrency: args.concurrency,
        leader: leader_config(&args.leader, "controller"),
    };
    let clock = Arc::new(k8s_openapi::jiff::Timestamp::now);
    crate::controller::run(client, settings, clock, shutdown_signal()).await
}

/// `imagegate emulator`: serve until interrupted.
pub async fn emulator(args: EmulatorArgs) -> anyhow::Result<()> {
    let emu = Emulator::start(Config {
        addr: args.addr,
        retained_events: args.retained_events,
        internal_registry: args.internal_registry.clone(),
        ..Config::default()
    })
    .await
    .with_context(|| format!("cannot listen on {}", args.addr))?;
    for file in &args.seed {
        let names = emu
            .seed_file(file)
            .with_context(|| format!("cannot seed {}", file.display()))?;
        tracing::info!(file = %file.display(), objects = names.len(), "seeded");
    }
    emu.write_kubeconfig(&args.kubeconfig, &args.user)
        .with_context(|| format!("cannot write {}", args.kubeconfig.display()))?;
    tracing::info!(
        url = %emu.url(),
        kubeconfig = %args.kubeconfig.display(),
        control = format!("{}{}", emu.url(), crate::emulator::control::PREFIX),
        "emulator serving"
    );
    println!("imagegate emulator serving at {}", emu.url());
    println!("kubeconfig: {}", args.kubeconfig.display());
    println!("  export KUBECONFIG={}", args.kubeconfig.display());
    shutdown_signal().await;
    tracing::info!("shutting down");
    emu.shutdown().await;
    Ok(())
}

/// Resolves on SIGINT or SIGTERM.
pub async fn shutdown_signal() {
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
