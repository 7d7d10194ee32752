//! Leader election on a `coordination.k8s.io/v1` Lease, with client-go's semantics
//! (`leaderelection` over the `LeaseLock`), so imagegate can run with standbys beside
//! client-go programs that share its conventions.
//!
//! A candidate reads the Lease every `retry_period` and writes itself as holder when the Lease
//! is absent (create), free (released), its own, or expired: its record (holder, times,
//! duration, transitions) has not changed for `leaseDurationSeconds` as measured on this
//! process's monotonic clock since it last saw it change (client-go's `observedTime`). The
//! holder's `renewTime` is never compared with our clock, so clock skew between nodes cannot
//! make a Lease that is still renewed look expired (two leaders). Every write after the create is an update conditional on the resourceVersion
//! it read, so a 409 means someone else wrote first: the candidate re-reads next round and
//! never overwrites. The leader renews every `retry_period`; if no renewal succeeds for
//! `renew_deadline` it stops leading, before its Lease can expire for the others. On shutdown
//! it releases the Lease (empty holder, `leaseDurationSeconds: 1`, as client-go's
//! `ReleaseOnCancel`) so a standby takes over at once.
//!
//! The decisions (who may acquire when, what to write) are pure functions over the Lease and
//! the time (`record`); around them, `backon` retries a round every `retry_period` and the
//! loop only logs.
//!
//! Written here, not taken from a crate: kube-rs has no leader election, and `kubert`'s Lease
//! (0.25, the linkerd policy controller's) is built on kube 1.1, not the kube 5 this crate
//! uses, and decides expiry by comparing the holder's `renewTime` with the local wall clock,
//! the rule that lets a standby whose clock runs ahead take a Lease that is still renewed
//! (issue 30, F-11: `tests/it/leader.rs` runs such a standby 30 s ahead).

use std::future::Future;
use std::time::Duration;

use backon::{ConstantBuilder, Retryable};
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, PostParams};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// Which Lease to contend for, as whom, and how fast. The defaults are client-go's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaderConfig {
    /// The Lease's name.
    pub lease_name: String,
    /// The Lease's namespace.
    pub namespace: String,
    /// This process's identity, written as `holderIdentity` (usually the pod name); unique
    /// among the contenders.
    pub identity: String,
    /// How long others wait after the last renewal before taking over (15 s).
    pub lease_duration: Duration,
    /// How long the leader keeps trying to renew before it stops leading (10 s).
    pub renew_deadline: Duration,
    /// How often candidates try to acquire and the leader renews (2 s).
    pub retry_period: Duration,
}

/// A [`LeaderConfig`] under which two processes could lead at once.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub(crate) enum InvalidLeaderConfig {
    /// The leader must give up before others may take over.
    #[error("lease_duration ({lease:?}) must be longer than renew_deadline ({renew:?})")]
    RenewDeadlineNotShorterThanLease { lease: Duration, renew: Duration },
    /// The leader must get more than one try within its deadline.
    #[error("renew_deadline ({renew:?}) must be longer than retry_period ({retry:?})")]
    RetryPeriodNotShorterThanRenewDeadline { renew: Duration, retry: Duration },
}

