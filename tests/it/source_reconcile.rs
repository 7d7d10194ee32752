//! The ImageStreamSource reconciler against the emulated API: our CRD, Knative's released
//! Broker CRD and Tekton Triggers' released EventListener CRD registered, the sinks' addresses
//! written to their status as their controllers write them, and SubjectAccessReviews answered
//! from the stored RBAC. Each test reads back the status the real `reconcile` wrote.

use imagegate::adapter::crd::status::{condition, reason};
use imagegate::adapter::crd::{ImageStreamSource, ImageStreamSourceStatus};
use imagegate::adapter::reconcile::{self, Context};
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use serde_json::{Value, json};

use crate::support::mt;
use crate::support::{EmulatorServer, eventually};

const BROKER_URL: &str = "http://broker-ingress.knative-eventing.svc.cluster.local/ds/default";
const LISTENER_URL: &str = "http://el-imagegate.ds.svc.cluster.local:8080";
const API_SERVER: &str = "https://172.30.0.1:443";

/// An emulator with the three CRDs, namespaces `ds` (team=a) and `ml` (team=a) and `ops`, and
/// the service account `ds/watcher` allowed to read ImageStreams in `ds` only.
async fn setup() -> (EmulatorServer, Context) {
    let emu = EmulatorServer::start().await;
    for (ns, team) in [("ds", "a"), ("ml", "a"), ("ops", "b")] {
        emu.seed(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns, "labels": {"team": team}}}))
            .await;
    }
    mt::install_source_crd(&emu).await;
    mt::install_sink_crds(&emu).await;
    grant(&emu, "ds", &["get", "list", "watch"]).await;
    let ctx = Context {
        client: emu.client(),
        cluster_domain: "cluster.local".into(),
        api_server_url: API_SERVER.into(),
        identity: None,
        guard: imagegate::source::deliver::guard::Guard {
            allowed: vec!["127.0.0.1".into()],
            ..Default::default()
        },
    };
    (emu, ctx)
}

/// Lets `ds/watcher` do `verbs` on ImageStreams in `ns`.
async fn grant(emu: &EmulatorServer, ns: &str, verbs: &[&str]) {
    emu.seed(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": "read-streams", "namespace": ns},
        "rules": [{"apiGroups": ["image.openshift.io"], "resources": ["imagestreams"], "verbs": verbs}]
    }))
    .await;
    emu.seed(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "watcher-reads-streams", "namespace": ns},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "read-streams"},
        "subjects": [{"kind": "ServiceAccount", "name": "watcher", "namespace": "ds"}]
    }))
    .await;
}

/// Creates `kind` `ds/name` and writes `status` as its controller would.
async fn sink(
    emu: &EmulatorServer,
    api_version: &str,
    kind: &str,
    plural: &str,
    name: &str,
    spec: Value,
    status: Value,
) {
    let (group, version) = api_version.split_once('/').unwrap();
    let resource =
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural);
    let api: Api<DynamicObject> = Api::namespaced_with(emu.client(), "ds", &resource);
    let object: DynamicObject = serde_json::from_value(json!({
        "apiVersion": api_version, "kind": kind, "metadata": {"name": name}, "spec": spec
    }))
    .unwrap();
    if api.get_opt(name).await.unwrap().is_none() {
        api.create(&PostParams::default(), &object).await.unwrap();
    }
    api.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Merge(&json!({"status": status})),
    )
    .await
    .unwrap();
}

async fn broker(emu: &EmulatorServer, url: &str) {
    sink(
        emu,
        "eventing.knative.dev/v1",
        "Broker",
        "brokers",
        "default",
        json!({}),
        json!({"address": {"name": "http", "url": url}, "addresses": [{"name": "http", "url": url}],
               "conditions": [{"type": "Ready", "status": "True"}]}),
    )
    .await;
}

async fn event_listener(emu: &EmulatorServer) {
    sink(
        emu,
        "triggers.tekton.dev/v1beta1",
        "EventListener",
        "eventlisteners",
        "imagegate",
        json!({"serviceAccountName": "imagegate-triggers", "triggers": []}),
        json!({"address": {"url": LISTENER_URL}, "configuration": {"generatedName": "el-imagegate"}}),
    )
    .await;
}

/// Creates the source `ds/name` with `spec` (the service account `watcher` unless it names
/// one) and reconciles it once; its status as written.
async fn reconciled(ctx: &Context, name: &str, mut spec: Value) -> ImageStreamSourceStatus {
    spec.as_object_mut()
        .unwrap()
        .entry("serviceAccountName")
        .or_insert(json!("watcher"));
    let api: Api<ImageStreamSource> = Api::namespaced(ctx.client.clone(), "ds");
    let source = ImageStreamSource::new(name, serde_json::from_value(spec).unwrap());
    api.create(&PostParams::default(), &source).await.unwrap();
    again(ctx, name).await
}

