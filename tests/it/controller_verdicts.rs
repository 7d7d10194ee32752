//! Verdicts as CloudEvents, end to end against the real controller (`--verdict-sink`) and the
//! emulator: a promotion and a rejection each reach the sink as their verdict, with the run's
//! status marked delivered only once the sink took it; a run that changed nothing sends
//! nothing; and a verdict the sink refused while the controller ran, then lost with the
//! controller (killed), is sent by the next one with the same id.

use std::time::Duration;

use cloudevents::AttributesReader;
use kube::api::Api;
use serde_json::{Value, json};

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
