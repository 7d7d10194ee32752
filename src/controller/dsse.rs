//! DSSE (Dead Simple Signing Envelope), the part both signed formats the controller reads share:
//! cosign 3's key-based bundles ([`super::signature::bundle`]) and Tekton Chains' records
//! ([`super::proof::chains`]). Written here, with a reason: `sigstore` 0.15 keeps its DSSE
//! helpers private.

/// The DSSE payload type of an in-toto statement.
pub(crate) const IN_TOTO: &str = "application/vnd.in-toto+json";

/// DSSE's pre-authentication encoding (`DSSEv1 <len> <type> <len> <payload>`): what a
/// signature is over, so that the payload type is signed too.
pub fn pae(payload_type: &str, payload: &[u8]) -> Vec<u8> {
    let mut out = format!(
        "DSSEv1 {} {payload_type} {} ",
        payload_type.len(),
        payload.len()
    )
    .into_bytes();
    out.extend_from_slice(payload);
    out
}

#[cfg(test)]
mod tests {
    /// The test vector of DSSE's protocol specification: lengths in ASCII decimal, single
    /// spaces.
    #[test]
    fn the_encoding_binds_the_type_and_the_length() {
        assert_eq!(
            super::pae("http://example.com/HelloWorld", b"hello world"),
            b"DSSEv1 29 http://example.com/HelloWorld 11 hello world".to_vec()
        );
    }
}
