//! The delivery spec, pure: which statuses are retried, `backoffDelay` as Knative reads it,
//! the backoff formulas, `Retry-After`.

use super::*;

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
        assert_eq!(spec.wait_after(spec.delay(1), &err), expected, "{err:?}");
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
        // Not an HTTP-date (RFC 9110 allows only GMT, and the weekday): ignored, the backoff
        // applies.
        ("Tue, 01 Dec 2026 09:00:30 +0000", None),
        ("01 Dec 2026 09:00:30 GMT", None),
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
fn the_delays_are_one_per_retry_and_end_when_the_retries_are_spent() {
    let delays: Vec<Duration> = spec(Some(3)).delays().collect();
    assert_eq!(delays, [2 * MS, 4 * MS, 8 * MS]);
    assert_eq!(spec(Some(0)).delays().next(), None);
    // Without a limit they go on, capped by max_backoff.
    let forever: Vec<Duration> = spec(None).delays().take(40).collect();
    assert_eq!(forever.len(), 40);
    assert_eq!(forever[39], 20 * MS);
}
