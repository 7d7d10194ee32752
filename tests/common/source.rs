//! `imagegate source` as a separate process, as a Deployment runs it.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::{EmulatorServer, free_port};

/// A running `imagegate source` (started by [`Source::new`], killed on drop).
pub struct Source {
    child: Option<Child>,
    kubeconfig: PathBuf,
    /// Its admin port.
    pub admin: u16,
    /// Its arguments.
    pub args: Vec<String>,
}

impl Drop for Source {
    fn drop(&mut self) {
        self.kill();
    }
}

impl Source {
    /// Starts the source as the user `source`, sending to `sink`.
    pub fn new(
        emu: &EmulatorServer,
        dir: &tempfile::TempDir,
        sink: &str,
        extra: &[&str],
    ) -> Source {
        let kubeconfig = dir.path().join("source-kubeconfig");
        emu.write_kubeconfig(&kubeconfig, "source");
        let mut args: Vec<String> = vec![
            "source".into(),
            "--sink".into(),
            sink.into(),
            "--checkpoint-namespace".into(),
            "imagegate-system".into(),
            "--backoff-delay".into(),
            "PT0.01S".into(),
        ];
        args.extend(extra.iter().map(|s| s.to_string()));
        let mut s = Source {
            child: None,
            kubeconfig,
            admin: free_port(),
            args,
        };
        s.start();
        s
    }

    /// Starts it (again).
    pub fn start(&mut self) {
        let child = Command::new(env!("CARGO_BIN_EXE_imagegate"))
            .args(&self.args)
            .arg("--admin-addr")
            .arg(format!("127.0.0.1:{}", self.admin))
            .env("KUBECONFIG", &self.kubeconfig)
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        self.child = Some(child);
    }

    /// Waits until /readyz says the first list is done.
    pub async fn ready(&self) {
        super::wait_ready(self.admin).await;
    }

    /// A graceful stop (SIGTERM): deliveries in flight end, the checkpoint is flushed.
    pub async fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = Command::new("kill")
                .args(["-TERM", &c.id().to_string()])
                .status();
            let deadline = Instant::now() + Duration::from_secs(20);
            while c.try_wait().unwrap().is_none() {
                assert!(
                    Instant::now() < deadline,
                    "the source did not stop on SIGTERM"
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }

    /// kill -9.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
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
