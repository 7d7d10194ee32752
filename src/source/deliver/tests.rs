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

/// A stop signal that never fires (its sender is gone).
fn no_stop() -> watch::Receiver<bool> {
    watch::channel(false).1
}

async fn run(sink: &Url, mode: ContentMode, spec: &DeliverySpec) -> Delivered {
    let (client, event, stop) = (client(), event(), no_stop());
    let delivery = deliver(&client, sink, &event, mode, spec, &stop);
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
    let err = Encoded::new(&bad, ContentMode::Binary).unwrap_err();
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
        &bad,
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
    let (stop_tx, stop_rx) = watch::channel(false);
    let url = sink.url.clone();
    let task = tokio::spawn(async move {
        deliver(
            &client(),
            &url,
            &event(),
            ContentMode::Binary,
            &spec,
            &stop_rx,
        )
        .await
    });
    tokio::time::timeout(Duration::from_secs(10), wait_for_requests(&sink, 1))
        .await
        .unwrap();
    stop_tx.send(true).unwrap();
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
    let (_stop_tx, stop_rx) = watch::channel(true);
    let outcome = deliver(
        &client(),
        &sink.url,
        &event(),
        ContentMode::Binary,
        &spec(None),
        &stop_rx,
    )
    .await;
    assert_eq!(outcome, Err(Stopped));
    assert_eq!(sink.count(), 0);
}

// ---- pure decisions --------------------------------------------------------------------------

#[test]
fn retryable_statuses_are_knatives_selective_retry() {
    let table = [
        (None, true),
        (Some(200), false),
        (Some(202), false),
        (Some(301), false),
        (Some(307), false),
        (Some(400), false),
        (Some(401), false),
        (Some(403), false),
        (Some(404), true),
        (Some(408), true),
        (Some(409), true),
        (Some(410), false),
        (Some(413), false),
        (Some(422), false),
        (Some(429), true),
        (Some(500), true),
        (Some(501), true),
        (Some(502), true),
        (Some(503), true),
        (Some(504), true),
    ];
    for (status, retryable) in table {
        assert_eq!(is_retryable(status), retryable, "{status:?}");
    }
    assert!(!SendError::Encode("bad header".into()).is_retryable());
    assert!(SendError::Transport("connection refused".into()).is_retryable());
}

#[test]
fn iso8601_durations_parse_as_knative_reads_them() {
    let secs = Duration::from_secs;
    let table = [
        ("PT0.2S", Duration::from_millis(200)),
        ("PT0,5S", Duration::from_millis(500)),
        ("PT1S", secs(1)),
        ("PT1M", secs(60)),
        ("PT1.5M", secs(90)),
        ("PT1H30M", secs(5400)),
        ("PT2H3M4S", secs(7384)),
        ("P1D", secs(86_400)),
        ("P1W", secs(604_800)),
        ("P1W1D", secs(691_200)),
        ("P1DT12H", secs(129_600)),
        ("P1M", secs(2_629_746)),
        ("P1Y", secs(31_556_952)),
        (
            "P1Y2M3W4DT5H6M7S",
            secs(31_556_952 + 2 * 2_629_746 + 25 * 86_400 + 18_367),
        ),
        ("PT0.000000001S", Duration::from_nanos(1)),
        ("PT0.123456789S", Duration::from_nanos(123_456_789)),
        ("+PT1S", secs(1)),
        ("PT0S", Duration::ZERO),
        ("P0D", Duration::ZERO),
        ("P0", Duration::ZERO),
        ("PT36H", secs(129_600)),
    ];
    for (input, expected) in table {
        assert_eq!(parse_iso8601_duration(input), Ok(expected), "{input}");
    }
}

