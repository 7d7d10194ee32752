//! What the adapter asks the API server about a source's permissions, and when: not on a timer
//! (Knative's SubjectAccessReview flood), but when RBAC changes where the source's reviews ask.
//! A source idle for longer than the old 30 s resync costs no review; a RoleBinding made in a
//! namespace it selects serves that namespace within seconds, and deleting it stops serving it
//! within seconds; an RBAC change in a namespace it does not select asks nothing.

use std::time::{Duration, Instant};

use k8s_openapi::api::rbac::v1::RoleBinding;
use kube::api::{Api, DeleteParams};
use serde_json::json;

use super::harness::{ADAPTER_USER, Adapter, World, accepted, changes, cond, quiet};
use crate::support::sink::Sink;
use imagegate::adapter::crd::status::{condition, reason};

/// How long a grant or a revocation may take to be seen: the settle time, the reviews, the
/// status write, with room for a loaded machine; far below the old 30 s resync.
const SEEN_WITHIN: Duration = Duration::from_secs(10);

/// The SubjectAccessReviews the adapter asked so far.
async fn reviews(world: &World) -> usize {
    (world.emu.requests().await.iter())
        .filter(|r| {
            r.user == ADAPTER_USER && r.resource == "subjectaccessreviews" && r.verb == "create"
        })
        .count()
}

/// Waits up to [`SEEN_WITHIN`] until `ns/name`'s `SufficientPermissions` is `status`.
async fn permitted(world: &World, adapter: &Adapter, name: &str, status: &str) -> Duration {
    let start = Instant::now();
    loop {
        let s = world.status("ds", name).await;
        if cond(&s, condition::SUFFICIENT_PERMISSIONS).is_some_and(|c| c.0 == status) {
            return start.elapsed();
        }
        assert!(
            start.elapsed() < SEEN_WITHIN,
            "ds/{name}'s SufficientPermissions never became {status}: {s:?}\n{}",
            adapter.log()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn permissions_are_asked_again_when_rbac_changes_where_the_source_reads_and_not_on_a_timer() {
    let world = World::start().await;
    let sink = Sink::start().await;
    for ns in ["ds", "ml"] {
        world.stream(ns, "nb").await;
        world.stream(ns, "warm").await;
    }
    world
        .source(
            "ds",
            "reader",
            json!({"sink": {"uri": sink.url}, "namespaces": ["ds", "ml"]}),
        )
        .await;
    let adapter = Adapter::start(&world, &[]);
    world
        .wait_ready(
            &adapter,
            "ds",
            "reader",
            "False",
            reason::INSUFFICIENT_PERMISSIONS,
        )
        .await;
    world.prime("ds", &[&sink]).await;

    // Started, listed and delivering, it was asked about once: three verbs in each of its two
    // namespaces (the observation after its first list reuses what that one asked).
    let asked = reviews(&world).await;
    assert_eq!(asked, 6, "asked once at start");
    // Idle past the old 30 s resync: not one review.
    tokio::time::sleep(Duration::from_secs(35)).await;
    assert_eq!(
        reviews(&world).await,
        asked,
        "an idle source is not asked about on a timer"
    );

    // RBAC changes in ops, which the source does not select: nothing is asked.
    world.grant("ops", "builder", "ops", &["get"]).await;
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(
        reviews(&world).await,
        asked,
        "a change elsewhere asks nothing"
    );

    // Granted in ml: seen within seconds, and ml is served.
    world
        .grant("ds", "watcher", "ml", &["get", "list", "watch"])
        .await;
    let took = permitted(&world, &adapter, "reader", "True").await;
    assert!(reviews(&world).await > asked, "asked again");
    world
        .wait_ready(&adapter, "ds", "reader", "True", reason::READY)
        .await;
    let n = sink.accepted().len();
    let d = world.change("ml", "nb").await;
    assert_eq!(
        changes(&accepted(&adapter, &sink, n + 1).await[n..]),
        [("ml".into(), "nb".into(), d)],
        "ml is served once granted (seen after {took:?})"
    );

    // Revoked in ml: seen within seconds, and ml is no longer served.
    let bindings: Api<RoleBinding> = Api::namespaced(world.emu.client(), "ml");
    bindings
        .delete("read-streams-ds-watcher", &DeleteParams::default())
        .await
        .unwrap();
    permitted(&world, &adapter, "reader", "False").await;
    quiet(&[&sink]).await;
    let n = sink.accepted().len();
    world.change("ml", "nb").await;
    let e = world.change("ds", "nb").await;
    let got = accepted(&adapter, &sink, n + 1).await;
    quiet(&[&sink]).await;
    assert_eq!(
        changes(&sink.accepted()[n..]),
        [("ds".into(), "nb".into(), e)],
        "nothing from ml once revoked: {:?}",
        changes(&got)
    );
}

#[tokio::test]
async fn a_tenant_churning_rbac_in_its_own_namespace_does_not_hold_up_a_revocation_elsewhere() {
    let world = World::start().await;
    let sink = Sink::start().await;
    for ns in ["ds", "ml"] {
        world.stream(ns, "nb").await;
        world.stream(ns, "warm").await;
    }
    world
        .grant("ds", "watcher", "ml", &["get", "list", "watch"])
        .await;
    world
        .source(
            "ds",
            "reader",
            json!({"sink": {"uri": sink.url}, "namespaces": ["ds", "ml"]}),
        )
        .await;
    world.grant("ops", "builder", "ops", &["get"]).await;
    let adapter = Adapter::start(&world, &[]);
    world
        .wait_ready(&adapter, "ds", "reader", "True", reason::READY)
        .await;

    // A tenant of ops changes a RoleBinding of its own namespace every 300 ms, for as long as
    // the test runs.
    let churn = {
        let bindings: Api<RoleBinding> = Api::namespaced(world.emu.client(), "ops");
        tokio::spawn(async move {
            for i in 0u64.. {
                let patch = json!({"metadata": {"labels": {"churn": i.to_string()}}});
                let _ = bindings
                    .patch(
                        "read-streams-ops-builder",
                        &kube::api::PatchParams::default(),
                        &kube::api::Patch::Merge(&patch),
                    )
                    .await;
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
        })
    };
    tokio::time::sleep(Duration::from_secs(1)).await;
    // Revoked in ml meanwhile: still seen within seconds, the churn notwithstanding.
    let bindings: Api<RoleBinding> = Api::namespaced(world.emu.client(), "ml");
    bindings
        .delete("read-streams-ds-watcher", &DeleteParams::default())
        .await
        .unwrap();
    permitted(&world, &adapter, "reader", "False").await;
    churn.abort();
}