impl LeaderConfig {
    /// A config with client-go's durations (15 s lease, 10 s renew deadline, 2 s retry).
    pub fn new(
        lease_name: impl Into<String>,
        namespace: impl Into<String>,
        identity: impl Into<String>,
    ) -> Self {
        LeaderConfig {
            lease_name: lease_name.into(),
            namespace: namespace.into(),
            identity: identity.into(),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }

    /// Checks the durations as client-go does (it panics; callers here decide).
    pub(crate) fn validate(&self) -> Result<(), InvalidLeaderConfig> {
        if self.lease_duration <= self.renew_deadline {
            return Err(InvalidLeaderConfig::RenewDeadlineNotShorterThanLease {
                lease: self.lease_duration,
                renew: self.renew_deadline,
            });
        }
        if self.renew_deadline <= self.retry_period {
            return Err(
                InvalidLeaderConfig::RetryPeriodNotShorterThanRenewDeadline {
                    renew: self.renew_deadline,
                    retry: self.retry_period,
                },
            );
        }
        Ok(())
    }

    /// `leaseDurationSeconds`: whole seconds, rounded up, at least 1.
    fn lease_duration_seconds(&self) -> i32 {
        let d = self.lease_duration;
        let secs = d.as_secs() + u64::from(d.subsec_nanos() > 0);
        i32::try_from(secs.max(1)).unwrap_or(i32::MAX)
    }
}

/// Contends for the Lease in a background task until `shutdown` completes.
///
/// The receiver turns `true` when this process acquires the Lease and `false` when it stops
/// leading. Losing the Lease (another holder, or no renewal within `renew_deadline`) ends the
/// task, as client-go's `Run` returns: the program should stop its work and exit (or spawn
/// again). On `shutdown` while leading, the receiver turns `false` first and then the Lease is
/// released; for no overlap at all, complete `shutdown` only after the work has stopped.
///
/// `fence` follows the Lease: open while a renewal is fresh, closed before the receiver turns
/// `false` ([`fence`]).
pub fn spawn(
    client: kube::Client,
    cfg: LeaderConfig,
    shutdown: impl Future + Send + 'static,
    fence: Fence,
) -> (watch::Receiver<bool>, JoinHandle<()>) {
    let (tx, rx) = watch::channel(false);
    if let Err(e) = cfg.validate() {
        tracing::error!(lease = %cfg.lease_name, identity = %cfg.identity, error = %e,
            "unsafe leader election config: two processes may lead at once");
    }
    let api = Api::<Lease>::namespaced(client, &cfg.namespace);
    // Only the completion matters; the output need not be `Send`.
    let shutdown = async move {
        let _ = shutdown.await;
    };
    let task = tokio::spawn(run(api, cfg, tx, shutdown, fence));
    (rx, task)
}

/// What a candidate remembers between rounds.
type Seen = std::sync::Mutex<Option<Observed>>;

/// What one try to acquire or renew found.
#[derive(Debug)]
enum Attempt {
    /// We hold the Lease; `at` is when the try started (no later than the renewTime written).
    Held { lease: Box<Lease>, at: Instant },
    /// Someone else holds it and it has not expired.
    HeldBy(String),
    /// Someone else wrote between our read and our write.
    Conflict,
}

/// An API call on the Lease that failed (logged and retried).
#[derive(Debug, thiserror::Error)]
enum LeaseError {
    #[error("reading the lease failed: {0}")]
    Read(#[source] kube::Error),
    #[error("creating the lease failed: {0}")]
    Create(#[source] kube::Error),
    #[error("updating the lease failed: {0}")]
    Update(#[source] kube::Error),
}

fn is_conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409)
}

/// One round: read the Lease, decide, and write it if we may.
async fn attempt(api: &Api<Lease>, cfg: &LeaderConfig, seen: &Seen) -> Result<Attempt, LeaseError> {
    let at = Instant::now();
    let current = api
        .get_opt(&cfg.lease_name)
        .await
        .map_err(LeaseError::Read)?;
    let now = micro_now();
    let expired = current.as_ref().is_some_and(|lease| {
        let mut seen = seen.lock().unwrap_or_else(|p| p.into_inner());
        let observed = Observed::note(seen.as_ref(), lease, Instant::now());
        let expired = is_expired(lease, observed.at, Instant::now());
        *seen = Some(observed);
        expired
    });
    if let Some(lease) = &current
        && !may_acquire(lease, &cfg.identity, expired)
    {
        return Ok(Attempt::HeldBy(
            holder(lease).unwrap_or_default().to_string(),
        ));
    }
    write(
        api,
        current.as_ref(),
        &claimed(current.as_ref(), cfg, now),
        at,
    )
    .await
}

/// Creates the Lease, or updates it conditional on the resourceVersion `new` carries.
async fn write(
    api: &Api<Lease>,
    current: Option<&Lease>,
    new: &Lease,
    at: Instant,
) -> Result<Attempt, LeaseError> {
    let pp = PostParams::default();
    let written = match current {
        None => api.create(&pp, new).await.map_err(LeaseError::Create),
        Some(_) => {
            let name = new.metadata.name.as_deref().unwrap_or_default();
            api.replace(name, &pp, new)
                .await
                .map_err(LeaseError::Update)
        }
    };
    match written {
        Ok(lease) => Ok(Attempt::Held {
            lease: Box::new(lease),
            at,
        }),
        Err(LeaseError::Create(e) | LeaseError::Update(e)) if is_conflict(&e) => {
            Ok(Attempt::Conflict)
        }
        Err(e) => Err(e),
    }
}

async fn run(
    api: Api<Lease>,
    cfg: LeaderConfig,
    tx: watch::Sender<bool>,
    shutdown: impl Future<Output = ()>,
    fence: Fence,
) {
    let mut shutdown = std::pin::pin!(shutdown);
    let mut held = tokio::select! {
        biased;
        _ = &mut shutdown => return,
        held = acquire(&api, &cfg) => held,
    };
    fence.renewed(held.1);
    tx.send_replace(true);
    tracing::info!(lease = %cfg.lease_name, identity = %cfg.identity, "became the leader");
    tokio::select! {
        biased;
        _ = &mut shutdown => {
            // Still held: the program's last writes (a flush on SIGTERM) pass until the
            // release, which waits for the program to stop.
            tx.send_replace(false);
            release(&api, &cfg, held).await;
            fence.lost();
        }
        () = keep(&api, &cfg, &mut held, &fence) => {
            fence.lost();
            tx.send_replace(false);
        }
    }
}

/// Why a round did not leave this process holding the Lease: what the retries below see.
#[derive(Debug)]
enum NotHeld {
    /// Someone else holds it and it has not expired.
    HeldBy(String),
    /// Someone else wrote between our read and our write.
    Conflict,
    /// An API call failed.
    Failed(LeaseError),
}

/// One round, as a result: the Lease held, or why not.
async fn hold(
    api: &Api<Lease>,
    cfg: &LeaderConfig,
    seen: &Seen,
) -> Result<(Lease, Instant), NotHeld> {
    match attempt(api, cfg, seen).await {
        Ok(Attempt::Held { lease, at }) => Ok((*lease, at)),
        Ok(Attempt::HeldBy(h)) => Err(NotHeld::HeldBy(h)),
        Ok(Attempt::Conflict) => Err(NotHeld::Conflict),
        Err(e) => Err(NotHeld::Failed(e)),
    }
}

/// A round every `retry_period`, as often as it takes.
fn every_retry_period(cfg: &LeaderConfig) -> ConstantBuilder {
    ConstantBuilder::new()
        .with_delay(cfg.retry_period)
        .without_max_times()
}

/// Tries every `retry_period` until this process holds the Lease.
async fn acquire(api: &Api<Lease>, cfg: &LeaderConfig) -> (Lease, Instant) {
    let mut seen_holder = None;
    let seen = Seen::default();
    loop {
        let tries = (|| hold(api, cfg, &seen))
            .retry(every_retry_period(cfg))
            .notify(|why, _| match why {
                NotHeld::HeldBy(h) => {
                    if seen_holder.as_ref() != Some(h) {
                        tracing::info!(lease = %cfg.lease_name, identity = %cfg.identity,
                            holder = %h, "another process leads; standing by");
                        seen_holder = Some(h.clone());
                    }
                }
                NotHeld::Conflict => {
                    tracing::debug!(lease = %cfg.lease_name, identity = %cfg.identity,
                        "the lease changed while acquiring; re-reading");
                }
                NotHeld::Failed(e) => {
                    tracing::warn!(lease = %cfg.lease_name, identity = %cfg.identity,
                        error = %e, "acquiring the lease failed; retrying");
                }
            });
        // Without a limit on the tries, only success ends them.
        if let Ok(held) = tries.await {
            return held;
        }
    }
}

/// Renews every `retry_period`; returns when the Lease is lost.
async fn keep(api: &Api<Lease>, cfg: &LeaderConfig, held: &mut (Lease, Instant), fence: &Fence) {
    loop {
        // Counted from the start of the last successful renewal, which is no later than the
        // renewTime it wrote, so we stop leading before others may take over.
        let deadline = held.1 + cfg.renew_deadline;
        tokio::time::sleep(cfg.retry_period).await;
        let seen = Seen::default();
        let renewal = (|| hold(api, cfg, &seen))
            .retry(every_retry_period(cfg))
            .when(|why| !matches!(why, NotHeld::HeldBy(_)))
            .notify(|why, _| match why {
                NotHeld::Failed(e) => {
                    tracing::warn!(lease = %cfg.lease_name, identity = %cfg.identity,
                        error = %e, "renewing the lease failed; retrying");
                }
                NotHeld::Conflict => {
                    tracing::debug!(lease = %cfg.lease_name, identity = %cfg.identity,
                        "the lease changed while renewing; re-reading");
                }
                // Not retried: ends the renewal below.
                NotHeld::HeldBy(_) => {}
            });
        match tokio::time::timeout_at(deadline, renewal).await {
            Ok(Ok(renewed)) => {
                fence.renewed(renewed.1);
                *held = renewed;
            }
            Ok(Err(NotHeld::HeldBy(h))) => {
                tracing::warn!(lease = %cfg.lease_name, identity = %cfg.identity,
                    holder = %h, "another process took the lease; stopping leading");
                return;
            }
            Ok(Err(_)) | Err(_) => {
                tracing::warn!(lease = %cfg.lease_name, identity = %cfg.identity,
                    renew_deadline = ?cfg.renew_deadline,
                    "no renewal succeeded within the renew deadline; stopping leading");
                return;
            }
        }
    }
}

/// Releases the Lease on shutdown, within `renew_deadline`. If someone else wrote meanwhile,
/// re-reads and releases only what is still ours.
async fn release(api: &Api<Lease>, cfg: &LeaderConfig, held: (Lease, Instant)) {
    let name = &cfg.lease_name;
    let once = async {
        let mut lease = held.0;
        for _ in 0..2 {
            if holder(&lease) != Some(cfg.identity.as_str()) {
                return Ok(false);
            }
            let pp = PostParams::default();
            match api.replace(name, &pp, &released(&lease, micro_now())).await {
                Ok(_) => return Ok(true),
                Err(e) if is_conflict(&e) => match api.get_opt(name).await {
                    Ok(Some(fresh)) => lease = fresh,
                    Ok(None) => return Ok(false),
                    Err(e) => return Err(LeaseError::Read(e)),
                },
                Err(e) => return Err(LeaseError::Update(e)),
            }
        }
        Ok(false)
    };
    match tokio::time::timeout(cfg.renew_deadline, once).await {
        Ok(Ok(true)) => {
            tracing::info!(lease = %name, identity = %cfg.identity, "released the lease");
        }
        Ok(Ok(false)) => {
            tracing::info!(lease = %name, identity = %cfg.identity,
                "the lease is no longer ours; nothing to release");
        }
        Ok(Err(e)) => {
            tracing::warn!(lease = %name, identity = %cfg.identity, error = %e,
                "releasing the lease failed; it expires on its own");
        }
        Err(_elapsed) => {
            tracing::warn!(lease = %name, identity = %cfg.identity,
                "releasing the lease timed out; it expires on its own");
        }
    }
}

pub mod fence;
pub mod preflight;
mod record;

pub use fence::Fence;
pub use record::{Observed, holder, is_expired, may_acquire};
use record::{claimed, micro_now, released};

#[cfg(test)]
mod tests;

/// Resolves once the flag behind `rx` is `want` (or its sender is gone). Unlike
/// `Receiver::wait_for`, the future holds no borrow of the value, so a `select!` over it stays
/// `Send` and the programs' futures can be spawned on a multi-threaded runtime.
pub async fn until(rx: &mut tokio::sync::watch::Receiver<bool>, want: bool) {
    let _ = rx.wait_for(|v| *v == want).await;
}
