//! Names made to fit Kubernetes' limits (pure): a source's name can be 253 characters, but
//! the ConfigMap names built from it must stay within 253 and a label value within 63. A name
//! too long is cut and ends in `-` and 8 hex digits of a stable hash (FNV-1a) of the whole
//! name, so that two long names that share their start still differ.

/// The longest label value Kubernetes accepts.
pub(crate) const LABEL_VALUE_MAX: usize = 63;

/// `name` if it has at most `max` characters, else its first `max - 9` and `-HASH`.
pub(crate) fn fit(name: &str, max: usize) -> String {
    if name.len() <= max {
        return name.to_owned();
    }
    let mut cut = max.saturating_sub(9);
    while !name.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}-{:08x}", &name[..cut], fnv1a(name) as u32)
}

/// The value of the label that names a checkpoint's owner.
pub(crate) fn owner_label(name: &str) -> String {
    fit(name, LABEL_VALUE_MAX)
}

fn fnv1a(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_name_is_kept_and_a_long_one_is_cut_with_a_hash_of_the_whole() {
        assert_eq!(fit("team-a", 63), "team-a");
        let long = "a".repeat(253);
        let other = format!("{}b", "a".repeat(252));
        assert_eq!(owner_label(&long).len(), 63);
        assert_ne!(owner_label(&long), owner_label(&other));
        assert_eq!(owner_label(&long), owner_label(&long), "stable");
        assert!(owner_label(&long).starts_with(&"a".repeat(54)));
        assert_eq!(fit(&"x".repeat(63), 63), "x".repeat(63));
        // FNV-1a 64's published value for "a": pinned, so the names stay across releases.
        assert_eq!(fnv1a("a"), 0xaf63_dc4c_8601_ec8c);
        assert!(fit(&format!("{}a", "x".repeat(20)), 20).starts_with("xxxxxxxxxxx-"));
        assert_eq!(fit(&format!("{}a", "x".repeat(20)), 20).len(), 20);
    }
}
