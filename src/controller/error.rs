//! Why a reconcile could not finish, and what happens then: [`Error`] names the API call that
//! failed, and [`error_policy`] only counts it, logs it and requeues the run with a per-run
//! backoff. Bad input is never an error: it ends the run with a reason (see `reconcile`).

use std::sync::Arc;
use std::time::Duration;

use kube::ResourceExt;
use kube::runtime::controller::Action;
use tracing::warn;

use crate::api::CustomRun;

use super::context::Context;
use super::deadline::deadline;
use super::metrics::ErrorLabels;

/// A reconcile that could not finish; retried with backoff by the error policy.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Listing the ImagePromotions of the run's namespace (the one it names, and those that
    /// govern its stream).
    #[error("listing the ImagePromotions of namespace {namespace}: {source}")]
    ReadSpec {
        /// The run's namespace.
        namespace: String,
        /// The API error.
        source: kube::Error,
    },
    /// Asking the API server whether the run's service account may promote.
    #[error("asking whether {user} may promote (a SubjectAccessReview): {source}")]
    Authorize {
        /// The service account's user name.
        user: String,
        /// The API error.
        source: kube::Error,
    },
    /// Reading the ImageStream.
    #[error("reading ImageStream {name}: {source}")]
    ReadImageStream {
        /// Its name.
        name: String,
        /// The API error.
        source: kube::Error,
    },
    /// Reading the proof of validation (the run's PipelineRun or one of its TaskRuns).
    #[error("reading {what}, the proof of validation: {source}")]
    ReadEvidence {
        /// `PipelineRun <name>` or `TaskRun <name>`.
        what: String,
        /// The API error.
        source: kube::Error,
    },
    /// Reading the candidate image's metadata.
    #[error("reading ImageStreamImage {name}: {source}")]
    ReadImage {
        /// `{is}@{digest}`.
        name: String,
        /// The API error.
        source: kube::Error,
    },
    /// Reading a trusted key or a pull secret of the signature policy.
    #[error("reading {what}, named by the signature policy: {source}")]
    ReadSignatureSetting {
        /// `ConfigMap <name>` or `Secret <name>`.
        what: String,
        /// The API error.
        source: kube::Error,
    },
    /// Looking up the candidate's signatures in its registry (unreachable, refused, timed out).
    #[error("looking up the signatures of {reference}: {message}")]
    Registry {
        /// The candidate, `<registry>/<repository>@<digest>`.
        reference: String,
        /// What went wrong.
        message: String,
    },
    /// Writing the served tag.
    #[error("patching ImageStream {name}: {source}")]
    PatchImageStream {
        /// Its name.
        name: String,
        /// The API error.
        source: kube::Error,
    },
    /// The ImageStream changed under every attempt to write it.
    #[error("ImageStream {name} changed during each of {attempts} attempts to write it")]
    Contended {
        /// Its name.
        name: String,
        /// How many attempts.
        attempts: usize,
    },
    /// Nothing to decide yet: the run's PipelineRun has not listed it among its children.
    #[error("waiting: {why}")]
    NotYet {
        /// What is awaited.
        why: String,
    },
    /// Writing the CustomRun's status.
    #[error("writing the status of CustomRun {name}: {source}")]
    WriteStatus {
        /// Its name.
        name: String,
        /// The API error.
        source: kube::Error,
    },
}

impl Error {
    /// A fixed label for metrics (never the error's text).
    pub(crate) fn kind(&self) -> &'static str {
        if self.not_onboarded() {
            return "not_onboarded";
        }
        match self {
            Error::ReadSpec { .. } => "read_spec",
            Error::Authorize { .. } => "authorize",
            Error::ReadImageStream { .. } => "read_imagestream",
            Error::ReadImage { .. } => "read_image",
            Error::ReadEvidence { .. } => "read_evidence",
            Error::ReadSignatureSetting { .. } => "read_signature_setting",
            Error::Registry { .. } => "registry",
            Error::PatchImageStream { .. } => "patch_imagestream",
            Error::Contended { .. } => "contended",
            Error::NotYet { .. } => "not_yet",
            Error::WriteStatus { .. } => "write_status",
        }
    }
}

