//! Delivery against real local sinks (axum on 127.0.0.1:0, and a rustls server for https)
//! that parse what arrives with the CloudEvents SDK, plus tables for the pure decisions.
//! Timings are only asserted as lower bounds that the waits guarantee.

use std::io::{Read, Write};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::header::{CONTENT_LENGTH, CONTENT_TYPE, RETRY_AFTER};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use chrono::{TimeZone, Utc};
use cloudevents::binding::http::to_event;
use cloudevents::{AttributesReader, Data};
use serde_json::Value;

use super::*;
use crate::source::change::{ChangeKind, TagChange};
use crate::source::event::{EventSettings, tag_event};
use std::time::Duration;

const MS: Duration = Duration::from_millis(1);

fn event() -> Event {
    let change = TagChange {
        kind: ChangeKind::Updated,
        namespace: "team-a".into(),
        image_stream: "api".into(),
        image_stream_uid: "6f1c1f5e-0000-4000-8000-000000000001".into(),
        tag: "latest".into(),
        digest: Some("sha256:1111111111111111111111111111111111111111111111111111111111111111".into()),
        previous_digest: None,
        docker_image_reference: Some("quay.io/team-a/api@sha256:1111111111111111111111111111111111111111111111111111111111111111".into()),
        generation: 2,
        time: Some("2026-11-30T10:00:00Z".into()),
        reason: None,
        message: None,
    };
    let now = Utc.with_ymd_and_hms(2026, 12, 1, 9, 0, 0).unwrap();
    tag_event(&change, &EventSettings::default(), now)
}

fn spec(retry: Option<u32>) -> DeliverySpec {
    DeliverySpec {
        retry,
        backoff_policy: BackoffPolicy::Exponential,
        backoff_delay: MS,
        max_backoff: 20 * MS,
        dead_letter_sink: None,
    }
}

fn client() -> SinkClient {
    SinkClient::new(Some(Duration::from_secs(10)), None).unwrap()
}

/// A stop signal that never fires.
fn no_stop() -> CancellationToken {
    CancellationToken::new()
}

async fn run(sink: &Url, mode: ContentMode, spec: &DeliverySpec) -> Delivered {
    let (client, event, stop) = (client(), event(), no_stop());
    let make = || event.clone();
    let delivery = deliver(&client, sink, &make, mode, spec, &stop);
    tokio::time::timeout(Duration::from_secs(30), delivery)
        .await
        .expect("delivery finishes")
        .expect("not stopped")
}

// ---- a scripted sink -------------------------------------------------------------------------

#[derive(Clone, Default)]
struct Reply {
    status: u16,
    retry_after: Option<&'static str>,
    body: String,
    hang: bool,
}

fn reply(status: u16) -> Reply {
    Reply {
        status,
        ..Reply::default()
    }
}

struct Received {
    at: Instant,
    content_type: String,
    event: Result<Event, String>,
}

struct Script {
    replies: Vec<Reply>,
    received: Mutex<Vec<Received>>,
}

struct TestSink {
    url: Url,
    script: Arc<Script>,
}

impl TestSink {
    fn count(&self) -> usize {
        self.script.received.lock().unwrap().len()
    }

    fn events(&self) -> Vec<Event> {
        let received = self.script.received.lock().unwrap();
        received
            .iter()
            .map(|r| r.event.clone().expect("the SDK parses what arrived"))
            .collect()
    }

    fn times(&self) -> Vec<Instant> {
        self.script
            .received
            .lock()
            .unwrap()
            .iter()
            .map(|r| r.at)
            .collect()
    }

    fn content_types(&self) -> Vec<String> {
        let received = self.script.received.lock().unwrap();
        received.iter().map(|r| r.content_type.clone()).collect()
    }
}

