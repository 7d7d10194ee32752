//! End to end: the real `imagegate source` binary against the API emulator over HTTP and a real
//! HTTP sink built on the CloudEvents SDK.

use std::time::{Duration, Instant};

use crate::support::sink::Sink;
use crate::support::source::Source;
use crate::support::{EmulatorServer, rbac};
use cloudevents::AttributesReader;
use serde_json::{Value, json};

const A: &str = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
const B: &str = "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
const C: &str = "sha256:cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc";
const D: &str = "sha256:dddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddd";

/// A stream as it was on the cluster already: its `other` tag imported once (else the import
/// controller would import it after the first write, as OpenShift's does, and that import's
/// write is one more update for the resource modes).
fn stream(name: &str, ns: &str, labels: Value) -> String {
    let other = format!("quay.io/org/{name}@{OTHER}");
    json!({
        "apiVersion": "image.openshift.io/v1", "kind": "ImageStream",
        "metadata": {"name": name, "namespace": ns, "labels": labels, "generation": 1},
        "spec": {"tags": [
            {"name": "candidate", "from": {"kind": "DockerImage", "name": format!("quay.io/org/{name}:latest")}, "importPolicy": {"scheduled": true}, "generation": 1},
            {"name": "other", "from": {"kind": "DockerImage", "name": format!("quay.io/org/{name}:other")}, "generation": 1}
        ]},
        "status": {"tags": [
            {"tag": "other", "items": [{"created": "2026-12-01T00:00:00Z", "dockerImageReference": other, "image": OTHER, "generation": 1}]}
        ]}
    })
    .to_string()
}

const OTHER: &str = "sha256:0000000000000000000000000000000000000000000000000000000000000001";

fn ext(e: &cloudevents::Event, name: &str) -> Option<String> {
    e.extension(name).map(|v| v.to_string())
}

fn data(e: &cloudevents::Event) -> Value {
    match e.data() {
        Some(cloudevents::Data::Json(v)) => v.clone(),
        Some(cloudevents::Data::Binary(b)) => serde_json::from_slice(b).unwrap(),
        Some(cloudevents::Data::String(s)) => serde_json::from_str(s).unwrap(),
        None => Value::Null,
    }
}

async fn setup() -> (EmulatorServer, tempfile::TempDir, Sink) {
    let emu = EmulatorServer::start().await;
    // The checkpoint and the Lease live where config/ installs the source.
    emu.seed_str("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: imagegate-system\n")
        .await;
    emu.seed_str(&stream("nb", "ds", json!({"team": "a"})))
        .await;
    emu.import("ds", "nb", "candidate", A).await;
    (emu, tempfile::tempdir().unwrap(), Sink::start().await)
}

#[tokio::test]
async fn an_import_becomes_one_updated_event_with_every_attribute() {
    let (emu, dir, sink) = setup().await;
    let src = Source::new(&emu, &dir, &sink.url, &[]);
    src.ready().await;
    assert!(
        sink.accepted().is_empty(),
        "a first start records the existing state silently"
    );
    emu.import("ds", "nb", "candidate", B).await;
    let events = sink.wait_accepted(1).await;
    let e = &events[0];
    assert_eq!(e.ty(), "dev.imagegate.imagestreamtag.updated");
    assert_eq!(
        e.source().to_string(),
        "/apis/image.openshift.io/v1/namespaces/ds/imagestreams/nb"
    );
    assert_eq!(e.subject(), Some("nb:candidate"));
    assert!(
        e.id().len() <= 40
            && e.id()
                .chars()
                .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
    );
    assert!(e.time().is_some());
    assert!(
        e.dataschema()
            .unwrap()
            .to_string()
            .ends_with("imagestreamtag-updated.json")
    );
    assert_eq!(ext(e, "namespace").as_deref(), Some("ds"));
    assert_eq!(ext(e, "imagestream").as_deref(), Some("nb"));
    assert_eq!(ext(e, "imagetag").as_deref(), Some("candidate"));
    assert_eq!(ext(e, "imagedigest").as_deref(), Some(B));
    let d = data(e);
    assert_eq!(d["digest"], B);
    assert_eq!(d["previousDigest"], A);
    assert_eq!(d["dockerImageReference"], format!("quay.io/org/nb@{B}"));
    assert_eq!(d["imageStream"], "nb");
    assert_eq!(d["tag"], "candidate");
    assert!(d["imageStreamUID"].as_str().is_some_and(|u| !u.is_empty()));
    assert!(
        sink.received()[0]
            .content_type
            .starts_with("application/json"),
        "binary mode by default"
    );
    assert!(src.metrics().await.contains(
        r#"imagegate_source_events_sent_total{type="dev.imagegate.imagestreamtag.updated"} 1"#
    ));
    rbac::assert_config_allows(&emu, "source").await;
}