#[test]
fn invalid_iso8601_durations_are_refused_with_the_reason() {
    let table = [
        ("", "must start with 'P'"),
        ("1S", "must start with 'P'"),
        ("pt1s", "must start with 'P'"),
        ("0.2s", "must start with 'P'"),
        ("-PT1S", "negative"),
        ("P", "nothing after 'P'"),
        ("PT", "'T' must be followed"),
        ("P1DT", "'T' must be followed"),
        ("PT1", "has no designator"),
        ("PTS", "expected a number before 'S'"),
        ("PT1X", "unexpected 'X'"),
        ("PT1S2M", "out of order"),
        ("PT1M1M", "repeated"),
        ("P1D2Y", "out of order"),
        ("P1H", "needs a 'T' before it, as in PT1H"),
        ("PT1D", "'D' cannot come after 'T'"),
        ("PT1HT1M", "'T' appears twice"),
        ("P1.5DT1H", "only the last component may have a fraction"),
        ("PT1.5M30S", "only the last component may have a fraction"),
        ("PT1.S", "is not a number"),
        ("PT.5S", "is not a number"),
        ("PT1.2.3S", "is not a number"),
        ("PT0.0000000001S", "is not a number"),
        ("PT1S ", "unexpected ' '"),
        ("P1D\n", "unexpected '\\n'"),
        ("P99999999999999999999999Y", "too large"),
        ("PT99999999999999999999999999999999999999999S", "too large"),
    ];
    for (input, reason) in table {
        let error = parse_iso8601_duration(input).expect_err(input);
        assert!(
            error.starts_with(&format!("invalid ISO-8601 duration {input:?}: ")),
            "{error}"
        );
        assert!(error.contains(reason), "{input}: {error}");
    }
}

#[test]
fn backoff_follows_knatives_formulas_capped_by_max_backoff() {
    let spec = |policy, delay: &str, max_secs| DeliverySpec {
        backoff_policy: policy,
        backoff_delay: parse_iso8601_duration(delay).unwrap(),
        max_backoff: Duration::from_secs(max_secs),
        ..self::spec(None)
    };
    let ms = Duration::from_millis;
    use BackoffPolicy::{Exponential, Linear};
    let table = [
        // Knative's own table (pkg/kncloudevents/retries_test.go), retries 1 to 5.
        (
            spec(Linear, "PT2.5S", 300),
            vec![ms(2500), ms(5000), ms(7500), ms(10_000), ms(12_500)],
        ),
        (
            spec(Exponential, "PT1.5S", 300),
            vec![ms(3000), ms(6000), ms(12_000), ms(24_000), ms(48_000)],
        ),
        (
            spec(Exponential, "PT0.5S", 300),
            vec![ms(1000), ms(2000), ms(4000), ms(8000), ms(16_000)],
        ),
        // The cap.
        (
            spec(Exponential, "PT1S", 5),
            vec![ms(2000), ms(4000), ms(5000), ms(5000), ms(5000)],
        ),
        (
            spec(Linear, "PT2S", 5),
            vec![ms(2000), ms(4000), ms(5000), ms(5000), ms(5000)],
        ),
        (spec(Exponential, "PT0S", 5), vec![ms(0); 5]),
    ];
    for (spec, expected) in table {
        let got: Vec<Duration> = (1..=5).map(|retry| spec.delay(retry)).collect();
        assert_eq!(got, expected, "{spec:?}");
    }
    let capped = spec(Exponential, "PT1S", 300);
    for retry in [31, 32, 64, 1000, u32::MAX] {
        assert_eq!(
            capped.delay(retry),
            Duration::from_secs(300),
            "no overflow at {retry}"
        );
    }
    assert_eq!(
        spec(Linear, "P1D", 300).delay(u32::MAX),
        Duration::from_secs(300)
    );
}

#[test]
fn the_wait_is_the_longer_of_backoff_and_retry_after_on_429_and_503_only() {
    let spec = DeliverySpec {
        backoff_delay: Duration::from_secs(1),
        max_backoff: Duration::from_secs(60),
        ..spec(None)
    };
    let failed = |status, after: Option<u64>| SendError::Status {
        status,
        retry_after: after.map(Duration::from_secs),
        body: Vec::new(),
    };
    let secs = Duration::from_secs;
    let table = [
        (failed(503, Some(10)), secs(10)),
        (failed(429, Some(10)), secs(10)),
        (failed(503, Some(1)), secs(2)),
        (failed(503, Some(3600)), secs(60)),
        (failed(503, None), secs(2)),
        (failed(500, Some(10)), secs(2)),
        (failed(404, Some(10)), secs(2)),
        (SendError::Transport("reset".into()), secs(2)),
    ];
    for (err, expected) in table {
        assert_eq!(spec.wait_before(1, &err), expected, "{err:?}");
    }
}

