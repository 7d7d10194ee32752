//! The signing time of a keyless signature: an RFC 3161 timestamp over the signature, signed by a
//! timestamp authority of the trusted root. A Rekor v2 entry carries no time, so this is the only
//! time a keyless signature has: the certificate must have been valid then.
//!
//! Written here, with a reason: `sigstore` 0.15 does not read timestamps. The token's CMS
//! SignedData is decoded by RustCrypto's `cms` (the same `der`/`x509-cert` stack as `sigstore`);
//! the TimeStampResp and TSTInfo around and inside it (RFC 3161 sections 2.4.1 and 2.4.2; no
//! crate reads them on that stack) are read with `der` below. What is checked, as sigstore-go does:
//! the response is granted; the token's content is a TSTInfo whose message imprint is the hash of
//! the signature; the signed attributes name that content type and carry the hash of the TSTInfo;
//! a timestamp authority's signing certificate from the trusted root (never one from the token)
//! made the signature over them, and chains to that authority's root for time stamping at the
//! time the token states, inside the authority's validity.

use cms::content_info::ContentInfo;
use cms::signed_data::{SignedData, SignerIdentifier};
use const_oid::ObjectIdentifier;
use der::asn1::{GeneralizedTime, Int, OctetString};
use der::{Decode as _, Encode as _, Reader as _, SliceReader};
use rustls_pki_types::CertificateDer;
use webpki::EndEntityCert;
use x509_cert::ext::pkix::SubjectKeyIdentifier;
use x509_cert::spki::AlgorithmIdentifierOwned;

use super::cert::{time, tsa_chain_holds};
use super::root::TrustRoot;

const SIGNED_DATA: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.113549.1.7.2");
const TST_INFO: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.113549.1.9.16.1.4");
const CONTENT_TYPE: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.113549.1.9.3");
const MESSAGE_DIGEST: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.113549.1.9.4");
const SHA256: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.16.840.1.101.3.4.2.1");
const SHA384: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.16.840.1.101.3.4.2.2");
const SHA512: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.16.840.1.101.3.4.2.3");

/// The time (seconds since the epoch) a timestamp authority of `root` signed for `signature`,
/// from the DER `TimeStampResp` (or bare token) `response`; why not, otherwise.
pub(crate) fn signed_time(
    response: &[u8],
    signature: &[u8],
    root: &TrustRoot,
) -> Result<i64, String> {
    let token = token_of(response)?;
    if token.content_type != SIGNED_DATA {
        return Err(format!(
            "the token's content is {}, not SignedData",
            token.content_type
        ));
    }
    let signed: SignedData =
        (token.content.decode_as()).map_err(|e| format!("the token's SignedData: {e}"))?;
    let encap = &signed.encap_content_info;
    if encap.econtent_type != TST_INFO {
        return Err(format!(
            "the token signs {}, not a TSTInfo",
            encap.econtent_type
        ));
    }
    let econtent = (encap.econtent.as_ref()).ok_or("the token carries no TSTInfo")?;
    let tst_der =
        (econtent.decode_as::<OctetString>()).map_err(|e| format!("the token's TSTInfo: {e}"))?;
    let tst_der = tst_der.as_bytes();
    let info = TstInfo::parse(tst_der)?;
    if info.imprint != digest(&info.imprint_alg, signature)? {
        return Err("the timestamp is over another signature".into());
    }
    let at = info.gen_time.to_unix_duration().as_secs();
    let at = i64::try_from(at).map_err(|_| "the timestamp's time is out of range")?;
    let [signer] = signed.signer_infos.0.as_slice() else {
        return Err(format!(
            "the token has {} signers, not one",
            signed.signer_infos.0.len()
        ));
    };
    let attrs = (signer.signed_attrs.as_ref()).ok_or("the token's signer signs no attributes")?;
    let attr = |oid: ObjectIdentifier| {
        (attrs.iter())
            .find(|a| a.oid == oid)
            .and_then(|a| a.values.iter().next())
    };
    let content_type = attr(CONTENT_TYPE).and_then(|v| v.decode_as::<ObjectIdentifier>().ok());
    if content_type != Some(TST_INFO) {
        return Err("the signed attributes do not name the TSTInfo as the content".into());
    }
    let message_digest = attr(MESSAGE_DIGEST).and_then(|v| v.decode_as::<OctetString>().ok());
    let tst_hash = digest(&signer.digest_alg, tst_der)?;
    if message_digest.as_ref().map(OctetString::as_bytes) != Some(tst_hash.as_slice()) {
        return Err("the signed attributes carry another TSTInfo's digest".into());
    }
    // What the signature is over: the attributes' DER as a SET OF (RFC 5652 section 5.4).
    let signed_bytes = attrs
        .to_der()
        .map_err(|e| format!("signed attributes: {e}"))?;
    let signature_bytes = signer.signature.as_bytes();
    let mut why = Vec::new();
    for tsa in &root.tsas {
        if !tsa.valid.covers(at) {
            why.push(format!("{} is not trusted at {}", tsa.uri, time(at)));
            continue;
        }
        let leaf = CertificateDer::from(tsa.chain[0].as_slice());
        let Ok(leaf) = EndEntityCert::try_from(&leaf) else {
            why.push(format!("{}: its certificate cannot be read", tsa.uri));
            continue;
        };
        let verified =
            (algorithms(&signer.signature_algorithm, &signer.digest_alg).iter()).any(|alg| {
                leaf.verify_signature(*alg, &signed_bytes, signature_bytes)
                    .is_ok()
            });
        // The token names its signer too: it must be this certificate, as sigstore-go requires.
        if !verified || !names(&signer.sid, &tsa.chain[0]) {
            why.push(format!("not signed by {}", tsa.uri));
            continue;
        }
        match tsa_chain_holds(tsa, at) {
            Ok(()) => return Ok(at),
            Err(e) => why.push(format!("{}: its chain ({e})", tsa.uri)),
        }
    }
    Err(format!("the timestamp is {}", super::summary(why)))
}

