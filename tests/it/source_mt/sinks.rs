//! Sinks end to end: one `imagegate source --multi-tenant` serving sources whose sinks are a
//! Broker, an EventListener, a core Service and a URI, each event arriving at a real HTTP
//! receiver; `Ready` and each reason it is `False` for, with the exact message; a sink that
//! moves or goes and comes back, followed within [`FOLLOW`] (the sink watch, not the 30 s
//! resync); and the delivery counters in each source's status against what the sinks received.

use serde_json::json;

use super::harness::{Adapter, World, accepted, changes, cond, quiet, until};
use crate::support::sink::Sink;
use imagegate::adapter::crd::status::{condition, reason};

const BROKER: &str = "eventing.knative.dev/v1";
const LISTENER: &str = "triggers.tekton.dev/v1beta1";

/// How soon a source follows its sink object's change: the sink watch sees it at once; the
/// resync, every 30 s, would take longer (unless the change lands just before one).
const FOLLOW: std::time::Duration = std::time::Duration::from_secs(5);

/// Asserts that what happened since `since` took no longer than [`FOLLOW`].
fn followed(what: &str, since: std::time::Instant) {
    let took = since.elapsed();
    assert!(
        took < FOLLOW,
        "{what} took {took:?}: the sink watch did not see the change (the resync did)"
    );
}

fn broker_ref(name: &str) -> serde_json::Value {
    json!({"ref": {"apiVersion": BROKER, "kind": "Broker", "name": name}})
}

#[tokio::test]
async fn events_reach_a_broker_an_event_listener_a_service_and_a_uri() {
    let world = World::start().await;
    let (to_broker, to_listener, to_uri) = (
        Sink::start().await,
        Sink::start().await,
        Sink::start().await,
    );
    world.broker("ds", "default", &to_broker.url).await;
    world.listener("ds", "imagegate", &to_listener.url).await;
    world.service("ds", "display").await;
    world.stream("ds", "nb").await;
    world.stream("ds", "warm").await;
    let cases = [
        ("to-broker", broker_ref("default"), to_broker.url.clone()),
        (
            "to-listener",
            json!({"ref": {"apiVersion": LISTENER, "kind": "EventListener", "name": "imagegate", "namespace": "ds"}}),
            to_listener.url.clone(),
        ),
        (
            "to-service",
            json!({"ref": {"apiVersion": "v1", "kind": "Service", "name": "display"}}),
            "http://display.ds.svc.cluster.local".to_string(),
        ),
        ("to-uri", json!({"uri": to_uri.url}), to_uri.url.clone()),
    ];
    for (name, sink, _) in &cases {
        world.source("ds", name, json!({"sink": sink})).await;
    }
    let adapter = Adapter::start(&world, &[]);
    for (name, _, url) in &cases {
        let status = world
            .wait_ready(&adapter, "ds", name, "True", reason::READY)
            .await;
        assert_eq!(status.sink_uri.as_deref(), Some(url.as_str()), "{name}");
        assert_eq!(
            cond(&status, condition::SINK_PROVIDED).unwrap(),
            (
                "True".into(),
                reason::SINK_RESOLVED.into(),
                format!("events go to {url}")
            ),
            "{name}"
        );
        assert_eq!(status.ce_attributes.len(), 3, "{name}: {status:?}");
    }
    let sinks = [&to_broker, &to_listener, &world.cluster, &to_uri];
    world.prime("ds", &sinks).await;
    let before: Vec<usize> = sinks.iter().map(|s| s.accepted().len()).collect();

    let d = world.change("ds", "nb").await;
    for (sink, n) in sinks.iter().zip(&before) {
        let events = accepted(&adapter, sink, n + 1).await;
        assert_eq!(
            changes(&events[*n..]),
            [("ds".into(), "nb".into(), d.clone())],
            "{}: exactly the one change",
            sink.url
        );
    }
    quiet(&sinks).await;
    for (sink, n) in sinks.iter().zip(&before) {
        assert_eq!(sink.accepted().len(), n + 1, "{}: nothing more", sink.url);
    }
    let hosts: Vec<String> = world
        .cluster
        .received()
        .into_iter()
        .map(|r| r.host)
        .collect();
    assert!(
        hosts.iter().all(|h| h == "display.ds.svc.cluster.local"),
        "the Service sink is addressed by its cluster-local name: {hosts:?}"
    );

    // The counters in each status match what its sink took.
    for ((name, _, _), sink) in cases.iter().zip(sinks) {
        let took = sink.accepted().len() as i64;
        until(&adapter, &format!("{name}'s status.deliveries"), || async {
            world.status("ds", name).await.deliveries.is_some_and(|d| {
                d.delivered == took
                    && d.dead_lettered == 0
                    && d.failed == 0
                    && d.last_delivered_time.is_some()
            })
        })
        .await;
    }
}

