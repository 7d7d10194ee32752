//! Kubernetes label selectors, checked as the API server parses them (k8s.io/apimachinery
//! `labels.Parse`), so that a selector it would refuse with 400 is refused before connecting:
//! comma-separated requirements, each `key`, `!key`, `key=value`, `key==value`, `key!=value`,
//! `key in (v1,v2)`, `key notin (v1,v2)`, `key>n` or `key<n`.
//!
//! Ours, with a reason: kube's `Selector` (which the adapter matches with) parses the structure
//! of a `LabelSelector` but checks no key or value, and has no parser of the query syntax. The
//! single source could leave a bad `--selector` to the API server's 400 at its first list, but
//! the multi-tenant adapter lists and watches without the sources' selectors (one watch serves
//! them all) and matches them itself: a selector the API would refuse must be refused here
//! (`InvalidSpec`), not match nothing in silence.

/// Checks `selector`; the error says which requirement is wrong and why.
pub(crate) fn check(selector: &str) -> Result<(), String> {
    if selector.trim().is_empty() {
        return Ok(());
    }
    for (i, requirement) in split_requirements(selector).iter().enumerate() {
        requirement_ok(requirement.trim())
            .map_err(|why| format!("requirement {} ({:?}) {why}", i + 1, requirement.trim()))?;
    }
    Ok(())
}

/// The requirements: split at commas outside parentheses.
fn split_requirements(selector: &str) -> Vec<&str> {
    let (mut out, mut depth, mut start) = (Vec::new(), 0i32, 0);
    for (i, c) in selector.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&selector[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&selector[start..]);
    out
}

fn requirement_ok(r: &str) -> Result<(), String> {
    if r.is_empty() {
        return Err("is empty".into());
    }
    if let Some(key) = r.strip_prefix('!') {
        return key_ok(key.trim());
    }
    for op in ["!=", "==", "=", ">", "<"] {
        if let Some((key, value)) = r.split_once(op) {
            key_ok(key.trim())?;
            let value = value.trim();
            return match op {
                ">" | "<" if value.parse::<i64>().is_err() => {
                    Err(format!("compares with {value:?}, which is not an integer"))
                }
                ">" | "<" => Ok(()),
                _ => value_ok(value),
            };
        }
    }
    let mut words = r.splitn(2, char::is_whitespace);
    let key = words.next().unwrap_or_default();
    let rest = words.next().unwrap_or_default().trim_start();
    key_ok(key)?;
    if rest.is_empty() {
        return Ok(());
    }
    let set = rest
        .strip_prefix("notin")
        .or_else(|| rest.strip_prefix("in"))
        .ok_or_else(|| format!("has {rest:?} after the key; use =, ==, !=, in, notin, > or <"))?;
    let inner = set
        .trim()
        .strip_prefix('(')
        .and_then(|s| s.strip_suffix(')'))
        .ok_or("needs its values in parentheses, e.g. (a,b)")?;
    if inner.trim().is_empty() {
        return Err("has an empty set of values".into());
    }
    inner.split(',').try_for_each(|v| value_ok(v.trim()))
}

/// A label key: an optional DNS-subdomain prefix and `/`, and a name.
fn key_ok(key: &str) -> Result<(), String> {
    if key.is_empty() {
        return Err("has no key".into());
    }
    let (prefix, name) = match key.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    if let Some(p) = prefix {
        let subdomain = !p.is_empty()
            && p.len() <= 253
            && p.split('.').all(|l| {
                !l.is_empty()
                    && l.bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                    && !l.starts_with('-')
                    && !l.ends_with('-')
            });
        if !subdomain {
            return Err(format!(
                "has the key prefix {p:?}, which is not a DNS subdomain"
            ));
        }
    }
    if name.is_empty() || !name_ok(name) {
        return Err(format!(
            "has the key {key:?}; a key's name is at most 63 letters, digits, '-', '_' or '.', \
             starting and ending with a letter or digit"
        ));
    }
    Ok(())
}

/// A label value: empty, or a name.
fn value_ok(value: &str) -> Result<(), String> {
    if value.is_empty() || name_ok(value) {
        Ok(())
    } else {
        Err(format!(
            "has the value {value:?}; a value is at most 63 letters, digits, '-', '_' or '.', \
             starting and ending with a letter or digit"
        ))
    }
}

fn name_ok(s: &str) -> bool {
    let b = s.as_bytes();
    let alnum = |c: u8| c.is_ascii_alphanumeric();
    !b.is_empty()
        && b.len() <= 63
        && alnum(b[0])
        && alnum(b[b.len() - 1])
        && b.iter()
            .all(|&c| alnum(c) || c == b'-' || c == b'_' || c == b'.')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selectors_the_api_server_takes_pass() {
        for ok in [
            "",
            "team",
            "!team",
            "team=ds",
            "team==ds",
            "team!=ds",
            "team=",
            "opendatahub.io/notebook-image=true",
            "team in (ds,ml)",
            "team notin (ds, ml)",
            "tier,team=ds,release in (a)",
            "gen>3",
            "gen<10",
        ] {
            assert_eq!(check(ok), Ok(()), "{ok}");
        }
    }

    #[test]
    fn selectors_it_refuses_say_which_requirement_and_why() {
        for (bad, why) in [
            ("=bad", "requirement 1 (\"=bad\") has no key"),
            ("team=ds,", "requirement 2 (\"\") is empty"),
            (
                "team=ds!",
                "requirement 1 (\"team=ds!\") has the value \"ds!\"",
            ),
            ("Bad_Prefix/x=1", "has the key prefix \"Bad_Prefix\""),
            ("-team", "has the key \"-team\""),
            ("team in ds", "needs its values in parentheses"),
            ("team in ()", "has an empty set of values"),
            ("team like ds", "has \"like ds\" after the key"),
            (
                "gen>three",
                "compares with \"three\", which is not an integer",
            ),
        ] {
            let err = check(bad).unwrap_err();
            assert!(err.contains(why), "{bad}: {err}");
        }
    }
}
