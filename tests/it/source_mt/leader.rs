//! High availability of `imagegate source --multi-tenant`: two replicas on one Lease, as
//! `config/multi-tenant/400` runs them (`--leader-elect`). Only the Lease holder serves: the standby is
//! ready, touches nothing but the Lease (no ImageStream watch, no source, no checkpoint) and
//! sends nothing. When the leader is killed the standby takes over once the Lease expires
//! (15 s); when the leader stops (SIGTERM) it flushes every source's checkpoint and releases
//! the Lease, and the standby takes over at once. Either way the changes made meanwhile reach
//! every source exactly once, from each source's checkpoint.
//!
//! Each replica logs in under its own user name, so that the emulator's request log tells them
//! apart (the emulator authorizes no request by RBAC; [`super::rbac`] holds the adapter's
//! requests to `config/`).

use std::time::{Duration, Instant};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::json;

use super::harness::{ADAPTER_USER, Adapter, World, accepted, changes, quiet, until};
use crate::support::lease_holder;
use crate::support::sink::Sink;
use imagegate::adapter::crd::status::reason;

/// The Lease of the multi-tenant adapter.
const LEASE: &str = "imagegate-source-multi-tenant";
/// The user of the second replica (the first is [`ADAPTER_USER`]).
const SECOND_USER: &str = "system:serviceaccount:imagegate-system:imagegate-source-multi-tenant-2";

type Change = (String, String, String);

/// Waits until `pod` holds the Lease.
async fn leads(world: &World, adapter: &Adapter, pod: &str) {
    until(adapter, &format!("{pod} to hold the Lease"), || async {
        lease_holder(&world.emu.client(), LEASE).await.as_deref() == Some(pod)
    })
    .await;
}

/// The `(verb, resource)` of every request `user` made, in order.
async fn requests_of(world: &World, user: &str) -> Vec<(String, String)> {
    (world.emu.requests().await.into_iter())
        .filter(|r| r.user == user)
        .map(|r| (r.verb, r.resource))
        .collect()
}

/// Waits until `user`'s replica asked for the Lease (it contends, as a standby).
async fn contends(world: &World, adapter: &Adapter, user: &str) {
    until(adapter, "the standby to read the Lease", || async {
        requests_of(world, user)
            .await
            .iter()
            .any(|(_, resource)| resource == "leases")
    })
    .await;
}

/// Asserts that `user` touched nothing but the Lease.
async fn only_the_lease(world: &World, user: &str, who: &str) {
    let other: Vec<(String, String)> = requests_of(world, user)
        .await
        .into_iter()
        .filter(|(_, resource)| resource != "leases")
        .collect();
    assert!(
        other.is_empty(),
        "{who} touched more than the Lease: {other:?}"
    );
}

/// Waits until the checkpoint of `ns/name` records `digest` (it is flushed every 0.5 s), as
/// its entries write a sha256 digest: `B` and the 32 bytes in unpadded base64url.
async fn flushed(world: &World, adapter: &Adapter, ns: &str, name: &str, digest: &str) {
    let hex = digest.strip_prefix("sha256:").unwrap();
    let bytes: Vec<u8> = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
        .collect();
    let written = format!("=B{},", URL_SAFE_NO_PAD.encode(bytes));
    until(
        adapter,
        &format!("{ns}/{name}'s checkpoint to hold {digest}"),
        || async {
            (world.checkpoints(ns, name).await.iter())
                .any(|cm| serde_json::to_string(&cm.data).unwrap().contains(&written))
        },
    )
    .await;
}

/// Waits until `sink` accepted `want` after the first `before` events, then for quiet, and
/// asserts that exactly `want` came, once each (in any order across streams).
async fn exactly(adapter: &Adapter, sink: &Sink, before: usize, want: &[Change]) {
    let _ = accepted(adapter, sink, before + want.len()).await;
    quiet(&[sink]).await;
    let mut got = changes(&sink.accepted()[before..]);
    let mut want = want.to_vec();
    got.sort();
    want.sort();
    assert_eq!(got, want, "each change once, nothing resent");
}

