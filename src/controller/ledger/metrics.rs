//! The ledger's gauges.

use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// The ledger's gauges.
#[derive(Clone)]
pub struct LedgerMetrics {
    /// `imagegate_controller_candidates_without_verdict`: candidates past the grace period with
    /// no validation begun, or whose validation ended without a verdict.
    pub without_verdict: Gauge,
    /// `imagegate_controller_import_failing_tags`: governed candidate tags whose last import
    /// failed.
    pub import_failing: Gauge,
    /// `imagegate_controller_update_failed_tags`: served tags whose phase is `UpdateFailed`.
    pub update_failed: Gauge,
}

impl LedgerMetrics {
    /// Creates the gauges under `imagegate_controller`.
    pub fn register(registry: &mut Registry) -> LedgerMetrics {
        let m = LedgerMetrics {
            without_verdict: Gauge::default(),
            import_failing: Gauge::default(),
            update_failed: Gauge::default(),
        };
        let sub = registry.sub_registry_with_prefix("imagegate_controller");
        sub.register(
            "candidates_without_verdict",
            "Candidates of governed streams with no validation begun past the grace period, or whose validation ended without a verdict",
            m.without_verdict.clone(),
        );
        sub.register(
            "import_failing_tags",
            "Candidate tags of governed streams whose last import failed",
            m.import_failing.clone(),
        );
        sub.register(
            "update_failed_tags",
            "Served tags of governed streams whose phase is UpdateFailed",
            m.update_failed.clone(),
        );
        m
    }
}
