//! The order the dashboard offers tags in (§1.3 `compareTagVersions` in `spawnerUtils.ts`), as
//! its code computes it in the browser: its comparator puts `a` first whenever `a` is
//! recommended, else compares the names with compare-versions 3.6 when both are versions by
//! that package's `validate`, else with `String.prototype.localeCompare`, descending; and V8's
//! `Array.prototype.sort` runs it. The comparator is not a total order (two recommended tags are
//! each "first"), so a Rust sort would give another order (or refuse it); [`js_sort`] follows
//! V8's TimSort for the short arrays a stream's tags make.
//!
//! Written here rather than taken from a crate: what is modelled is these two JavaScript
//! packages' exact quirks (compare-versions 3 refuses `V2` and five parts; ICU's root collation
//! orders `_` before `-` and compares case last), which general version or collation crates do
//! not reproduce on purpose.

use std::cmp::Ordering;

/// The dashboard's comparator over (name, recommended).
pub(super) fn compare_tags(a: (&str, bool), b: (&str, bool)) -> Ordering {
    if a.1 {
        return Ordering::Less;
    }
    if b.1 {
        return Ordering::Greater;
    }
    if valid_version(a.0) && valid_version(b.0) {
        return compare_versions(b.0, a.0);
    }
    locale_compare(b.0, a.0)
}

/// V8's `Array.prototype.sort` (TimSort) for arrays shorter than 64: one run found from the
/// start (a strictly descending one is reversed), the rest placed by binary insertion. Longer
/// arrays merge several runs in V8; for them this is the same order whenever `cmp` is a total
/// order.
pub(super) fn js_sort<T>(items: &mut [T], cmp: impl Fn(&T, &T) -> Ordering) {
    let n = items.len();
    if n < 2 {
        return;
    }
    let mut run = 2;
    let descending = cmp(&items[1], &items[0]) == Ordering::Less;
    while run < n {
        let order = cmp(&items[run], &items[run - 1]);
        let goes_on = if descending {
            order == Ordering::Less
        } else {
            order != Ordering::Less
        };
        if !goes_on {
            break;
        }
        run += 1;
    }
    if descending {
        items[..run].reverse();
    }
    for start in run..n {
        let (mut left, mut right) = (0, start);
        while left < right {
            let mid = left + (right - left) / 2;
            if cmp(&items[start], &items[mid]) == Ordering::Less {
                right = mid;
            } else {
                left = mid + 1;
            }
        }
        items[left..=start].rotate_right(1);
    }
}

/// compare-versions 3.6 `validate` (its pattern is case-insensitive): `v`/`V`?, one to four
/// dot-separated parts, the first a number, the others numbers or `x`/`*`; a pre-release
/// (`-…`) and build (`+…`) of letters, digits and `-` only after three parts.
pub(super) fn valid_version(name: &str) -> bool {
    let s = name.strip_prefix(['v', 'V']).unwrap_or(name);
    let (core, build) = match s.split_once('+') {
        Some((c, b)) => (c, Some(b)),
        None => (s, None),
    };
    let (core, pre) = match core.split_once('-') {
        Some((c, p)) => (c, Some(p)),
        None => (core, None),
    };
    let parts: Vec<&str> = core.split('.').collect();
    let number = |p: &str| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit());
    let labels = |l: &str| {
        l.split('.')
            .all(|id| !id.is_empty() && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-'))
    };
    (1..=4).contains(&parts.len())
        && number(parts[0])
        && parts[1..]
            .iter()
            .all(|p| number(p) || matches!(*p, "x" | "X" | "*"))
        && (pre.is_none() && build.is_none() || parts.len() >= 3)
        && pre.is_none_or(labels)
        && build.is_none_or(labels)
}

