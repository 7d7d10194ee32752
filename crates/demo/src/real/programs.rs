//! The real `imagegate source` and `imagegate controller`: the binary, each as its own
//! ServiceAccount of `config/` (a TokenRequest token in a kubeconfig, as its pod would mount), on a
//! free admin port, its log in the cluster's `logs/`. What they spent is read from their own
//! metrics: the source's delivery latency and the controller's reconcile durations.

use std::net::SocketAddr;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, anyhow};

use super::cluster::Cluster;

/// A running program, killed when dropped.
pub struct Program {
    name: &'static str,
    child: tokio::process::Child,
    /// Its admin server (`/readyz`, `/metrics`).
    pub admin: SocketAddr,
}

fn free_addr() -> anyhow::Result<SocketAddr> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").context("cannot bind a local port")?;
    Ok(l.local_addr()?)
}

impl Program {
    /// Starts `imagegate <args>` as ServiceAccount `imagegate-system/<sa>` and waits until it is
    /// ready (its first list done).
    pub async fn start(
        name: &'static str,
        cluster: &Cluster,
        imagegate: &Path,
        sa: &str,
        args: &[&str],
    ) -> anyhow::Result<Program> {
        Self::start_with_env(name, cluster, imagegate, sa, args, &[]).await
    }

    /// [`Program::start`] with `env` added to its environment.
    pub async fn start_with_env(
        name: &'static str,
        cluster: &Cluster,
        imagegate: &Path,
        sa: &str,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> anyhow::Result<Program> {
        let kubeconfig = cluster.dir.join(format!("{sa}.kubeconfig"));
        cluster
            .kubeconfig_of("imagegate-system", sa, &kubeconfig)
            .await?;
        let admin = free_addr()?;
        let log_path = cluster.dir.join("logs").join(format!("{name}.log"));
        let log = std::fs::File::create(&log_path)
            .with_context(|| format!("cannot write {}", log_path.display()))?;
        let child = tokio::process::Command::new(imagegate)
            .args(["--log-format", "json"])
            .args(args)
            .arg("--admin-addr")
            .arg(admin.to_string())
            .env("KUBECONFIG", &kubeconfig)
            .env("RUST_LOG", "info")
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("cannot run {}", imagegate.display()))?;
        let program = Program { name, child, admin };
        crate::ready::admin_ready(admin, Duration::from_secs(60))
            .await
            .map_err(|e| {
                anyhow!(
                    "imagegate {name} did not become ready: {e}\n--- logs/{name}.log:\n{}",
                    cluster.log_tail(name)
                )
            })?;
        Ok(program)
    }

    /// Stops the program as its pod would be stopped (SIGTERM: it flushes its checkpoint), and
    /// kills it if it has not exited after 15 s.
    pub async fn stop(mut self) -> anyhow::Result<()> {
        if let Some(pid) = self.child.id() {
            let _ = tokio::process::Command::new("kill")
                .args(["-TERM", &pid.to_string()])
                .status()
                .await;
        }
        match tokio::time::timeout(Duration::from_secs(15), self.child.wait()).await {
            Ok(status) => {
                status?;
            }
            Err(_) => self.child.kill().await?,
        }
        Ok(())
    }

    /// Fails if the program has exited.
    pub fn alive(&mut self) -> anyhow::Result<()> {
        match self.child.try_wait()? {
            None => Ok(()),
            Some(status) => Err(anyhow!("imagegate {} exited: {status}", self.name)),
        }
    }

    /// The sum of a histogram in its `/metrics` (seconds), 0 when it has no sample yet.
    pub async fn histogram_sum(&self, metric: &str) -> anyhow::Result<f64> {
        let text = reqwest::get(format!("http://{}/metrics", self.admin))
            .await?
            .text()
            .await?;
        Ok(sum_of(&text, metric))
    }
}

/// The sum over every series of `<metric>_sum` in a Prometheus text exposition.
pub fn sum_of(text: &str, metric: &str) -> f64 {
    let name = format!("{metric}_sum");
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter(|l| {
            l.strip_prefix(name.as_str())
                .is_some_and(|rest| rest.starts_with(' ') || rest.starts_with('{'))
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sum_adds_every_series_of_the_histogram_and_nothing_else() {
        let text = "# HELP x_seconds x\n\
                    x_seconds_sum{type=\"a\"} 1.5\n\
                    x_seconds_sum{type=\"b\"} 0.25\n\
                    x_seconds_count{type=\"a\"} 3\n\
                    x_seconds_sum_other 9\n";
        assert_eq!(sum_of(text, "x_seconds"), 1.75);
        assert_eq!(sum_of("", "x_seconds"), 0.0);
    }
}
