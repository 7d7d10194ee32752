//! The RBAC of `config/` for the multi-tenant adapter against what it really does: the adapter
//! runs as `config/multi-tenant/400` runs it, as its ServiceAccount, through a scenario that takes each of its
//! API paths (sources by selector and by name, each kind of sink, SubjectAccessReviews, a
//! checkpoint written and a deleted source's removed, the Lease taken and released). Then the
//! emulator's request log is checked both ways (`tests/it/rbac`): every request is allowed by
//! exactly the roles `config/` binds to it, and every granted verb was used.

use serde_json::json;

use super::harness::{ADAPTER_USER, Adapter, World, accepted, changes, until};
use crate::support::sink::Sink;
use imagegate::adapter::crd::status::reason;

#[tokio::test]
async fn the_adapter_makes_only_the_calls_config_grants_and_uses_every_grant() {
    let world = World::start().await;
    let (to_broker, to_listener) = (Sink::start().await, Sink::start().await);
    world
        .grant("ds", "watcher", "ml", &["get", "list", "watch"])
        .await;
    world.broker("ds", "default", &to_broker.url).await;
    world.listener("ds", "imagegate", &to_listener.url).await;
    world.service("ds", "display").await;
    for ns in ["ds", "ml"] {
        world.stream(ns, "nb").await;
        world.stream(ns, "warm").await;
    }
    world
        .source(
            "ds",
            "to-broker",
            json!({"sink": {"ref": {"apiVersion": "eventing.knative.dev/v1", "kind": "Broker", "name": "default"}},
                   "namespaceSelector": {"matchLabels": {"team": "a"}}}),
        )
        .await;
    world
        .source(
            "ds",
            "to-listener",
            json!({"sink": {"ref": {"apiVersion": "triggers.tekton.dev/v1beta1", "kind": "EventListener", "name": "imagegate"}}}),
        )
        .await;
    world
        .source(
            "ds",
            "to-service",
            json!({"sink": {"ref": {"apiVersion": "v1", "kind": "Service", "name": "display"}}}),
        )
        .await;
    let mut adapter = Adapter::from_deployment(&world);
    for name in ["to-broker", "to-listener", "to-service"] {
        world
            .wait_ready(&adapter, "ds", name, "True", reason::READY)
            .await;
    }
    world
        .prime("ds", &[&to_broker, &to_listener, &world.cluster])
        .await;
    let n = to_broker.accepted().len();
    let d = world.change("ml", "nb").await;
    assert_eq!(
        changes(&accepted(&adapter, &to_broker, n + 1).await[n..]),
        [("ml".into(), "nb".into(), d)]
    );
    until(&adapter, "the delivery counters written", || async {
        world
            .status("ds", "to-broker")
            .await
            .deliveries
            .is_some_and(|x| x.delivered > 0)
    })
    .await;
    until(&adapter, "a checkpoint of ds/to-listener", || async {
        !world.checkpoints("ds", "to-listener").await.is_empty()
    })
    .await;
    world.delete_source("ds", "to-listener").await;
    until(
        &adapter,
        "the deleted source's checkpoint removed",
        || async { world.checkpoints("ds", "to-listener").await.is_empty() },
    )
    .await;
    adapter.stop().await;

    crate::rbac::assert_least_privilege(&world.emu.requests().await, ADAPTER_USER, &[]);
}
