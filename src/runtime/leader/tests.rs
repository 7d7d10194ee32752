//! Tests of leader election: who may acquire a Lease when, the Lease each write produces, config
//! validation, and conflicts against the emulator.

use super::*;
use k8s_openapi::api::coordination::v1::LeaseSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;

fn ts(s: &str) -> Timestamp {
    s.parse().unwrap()
}

fn lease(holder: Option<&str>, renewed: Option<&str>, duration: Option<i32>) -> Lease {
    Lease {
        metadata: ObjectMeta {
            name: Some("imagegate".into()),
            namespace: Some("ns".into()),
            resource_version: Some("42".into()),
            ..ObjectMeta::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: holder.map(str::to_string),
            renew_time: renewed.map(|t| MicroTime(ts(t))),
            acquire_time: Some(MicroTime(ts("2025-01-01T00:00:00Z"))),
            lease_duration_seconds: duration,
            lease_transitions: Some(3),
            ..LeaseSpec::default()
        }),
    }
}

const NOW: &str = "2025-01-01T00:01:00Z";

#[test]
fn who_may_acquire_when() {
    // (holder, who asks, expired, may acquire)
    let cases = [
        (Some("a"), "b", false, false),
        (Some("a"), "a", false, true),
        (Some("a"), "a", true, true),
        (Some("a"), "b", true, true),
        (Some(""), "b", false, true),
        (None, "b", false, true),
    ];
    for (holder, who, expired, may) in cases {
        let l = lease(holder, Some("2025-01-01T00:00:59Z"), Some(15));
        assert_eq!(
            may_acquire(&l, who, expired),
            may,
            "{holder:?} {who} {expired}"
        );
    }
}

#[test]
fn expiry_is_measured_from_when_the_record_was_seen_to_change_never_from_its_times() {
    let t0 = Instant::now();
    let secs = |s: u64| t0 + Duration::from_secs(s);
    // A renewTime an hour old (a holder whose clock is behind ours) is not expired when first seen.
    let l = lease(Some("a"), Some("2025-01-01T00:00:00Z"), Some(15));
    let seen = Observed::note(None, &l, t0);
    assert!(!is_expired(&l, seen.at, secs(14)));
    assert!(is_expired(&l, seen.at, secs(15)));
    // The same record read again later: the time it was seen to change stays.
    let again = Observed::note(Some(&seen), &l, secs(10));
    assert_eq!(again.at, t0);
    // A renewal (any change of the record) restarts the count, whatever time it writes.
    let renewed = lease(Some("a"), Some("2024-12-31T23:00:00Z"), Some(15));
    let after = Observed::note(Some(&again), &renewed, secs(14));
    assert_eq!(after.at, secs(14));
    assert!(!is_expired(&renewed, after.at, secs(28)));
    assert!(is_expired(&renewed, after.at, secs(29)));
    // A record without a duration is expired at once; one without a spec too.
    let no_duration = lease(Some("a"), None, None);
    assert!(is_expired(&no_duration, t0, t0));
    let mut no_spec = lease(Some("a"), None, Some(15));
    no_spec.spec = None;
    assert!(is_expired(&no_spec, t0, t0));
    assert!(may_acquire(&no_spec, "b", true));
}

fn cfg(identity: &str) -> LeaderConfig {
    LeaderConfig::new("imagegate", "ns", identity)
}

#[test]
fn a_new_lease_starts_with_zero_transitions() {
    let now = ts(NOW);
    let l = claimed(None, &cfg("b"), now);
    assert_eq!(l.metadata.name.as_deref(), Some("imagegate"));
    assert_eq!(l.metadata.namespace.as_deref(), Some("ns"));
    assert_eq!(l.metadata.resource_version, None);
    let spec = l.spec.unwrap();
    assert_eq!(spec.holder_identity.as_deref(), Some("b"));
    assert_eq!(spec.lease_duration_seconds, Some(15));
    assert_eq!(spec.lease_transitions, Some(0));
    assert_eq!(spec.acquire_time, Some(MicroTime(now)));
    assert_eq!(spec.renew_time, Some(MicroTime(now)));
}

