//! A tag's image digest as the tracker keeps it: `sha256:<64 lowercase hex>` (what the image
//! registry API and OpenShift write) as its 32 bytes, any other form as written.
//!
//! The source keeps the digest of every tag it follows for as long as it runs (the
//! multi-tenant adapter, thirty tags per source for a thousand sources): as a string it is 71
//! bytes on the heap besides its handle; as bytes it is held in place. Only canonical
//! `sha256:` digests are held as bytes, so a digest reads back exactly as it was given.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

const SHA256: &str = "sha256:";

/// An image digest (see the module docs). Equal to another exactly when their strings are.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Digest(Repr);

#[derive(Clone, PartialEq, Eq, Hash)]
enum Repr {
    Sha256([u8; 32]),
    Other(Box<str>),
}

impl Digest {
    /// The digest written `s`.
    pub(crate) fn new(s: &str) -> Digest {
        match sha256_bytes(s) {
            Some(bytes) => Digest(Repr::Sha256(bytes)),
            None => Digest(Repr::Other(s.into())),
        }
    }

    /// The `sha256:` digest of these 32 bytes.
    pub(crate) fn from_sha256(bytes: [u8; 32]) -> Digest {
        Digest(Repr::Sha256(bytes))
    }

    /// The 32 bytes of a canonical `sha256:` digest; None for any other form.
    pub(crate) fn sha256(&self) -> Option<&[u8; 32]> {
        match &self.0 {
            Repr::Sha256(bytes) => Some(bytes),
            Repr::Other(_) => None,
        }
    }

    /// Whether this is the digest written `s` (without building its string).
    pub fn is(&self, s: &str) -> bool {
        match &self.0 {
            Repr::Sha256(bytes) => sha256_bytes(s).as_ref() == Some(bytes),
            Repr::Other(other) => **other == *s,
        }
    }
}

/// The 32 bytes of a canonical `sha256:<64 lowercase hex>` digest.
fn sha256_bytes(digest: &str) -> Option<[u8; 32]> {
    let hex = digest.strip_prefix(SHA256)?.as_bytes();
    if hex.len() != 64 {
        return None;
    }
    let nibble = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    };
    let mut out = [0u8; 32];
    for (i, pair) in hex.chunks_exact(2).enumerate() {
        out[i] = nibble(pair[0])? << 4 | nibble(pair[1])?;
    }
    Some(out)
}

impl std::fmt::Display for Digest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.0 {
            Repr::Sha256(bytes) => {
                f.write_str(SHA256)?;
                bytes.iter().try_for_each(|b| write!(f, "{b:02x}"))
            }
            Repr::Other(s) => f.write_str(s),
        }
    }
}

impl std::fmt::Debug for Digest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", self.to_string())
    }
}

impl From<&str> for Digest {
    fn from(s: &str) -> Digest {
        Digest::new(s)
    }
}

impl From<String> for Digest {
    fn from(s: String) -> Digest {
        Digest::new(&s)
    }
}

impl Serialize for Digest {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Digest {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        Ok(Digest::new(&s))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const D: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn a_canonical_sha256_digest_is_held_as_bytes_and_reads_back_as_written() {
        let d = Digest::new(D);
        assert!(d.sha256().is_some());
        assert_eq!(d.to_string(), D);
        assert!(d.is(D));
        assert!(!d.is(&D.replace('f', "e")));
        assert_eq!(Digest::from_sha256(*d.sha256().unwrap()), d);
    }

    #[test]
    fn other_forms_are_kept_as_written() {
        for s in [
            "sha256:ABCDEF",
            &D.to_uppercase(),
            &D[..70],
            "sha512:00",
            "b",
            "",
        ] {
            let d = Digest::new(s);
            assert!(d.sha256().is_none(), "{s}");
            assert_eq!(d.to_string(), s);
            assert!(d.is(s));
            assert!(!d.is(D));
        }
    }

    #[test]
    fn equal_exactly_when_the_strings_are() {
        assert_eq!(Digest::new(D), Digest::from(D.to_string()));
        assert_ne!(Digest::new(D), Digest::new(&D.to_uppercase()));
    }

    #[test]
    fn serializes_as_its_string() {
        let json = serde_json::to_string(&Digest::new(D)).unwrap();
        assert_eq!(json, format!("\"{D}\""));
        let back: Digest = serde_json::from_str(&json).unwrap();
        assert_eq!(back, Digest::new(D));
        let other: Digest = serde_json::from_str("\"x:y\"").unwrap();
        assert_eq!(other.to_string(), "x:y");
        assert!(serde_json::from_str::<Digest>("3").is_err());
    }

    #[test]
    fn is_held_in_place() {
        assert!(std::mem::size_of::<Option<Digest>>() <= 40);
    }
}
