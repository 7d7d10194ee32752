//! The real-cluster tier: imagegate against a real kube-apiserver (v1.35.4, with etcd, from
//! `scripts/realcluster up`), where server-side validation, CRDs, RBAC, watches, Leases and
//! Events are Kubernetes' own, and the OpenShift image API is aggregated from the emulator
//! (`imagegate-emulator --serve-image-api-only`), so the programs talk to the real server only.
//! `scripts/test` builds the components first; a missing Go toolchain or a failed build fails
//! these tests, never skips them.
//!
//! Each test starts its own control plane (about 5 s) and keeps its scenarios apart by
//! namespace; nextest runs each test in a process of its own, so a control plane is not shared
//! between tests.
//!
//! - [`cluster`]: the control plane and what the tests do with it.
//! - [`manifests`]: `config/` and `tekton/` apply; the RBAC by SubjectAccessReview.
//! - [`image_api`]: the image API aggregated, discovered, proxied and authorized.
//! - [`imports`]: its import controllers against a real registry, through the real server.
//! - [`runs`]: the controller's scenarios' setup; [`controller`]: the scenarios.
//! - [`source`]: the source's scenarios.
//! - [`ops`]: the operator CLI's import, promote and status through the real server.
//! - [`tamper`]: a served tag moved with kubectl, reported within 10 s, put back where the
//!   policy says so.
//! - [`namespaced`]: the namespace-scoped install (`config/namespaced/`), both programs with only
//!   its Roles.
//! - [`onboarding`]: what the default install may write, as the server answers each account,
//!   and the controller refused, saying so, in a namespace that did not opt in.
//! - [`differential`]: the same requests to the real server and to the emulator, compared.
//! - [`rbac`]: every verb of `config/`'s roles, sufficient and needed, on the real authorizer.
//! - [`admission`]: `config/`'s admission policy refusing a served tag moved outside the gate.
//! - [`signature`]: a signature policy with its keys and pull secret on the real server.

mod accounts;
mod admission;
pub(crate) mod cluster;
mod controller;
mod differential;
mod image_api;
mod imports;
mod manifests;
mod namespaced;
mod onboarding;
mod ops;
mod rbac;
mod runs;
mod signature;
mod source;
mod tamper;
