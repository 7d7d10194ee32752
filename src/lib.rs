//! imagegate: validate-then-promote for OpenShift ImageStreams.
//!
//! The crate is a library with one thin binary (`src/main.rs`: `source`, `controller`, `crds`,
//! and the operator commands, also as `kubectl-imagegate`).
//! The API emulator (`crates/emulator`) and the demo (`crates/demo`) are members of the workspace
//! beside it; the product uses the emulator only in its tests and benches. Every module is
//! public because the `imagegate` binary, the demo or the integration tests use it. The modules
//! follow the data:
//!
//! - [`access`]: SubjectAccessReviews for a service account (may it do this?), shared by the
//!   controller and the source.
//! - [`api`]: Rust types for the APIs imagegate talks to but does not own (ImageStream,
//!   ImageStreamTag, ImageStreamImage, Image, CustomRun), only the fields we use.
//! - [`cli`]: the command line (one clap struct per subcommand).
//! - [`telemetry`]: logging setup (`tracing`, human or JSON, `RUST_LOG`).
//! - [`run`]: the entry points of the subcommands (the binary's edge, `anyhow` errors).
//! - [`tls`]: the one rustls crypto provider of the binary.
//! - [`admin`]: the admin HTTP server of both programs (`/livez`, `/readyz`, `/metrics`).
//! - [`leader`]: leader election on a `coordination.k8s.io/v1` Lease (client-go semantics).
//! - [`runtime`]: what both programs run inside: the admin server, the Lease wait and loss,
//!   and shutdown, on a cancellation token.
//! - [`source`]: `imagegate source`, ImageStream tag changes as CloudEvents.
//! - [`controller`]: `imagegate controller`, the ImagePromotion Tekton custom task.
//! - [`adopt`]: `imagegate adopt`, an existing ImageStream turned into the gated shape, and the
//!   drift check of adopted streams.
//! - [`odh`]: what Open Data Hub reads on notebook ImageStreams, and a model of its dashboard.
//! - [`ops`]: the operator commands (`status`, `promote`, `rollback`, `reject`, `import`), also
//!   the kubectl plugin `kubectl imagegate`.
//! - [`untrusted`]: every parser of outside input behind one function of bytes (the fuzz
//!   targets' and the property test's entry points).
//! - [`watch_errors`]: what both programs' watches do with an error: a backoff that grows while
//!   errors keep coming, and a refusal mid-run (RBAC revoked, a CRD removed) on `/readyz`.

pub mod access;
pub mod admin;
pub mod adopt;
pub mod api;
pub mod cli;
pub mod controller;
pub mod interceptor;
pub mod leader;
pub mod odh;
pub mod ops;
pub mod receiver;
pub mod run;
pub mod runkey;
pub mod runtime;
pub mod source;
pub mod telemetry;
pub mod tls;
pub mod untrusted;
pub mod watch_errors;
