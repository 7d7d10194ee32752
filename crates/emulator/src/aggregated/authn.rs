//! Authentication of the image-API-only mode, as an aggregated API server does it: the front
//! proxy (kube-apiserver's aggregator) says who the user is in request headers, and those headers
//! count only on a connection whose client certificate was signed by the request-header CA (TLS
//! checked that) and names an allowed proxy in its common name. Anything else is anonymous, or
//! refused with 401 when it carries a credential this server cannot check.
//!
//! The rules follow k8s.io/apiserver's request-header authenticator: the first non-empty
//! user-name header wins, every value of every group header is a group, `<prefix><key>` headers
//! are the user's extra attributes (keys lower-cased and unescaped), an empty allowed-names
//! list allows any certificate of the CA, and every authenticated user is in
//! `system:authenticated`.

use std::collections::BTreeMap;

use axum::http::HeaderMap;

/// The group of every authenticated user.
pub const AUTHENTICATED: &str = "system:authenticated";

/// The identity a request acts as.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct User {
    /// The user name (`system:serviceaccount:ns:name`).
    pub name: String,
    /// Its groups.
    pub groups: Vec<String>,
    /// Extra attributes (scopes, the ServiceAccount token's pod binding, ...).
    pub extra: BTreeMap<String, Vec<String>>,
}

impl User {
    /// `system:anonymous`, in `system:unauthenticated`.
    pub fn anonymous() -> User {
        User {
            name: "system:anonymous".into(),
            groups: vec!["system:unauthenticated".into()],
            extra: BTreeMap::new(),
        }
    }
}

/// Which headers carry the identity, and who may set them.
#[derive(Clone, Debug, Default)]
pub struct RequestHeader {
    /// Common names a proxy's client certificate may have (empty: any the CA signed).
    pub allowed_names: Vec<String>,
    /// Headers holding the user name, tried in order.
    pub username_headers: Vec<String>,
    /// Headers holding the groups.
    pub group_headers: Vec<String>,
    /// Prefixes of the headers holding extra attributes.
    pub extra_headers_prefixes: Vec<String>,
}

/// Why a request is refused before authorization (answered 401 Unauthorized).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Unauthenticated {
    /// The client certificate is signed by the CA but names no allowed proxy.
    #[error("requestheader: client certificate with CN {0:?} is not in the allowed names")]
    NameNotAllowed(String),
    /// The client certificate carries no common name to check.
    #[error("requestheader: client certificate has no common name")]
    NoCommonName,
    /// A bearer token: this server does not review tokens (no TokenReview delegation).
    #[error("bearer tokens are not accepted here; call through the API server")]
    BearerToken,
}

impl RequestHeader {
    /// The user of a request: `client_cert` is the connection's verified certificate (DER),
    /// if any.
    pub fn authenticate(
        &self,
        client_cert: Option<&[u8]>,
        headers: &HeaderMap,
    ) -> Result<User, Unauthenticated> {
        let Some(der) = client_cert else {
            if headers.contains_key(axum::http::header::AUTHORIZATION) {
                return Err(Unauthenticated::BearerToken);
            }
            return Ok(User::anonymous());
        };
        let cn = common_name(der).ok_or(Unauthenticated::NoCommonName)?;
        if !self.allowed_names.is_empty() && !self.allowed_names.contains(&cn) {
            return Err(Unauthenticated::NameNotAllowed(cn));
        }
        let name = self
            .username_headers
            .iter()
            .filter_map(|h| headers.get(h.as_str()))
            .filter_map(|v| v.to_str().ok())
            .find(|v| !v.is_empty());
        let Some(name) = name else {
            // k8s.io/apiserver: a proxy request without a user is not authenticated by the
            // request-header authenticator, and falls through to anonymous.
            return Ok(User::anonymous());
        };
        let mut groups: Vec<String> = self
            .group_headers
            .iter()
            .flat_map(|h| headers.get_all(h.as_str()))
            .filter_map(|v| v.to_str().ok())
            .map(str::to_string)
            .collect();
        // k8s.io/apiserver adds this group to every authenticated user (the proxy does not
        // send it): RBAC's discovery roles are bound to it.
        if !groups.iter().any(|g| g == AUTHENTICATED) {
            groups.push(AUTHENTICATED.into());
        }
        Ok(User {
            name: name.to_string(),
            groups,
            extra: self.extra(headers),
        })
    }

    fn extra(&self, headers: &HeaderMap) -> BTreeMap<String, Vec<String>> {
        let mut extra: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (name, value) in headers {
            let lower = name.as_str();
            let Some(key) = self
                .extra_headers_prefixes
                .iter()
                .find_map(|p| lower.strip_prefix(p.to_ascii_lowercase().as_str()))
            else {
                continue;
            };
            if let Ok(v) = value.to_str() {
                extra.entry(unescape(key)).or_default().push(v.to_string());
            }
        }
        extra
    }
}

/// Extra keys travel percent-encoded (RFC 3986), since header names cannot hold every character.
fn unescape(key: &str) -> String {
    let bytes = key.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        if bytes[i] == b'%'
            && let (Some(h), Some(l)) = (
                bytes.get(i + 1).and_then(|b| hex(*b)),
                bytes.get(i + 2).and_then(|b| hex(*b)),
            )
        {
            out.push((h * 16 + l) as u8);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).to_lowercase()
}

/// One DER element: its tag, its contents and what follows it.
fn element(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = input.split_first()?;
    let (&first, rest) = rest.split_first()?;
    let (len, rest) = if first < 0x80 {
        (usize::from(first), rest)
    } else {
        let n = usize::from(first & 0x7f);
        if n == 0 || n > 4 || rest.len() < n {
            return None;
        }
        let len = rest[..n]
            .iter()
            .fold(0usize, |acc, b| (acc << 8) | usize::from(*b));
        (len, &rest[n..])
    };
    (rest.len() >= len).then(|| (tag, &rest[..len], &rest[len..]))
}

const SEQUENCE: u8 = 0x30;
const SET: u8 = 0x31;
const OID: u8 = 0x06;
const VERSION: u8 = 0xa0;
/// id-at-commonName, 2.5.4.3.
const COMMON_NAME: &[u8] = &[0x55, 0x04, 0x03];

/// The subject's common name of an X.509 certificate (DER): the last CN attribute, as Go's
/// `pkix.Name` keeps it. None when the certificate cannot be read or has no CN.
pub fn common_name(cert: &[u8]) -> Option<String> {
    let (SEQUENCE, certificate, _) = element(cert)? else {
        return None;
    };
    let (SEQUENCE, tbs, _) = element(certificate)? else {
        return None;
    };
    let mut rest = tbs;
    let (tag, _, after) = element(rest)?;
    if tag == VERSION {
        rest = after;
    }
    // serialNumber, signature, issuer, validity, then the subject.
    for _ in 0..4 {
        rest = element(rest)?.2;
    }
    let (SEQUENCE, mut rdns, _) = element(rest)? else {
        return None;
    };
    let mut cn = None;
    while !rdns.is_empty() {
        let (tag, set, next) = element(rdns)?;
        rdns = next;
        if tag != SET {
            return None;
        }
        let mut attrs = set;
        while !attrs.is_empty() {
            let (_, attr, next) = element(attrs)?;
            attrs = next;
            let (OID, oid, value) = element(attr)? else {
                return None;
            };
            if oid == COMMON_NAME {
                let (_, text, _) = element(value)?;
                cn = Some(String::from_utf8_lossy(text).into_owned());
            }
        }
    }
    cn
}

#[cfg(test)]
mod tests;
