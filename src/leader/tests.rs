//! Tests of leader election: who may acquire a Lease when, the Lease each write produces, config
//! validation, and conflicts against the emulator.

use super::*;

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
    let cases = [
        // (holder, renewTime, leaseDurationSeconds, who asks, expired, may acquire)
        (
            Some("a"),
            Some("2025-01-01T00:00:59Z"),
            Some(15),
            "b",
            false,
            false,
        ),
        (
            Some("a"),
            Some("2025-01-01T00:00:59Z"),
            Some(15),
            "a",
            false,
            true,
        ),
        (
            Some("a"),
            Some("2025-01-01T00:00:46Z"),
            Some(15),
            "b",
            false,
            false,
        ),
        (
            Some("a"),
            Some("2025-01-01T00:00:45Z"),
            Some(15),
            "b",
            true,
            true,
        ),
        (
            Some("a"),
            Some("2025-01-01T00:00:30Z"),
            Some(15),
            "b",
            true,
            true,
        ),
        (
            Some(""),
            Some("2025-01-01T00:00:59.5Z"),
            Some(1),
            "b",
            false,
            true,
        ),
        (
            None,
            Some("2025-01-01T00:00:59Z"),
            Some(15),
            "b",
            false,
            true,
        ),
        (
            Some("a"),
            Some("2025-01-01T00:01:00Z"),
            None,
            "b",
            true,
            true,
        ),
    ];
    for (holder, renewed, duration, who, expired, may) in cases {
        let l = lease(holder, renewed, duration);
        let now = ts(NOW);
        assert_eq!(
            is_expired(&l, now),
            expired,
            "{holder:?} {renewed:?} {duration:?}"
        );
        assert_eq!(
            may_acquire(&l, who, now),
            may,
            "{holder:?} {renewed:?} {who}"
        );
    }
}

#[test]
fn without_renew_time_the_acquire_time_counts() {
    let l = lease(Some("a"), None, Some(15));
    assert!(!is_expired(&l, ts("2025-01-01T00:00:14Z")));
    assert!(is_expired(&l, ts("2025-01-01T00:00:15Z")));
}

#[test]
fn a_lease_without_spec_or_times_is_expired() {
    let mut l = lease(Some("a"), None, Some(15));
    l.spec.as_mut().unwrap().acquire_time = None;
    assert!(is_expired(&l, ts(NOW)));
    l.spec = None;
    assert!(is_expired(&l, ts(NOW)));
    assert!(may_acquire(&l, "b", ts(NOW)));
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
    assert!(may_acquire(&l, "b", now));
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
    crate::tls::install_crypto_provider();
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
