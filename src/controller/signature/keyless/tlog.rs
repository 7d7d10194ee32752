//! The transparency-log entry of a keyless signature, checked offline from the bundle: a Rekor v2
//! `hashedrekord` 0.0.2 entry (what cosign 3 writes to a Rekor v2 log: the hash of the DSSE
//! pre-authentication encoding, the signature, the signing certificate) whose body is bound to
//! this bundle, included (RFC 6962 inclusion proof) in a tree whose checkpoint a log of the
//! trusted root signed under its own origin.
//!
//! The Merkle proof and the checkpoint's signature are `sigstore`'s (`InclusionProof::verify`,
//! `SignedCheckpoint`); what `sigstore` 0.15 does not check is checked here: the log is one the
//! root trusts (by its log ID) at the signing time, the checkpoint names that log's origin and is
//! signed under that name and key hint, and the body names exactly this signature, this
//! certificate and this content (`sigstore` knows only Rekor v1 kinds).
//!
//! Not checked without network access: that this checkpoint is consistent with what the log shows
//! everyone else (no newer checkpoint, no consistency proof, no witnesses).

use base64::Engine as _;
use serde_json::Value;
use sigstore::rekor::models::InclusionProof;
use sigstore::rekor::models::checkpoint::SignedCheckpoint;
use sigstore_protobuf_specs::dev::sigstore::rekor::v1::TransparencyLogEntry;

use super::root::{Log, TrustRoot};

/// The most hashes an inclusion proof may hold: a tree of 2^64 leaves needs 64.
const MAX_PROOF_HASHES: usize = 64;

/// What a log entry must name to belong to this signature.
pub(crate) struct Expected<'a> {
    /// SHA-256 of the DSSE pre-authentication encoding.
    pub digest: &'a [u8],
    /// The DSSE signature.
    pub signature: &'a [u8],
    /// The signing certificate, DER.
    pub certificate: &'a [u8],
}

/// Whether one of `entries` is a Rekor v2 entry of `expected`, included in a log of `root` that
/// is trusted at `at`; the log's origin if so, every entry's reason otherwise.
pub(crate) fn included(
    entries: &[TransparencyLogEntry],
    expected: &Expected,
    root: &TrustRoot,
    at: i64,
) -> Result<String, String> {
    if entries.is_empty() {
        return Err("the bundle has no transparency-log entry".into());
    }
    let mut why = Vec::new();
    for (i, entry) in entries.iter().enumerate() {
        match one(entry, expected, root, at) {
            Ok(origin) => return Ok(origin),
            Err(e) => why.push(format!("log entry {i}: {e}")),
        }
    }
    Err(super::summary(why))
}

fn one(
    entry: &TransparencyLogEntry,
    expected: &Expected,
    root: &TrustRoot,
    at: i64,
) -> Result<String, String> {
    let kind = entry.kind_version.as_ref();
    let (kind, version) = kind
        .map(|k| (k.kind.as_str(), k.version.as_str()))
        .unwrap_or_default();
    if (kind, version) != ("hashedrekord", "0.0.2") {
        return Err(format!(
            "kind {kind:?} version {version:?}: only Rekor v2's hashedrekord 0.0.2 is read"
        ));
    }
    let key_id = entry
        .log_id
        .as_ref()
        .map(|l| l.key_id.as_slice())
        .unwrap_or_default();
    // A root may name one key twice (a log's shards, each with its own validity).
    let logs: Vec<&Log> = (root.logs.iter()).filter(|l| l.key_id == key_id).collect();
    let Some(first) = logs.first() else {
        return Err("from a log the trusted root does not name".into());
    };
    let Some(log) = logs.iter().find(|l| l.valid.covers(at)) else {
        return Err(format!(
            "log {} is not trusted at the signing time",
            first.origin
        ));
    };
    body_names(&entry.canonicalized_body, expected)?;
    let proof = entry.inclusion_proof.as_ref().ok_or("no inclusion proof")?;
    if proof.log_index != entry.log_index {
        return Err(format!(
            "the proof is for index {}, the entry is at {}",
            proof.log_index, entry.log_index
        ));
    }
    let envelope = (proof.checkpoint.as_ref())
        .map(|c| c.envelope.clone())
        .unwrap_or_default();
    let checkpoint = signed_by(&envelope, log)?;
    // The proof is to exactly the tree the checkpoint signs (its size and root), and that tree
    // holds something. `sigstore` links the two by a consistency proof from the checkpoint's size
    // to the proof's, which from an empty tree holds for any size: every Rekor v2 log signs an
    // empty checkpoint when it starts, and with it any entry would "prove" included.
    let (size, root) = (checkpoint.note.size, checkpoint.note.hash);
    if size == 0 {
        return Err("the checkpoint is of an empty tree".into());
    }
    let hash32 = |h: &[u8]| <[u8; 32]>::try_from(h).map_err(|_| "a proof hash is not 32 bytes");
    if u64::try_from(proof.tree_size).ok() != Some(size) || hash32(&proof.root_hash)? != root {
        return Err(format!(
            "the proof is to another tree than the checkpoint's (size {size})"
        ));
    }
    if proof.hashes.len() > MAX_PROOF_HASHES {
        return Err(format!("a proof of {} hashes", proof.hashes.len()));
    }
    let hashes = (proof.hashes.iter())
        .map(|h| hash32(h))
        .collect::<Result<Vec<_>, _>>()?;
    let inclusion = InclusionProof::new(proof.log_index, root, size, hashes, Some(checkpoint));
    (inclusion.verify(&entry.canonicalized_body, &log.key))
        .map_err(|e| format!("not included in log {} ({e})", log.origin))?;
    Ok(log.origin.clone())
}

