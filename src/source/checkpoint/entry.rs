//! One checkpoint entry: a stream's data key, the hash that places it, and its value's text.
//!
//! **Key.** `{namespace}_{name}` (a namespace never contains `_`, so the key splits at its first
//! `_`; a name may). A stream whose `namespace/name` is longer than 253 characters (the ConfigMap
//! key limit; OpenShift allows 255) is keyed `_{fnv:016x}` and carries its name in the value.
//!
//! **Value** (the compact form; JSON for a uid or tag it cannot hold, below):
//!
//! ```text
//! <uid>(;<tag>=<digest>,<generation>[,<failure generation>])*[|<namespace>/<name>]
//! ```
//!
//! `<digest>` is empty (the tag has only an import failure), `B` + the 32 bytes of a
//! `sha256:<64 hex>` digest in unpadded base64url (43 characters), or `D` + any other digest
//! verbatim. Tags are in name order. A uid or tag holding one of `;|=,` (none that the API
//! server accepts does) is written as JSON instead, so every state can be written. A tag of
//! `latest` with a sha256 digest takes 55 bytes here and 96 as JSON.
//!
//! **Hash.** [`fnv1a64`] of `{namespace}/{name}` (a hash any tool can recompute), put through
//! the 64-bit finalizer of MurmurHash3 ([`place`]) so that the top bits, which choose the shard,
//! depend on every byte of the name.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::Value;

use crate::source::state::{Digest, StreamState, TagState};

/// The ImageStream a checkpoint entry is about: `(namespace, name)`.
pub type StreamKey = (String, String);

/// The longest ConfigMap data key the API server accepts.
const MAX_KEY_LEN: usize = 253;

/// FNV-1a, 64 bits: stable across Rust versions, platforms and languages.
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

fn stream_hash(key: &StreamKey) -> u64 {
    let mut name = Vec::with_capacity(key.0.len() + 1 + key.1.len());
    name.extend_from_slice(key.0.as_bytes());
    name.push(b'/');
    name.extend_from_slice(key.1.as_bytes());
    fnv1a64(&name)
}

/// Where a stream lives in the hash space of the self-sizing layout: MurmurHash3's `fmix64`
/// of [`fnv1a64`]`("{namespace}/{name}")`.
pub(crate) fn place(key: &StreamKey) -> u64 {
    let mut h = stream_hash(key);
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^ (h >> 33)
}

/// A stream's data key: `{namespace}_{name}`, or `_{hash}` when that would be too long.
pub fn data_key(key: &StreamKey) -> String {
    if key.0.len() + 1 + key.1.len() <= MAX_KEY_LEN {
        format!("{}_{}", key.0, key.1)
    } else {
        format!("_{:016x}", stream_hash(key))
    }
}

/// The stream a data key names, if the key says (a hashed key does not: its value does).
pub(crate) fn key_of_data_key(data_key: &str) -> Option<StreamKey> {
    let (ns, name) = data_key.split_once('_')?;
    (!ns.is_empty() && !name.is_empty()).then(|| (ns.to_string(), name.to_string()))
}

const RESERVED: [char; 4] = [';', '|', '=', ','];

/// A stream's entry value under `data_key` (see the module docs).
pub(crate) fn encode(key: &StreamKey, data_key: &str, state: &StreamState) -> String {
    let plain = |s: &str| !s.contains(RESERVED);
    if !plain(&state.uid) || state.tags.iter().any(|(tag, _)| !plain(tag)) {
        return encode_json(key, data_key, state);
    }
    let mut out = String::with_capacity(state.uid.len() + 56 * state.tags.len());
    out.push_str(&state.uid);
    for (tag, t) in state.tags.iter() {
        out.push(';');
        out.push_str(tag);
        out.push('=');
        if let Some(d) = &t.digest {
            match d.sha256() {
                Some(bytes) => {
                    out.push('B');
                    URL_SAFE_NO_PAD.encode_string(bytes, &mut out);
                }
                None => {
                    out.push('D');
                    out.push_str(&d.to_string());
                }
            }
        }
        out.push(',');
        out.push_str(&t.generation.to_string());
        if let Some(f) = t.failure_generation {
            out.push(',');
            out.push_str(&f.to_string());
        }
    }
    if data_key.starts_with('_') {
        out.push('|');
        out.push_str(&key.0);
        out.push('/');
        out.push_str(&key.1);
    }
    out.shrink_to_fit();
    out
}

