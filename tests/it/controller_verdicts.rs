//! Verdicts as CloudEvents, end to end against the real controller (`--verdict-sink`) and the
//! emulator: a promotion and a rejection each reach the sink as their verdict, with the run's
//! status marked delivered only once the sink took it; a run that changed nothing sends
//! nothing; and a verdict the sink refused while the controller ran, then lost with the
//! controller (killed), is sent by the next one with the same id.

use std::time::Duration;

use cloudevents::AttributesReader;
use kube::api::Api;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::support::controller::{A, B, Setup, VALIDATED_B};
use crate::support::sink::Sink;
use crate::support::{free_port, wait_ready, within};

const WAIT: Duration = Duration::from_secs(30);

/// The run's verdict mark (`status.extraFields.verdictEvent`).
async fn mark(s: &Setup, name: &str) -> Value {
    let runs: Api<imagegate::api::CustomRun> = Api::namespaced(s.client.clone(), "ds");
    let run = runs.get(name).await.unwrap();
    run.status.unwrap().extra_fields["verdictEvent"].clone()
}

fn data(e: &cloudevents::Event) -> Value {
    match e.data() {
        Some(cloudevents::Data::Json(v)) => v.clone(),
        Some(cloudevents::Data::Binary(b)) => serde_json::from_slice(b).unwrap(),
        Some(cloudevents::Data::String(s)) => serde_json::from_str(s).unwrap(),
        None => Value::Null,
    }
}

#[tokio::test]
async fn a_promotion_and_a_rejection_reach_the_sink_as_verdicts_and_are_marked_delivered() {
    let sink = Sink::start().await;
    let mut s = Setup::new().await;
    s.stop();
    let admin = free_port();
    let _controller = s.spawn_controller(admin, &["--verdict-sink", &sink.url]);
    wait_ready(admin).await;

    s.create_run("promote-b", VALIDATED_B, json!({})).await;
    s.done("promote-b").await;
    let got = sink.wait_accepted(1).await;
    let e = &got[0];
    assert_eq!(e.ty(), "dev.imagegate.verdict.promoted");
    assert_eq!(e.subject(), Some("nb:latest"));
    let d = data(e);
    assert_eq!(d["digest"], B);
    assert_eq!(d["previousDigest"], A);
    assert_eq!(d["customRun"], "promote-b");
    within("the run is marked delivered", WAIT, || async {
        mark(&s, "promote-b").await == json!({"id": e.id(), "delivered": "sink"})
    })
    .await;

    // Promoting what is served already changes nothing: no verdict.
    s.create_run("promote-b-again", VALIDATED_B, json!({}))
        .await;
    s.done("promote-b-again").await;
    // A rejection of a candidate marks the served tag UpdateFailed: a verdict.
    s.emu
        .import("ds", "nb", "candidate", crate::support::controller::C)
        .await;
    s.create_run(
        "reject-c",
        &[
            ("imagestream", "nb"),
            ("digest", crate::support::controller::C),
            ("action", "reject"),
        ],
        json!({}),
    )
    .await;
    s.done("reject-c").await;
    let got = sink.wait_accepted(2).await;
    assert_eq!(got.len(), 2, "AlreadyPromoted sent nothing: {got:?}");
    assert_eq!(got[1].ty(), "dev.imagegate.verdict.updatefailed");
    assert_eq!(data(&got[1])["digest"], crate::support::controller::C);
    assert!(mark(&s, "promote-b-again").await.is_null());
}

