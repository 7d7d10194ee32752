//! The wiring both programs share around their work: the admin server (`/livez`, `/readyz`,
//! `/metrics`), leader election on a Lease (`--leader-elect`), and shutdown.
//!
//! [`Runtime::start`] serves the admin routes at once. [`Runtime::run`] then waits to lead (a
//! standby waiting for the Lease reports ready: it is healthy, only not leading), runs the
//! program with a [`CancellationToken`] that is cancelled on shutdown or when the Lease is lost,
//! and, once the program has returned, stops the election (which releases a Lease still held)
//! and the admin server. A lost Lease is the error [`LostLease`], so that the binary exits
//! non-zero and restarts as a standby, as client-go's leader election does.

pub mod admin;
pub mod leader;
pub mod telemetry;
pub mod tls;
pub mod watch_errors;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::info;

use admin::Health;
use leader::LeaderConfig;

/// What the runtime serves and contends for.
#[derive(Clone, Debug)]
pub struct Settings {
    /// Where `/livez`, `/readyz` and `/metrics` are served.
    pub admin_addr: SocketAddr,
    /// Lead through this Lease before the program runs (`None`: run at once).
    pub leader: Option<LeaderConfig>,
    /// The reason `/readyz` gives from the start, and again once leading, until the program
    /// declares itself ready (e.g. after its first list).
    pub until_ready: &'static str,
}

/// The Lease was lost while the program ran: the process should exit so that a standby takes
/// over (and restart as a standby itself).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("lost the leader lease; exiting so that a standby takes over")]
pub struct LostLease;

/// Why [`Runtime::run`] ended other than by the program's own result.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum Ended {
    /// Leading stopped while the program ran.
    #[error(transparent)]
    LostLease(#[from] LostLease),
    /// The Lease cannot be used at all (checked before contending).
    #[error(transparent)]
    LeaseRefused(#[from] leader::preflight::LeaseRefused),
}

/// The admin server, the election and shutdown of one program.
pub struct Runtime {
    client: kube::Client,
    settings: Settings,
    health: Arc<Health>,
    /// Cancelled by the shutdown future, and when the runtime stops.
    shutdown: CancellationToken,
    admin: JoinHandle<std::io::Result<()>>,
    admin_addr: SocketAddr,
    election: Option<Election>,
    /// Cancelled once the program has stopped (or never led): then the election releases the
    /// Lease, so that the program's last writes land while it is still held.
    release: CancellationToken,
    /// The Lease as a fence for the program's writes ([`leader::Fence`]).
    fence: leader::Fence,
    /// `imagegate_leader{lease}`: 1 while this process leads.
    leading: Gauge,
}

/// Registers `imagegate_leader{lease}` on `registry` (every program's, beside its own metrics):
/// 1 while this process leads the Lease `lease` (empty: no leader election), else 0.
pub fn register_leader(registry: &mut Registry, lease: &str) -> Gauge {
    let leading = Family::<LeaseLabels, Gauge>::default();
    registry.register(
        "imagegate_leader",
        "1 while this process leads (holds its Lease, or runs without leader election), else 0",
        leading.clone(),
    );
    let labels = LeaseLabels {
        lease: lease.to_string(),
    };
    leading.get_or_create(&labels).clone()
}

/// The label of `imagegate_leader`: the Lease's name (empty without leader election).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LeaseLabels {
    lease: String,
}

/// A running election: whether we lead, and the task that renews and finally releases.
struct Election {
    leading: watch::Receiver<bool>,
    task: JoinHandle<()>,
}

