//! The runtime both programs run in, with leader election against the emulator: a standby is
//! ready while it waits and never runs its program; a leader's program runs until shutdown,
//! which releases the Lease; a lost Lease cancels the program and is the `LostLease` error.
//!
//! Durations are short (lease 2 s, renew 1 s, retry 200 ms); the assertions are about order and
//! state, with generous deadlines, because test machines are shared.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use imagegate::runtime::admin::Health;
use imagegate::runtime::leader::LeaderConfig;
use imagegate::runtime::{Ended, LostLease, Runtime, Settings};
use imagegate_emulator::{Config, Emulator};
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, PostParams};
use prometheus_client::registry::Registry;
use tokio::sync::oneshot;
use tokio::time::Instant;

const LEASE: &str = "imagegate-test";
const NS: &str = "default";
const PATIENCE: Duration = Duration::from_secs(30);
const UNTIL_READY: &str = "the first list is not done";

fn settings(identity: &str) -> Settings {
    Settings {
        admin_addr: "127.0.0.1:0".parse().unwrap(),
        leader: Some(LeaderConfig {
            lease_duration: Duration::from_secs(2),
            renew_deadline: Duration::from_secs(1),
            retry_period: Duration::from_millis(200),
            ..LeaderConfig::new(LEASE, NS, identity)
        }),
        until_ready: UNTIL_READY,
    }
}

/// One program in its runtime: its health, whether its work started, and its shutdown trigger.
struct Program {
    health: Arc<Health>,
    working: Arc<AtomicBool>,
    stop: Option<oneshot::Sender<()>>,
    run: tokio::task::JoinHandle<Result<(), Ended>>,
    admin: std::net::SocketAddr,
}

impl Program {
    /// Starts a runtime as `identity`; its program marks itself working and runs until its
    /// token is cancelled.
    async fn start(emu: &Emulator, identity: &str) -> Program {
        let health = Health::new();
        let (stop, stopped) = oneshot::channel::<()>();
        let runtime = Runtime::start(
            emu.client_as(identity).unwrap(),
            settings(identity),
            Registry::default(),
            health.clone(),
            async {
                let _ = stopped.await;
            },
        )
        .await
        .unwrap();
        let working = Arc::new(AtomicBool::new(false));
        let admin = runtime.admin_addr();
        let run = tokio::spawn(runtime.run({
            let working = working.clone();
            move |token| async move {
                working.store(true, Ordering::SeqCst);
                token.cancelled().await;
                Ok(())
            }
        }));
        Program {
            health,
            working,
            stop: Some(stop),
            run,
            admin,
        }
    }

    /// Its `imagegate_leader` line from `/metrics`.
    async fn leader_gauge(&self) -> String {
        let metrics = reqwest::get(format!("http://{}/metrics", self.admin))
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        metrics
            .lines()
            .find(|l| l.starts_with("imagegate_leader{"))
            .unwrap_or_default()
            .to_string()
    }

    fn working(&self) -> bool {
        self.working.load(Ordering::SeqCst)
    }

    async fn shutdown(mut self) -> Result<(), Ended> {
        let _ = self.stop.take().unwrap().send(());
        self.finished().await
    }

    async fn finished(self) -> Result<(), Ended> {
        tokio::time::timeout(PATIENCE, self.run)
            .await
            .expect("the runtime returns")
            .unwrap()
    }
}

async fn start_emulator() -> Emulator {
    imagegate::runtime::tls::install_crypto_provider();
    Emulator::start(Config::default()).await.unwrap()
}

async fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + PATIENCE;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn holder(api: &Api<Lease>) -> Option<String> {
    api.get(LEASE)
        .await
        .ok()?
        .spec?
        .holder_identity
        .filter(|h| !h.is_empty())
}

#[tokio::test]
async fn a_standby_is_ready_and_idle_until_shutdown() {
    let emu = start_emulator().await;
    let leader = Program::start(&emu, "a").await;
    wait_for("a to work", || leader.working()).await;
    assert_eq!(leader.health.reason().as_deref(), Some(UNTIL_READY));

    let standby = Program::start(&emu, "b").await;
    wait_for("b to stand by, ready", || standby.health.is_ready()).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(!standby.working(), "a standby never runs its program");
    // Each says whether it leads, so that "no replica leads" can page.
    let lease = settings("a").leader.unwrap().lease_name;
    assert_eq!(
        leader.leader_gauge().await,
        format!("imagegate_leader{{lease=\"{lease}\"}} 1")
    );
    assert_eq!(
        standby.leader_gauge().await,
        format!("imagegate_leader{{lease=\"{lease}\"}} 0")
    );
    assert_eq!(standby.shutdown().await, Ok(()));
    assert_eq!(leader.shutdown().await, Ok(()));
    emu.shutdown().await;
}

#[tokio::test]
async fn shutdown_stops_the_leaders_program_and_releases_the_lease() {
    let emu = start_emulator().await;
    let leases: Api<Lease> = Api::namespaced(emu.client().unwrap(), NS);
    let a = Program::start(&emu, "a").await;
    wait_for("a to work", || a.working()).await;
    assert_eq!(holder(&leases).await.as_deref(), Some("a"));
    assert_eq!(a.shutdown().await, Ok(()));
    assert_eq!(holder(&leases).await, None, "released on shutdown");
    emu.shutdown().await;
}

#[tokio::test]
async fn a_lost_lease_cancels_the_program_and_is_an_error() {
    let emu = start_emulator().await;
    let leases: Api<Lease> = Api::namespaced(emu.client().unwrap(), NS);
    let a = Program::start(&emu, "a").await;
    wait_for("a to work", || a.working()).await;

    // Another holder writes itself into the Lease (conditionally; a 409 means a renewed first).
    let deadline = Instant::now() + PATIENCE;
    loop {
        let mut lease = leases.get(LEASE).await.unwrap();
        let spec = lease.spec.as_mut().unwrap();
        spec.holder_identity = Some("intruder".into());
        spec.lease_duration_seconds = Some(3600);
        match leases.replace(LEASE, &PostParams::default(), &lease).await {
            Ok(_) => break,
            Err(kube::Error::Api(s)) if s.code == 409 && Instant::now() < deadline => {}
            Err(e) => panic!("writing the intruder failed: {e}"),
        }
    }

    assert_eq!(
        a.finished().await,
        Err(Ended::LostLease(LostLease)),
        "without any shutdown"
    );
    assert_eq!(holder(&leases).await.as_deref(), Some("intruder"));
    emu.shutdown().await;
}
