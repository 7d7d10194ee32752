//! The emulator's integration tests, one test binary: its REST semantics over raw HTTP
//! ([`emulator_http`]), kube-rs against it ([`emulator_kube`]), its control API
//! ([`emulator_control`]), `ImageStreamImport`s against its upstream registries
//! ([`image_import`]), the image import controllers ([`import_controller`]), SubjectAccessReviews answered from the stored RBAC
//! ([`subject_access_review`]), kubectl against the real binary ([`kubectl`]), the binary's
//! command line ([`cli`]) and the image-API-only mode over TLS ([`image_api`]), and the answers
//! pinned to a real kube-apiserver's by the workspace's differential check
//! ([`as_kube_apiserver`]) and to a real openshift-apiserver's recorded answers
//! ([`real_openshift`]). [`process`] runs the binary and prints its log when a test fails.

mod as_kube_apiserver;
mod cli;
mod emulator_control;
mod emulator_http;
mod emulator_kube;
mod image_api;
mod image_import;
mod import_controller;
mod kubectl;
mod real_openshift;
mod subject_access_review;
mod watch_window;
// The workspace's helper for programs under test (the product's tests share it); this binary
// uses only part of it.
#[allow(dead_code)]
#[path = "../../../../tests/it/support/process.rs"]
mod process;

/// ring as the process's rustls provider, as the programs install it before they build a client
/// (kube and reqwest build theirs on rustls).
fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}