#[tokio::test]
async fn each_reason_a_source_is_not_ready_for_is_reported_with_what_to_do() {
    let world = World::start().await;
    world
        .addressable(
            BROKER,
            "Broker",
            "brokers",
            "ds",
            "pending",
            json!({}),
            json!({"conditions": [{"type": "Ready", "status": "Unknown"}]}),
        )
        .await;
    world
        .source("ds", "missing", json!({"sink": broker_ref("absent")}))
        .await;
    world
        .source("ds", "unaddressed", json!({"sink": broker_ref("pending")}))
        .await;
    world.source("ds", "no-sink", json!({"sink": {}})).await;
    world
        .source(
            "ds",
            "absolute-beside-ref",
            json!({"sink": {"ref": {"apiVersion": BROKER, "kind": "Broker", "name": "pending"}, "uri": "http://x.example/"}}),
        )
        .await;
    world
        .source(
            "ds",
            "denied",
            json!({"sink": {"uri": "http://x.example/"}, "serviceAccountName": "nobody"}),
        )
        .await;
    world
        .source(
            "ds",
            "contradictory",
            json!({"sink": {"uri": "http://x.example/"}, "namespaces": ["ds"], "namespaceSelector": {}}),
        )
        .await;
    let adapter = Adapter::start(&world, &[]);
    let not_addressable = "has no address (status.addresses or status.address): wait until it is \
         Ready, or point spec.sink at an object that has an address (a Broker, a Knative Service, \
         an EventListener, a v1 Service)";
    let cases = [
        (
            "missing",
            condition::SINK_PROVIDED,
            reason::SINK_NOT_FOUND,
            "spec.sink.ref names Broker ds/absent (eventing.knative.dev/v1), which does not \
             exist: create it or fix the ref"
                .to_string(),
        ),
        (
            "unaddressed",
            condition::SINK_PROVIDED,
            reason::SINK_NOT_ADDRESSABLE,
            format!("Broker ds/pending (eventing.knative.dev/v1) {not_addressable}"),
        ),
        (
            "no-sink",
            condition::SINK_PROVIDED,
            reason::SINK_INVALID,
            "spec.sink has neither ref nor uri: set one".to_string(),
        ),
        (
            "absolute-beside-ref",
            condition::SINK_PROVIDED,
            reason::SINK_INVALID,
            "spec.sink.uri \"http://x.example/\" is absolute, but beside spec.sink.ref only a \
             URI relative to the object's address is allowed: remove the ref or make the URI a \
             path"
                .to_string(),
        ),
        (
            "denied",
            condition::SUFFICIENT_PERMISSIONS,
            reason::INSUFFICIENT_PERMISSIONS,
            "service account \"ds/nobody\" (system:serviceaccount:ds:nobody) may not read \
             imagestreams.image.openshift.io: it lacks get, list, watch in namespace \"ds\"; \
             grant it get, list and watch on imagestreams (image.openshift.io) there, for \
             example with a RoleBinding per namespace, or select fewer namespaces"
                .to_string(),
        ),
        (
            "contradictory",
            condition::READY,
            reason::INVALID_SPEC,
            "spec.namespaces and spec.namespaceSelector are both set: keep one".to_string(),
        ),
    ];
    for (name, ty, why, message) in cases {
        let status = world.wait_ready(&adapter, "ds", name, "False", why).await;
        assert_eq!(
            cond(&status, ty).unwrap(),
            ("False".into(), why.into(), message.clone()),
            "{name}: {status:?}"
        );
        assert_eq!(
            cond(&status, condition::READY).unwrap().2,
            message,
            "{name}: Ready says why"
        );
        let resolved = (name == "denied").then(|| "http://x.example/".to_string());
        assert_eq!(
            status.sink_uri, resolved,
            "{name}: the sink, where it resolved"
        );
    }
}

