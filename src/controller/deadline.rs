//! When a run's current attempt times out, from its own spec and status: pure.

use k8s_openapi::jiff::Timestamp;

use crate::api::CustomRun;

/// When the current attempt times out (the reconciler ends it then; the error policy retries no
/// later than that): `startTime + spec.timeout` (nil = 60 minutes, 0 = never).
pub(crate) fn deadline(run: &CustomRun) -> Result<Option<Timestamp>, String> {
    let timeout = run.timeout().map_err(|e| {
        format!(
            "spec.timeout {:?}: {e}",
            run.spec.timeout.as_deref().unwrap_or("")
        )
    })?;
    let (Some(timeout), Some(start)) = (
        timeout,
        run.status.as_ref().and_then(|s| s.start_time.as_ref()),
    ) else {
        return Ok(None);
    };
    let span = k8s_openapi::jiff::SignedDuration::try_from(timeout).map_err(|e| e.to_string())?;
    Ok(start.0.checked_add(span).ok())
}