/// compare-versions 3.6 on two valid versions: the numeric parts (a missing one is 0; what
/// `parseInt` cannot read, `x` or a part after an uppercase `V` the package does not strip,
/// equals anything), then a version without a pre-release after one with it, then the
/// pre-release's parts (numbers before words, words by code unit).
pub(super) fn compare_versions(a: &str, b: &str) -> Ordering {
    fn split(v: &str) -> (Vec<Option<u64>>, &str) {
        let v = v.strip_prefix('v').unwrap_or(v);
        let v = v.split_once('+').map_or(v, |(c, _)| c);
        let (core, pre) = v.split_once('-').unwrap_or((v, ""));
        (core.split('.').map(|p| p.parse().ok()).collect(), pre)
    }
    let ((na, pa), (nb, pb)) = (split(a), split(b));
    for i in 0..na.len().max(nb.len()) {
        let x = na.get(i).copied().unwrap_or(Some(0));
        let y = nb.get(i).copied().unwrap_or(Some(0));
        if let (Some(x), Some(y)) = (x, y)
            && x != y
        {
            return x.cmp(&y);
        }
    }
    match (pa.is_empty(), pb.is_empty()) {
        (true, true) => Ordering::Equal,
        (false, true) => Ordering::Less,
        (true, false) => Ordering::Greater,
        (false, false) => {
            let (xa, xb): (Vec<&str>, Vec<&str>) =
                (pa.split('.').collect(), pb.split('.').collect());
            for i in 0..xa.len().max(xb.len()) {
                let (Some(x), Some(y)) = (xa.get(i), xb.get(i)) else {
                    return xa.len().cmp(&xb.len());
                };
                let order = match (x.parse::<u64>(), y.parse::<u64>()) {
                    (Ok(x), Ok(y)) => x.cmp(&y),
                    (Ok(_), Err(_)) => Ordering::Less,
                    (Err(_), Ok(_)) => Ordering::Greater,
                    (Err(_), Err(_)) => x.cmp(y),
                };
                if order != Ordering::Equal {
                    return order;
                }
            }
            Ordering::Equal
        }
    }
}

