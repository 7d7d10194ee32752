//! HTTPS for the image-API-only mode: the serving certificate, the client certificates of the
//! front proxy, and the accept loop that hands each request the certificate its connection
//! presented.
//!
//! A client certificate is asked for but not required, as kube-apiserver and every aggregated
//! server built on k8s.io/apiserver do: a client without one completes the handshake and is
//! then anonymous, so it gets an HTTP 401 or 403 with a `Status` body rather than a TLS alert.
//! A certificate that is presented must chain to the request-header CA, or the handshake fails.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use rustls::RootCertStore;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio_rustls::TlsAcceptor;
use tower::ServiceExt;

/// The verified client certificate of a request's connection (DER, the end-entity first), as an
/// extension of every request on that connection. Absent when the client presented none.
#[derive(Clone, Debug)]
pub struct PeerCertificate(pub Arc<CertificateDer<'static>>);

/// Why the TLS settings could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A PEM file could not be read or holds nothing usable.
    #[error("cannot read {what} from {path}: {reason}")]
    Pem {
        /// What the file should hold.
        what: &'static str,
        /// The file.
        path: String,
        /// Why it failed.
        reason: String,
    },
    /// rustls refused the certificates or the key.
    #[error("invalid TLS settings: {0}")]
    Config(String),
}

fn certificates(path: &Path, what: &'static str) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let pem = |reason: String| TlsError::Pem {
        what,
        path: path.display().to_string(),
        reason,
    };
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| pem(e.to_string()))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| pem(e.to_string()))?;
    if certs.is_empty() {
        return Err(pem("no CERTIFICATE block".into()));
    }
    Ok(certs)
}

/// The rustls server settings: serve `cert`/`key`, and verify client certificates against the
/// CA bundle `client_ca` when a client presents one. ALPN offers HTTP/2 and HTTP/1.1.
pub fn server_config(
    cert: &Path,
    key: &Path,
    client_ca: &Path,
) -> Result<rustls::ServerConfig, TlsError> {
    let chain = certificates(cert, "the serving certificate")?;
    let key = PrivateKeyDer::from_pem_file(key).map_err(|e| TlsError::Pem {
        what: "the serving key",
        path: key.display().to_string(),
        reason: e.to_string(),
    })?;
    let mut roots = RootCertStore::empty();
    for ca in certificates(client_ca, "the request-header client CA")? {
        roots
            .add(ca)
            .map_err(|e| TlsError::Config(format!("the request-header client CA: {e}")))?;
    }
    let verifier = WebPkiClientVerifier::builder(Arc::new(roots))
        .allow_unauthenticated()
        .build()
        .map_err(|e| TlsError::Config(e.to_string()))?;
    let mut config = rustls::ServerConfig::builder()
        .with_client_cert_verifier(verifier)
        .with_single_cert(chain, key)
        .map_err(|e| TlsError::Config(e.to_string()))?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}

/// Serves `app` over TLS on `listener` until `stop` turns true. Each connection's verified
/// client certificate goes into its requests as a [`PeerCertificate`]. A failed handshake ends
/// only that connection.
pub async fn serve(
    listener: TcpListener,
    config: rustls::ServerConfig,
    app: Router,
    mut stop: watch::Receiver<bool>,
) {
    let acceptor = TlsAcceptor::from(Arc::new(config));
    loop {
        let (tcp, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    continue;
                }
            },
            _ = stop.changed() => return,
        };
        let acceptor = acceptor.clone();
        let app = app.clone();
        let stop = stop.clone();
        tokio::spawn(connection(acceptor, tcp, peer, app, stop));
    }
}

async fn connection(
    acceptor: TlsAcceptor,
    tcp: tokio::net::TcpStream,
    peer: SocketAddr,
    app: Router,
    mut stop: watch::Receiver<bool>,
) {
    // As Go's net package does (and the main listener, src/handle.rs): no Nagle delay on
    // the small writes of a watch.
    let _ = tcp.set_nodelay(true);
    let tls = match acceptor.accept(tcp).await {
        Ok(s) => s,
        Err(e) => {
            tracing::debug!(%peer, error = %e, "TLS handshake failed");
            return;
        }
    };
    let client = tls
        .get_ref()
        .1
        .peer_certificates()
        .and_then(|c| c.first())
        .map(|c| PeerCertificate(Arc::new(c.clone().into_owned())));
    let service = hyper::service::service_fn(move |mut req: hyper::Request<_>| {
        if let Some(c) = &client {
            req.extensions_mut().insert(c.clone());
        }
        app.clone().oneshot(req)
    });
    let builder = auto::Builder::new(TokioExecutor::new());
    let conn = builder.serve_connection_with_upgrades(TokioIo::new(tls), service);
    tokio::pin!(conn);
    tokio::select! {
        r = conn.as_mut() => {
            if let Err(e) = r {
                tracing::debug!(%peer, error = %e, "connection ended with an error");
            }
        }
        _ = stop.changed() => {}
    }
}

/// Installs ring as the process-wide rustls provider (a no-op if one is installed already):
/// kube's client and this server must agree on one.
pub fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}