#[tokio::test]
async fn a_sink_that_moves_gets_the_next_events_at_its_new_address() {
    let world = World::start().await;
    let (first, second) = (Sink::start().await, Sink::start().await);
    world.broker("ds", "default", &first.url).await;
    world.stream("ds", "nb").await;
    world.stream("ds", "warm").await;
    world
        .source("ds", "team", json!({"sink": broker_ref("default")}))
        .await;
    let adapter = Adapter::start(&world, &[]);
    world
        .wait_ready(&adapter, "ds", "team", "True", reason::READY)
        .await;
    world.prime("ds", &[&first]).await;
    let n = first.accepted().len();
    let a = world.change("ds", "nb").await;
    assert_eq!(
        changes(&accepted(&adapter, &first, n + 1).await[n..]),
        [("ds".into(), "nb".into(), a)]
    );

    // The Broker moves (say, to another broker class): its status says the new address.
    let moved = std::time::Instant::now();
    world.broker("ds", "default", &second.url).await;
    until(&adapter, "the status follows the moved Broker", || async {
        world.status("ds", "team").await.sink_uri.as_deref() == Some(second.url.as_str())
    })
    .await;
    followed("following the moved Broker", moved);
    let b = world.change("ds", "nb").await;
    assert_eq!(
        changes(&accepted(&adapter, &second, 1).await),
        [("ds".into(), "nb".into(), b)]
    );
    quiet(&[&first, &second]).await;
    assert_eq!(
        first.accepted().len(),
        n + 1,
        "nothing more to the old address"
    );
    assert_eq!(second.accepted().len(), 1);
}

#[tokio::test]
async fn events_for_a_sink_that_went_away_wait_for_it_and_are_not_dropped() {
    let world = World::start().await;
    let (first, later) = (Sink::start().await, Sink::start().await);
    world.broker("ds", "default", &first.url).await;
    world.stream("ds", "nb").await;
    world.stream("ds", "warm").await;
    world
        .source("ds", "team", json!({"sink": broker_ref("default")}))
        .await;
    let adapter = Adapter::start(&world, &[]);
    world
        .wait_ready(&adapter, "ds", "team", "True", reason::READY)
        .await;
    world.prime("ds", &[&first]).await;
    let n = first.accepted().len();

    let deleted = std::time::Instant::now();
    world.delete_broker("ds", "default").await;
    world
        .wait_ready(&adapter, "ds", "team", "False", reason::SINK_NOT_FOUND)
        .await;
    followed("seeing the Broker deleted", deleted);
    let a = world.change("ds", "nb").await;
    quiet(&[&first, &later]).await;
    assert_eq!(first.accepted().len(), n, "no sink: nothing sent");

    let created = std::time::Instant::now();
    world.broker("ds", "default", &later.url).await;
    world
        .wait_ready(&adapter, "ds", "team", "True", reason::READY)
        .await;
    let got = accepted(&adapter, &later, 1).await;
    followed("delivering to the Broker created again", created);
    assert_eq!(
        changes(&got),
        [("ds".into(), "nb".into(), a)],
        "the change made while the sink was away arrives once it is back"
    );
}