#[test]
fn retry_after_is_seconds_or_an_http_date() {
    let now = Utc.with_ymd_and_hms(2026, 12, 1, 9, 0, 0).unwrap();
    let secs = Duration::from_secs;
    let table = [
        ("120", Some(secs(120))),
        (" 5 ", Some(secs(5))),
        ("0", Some(secs(0))),
        ("Tue, 01 Dec 2026 09:00:30 GMT", Some(secs(30))),
        ("Tuesday, 01-Dec-26 09:01:00 GMT", Some(secs(60))),
        ("Tue Dec  1 09:00:10 2026", Some(secs(10))),
        ("Mon, 30 Nov 2026 09:00:00 GMT", Some(Duration::ZERO)),
        ("-5", None),
        ("1.5", None),
        ("soon", None),
        ("", None),
    ];
    for (value, expected) in table {
        assert_eq!(parse_retry_after(value, now), expected, "{value:?}");
    }
}

#[test]
fn knative_error_data_is_standard_base64_cut_to_1024_characters() {
    let sink = Url::parse("http://el-images.ci.svc.cluster.local:8080").unwrap();
    let body = |len: usize| (0..len).map(|i| (i % 251) as u8).collect::<Vec<u8>>();
    let status = |body: Vec<u8>| SendError::Status {
        status: 503,
        retry_after: None,
        body,
    };
    let long = body(2000);
    let table = [
        (
            status(b"overloaded".to_vec()),
            503,
            "b3ZlcmxvYWRlZA==".to_owned(),
        ),
        (status(Vec::new()), 503, String::new()),
        (status(b"a".to_vec()), 503, "YQ==".to_owned()),
        // `send` keeps ERROR_BODY_LIMIT bytes; their base64 is Knative's cut of the whole.
        (
            status(long[..ERROR_BODY_LIMIT].to_vec()),
            503,
            BASE64.encode(&long)[..1024].to_owned(),
        ),
        (
            status(long.clone()),
            503,
            BASE64.encode(&long)[..1024].to_owned(),
        ),
        (
            SendError::Transport("connection refused".into()),
            500,
            BASE64.encode("dispatch error: connection refused"),
        ),
        (SendError::Encode("bad header".into()), -1, String::new()),
    ];
    for (err, code, data) in table {
        let [dest, code_ext, data_ext] = knative_error_extensions(&sink, &err);
        assert_eq!(
            dest,
            (
                KNATIVE_ERROR_DEST,
                "http://el-images.ci.svc.cluster.local:8080/".into()
            )
        );
        assert_eq!(
            code_ext,
            (KNATIVE_ERROR_CODE, ExtensionValue::Integer(code))
        );
        assert_eq!(
            data_ext,
            (KNATIVE_ERROR_DATA, ExtensionValue::String(data)),
            "{err:?}"
        );
    }
}

// ---- TLS -------------------------------------------------------------------------------------