/// Whether the signer identifier of a token names the certificate `der` (by issuer and serial
/// number, or by subject key identifier).
fn names(sid: &SignerIdentifier, der: &[u8]) -> bool {
    let Ok(cert) = x509_cert::Certificate::from_der(der) else {
        return false;
    };
    let tbs = cert.tbs_certificate();
    match sid {
        SignerIdentifier::IssuerAndSerialNumber(isn) => {
            &isn.issuer == tbs.issuer() && &isn.serial_number == tbs.serial_number()
        }
        SignerIdentifier::SubjectKeyIdentifier(ski) => {
            let own = tbs.get_extension::<SubjectKeyIdentifier>().ok().flatten();
            own.is_some_and(|(_, own)| own == *ski)
        }
    }
}

/// The token of a `TimeStampResp` (status granted), or `response` itself if it is a bare token.
fn token_of(response: &[u8]) -> Result<ContentInfo, String> {
    if let Ok(token) = ContentInfo::from_der(response) {
        return Ok(token);
    }
    let mut reader = SliceReader::new(response).map_err(|e| format!("timestamp: {e}"))?;
    let (status, token) = reader
        .sequence(|r| {
            let status: u8 = r.sequence(|r| {
                let status = r.decode()?;
                r.read_slice(r.remaining_len())?;
                Ok::<_, der::Error>(status)
            })?;
            let token = (!r.is_finished())
                .then(|| r.decode::<ContentInfo>())
                .transpose()?;
            Ok::<_, der::Error>((status, token))
        })
        .map_err(|e| format!("not an RFC 3161 timestamp response ({e})"))?;
    // 0 granted, 1 granted with modifications (RFC 3161 section 2.4.2).
    if status > 1 {
        return Err(format!("the timestamp authority refused (status {status})"));
    }
    token.ok_or_else(|| "the timestamp response holds no token".into())
}

/// What the verifier reads of a TSTInfo.
struct TstInfo {
    imprint_alg: AlgorithmIdentifierOwned,
    imprint: Vec<u8>,
    gen_time: GeneralizedTime,
}

impl TstInfo {
    /// version, policy, messageImprint, serialNumber, genTime, then what this verifier does not
    /// read (accuracy, ordering, nonce, tsa, extensions).
    fn parse(der: &[u8]) -> Result<TstInfo, String> {
        let mut reader = SliceReader::new(der).map_err(|e| format!("TSTInfo: {e}"))?;
        reader
            .sequence(|r| {
                let version: u8 = r.decode()?;
                if version != 1 {
                    return Err(der::Error::from(der::ErrorKind::Value {
                        tag: der::Tag::Integer,
                    }));
                }
                let _policy: ObjectIdentifier = r.decode()?;
                let (imprint_alg, imprint) = r.sequence(|r| {
                    let alg: AlgorithmIdentifierOwned = r.decode()?;
                    let hashed: OctetString = r.decode()?;
                    Ok::<_, der::Error>((alg, hashed.as_bytes().to_vec()))
                })?;
                let _serial: Int = r.decode()?;
                let gen_time: GeneralizedTime = r.decode()?;
                r.read_slice(r.remaining_len())?;
                Ok(TstInfo {
                    imprint_alg,
                    imprint,
                    gen_time,
                })
            })
            .map_err(|e| format!("not a TSTInfo ({e})"))
    }
}

/// `data` hashed with the algorithm `alg` names (SHA-256, -384 or -512).
fn digest(alg: &AlgorithmIdentifierOwned, data: &[u8]) -> Result<Vec<u8>, String> {
    let algorithm = match alg.oid {
        oid if oid == SHA256 => &ring::digest::SHA256,
        oid if oid == SHA384 => &ring::digest::SHA384,
        oid if oid == SHA512 => &ring::digest::SHA512,
        other => return Err(format!("digest algorithm {other} is not SHA-2")),
    };
    Ok(ring::digest::digest(algorithm, data).as_ref().to_vec())
}