#[tokio::test]
async fn structured_mode_sends_the_whole_event_as_json() {
    let (emu, dir, sink) = setup().await;
    let src = Source::new(&emu, &dir, &sink.url, &["--content-mode", "structured"]);
    src.ready().await;
    emu.import("ds", "nb", "candidate", B).await;
    sink.wait_accepted(1).await;
    assert!(
        sink.received()[0]
            .content_type
            .starts_with("application/cloudevents+json")
    );
    rbac::assert_config_allows(&emu, "source").await;
}

#[tokio::test]
async fn changes_made_while_down_are_sent_oldest_first_and_never_twice() {
    let (emu, dir, sink) = setup().await;
    let mut src = Source::new(&emu, &dir, &sink.url, &[]);
    src.ready().await;
    emu.import("ds", "nb", "candidate", B).await;
    sink.wait_accepted(1).await;
    src.stop().await;
    emu.import("ds", "nb", "candidate", C).await;
    emu.import("ds", "nb", "candidate", D).await;
    src.start();
    src.ready().await;
    let events = sink.wait_accepted(3).await;
    let digests: Vec<(Value, Value)> = events
        .iter()
        .map(|e| {
            let d = data(e);
            (d["digest"].clone(), d["previousDigest"].clone())
        })
        .collect();
    assert_eq!(
        digests,
        vec![
            (json!(B), json!(A)),
            (json!(C), json!(B)),
            (json!(D), json!(C))
        ]
    );
    // A clean restart re-sends nothing.
    src.stop().await;
    src.start();
    src.ready().await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(sink.accepted().len(), 3);
    rbac::assert_config_allows(&emu, "source").await;
}

#[tokio::test]
async fn a_failing_sink_gets_the_same_id_on_every_attempt_until_it_recovers() {
    let (emu, dir, sink) = setup().await;
    let src = Source::new(&emu, &dir, &sink.url, &[]);
    src.ready().await;
    sink.fail_next(&[503, 500, 429]);
    emu.import("ds", "nb", "candidate", B).await;
    sink.wait_accepted(1).await;
    let all = sink.received();
    assert_eq!(all.len(), 4);
    assert!(all.iter().all(|r| r.event.id() == all[0].event.id()));
    assert_eq!(
        all.iter().map(|r| r.answered).collect::<Vec<_>>(),
        vec![503, 500, 429, 202]
    );
    assert!(
        src.metrics().await.contains(
            r#"imagegate_source_delivery_attempts_failed_total{type="dev.imagegate.imagestreamtag.updated"} 3"#
        ),
        "each failed attempt is counted"
    );
    rbac::assert_config_allows(&emu, "source").await;
}

/// The source's gauge of events held (refused, no dead-letter sink took them), if it shows.
async fn held(src: &Source) -> Option<String> {
    src.metrics()
        .await
        .lines()
        .find(|l| l.starts_with("imagegate_source_events_held "))
        .map(|l| {
            l.trim_start_matches("imagegate_source_events_held ")
                .to_string()
        })
}