#[test]
fn a_takeover_counts_a_transition_and_keeps_the_resource_version() {
    let now = ts(NOW);
    let old = lease(Some("a"), Some("2025-01-01T00:00:30Z"), Some(15));
    let l = claimed(Some(&old), &cfg("b"), now);
    assert_eq!(l.metadata.resource_version.as_deref(), Some("42"));
    let spec = l.spec.unwrap();
    assert_eq!(spec.holder_identity.as_deref(), Some("b"));
    assert_eq!(spec.lease_transitions, Some(4));
    assert_eq!(spec.acquire_time, Some(MicroTime(now)));
    assert_eq!(spec.renew_time, Some(MicroTime(now)));
}

#[test]
fn a_renewal_keeps_acquire_time_and_transitions() {
    let now = ts(NOW);
    let old = lease(Some("a"), Some("2025-01-01T00:00:59Z"), Some(15));
    let l = claimed(Some(&old), &cfg("a"), now);
    assert_eq!(l.metadata.resource_version.as_deref(), Some("42"));
    let spec = l.spec.unwrap();
    assert_eq!(spec.lease_transitions, Some(3));
    assert_eq!(
        spec.acquire_time,
        Some(MicroTime(ts("2025-01-01T00:00:00Z")))
    );
    assert_eq!(spec.renew_time, Some(MicroTime(now)));
}

#[test]
fn a_release_empties_the_holder_and_shortens_the_lease() {
    let now = ts(NOW);
    let old = lease(Some("a"), Some("2025-01-01T00:00:59Z"), Some(15));
    let l = released(&old, now);
    assert_eq!(l.metadata.resource_version.as_deref(), Some("42"));
    let spec = l.spec.as_ref().unwrap();
    assert_eq!(spec.holder_identity.as_deref(), Some(""));
    assert_eq!(spec.lease_duration_seconds, Some(1));
    assert_eq!(spec.lease_transitions, Some(3));
    assert_eq!(holder(&l), None);
    assert!(may_acquire(&l, "b", false));
}

#[test]
fn times_are_written_with_microseconds() {
    let l = claimed(None, &cfg("a"), ts("2025-01-01T00:01:00.123456789Z"));
    let json = serde_json::to_value(&l).unwrap();
    assert_eq!(json["spec"]["renewTime"], "2025-01-01T00:01:00.123456Z");
    assert_eq!(json["spec"]["acquireTime"], "2025-01-01T00:01:00.123456Z");
    let now = micro_now();
    assert_eq!(now.subsec_nanosecond() % 1000, 0);
}

#[test]
fn lease_duration_seconds_round_up() {
    let mut c = cfg("a");
    c.lease_duration = Duration::from_millis(1500);
    assert_eq!(c.lease_duration_seconds(), 2);
    c.lease_duration = Duration::from_millis(10);
    assert_eq!(c.lease_duration_seconds(), 1);
}

#[test]
fn configs_that_could_lead_twice_are_invalid() {
    assert_eq!(cfg("a").validate(), Ok(()));
    let mut c = cfg("a");
    c.renew_deadline = c.lease_duration;
    assert!(matches!(
        c.validate(),
        Err(InvalidLeaderConfig::RenewDeadlineNotShorterThanLease { .. })
    ));
    let mut c = cfg("a");
    c.retry_period = c.renew_deadline;
    assert!(matches!(
        c.validate(),
        Err(InvalidLeaderConfig::RetryPeriodNotShorterThanRenewDeadline { .. })
    ));
}

#[tokio::test]
async fn a_write_from_a_stale_read_conflicts_and_changes_nothing() {
    crate::runtime::tls::install_crypto_provider();
    let emu = imagegate_emulator::Emulator::start(Default::default())
        .await
        .unwrap();
    let api = Api::<Lease>::namespaced(emu.client().unwrap(), "default");
    let c = LeaderConfig::new("imagegate", "default", "a");
    let now = micro_now();
    let created = api
        .create(&PostParams::default(), &claimed(None, &c, now))
        .await;
    let stale = created.unwrap();

    // The holder renews in between, so `stale` no longer carries the current version.
    let renewal = claimed(Some(&stale), &c, micro_now());
    api.replace("imagegate", &PostParams::default(), &renewal)
        .await
        .unwrap();

    let takeover = claimed(
        Some(&stale),
        &LeaderConfig::new("imagegate", "default", "b"),
        now,
    );
    let outcome = write(&api, Some(&stale), &takeover, Instant::now()).await;
    assert!(matches!(outcome, Ok(Attempt::Conflict)), "{outcome:?}");
    let now = api.get("imagegate").await.unwrap();
    assert_eq!(holder(&now), Some("a"));
    emu.shutdown().await;
}