/// Starts a sink that answers the `n`-th request with `replies[n]`, the last one repeating.
async fn sink(replies: Vec<Reply>) -> TestSink {
    let script = Arc::new(Script {
        replies,
        received: Mutex::new(Vec::new()),
    });
    let app = axum::Router::new()
        .fallback(answer)
        .with_state(script.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = Url::parse(&format!("http://{}/events", listener.local_addr().unwrap())).unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    TestSink { url, script }
}

async fn answer(State(script): State<Arc<Script>>, headers: HeaderMap, body: Bytes) -> Response {
    let content_type = headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let event = to_event(&headers, body.to_vec()).map_err(|e| e.to_string());
    let reply = {
        let mut received = script.received.lock().unwrap();
        let n = received.len().min(script.replies.len() - 1);
        received.push(Received {
            at: Instant::now(),
            content_type,
            event,
        });
        script.replies[n].clone()
    };
    if reply.hang {
        std::future::pending::<()>().await;
    }
    let mut headers = HeaderMap::new();
    if let Some(after) = reply.retry_after {
        headers.insert(RETRY_AFTER, HeaderValue::from_static(after));
    }
    let status = StatusCode::from_u16(reply.status).unwrap();
    (status, headers, reply.body).into_response()
}

/// A URL nothing listens on.
async fn closed_port() -> Url {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    drop(listener);
    Url::parse(&url).unwrap()
}

/// Binary mode hands the data back as bytes; put it back as JSON to compare whole events.
fn with_json_data(mut event: Event) -> Event {
    if let Some(Data::Binary(bytes)) = event.data() {
        let json: Value = serde_json::from_slice(bytes).unwrap();
        event.set_data_unchecked(json);
    }
    event
}

fn with_extensions(mut event: Event, extensions: [(&str, ExtensionValue); 3]) -> Event {
    for (name, value) in extensions {
        event.set_extension(name, value);
    }
    event
}

// ---- content modes ---------------------------------------------------------------------------

#[tokio::test]
async fn binary_mode_arrives_intact() {
    let sink = sink(vec![reply(202)]).await;
    let outcome = run(&sink.url, ContentMode::Binary, &spec(Some(0))).await;
    assert_eq!(outcome, Delivered::Sink { attempts: 1 });
    assert_eq!(sink.content_types(), ["application/json"]);
    let events = sink.events();
    assert_eq!(with_json_data(events[0].clone()), event());
}

#[tokio::test]
async fn structured_mode_arrives_intact() {
    let sink = sink(vec![reply(202)]).await;
    let outcome = run(&sink.url, ContentMode::Structured, &spec(Some(0))).await;
    assert_eq!(outcome, Delivered::Sink { attempts: 1 });
    assert!(sink.content_types()[0].starts_with("application/cloudevents+json"));
    assert_eq!(sink.events(), [event()]);
}

// ---- retries ---------------------------------------------------------------------------------

#[tokio::test]
async fn a_sink_failing_twice_with_503_gets_three_attempts_with_the_same_id_spaced_by_the_backoff()
{
    let sink = sink(vec![reply(503), reply(503), reply(202)]).await;
    let spec = DeliverySpec {
        backoff_policy: BackoffPolicy::Linear,
        backoff_delay: 20 * MS,
        max_backoff: Duration::from_secs(5),
        ..spec(Some(5))
    };
    let outcome = run(&sink.url, ContentMode::Binary, &spec).await;
    assert_eq!(outcome, Delivered::Sink { attempts: 3 });
    let ids: Vec<String> = sink.events().iter().map(|e| e.id().to_owned()).collect();
    assert_eq!(ids, [event().id(); 3]);
    // Each attempt is the same event, attribute for attribute and byte for byte of its data.
    let events = sink.events();
    assert!(events.iter().all(|e| *e == events[0]), "{events:?}");
    let t = sink.times();
    assert!(
        t[1] - t[0] >= 20 * MS,
        "linear: the first retry waits 1 x 20 ms"
    );
    assert!(
        t[2] - t[1] >= 40 * MS,
        "linear: the second retry waits 2 x 20 ms"
    );
}

#[tokio::test]
async fn retry_after_is_honoured_over_a_shorter_backoff() {
    let first = Reply {
        retry_after: Some("1"),
        ..reply(503)
    };
    let sink = sink(vec![first, reply(202)]).await;
    let spec = DeliverySpec {
        max_backoff: Duration::from_secs(60),
        ..spec(Some(3))
    };
    let outcome = run(&sink.url, ContentMode::Binary, &spec).await;
    assert_eq!(outcome, Delivered::Sink { attempts: 2 });
    let t = sink.times();
    assert!(t[1] - t[0] >= Duration::from_secs(1));
}

#[tokio::test]
async fn retry_after_never_waits_beyond_max_backoff() {
    let first = Reply {
        retry_after: Some("3600"),
        ..reply(429)
    };
    let sink = sink(vec![first, reply(202)]).await;
    let outcome = run(&sink.url, ContentMode::Binary, &spec(Some(3))).await;
    assert_eq!(outcome, Delivered::Sink { attempts: 2 });
}

#[tokio::test]
async fn a_closed_port_is_a_transport_error_and_is_retried() {
    let url = closed_port().await;
    let outcome = run(&url, ContentMode::Binary, &spec(Some(2))).await;
    let Delivered::Failed { attempts, error } = outcome else {
        panic!("no sink, no dead-letter sink: {outcome:?}");
    };
    assert_eq!(attempts, 3);
    assert!(error.contains(url.as_str()), "{error}");
}

#[tokio::test]
async fn without_a_retry_limit_delivery_keeps_trying_until_the_sink_recovers() {
    let mut replies = vec![reply(503); 6];
    replies.push(reply(202));
    let sink = sink(replies).await;
    let spec = DeliverySpec {
        max_backoff: 5 * MS,
        ..spec(None)
    };
    let outcome = run(&sink.url, ContentMode::Binary, &spec).await;
    assert_eq!(outcome, Delivered::Sink { attempts: 7 });
}

#[tokio::test]
async fn an_event_that_cannot_be_encoded_is_refused_after_one_attempt_and_nothing_is_sent() {
    // A header value cannot hold a line break: the SDK's binary encoding fails.
    let mut bad = event();
    bad.set_extension("team", "ml\nops");
    let err = Encoded::new(bad.clone(), ContentMode::Binary).unwrap_err();
    assert!(matches!(err, SendError::Encode(_)), "{err:?}");
    assert!(!err.is_retryable());

    let sink = sink(vec![reply(202)]).await;
    let dls = self::sink(vec![reply(202)]).await;
    let spec = DeliverySpec {
        dead_letter_sink: Some(dls.url.clone()),
        ..spec(Some(5))
    };
    let outcome = deliver(
        &client(),
        &sink.url,
        &|| bad.clone(),
        ContentMode::Binary,
        &spec,
        &no_stop(),
    )
    .await
    .unwrap();
    let Delivered::Failed { attempts, error } = outcome else {
        panic!("not failed: {outcome:?}");
    };
    assert_eq!(attempts, 1);
    assert!(error.contains("dead-letter sink"), "{error}");
    assert_eq!((sink.count(), dls.count()), (0, 0), "nothing is sent");
}

// ---- dead-lettering --------------------------------------------------------------------------

#[tokio::test]
async fn a_non_retryable_400_goes_straight_to_the_dead_letter_sink() {
    let long_body = "invalid event; ".repeat(100);
    let sink = sink(vec![Reply {
        body: long_body.clone(),
        ..reply(400)
    }])
    .await;
    let dls = self::sink(vec![reply(202)]).await;
    let spec = DeliverySpec {
        dead_letter_sink: Some(dls.url.clone()),
        ..spec(Some(5))
    };
    let outcome = run(&sink.url, ContentMode::Binary, &spec).await;
    assert_eq!(
        outcome,
        Delivered::DeadLettered {
            attempts: 1,
            code: Some(400)
        }
    );
    assert_eq!(sink.count(), 1);
    let data = BASE64.encode(long_body.as_bytes())[..1024].to_owned();
    let expected = with_extensions(
        event(),
        [
            (KNATIVE_ERROR_DEST, sink.url.as_str().into()),
            (KNATIVE_ERROR_CODE, "400".into()),
            (KNATIVE_ERROR_DATA, data.into()),
        ],
    );
    assert_eq!(
        dls.events()
            .into_iter()
            .map(with_json_data)
            .collect::<Vec<_>>(),
        [expected]
    );
}

#[tokio::test]
async fn exhausted_retries_go_to_the_dead_letter_sink_with_knatives_extensions() {
    let sink = sink(vec![Reply {
        body: "overloaded".into(),
        ..reply(503)
    }])
    .await;
    let dls = self::sink(vec![reply(202)]).await;
    let spec = DeliverySpec {
        dead_letter_sink: Some(dls.url.clone()),
        ..spec(Some(2))
    };
    let outcome = run(&sink.url, ContentMode::Binary, &spec).await;
    assert_eq!(
        outcome,
        Delivered::DeadLettered {
            attempts: 3,
            code: Some(503)
        }
    );
    assert_eq!(sink.count(), 3);
    // Binary mode: every extension is a `ce-` header, so the receiver reads strings.
    let expected = with_extensions(
        event(),
        [
            (KNATIVE_ERROR_DEST, sink.url.as_str().into()),
            (KNATIVE_ERROR_CODE, "503".into()),
            (KNATIVE_ERROR_DATA, "b3ZlcmxvYWRlZA==".into()),
        ],
    );
    assert_eq!(
        dls.events()
            .into_iter()
            .map(with_json_data)
            .collect::<Vec<_>>(),
        [expected]
    );
}

#[tokio::test]
async fn in_structured_mode_the_dead_lettered_code_is_a_json_number() {
    let sink = sink(vec![reply(500)]).await;
    let dls = self::sink(vec![reply(202)]).await;
    let spec = DeliverySpec {
        dead_letter_sink: Some(dls.url.clone()),
        ..spec(Some(1))
    };
    let outcome = run(&sink.url, ContentMode::Structured, &spec).await;
    assert_eq!(
        outcome,
        Delivered::DeadLettered {
            attempts: 2,
            code: Some(500)
        }
    );
    let expected = with_extensions(
        event(),
        [
            (KNATIVE_ERROR_DEST, sink.url.as_str().into()),
            (KNATIVE_ERROR_CODE, ExtensionValue::Integer(500)),
            (KNATIVE_ERROR_DATA, "".into()),
        ],
    );
    assert_eq!(dls.events(), [expected]);
}

#[tokio::test]
async fn a_transport_error_is_dead_lettered_as_knative_records_it() {
    let url = closed_port().await;
    let dls = sink(vec![reply(202)]).await;
    let spec = DeliverySpec {
        dead_letter_sink: Some(dls.url.clone()),
        ..spec(Some(1))
    };
    let outcome = run(&url, ContentMode::Binary, &spec).await;
    assert_eq!(
        outcome,
        Delivered::DeadLettered {
            attempts: 2,
            code: None
        }
    );
    let dead = &dls.events()[0];
    assert_eq!(dead.extension(KNATIVE_ERROR_CODE), Some(&"500".into()));
    let Some(ExtensionValue::String(data)) = dead.extension(KNATIVE_ERROR_DATA) else {
        panic!("knativeerrordata is set");
    };
    let text = String::from_utf8(BASE64.decode(data).unwrap()).unwrap();
    assert!(text.starts_with("dispatch error: "), "{text}");
}

#[tokio::test]
async fn exhausted_retries_without_a_dead_letter_sink_fail_with_the_reason() {
    let sink = sink(vec![Reply {
        body: "overloaded".into(),
        ..reply(503)
    }])
    .await;
    let outcome = run(&sink.url, ContentMode::Binary, &spec(Some(2))).await;
    let expected = format!("sink {}: the sink answered 503: overloaded", sink.url);
    assert_eq!(
        outcome,
        Delivered::Failed {
            attempts: 3,
            error: expected
        }
    );
}

#[tokio::test]
async fn a_dead_letter_sink_that_refuses_too_gives_failed_naming_both() {
    let sink = sink(vec![reply(400)]).await;
    let dls = self::sink(vec![reply(403)]).await;
    let spec = DeliverySpec {
        dead_letter_sink: Some(dls.url.clone()),
        ..spec(Some(2))
    };
    let Delivered::Failed { attempts, error } = run(&sink.url, ContentMode::Binary, &spec).await
    else {
        panic!("both refused");
    };
    assert_eq!(attempts, 1);
    assert!(
        error.contains("answered 400") && error.contains("answered 403"),
        "{error}"
    );
    assert_eq!(dls.count(), 1, "403 is not retried either");
}

// ---- stop ------------------------------------------------------------------------------------

async fn wait_for_requests(sink: &TestSink, n: usize) {
    while sink.count() < n {
        tokio::time::sleep(MS).await;
    }
}

async fn stop_after_first_request(
    replies: Vec<Reply>,
    spec: DeliverySpec,
) -> (usize, Result<Delivered, Stopped>) {
    let sink = sink(replies).await;
    let stop = CancellationToken::new();
    let stop_rx = stop.clone();
    let url = sink.url.clone();
    let task = tokio::spawn(async move {
        deliver(
            &client(),
            &url,
            &event,
            ContentMode::Binary,
            &spec,
            &stop_rx,
        )
        .await
    });
    tokio::time::timeout(Duration::from_secs(10), wait_for_requests(&sink, 1))
        .await
        .unwrap();
    stop.cancel();
    let outcome = tokio::time::timeout(Duration::from_secs(10), task)
        .await
        .unwrap()
        .unwrap();
    (sink.count(), outcome)
}

#[tokio::test]
async fn stop_aborts_the_wait_between_attempts() {
    let hour = Duration::from_secs(3600);
    let spec = DeliverySpec {
        backoff_delay: hour,
        max_backoff: hour,
        ..spec(None)
    };
    let (requests, outcome) = stop_after_first_request(vec![reply(503)], spec).await;
    assert_eq!(outcome, Err(Stopped));
    assert_eq!(requests, 1);
}

#[tokio::test]
async fn stop_aborts_an_attempt_in_flight() {
    let hanging = Reply {
        hang: true,
        ..reply(202)
    };
    let (requests, outcome) = stop_after_first_request(vec![hanging], spec(None)).await;
    assert_eq!(outcome, Err(Stopped));
    assert_eq!(requests, 1);
}

#[tokio::test]
async fn a_stop_already_given_sends_nothing() {
    let sink = sink(vec![reply(202)]).await;
    let stop_rx = CancellationToken::new();
    stop_rx.cancel();
    let outcome = deliver(
        &client(),
        &sink.url,
        &event,
        ContentMode::Binary,
        &spec(None),
        &stop_rx,
    )
    .await;
    assert_eq!(outcome, Err(Stopped));
    assert_eq!(sink.count(), 0);
}

// ---- pure decisions --------------------------------------------------------------------------

mod guarded;
mod https;
mod shared;
mod spec;
mod wire;

#[test]
fn a_held_event_waits_one_second_then_doubling_to_a_minute() {
    let waits: Vec<u64> = (2..=10).map(|r| hold_delay(r).as_secs()).collect();
    assert_eq!(waits, [1, 2, 4, 8, 16, 32, 60, 60, 60]);
    assert_eq!(hold_delay(u32::MAX), HOLD_MAX);
}
