//! TLS: one rustls crypto provider (ring) for the whole binary.
//!
//! kube and reqwest both use rustls. Two crypto providers are compiled in: ring (kube, reqwest
//! 0.12) and aws-lc-rs (reqwest 0.13 under `sigstore` and `oci-client`, whose only other choice
//! is OpenSSL). rustls then cannot pick one by itself, and kube panics when it builds a client
//! (for a plain-http URL too), so every program installs ring as the process default before
//! any client is built, and so does every test helper that builds one in process.

/// Installs ring as the process-wide rustls provider (a no-op if one is installed already).
pub fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}
