//! imagegate's integration tests, one test binary. Each module is the tests of one subject; what
//! they share (the emulator, the programs as processes, a CloudEvents sink, the RBAC checker) is
//! in [`support`].
//!
//! - [`api_types`]: the types of `imagegate::api` pinned to the real APIs and fixtures.
//! - [`kube_clients`]: HTTPS clients with one crypto provider; the typed API types over HTTP.
//! - [`cli`]: the `imagegate` binary's command line.
//! - [`adopt`]: `imagegate adopt` on each kind of stream, `--check`, and the controller's drift
//!   metric and Event.
//! - [`bad_config`]: bad configuration refused at the door, each with its exact message.
//! - [`emulator_imports`]: the emulator's import controllers against a real registry (a push
//!   imported with its metadata, on schedule, manifest lists, insecure and unknown tags).
//! - [`crd_drift`]: the committed CRDs (ImagePromotion, ImageStreamSource) match the Rust types.
//! - [`leader`]: Lease leader election against the emulator.
//! - [`runtime`]: the runtime both programs run in: standby, shutdown, a lost Lease.
//! - [`controller_reconcile`]: the real `reconcile` against the emulated API, request by request.
//! - [`controller_e2e`], [`source_e2e`], [`source_checkpoint`]: the real binaries end to end.
//! - [`source_mt`]: `imagegate source --multi-tenant`, every ImageStreamSource served by one
//!   process, end to end.
//! - [`source_reconcile`]: the ImageStreamSource reconciler against the emulated API (sinks
//!   by ref and URI, permissions by SubjectAccessReview, each condition).
//! - [`controller_cache`]: what the controller's CustomRun watch keeps of other tasks' runs.
//! - [`controller_scope`]: a controller given `--namespace` leaves other namespaces alone.
//! - [`controller_odh`]: the Open Data Hub view of a gated stream end to end (candidate hidden,
//!   the served tag described, failures noted, always an image, the DockerImage pin).
//! - [`odh_dashboard_check`]: the dashboard's model held to what the dashboard's own code
//!   showed for every demo state and the shared check's edge cases.
//! - [`controller_trust`]: the controller's refusals end to end (fail closed, the promoter's
//!   permission, the proof of validation, rolled-back digests), each leaving the served tag alone.
//! - [`controller_gate`]: the gate cannot be walked around: the governing ImagePromotion judges
//!   every run, params never widen it, a proof only from the run's own running PipelineRun, a
//!   rollback only to what the gate served.
//! - [`notebook_validation`]: the notebook validation Task's script against a stand-in server.
//! - [`ops`]: the operator commands (`status`, `promote`, `rollback`, `reject`, `import`) and the
//!   kubectl plugin, end to end with the real controller.
//! - [`python_interop`]: what the source sends, parsed by the official Python SDK.
//! - [`rbac`]: the RBAC of `config/` against what the programs really do.
//! - [`manifests`]: the shipped manifests fit together and fit the code (the consistency checks,
//!   the broken-manifest cases, `kubectl kustomize`).
//! - [`untrusted`]: the parsers of outside input never panic (the fuzz targets' entry points).
//! - [`watch_refused`]: a watch refused mid-run (RBAC revoked) is retried with backoff and
//!   reported, by both programs.
//! - [`receiver`]: `imagegate receiver` with a real registry's push notifications: a push
//!   imported in seconds, only for governed candidate tags, coalesced, and never unauthenticated.
//! - [`realcluster`]: `config/` and `tekton/` against a real kube-apiserver.
//! - [`realcluster_tekton`]: the real Tekton Pipelines and Triggers on it (kwok for the kubelet).

mod adopt;
mod api_types;
mod bad_config;
mod checkpoint_io;
mod cli;
mod controller_cache;
mod controller_chains;
mod controller_e2e;
mod controller_gate;
mod controller_keyless;
mod controller_ledger;
mod controller_odh;
mod controller_reconcile;
mod controller_scope;
mod controller_signature;
mod controller_trust;
mod controller_verdicts;
mod crd_drift;
mod docs_facts;
mod emulator_imports;
mod interceptor;
mod kube_clients;
mod leader;
mod manifests;
mod notebook_validation;
mod odh_dashboard_check;
mod ops;
mod python_interop;
mod rbac;
mod realcluster;
mod realcluster_tekton;
mod receiver;
mod runtime;
mod shape;
mod source_checkpoint;
mod source_e2e;
mod source_mt;
mod source_reconcile;
mod support;
mod untrusted;
mod watch_refused;
