//! The way back. At each promotion the digest served before is kept in a hidden spec tag, the
//! previous tag (`<served>-previous`), pinned as an ImageStreamImage by digest: pruning keeps the
//! images that tags point at, so the rollback target survives however short the served tag's
//! history is kept. Each rollback records the digest it left on the served tag
//! (`imagegate.dev/rolled-back-digests`), which a later `promote` refuses unless the run allows
//! it: re-running the pipeline of a bad build does not bring it back by accident.

use serde_json::{Value, json};

use crate::api::ImageStream;

use super::ROLLED_BACK_KEPT;
use super::annotation;
use super::served::served_annotations;

/// The digests rolled back from the served tag, oldest first.
pub(super) fn rolled_back(is: &ImageStream, served: &str) -> Vec<String> {
    served_annotations(is, served)
        .get(annotation::ROLLED_BACK_DIGESTS)
        .map(|list| {
            list.split(',')
                .map(str::trim)
                .filter(|d| !d.is_empty())
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// The list with `digest` added last (once), keeping the newest [`ROLLED_BACK_KEPT`].
pub(super) fn with_rolled_back(list: &[String], digest: &str) -> String {
    let mut kept: Vec<&str> = list
        .iter()
        .map(String::as_str)
        .filter(|d| *d != digest)
        .collect();
    kept.push(digest);
    let skip = kept.len().saturating_sub(ROLLED_BACK_KEPT);
    kept[skip..].join(",")
}

/// The list without `digest` (promoted again on purpose); None when nothing is left.
pub(super) fn without_rolled_back(list: &[String], digest: &str) -> Option<String> {
    let kept: Vec<&str> = list
        .iter()
        .map(String::as_str)
        .filter(|d| *d != digest)
        .collect();
    (!kept.is_empty()).then(|| kept.join(","))
}

/// The digest the previous tag keeps, if it has one.
pub(super) fn kept_previous<'s>(is: &'s ImageStream, previous_tag: &str) -> Option<&'s str> {
    is.current_digest(previous_tag)
}

/// Adds the previous tag to a served-tag patch: `previous_tag` pinned to `{is}@{digest}`,
/// hidden, and saying which served tag it keeps the previous digest of. It is hidden the way the
/// candidate tag is: always OpenShift's `hidden: "true"`, and Open Data Hub's
/// `opendatahub.io/image-tag-outdated: "true"` where the candidate tag carries it (ODH's
/// spawner lists every tag without it).
pub(super) fn keep_previous(
    patch: &mut Value,
    is: &ImageStream,
    tags: (&str, &str, &str),
    digest: &str,
) {
    let (candidate, served, previous_tag) = tags;
    let name = is.metadata.name.clone().unwrap_or_default();
    let mut annotations = json!({annotation::HIDDEN: "true", annotation::PREVIOUS_OF: served});
    let outdated = is
        .spec_tag(candidate)
        .and_then(|t| t.annotations.as_ref())
        .and_then(|a| a.get(annotation::ODH_OUTDATED))
        .is_some_and(|v| v == "true");
    if outdated {
        annotations[annotation::ODH_OUTDATED] = json!("true");
    }
    let tag = json!({
        "name": previous_tag,
        "annotations": annotations,
        "from": {
            "kind": "ImageStreamImage",
            "name": format!("{name}@{digest}"),
            "namespace": is.metadata.namespace,
        },
    });
    if let Some(tags) = patch["spec"]["tags"].as_array_mut() {
        tags.push(tag);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(s: &[&str]) -> Vec<String> {
        s.iter().map(|d| d.to_string()).collect()
    }

    #[test]
    fn the_rolled_back_list_keeps_each_digest_once_and_the_newest_ten() {
        assert_eq!(with_rolled_back(&[], "a"), "a");
        assert_eq!(with_rolled_back(&list(&["a", "b"]), "a"), "b,a");
        let many: Vec<String> = (0..ROLLED_BACK_KEPT).map(|i| format!("d{i}")).collect();
        let bounded = with_rolled_back(&many, "new");
        assert_eq!(bounded.split(',').count(), ROLLED_BACK_KEPT);
        assert!(
            bounded.starts_with("d1,") && bounded.ends_with(",new"),
            "{bounded}"
        );
        assert_eq!(
            without_rolled_back(&list(&["a", "b"]), "a").as_deref(),
            Some("b")
        );
        assert_eq!(without_rolled_back(&list(&["a"]), "a"), None);
    }
}
