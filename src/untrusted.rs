//! Every parser of input from outside the process, each behind one function of raw bytes: the
//! entry points the fuzz targets in `fuzz/` run (docs/testing.md) and that a fast property test
//! (`tests/it/untrusted.rs`) runs on every test run. None may panic, whatever the bytes: bad
//! input is an error or a terminal status with a reason. Each returns whether the input was
//! taken, which the property test uses to check that its seeds are well formed.

use chrono::{DateTime, Utc};

use crate::api::CustomRun;
use crate::controller::crd::ImagePromotionSpec;
use crate::controller::params::{self, SpecSource};
use crate::source::watch::decode::{Reading, TagsOnly, Whole};

/// A CustomRun as the watch delivers it: its spec source (an inline `customSpec` is parsed
/// here) and its params over that spec, as the controller reads them.
pub fn customrun(data: &[u8]) -> bool {
    let Ok(run) = serde_json::from_slice::<CustomRun>(data) else {
        return false;
    };
    let spec = match params::spec_source(&run) {
        Ok(SpecSource::Inline(spec)) => *spec,
        Ok(_) => ImagePromotionSpec::default(),
        Err(_) => return false,
    };
    params::parse(&run, &spec).is_ok()
}

/// An ImagePromotion spec as the API server stores it: its checks and validation block parsed,
/// and a run that names it read over it.
pub fn imagepromotion_spec(data: &[u8]) -> bool {
    let Ok(spec) = serde_json::from_slice::<ImagePromotionSpec>(data) else {
        return false;
    };
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
    checks.is_ok() & params::parse(&run, &spec).is_ok()
}

/// One object of a watch or a list, as each mode of the source decodes it.
pub fn watch_object(data: &[u8]) -> bool {
    let Ok(text) = std::str::from_utf8(data) else {
        return false;
    };
    let tags = TagsOnly::parse(text);
    let whole = Whole::parse(text);
    for stream in [&tags, &whole].into_iter().flatten() {
        // What the diff reads of every tag.
        for tag in stream.status.iter().flat_map(|s| &s.tags) {
            let _ = stream.current_digest(&tag.tag);
            let _ = stream.history(&tag.tag);
        }
    }
    tags.is_ok()
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