/// The JSON form: `{"u":"<uid>","t":{"latest":{"d":"sha256:…","g":3}}}`, with `"k"` for a
/// hashed data key.
fn encode_json(key: &StreamKey, data_key: &str, state: &StreamState) -> String {
    let mut v = serde_json::to_value(state).unwrap_or(Value::Null);
    if data_key.starts_with('_') {
        v["k"] = Value::String(format!("{}/{}", key.0, key.1));
    }
    v.to_string()
}

/// The `sha256:` digest of the 32 bytes written `b64` (URL-safe base64, no padding).
fn sha256_digest(b64: &str) -> Option<Digest> {
    let mut bytes = [0u8; 32];
    if b64.len() != 43 || URL_SAFE_NO_PAD.decode_slice(b64, &mut bytes).ok()? != 32 {
        return None;
    }
    Some(Digest::from_sha256(bytes))
}

/// An entry back into its stream and state; either form, either kind of key.
pub(crate) fn decode(data_key: &str, value: &str) -> Result<(StreamKey, StreamState), String> {
    let (named, state) = if value.starts_with('{') {
        decode_json(value)?
    } else {
        decode_compact(value)?
    };
    let key = match named {
        Some(full) => full
            .split_once('/')
            .map(|(ns, n)| (ns.to_string(), n.to_string())),
        None => key_of_data_key(data_key),
    };
    let key = key
        .filter(|(ns, n)| !ns.is_empty() && !n.is_empty())
        .ok_or_else(|| "no namespace and name in the key".to_string())?;
    Ok((key, state))
}

/// The state alone, for a stream already known (the value's name, if any, is not checked).
pub fn decode_state(value: &str) -> Option<StreamState> {
    if value.starts_with('{') {
        serde_json::from_str(value).ok()
    } else {
        decode_compact(value).ok().map(|(_, s)| s)
    }
}

fn decode_json(value: &str) -> Result<(Option<String>, StreamState), String> {
    let mut v: Value = serde_json::from_str(value).map_err(|e| e.to_string())?;
    let named = match v.as_object_mut().and_then(|o| o.remove("k")) {
        Some(Value::String(k)) => Some(k),
        Some(_) => return Err("the key field \"k\" is not a string".into()),
        None => None,
    };
    let state = serde_json::from_value(v).map_err(|e| e.to_string())?;
    Ok((named, state))
}

fn decode_compact(value: &str) -> Result<(Option<String>, StreamState), String> {
    let (body, named) = match value.split_once('|') {
        Some((body, name)) => (body, Some(name.to_string())),
        None => (value, None),
    };
    let mut parts = body.split(';');
    let uid = parts.next().unwrap_or_default();
    if uid.is_empty() {
        return Err("no uid".into());
    }
    let mut state = StreamState {
        uid: uid.to_string(),
        ..StreamState::default()
    };
    for part in parts {
        let (tag, rest) = part
            .split_once('=')
            .ok_or_else(|| format!("tag entry {part:?} has no '='"))?;
        let mut fields = rest.split(',');
        let digest = match fields.next().unwrap_or_default() {
            "" => None,
            d if d.starts_with('B') => Some(
                sha256_digest(&d[1..]).ok_or_else(|| format!("tag {tag:?}: bad digest {d:?}"))?,
            ),
            d if d.starts_with('D') && d.len() > 1 => Some(Digest::new(&d[1..])),
            d => return Err(format!("tag {tag:?}: bad digest {d:?}")),
        };
        let number = |f: Option<&str>| -> Result<Option<i64>, String> {
            f.map(|f| {
                f.parse()
                    .map_err(|_| format!("tag {tag:?}: bad number {f:?}"))
            })
            .transpose()
        };
        let generation =
            number(fields.next())?.ok_or_else(|| format!("tag {tag:?}: no generation"))?;
        let failure_generation = number(fields.next())?;
        if fields.next().is_some() || tag.is_empty() {
            return Err(format!("tag entry {part:?} is malformed"));
        }
        state.tags.insert(
            tag,
            TagState {
                digest,
                generation,
                failure_generation,
            },
        );
    }
    Ok((named, state))
}

#[cfg(test)]
mod tests {
    use super::*;

    const D1: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    fn state(uid: &str, tags: &[(&str, Option<&str>, i64, Option<i64>)]) -> StreamState {
        let mut s = StreamState {
            uid: uid.into(),
            ..StreamState::default()
        };
        for (tag, d, g, f) in tags {
            s.tags.insert(
                tag,
                TagState {
                    digest: d.map(Digest::new),
                    generation: *g,
                    failure_generation: *f,
                },
            );
        }
        s
    }

    fn key(ns: &str, name: &str) -> StreamKey {
        (ns.into(), name.into())
    }