#[tokio::test]
async fn a_change_the_sink_refuses_is_held_not_acknowledged_and_delivered_once_it_takes_it() {
    let (emu, dir, sink) = setup().await;
    let mut src = Source::new(&emu, &dir, &sink.url, &[]);
    src.ready().await;
    // A 400 and a 401 (what an OIDC-enforcing Broker answers a sender without a token) are
    // not retried by Knative's rules; with no dead-letter sink the change is held and sent
    // again, at most a minute apart, until the sink takes it.
    sink.fail_next(&[400, 401]);
    emu.import("ds", "nb", "candidate", B).await;
    let first = sink.wait_accepted(1).await;
    let all = sink.received();
    assert_eq!(
        all.iter().map(|r| r.answered).collect::<Vec<_>>(),
        vec![400, 401, 202]
    );
    assert!(
        all.iter().all(|r| r.event.id() == first[0].id()),
        "one event, one id"
    );
    assert_eq!(held(&src).await.as_deref(), Some("0"));

    // Held across a restart: a change refused while the source stops is not acknowledged, and
    // the next start sends it.
    sink.always(Some(401));
    emu.import("ds", "nb", "candidate", C).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    while sink.received().len() < 5 || held(&src).await.as_deref() != Some("1") {
        assert!(
            Instant::now() < deadline,
            "never held: {:?}",
            sink.received().len()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    src.stop().await;
    sink.always(None);
    src.start();
    src.ready().await;
    let accepted = sink.wait_accepted(2).await;
    assert_eq!(data(&accepted[1])["digest"], C, "{:?}", accepted[1]);
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(sink.accepted().len(), 2, "each change delivered once");
}

#[tokio::test]
async fn a_sink_that_never_answers_is_given_up_on_after_the_default_timeout_and_sent_again() {
    let (emu, dir, sink) = setup().await;
    let src = Source::new(&emu, &dir, &sink.url, &[]);
    src.ready().await;
    sink.fail_next(&[crate::support::sink::HANG]);
    let asked = Instant::now();
    emu.import("ds", "nb", "candidate", B).await;
    let got = sink.wait_accepted_within(1, Duration::from_secs(60)).await;
    let waited = asked.elapsed();
    assert!(
        waited >= Duration::from_secs(30),
        "the hung attempt is given its 30 s: {waited:?}"
    );
    assert_eq!(sink.received().len(), 2, "the hung attempt and one more");
    assert_eq!(got[0].id(), sink.received()[0].event.id());
}

#[tokio::test]
async fn events_the_sink_refuses_go_to_the_dead_letter_sink() {
    let (emu, dir, sink) = setup().await;
    let dlq = Sink::start().await;
    let src = Source::new(
        &emu,
        &dir,
        &sink.url,
        &["--retry", "2", "--dead-letter-sink", &dlq.url],
    );
    src.ready().await;
    sink.always(Some(503));
    emu.import("ds", "nb", "candidate", B).await;
    let dead = dlq.wait_accepted(1).await;
    assert_eq!(
        sink.received().len(),
        3,
        "the first attempt and two retries"
    );
    let e = &dead[0];
    assert_eq!(e.id(), sink.received()[0].event.id());
    assert_eq!(
        ext(e, "knativeerrordest").as_deref(),
        Some(sink.url.as_str())
    );
    assert_eq!(ext(e, "knativeerrorcode").as_deref(), Some("503"));
    assert!(ext(e, "knativeerrordata").is_some());
    assert!(
        src.metrics()
            .await
            .contains("imagegate_source_events_dead_lettered_total")
    );
    rbac::assert_config_allows(&emu, "source").await;
}

#[tokio::test]
async fn a_dropped_watch_and_a_410_during_changes_lose_nothing_and_repeat_nothing() {
    let (emu, dir, sink) = setup().await;
    let src = Source::new(&emu, &dir, &sink.url, &[]);
    src.ready().await;
    emu.import("ds", "nb", "candidate", B).await;
    emu.drop_watches().await;
    emu.import("ds", "nb", "candidate", C).await;
    emu.compact().await;
    emu.drop_watches().await;
    emu.import("ds", "nb", "candidate", D).await;
    let events = sink.wait_accepted(3).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let digests: Vec<Value> = sink
        .accepted()
        .iter()
        .map(|e| data(e)["digest"].clone())
        .collect();
    assert_eq!(digests, vec![json!(B), json!(C), json!(D)]);
    assert_eq!(events.len(), 3);
    rbac::assert_config_allows(&emu, "source").await;
}

#[tokio::test]
async fn deleted_tags_and_import_failures_have_their_own_events() {
    let (emu, dir, sink) = setup().await;
    let src = Source::new(&emu, &dir, &sink.url, &[]);
    src.ready().await;
    emu.import_failure("ds", "nb", "candidate", "NotFound")
        .await;
    let e = sink.wait_accepted(1).await[0].clone();
    assert_eq!(e.ty(), "dev.imagegate.imagestreamtag.importfailed");
    assert_eq!(data(&e)["reason"], "NotFound");
    let istags: kube::Api<kube::api::DynamicObject> = kube::Api::namespaced_with(
        emu.client(),
        "ds",
        &kube::api::ApiResource::from_gvk_with_plural(
            &kube::api::GroupVersionKind::gvk("image.openshift.io", "v1", "ImageStreamTag"),
            "imagestreamtags",
        ),
    );
    istags
        .delete("nb:candidate", &Default::default())
        .await
        .unwrap();
    let e = sink.wait_accepted(2).await[1].clone();
    assert_eq!(e.ty(), "dev.imagegate.imagestreamtag.deleted");
    assert_eq!(e.subject(), Some("nb:candidate"));
    rbac::assert_config_allows(&emu, "source").await;
}

#[tokio::test]
async fn filters_select_namespaces_labels_and_tags() {
    let (emu, dir, sink) = setup().await;
    emu.seed_str(&stream("nb", "other", json!({"team": "a"})))
        .await;
    emu.seed_str(&stream("nb2", "ds", json!({"team": "b"})))
        .await;
    let src = Source::new(
        &emu,
        &dir,
        &sink.url,
        &[
            "--namespace",
            "ds",
            "--selector",
            "team=a",
            "--tag",
            "candidate",
        ],
    );
    src.ready().await;
    emu.import("other", "nb", "candidate", B).await;
    emu.import("ds", "nb2", "candidate", B).await;
    emu.import("ds", "nb", "other", B).await;
    emu.import("ds", "nb", "candidate", C).await;
    let events = sink.wait_accepted(1).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        sink.accepted().len(),
        1,
        "{:?}",
        sink.accepted()
            .iter()
            .map(|e| e.subject().map(str::to_string))
            .collect::<Vec<_>>()
    );
    assert_eq!(events[0].subject(), Some("nb:candidate"));
    assert_eq!(ext(&events[0], "namespace").as_deref(), Some("ds"));
    rbac::assert_config_allows(&emu, "source").await;
}

/// How many times the ImageStreams were listed (a start's list and every re-list).
async fn imagestream_lists(emu: &EmulatorServer) -> usize {
    emu.requests()
        .await
        .iter()
        .filter(|r| r.verb == "list" && r.resource == "imagestreams")
        .count()
}

/// Asserts that `sink` got exactly `n` events, after a pause for any stray one to arrive.
async fn assert_exactly(sink: &Sink, n: usize, when: &str) -> Vec<cloudevents::Event> {
    tokio::time::sleep(Duration::from_millis(500)).await;
    let got = sink.accepted();
    let types: Vec<&str> = got.iter().map(|e| e.ty()).collect();
    assert_eq!(got.len(), n, "{when}: {types:?}");
    got
}

#[tokio::test]
async fn resource_and_reference_modes_send_what_apiserversource_sends() {
    let (emu, dir, sink) = setup().await;
    let src = Source::new(&emu, &dir, &sink.url, &["--mode", "resource"]);
    src.ready().await;
    assert_exactly(
        &sink,
        0,
        "a start lists the existing stream and sends nothing",
    )
    .await;
    emu.import("ds", "nb", "candidate", B).await;
    let ev = sink.wait_accepted(1).await;
    assert_eq!(ev[0].ty(), "dev.knative.apiserver.resource.update");
    assert_eq!(ext(&ev[0], "kind").as_deref(), Some("ImageStream"));
    assert_eq!(data(&ev[0])["metadata"]["name"], "nb");
    emu.seed_str(&stream("nb2", "ds", json!({}))).await;
    let ev = sink.wait_accepted(2).await;
    assert_eq!(ev[1].ty(), "dev.knative.apiserver.resource.add");
    assert_eq!(data(&ev[1])["metadata"]["name"], "nb2");

    // A 410: the watch re-lists both streams, unchanged, and sends nothing. The unrelated write
    // makes the watch's resourceVersion older than the compaction.
    let lists = imagestream_lists(&emu).await;
    emu.seed_str("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: unrelated, namespace: ds}\n")
        .await;
    emu.compact().await;
    emu.drop_watches().await;
    crate::support::eventually("a re-list after the 410", || async {
        imagestream_lists(&emu).await > lists
    })
    .await;
    assert_exactly(&sink, 2, "a re-list of unchanged streams sends nothing").await;
    emu.import("ds", "nb", "candidate", C).await;
    let ev = sink.wait_accepted(3).await;
    assert_eq!(ev[2].ty(), "dev.knative.apiserver.resource.update");
    drop(src);

    // A restart sends nothing for what exists; --emit-existing asks for an add per stream.
    let refs = Sink::start().await;
    let src = Source::new(&emu, &dir, &refs.url, &["--mode", "reference"]);
    src.ready().await;
    assert_exactly(&refs, 0, "a restart sends nothing").await;
    drop(src);
    let src = Source::new(
        &emu,
        &dir,
        &refs.url,
        &["--mode", "reference", "--emit-existing"],
    );
    src.ready().await;
    let mut ev = assert_exactly(&refs, 2, "--emit-existing: one add per stream").await;
    ev.sort_by_key(|e| data(e)["name"].to_string());
    assert!(ev.iter().all(|e| e.ty() == "dev.knative.apiserver.ref.add"));
    assert_eq!(
        data(&ev[0]),
        json!({"kind": "ImageStream", "namespace": "ds", "name": "nb", "apiVersion": "image.openshift.io/v1"})
    );
    rbac::assert_config_allows(&emu, "source").await;
}

#[tokio::test]
async fn a_malformed_imagestream_is_skipped_and_the_others_still_flow() {
    let (emu, dir, sink) = setup().await;
    emu.seed(json!({
        "apiVersion": "image.openshift.io/v1", "kind": "ImageStream",
        "metadata": {"name": "broken", "namespace": "ds", "annotations": {"huge": "x".repeat(200_000)}},
        "spec": {"tags": null, "unknownField": {"a": 1}},
        "status": {"tags": [{"tag": "t", "items": null}, {"tag": "u", "items": [{"image": "", "dockerImageReference": ""}]}]}
    }))
    .await;
    // Not an ImageStream a Go server would ever serve: the wrong JSON types.
    emu.seed(json!({
        "apiVersion": "image.openshift.io/v1", "kind": "ImageStream",
        "metadata": {"name": "garbage", "namespace": "ds"},
        "spec": {"tags": "not-a-list"},
        "status": {"tags": {"x": 1}}
    }))
    .await;
    let src = Source::new(&emu, &dir, &sink.url, &[]);
    src.ready().await;
    emu.import("ds", "nb", "candidate", B).await;
    let events = sink.wait_accepted(1).await;
    assert_eq!(events[0].subject(), Some("nb:candidate"));
    assert!(
        src.metrics()
            .await
            .contains("imagegate_source_malformed_objects_total 1")
    );
    rbac::assert_config_allows(&emu, "source").await;
}

#[tokio::test]
async fn two_replicas_send_each_change_once_and_hand_over_on_shutdown() {
    let (emu, dir, sink) = setup().await;
    let elect = [
        "--leader-elect",
        "--lease-namespace",
        "imagegate-system",
        "--identity",
    ];
    let mut a = Source::new(
        &emu,
        &dir,
        &sink.url,
        &[&elect[..], &["replica-a"]].concat(),
    );
    let mut b = Source::new(
        &emu,
        &dir,
        &sink.url,
        &[&elect[..], &["replica-b"]].concat(),
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    let leader = loop {
        if let Some(h) = crate::support::lease_holder(&emu.client(), "imagegate-source").await {
            break h;
        }
        assert!(Instant::now() < deadline, "nobody took the lease");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    // The leader records the first list; give it the time to be watching.
    let (lead, standby) = if leader == "replica-a" {
        (&mut a, &mut b)
    } else {
        (&mut b, &mut a)
    };
    let http = reqwest::Client::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !http
        .get(format!("http://127.0.0.1:{}/metrics", lead.admin))
        .send()
        .await
        .map(|r| r.status() == 200)
        .unwrap_or(false)
    {
        assert!(Instant::now() < deadline);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    emu.import("ds", "nb", "candidate", B).await;
    sink.wait_accepted(1).await;
    lead.stop().await;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match crate::support::lease_holder(&emu.client(), "imagegate-source").await {
            Some(h) if h != leader => break,
            _ => {}
        }
        assert!(Instant::now() < deadline, "the standby never took over");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    standby.ready().await;
    emu.import("ds", "nb", "candidate", C).await;
    let events = sink.wait_accepted(2).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let digests: Vec<Value> = sink
        .accepted()
        .iter()
        .map(|e| data(e)["digest"].clone())
        .collect();
    assert_eq!(
        digests,
        vec![json!(B), json!(C)],
        "each change once: the standby resumed from the checkpoint"
    );
    assert_eq!(events.len(), 2);
    rbac::assert_config_allows(&emu, "source").await;
}

/// A sink that wants an OIDC token (a Knative Broker with `authentication-oidc` on): the source
/// without an audience is refused (401) and holds the change; with `K_AUDIENCE` and
/// `K_OIDC_SERVICE_ACCOUNT` it sends a token of its own ServiceAccount for that audience (a
/// TokenRequest), and the held change is delivered.
#[tokio::test]
async fn a_sink_with_an_audience_gets_a_token_of_the_sources_own_service_account() {
    let (emu, dir, sink) = setup().await;
    emu.seed(json!({"apiVersion": "v1", "kind": "ServiceAccount",
        "metadata": {"name": "imagegate-source", "namespace": "imagegate-system"}}))
        .await;
    sink.require_audience(Some("broker-aud"));
    let mut src = Source::new(&emu, &dir, &sink.url, &[]);
    src.ready().await;
    emu.import("ds", "nb", "candidate", B).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    while held(&src).await.as_deref() != Some("1") {
        assert!(
            Instant::now() < deadline,
            "never held: {:?}",
            sink.received().len()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        sink.received()
            .iter()
            .all(|r| r.answered == 401 && r.authorization.is_none())
    );
    src.stop().await;

    let env = [
        ("K_AUDIENCE", "broker-aud"),
        ("K_OIDC_SERVICE_ACCOUNT", "imagegate-source"),
        ("POD_NAMESPACE", "imagegate-system"),
    ];
    let mut src = Source::with_env(&emu, &dir, &sink.url, &[], &env);
    src.ready().await;
    let accepted = sink.wait_accepted(1).await;
    assert_eq!(data(&accepted[0])["digest"], B);
    let taken = sink
        .received()
        .into_iter()
        .find(|r| r.answered == 202)
        .unwrap();
    let token = taken.authorization.unwrap();
    let claims = imagegate_emulator::token_claims(token.strip_prefix("Bearer ").unwrap()).unwrap();
    assert_eq!(claims["aud"], json!(["broker-aud"]));
    assert_eq!(
        claims["sub"],
        "system:serviceaccount:imagegate-system:imagegate-source"
    );
    // One token serves every event until it is due for renewal.
    emu.import("ds", "nb", "candidate", C).await;
    let accepted = sink.wait_accepted(2).await;
    assert_eq!(data(&accepted[1])["digest"], C);
    let tokens: std::collections::BTreeSet<String> = sink
        .received()
        .into_iter()
        .filter(|r| r.answered == 202)
        .filter_map(|r| r.authorization)
        .collect();
    assert_eq!(tokens.len(), 1, "one TokenRequest, not one per event");
    src.stop().await;
}
