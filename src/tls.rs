//! TLS: one rustls crypto provider (ring) for the whole binary.
//!
//! kube and reqwest both use rustls. If two crypto providers are compiled in (reqwest 0.13
//! defaults to aws-lc-rs, kube to ring), rustls cannot pick one and kube panics when it builds
//! an HTTPS client, which plain-http tests never show. The dependency set keeps ring only and
//! this installs it as the process default before any client is built.

/// Installs ring as the process-wide rustls provider (a no-op if one is installed already).
pub fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}
