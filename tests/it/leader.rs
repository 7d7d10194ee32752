//! Leader election against the emulator over HTTP: two contenders, one leads; the standby
//! waits while the leader renews, takes over at once when the leader releases on shutdown,
//! and after expiry when the leader's renewals fail.
//!
//! Durations are short (lease 2 s, renew 1 s, retry 200 ms) but the assertions are about
//! order and state, with generous overall deadlines, because test machines are shared.

use std::time::Duration;

use imagegate::runtime::leader::{self, LeaderConfig};
use imagegate_emulator::control::Fault;
use imagegate_emulator::{Config, Emulator};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::jiff::SignedDuration;
use kube::api::{Api, PostParams};
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;

const LEASE: &str = "imagegate-controller";
const NS: &str = "default";
/// How long any one condition may take to come true before the test fails.
const PATIENCE: Duration = Duration::from_secs(30);

fn config(identity: &str) -> LeaderConfig {
    LeaderConfig {
        lease_duration: Duration::from_secs(2),
        renew_deadline: Duration::from_secs(1),
        retry_period: Duration::from_millis(200),
        ..LeaderConfig::new(LEASE, NS, identity)
    }
}

/// One contender: its leadership, its task and the trigger of its shutdown.
struct Contender {
    leading: watch::Receiver<bool>,
    task: JoinHandle<()>,
    stop: Option<oneshot::Sender<()>>,
    /// The fence its writes would go through.
    fence: leader::Fence,
}

impl Contender {
    fn start(emu: &Emulator, cfg: LeaderConfig) -> Contender {
        let client = emu.client_as(&cfg.identity).unwrap();
        let (stop, stopped) = oneshot::channel::<()>();
        let fence = leader::Fence::elected(&cfg);
        let (leading, task) = leader::spawn(
            client,
            cfg,
            async {
                let _ = stopped.await;
            },
            fence.clone(),
        );
        Contender {
            leading,
            task,
            stop: Some(stop),
            fence,
        }
    }

    fn leads(&self) -> bool {
        *self.leading.borrow()
    }

    async fn shutdown(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        tokio::time::timeout(PATIENCE, self.task)
            .await
            .expect("the election task ends on shutdown")
            .unwrap();
    }
}

async fn start_emulator() -> Emulator {
    imagegate::runtime::tls::install_crypto_provider();
    Emulator::start(Config::default()).await.unwrap()
}

fn leases(emu: &Emulator) -> Api<Lease> {
    Api::namespaced(emu.client().unwrap(), NS)
}

async fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + PATIENCE;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn spec(lease: &Lease) -> &k8s_openapi::api::coordination::v1::LeaseSpec {
    lease.spec.as_ref().unwrap()
}

/// The successful writes `user` made to the Lease.
fn successful_writes(emu: &Emulator, user: &str) -> usize {
    emu.mutating_requests()
        .iter()
        .filter(|r| r.user == user && r.resource == "leases" && r.code < 300)
        .count()
}

