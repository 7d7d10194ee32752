//! Checks of command-line values that need no API server, run by clap as it parses, so that a
//! bad value is refused before anything connects, in one line that names the flag and the value.

/// A namespace name: a DNS-1123 label (at most 63 lowercase letters, digits and `-`, starting
/// and ending with a letter or digit), as the API server requires.
pub(crate) fn namespace(value: &str) -> Result<String, String> {
    if is_dns_label(value) {
        Ok(value.to_string())
    } else {
        Err(format!(
            "{value:?} is not a namespace name (a DNS label: at most 63 lowercase letters, digits \
             and '-', starting and ending with a letter or digit)"
        ))
    }
}

/// A label selector the API server would take ([`crate::api::selector`]).
pub(crate) fn label_selector(value: &str) -> Result<String, String> {
    crate::api::selector::check(value)
        .map(|()| value.to_string())
        .map_err(|why| format!("{value:?} is not a label selector: {why}"))
}

/// An ImageStream tag name: OpenShift's rule `^[\w][\w.-]{0,127}$`.
pub(crate) fn tag(value: &str) -> Result<String, String> {
    let word = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut chars = value.chars();
    let ok = matches!(chars.next(), Some(c) if word(c))
        && value.len() <= 128
        && chars.all(|c| word(c) || c == '.' || c == '-');
    if ok {
        Ok(value.to_string())
    } else {
        Err(format!(
            "{value:?} is not a tag name (at most 128 letters, digits, '_', '.' and '-', starting \
             with a letter, digit or '_')"
        ))
    }
}

/// An image digest: `sha256:` and 64 lowercase hex digits (what the custom task takes).
pub(crate) fn digest(value: &str) -> Result<String, String> {
    if crate::controller::params::is_digest(value) {
        Ok(value.to_string())
    } else {
        Err(format!(
            "{value:?} is not an image digest (sha256: and 64 lowercase hex digits)"
        ))
    }
}

/// A Go duration (`5m`, `90s`, `1h30m`), as Tekton's `timeout` takes it; not zero.
pub(crate) fn go_duration(value: &str) -> Result<std::time::Duration, String> {
    match crate::api::parse_go_duration(value) {
        Ok(d) if d.is_zero() => Err(format!("{value:?} is zero; give a timeout such as 5m")),
        Ok(d) => Ok(d),
        Err(e) => Err(format!("{e} (a Go duration such as 90s, 5m or 1h30m)")),
    }
}

/// Whether `s` is a DNS-1123 label.
pub(crate) fn is_dns_label(s: &str) -> bool {
    let ok = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    let bytes = s.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 63
        && bytes.iter().all(|&b| ok(b) || b == b'-')
        && ok(bytes[0])
        && ok(bytes[bytes.len() - 1])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_follow_openshifts_rule_and_selectors_the_api_servers() {
        for good in ["latest", "candidate", "v1.2-rc_3", "_x", &"t".repeat(128)] {
            assert_eq!(tag(good).as_deref(), Ok(good));
        }
        for bad in ["", "-x", ".x", "a/b", "a b", &"t".repeat(129)] {
            assert!(tag(bad).unwrap_err().contains("is not a tag name"), "{bad}");
        }
        assert_eq!(label_selector("team=ds").as_deref(), Ok("team=ds"));
        assert_eq!(
            label_selector("=bad").unwrap_err(),
            "\"=bad\" is not a label selector: requirement 1 (\"=bad\") has no key"
        );
    }

    #[test]
    fn digests_and_durations_are_what_the_custom_task_takes() {
        let d = format!("sha256:{}", "a".repeat(64));
        assert_eq!(digest(&d), Ok(d.clone()));
        assert_eq!(
            digest("sha256:ABC").unwrap_err(),
            "\"sha256:ABC\" is not an image digest (sha256: and 64 lowercase hex digits)"
        );
        assert_eq!(go_duration("90s"), Ok(std::time::Duration::from_secs(90)));
        assert_eq!(
            go_duration("0").unwrap_err(),
            "\"0\" is zero; give a timeout such as 5m"
        );
        assert_eq!(
            go_duration("5 minutes").unwrap_err(),
            "invalid duration \"5 minutes\" (a Go duration such as 90s, 5m or 1h30m)"
        );
    }

    #[test]
    fn a_namespace_is_a_dns_label() {
        for good in ["ds", "team-1", "a", &"x".repeat(63)] {
            assert_eq!(namespace(good).as_deref(), Ok(good));
        }
        for bad in ["", "Bad_NS", "-ds", "ds-", "d.s", "DS", &"x".repeat(64)] {
            let err = namespace(bad).unwrap_err();
            assert!(
                err.starts_with(&format!("{bad:?} is not a namespace name")),
                "{err}"
            );
        }
    }
}
