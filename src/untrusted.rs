//! Every parser of input from outside the process, each behind one function of raw bytes: the
//! entry points the fuzz targets in `fuzz/` run (docs/testing.md) and that a fast property test
//! (`tests/it/untrusted.rs`) runs on every test run. None may panic, whatever the bytes: bad
//! input is an error or a terminal status with a reason. Each returns whether the input was
//! taken (the two parsers of the custom task's input: or the message a run would end with),
//! which the property test uses to check that its seeds are taken and its refused cases refused
//! with the message they expect.

use std::sync::OnceLock;

use chrono::{DateTime, Utc};
use prometheus_client::registry::Registry;

use crate::api::CustomRun;
use crate::controller::crd::ImagePromotionSpec;
use crate::controller::params::{self, SpecSource};
use crate::source::metrics::Metrics;
use crate::source::watch::decode::{self, Reading, TagsAndLabels, TagsOnly, Watched, Whole};

/// A CustomRun as the watch delivers it: its spec source (an inline `customSpec` is parsed
/// here) and its params over that spec, as the controller reads them. Refused: the message the
/// run would end with (`InvalidParams`), or why it is not a CustomRun.
pub fn customrun(data: &[u8]) -> Result<(), String> {
    let run =
        serde_json::from_slice::<CustomRun>(data).map_err(|e| format!("not a CustomRun: {e}"))?;
    let spec = match params::spec_source(&run)? {
        SpecSource::Inline(spec) => *spec,
        SpecSource::Named(_) | SpecSource::Defaults => ImagePromotionSpec::default(),
    };
    params::parse(&run, &spec).map(drop)
}

/// An ImagePromotion spec as the API server stores it: its checks parsed on their own (every
/// problem listed) and a run that names it read over it. Refused: the message that run would
/// end with, or why it is not a spec.
pub fn imagepromotion_spec(data: &[u8]) -> Result<(), String> {
    let spec = serde_json::from_slice::<ImagePromotionSpec>(data)
        .map_err(|e| format!("not an ImagePromotion spec: {e}"))?;
    let checks = spec.checks.parse();
    let run: CustomRun = serde_json::from_value(serde_json::json!({
        "apiVersion": "tekton.dev/v1beta1", "kind": "CustomRun",
        "metadata": {"name": "r", "namespace": "ds"},
        "spec": {"params": [
            {"name": "imagestream", "value": "nb"},
            {"name": "digest", "value": format!("sha256:{}", "a".repeat(64))}
        ]}
    }))
    .expect("a CustomRun");
    params::parse(&run, &spec)?;
    checks.map(drop)
}

/// One object of a watch or a list, decoded as each reading of the source decodes it (the
/// lenient [`Watched`], which keeps the name of an object that does not parse), and what is
/// read of its tags: by the diff, every tag of its status; by the controller, the tags it names
/// (served, candidate, previous), which may have no status yet: a spec tag not yet imported, or
/// a tag the stream does not have. Taken: the stream parses as mode `imagestreamtag` reads it.
pub fn watch_object(data: &[u8]) -> bool {
    static METRICS: OnceLock<Metrics> = OnceLock::new();
    let metrics = METRICS.get_or_init(|| Metrics::register(&mut Registry::default()));
    let Ok(text) = std::str::from_utf8(data) else {
        return false;
    };
    let taken = watched::<TagsOnly>(text, metrics);
    watched::<TagsAndLabels>(text, metrics);
    watched::<Whole>(text, metrics);
    taken
}

/// Decodes `text` as the watch of reading `R` does and reads the stream's tags; whether it
/// parsed.
fn watched<R: Reading>(text: &str, metrics: &Metrics) -> bool {
    let Ok(object) = serde_json::from_str::<Watched<R>>(text) else {
        return false;
    };
    let _ = decode::key(&object);
    let Some(stream) = decode::typed(object, metrics) else {
        return false;
    };
    let status = stream.status.iter().flat_map(|s| &s.tags).map(|t| &t.tag);
    let spec = stream.spec.tags.iter().map(|t| &t.name);
    for tag in status.chain(spec) {
        let _ = stream.current_digest(tag);
        let _ = stream.history(tag);
    }
    let _ = stream.current_digest(params::DEFAULT_SERVED_TAG);
    true
}

/// One entry of a checkpoint ConfigMap (the value of a data key).
pub fn checkpoint_entry(data: &[u8]) -> bool {
    std::str::from_utf8(data)
        .is_ok_and(|text| crate::source::checkpoint::decode_state(text).is_some())
}

/// `K_CE_OVERRIDES`, as the source reads it at start.
pub fn ce_overrides(data: &[u8]) -> bool {
    serde_json::from_slice::<serde_json::Value>(data)
        .is_ok_and(|v| crate::source::event::override_extensions(&v).is_ok())
}

/// The durations of outside input: a CustomRun's `spec.timeout` and `checks.maxAge` (Go
/// durations) and `--backoff-delay` (ISO 8601).
pub fn durations(data: &[u8]) -> bool {
    let Ok(text) = std::str::from_utf8(data) else {
        return false;
    };
    let go = crate::api::customrun::parse_go_duration(text).is_ok();
    let iso = crate::source::deliver::parse_iso8601_duration(text).is_ok();
    go | iso
}

/// A sink's `Retry-After` header, at a fixed now.
pub fn retry_after(data: &[u8]) -> bool {
    let Ok(text) = std::str::from_utf8(data) else {
        return false;
    };
    let now: DateTime<Utc> = DateTime::from_timestamp(1_800_000_000, 0).expect("a time");
    crate::source::deliver::parse_retry_after(text, now).is_some()
}

/// A `--selector` label selector.
pub fn label_selector(data: &[u8]) -> bool {
    std::str::from_utf8(data).is_ok_and(|text| crate::cli::selector::check(text).is_ok())
}
