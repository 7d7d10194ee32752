//! imagegate-emulator: an HTTP server that speaks the Kubernetes REST API, with the OpenShift
//! image API and Tekton's CustomRuns, standing in for a cluster in imagegate's tests and in the
//! demo. The library is the server and its handle; `src/main.rs` is the thin
//! `imagegate-emulator` binary. It knows nothing of imagegate itself: clients reach it only over
//! HTTP (`kube::Client`, kubectl, curl).
//!
//! Its public surface is what its users need: [`Emulator`] (start with a [`Config`], seed,
//! simulate imports with an [`ImportRequest`], inject faults, read the request log, errors as
//! [`ApiError`]), [`tekton`] (the stand-in CRDs of CustomRuns, PipelineRuns and TaskRuns),
//! [`control`] (the [`control::Fault`] and [`control::RequestRecord`] types and the control API's
//! [`control::PREFIX`]), and [`Rbac`] (with [`Attributes`], [`Grant`], [`PolicyRule`],
//! [`RoleKey`] and [`UserInfo`]): the RBAC evaluator it answers SubjectAccessReviews with, which
//! imagegate's tests also check request logs with. The modules behind it are private to the crate; the
//! request path reads top to bottom:
//! - `http`: routing of `/api`, `/apis`, `/openapi/v3` and the control API under
//!   [`control::PREFIX`], fault injection and the request log.
//! - `verbs`: get, list, create, update, patch, delete for any resource type, applying the
//!   per-type strategy (`openshift` for ImageStreams and their virtual views, CRDs for custom
//!   resources) and the generic metadata rules (uid, generation, status subresource).
//! - `watch`: watch streams (resume from a resourceVersion, bookmarks, 410 Expired, streaming
//!   lists).
//! - `store`: the objects, the global resourceVersion counter and the event log.
//! - `patch`, `selector`, `schema`: pure patch, selector and CRD-schema semantics.
//! - `rbac`: RBAC as the API server evaluates it, and `rbac::review`, the SubjectAccessReviews
//!   answered from the Roles, ClusterRoles and bindings stored.
//! - `registry`: the resource types served and the discovery documents; `openapi`: the OpenAPI
//!   v3 documents kubectl validates against.
//! - `simulate`: what was on the cluster already (seeded objects) and the control API's
//!   simulated imports and import failures.
//! - [`imports`]: the image import controllers ([`Imports`] in [`Config`]): a new or changed
//!   `DockerImage` tag imported at once, scheduled tags again each interval.
//! - `upstream`: what the upstream registries serve, which `ImageStreamImport`s resolve against.
//! - [`aggregated`]: the image-API-only mode, an aggregated API server behind a real
//!   kube-apiserver (TLS, the front proxy's identity, SubjectAccessReview).
//! - `handle`: the programmatic handle tests and the demo use (seed, simulate imports, faults,
//!   compaction); [`control`] exposes the same over HTTP for other processes.
//!
//! It serves CustomRuns from the start, as a cluster with Tekton installed does, with its own
//! stand-in for Tekton's released CRD ([`tekton::customrun_crd`]: same group, version and kind,
//! a schema that keeps every field); tests that need Tekton's schema create the released CRD.

pub mod aggregated;
pub mod control;
mod handle;
mod http;
pub mod imports;
mod openapi;
mod openshift;
mod patch;
mod pull;
mod rbac;
mod registry;
mod schema;
mod selector;
mod simulate;
mod status;
mod store;
mod stored;
pub mod tekton;
mod upstream;
mod verbs;
mod watch;
pub mod window;

pub use handle::{Config, Emulator};
pub use imports::Imports;
pub use rbac::{Attributes, Grant, PolicyRule, Rbac, RoleKey, UserInfo};
pub use simulate::{ImportRequest, Imported};
pub use status::ApiError;
pub use store::DEFAULT_RETAINED_EVENTS;
pub use verbs::token::{ISSUER as TOKEN_ISSUER, claims as token_claims};
