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
//! - [`run`]: the entry points of the subcommands (the binary's edge, `anyhow` errors).
//! - [`runtime`]: what every program runs inside: the admin server (`/livez`, `/readyz`,
//!   `/metrics`), leader election on a `coordination.k8s.io/v1` Lease (client-go semantics),
//!   shutdown on a cancellation token, what a watch does with an error, logging, and the one
//!   rustls crypto provider.
//! - [`source`]: `imagegate source`, ImageStream tag changes as CloudEvents.
//! - [`adapter`]: `imagegate source --multi-tenant`, the ImageStreamSource custom resource, its
//!   reconciler, and one process running the source's flow for every source.
//! - [`controller`]: `imagegate controller`, the ImagePromotion Tekton custom task.
//! - [`adopt`]: `imagegate adopt`, an existing ImageStream turned into the gated shape, and the
//!   drift check of adopted streams.
//! - [`interceptor`]: `imagegate interceptor`, the Tekton Triggers ClusterInterceptor that lets
//!   an event start validation only for a governed candidate; [`runkey`] names those runs.
//! - [`receiver`]: `imagegate receiver`, registries' push notifications turned into imports.
//! - [`odh`]: what Open Data Hub reads on notebook ImageStreams.
//! - [`ops`]: the operator commands (`status`, `promote`, `rollback`, `reject`, `import`), also
//!   the kubectl plugin `kubectl imagegate`.
//! - [`untrusted`]: every parser of outside input behind one function of bytes (the fuzz
//!   targets' and the property test's entry points).

// The docs are for the engineers of this crate (it is not published): module docs name the
// crate-private items that do the work; `cargo doc --document-private-items` renders those links.
#![allow(rustdoc::private_intra_doc_links)]

pub mod access;
pub mod adapter;
pub mod adopt;
pub mod api;
pub mod cli;
pub mod controller;
pub mod interceptor;
pub mod odh;
pub mod ops;
pub mod receiver;
pub mod run;
pub mod runkey;
pub mod runtime;
pub mod source;
pub mod untrusted;