// A test-only CA and a server certificate it signed for 127.0.0.1 and localhost (P-256,
// valid 2000-2099), made with `openssl ca`. The key protects nothing.
const CA_PEM: &str = "-----BEGIN CERTIFICATE-----
MIIBajCCARGgAwIBAgIBATAKBggqhkjOPQQDAjAcMRowGAYDVQQDDBFpbWFnZWdh
dGUgdGVzdCBDQTAgFw0wMDAxMDEwMDAwMDBaGA8yMDk5MTIzMTIzNTk1OVowHDEa
MBgGA1UEAwwRaW1hZ2VnYXRlIHRlc3QgQ0EwWTATBgcqhkjOPQIBBggqhkjOPQMB
BwNCAAQOQxqW3YYDcD0ugZOzc8LfyO4GsIGYOu7qC5IGDwqtin3jVWzepCo2VR/T
XRSQwdFzee62Th9Eo1bUso1hS6tCo0IwQDAPBgNVHRMBAf8EBTADAQH/MA4GA1Ud
DwEB/wQEAwIBBjAdBgNVHQ4EFgQUyGR0oMoTE5vt1Dvu3yWiYSWleW4wCgYIKoZI
zj0EAwIDRwAwRAIgXMXQwD+Y00Rikfw1GDPN/daMGEO+snfFLiwQg7eyY0YCIHsF
78RMGuGTwoOVWsMAOCYMTfZHshGZoTQmkZQ4FHEu
-----END CERTIFICATE-----
";
const SERVER_PEM: &str = "-----BEGIN CERTIFICATE-----
MIIBtDCCAVqgAwIBAgIBAjAKBggqhkjOPQQDAjAcMRowGAYDVQQDDBFpbWFnZWdh
dGUgdGVzdCBDQTAgFw0wMDAxMDEwMDAwMDBaGA8yMDk5MTIzMTIzNTk1OVowFDES
MBAGA1UEAwwJMTI3LjAuMC4xMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEJGSy
sMp5NC8J0g7/O7RWvfBYO+o45L7h1HkHCdQLt05Ex9g16cB4B/5p/sZOrEBA7pmw
o4ZTvpb1o28Gc3VY/KOBkjCBjzAMBgNVHRMBAf8EAjAAMA4GA1UdDwEB/wQEAwIH
gDATBgNVHSUEDDAKBggrBgEFBQcDATAaBgNVHREEEzARhwR/AAABgglsb2NhbGhv
c3QwHwYDVR0jBBgwFoAUyGR0oMoTE5vt1Dvu3yWiYSWleW4wHQYDVR0OBBYEFAeo
URNkcrETw3ntieZa7NNmYdnoMAoGCCqGSM49BAMCA0gAMEUCIQDtVZHiHUloHgR4
Z92etCv99vlMUfX+obEIvg5NcJVJbAIgSYO1LcdwRnHsnSKq0A6d/WPfLlpmAx0V
/qDZGKUdha4=
-----END CERTIFICATE-----
";
const SERVER_KEY: &str = "-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgZS7colwQfoGu3hLP
02skojGZXrx8LZ4FSqoZMcdwmLOhRANCAAQkZLKwynk0LwnSDv87tFa98Fg76jjk
vuHUeQcJ1Au3TkTH2DXpwHgH/mn+xk6sQEDumbCjhlO+lvWjbwZzdVj8
-----END PRIVATE KEY-----
";

/// An https sink on a thread (rustls is a dependency; tokio-rustls is not): answers 202 to
/// each request and passes on the event the SDK parsed from it.
fn https_sink() -> (Url, std::sync::mpsc::Receiver<Event>) {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let certs = vec![CertificateDer::from_pem_slice(SERVER_PEM.as_bytes()).unwrap()];
    let key = PrivateKeyDer::from_pem_slice(SERVER_KEY.as_bytes()).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .unwrap();
    let config = Arc::new(config);
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = Url::parse(&format!("https://{}/", listener.local_addr().unwrap())).unwrap();
    let (events, received) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for tcp in listener.incoming().flatten() {
            let connection = rustls::ServerConnection::new(config.clone()).unwrap();
            let mut tls = rustls::StreamOwned::new(connection, tcp);
            // A client that does not trust the certificate ends here, without a request.
            let Some(event) = read_event(&mut tls) else {
                continue;
            };
            let _ = tls.write_all(
                b"HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
            );
            tls.conn.send_close_notify();
            let _ = tls.flush();
            let _ = events.send(event);
        }
    });
    (url, received)
}

/// Reads one HTTP/1.1 request with a content-length and parses it with the SDK.
fn read_event(stream: &mut impl Read) -> Option<Event> {
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(at) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
        let n = stream.read(&mut chunk).ok().filter(|n| *n > 0)?;
        buffer.extend_from_slice(&chunk[..n]);
    };
    let head = std::str::from_utf8(&buffer[..head_end]).ok()?;
    let mut headers = HeaderMap::new();
    for line in head.split("\r\n").skip(1).filter(|line| !line.is_empty()) {
        let (name, value) = line.split_once(':')?;
        let name = HeaderName::from_bytes(name.trim().as_bytes()).ok()?;
        headers.append(name, HeaderValue::from_str(value.trim()).ok()?);
    }
    let length: usize = headers.get(CONTENT_LENGTH)?.to_str().ok()?.parse().ok()?;
    while buffer.len() < head_end + length {
        let n = stream.read(&mut chunk).ok().filter(|n| *n > 0)?;
        buffer.extend_from_slice(&chunk[..n]);
    }
    to_event(&headers, buffer[head_end..head_end + length].to_vec()).ok()
}