/// The checkpoint in `envelope`, keeping only the signatures made under `log`'s origin and key
/// hint, if it names `log`'s origin; `sigstore` then checks the signature with `log`'s key.
fn signed_by(envelope: &str, log: &Log) -> Result<SignedCheckpoint, String> {
    let mut checkpoint: SignedCheckpoint =
        serde_json::from_value(Value::String(envelope.into()))
            .map_err(|e| format!("the checkpoint cannot be read ({e})"))?;
    if checkpoint.note.origin != log.origin {
        return Err(format!(
            "the checkpoint is of {:?}, not of log {}",
            checkpoint.note.origin, log.origin
        ));
    }
    // A signed note's key hint is the first four bytes of the log's key ID (Rekor v2 with an
    // ECDSA key: the key ID is the SHA-256 of its public key, as in the trusted root). The first
    // line under the log's name and hint is the log's signature: only it is checked, however many
    // the note carries.
    let hint = log.key_id.get(..4).unwrap_or_default();
    (checkpoint.signatures).retain(|s| s.name == log.origin && s.key_fingerprint == hint);
    checkpoint.signatures.truncate(1);
    if checkpoint.signatures.is_empty() {
        return Err(format!(
            "the checkpoint carries no signature of log {}",
            log.origin
        ));
    }
    Ok(checkpoint)
}

/// The entry's body is a `hashedrekord` 0.0.2 of exactly this signature, certificate and
/// content hash: the bytes the inclusion proof is then checked for.
fn body_names(body: &[u8], expected: &Expected) -> Result<(), String> {
    let body: Value =
        serde_json::from_slice(body).map_err(|e| format!("the entry's body is not JSON ({e})"))?;
    let spec = &body["spec"]["hashedRekordV002"];
    let bytes = |v: &Value| {
        let b64 = base64::engine::general_purpose::STANDARD;
        b64.decode(v.as_str().unwrap_or_default())
            .unwrap_or_default()
    };
    let checks = [
        (
            body["kind"] == "hashedrekord" && body["apiVersion"] == "0.0.2",
            "kind",
        ),
        (spec["data"]["algorithm"] == "SHA2_256", "hash algorithm"),
        (
            bytes(&spec["data"]["digest"]) == expected.digest,
            "signed content",
        ),
        (
            bytes(&spec["signature"]["content"]) == expected.signature,
            "signature",
        ),
        (
            bytes(&spec["signature"]["verifier"]["x509Certificate"]["rawBytes"])
                == expected.certificate,
            "certificate",
        ),
    ];
    match checks.iter().find(|(ok, _)| !ok) {
        Some((_, what)) => Err(format!("the entry's body names another {what}")),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_body_must_name_this_signature_certificate_and_content() {
        let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
        let body = |digest: &[u8], sig: &[u8], cert: &[u8]| {
            serde_json::to_vec(&serde_json::json!({
                "apiVersion": "0.0.2", "kind": "hashedrekord",
                "spec": {"hashedRekordV002": {
                    "data": {"algorithm": "SHA2_256", "digest": b64(digest)},
                    "signature": {"content": b64(sig), "verifier": {
                        "keyDetails": "PKIX_ECDSA_P256_SHA_256",
                        "x509Certificate": {"rawBytes": b64(cert)}}}}}
            }))
            .unwrap()
        };
        let expected = Expected {
            digest: b"d",
            signature: b"s",
            certificate: b"c",
        };
        assert_eq!(body_names(&body(b"d", b"s", b"c"), &expected), Ok(()));
        let other = [
            (body(b"x", b"s", b"c"), "signed content"),
            (body(b"d", b"x", b"c"), "signature"),
            (body(b"d", b"s", b"x"), "certificate"),
        ];
        for (body, what) in other {
            let why = body_names(&body, &expected).unwrap_err();
            assert!(why.ends_with(what), "{why}");
        }
        assert!(
            body_names(b"{", &expected)
                .unwrap_err()
                .contains("not JSON")
        );
    }
}