/// A Broker with an audience (Knative's `authentication-oidc` on): the adapter sends each event
/// with a token of its own ServiceAccount for the Broker's `status.address.audience`, and the
/// sink that wants it takes the events.
#[tokio::test]
async fn a_broker_with_an_audience_gets_a_token_of_the_adapters_service_account() {
    let world = World::start().await;
    let to_broker = Sink::start().await;
    let audience = "eventing.knative.dev/broker/ds/default";
    to_broker.require_audience(Some(audience));
    world
        .emu
        .seed(json!({"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": "imagegate-source-multi-tenant", "namespace": "imagegate-system"}}))
        .await;
    world
        .addressable(
            BROKER,
            "Broker",
            "brokers",
            "ds",
            "default",
            json!({}),
            json!({"address": {"name": "http", "url": to_broker.url, "audience": audience},
                   "addresses": [{"name": "http", "url": to_broker.url, "audience": audience}],
                   "conditions": [{"type": "Ready", "status": "True"}]}),
        )
        .await;
    world.stream("ds", "nb").await;
    world.stream("ds", "warm").await;
    world
        .source("ds", "to-broker", json!({"sink": broker_ref("default")}))
        .await;
    let adapter = Adapter::start(
        &world,
        &["--oidc-service-account", "imagegate-source-multi-tenant"],
    );
    world
        .wait_ready(&adapter, "ds", "to-broker", "True", reason::READY)
        .await;
    world.prime("ds", &[&to_broker]).await;
    let n = to_broker.accepted().len();
    let d = world.change("ds", "nb").await;
    let events = accepted(&adapter, &to_broker, n + 1).await;
    assert_eq!(changes(&events[n..]), [("ds".into(), "nb".into(), d)]);
    let token = to_broker
        .received()
        .into_iter()
        .rev()
        .find(|r| r.answered == 202)
        .and_then(|r| r.authorization)
        .unwrap();
    let claims = imagegate_emulator::token_claims(token.strip_prefix("Bearer ").unwrap()).unwrap();
    assert_eq!(claims["aud"], json!([audience]));
    assert_eq!(
        claims["sub"],
        "system:serviceaccount:imagegate-system:imagegate-source-multi-tenant"
    );
    assert!(
        to_broker.received().iter().all(|r| r.answered != 401),
        "no event went without its token"
    );
}

/// A tenant's sink may not lend them the adapter's network position: the cloud's metadata
/// address, this host's loopback by name, and the API server are refused (`SinkNotAllowed`, the
/// source not Ready), and nothing is sent there; the operator allows a host by name.
#[tokio::test]
async fn a_sink_at_the_metadata_address_loopback_or_the_api_server_is_refused() {
    let world = World::start().await;
    let listening = Sink::start().await;
    let port = listening
        .url
        .trim_end_matches('/')
        .rsplit(':')
        .next()
        .unwrap()
        .to_string();
    world.stream("ds", "nb").await;
    let cases = [
        (
            "metadata",
            "http://169.254.169.254/latest/meta-data/".to_string(),
        ),
        ("loopback-by-name", format!("http://localhost:{port}/")),
        (
            "api-server",
            "https://kubernetes.default.svc/api".to_string(),
        ),
    ];
    for (name, uri) in &cases {
        world
            .source("ds", name, json!({"sink": {"uri": uri}}))
            .await;
    }
    let adapter = Adapter::start(&world, &[]);
    for (name, uri) in &cases {
        let status = world
            .wait_ready(&adapter, "ds", name, "False", reason::SINK_NOT_ALLOWED)
            .await;
        let (s, r, message) = cond(&status, condition::SINK_PROVIDED).unwrap();
        assert_eq!(
            (s.as_str(), r.as_str()),
            ("False", reason::SINK_NOT_ALLOWED),
            "{name}"
        );
        assert!(
            message.contains(uri.as_str()) && message.contains("--allow-sink-host"),
            "{name}: {message}"
        );
    }
    world.change("ds", "nb").await;
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    assert!(listening.received().is_empty(), "nothing reached loopback");
    drop(adapter);

    // The operator allows `localhost`: that source is served.
    let allowed = Adapter::start(&world, &["--allow-sink-host", "localhost"]);
    world
        .wait_ready(&allowed, "ds", "loopback-by-name", "True", reason::READY)
        .await;
}