    #[test]
    fn the_stream_hash_is_fnv_1a_as_any_tool_computes_it() {
        assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
    }

    #[test]
    fn placement_spreads_similar_names_over_the_top_bits() {
        // Names that differ only in their last character land in both halves of the space.
        let tops: std::collections::BTreeSet<u64> = (0..64)
            .map(|i| place(&key("notebooks", &format!("nb-{i}"))) >> 60)
            .collect();
        assert!(tops.len() >= 12, "{tops:?}");
        assert_eq!(place(&key("a", "b")), place(&key("a", "b")));
    }

    #[test]
    fn a_compact_entry_is_the_uid_then_each_tag() {
        let s = state(
            "u-1",
            &[
                ("latest", Some(D1), 3, None),
                ("candidate", None, 0, Some(5)),
            ],
        );
        let text = encode(&key("ns", "nb"), "ns_nb", &s);
        assert_eq!(
            text,
            "u-1;candidate=,0,5;latest=BASNFZ4mrze8BI0VniavN7wEjRWeJq83vASNFZ4mrze8,3"
        );
        assert_eq!(decode("ns_nb", &text), Ok((key("ns", "nb"), s)));
    }

    #[test]
    fn a_compact_tag_of_latest_is_about_half_its_json() {
        let s = state(
            "0f4b2f0e-5d9e-4f43-9c2f-1f7b5b0f4a11",
            &[("latest", Some(D1), 12, None)],
        );
        let compact = encode(&key("ns", "nb"), "ns_nb", &s).len();
        let json = serde_json::to_string(&s).unwrap().len();
        assert!(compact * 10 <= json * 7, "compact {compact}, json {json}");
    }

    #[test]
    fn other_digests_and_odd_names_round_trip() {
        let other = "sha512:".to_string() + &"ab".repeat(64);
        let upper = "sha256:".to_string() + &"AB".repeat(32);
        let s = state(
            "u",
            &[
                ("a.b-c_d", Some(&other), 1, None),
                ("x", Some(&upper), -1, Some(i64::MAX)),
            ],
        );
        let text = encode(&key("ns", "n_a_me"), "ns_n_a_me", &s);
        assert!(text.contains("=Dsha512:"), "{text}");
        assert_eq!(decode("ns_n_a_me", &text), Ok((key("ns", "n_a_me"), s)));
    }

    #[test]
    fn a_reserved_character_falls_back_to_json() {
        let s = state("u;1", &[("t", Some(D1), 1, None)]);
        let text = encode(&key("ns", "nb"), "ns_nb", &s);
        assert!(text.starts_with('{'), "{text}");
        assert_eq!(decode("ns_nb", &text), Ok((key("ns", "nb"), s)));
    }

    #[test]
    fn a_name_too_long_for_a_key_is_hashed_and_carried_in_the_value() {
        let long = key("ns", &"n".repeat(260));
        let dk = data_key(&long);
        assert!(dk.starts_with('_') && dk.len() == 17, "{dk}");
        let s = state("u", &[("latest", Some(D1), 1, None)]);
        let text = encode(&long, &dk, &s);
        assert!(text.ends_with(&format!("|ns/{}", long.1)));
        assert_eq!(decode(&dk, &text), Ok((long.clone(), s.clone())));
        // The JSON form carries it as "k".
        let json = encode_json(&long, &dk, &s);
        assert_eq!(decode(&dk, &json), Ok((long, s)));
    }

    #[test]
    fn entries_written_by_earlier_versions_are_read() {
        let json =
            format!(r#"{{"u":"u-1","t":{{"latest":{{"d":"{D1}","g":3}},"old":{{"g":1,"f":2}}}}}}"#);
        let want = state(
            "u-1",
            &[("latest", Some(D1), 3, None), ("old", None, 1, Some(2))],
        );
        assert_eq!(decode("ns_nb", &json), Ok((key("ns", "nb"), want.clone())));
        assert_eq!(decode_state(&json), Some(want));
    }

    #[test]
    fn malformed_entries_are_refused_with_a_reason() {
        for bad in [
            "",
            ";latest=,1",
            "u;latest",
            "u;latest=Bxyz,1",
            "u;latest=Q1,1",
            "u;latest=,",
            "u;latest=,1,2,3",
            "u;=,1",
            "{not json",
            r#"{"u":"x","k":5}"#,
        ] {
            assert!(decode("ns_nb", bad).is_err(), "{bad:?} was read");
        }
        assert!(decode("nokey", "u;latest=,1").is_err());
    }
}