/// `localeCompare` as ICU's root collation orders the characters a tag name may hold
/// (`[A-Za-z0-9_.-]`): `_` < `-` < `.` < digits < letters, letters compared without case first
/// and lowercase before uppercase only when nothing else differs. Other characters fall back to
/// their code point after all of these.
pub(super) fn locale_compare(a: &str, b: &str) -> Ordering {
    fn primary(c: char) -> (u8, u32) {
        match c {
            '_' => (0, 0),
            '-' => (0, 1),
            '.' => (0, 2),
            '0'..='9' => (1, c as u32),
            'a'..='z' | 'A'..='Z' => (2, c.to_ascii_lowercase() as u32),
            _ => (3, c as u32),
        }
    }
    let keys = |s: &str| s.chars().map(primary).collect::<Vec<_>>();
    keys(a).cmp(&keys(b)).then_with(|| {
        // Tertiary: at the first difference in case, lowercase first.
        a.chars()
            .zip(b.chars())
            .find(|(x, y)| x != y)
            .map_or(Ordering::Equal, |(x, y)| {
                x.is_ascii_uppercase().cmp(&y.is_ascii_uppercase())
            })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sorted(tags: &[(&str, bool)]) -> Vec<String> {
        let mut v = tags.to_vec();
        js_sort(&mut v, |a, b| compare_tags(*a, *b));
        v.into_iter().map(|(t, _)| t.to_string()).collect()
    }

    #[test]
    fn compare_versions_3_accepts_and_refuses_what_the_package_does() {
        for ok in [
            "2025.2",
            "v3.12",
            "V2",
            "1.2.3.4",
            "1.2.3-rc.1",
            "1.2.3-RC1",
            "1.x",
            "2",
        ] {
            assert!(valid_version(ok), "{ok}");
        }
        for no in ["1.2.3.4.5", "2025.10-1", "latest", "", "v", "1..2", "X1"] {
            assert!(!valid_version(no), "{no}");
        }
        assert_eq!(compare_versions("2025.10", "2025.2"), Ordering::Greater);
        assert_eq!(compare_versions("1.2.3-rc.1", "1.2.3"), Ordering::Less);
        assert_eq!(
            compare_versions("1.2.3-rc.2", "1.2.3-rc.10"),
            Ordering::Less
        );
        assert_eq!(compare_versions("1.x", "1.7"), Ordering::Equal);
        assert_eq!(
            compare_versions("v10", "V2"),
            Ordering::Equal,
            "parseInt('V2') is NaN"
        );
    }

    #[test]
    fn locale_order_puts_underscore_before_hyphen_and_case_last() {
        assert_eq!(
            locale_compare("latest_x", "latest-candidate"),
            Ordering::Less
        );
        assert_eq!(locale_compare("latest", "Latest"), Ordering::Less);
        assert_eq!(locale_compare("Latest", "latest_x"), Ordering::Less);
        assert_eq!(locale_compare("v10", "V2"), Ordering::Less);
        assert_eq!(locale_compare("a", "a"), Ordering::Equal);
    }

    /// Tag names and whether each is recommended, in spec order.
    type Tags = &'static [(&'static str, bool)];

    /// Each input order and what Node.js 20 (V8's sort, ICU's root collation) gave for it with
    /// compare-versions 3.6.0 and the dashboard's comparator (run 2026-12-06; E6/E7 of
    /// ../shared/reference/review/odh-dashboard-check.md among them).
    const NODE: &[(Tags, &[&str])] = &[
        (
            &[
                ("Latest", false),
                ("candidate", false),
                ("latest-candidate", false),
                ("latest_x", false),
            ],
            &["latest-candidate", "latest_x", "Latest", "candidate"],
        ),
        (&[("V2", false), ("v10", false)], &["V2", "v10"]),
        (&[("v10", false), ("V2", false)], &["v10", "V2"]),
        (
            &[("1.2.3.4.5", false), ("1.2.3.4.10", false)],
            &["1.2.3.4.5", "1.2.3.4.10"],
        ),
        (
            &[("2025.1", false), ("2025.2", true)],
            &["2025.2", "2025.1"],
        ),
        (
            &[("2025.1", true), ("2025.2", true), ("2024.2", false)],
            &["2025.2", "2025.1", "2024.2"],
        ),
        (
            &[("2024.2", false), ("2025.1", true), ("2025.2", true)],
            &["2025.2", "2025.1", "2024.2"],
        ),
        (
            &[("2025.2", true), ("2024.2", false), ("2025.1", true)],
            &["2025.1", "2025.2", "2024.2"],
        ),
        (
            &[("latest", false), ("latest-candidate", false)],
            &["latest-candidate", "latest"],
        ),
        (
            &[("2025.10", false), ("2025.2", false), ("2025.10-1", false)],
            &["2025.10", "2025.2", "2025.10-1"],
        ),
        (
            &[("2025.1", false), ("X1", false), ("2025.2", false)],
            &["X1", "2025.2", "2025.1"],
        ),
        (
            &[
                ("1.2.3-rc.2", false),
                ("1.2.3", false),
                ("1.2.3-rc.10", false),
                ("1.2.3-RC.3", false),
            ],
            &["1.2.3", "1.2.3-rc.10", "1.2.3-rc.2", "1.2.3-RC.3"],
        ),
        (
            &[
                ("a", false),
                ("B", false),
                ("b", false),
                ("A", false),
                ("_a", false),
                ("-a", false),
                (".a", false),
                ("1a", false),
            ],
            &["B", "b", "A", "a", "1a", ".a", "-a", "_a"],
        ),
        (
            &[
                ("candidate", false),
                ("latest", true),
                ("latest-previous", false),
                ("2025.1", false),
            ],
            &["latest", "latest-previous", "candidate", "2025.1"],
        ),
    ];

    #[test]
    fn the_orders_node_gave_for_the_dashboards_comparator() {
        for (input, want) in NODE {
            assert_eq!(sorted(input), *want, "{input:?}");
        }
    }
}
