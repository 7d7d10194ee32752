//! The controller's metrics (`imagegate_controller_*`): runs by outcome, reconcile duration,
//! errors by kind, and the writes it makes. Labels are fixed strings, never object names.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use super::status::Outcome;

/// Labels of a finished run.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutcomeLabels {
    /// The condition reason (`Promoted`, `ValidationFailed`, ...).
    pub reason: &'static str,
    /// `true` or `false`.
    pub succeeded: &'static str,
}

/// Labels of a failed reconcile.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ErrorLabels {
    /// What failed (`read_imagestream`, `write_status`, ...).
    pub kind: &'static str,
}

/// The controller's metrics, registered in one registry.
#[derive(Clone)]
pub struct Metrics {
    /// `imagegate_controller_runs_total{reason, succeeded}`.
    pub runs: Family<OutcomeLabels, Counter>,
    /// `imagegate_controller_reconcile_duration_seconds`.
    pub reconcile_duration: Timed,
    /// `imagegate_controller_reconcile_errors_total{kind}`.
    pub reconcile_errors: Family<ErrorLabels, Counter>,
    /// `imagegate_controller_imagestream_writes_total`.
    pub imagestream_writes: Counter,
    /// `imagegate_controller_status_writes_total`.
    pub status_writes: Counter,
    /// `imagegate_controller_watch_restarts_total`: CustomRun watch errors (each followed by a
    /// resume or a re-list, after [`crate::runtime::watch_errors::WatchBackoff`]).
    pub watch_restarts: Counter,
    /// `imagegate_controller_import_to_promotion_seconds`: from the import that brought a
    /// digest into the candidate tag to the write that serves it ([`import_to_promotion`]).
    pub import_to_promotion: Histogram,
}

/// A histogram of durations with a guard that observes on drop.
#[derive(Clone)]
pub struct Timed(pub Histogram);

/// Observes the elapsed time when dropped.
pub(crate) struct Timer {
    histogram: Histogram,
    start: std::time::Instant,
}

impl Timed {
    /// Starts timing.
    pub(crate) fn start_timer(&self) -> Timer {
        Timer {
            histogram: self.0.clone(),
            start: std::time::Instant::now(),
        }
    }
}

impl Drop for Timer {
    fn drop(&mut self) {
        self.histogram.observe(self.start.elapsed().as_secs_f64());
    }
}

impl Metrics {
    /// Creates the metrics and registers them under `imagegate_controller`.
    pub fn register(registry: &mut Registry) -> Metrics {
        let m = Metrics {
            runs: Family::default(),
            reconcile_duration: Timed(Histogram::new(exponential_buckets(0.001, 2.0, 16))),
            reconcile_errors: Family::default(),
            imagestream_writes: Counter::default(),
            status_writes: Counter::default(),
            watch_restarts: Counter::default(),
            // 10 s to about 45 hours: a pipeline validates in minutes, a stuck one in days.
            import_to_promotion: Histogram::new(exponential_buckets(10.0, 2.0, 15)),
        };
        let sub = registry.sub_registry_with_prefix("imagegate_controller");
        sub.register(
            "runs",
            "CustomRuns finished, by condition reason",
            m.runs.clone(),
        );
        sub.register(
            "reconcile_duration_seconds",
            "Time spent in one reconcile of an ImagePromotion CustomRun",
            m.reconcile_duration.0.clone(),
        );
        sub.register(
            "reconcile_errors",
            "Reconciles that failed and were retried, by what failed",
            m.reconcile_errors.clone(),
        );
        sub.register(
            "imagestream_writes",
            "Writes of a served tag (promotions, rollbacks, phase marks)",
            m.imagestream_writes.clone(),
        );
        sub.register(
            "status_writes",
            "CustomRun status writes",
            m.status_writes.clone(),
        );
        sub.register(
            "watch_restarts",
            "CustomRun watch errors, each followed by a resume or re-list after a backoff",
            m.watch_restarts.clone(),
        );
        sub.register(
            "import_to_promotion_seconds",
            "Time from the import of a digest into the candidate tag to its promotion to the served tag",
            m.import_to_promotion.clone(),
        );
        m
    }

