//! What every reconcile shares: the API client, the Event recorder, the metrics, the clock, the
//! per-run memory, the verdict sender and the controller's own namespace. Built once by
//! [`super::run`], read by every step of a reconcile ([`super::reconcile`], [`super::authorize`],
//! [`super::promote`], [`super::report`], [`super::error`]).

use std::sync::Arc;

use k8s_openapi::jiff::Timestamp;

use super::metrics::Metrics;
use super::runs::RunStates;

/// A clock, injected so that timeouts can be tested.
pub(crate) type Clock = Arc<dyn Fn() -> Timestamp + Send + Sync>;

/// What every reconcile shares.
pub struct Context {
    /// The API client.
    pub client: kube::Client,
    /// Publishes Kubernetes Events on transitions.
    pub recorder: kube::runtime::events::Recorder,
    /// Metrics.
    pub metrics: Metrics,
    /// Now.
    pub clock: Clock,
    /// What the controller remembers per run between reconciles.
    pub runs: Arc<RunStates>,
    /// Where verdicts go as CloudEvents (None: nowhere).
    pub verdicts: Option<super::verdict::Verdicts>,
    /// The controller's own namespace (`POD_NAMESPACE`): where the trusted keys a signature
    /// policy names by `configMapKeyRef` are read, out of reach of the gated namespaces' editors.
    pub own_namespace: String,
}