/// A tenant's raw-URI sink may be any address the adapter reaches: what it answers does not come
/// back to the tenant. Its refusal reaches the dead-letter sink with the sink and the status
/// (`knativeerrordest`, `knativeerrorcode`) and no body (`knativeerrordata` empty).
#[tokio::test]
async fn the_answer_of_a_raw_uri_sink_does_not_reach_the_dead_letter_sink() {
    let world = World::start().await;
    let target = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let target_url = format!("http://{}/", target.local_addr().unwrap());
    let app = axum::Router::new().fallback(|| async {
        (
            axum::http::StatusCode::BAD_REQUEST,
            "secret-of-the-target: token=hunter2",
        )
    });
    tokio::spawn(async move { axum::serve(target, app).await });
    let dead = Sink::start().await;
    world.stream("ds", "nb").await;
    world.stream("ds", "warm").await;
    world
        .source(
            "ds",
            "raw",
            json!({"sink": {"uri": target_url},
                   "delivery": {"retry": 0, "deadLetterSink": {"uri": dead.url}}}),
        )
        .await;
    let adapter = Adapter::start(&world, &[]);
    world
        .wait_ready(&adapter, "ds", "raw", "True", reason::READY)
        .await;
    world.change("ds", "nb").await;
    let letters = dead.wait_accepted(1).await;
    let ext = |name: &str| super::harness::ext(&letters[0], name);
    assert_eq!(ext("knativeerrorcode").as_deref(), Some("400"));
    assert_eq!(
        ext("knativeerrordest").as_deref(),
        Some(target_url.as_str())
    );
    assert!(
        ext("knativeerrordata").unwrap_or_default().is_empty(),
        "the target's answer came back: {:?}",
        ext("knativeerrordata")
    );

    // A port with nothing behind it: the transport error's words (connection refused, a DNS
    // failure, a timeout) would tell the tenant what listens where on the adapter's network.
    let closed = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let closed_url = format!("http://{}/", closed.local_addr().unwrap());
    drop(closed);
    world
        .source(
            "ds",
            "scan",
            json!({"sink": {"uri": closed_url},
                   "delivery": {"retry": 0, "deadLetterSink": {"uri": dead.url}}}),
        )
        .await;
    world
        .wait_ready(&adapter, "ds", "scan", "True", reason::READY)
        .await;
    world.prime("ds", &[&dead]).await;
    let before = dead.accepted().len();
    world.change("ds", "nb").await;
    let letters = dead.wait_accepted(before + 2).await;
    let letter = (letters[before..].iter())
        .find(|e| {
            super::harness::ext(e, "knativeerrordest").as_deref() == Some(closed_url.as_str())
        })
        .expect("the closed port's dead letter");
    let data = super::harness::ext(letter, "knativeerrordata").unwrap_or_default();
    let said = String::from_utf8(
        base64::engine::Engine::decode(&base64::engine::general_purpose::STANDARD, &data).unwrap(),
    )
    .unwrap();
    assert_eq!(
        said, "dispatch error: the sink could not be reached",
        "{said}"
    );
}

