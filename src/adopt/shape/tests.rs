//! The names adopt chooses, against the dashboard's sort of `spec.tags` by name.

use super::{Kind, candidate_tag, pinned_by_digest};
use serde_json::json;

#[test]
fn the_candidate_is_candidate_unless_it_would_become_a_custom_images_first_tag() {
    assert_eq!(
        candidate_tag(Kind::Plain, "latest", None).unwrap(),
        "candidate"
    );
    assert_eq!(
        candidate_tag(Kind::Shipped, "2025.2", None).unwrap(),
        "candidate"
    );
    // Digits sort before letters: "2025.2" < "candidate", so the served tag stays first.
    assert_eq!(
        candidate_tag(Kind::Custom, "2025.2", None).unwrap(),
        "candidate"
    );
    assert_eq!(
        candidate_tag(Kind::Custom, "latest", None).unwrap(),
        "latest-candidate"
    );
    assert_eq!(
        candidate_tag(Kind::Custom, "v1", None).unwrap(),
        "v1-candidate"
    );
    for served in ["latest", "v1", "2025.2", "zzz"] {
        let name = candidate_tag(Kind::Custom, served, None).unwrap();
        assert!(served < name.as_str(), "{served} sorts before {name}");
        assert!(name.as_str() < format!("{served}-previous").as_str() || name == "candidate");
    }
}

#[test]
fn a_candidate_named_like_the_served_or_previous_tag_is_refused() {
    assert!(candidate_tag(Kind::Plain, "latest", Some("latest")).is_err());
    assert!(candidate_tag(Kind::Plain, "latest", Some("latest-previous")).is_err());
}

#[test]
fn pinned_means_an_image_stream_image_or_a_pull_spec_by_digest() {
    assert!(pinned_by_digest(Some(
        &json!({"kind": "ImageStreamImage", "name": "nb@sha256:1"})
    )));
    assert!(pinned_by_digest(Some(
        &json!({"kind": "DockerImage", "name": "q.io/a@sha256:1"})
    )));
    assert!(!pinned_by_digest(Some(
        &json!({"kind": "DockerImage", "name": "q.io/a:1"})
    )));
    assert!(!pinned_by_digest(Some(
        &json!({"kind": "ImageStreamTag", "name": "nb:1"})
    )));
    assert!(!pinned_by_digest(None));
}
