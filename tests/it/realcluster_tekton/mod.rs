//! The real-cluster tier with Tekton: the Tekton Pipelines controller (v1.15.0) and Tekton
//! Triggers (v0.37.0) as released, on a real kube-apiserver, with kube-scheduler and kwok in the
//! place of kubelets (`scripts/realcluster up --tekton`). One such cluster serves every test of a
//! run ([`cluster`]), each test in its own namespace. `scripts/test` builds the components first; a
//! missing Go toolchain or a failed build fails these tests, never skips them.
//!
//! - [`pipelines`]: PipelineRuns end Succeeded or Failed as the test decides, with the results and
//!   exit codes Tekton read from the pods; `finally` after a failure.
//! - [`triggers`]: an EventListener turns the CloudEvent its CEL filter passes into its PipelineRun.
//! - [`customrun`]: the CustomRun contract with `config/` and `tekton/` as shipped: what Tekton
//!   writes into the `begin` CustomRun and when it cancels it, `imagegate controller` ending it,
//!   and the source's CloudEvent through the shipped EventListener to a PipelineRun.
//! - [`contract`]: the contract when `begin` succeeds: results read downstream, a `when` on a
//!   custom-task result, a cancel while `promote` waits and after it landed, a controller restart.
//! - [`chains`]: the proof's signed record, with the real Tekton Chains signing the TaskRuns.
//! - [`differential`]: `imagegate demo`'s EventListener and pipeline runner against real Triggers
//!   and Pipelines, the same inputs to both, what matters compared.

mod chains;
mod cluster;
mod contract;
mod customrun;
mod differential;
mod pipelines;
mod triggers;
