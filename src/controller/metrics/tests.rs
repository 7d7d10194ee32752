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
