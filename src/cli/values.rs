//! Checks of command-line values that need no API server, run by clap as it parses, so that a
//! bad value is refused before anything connects, in one line that names the flag and the value.

/// A namespace name: a DNS-1123 label (at most 63 lowercase letters, digits and `-`, starting
/// and ending with a letter or digit), as the API server requires.
pub fn namespace(value: &str) -> Result<String, String> {
    if is_dns_label(value) {
        Ok(value.to_string())
    } else {
        Err(format!(
            "{value:?} is not a namespace name (a DNS label: at most 63 lowercase letters, digits \
             and '-', starting and ending with a letter or digit)"
        ))
    }
}

/// Whether `s` is a DNS-1123 label.
pub fn is_dns_label(s: &str) -> bool {
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