impl Runtime {
    /// Marks `health` not ready (`settings.until_ready`), binds and serves the admin routes over
    /// `health` and `registry`, and cancels everything once `shutdown` resolves. The error is a
    /// failed bind.
    pub async fn start(
        client: kube::Client,
        settings: Settings,
        mut registry: Registry,
        health: Arc<Health>,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<Runtime> {
        health.set_not_ready(settings.until_ready);
        let lease = (settings.leader.as_ref()).map_or("", |l| l.lease_name.as_str());
        let leading = register_leader(&mut registry, lease);
        let listener = tokio::net::TcpListener::bind(settings.admin_addr).await?;
        let admin_addr = listener.local_addr()?;
        info!(addr = %admin_addr, "admin server listening");
        let fence =
            (settings.leader.as_ref()).map_or_else(leader::Fence::default, leader::Fence::elected);
        let token = CancellationToken::new();
        let admin = tokio::spawn(admin::serve(
            listener,
            admin::router(health.clone(), Arc::new(registry)),
            token.clone().cancelled_owned(),
        ));
        tokio::spawn({
            let token = token.clone();
            async move {
                shutdown.await;
                token.cancel();
            }
        });
        Ok(Runtime {
            client,
            settings,
            health,
            shutdown: token,
            admin,
            admin_addr,
            election: None,
            release: CancellationToken::new(),
            fence,
            leading,
        })
    }

    /// The fence the program's writes go through: open while this process holds a fresh
    /// renewal of its Lease (always, without leader election).
    pub(crate) fn fence(&self) -> leader::Fence {
        self.fence.clone()
    }

    /// Where the admin server listens (the bound port when `admin_addr` asked for port 0).
    pub fn admin_addr(&self) -> SocketAddr {
        self.admin_addr
    }

    /// Waits to lead, runs `program` with a token cancelled on shutdown or on losing the Lease,
    /// then stops the election (releasing the Lease) and the admin server, whatever the program
    /// returned. The result is the program's error if it failed, else [`Ended`]: the Lease
    /// cannot be used (refused before contending: the program never runs) or was lost, else
    /// `Ok`; a shutdown before this process led is `Ok` without running the program.
    pub async fn run<F, Fut, E>(mut self, program: F) -> Result<(), E>
    where
        F: FnOnce(CancellationToken) -> Fut,
        Fut: Future<Output = Result<(), E>>,
        E: From<Ended>,
    {
        if let Some(cfg) = &self.settings.leader
            && let Err(refused) = leader::preflight::check(self.client.clone(), cfg).await
        {
            self.shutdown.cancel();
            self.stop_waiting().await;
            return Err(Ended::from(refused).into());
        }
        let Some(work) = self.lead().await else {
            self.stop_waiting().await;
            return Ok(());
        };
        let result = program(work).await;
        let lost = self.lost_lease();
        self.stop().await;
        result?;
        if lost {
            return Err(Ended::from(LostLease).into());
        }
        Ok(())
    }

    /// Without leader election, a token at once. With it, contends for the Lease (ready while
    /// standing by) and returns once leading, with the token also cancelled when leadership
    /// ends; `None` when shutdown comes first.
    async fn lead(&mut self) -> Option<CancellationToken> {
        let Some(cfg) = self.settings.leader.clone() else {
            self.leading.set(1);
            return Some(self.shutdown.child_token());
        };
        let (leading, task) = leader::spawn(
            self.client.clone(),
            cfg.clone(),
            self.release.clone().cancelled_owned(),
            self.fence.clone(),
        );
        let mut waiting = leading.clone();
        self.election = Some(Election { leading, task });
        info!(lease = %cfg.lease_name, identity = %cfg.identity, "waiting to lead");
        self.health.set_ready(true);
        tokio::select! {
            _ = leader::until(&mut waiting, true) => info!(lease = %cfg.lease_name, "leading"),
            _ = self.shutdown.cancelled() => return None,
        }
        self.health.set_not_ready(self.settings.until_ready);
        self.leading.set(1);
        let work = self.shutdown.child_token();
        tokio::spawn({
            let (work, leading) = (work.clone(), self.leading.clone());
            async move {
                tokio::select! {
                    _ = leader::until(&mut waiting, false) => work.cancel(),
                    _ = work.cancelled() => {}
                }
                leading.set(0);
            }
        });
        Some(work)
    }

    /// Whether this process stopped leading while no shutdown was asked for: the election said
    /// so, or it ended without saying (its sender is gone), which is no leadership either.
    fn lost_lease(&self) -> bool {
        let stopped_leading = self
            .election
            .as_ref()
            .is_some_and(|e| !*e.leading.borrow() || e.leading.has_changed().is_err());
        stopped_leading && !self.shutdown.is_cancelled()
    }

    /// Stops after the program ran: the election releases the Lease (so a standby takes over
    /// at once), then the admin server finishes its requests.
    async fn stop(mut self) {
        self.shutdown.cancel();
        self.release.cancel();
        if let Some(election) = self.election.take() {
            let _ = election.task.await;
        }
        info!("stopped");
        let _ = self.admin.await;
    }

    /// Stops a standby that never led (shutdown already asked for).
    async fn stop_waiting(mut self) {
        self.release.cancel();
        if let Some(election) = self.election.take() {
            let _ = election.task.await;
        }
        let _ = self.admin.await;
    }
}

#[cfg(test)]
mod tests {
    //! The runtime without leader election: the program runs at once, the admin server answers
    //! while it runs, and shutdown cancels the program's token and stops the server. (With a
    //! Lease, against the emulator: `tests/it/runtime.rs`.)