impl Error {
    /// Whether this is the API server refusing (403) one of the writes a run needs: config/
    /// grants the controller no write in any namespace, tekton/330-controller-rbac.yaml opts one
    /// in (F-6), so a run in a namespace that did not opt in ends here.
    pub(crate) fn not_onboarded(&self) -> bool {
        match self {
            Error::WriteStatus { source, .. } | Error::PatchImageStream { source, .. } => {
                crate::api::status_code(source) == Some(403)
            }
            _ => false,
        }
    }
}

/// The API server's message of an API error (else the error's text).
pub(super) fn api_message(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) => s.message.clone(),
        other => other.to_string(),
    }
}

/// Counts the failure by kind, logs it, and requeues the run after its backoff, never later
/// than the attempt's deadline (a timeout must be reported when it happens).
pub(crate) fn error_policy(run: Arc<CustomRun>, error: &Error, ctx: Arc<Context>) -> Action {
    if let Error::NotYet { why } = error {
        // Not a failure: Tekton lists a child it created within its next status write.
        tracing::debug!(
            namespace = %run.namespace().unwrap_or_default(),
            customrun = %run.name_any(),
            reason = %why,
            "waiting"
        );
        return Action::requeue(not_yet_delay(ctx.runs.waited(&run)));
    }
    ctx.metrics
        .reconcile_errors
        .get_or_create(&ErrorLabels { kind: error.kind() })
        .inc();
    let mut delay = retry_delay(ctx.runs.failed(&run));
    if let Ok(Some(deadline)) = deadline(&run) {
        let left = deadline.as_second() - (ctx.clock)().as_second();
        delay = delay.min(Duration::from_secs(left.max(0) as u64 + 1));
    }
    if error.not_onboarded() {
        warn!(
            namespace = %run.namespace().unwrap_or_default(),
            customrun = %run.name_any(),
            error = %error,
            retry_in = ?delay,
            "this namespace has not opted in to imagegate: the controller may not write here until \
             the platform applies tekton/ (its 330-controller-rbac.yaml) in it; retrying"
        );
        return Action::requeue(delay);
    }
    warn!(
        namespace = %run.namespace().unwrap_or_default(),
        customrun = %run.name_any(),
        error = %error,
        retry_in = ?delay,
        "reconcile failed; retrying"
    );
    Action::requeue(delay)
}

/// How soon a run that waits for its PipelineRun ([`Error::NotYet`]) is looked at again after
/// the `waits`-th such reconcile in a row: 25 ms, doubling up to [`NOT_YET_MAX`]. Tekton lists a
/// child it made in its next status write, tens of milliseconds later. A run that wrote its
/// start before it found itself unlisted is reconciled again by that write's watch event; one
/// that had nothing to write (already started: a retry, a restart) has only this requeue, and a
/// first wait of a second held it a second longer than needed. A run its PipelineRun never
/// lists (made by hand with an owner reference) costs one reconcile a second after the first
/// 1.6 s, as before, until the grace ends it.
pub(crate) fn not_yet_delay(waits: u32) -> Duration {
    let doublings = waits.clamp(1, 7) - 1;
    Duration::from_millis(25u64 << doublings).min(NOT_YET_MAX)
}

/// The longest wait between two looks at a run its PipelineRun does not list yet.
pub(crate) const NOT_YET_MAX: Duration = Duration::from_secs(1);

