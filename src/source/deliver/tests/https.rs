//! An https sink, trusted through `K_CA_CERTS` and only through it.

use super::*;

const CA_PEM: &str = "-----BEGIN CERTIFICATE-----
MIIBajCCARGgAwIBAgIBATAKBggqhkjOPQQDAjAcMRowGAYDVQQDDBFpbWFnZWdh
dGUgdGVzdCBDQTAgFw0wMDAxMDEwMDAwMDBaGA8yMDk5MTIzMTIzNTk1OVowHDEa
MBgGA1UEAwwRaW1hZ2VnYXRlIHRlc3QgQ0EwWTATBgcqhkjOPQIBBggqhkjOPQMB
BwNCAAQOQxqW3YYDcD0ugZOzc8LfyO4GsIGYOu7qC5IGDwqtin3jVWzepCo2VR/T
XRSQwdFzee62Th9Eo1bUso1hS6tCo0IwQDAPBgNVHRMBAf8EBTADAQH/MA4GA1Ud
DwEB/wQEAwIBBjAdBgNVHQ4EFgQUyGR0oMoTE5vt1Dvu3yWiYSWleW4wCgYIKoZI
zj0EAwIDRwAwRAIgXMXQwD+Y00Rikfw1GDPN/daMGEO+snfFLiwQg7eyY0YCIHsF
78RMGuGTwoOVWsMAOCYMTfZHshGZoTQmkZQ4FHEu
-----END CERTIFICATE-----
";
const SERVER_PEM: &str = "-----BEGIN CERTIFICATE-----
MIIBtDCCAVqgAwIBAgIBAjAKBggqhkjOPQQDAjAcMRowGAYDVQQDDBFpbWFnZWdh
dGUgdGVzdCBDQTAgFw0wMDAxMDEwMDAwMDBaGA8yMDk5MTIzMTIzNTk1OVowFDES
MBAGA1UEAwwJMTI3LjAuMC4xMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEJGSy
sMp5NC8J0g7/O7RWvfBYO+o45L7h1HkHCdQLt05Ex9g16cB4B/5p/sZOrEBA7pmw
o4ZTvpb1o28Gc3VY/KOBkjCBjzAMBgNVHRMBAf8EAjAAMA4GA1UdDwEB/wQEAwIH
gDATBgNVHSUEDDAKBggrBgEFBQcDATAaBgNVHREEEzARhwR/AAABgglsb2NhbGhv
c3QwHwYDVR0jBBgwFoAUyGR0oMoTE5vt1Dvu3yWiYSWleW4wHQYDVR0OBBYEFAeo
URNkcrETw3ntieZa7NNmYdnoMAoGCCqGSM49BAMCA0gAMEUCIQDtVZHiHUloHgR4
Z92etCv99vlMUfX+obEIvg5NcJVJbAIgSYO1LcdwRnHsnSKq0A6d/WPfLlpmAx0V
/qDZGKUdha4=
-----END CERTIFICATE-----
";
const SERVER_KEY: &str = "-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgZS7colwQfoGu3hLP
02skojGZXrx8LZ4FSqoZMcdwmLOhRANCAAQkZLKwynk0LwnSDv87tFa98Fg76jjk
vuHUeQcJ1Au3TkTH2DXpwHgH/mn+xk6sQEDumbCjhlO+lvWjbwZzdVj8
-----END PRIVATE KEY-----
";

/// An https sink on a thread (rustls is a dependency; tokio-rustls is not): answers 202 to
/// each request and passes on the event the SDK parsed from it.
fn https_sink() -> (Url, std::sync::mpsc::Receiver<Event>) {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let certs = vec![CertificateDer::from_pem_slice(SERVER_PEM.as_bytes()).unwrap()];
    let key = PrivateKeyDer::from_pem_slice(SERVER_KEY.as_bytes()).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .unwrap();
    let config = Arc::new(config);
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = Url::parse(&format!("https://{}/", listener.local_addr().unwrap())).unwrap();
    let (events, received) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for tcp in listener.incoming().flatten() {
            let connection = rustls::ServerConnection::new(config.clone()).unwrap();
            let mut tls = rustls::StreamOwned::new(connection, tcp);
            // A client that does not trust the certificate ends here, without a request.
            let Some(event) = read_event(&mut tls) else {
                continue;
            };
            let _ = tls.write_all(
                b"HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
            );
            tls.conn.send_close_notify();
            let _ = tls.flush();
            let _ = events.send(event);
        }
    });
    (url, received)
}

/// Reads one HTTP/1.1 request with a content-length and parses it with the SDK.
fn read_event(stream: &mut impl Read) -> Option<Event> {
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(at) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
        let n = stream.read(&mut chunk).ok().filter(|n| *n > 0)?;
        buffer.extend_from_slice(&chunk[..n]);
    };
    let head = std::str::from_utf8(&buffer[..head_end]).ok()?;
    let mut headers = HeaderMap::new();
    for line in head.split("\r\n").skip(1).filter(|line| !line.is_empty()) {
        let (name, value) = line.split_once(':')?;
        let name = HeaderName::from_bytes(name.trim().as_bytes()).ok()?;
        headers.append(name, HeaderValue::from_str(value.trim()).ok()?);
    }
    let length: usize = headers.get(CONTENT_LENGTH)?.to_str().ok()?.parse().ok()?;
    while buffer.len() < head_end + length {
        let n = stream.read(&mut chunk).ok().filter(|n| *n > 0)?;
        buffer.extend_from_slice(&chunk[..n]);
    }
    to_event(&headers, buffer[head_end..head_end + length].to_vec()).ok()
}

#[tokio::test]
async fn an_https_sink_is_trusted_through_the_ca_bundle_and_only_through_it() {
    let (url, received) = https_sink();
    let untrusting = client();
    let encoded = Encoded::new(event(), ContentMode::Binary).unwrap();
    let err = untrusting.post(&url, encoded).await.unwrap_err();
    assert!(matches!(err, SendError::Transport(_)), "{err:?}");
    assert!(err.is_retryable());

    let trusting = SinkClient::new(Some(Duration::from_secs(10)), Some(CA_PEM)).unwrap();
    let encoded = Encoded::new(event(), ContentMode::Binary).unwrap();
    let status = trusting.post(&url, encoded).await.unwrap();
    assert_eq!(status, 202);
    let arrived = received.recv_timeout(Duration::from_secs(10)).unwrap();
    assert_eq!(with_json_data(arrived), event());
}

#[test]
fn a_ca_bundle_must_hold_a_certificate() {
    let no_certificate = SinkClient::new(None, Some("# nothing here\n")).unwrap_err();
    assert!(
        matches!(no_certificate, DeliverError::CaCerts(_)),
        "{no_certificate}"
    );
    let garbage = "-----BEGIN CERTIFICATE-----\nnot base64!\n-----END CERTIFICATE-----\n";
    let garbage = SinkClient::new(None, Some(garbage)).unwrap_err();
    assert!(matches!(garbage, DeliverError::CaCerts(_)), "{garbage}");
    let not_der = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
    let not_der = SinkClient::new(None, Some(not_der)).unwrap_err();
    assert!(matches!(not_der, DeliverError::CaCerts(_)), "{not_der}");
    let bundle = format!("{CA_PEM}{SERVER_PEM}");
    assert!(SinkClient::new(None, Some(&bundle)).is_ok());
}