    use super::*;

    use std::time::Duration;

    use tokio::sync::oneshot;

    /// A client that is never called (no election): building one connects to nothing.
    fn client() -> kube::Client {
        super::tls::install_crypto_provider();
        let config = kube::Config::new("http://127.0.0.1:1".parse().unwrap());
        kube::Client::try_from(config).unwrap()
    }

    fn settings() -> Settings {
        Settings {
            admin_addr: "127.0.0.1:0".parse().unwrap(),
            leader: None,
            until_ready: "the first list is not done",
        }
    }

    async fn get(addr: SocketAddr, path: &str) -> Result<(u16, String), reqwest::Error> {
        let resp = reqwest::get(format!("http://{addr}{path}")).await?;
        let code = resp.status().as_u16();
        Ok((code, resp.text().await?))
    }

    const PATIENCE: Duration = Duration::from_secs(30);

    #[tokio::test]
    async fn without_a_lease_the_program_runs_at_once_and_shutdown_cancels_its_token() {
        let health = Health::new();
        let (stop, stopped) = oneshot::channel::<()>();
        let runtime = Runtime::start(
            client(),
            settings(),
            Registry::default(),
            health.clone(),
            async {
                let _ = stopped.await;
            },
        )
        .await
        .unwrap();
        let addr = runtime.admin_addr();
        let (ran_tx, ran_rx) = oneshot::channel::<()>();
        let run = tokio::spawn(runtime.run(move |token| async move {
            let _ = ran_tx.send(());
            token.cancelled().await;
            Ok::<(), Ended>(())
        }));
        tokio::time::timeout(PATIENCE, ran_rx)
            .await
            .unwrap()
            .unwrap();

        assert_eq!(get(addr, "/livez").await.unwrap(), (200, "ok".into()));
        assert_eq!(
            get(addr, "/readyz").await.unwrap(),
            (503, "the first list is not done".into()),
            "not ready until the program says so"
        );
        health.set_ready(true);
        assert_eq!(get(addr, "/readyz").await.unwrap(), (200, "ok".into()));

        stop.send(()).unwrap();
        let result = tokio::time::timeout(PATIENCE, run).await.unwrap().unwrap();
        assert_eq!(result, Ok(()));
        assert!(
            get(addr, "/livez").await.is_err(),
            "the admin server stopped"
        );
    }

    #[tokio::test]
    async fn a_failing_program_gets_its_error_back_after_the_admin_server_stopped() {
        let runtime = Runtime::start(
            client(),
            settings(),
            Registry::default(),
            Health::new(),
            std::future::pending(),
        )
        .await
        .unwrap();
        let addr = runtime.admin_addr();
        let result: Result<(), String> = runtime
            .run(|_| async { Err("the checkpoint cannot be read".to_string()) })
            .await;
        assert_eq!(result, Err("the checkpoint cannot be read".to_string()));
        assert!(
            get(addr, "/livez").await.is_err(),
            "the admin server stopped"
        );
    }

    impl From<Ended> for String {
        fn from(e: Ended) -> String {
            e.to_string()
        }
    }

    #[tokio::test]
    async fn an_admin_address_in_use_is_an_error() {
        let taken = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let busy = Settings {
            admin_addr: taken.local_addr().unwrap(),
            ..settings()
        };
        let result = Runtime::start(
            client(),
            busy,
            Registry::default(),
            Health::new(),
            std::future::pending(),
        )
        .await;
        assert_eq!(
            result.err().map(|e| e.kind()),
            Some(std::io::ErrorKind::AddrInUse)
        );
    }
}