/// The webpki algorithms a signer's signature may be checked with: ECDSA over the signer's
/// digest on any curve (the key picks the one), RSA PKCS#1 and Ed25519 as the key says.
fn algorithms(
    signature: &AlgorithmIdentifierOwned,
    digest_alg: &AlgorithmIdentifierOwned,
) -> Vec<&'static dyn rustls_pki_types::SignatureVerificationAlgorithm> {
    use webpki::aws_lc_rs as a;
    let sha = match signature.oid.to_string().as_str() {
        "1.2.840.10045.4.3.2" | "1.2.840.113549.1.1.11" => 256,
        "1.2.840.10045.4.3.3" | "1.2.840.113549.1.1.12" => 384,
        "1.2.840.10045.4.3.4" | "1.2.840.113549.1.1.13" => 512,
        "1.3.101.112" => return vec![a::ED25519],
        // rsaEncryption: the digest algorithm says which hash.
        "1.2.840.113549.1.1.1" => match digest_alg.oid {
            oid if oid == SHA256 => 256,
            oid if oid == SHA384 => 384,
            oid if oid == SHA512 => 512,
            _ => return Vec::new(),
        },
        _ => return Vec::new(),
    };
    match sha {
        256 => vec![
            a::ECDSA_P256_SHA256,
            a::ECDSA_P384_SHA256,
            a::ECDSA_P521_SHA256,
            a::RSA_PKCS1_2048_8192_SHA256,
        ],
        384 => vec![
            a::ECDSA_P256_SHA384,
            a::ECDSA_P384_SHA384,
            a::ECDSA_P521_SHA384,
            a::RSA_PKCS1_2048_8192_SHA384,
        ],
        _ => vec![
            a::ECDSA_P256_SHA512,
            a::ECDSA_P384_SHA512,
            a::ECDSA_P521_SHA512,
            a::RSA_PKCS1_2048_8192_SHA512,
        ],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_not_a_timestamp_is_refused_with_a_reason() {
        let root = TrustRoot {
            cas: Vec::new(),
            tsas: Vec::new(),
            logs: Vec::new(),
        };
        let why = signed_time(b"not DER", b"sig", &root).unwrap_err();
        assert!(why.contains("timestamp"), "{why}");
        // A refusal (status 2, rejection) with no token.
        let rejection = [0x30, 0x05, 0x30, 0x03, 0x02, 0x01, 0x02];
        let why = signed_time(&rejection, b"sig", &root).unwrap_err();
        assert!(why.contains("refused (status 2)"), "{why}");
    }

    /// The real timestamp of a recorded bundle, its token's signer identifier set by `edit`
    /// (outside the signed attributes: the signature still verifies), as a bare token.
    fn token_with_signer(edit: impl FnOnce(&mut SignerIdentifier)) -> (Vec<u8>, Vec<u8>) {
        use base64::Engine as _;
        use der::asn1::SetOfVec;
        let bundle: serde_json::Value = serde_json::from_str(include_str!(
            "../../../../tests/data/cosign/keyless/bundle-alice.json"
        ))
        .unwrap();
        let b64 = base64::engine::general_purpose::STANDARD;
        let material = &bundle["verificationMaterial"];
        let stamp =
            material["timestampVerificationData"]["rfc3161Timestamps"][0]["signedTimestamp"]
                .as_str()
                .unwrap();
        let signature = bundle["dsseEnvelope"]["signatures"][0]["sig"]
            .as_str()
            .unwrap();
        let token = token_of(&b64.decode(stamp).unwrap()).unwrap();
        let mut signed: SignedData = token.content.decode_as().unwrap();
        let mut infos = signed.signer_infos.0.into_vec();
        edit(&mut infos[0].sid);
        signed.signer_infos = cms::signed_data::SignerInfos(SetOfVec::try_from(infos).unwrap());
        let token = ContentInfo {
            content_type: token.content_type,
            content: der::Any::encode_from(&signed).unwrap(),
        };
        (token.to_der().unwrap(), b64.decode(signature).unwrap())
    }

    #[test]
    fn a_token_must_name_the_trusted_authority_s_certificate_as_its_signer() {
        let root = TrustRoot::parse(include_str!(
            "../../../../tests/data/cosign/keyless/trusted_root.json"
        ))
        .unwrap();
        // Re-encoded unchanged, the token verifies: only its signer identifier is at stake.
        let (token, signature) = token_with_signer(|_| {});
        assert!(signed_time(&token, &signature, &root).is_ok());
        let (token, signature) = token_with_signer(|sid| {
            if let SignerIdentifier::IssuerAndSerialNumber(isn) = sid {
                isn.serial_number =
                    x509_cert::serial_number::SerialNumber::new(&[1, 2, 3]).unwrap();
            }
        });
        let why = signed_time(&token, &signature, &root).unwrap_err();
        assert!(why.starts_with("the timestamp is not signed by"), "{why}");
    }
}