#[tokio::test]
async fn an_https_sink_is_trusted_through_the_ca_bundle_and_only_through_it() {
    let (url, received) = https_sink();
    let untrusting = client();
    let encoded = Encoded::new(&event(), ContentMode::Binary).unwrap();
    let err = untrusting.post(&url, &encoded).await.unwrap_err();
    assert!(matches!(err, SendError::Transport(_)), "{err:?}");
    assert!(err.is_retryable());

    let trusting = SinkClient::new(Some(Duration::from_secs(10)), Some(CA_PEM)).unwrap();
    let status = trusting.post(&url, &encoded).await.unwrap();
    assert_eq!(status, 202);
    let arrived = received.recv_timeout(Duration::from_secs(10)).unwrap();
    assert_eq!(with_json_data(arrived), event());
}

#[test]
fn a_ca_bundle_must_hold_a_certificate() {
    let no_certificate = SinkClient::new(None, Some("# nothing here\n")).unwrap_err();
    assert!(
        matches!(no_certificate, DeliverError::CaCerts(_)),
        "{no_certificate}"
    );
    let garbage = "-----BEGIN CERTIFICATE-----\nnot base64!\n-----END CERTIFICATE-----\n";
    let garbage = SinkClient::new(None, Some(garbage)).unwrap_err();
    assert!(matches!(garbage, DeliverError::CaCerts(_)), "{garbage}");
    let not_der = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
    let not_der = SinkClient::new(None, Some(not_der)).unwrap_err();
    assert!(matches!(not_der, DeliverError::CaCerts(_)), "{not_der}");
    let bundle = format!("{CA_PEM}{SERVER_PEM}");
    assert!(SinkClient::new(None, Some(&bundle)).is_ok());
}

/// The headers and body of a request as sorted pairs and bytes.
fn wire(headers: &reqwest::header::HeaderMap, body: &[u8]) -> (Vec<(String, String)>, Vec<u8>) {
    let mut pairs: Vec<(String, String)> = headers
        .iter()
        .map(|(k, v)| (k.as_str().to_owned(), v.to_str().unwrap().to_owned()))
        .collect();
    pairs.sort();
    (pairs, body.to_vec())
}

#[test]
fn an_encoded_event_is_byte_for_byte_what_the_sdks_reqwest_binding_sends() {
    use cloudevents::binding::reqwest::{RequestBuilderExt as _, RequestSerializer};
    // Every kind of attribute value: the data and dataschema of an `updated` event, a
    // deletion's missing data fields, an integer and a string extension as a dead letter
    // carries them, and an override.
    let mut dead = event();
    let err = SendError::Status {
        status: 503,
        retry_after: None,
        body: b"busy".to_vec(),
    };
    let sink: Url = "http://sink.example/".parse().unwrap();
    for (name, value) in knative_error_extensions(&sink, &err) {
        dead.set_extension(name, value);
    }
    dead.set_extension("team", "ml");
    let http = reqwest::Client::new();
    for ev in [event(), dead] {
        let sdk = http
            .post(sink.clone())
            .event(ev.clone())
            .unwrap()
            .build()
            .unwrap();
        let ours = Encoded::new(&ev, ContentMode::Binary).unwrap();
        assert_eq!(
            wire(ours.headers(), ours.body()),
            wire(sdk.headers(), sdk.body().unwrap().as_bytes().unwrap()),
            "binary mode"
        );
        let sdk = ev
            .clone()
            .deserialize_structured(RequestSerializer::new(http.post(sink.clone())))
            .unwrap()
            .build()
            .unwrap();
        let ours = Encoded::new(&ev, ContentMode::Structured).unwrap();
        assert_eq!(
            wire(ours.headers(), ours.body()),
            wire(sdk.headers(), sdk.body().unwrap().as_bytes().unwrap()),
            "structured mode"
        );
    }
    let header = |name: &str| {
        Encoded::new(&event(), ContentMode::Binary)
            .unwrap()
            .headers()
            .get(name)
            .map(|v| v.to_str().unwrap().to_owned())
    };
    assert_eq!(header("content-type").as_deref(), Some("application/json"));
    assert_eq!(header("ce-imagetag").as_deref(), Some("latest"));
}
