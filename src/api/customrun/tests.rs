//! Go durations as Tekton writes `spec.timeout`: the cases that tell a faithful parser apart.

use super::*;

#[test]
fn go_durations_parse_exactly_as_go_parses_them() {
    let ok = [
        ("1h30m", Duration::from_secs(5400)),
        ("1.5h", Duration::from_secs(5400)),
        ("300ms", Duration::from_millis(300)),
        ("2us", Duration::from_micros(2)),
        ("2\u{b5}s", Duration::from_micros(2)),
        ("2\u{3bc}s", Duration::from_micros(2)),
        ("0", Duration::ZERO),
        ("+0", Duration::ZERO),
        ("-0", Duration::ZERO),
        ("1.s", Duration::from_secs(1)),
        (
            "2562047h47m16.854775807s",
            Duration::from_nanos(i64::MAX as u64),
        ),
    ];
    for (text, want) in ok {
        assert_eq!(parse_go_duration(text), Ok(want), "{text}");
    }
    assert_eq!(
        parse_go_duration("-1s"),
        Err(ParseDurationError::Negative("-1s".into()))
    );
    assert_eq!(
        parse_go_duration("2562047h47m16.854775808s"),
        Err(ParseDurationError::Overflow(
            "2562047h47m16.854775808s".into()
        ))
    );
    for text in ["1d", "1h 30m", "00", "1e3s", "-", "+"] {
        assert_eq!(
            parse_go_duration(text),
            Err(ParseDurationError::Invalid(text.into())),
            "{text}"
        );
    }
}