#[tokio::test]
async fn the_standby_serves_nothing_until_the_leader_dies_or_stops_then_delivers_what_changed_meanwhile_once()
 {
    let world = World::start().await;
    let (ds, ml) = (Sink::start().await, Sink::start().await);
    for ns in ["ds", "ml"] {
        for is in ["nb", "warm"] {
            world.stream(ns, is).await;
        }
    }
    world
        .source("ds", "team-ds", json!({"sink": {"uri": ds.url}}))
        .await;
    world
        .source("ml", "team-ml", json!({"sink": {"uri": ml.url}}))
        .await;
    let mut first = Adapter::replica(&world, ADAPTER_USER, "replica-1", &["--leader-elect"]);
    leads(&world, &first, "replica-1").await;
    for (ns, name) in [("ds", "team-ds"), ("ml", "team-ml")] {
        world
            .wait_ready(&first, ns, name, "True", reason::READY)
            .await;
    }
    let mut second = Adapter::replica(&world, SECOND_USER, "replica-2", &["--leader-elect"]);
    second.ready().await;
    contends(&world, &second, SECOND_USER).await;
    world.prime("ds", &[&ds]).await;
    world.prime("ml", &[&ml]).await;

    // The leader delivers, once; the standby stays away from everything but the Lease.
    let (ds_before, ml_before) = (ds.accepted().len(), ml.accepted().len());
    let d1 = world.change("ds", "nb").await;
    let m1 = world.change("ml", "nb").await;
    exactly(
        &first,
        &ds,
        ds_before,
        &[("ds".into(), "nb".into(), d1.clone())],
    )
    .await;
    exactly(
        &first,
        &ml,
        ml_before,
        &[("ml".into(), "nb".into(), m1.clone())],
    )
    .await;
    only_the_lease(&world, SECOND_USER, "the standby").await;
    second.ready().await;
    assert_eq!(
        lease_holder(&world.emu.client(), LEASE).await.as_deref(),
        Some("replica-1")
    );

    // The leader dies (no flush, no release) once its checkpoints hold what it delivered.
    flushed(&world, &first, "ds", "team-ds", &d1).await;
    flushed(&world, &first, "ml", "team-ml", &m1).await;
    first.kill();
    let (ds_before, ml_before) = (ds.accepted().len(), ml.accepted().len());
    let d2 = world.change("ds", "nb").await;
    let w2 = world.change("ds", "warm").await;
    let m2 = world.change("ml", "nb").await;
    leads(&world, &second, "replica-2").await;
    exactly(
        &second,
        &ds,
        ds_before,
        &[
            ("ds".into(), "nb".into(), d2),
            ("ds".into(), "warm".into(), w2),
        ],
    )
    .await;
    exactly(&second, &ml, ml_before, &[("ml".into(), "nb".into(), m2)]).await;
    assert!(
        requests_of(&world, SECOND_USER)
            .await
            .iter()
            .any(|(verb, resource)| verb == "watch" && resource == "imagestreams"),
        "the new leader watches ImageStreams"
    );

    // Back to the first replica, which starts again as the standby: the leader stops
    // gracefully, flushing and releasing, and the standby takes over before the Lease could
    // have expired.
    // Ready once it contends: a standby is ready.
    first.restart();
    first.ready().await;
    assert_eq!(
        lease_holder(&world.emu.client(), LEASE).await.as_deref(),
        Some("replica-2"),
        "the restarted replica stands by"
    );
    let (ds_before, ml_before) = (ds.accepted().len(), ml.accepted().len());
    let d3 = world.change("ds", "nb").await;
    exactly(&second, &ds, ds_before, &[("ds".into(), "nb".into(), d3)]).await;
    second.stop().await;
    let released = Instant::now();
    let d4 = world.change("ds", "nb").await;
    let m4 = world.change("ml", "nb").await;
    leads(&world, &first, "replica-1").await;
    let took = released.elapsed();
    assert!(
        took < Duration::from_secs(10),
        "the standby took over {took:?} after the leader stopped: the Lease was released"
    );
    exactly(
        &first,
        &ds,
        ds_before + 1,
        &[("ds".into(), "nb".into(), d4)],
    )
    .await;
    exactly(&first, &ml, ml_before, &[("ml".into(), "nb".into(), m4)]).await;
}
