//! imagegate-emulator: an HTTP server that speaks the Kubernetes REST API, with the OpenShift
//! image API and Tekton's CustomRuns, standing in for a cluster in imagegate's tests and in the
//! demo. The library is the server and its handle; `src/main.rs` is the thin
//! `imagegate-emulator` binary. It knows nothing of imagegate itself: clients reach it only over
//! HTTP (`kube::Client`, kubectl, curl).
//!
//! The request path reads top to bottom:
//! - [`http`]: routing of `/api`, `/apis`, `/openapi/v3` and the control API under
//!   [`control::PREFIX`], fault injection and the request log.
//! - [`verbs`]: get, list, create, update, patch, delete for any resource type, applying the
//!   per-type strategy ([`openshift`] for ImageStreams and their virtual views, CRDs for custom
//!   resources) and the generic metadata rules (uid, generation, status subresource).
//! - [`watch`]: watch streams (resume from a resourceVersion, bookmarks, 410 Expired, streaming
//!   lists).
//! - [`store`]: the objects, the global resourceVersion counter and the event log.
//! - [`patch`], [`selector`], [`schema`]: pure patch, selector and CRD-schema semantics.
//! - [`registry`]: the resource types served and the discovery documents;
//!   [`openapi`]: the OpenAPI v3 documents kubectl validates against.
//! - [`simulate`]: what the cluster does by itself (seeded objects, scheduled imports).
//! - [`aggregated`]: the image-API-only mode, an aggregated API server behind a real
//!   kube-apiserver (TLS, the front proxy's identity, SubjectAccessReview).
//! - [`handle`]: the programmatic handle tests and the demo use (seed, simulate imports,
//!   faults, compaction); [`control`] exposes the same over HTTP for other processes.
//!
//! The CustomRun CRD it serves is Tekton's own (tektoncd/pipeline
//! `config/300-crds/300-customrun.yaml`, the workspace's copy in `tests/crds/`), as on a cluster
//! with Tekton installed: [`handle::CUSTOMRUN_CRD`].

pub mod aggregated;
pub mod control;
pub mod handle;
pub mod http;
pub mod openapi;
pub mod openshift;
pub mod patch;
pub mod registry;
pub mod schema;
pub mod selector;
pub mod simulate;
pub mod status;
pub mod store;
pub mod stored;
pub mod verbs;
pub mod watch;

pub use handle::{Config, Emulator};