/// F-7: a tenant's sink ref stays in its source's namespace, as Knative's default
/// (`cross-namespace-event-links` off). A ref to a Broker of another namespace is refused
/// `SinkNotAllowed` before anything is read: the object that exists and the one that does not
/// get the same answer, and the adapter makes no request there (no existence oracle). With
/// `--allow-cross-namespace-sinks`, only a source whose service account may `knsubscribe` that
/// Broker is served, as Knative asks of a cross-namespace Trigger.
#[tokio::test]
async fn a_sink_ref_to_another_namespace_is_refused_unless_the_platform_allows_and_the_account_may_subscribe()
 {
    let world = World::start().await;
    let elsewhere = Sink::start().await;
    world.broker("ml", "default", &elsewhere.url).await;
    world.stream("ds", "nb").await;
    world
        .grant("ds", "subscriber", "ds", &["get", "list", "watch"])
        .await;
    // `ds/subscriber` may subscribe to ml's Broker `default`; `ds/watcher` may not.
    world
        .emu
        .seed(json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": "subscribe", "namespace": "ml"},
            "rules": [{"apiGroups": ["eventing.knative.dev"], "resources": ["brokers"],
                       "resourceNames": ["default"], "verbs": ["knsubscribe"]}]
        }))
        .await;
    world
        .emu
        .seed(json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": "subscribe", "namespace": "ml"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "subscribe"},
            "subjects": [{"kind": "ServiceAccount", "name": "subscriber", "namespace": "ds"}]
        }))
        .await;
    let across = |name: &str| json!({"ref": {"apiVersion": BROKER, "kind": "Broker", "name": name, "namespace": "ml"}});
    world
        .source("ds", "exists", json!({"sink": across("default")}))
        .await;
    world
        .source("ds", "absent", json!({"sink": across("nothing")}))
        .await;
    world
        .source(
            "ds",
            "granted",
            json!({"sink": across("default"), "serviceAccountName": "subscriber"}),
        )
        .await;

    let from = world.emu.requests().await.len();
    let adapter = Adapter::start(&world, &[]);
    let mut messages = Vec::new();
    for name in ["exists", "absent", "granted"] {
        let status = world
            .wait_ready(&adapter, "ds", name, "False", reason::SINK_NOT_ALLOWED)
            .await;
        let (_, _, message) = cond(&status, condition::SINK_PROVIDED).unwrap();
        assert!(
            message.contains("resolves only in its source's namespace")
                && message.contains("--allow-cross-namespace-sinks"),
            "{name}: {message}"
        );
        messages.push(message.replace("\"nothing\"", "\"default\""));
    }
    assert_eq!(
        messages[0], messages[1],
        "an object that exists is told apart from none"
    );
    let looked: Vec<String> = world.emu.requests().await[from..]
        .iter()
        .filter(|r| r.path.contains("/namespaces/ml/brokers/"))
        .map(|r| format!("{} {}", r.method, r.path))
        .collect();
    assert!(
        looked.is_empty(),
        "the adapter read ml's Brokers: {looked:?}"
    );
    drop(adapter);

    let allowing = Adapter::start(&world, &["--allow-cross-namespace-sinks"]);
    let status = world
        .wait_ready(&allowing, "ds", "granted", "True", reason::READY)
        .await;
    assert_eq!(status.sink_uri.as_deref(), Some(elsewhere.url.as_str()));
    for name in ["exists", "absent"] {
        let status = world
            .wait_ready(&allowing, "ds", name, "False", reason::SINK_NOT_ALLOWED)
            .await;
        let (_, _, message) = cond(&status, condition::SINK_PROVIDED).unwrap();
        assert!(message.contains("may not knsubscribe"), "{name}: {message}");
    }
    let looked: Vec<String> = world
        .emu
        .requests()
        .await
        .iter()
        .filter(|r| r.path == "/apis/eventing.knative.dev/v1/namespaces/ml/brokers/nothing")
        .map(|r| r.path.clone())
        .collect();
    assert!(
        looked.is_empty(),
        "a ref the account may not subscribe to is never read"
    );
}
