//! The Lease as a fence for the leader's writes (security review F-11): a write starts only
//! while this process holds a renewal younger than `renew_deadline`, and must have landed before
//! `lease_duration` has passed since that renewal began; else it is not made, or abandoned.
//!
//! Why that is enough: a standby takes the Lease only once its record has not changed for
//! `lease_duration` on the standby's own monotonic clock, counted from when it saw the record
//! change, which is after the renewal began. So a write that lands within `lease_duration` of
//! the start of a renewal lands before any other process may lead, whatever the clocks of the
//! nodes say (only their rates are assumed alike, as client-go assumes). A process that stopped
//! leading, or could not renew within `renew_deadline`, writes nothing more.
//!
//! What the fence cannot stop: a request the client gave up on that the API server still holds
//! and applies later (the server's own timeout is 60 s). Such a write is one the leader made
//! while it led; if it lands over a newer leader's entry, that stream's entry is older than what
//! was delivered, and a later start sends its current tags again: a duplicate, never a loss.
//! [`Fence`] holds the last renewal, set by the election ([`super::spawn`]).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

/// Why a write may not be made now.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "this process no longer holds a fresh lease renewal (last {since:?} ago, or never): the write is not made, so that it cannot land after another replica took over"
)]
pub struct Fenced {
    /// How long ago the last renewal began (None: not leading).
    pub since: Option<Duration>,
}

/// The latest instant a write started at `now` may land, given when the last renewal of the
/// Lease began (None: this process does not lead): `renewed + lease_duration`, if `now` is
/// within `renew_deadline` of `renewed`; else [`Fenced`].
pub(crate) fn write_deadline(
    renewed: Option<Instant>,
    lease_duration: Duration,
    renew_deadline: Duration,
    now: Instant,
) -> Result<Instant, Fenced> {
    let Some(renewed) = renewed else {
        return Err(Fenced { since: None });
    };
    let since = now.saturating_duration_since(renewed);
    if since >= renew_deadline {
        return Err(Fenced { since: Some(since) });
    }
    Ok(renewed + lease_duration)
}

#[derive(Debug, Default)]
struct State {
    /// Whether writes are fenced at all (leader election on).
    elected: bool,
    /// When the last renewal began (None: not leading).
    renewed: Option<Instant>,
    lease_duration: Duration,
    renew_deadline: Duration,
}

/// The fence the leader's writes go through. Without leader election it never refuses.
#[derive(Clone, Debug, Default)]
pub struct Fence(Arc<Mutex<State>>);

impl Fence {
    /// A fence for a process that leads under `cfg`: closed until the Lease is first held.
    pub fn elected(cfg: &super::LeaderConfig) -> Fence {
        Fence(Arc::new(Mutex::new(State {
            elected: true,
            renewed: None,
            lease_duration: cfg.lease_duration,
            renew_deadline: cfg.renew_deadline,
        })))
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The Lease was acquired or renewed by an attempt that began at `at`.
    pub(crate) fn renewed(&self, at: Instant) {
        self.state().renewed = Some(at);
    }

    /// This process stopped leading: no write passes any more.
    pub(crate) fn lost(&self) {
        self.state().renewed = None;
    }

    /// Until when a write started now may land (None: no limit, no leader election); or why
    /// it may not be made.
    pub fn deadline(&self) -> Result<Option<Instant>, Fenced> {
        let s = self.state();
        if !s.elected {
            return Ok(None);
        }
        write_deadline(
            s.renewed,
            s.lease_duration,
            s.renew_deadline,
            Instant::now(),
        )
        .map(Some)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LEASE: Duration = Duration::from_secs(15);
    const RENEW: Duration = Duration::from_secs(10);

    #[test]
    fn a_write_must_land_before_the_lease_can_pass_to_another() {
        let t0 = Instant::now();
        assert_eq!(write_deadline(Some(t0), LEASE, RENEW, t0), Ok(t0 + LEASE));
        let later = t0 + Duration::from_secs(9);
        assert_eq!(
            write_deadline(Some(t0), LEASE, RENEW, later),
            Ok(t0 + LEASE),
            "the deadline is counted from the renewal, not from the write"
        );
    }

    #[test]
    fn no_write_starts_once_the_renewal_is_older_than_the_renew_deadline_or_none_is_held() {
        let t0 = Instant::now();
        let stale = t0 + RENEW;
        assert_eq!(
            write_deadline(Some(t0), LEASE, RENEW, stale),
            Err(Fenced { since: Some(RENEW) })
        );
        assert_eq!(
            write_deadline(None, LEASE, RENEW, t0),
            Err(Fenced { since: None })
        );
    }

    #[test]
    fn without_leader_election_the_fence_never_refuses_and_with_it_it_follows_the_lease() {
        assert_eq!(Fence::default().deadline(), Ok(None));
        let cfg = crate::runtime::leader::LeaderConfig::new("l", "ns", "me");
        let fence = Fence::elected(&cfg);
        assert!(fence.deadline().is_err(), "closed until the Lease is held");
        fence.renewed(Instant::now());
        assert!(fence.deadline().unwrap().is_some());
        fence.lost();
        assert!(fence.deadline().is_err(), "closed once leading stopped");
    }
}