/// Reconciles `ds/name` once more; its status as written.
async fn again(ctx: &Context, name: &str) -> ImageStreamSourceStatus {
    let api: Api<ImageStreamSource> = Api::namespaced(ctx.client.clone(), "ds");
    let source = api.get(name).await.unwrap();
    reconcile::reconcile(&source, ctx).await.unwrap();
    api.get(name).await.unwrap().status.unwrap_or_default()
}

fn cond(s: &ImageStreamSourceStatus, ty: &str) -> (String, String, String) {
    let c = s
        .conditions
        .iter()
        .find(|c| c.r#type == ty)
        .unwrap_or_else(|| panic!("no {ty} in {s:?}"));
    (
        c.status.clone(),
        c.reason.clone().unwrap_or_default(),
        c.message.clone().unwrap_or_default(),
    )
}

fn ready(s: &ImageStreamSourceStatus) -> (String, String) {
    let (status, reason, _) = cond(s, condition::READY);
    (status, reason)
}

#[tokio::test]
async fn a_source_is_ready_with_each_kind_of_sink() {
    let (emu, ctx) = setup().await;
    broker(&emu, BROKER_URL).await;
    event_listener(&emu).await;
    emu.seed(json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "display", "namespace": "ds"},
                    "spec": {"ports": [{"port": 80, "targetPort": 8080}]}}))
        .await;
    let cases = [
        (
            "to-broker",
            json!({"ref": {"apiVersion": "eventing.knative.dev/v1", "kind": "Broker", "name": "default"}}),
            BROKER_URL,
        ),
        (
            "to-listener",
            json!({"ref": {"apiVersion": "triggers.tekton.dev/v1beta1", "kind": "EventListener", "name": "imagegate", "namespace": "ds"}, "uri": "/images"}),
            "http://el-imagegate.ds.svc.cluster.local:8080/images",
        ),
        (
            "to-service",
            json!({"ref": {"apiVersion": "v1", "kind": "Service", "name": "display"}}),
            "http://display.ds.svc.cluster.local",
        ),
        (
            "to-uri",
            json!({"uri": "https://hooks.example.com/in", "CACerts": "PEM"}),
            "https://hooks.example.com/in",
        ),
    ];
    for (name, sink, url) in cases {
        let status = reconciled(&ctx, name, json!({"sink": sink})).await;
        assert_eq!(
            ready(&status),
            ("True".into(), reason::READY.into()),
            "{name}: {status:?}"
        );
        assert_eq!(status.sink_uri.as_deref(), Some(url), "{name}");
        assert_eq!(status.observed_generation, Some(1));
        assert_eq!(status.ce_attributes.len(), 3);
    }
    let status = again(&ctx, "to-uri").await;
    assert_eq!(status.sink_ca_certs.as_deref(), Some("PEM"));
}

#[tokio::test]
async fn a_sink_that_is_missing_then_unaddressed_then_moves_is_followed() {
    let (emu, ctx) = setup().await;
    let spec = json!({"sink": {"ref": {"apiVersion": "eventing.knative.dev/v1", "kind": "Broker", "name": "default"}}, "mode": "reference"});
    let status = reconciled(&ctx, "team-a", spec).await;
    assert_eq!(
        ready(&status),
        ("False".into(), reason::SINK_NOT_FOUND.into())
    );
    let (_, _, message) = cond(&status, condition::SINK_PROVIDED);
    assert!(
        message.contains("Broker ds/default (eventing.knative.dev/v1), which does not exist"),
        "{message}"
    );
    assert_eq!(status.sink_uri, None);
    assert_eq!(status.ce_attributes[0].source.as_deref(), Some(API_SERVER));

    sink(
        &emu,
        "eventing.knative.dev/v1",
        "Broker",
        "brokers",
        "default",
        json!({}),
        json!({"conditions": [{"type": "Ready", "status": "Unknown"}]}),
    )
    .await;
    let status = again(&ctx, "team-a").await;
    assert_eq!(
        ready(&status),
        ("False".into(), reason::SINK_NOT_ADDRESSABLE.into())
    );

    broker(&emu, BROKER_URL).await;
    let status = again(&ctx, "team-a").await;
    assert_eq!(ready(&status).0, "True");
    assert_eq!(status.sink_uri.as_deref(), Some(BROKER_URL));

    let moved = "http://kafka-broker-ingress.knative-eventing.svc.cluster.local/ds/default";
    broker(&emu, moved).await;
    let status = again(&ctx, "team-a").await;
    assert_eq!(status.sink_uri.as_deref(), Some(moved));
}

