//! The certificates of a keyless signature: the signer's short-lived certificate chained to a
//! certificate authority of the trusted root at the signing time (webpki, with the code-signing
//! extended key usage, as `sigstore` itself does), a timestamp authority's certificate chained the
//! same way (time-stamping usage), and the identity Fulcio wrote into the signer's certificate:
//! the OIDC issuer (extension 1.3.6.1.4.1.57264.1.8, or the older .1.1) and the subject (the
//! subject alternative name: an email, a URI, or Sigstore's otherName username).

use der::Decode as _;
use der::asn1::{Ia5String, Utf8StringRef};
use rustls_pki_types::{CertificateDer, UnixTime};
use webpki::{EndEntityCert, KeyUsage};
use x509_cert::Certificate;
use x509_cert::ext::pkix::SubjectAltName;
use x509_cert::ext::pkix::name::GeneralName;

use super::root::Authority;

/// id-kp-codeSigning (1.3.6.1.5.5.7.3.3), the value of its OID.
const CODE_SIGNING: &[u8] = &[0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x03, 0x03];
/// id-kp-timeStamping (1.3.6.1.5.5.7.3.8).
const TIME_STAMPING: &[u8] = &[0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x03, 0x08];
/// Fulcio's OIDC issuer extension (V2: a DER UTF8String).
const ISSUER_V2: &str = "1.3.6.1.4.1.57264.1.8";
/// Fulcio's OIDC issuer extension (V1, deprecated: the raw string).
const ISSUER_V1: &str = "1.3.6.1.4.1.57264.1.1";
/// Sigstore's otherName for a username subject.
const OTHER_NAME_USERNAME: &str = "1.3.6.1.4.1.57264.1.7";

/// Who Fulcio certified: the OIDC issuer and the subject.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Signer {
    pub issuer: String,
    pub subject: String,
}

/// The certificate authority of `cas` whose chain `leaf` verifies to at `at` (seconds since the
/// epoch) for code signing, with the authority trusted at that time; why none, otherwise.
pub(crate) fn chained_to_ca<'a>(
    leaf: &[u8],
    cas: &'a [Authority],
    at: i64,
) -> Result<&'a Authority, String> {
    let mut why = Vec::new();
    for ca in cas {
        if !ca.valid.covers(at) {
            why.push(format!("{} is not trusted at {}", ca.uri, time(at)));
            continue;
        }
        match path(leaf, &ca.chain, at, CODE_SIGNING) {
            Ok(()) => return Ok(ca),
            Err(e) => why.push(format!("not issued by {} ({e})", ca.uri)),
        }
    }
    Err(format!("the signing certificate {}", super::summary(why)))
}

/// Whether the first certificate of a timestamp authority's chain verifies to its root at `at`
/// for time stamping.
pub(crate) fn tsa_chain_holds(tsa: &Authority, at: i64) -> Result<(), String> {
    let [leaf, rest @ ..] = tsa.chain.as_slice() else {
        return Err("no certificates".into());
    };
    if rest.is_empty() {
        return Err("a chain of one certificate: give the signing certificate and its root".into());
    }
    path(leaf, rest, at, TIME_STAMPING)
}

/// `leaf` verified by webpki to the last certificate of `chain` (the anchor) through the others,
/// at `at`, for `usage`.
fn path(leaf: &[u8], chain: &[Vec<u8>], at: i64, usage: &'static [u8]) -> Result<(), String> {
    let Some((root, intermediates)) = chain.split_last() else {
        return Err("no certificates".into());
    };
    let root = CertificateDer::from(root.as_slice());
    let anchor = webpki::anchor_from_trusted_cert(&root).map_err(|e| format!("its root: {e:?}"))?;
    let intermediates: Vec<CertificateDer> = (intermediates.iter())
        .map(|c| CertificateDer::from(c.as_slice()))
        .collect();
    let leaf = CertificateDer::from(leaf);
    let leaf = EndEntityCert::try_from(&leaf).map_err(|e| format!("certificate: {e:?}"))?;
    let seconds = u64::try_from(at).map_err(|_| format!("time {at} is before 1970"))?;
    let when = UnixTime::since_unix_epoch(std::time::Duration::from_secs(seconds));
    leaf.verify_for_usage(
        webpki::ALL_VERIFICATION_ALGS,
        &[anchor],
        &intermediates,
        when,
        KeyUsage::required(usage),
        None,
        None,
    )
    .map(|_| ())
    .map_err(|e| format!("{e:?} at {}", time(at)))
}