/// The wait after the `failures`-th failure in a row: 0.5 s, doubling up to 60 s.
pub(crate) fn retry_delay(failures: u32) -> Duration {
    let doublings = failures.clamp(1, 8) - 1;
    Duration::from_millis(500u64 << doublings).min(Duration::from_secs(60))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(code: u16) -> kube::Error {
        kube::Error::Api(
            kube::core::Status::failure("refused", "Forbidden")
                .with_code(code)
                .boxed(),
        )
    }

    #[test]
    fn a_refused_write_names_the_namespace_not_onboarded_and_other_errors_keep_their_kind() {
        let status = |code| Error::WriteStatus {
            name: "r".into(),
            source: api(code),
        };
        let patch = |code| Error::PatchImageStream {
            name: "nb".into(),
            source: api(code),
        };
        assert_eq!(status(403).kind(), "not_onboarded");
        assert_eq!(patch(403).kind(), "not_onboarded");
        assert_eq!(status(409).kind(), "write_status");
        assert_eq!(patch(500).kind(), "patch_imagestream");
        let read = Error::ReadImageStream {
            name: "nb".into(),
            source: api(403),
        };
        assert_eq!(
            read.kind(),
            "read_imagestream",
            "a refused read is not about onboarding"
        );
    }

    #[test]
    fn a_run_not_yet_listed_is_looked_at_again_soon_then_at_most_once_a_second() {
        let delays: Vec<u64> = (0..=9)
            .map(|n| not_yet_delay(n).as_millis() as u64)
            .collect();
        assert_eq!(delays, [25, 25, 50, 100, 200, 400, 800, 1000, 1000, 1000]);
        assert_eq!(not_yet_delay(u32::MAX), NOT_YET_MAX);
    }

    /// The error policy as the controller runs it: a run not yet listed is requeued soon, then
    /// later each time, and counted as no error; a failure after it starts its own backoff.
    #[tokio::test]
    async fn the_error_policy_requeues_a_waiting_run_soon_then_later_and_counts_no_error() {
        let config = kube::Config::new("http://127.0.0.1:9".parse().unwrap());
        crate::runtime::tls::install_crypto_provider();
        let client = kube::Client::try_from(config).unwrap();
        let mut registry = prometheus_client::registry::Registry::default();
        let ctx = Arc::new(Context {
            recorder: kube::runtime::events::Recorder::new(client.clone(), "imagegate-test".into()),
            client,
            metrics: super::super::metrics::Metrics::register(&mut registry),
            clock: Arc::new(k8s_openapi::jiff::Timestamp::now),
            runs: Arc::new(crate::controller::runs::RunStates::default()),
            verdicts: None,
            own_namespace: "imagegate-system".into(),
        });
        let run: Arc<CustomRun> = Arc::new(
            serde_json::from_value(serde_json::json!({
                "apiVersion": "tekton.dev/v1beta1", "kind": "CustomRun",
                "metadata": {"name": "r", "namespace": "ns", "uid": "u"}, "spec": {}
            }))
            .unwrap(),
        );
        let not_yet = Error::NotYet {
            why: "not listed".into(),
        };
        let first = error_policy(run.clone(), &not_yet, ctx.clone());
        let second = error_policy(run.clone(), &not_yet, ctx.clone());
        assert_eq!(first, Action::requeue(Duration::from_millis(25)));
        assert_eq!(second, Action::requeue(Duration::from_millis(50)));
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        assert!(
            !text.contains("not_yet"),
            "a wait is not counted as an error: {text}"
        );
        let contended = Error::Contended {
            name: "nb".into(),
            attempts: 5,
        };
        assert_eq!(
            error_policy(run, &contended, ctx),
            Action::requeue(retry_delay(1)),
            "a failure's backoff starts at its own first step"
        );
    }

    #[test]
    fn waits_and_failures_are_counted_apart_and_a_success_starts_both_anew() {
        let runs = crate::controller::runs::RunStates::default();
        let run: CustomRun = serde_json::from_value(serde_json::json!({
            "apiVersion": "tekton.dev/v1beta1", "kind": "CustomRun",
            "metadata": {"name": "r", "namespace": "ns", "uid": "u"}, "spec": {}
        }))
        .unwrap();
        assert_eq!((runs.waited(&run), runs.waited(&run)), (1, 2));
        assert_eq!(runs.failed(&run), 1, "a wait is not a failure");
        assert_eq!(runs.waited(&run), 3);
        runs.succeeded(&run);
        assert_eq!((runs.waited(&run), runs.failed(&run)), (1, 1));
    }

    #[test]
    fn the_retry_delay_doubles_from_half_a_second_up_to_a_minute() {
        let delays: Vec<u64> = (1..=10)
            .map(|n| retry_delay(n).as_millis() as u64)
            .collect();
        assert_eq!(
            delays,
            [
                500, 1_000, 2_000, 4_000, 8_000, 16_000, 32_000, 60_000, 60_000, 60_000
            ]
        );
        assert_eq!(retry_delay(u32::MAX), Duration::from_secs(60));
    }
}