#[tokio::test]
async fn a_verdict_the_sink_refused_is_held_and_one_lost_with_the_controller_is_sent_by_the_next() {
    let sink = Sink::start().await;
    let mut s = Setup::new().await;
    s.stop();
    let admin = free_port();
    let args = ["--verdict-sink", sink.url.as_str()];
    let mut controller = s.spawn_controller(admin, &args);
    wait_ready(admin).await;

    // The sink refuses (a 400 is not retried within a round): the event is held.
    sink.always(Some(400));
    s.create_run("promote-b", VALIDATED_B, json!({})).await;
    s.done("promote-b").await;
    within("the refused verdict is tried", WAIT, || async {
        !sink.received().is_empty()
    })
    .await;
    let id = mark(&s, "promote-b").await["id"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(
        mark(&s, "promote-b").await["delivered"],
        false,
        "not taken, not marked"
    );
    let held = reqwest::get(format!("http://127.0.0.1:{admin}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        held.contains("imagegate_controller_verdict_events_held 1"),
        "{held}"
    );

    // The controller dies with the verdict undelivered; the next one sends it.
    controller.kill();
    sink.always(None);
    let admin = free_port();
    let _next = s.spawn_controller(admin, &args);
    wait_ready(admin).await;
    let got = sink.wait_accepted(1).await;
    assert_eq!(got[0].id(), id, "the same id: receivers drop a second copy");
    assert_eq!(got[0].ty(), "dev.imagegate.verdict.promoted");
    within("the run is marked delivered", WAIT, || async {
        mark(&s, "promote-b").await["delivered"] == "sink"
    })
    .await;
}

/// A `Verdicts` of this test's own, to the sink at `url`.
fn verdicts(s: &Setup, url: &str) -> (imagegate::controller::verdict::Verdicts, CancellationToken) {
    use imagegate::controller::verdict::{self, Settings, VerdictMetrics, Verdicts};
    let stop = CancellationToken::new();
    let settings = Settings {
        sink: url.parse().unwrap(),
        delivery: verdict::default_delivery(),
        mode: Default::default(),
        schema_base: None,
        timeout: None,
        ca_pem: None,
        oidc: None,
    };
    let metrics = VerdictMetrics::register(&mut prometheus_client::registry::Registry::default());
    let v = Verdicts::new(s.client.clone(), settings, metrics, stop.clone()).unwrap();
    (v, stop)
}

/// The race a loaded machine showed: the verdict was delivered and its run marked before the
/// watch brought the verdict's own write, so the reconcile of that cached copy (still
/// `delivered: false`) sent it a second time. A run found unmarked in the cache is read again
/// first: a copy older than the mark sends nothing, a run that really waits is sent.
#[tokio::test]
async fn a_cached_copy_older_than_the_delivered_mark_sends_no_second_copy() {
    let sink = Sink::start().await;
    let mut s = Setup::new().await;
    s.stop();
    let admin = free_port();
    let _controller = s.spawn_controller(admin, &["--verdict-sink", &sink.url]);
    wait_ready(admin).await;
    s.create_run("promote-b", VALIDATED_B, json!({})).await;
    s.done("promote-b").await;
    let id = sink.wait_accepted(1).await[0].id().to_string();
    within("the run is marked delivered", WAIT, || async {
        mark(&s, "promote-b").await["delivered"] == "sink"
    })
    .await;

    // The copy a watch could still hold: the verdict's write, before the mark.
    let mut stale = s.runs().get("promote-b").await.unwrap();
    stale.status.as_mut().unwrap().extra_fields[imagegate::controller::verdict::FIELD]["delivered"] =
        json!(false);
    let other = Sink::start().await;
    let (v, stop) = verdicts(&s, &other.url);
    v.send_pending(&stale)
        .expect("a verdict to send")
        .await
        .unwrap();
    assert!(
        other.received().is_empty(),
        "a copy older than the mark was sent again: {} request(s)",
        other.received().len()
    );

    // The positive control: a run whose mark really is missing (its controller stopped first).
    let runs = s.runs();
    let mut current = runs.get("promote-b").await.unwrap();
    current.metadata.managed_fields = None;
    current.status.as_mut().unwrap().extra_fields[imagegate::controller::verdict::FIELD]["delivered"] =
        json!(false);
    let unmarked = runs
        .replace_status("promote-b", &Default::default(), &current)
        .await
        .unwrap();
    v.send_pending(&unmarked)
        .expect("a verdict to send")
        .await
        .unwrap();
    let got = other.accepted();
    assert_eq!(got.len(), 1, "one copy");
    assert_eq!(got[0].id(), id, "the same verdict, the same id");
    assert_eq!(mark(&s, "promote-b").await["delivered"], "sink");
    stop.cancel();
}
