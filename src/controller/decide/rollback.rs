//! The way back (rollback). At each promotion the digest served before is kept in a hidden spec tag, the
//! previous tag (`<served>-previous`), pinned as an ImageStreamImage by digest: pruning keeps the
//! images that tags point at, so the rollback target survives however short the served tag's
//! history is kept. Each rollback records the digest it left on the served tag
//! (`imagegate.dev/rolled-back-digests`), which a later `promote` refuses unless the run allows
//! it: re-running the pipeline of a bad build does not bring it back by accident. Each promotion
//! records the digest it served (`imagegate.dev/promoted-digests`, started with the one served
//! before the first promotion): a rollback returns only to one of those, never to a digest that
//! reached the tag some other way, and not to one rolled back unless the policy allows it.

use serde_json::{Value, json};

use crate::api::ImageStream;

use super::annotation;
use super::served::served_annotations;
use super::{PROMOTED_KEPT, ROLLED_BACK_KEPT};

/// The digests rolled back from the served tag, oldest first.
pub(super) fn rolled_back(is: &ImageStream, served: &str) -> Vec<String> {
    listed(is, served, annotation::ROLLED_BACK_DIGESTS)
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

/// The digest the previous tag keeps, if it has one and the gate wrote it for `served` (it
/// carries `imagegate.dev/previous-of: <served>`): a tag the run names as previous is no way
/// back unless the gate kept it.
pub(super) fn kept_previous<'s>(
    is: &'s ImageStream,
    previous_tag: &str,
    served: &str,
) -> Option<&'s str> {
    let of = is
        .spec_tag(previous_tag)?
        .annotations
        .as_ref()?
        .get(annotation::PREVIOUS_OF)?;
    (of == served)
        .then(|| is.current_digest(previous_tag))
        .flatten()
}

/// The digests listed in the served tag's annotation `key`, oldest first.
fn listed(is: &ImageStream, served: &str, key: &str) -> Vec<String> {
    served_annotations(is, served)
        .get(key)
        .map(|list| {
            list.split(',')
                .map(str::trim)
                .filter(|d| !d.is_empty())
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// The digests the gate served on the served tag, which a rollback may return to: its
/// `imagegate.dev/promoted-digests`. A tag the gate promoted before it kept that list has the
/// digest its last promotion or rollback left and the one its previous tag keeps; the tag's
/// history is never one of them (anyone with `oc tag` writes it).
pub(super) fn gate_served(is: &ImageStream, served: &str, previous_tag: &str) -> Vec<String> {
    let list = listed(is, served, annotation::PROMOTED_DIGESTS);
    if !list.is_empty() {
        return list;
    }
    let before = served_annotations(is, served).remove(annotation::PREVIOUS_DIGEST);
    let kept = kept_previous(is, previous_tag, served).map(str::to_string);
    before.into_iter().chain(kept).collect()
}

/// The promoted-digests list after a promotion of `digest` from `served_now`: the list (started
/// with the digest served before the gate's first promotion) with `digest` last, once, the
/// newest [`PROMOTED_KEPT`] kept.
pub(super) fn with_promoted(
    is: &ImageStream,
    served: &str,
    served_now: &str,
    digest: &str,
) -> String {
    let mut list = listed(is, served, annotation::PROMOTED_DIGESTS);
    if list.is_empty() && !served_now.is_empty() {
        list.push(served_now.to_string());
    }
    list.retain(|d| d != digest);
    list.push(digest.to_string());
    let skip = list.len().saturating_sub(PROMOTED_KEPT);
    list[skip..].join(",")
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
    let mut annotations = json!({
        annotation::HIDDEN: "true",
        annotation::PREVIOUS_OF: served,
        annotation::SERVED_DIGEST: digest,
    });
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