#[tokio::test]
async fn an_account_without_permission_in_a_namespace_it_named_is_told_the_verbs_there() {
    let (emu, ctx) = setup().await;
    broker(&emu, BROKER_URL).await;
    grant(&emu, "ml", &["get"]).await;
    let sink = json!({"ref": {"apiVersion": "eventing.knative.dev/v1", "kind": "Broker", "name": "default"}});
    let status = reconciled(
        &ctx,
        "by-selector",
        json!({"sink": sink, "namespaceSelector": {"matchLabels": {"team": "a"}}}),
    )
    .await;
    assert_eq!(
        ready(&status),
        ("False".into(), reason::INSUFFICIENT_PERMISSIONS.into())
    );
    let (st, _, message) = cond(&status, condition::SUFFICIENT_PERMISSIONS);
    assert_eq!(st, "False");
    assert!(
        message.contains("service account \"ds/watcher\""),
        "{message}"
    );
    // Found by the selector: counted, never named (F-7).
    assert!(
        message.contains("it lacks a verb in 1 namespace its namespaceSelector selects")
            && !message.contains("ml"),
        "{message}"
    );
    assert!(!message.contains("\"ds\""), "ds is granted: {message}");
    assert_eq!(
        cond(&status, condition::SINK_PROVIDED).0,
        "True",
        "the sink still resolved"
    );
    // Named by the tenant: named back, with the verbs.
    let status = reconciled(
        &ctx,
        "by-name",
        json!({"sink": sink, "namespaces": ["ds", "ml"]}),
    )
    .await;
    let (_, _, message) = cond(&status, condition::SUFFICIENT_PERMISSIONS);
    assert!(
        message.contains("it lacks list, watch in namespace \"ml\""),
        "{message}"
    );

    let status = reconciled(&ctx, "own-namespace", json!({"sink": sink})).await;
    assert_eq!(
        ready(&status).0,
        "True",
        "without a selection: the source's own namespace"
    );
    let status = reconciled(
        &ctx,
        "everywhere",
        json!({"sink": sink, "namespaceSelector": {}}),
    )
    .await;
    let (_, _, message) = cond(&status, condition::SUFFICIENT_PERMISSIONS);
    assert!(message.contains("cluster-wide"), "{message}");
    let status = reconciled(
        &ctx,
        "default-account",
        json!({"sink": sink, "serviceAccountName": ""}),
    )
    .await;
    let (_, _, message) = cond(&status, condition::SUFFICIENT_PERMISSIONS);
    assert!(
        message.contains("system:serviceaccount:ds:default"),
        "{message}"
    );
}

#[tokio::test]
async fn a_contradictory_spec_is_not_ready_and_an_unchanged_source_is_not_written_again() {
    let (emu, ctx) = setup().await;
    broker(&emu, BROKER_URL).await;
    let status = reconciled(
        &ctx,
        "both",
        json!({"sink": {"uri": "http://x.y"}, "namespaces": ["ds"], "namespaceSelector": {}}),
    )
    .await;
    assert_eq!(
        ready(&status),
        ("False".into(), reason::INVALID_SPEC.into())
    );
    let status = reconciled(&ctx, "bad-operator", json!({"sink": {"uri": "http://x.y"}, "selector": {"matchExpressions": [{"key": "a", "operator": "Has"}]}})).await;
    let (_, _, message) = cond(&status, condition::READY);
    assert!(message.contains("operator \"Has\""), "{message}");

    let spec = json!({"sink": {"ref": {"apiVersion": "eventing.knative.dev/v1", "kind": "Broker", "name": "default"}}});
    reconciled(&ctx, "steady", spec).await;
    let api: Api<ImageStreamSource> = Api::namespaced(ctx.client.clone(), "ds");
    let source = api.get("steady").await.unwrap();
    assert!(
        !reconcile::reconcile(&source, &ctx).await.unwrap(),
        "nothing changed: nothing written"
    );
    assert_eq!(
        api.get("steady").await.unwrap().metadata.resource_version,
        source.metadata.resource_version
    );
}

#[tokio::test]
async fn the_running_reconciler_writes_the_status_of_a_new_source() {
    let (emu, ctx) = setup().await;
    event_listener(&emu).await;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(reconcile::run(ctx.clone(), async move {
        let _ = stopped.await;
    }));
    let api: Api<ImageStreamSource> = Api::namespaced(ctx.client.clone(), "ds");
    let spec = json!({"sink": {"ref": {"apiVersion": "triggers.tekton.dev/v1beta1", "kind": "EventListener", "name": "imagegate"}},
                      "serviceAccountName": "watcher"});
    api.create(
        &PostParams::default(),
        &ImageStreamSource::new("live", serde_json::from_value(spec).unwrap()),
    )
    .await
    .unwrap();
    eventually("the reconciler marks the new source Ready", || async {
        let status = api.get("live").await.unwrap().status;
        status.is_some_and(|s| s.sink_uri.as_deref() == Some(LISTENER_URL) && ready(&s).0 == "True")
    })
    .await;
    let _ = stop.send(());
    tokio::time::timeout(std::time::Duration::from_secs(10), running)
        .await
        .unwrap()
        .unwrap();
}
