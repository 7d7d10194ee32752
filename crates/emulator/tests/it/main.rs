//! The emulator's integration tests, one test binary: its REST semantics over raw HTTP
//! ([`emulator_http`]), kube-rs against it ([`emulator_kube`]), its control API
//! ([`emulator_control`]), kubectl against the real binary ([`kubectl`]) and the binary's
//! command line ([`cli`]).

mod cli;
mod emulator_control;
mod emulator_http;
mod emulator_kube;
mod kubectl;

/// ring as the process's rustls provider, as the programs install it before they build a client
/// (kube and reqwest build theirs on rustls).
fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}