#[tokio::test]
async fn one_of_two_contenders_leads_and_the_standby_waits_while_it_renews() {
    let emu = start_emulator().await;
    let a = Contender::start(&emu, config("a"));
    let b = Contender::start(&emu, config("b"));
    wait_for("a leader", || a.leads() || b.leads()).await;
    let (leader, standby, standby_id) = if a.leads() { (a, b, "b") } else { (b, a, "a") };
    let leader_id = if standby_id == "a" { "b" } else { "a" };

    // Three lease durations: the lease would have expired twice without renewals.
    let writes_before = successful_writes(&emu, standby_id);
    let until = Instant::now() + Duration::from_secs(6);
    while Instant::now() < until {
        assert!(leader.leads(), "the leader keeps leading while it renews");
        assert!(!standby.leads(), "the standby never leads meanwhile");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(successful_writes(&emu, standby_id), writes_before);
    assert!(
        successful_writes(&emu, leader_id) >= 2,
        "the leader renewed"
    );

    let lease = leases(&emu).get(LEASE).await.unwrap();
    assert_eq!(spec(&lease).holder_identity.as_deref(), Some(leader_id));
    assert_eq!(spec(&lease).lease_duration_seconds, Some(2));
    assert_eq!(spec(&lease).lease_transitions, Some(0));
    assert!(spec(&lease).renew_time > spec(&lease).acquire_time);

    // A standby that shuts down leaves the lease alone.
    standby.shutdown().await;
    let after = leases(&emu).get(LEASE).await.unwrap();
    assert_eq!(spec(&after).holder_identity.as_deref(), Some(leader_id));
    assert_eq!(successful_writes(&emu, standby_id), writes_before);
    leader.shutdown().await;
    emu.shutdown().await;
}

#[tokio::test]
async fn the_standby_takes_over_at_once_when_the_leader_shuts_down() {
    let emu = start_emulator().await;
    // A long lease, so taking over before it could expire shows the release at work.
    let long = |id: &str| LeaderConfig {
        lease_duration: Duration::from_secs(30),
        ..config(id)
    };
    let a = Contender::start(&emu, long("a"));
    wait_for("a to lead", || a.leads()).await;
    let b = Contender::start(&emu, long("b"));
    wait_for("b to stand by", || {
        emu.requests()
            .iter()
            .any(|r| r.user == "b" && r.verb == "get" && r.resource == "leases")
    })
    .await;
    assert!(!b.leads());

    let mut a_leading = a.leading.clone();
    a.shutdown().await;
    assert!(
        !*a_leading.borrow_and_update(),
        "a stops leading on shutdown"
    );
    let released = Instant::now();
    wait_for("b to take over", || b.leads()).await;
    let took = released.elapsed();
    assert!(
        took < Duration::from_secs(30),
        "b took over in {took:?}, before a's 30 s lease could expire"
    );

    let lease = leases(&emu).get(LEASE).await.unwrap();
    assert_eq!(spec(&lease).holder_identity.as_deref(), Some("b"));
    assert_eq!(spec(&lease).lease_duration_seconds, Some(30));
    assert_eq!(spec(&lease).lease_transitions, Some(1));
    b.shutdown().await;

    // b released too: an empty holder with a one-second lease.
    let lease = leases(&emu).get(LEASE).await.unwrap();
    assert_eq!(spec(&lease).holder_identity.as_deref(), Some(""));
    assert_eq!(spec(&lease).lease_duration_seconds, Some(1));
    emu.shutdown().await;
}

#[tokio::test]
async fn failing_renewals_stop_the_leader_and_the_standby_takes_over_after_expiry() {
    let emu = start_emulator().await;
    let a = Contender::start(&emu, config("a"));
    wait_for("a to lead", || a.leads()).await;
    let b = Contender::start(&emu, config("b"));

    for verb in ["update", "patch"] {
        emu.inject_fault(Fault {
            verb: Some(verb.into()),
            resource: Some("leases".into()),
            count: 1000,
            status: Some(500),
            ..Default::default()
        });
    }
    let failing = Instant::now();
    wait_for("a to stop leading", || !a.leads()).await;
    let stepped_down = failing.elapsed();
    assert!(!b.leads(), "nobody leads while the lease cannot be written");
    assert!(
        stepped_down < Duration::from_secs(20),
        "a stopped leading {stepped_down:?} after its renewals began to fail"
    );
    tokio::time::timeout(PATIENCE, a.task)
        .await
        .expect("losing the lease ends the election task")
        .unwrap();

    // The lease as a last renewed it; b may take it only once that has expired.
    let last = leases(&emu).get(LEASE).await.unwrap();
    assert_eq!(spec(&last).holder_identity.as_deref(), Some("a"));
    let last_renewal = spec(&last).renew_time.clone().unwrap().0;

    emu.clear_faults();
    wait_for("b to take over", || b.leads()).await;
    let lease = leases(&emu).get(LEASE).await.unwrap();
    assert_eq!(spec(&lease).holder_identity.as_deref(), Some("b"));
    assert_eq!(spec(&lease).lease_transitions, Some(1));
    let acquired = spec(&lease).acquire_time.clone().unwrap().0;
    assert!(
        acquired >= last_renewal + SignedDuration::from_secs(2),
        "b acquired at {acquired}, a's lease expired at {last_renewal} + 2 s"
    );
    b.shutdown().await;
    emu.shutdown().await;
}

#[tokio::test]
async fn a_leader_that_finds_another_holder_stops_leading() {
    let emu = start_emulator().await;
    let a = Contender::start(&emu, config("a"));
    wait_for("a to lead", || a.leads()).await;

    // Someone else writes itself into the lease with a conditional update, as a contender
    // would; a 409 means a renewed in between, so read again.
    let api = leases(&emu);
    let deadline = Instant::now() + PATIENCE;
    loop {
        let mut lease = api.get(LEASE).await.unwrap();
        let spec = lease.spec.as_mut().unwrap();
        spec.holder_identity = Some("intruder".into());
        spec.lease_duration_seconds = Some(3600);
        match api.replace(LEASE, &PostParams::default(), &lease).await {
            Ok(_) => break,
            Err(kube::Error::Api(s)) if s.code == 409 && Instant::now() < deadline => {}
            Err(e) => panic!("writing the intruder failed: {e}"),
        }
    }

    wait_for("a to stop leading", || !a.leads()).await;
    tokio::time::timeout(PATIENCE, a.task)
        .await
        .expect("losing the lease ends the election task")
        .unwrap();
    let lease = api.get(LEASE).await.unwrap();
    assert_eq!(
        lease.spec.unwrap().holder_identity.as_deref(),
        Some("intruder"),
        "a never overwrites the new holder"
    );
    emu.shutdown().await;
}

/// The leader's renewals are what count, not the clocks: a standby whose clock runs 30 s ahead of
/// the holder's sees a `renewTime` 30 s old on every read. Measured against its own clock that
/// Lease is long expired and it would take it while the holder still renews (two leaders);
/// measured from when it saw the record change (client-go's rule), it waits as long as the
/// record keeps changing, and takes over one lease duration after it stops.
#[tokio::test]
async fn a_standby_whose_clock_runs_ahead_does_not_take_a_lease_that_is_still_renewed() {
    let emu = start_emulator().await;
    let api = leases(&emu);
    // The holder, on a clock 30 s behind the standby's: each renewal writes a renewTime 30 s in
    // the standby's past.
    let behind = || {
        let now = k8s_openapi::jiff::Timestamp::now() - SignedDuration::from_secs(30);
        k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(now)
    };
    let mut lease: Lease = serde_json::from_value(serde_json::json!({
        "metadata": {"name": LEASE, "namespace": NS},
        "spec": {"holderIdentity": "skewed-holder", "leaseDurationSeconds": 2, "leaseTransitions": 0}
    }))
    .unwrap();
    lease.spec.as_mut().unwrap().acquire_time = Some(behind());
    lease.spec.as_mut().unwrap().renew_time = Some(behind());
    api.create(&PostParams::default(), &lease).await.unwrap();
    let (stop_renewing, mut stopped) = oneshot::channel::<()>();
    let renewer = tokio::spawn({
        let api = api.clone();
        async move {
            loop {
                tokio::select! {
                    _ = &mut stopped => return,
                    () = tokio::time::sleep(Duration::from_millis(300)) => {}
                }
                let mut current = api.get(LEASE).await.unwrap();
                current.spec.as_mut().unwrap().renew_time = Some(behind());
                let _ = api.replace(LEASE, &PostParams::default(), &current).await;
            }
        }
    });
    let standby = Contender::start(&emu, config("standby"));
    // Six lease durations of renewals: never the standby's.
    tokio::time::sleep(Duration::from_secs(12)).await;
    assert!(
        !standby.leads(),
        "the standby took a Lease that was still renewed"
    );
    assert_eq!(
        spec(&api.get(LEASE).await.unwrap())
            .holder_identity
            .as_deref(),
        Some("skewed-holder")
    );
    // The holder stops: one lease duration after its last change, the standby takes over.
    let _ = stop_renewing.send(());
    renewer.await.unwrap();
    let stopped_at = Instant::now();
    wait_for("the standby leads", || standby.leads()).await;
    assert!(
        stopped_at.elapsed() >= Duration::from_millis(1500),
        "taken {:?} after the last renewal, before the lease duration",
        stopped_at.elapsed()
    );
    standby.shutdown().await;
}

/// F-11: the leader's writes are fenced by its Lease. A leader whose renewals fail lets a write
/// start only while its last renewal is younger than the renew deadline, and no write it lets
/// start may land later than the lease duration after that renewal began; so every write it
/// could make has landed (or been abandoned) before the standby, counting the lease duration
/// from when it saw the record change, may lead. Once it stops leading, nothing passes.
#[tokio::test]
async fn a_leader_whose_renewals_fail_lets_no_write_land_after_another_may_lead() {
    let emu = start_emulator().await;
    let a = Contender::start(&emu, config("a"));
    wait_for("a to lead", || a.leads()).await;
    let b = Contender::start(&emu, config("b"));
    assert!(b.fence.deadline().is_err(), "a standby writes nothing");
    let opened = a.fence.deadline().unwrap().unwrap();
    assert!(opened <= Instant::now() + config("a").lease_duration);

    // What a writer of a would be let do, every 10 ms: the latest a write it starts may land.
    let (done, mut stop) = oneshot::channel::<()>();
    let probe = tokio::spawn({
        let fence = a.fence.clone();
        async move {
            let mut latest: Option<Instant> = None;
            let mut closed_at: Option<Instant> = None;
            loop {
                match fence.deadline() {
                    Ok(Some(d)) => {
                        assert!(
                            closed_at.is_none(),
                            "the fence opened again without a renewal"
                        );
                        latest = Some(latest.map_or(d, |l| l.max(d)));
                    }
                    Ok(None) => panic!("an elected fence always has a deadline"),
                    Err(_) => {
                        closed_at.get_or_insert_with(Instant::now);
                    }
                }
                tokio::select! {
                    _ = &mut stop => return (latest, closed_at),
                    () = tokio::time::sleep(Duration::from_millis(10)) => {}
                }
            }
        }
    });
    for verb in ["update", "patch"] {
        emu.inject_fault(Fault {
            verb: Some(verb.into()),
            resource: Some("leases".into()),
            count: 1000,
            status: Some(500),
            ..Default::default()
        });
    }
    wait_for("a to stop leading", || !a.leads()).await;
    assert!(
        a.fence.deadline().is_err(),
        "closed before leading is seen to stop"
    );
    emu.clear_faults();
    wait_for("b to take over", || b.leads()).await;
    let b_leads = Instant::now();
    let _ = done.send(());
    let (latest, closed_at) = probe.await.unwrap();
    let (latest, closed_at) = (latest.unwrap(), closed_at.unwrap());
    assert!(
        latest <= b_leads,
        "a write of a could land {:?} after b led",
        latest - b_leads
    );
    assert!(closed_at <= b_leads);
    assert!(b.fence.deadline().unwrap().is_some(), "b's writes pass");
    b.shutdown().await;
    emu.shutdown().await;
}