    /// Counts a finished run.
    pub(crate) fn observe_outcome(&self, o: &Outcome) {
        self.runs
            .get_or_create(&OutcomeLabels {
                reason: o.reason,
                succeeded: if o.succeeded { "true" } else { "false" },
            })
            .inc();
    }
}

/// Seconds from the import that brought `digest` into `candidate_tag` (the newest event of the
/// tag's history with that image: its `created`) to `now`; None when the candidate's history
/// has no such event (a digest promoted from elsewhere, pruned history) or it has no time. Never
/// negative: a clock behind the API server's counts as zero.
pub(crate) fn import_to_promotion(
    stream: &crate::api::ImageStream,
    candidate_tag: &str,
    digest: &str,
    now: k8s_openapi::jiff::Timestamp,
) -> Option<f64> {
    let imported = stream
        .history(candidate_tag)
        .iter()
        .find(|event| event.digest() == Some(digest))?
        .created
        .as_ref()?
        .0;
    Some(now.duration_since(imported).as_secs_f64().max(0.0))
}

#[cfg(test)]
mod tests {
    use k8s_openapi::jiff::Timestamp;

    use super::import_to_promotion;
    use crate::api::ImageStream;

    fn ts(s: &str) -> Timestamp {
        s.parse().expect("a timestamp")
    }

    /// A stream whose candidate tag imported `old` at 10:00 and `new` at 11:00 (newest first).
    fn stream() -> ImageStream {
        serde_json::from_value(serde_json::json!({
        "apiVersion": "image.openshift.io/v1",
        "kind": "ImageStream",
        "metadata": {"name": "nb", "namespace": "ds"},
        "spec": {"tags": [{"name": "candidate"}, {"name": "latest"}]},
        "status": {"dockerImageRepository": "", "tags": [
            {"tag": "candidate", "items": [
                {"created": "2026-01-01T11:00:00Z", "dockerImageReference": "q/nb@sha256:new", "image": "sha256:new", "generation": 3},
                {"created": "2026-01-01T10:00:00Z", "dockerImageReference": "q/nb@sha256:old", "image": "sha256:old", "generation": 2},
                {"created": null, "dockerImageReference": "q/nb@sha256:notime", "image": "sha256:notime", "generation": 1}
            ]},
            {"tag": "latest", "items": [
                {"created": "2026-01-01T09:00:00Z", "dockerImageReference": "q/nb@sha256:served", "image": "sha256:served", "generation": 1}
            ]}
        ]}
    }))
    .expect("an ImageStream")
    }

    #[test]
    fn the_time_is_counted_from_the_import_of_that_digest_into_the_candidate_tag() {
        let now = ts("2026-01-01T11:30:00Z");
        assert_eq!(
            import_to_promotion(&stream(), "candidate", "sha256:new", now),
            Some(1800.0)
        );
        // An older build still in the history: from its own import, not the newest one.
        assert_eq!(
            import_to_promotion(&stream(), "candidate", "sha256:old", now),
            Some(5400.0)
        );
    }

    #[test]
    fn a_digest_the_candidate_never_imported_or_without_a_time_is_not_measured() {
        let now = ts("2026-01-01T11:30:00Z");
        assert_eq!(
            import_to_promotion(&stream(), "candidate", "sha256:served", now),
            None
        );
        assert_eq!(
            import_to_promotion(&stream(), "candidate", "sha256:notime", now),
            None
        );
        assert_eq!(
            import_to_promotion(&stream(), "no-such-tag", "sha256:new", now),
            None
        );
    }

    #[test]
    fn a_clock_behind_the_api_server_counts_as_zero() {
        let now = ts("2026-01-01T10:59:00Z");
        assert_eq!(
            import_to_promotion(&stream(), "candidate", "sha256:new", now),
            Some(0.0)
        );
    }
}
