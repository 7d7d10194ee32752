//! The Lease's record and client-go's rules that read and write it, pure: when a holder has
//! stopped renewing (measured from when this process saw the record change, never from the
//! holder's clock), who may write itself as the holder, and the record a candidate writes to
//! take, renew or release the Lease.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use tokio::time::Instant;

use super::LeaderConfig;

/// What a candidate saw of the Lease: its record and when, on this process's monotonic clock,
/// the record last changed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Observed {
    record: String,
    /// When the record was first seen as it is now.
    pub at: Instant,
}

impl Observed {
    /// Notes `lease` read at `now`: the time moves only when its record changed since `prev`.
    pub(crate) fn note(prev: Option<&Observed>, lease: &Lease, now: Instant) -> Observed {
        let record = serde_json::to_string(&lease.spec).unwrap_or_default();
        match prev {
            Some(p) if p.record == record => p.clone(),
            _ => Observed { record, at: now },
        }
    }
}

/// Whether the Lease's holder has stopped renewing: its record has not changed for its
/// `leaseDurationSeconds` since `observed_at` (when this process saw it change), at `now` on
/// the same clock. A Lease without a spec is expired.
pub fn is_expired(lease: &Lease, observed_at: Instant, now: Instant) -> bool {
    let Some(spec) = &lease.spec else {
        return true;
    };
    let secs = u64::try_from(spec.lease_duration_seconds.unwrap_or(0)).unwrap_or(0);
    observed_at + Duration::from_secs(secs) <= now
}

/// The Lease's holder; `None` when it is free (never held, or released with an empty
/// `holderIdentity`).
pub fn holder(lease: &Lease) -> Option<&str> {
    lease
        .spec
        .as_ref()?
        .holder_identity
        .as_deref()
        .filter(|h| !h.is_empty())
}

/// Whether `identity` may write itself as the holder: the Lease is free, already its own
/// (renewal, or a restart under the same identity), or `expired` ([`is_expired`]).
pub fn may_acquire(lease: &Lease, identity: &str, expired: bool) -> bool {
    match holder(lease) {
        None => true,
        Some(h) if h == identity => true,
        Some(_) => expired,
    }
}

/// The Lease `cfg.identity` writes to hold it at `now`: a new one (transitions 0), a takeover
/// (transitions + 1, new acquireTime) or a renewal (acquireTime and transitions kept). The
/// metadata, resourceVersion included, is kept so the write is conditional.
pub(super) fn claimed(current: Option<&Lease>, cfg: &LeaderConfig, now: Timestamp) -> Lease {
    let mut lease = current.cloned().unwrap_or_else(|| Lease {
        metadata: ObjectMeta {
            name: Some(cfg.lease_name.clone()),
            namespace: Some(cfg.namespace.clone()),
            ..ObjectMeta::default()
        },
        spec: None,
    });
    let old = lease.spec.take().unwrap_or_default();
    let renewal = current.and_then(holder) == Some(cfg.identity.as_str());
    let (acquire_time, transitions) = match current {
        None => (MicroTime(now), 0),
        Some(_) if renewal => (
            old.acquire_time.clone().unwrap_or(MicroTime(now)),
            old.lease_transitions.unwrap_or(0),
        ),
        Some(_) => (
            MicroTime(now),
            old.lease_transitions.unwrap_or(0).saturating_add(1),
        ),
    };
    lease.spec = Some(LeaseSpec {
        holder_identity: Some(cfg.identity.clone()),
        lease_duration_seconds: Some(cfg.lease_duration_seconds()),
        acquire_time: Some(acquire_time),
        renew_time: Some(MicroTime(now)),
        lease_transitions: Some(transitions),
        ..old
    });
    lease
}

/// The Lease a leader writes when it steps down on shutdown (client-go's `ReleaseOnCancel`).
pub(super) fn released(current: &Lease, now: Timestamp) -> Lease {
    let mut lease = current.clone();
    let old = lease.spec.take().unwrap_or_default();
    lease.spec = Some(LeaseSpec {
        holder_identity: Some(String::new()),
        lease_duration_seconds: Some(1),
        acquire_time: Some(MicroTime(now)),
        renew_time: Some(MicroTime(now)),
        ..old
    });
    lease
}

/// The time, to the microsecond a `MicroTime` keeps.
pub(super) fn micro_now() -> Timestamp {
    let now = Timestamp::now();
    Timestamp::from_microsecond(now.as_microsecond()).unwrap_or(now)
}
