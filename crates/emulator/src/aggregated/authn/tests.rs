//! The request-header rules: who a request is, from which certificate and headers.

use super::*;
use base64::Engine;

/// A self-signed certificate (made with openssl for these tests) whose subject is
/// `O=system:masters, CN=front-proxy-client`.
const PROXY_CERT: &str = "MIIBwjCCAWegAwIBAgIUbYAv1QpbV5fLvrup7JJ4wo/HsdowCgYIKoZIzj0EAwIwNjEXMBUGA1UECgwOc3lzdGVtOm1hc3RlcnMxGzAZBgNVBAMMEmZyb250LXByb3h5LWNsaWVudDAeFw0yNjEyMDIwNDU5MjJaFw0yNjEyMDMwNDU5MjJaMDYxFzAVBgNVBAoMDnN5c3RlbTptYXN0ZXJzMRswGQYDVQQDDBJmcm9udC1wcm94eS1jbGllbnQwWTATBgcqhkjOPQIBBggqhkjOPQMBBwNCAAQjHgBH7llqlulwLi72uTKjf4bJ1+/S0kH6XAX9LQL0VKuOsYteRrRXtKuBtnmbF7Il1UuCUeowwxF+NjdLaYtWo1MwUTAdBgNVHQ4EFgQUFOwiQ/37jR1aYhtMrZMjpba1yLIwHwYDVR0jBBgwFoAUFOwiQ/37jR1aYhtMrZMjpba1yLIwDwYDVR0TAQH/BAUwAwEB/zAKBggqhkjOPQQDAgNJADBGAiEAlH1dsts32AwSo7XxO2w0rLcm45ovuFj+3AI34dZMUtoCIQDvEPOs7OnH7pj8SloJi/0SA6eGElVrvPb91Q2mUgpwIA==";

/// A self-signed certificate whose subject is `O=imagegate`, without a common name.
const NO_CN_CERT: &str = "MIIBfTCCASOgAwIBAgIUMDkaUCSz5WOXgjhPiNOagzAwCWAwCgYIKoZIzj0EAwIwFDESMBAGA1UECgwJaW1hZ2VnYXRlMB4XDTI2MTIwMjA0NTkyMloXDTI2MTIwMzA0NTkyMlowFDESMBAGA1UECgwJaW1hZ2VnYXRlMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEeForm/1T9naMqFmNda3OEvdMyyy9yJOyONZli8JC4Ziw8WDKu1jkz/Yrn2Lf/jgt1uEGsA9uICaTmZeRRFU7S6NTMFEwHQYDVR0OBBYEFKAe24cH2ykkl7tMGy0InUXwjwlRMB8GA1UdIwQYMBaAFKAe24cH2ykkl7tMGy0InUXwjwlRMA8GA1UdEwEB/wQFMAMBAf8wCgYIKoZIzj0EAwIDSAAwRQIgLL9/4U/V9wJjhk3CrW+sUhY+UcmVdfcOAwdWG8ltzaMCIQDeSO2Ojv46LXNTHouIoSjpF065PCXiiDudzDhBFXqSRQ==";

fn der(b64: &str) -> Vec<u8> {
    base64::engine::general_purpose::STANDARD
        .decode(b64)
        .unwrap()
}

fn request_header(allowed: &[&str]) -> RequestHeader {
    RequestHeader {
        allowed_names: allowed.iter().map(|s| s.to_string()).collect(),
        username_headers: vec!["X-Remote-User".into()],
        group_headers: vec!["X-Remote-Group".into()],
        extra_headers_prefixes: vec!["X-Remote-Extra-".into()],
    }
}

fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
    let mut h = HeaderMap::new();
    for (k, v) in pairs {
        h.append(
            axum::http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
            v.parse().unwrap(),
        );
    }
    h
}

#[test]
fn the_common_name_is_read_from_the_subject_not_the_organization() {
    assert_eq!(
        common_name(&der(PROXY_CERT)).as_deref(),
        Some("front-proxy-client")
    );
    assert_eq!(common_name(&der(NO_CN_CERT)), None);
    assert_eq!(common_name(b"\x30\x03\x02\x01"), None, "truncated DER");
    assert_eq!(common_name(&[]), None);
}

#[test]
fn the_proxys_headers_name_the_user_its_groups_and_extras() {
    let h = headers(&[
        (
            "X-Remote-User",
            "system:serviceaccount:imagegate-system:imagegate-source",
        ),
        ("X-Remote-Group", "system:serviceaccounts"),
        ("X-Remote-Group", "system:authenticated"),
        (
            "X-Remote-Extra-Authentication.kubernetes.io%2fpod-name",
            "p",
        ),
    ]);
    let user = request_header(&["front-proxy-client"])
        .authenticate(Some(&der(PROXY_CERT)), &h)
        .unwrap();
    assert_eq!(
        user.name,
        "system:serviceaccount:imagegate-system:imagegate-source"
    );
    assert_eq!(
        user.groups,
        vec!["system:serviceaccounts", "system:authenticated"]
    );
    // The proxy need not send system:authenticated: every authenticated user is in it.
    let h2 = headers(&[("X-Remote-User", "system:aggregator")]);
    let aggregator = request_header(&[])
        .authenticate(Some(&der(PROXY_CERT)), &h2)
        .unwrap();
    assert_eq!(aggregator.groups, vec!["system:authenticated"]);
    assert_eq!(
        user.extra.get("authentication.kubernetes.io/pod-name"),
        Some(&vec!["p".to_string()])
    );
    // An empty allowed-names list takes any certificate of the CA.
    assert_eq!(
        request_header(&[])
            .authenticate(Some(&der(PROXY_CERT)), &h)
            .unwrap(),
        user
    );
}

#[test]
fn headers_count_only_from_an_allowed_proxy_certificate() {
    let h = headers(&[
        ("X-Remote-User", "admin"),
        ("X-Remote-Group", "system:masters"),
    ]);
    // No certificate: the headers are ignored, and the request is anonymous.
    assert_eq!(
        request_header(&["front-proxy-client"])
            .authenticate(None, &h)
            .unwrap(),
        User::anonymous()
    );
    assert_eq!(
        request_header(&["someone-else"]).authenticate(Some(&der(PROXY_CERT)), &h),
        Err(Unauthenticated::NameNotAllowed("front-proxy-client".into()))
    );
    assert_eq!(
        request_header(&["front-proxy-client"]).authenticate(Some(&der(NO_CN_CERT)), &h),
        Err(Unauthenticated::NoCommonName)
    );
    // A bearer token is a credential this server cannot review: 401, not anonymous.
    assert_eq!(
        request_header(&[]).authenticate(None, &headers(&[("Authorization", "Bearer x")])),
        Err(Unauthenticated::BearerToken)
    );
    // The proxy's certificate without a user header is anonymous, as in k8s.io/apiserver.
    assert_eq!(
        request_header(&[])
            .authenticate(Some(&der(PROXY_CERT)), &headers(&[]))
            .unwrap(),
        User::anonymous()
    );
}
