//! `imagegate source` as a separate process, as a Deployment runs it.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use super::{EmulatorServer, Process, free_port};

/// A running `imagegate source` (started by [`Source::new`], killed on drop; its log is printed
/// if the test fails).
pub struct Source {
    process: Process,
    /// Its admin port.
    pub admin: u16,
}

impl Source {
    /// Starts the source as the user `source`, sending to `sink`.
    pub fn new(
        emu: &EmulatorServer,
        dir: &tempfile::TempDir,
        sink: &str,
        extra: &[&str],
    ) -> Source {
        Source::with_env(emu, dir, sink, extra, &[])
    }

    /// [`Source::new`], with these environment variables set too.
    pub fn with_env(
        emu: &EmulatorServer,
        dir: &tempfile::TempDir,
        sink: &str,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> Source {
        let kubeconfig = dir.path().join("source-kubeconfig");
        emu.write_kubeconfig(&kubeconfig, "source");
        Source::with_kubeconfig_env(&kubeconfig, sink, extra, env)
    }

    /// Starts the source with `kubeconfig` (its identity and API server), sending to `sink`.
    pub fn with_kubeconfig(kubeconfig: &Path, sink: &str, extra: &[&str]) -> Source {
        Source::with_kubeconfig_env(kubeconfig, sink, extra, &[])
    }

    /// [`Source::with_kubeconfig`], with these environment variables set too.
    fn with_kubeconfig_env(
        kubeconfig: &Path,
        sink: &str,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> Source {
        let admin = free_port();
        let mut command = Command::new(env!("CARGO_BIN_EXE_imagegate"));
        command
            .args([
                "source",
                "--sink",
                sink,
                "--checkpoint-namespace",
                "imagegate-system",
                "--backoff-delay",
                "PT0.01S",
            ])
            .args(extra)
            .arg("--admin-addr")
            .arg(format!("127.0.0.1:{admin}"))
            .env("KUBECONFIG", kubeconfig)
            .env("RUST_LOG", "info")
            .envs(env.iter().copied());
        Source {
            process: Process::start(format!("imagegate source (admin port {admin})"), command),
            admin,
        }
    }

    /// Starts it again after [`Source::stop`].
    pub fn start(&mut self) {
        self.process.restart();
    }

    /// Waits until /readyz says the first list is done.
    pub async fn ready(&self) {
        super::wait_ready(self.admin).await;
    }

    /// A graceful stop (SIGTERM): deliveries in flight end, the checkpoint is flushed.
    pub async fn stop(&mut self) {
        self.process.stop(Duration::from_secs(20)).await;
    }

    /// Everything it wrote to stdout and stderr so far.
    pub fn log(&self) -> String {
        self.process.log()
    }

    /// Waits for it to exit on its own; its exit status.
    pub async fn exited(&mut self) -> std::process::ExitStatus {
        self.process.exited(Duration::from_secs(20)).await
    }

    /// Its `/metrics`.
    pub async fn metrics(&self) -> String {
        reqwest::get(format!("http://127.0.0.1:{}/metrics", self.admin))
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    }
}

impl Source {
    /// `GET /readyz`: the status and the body (the reason when not ready).
    pub async fn readyz(&self) -> (u16, String) {
        let r = reqwest::get(format!("http://127.0.0.1:{}/readyz", self.admin))
            .await
            .unwrap();
        (r.status().as_u16(), r.text().await.unwrap())
    }
}