/// The issuer and subject Fulcio certified in `leaf`.
pub(crate) fn signer(leaf: &[u8]) -> Result<Signer, String> {
    let cert = Certificate::from_der(leaf).map_err(|e| format!("certificate: {e}"))?;
    let tbs = cert.tbs_certificate();
    let extensions = tbs.extensions().map(|e| e.as_slice()).unwrap_or_default();
    let value_of = |oid: &str| {
        (extensions.iter())
            .find(|e| e.extn_id.to_string() == oid)
            .map(|e| e.extn_value.as_bytes().to_vec())
    };
    let issuer = match (value_of(ISSUER_V2), value_of(ISSUER_V1)) {
        (Some(v2), _) => Utf8StringRef::from_der(&v2)
            .map(|s| s.as_str().to_string())
            .map_err(|e| format!("issuer extension: {e}"))?,
        (None, Some(v1)) => String::from_utf8(v1).map_err(|_| "issuer extension: not UTF-8")?,
        (None, None) => return Err("the certificate names no OIDC issuer".into()),
    };
    let san = tbs
        .get_extension::<SubjectAltName>()
        .map_err(|e| format!("subject alternative name: {e}"))?
        .map(|(_, san)| san)
        .ok_or("the certificate has no subject alternative name")?;
    // Fulcio certifies one identity; a certificate naming several is not read as any of them.
    if san.0.len() != 1 {
        return Err(format!(
            "the certificate names {} subjects, not one",
            san.0.len()
        ));
    }
    let subject = (san.0.iter())
        .find_map(|name| match name {
            GeneralName::Rfc822Name(s) | GeneralName::UniformResourceIdentifier(s) => Some(ia5(s)),
            GeneralName::OtherName(other) if other.type_id.to_string() == OTHER_NAME_USERNAME => {
                other
                    .value
                    .decode_as::<Utf8StringRef>()
                    .ok()
                    .map(|s| s.as_str().to_string())
            }
            _ => None,
        })
        .ok_or("the certificate's subject alternative name is no email, URI or username")?;
    Ok(Signer { issuer, subject })
}

fn ia5(s: &Ia5String) -> String {
    s.as_str().to_string()
}

/// `at` (seconds since the epoch) in RFC 3339, for messages.
pub(crate) fn time(at: i64) -> String {
    chrono::DateTime::from_timestamp(at, 0)
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
        .unwrap_or_else(|| format!("{at} s after the epoch"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_usages_are_the_oids_they_name() {
        let oid = |s: &str| const_oid::ObjectIdentifier::new_unwrap(s);
        assert_eq!(oid("1.3.6.1.5.5.7.3.3").as_bytes(), CODE_SIGNING);
        assert_eq!(oid("1.3.6.1.5.5.7.3.8").as_bytes(), TIME_STAMPING);
    }

    /// A certificate as Fulcio writes one (the issuer in its V2 extension), for `emails`.
    fn fulcio_like(emails: &[&str]) -> Vec<u8> {
        use rcgen::{CertificateParams, CustomExtension, KeyPair, SanType};
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.subject_alt_names = (emails.iter())
            .map(|e| SanType::Rfc822Name((*e).try_into().unwrap()))
            .collect();
        let issuer = "https://issuer.example";
        let mut value = vec![0x0c, issuer.len() as u8];
        value.extend_from_slice(issuer.as_bytes());
        params.custom_extensions = vec![CustomExtension::from_oid_content(
            &[1, 3, 6, 1, 4, 1, 57264, 1, 8],
            value,
        )];
        let cert = params.self_signed(&KeyPair::generate().unwrap()).unwrap();
        cert.der().to_vec()
    }

    #[test]
    fn the_signer_is_the_one_identity_the_certificate_names() {
        let one = signer(&fulcio_like(&["alice@example.com"])).unwrap();
        assert_eq!(
            one,
            Signer {
                issuer: "https://issuer.example".into(),
                subject: "alice@example.com".into()
            }
        );
        // Two names: neither is taken (the first would be, by order alone).
        let why = signer(&fulcio_like(&["alice@example.com", "mallory@example.com"])).unwrap_err();
        assert_eq!(why, "the certificate names 2 subjects, not one");
    }

    #[test]
    fn a_certificate_that_is_not_der_names_no_signer() {
        assert!(
            signer(b"not a certificate")
                .unwrap_err()
                .contains("certificate")
        );
    }
}
