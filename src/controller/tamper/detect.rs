//! What a tampered tag is, and the one write that answers it. Pure: over the ImageStream as read.
//!
//! Every write of the gate that moves a tag (a promotion, a rollback, the previous tag it keeps)
//! records the digest it pinned in the tag's `imagegate.dev/served-digest`, in the same patch. A
//! tag whose `from` pins anything else (another digest, or a tag, which is no pin at all) was moved
//! by someone else: an `oc tag` by an editor, a GitOps sync, a script. The gate either reports it
//! (phase `Tampered` on the tag, the digest found remembered in `imagegate.dev/tampered-digest` so
//! that it is reported once), or puts the tag back to the digest it served.

use serde_json::{Value, json};

use crate::api::ImageStream;
use crate::api::imagestream::digest_from_reference;
use crate::controller::decide::annotation;
use crate::controller::status::phase;

/// A tag found pinned to something other than what the gate served.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Tamper {
    /// The tag.
    pub tag: String,
    /// The digest the gate served on it (`imagegate.dev/served-digest`).
    pub expected: String,
    /// What its `from` names now (`<is>@<digest>`, `<repo>@<digest>`, or a tag).
    pub found: String,
    /// Whether this tamper was already reported (phase `Tampered` for exactly `found`).
    pub reported: bool,
}

impl Tamper {
    /// A line for the message, the Event and the log.
    pub(crate) fn describe(&self, stream: &str) -> String {
        format!(
            "{stream}:{} was moved to {} outside the gate (the gate served {})",
            self.tag, self.found, self.expected
        )
    }
}

/// Every tag of `is` the gate served that now points elsewhere.
pub(crate) fn find(is: &ImageStream) -> Vec<Tamper> {
    is.spec
        .tags
        .iter()
        .filter_map(|t| {
            let annotations = t.annotations.as_ref()?;
            let expected = annotations.get(annotation::SERVED_DIGEST)?;
            let found = t
                .from
                .as_ref()
                .and_then(|f| f.name.clone())
                .unwrap_or_default();
            if digest_from_reference(&found) == Some(expected.as_str()) {
                return None;
            }
            let reported = annotations.get(annotation::PHASE).map(String::as_str)
                == Some(phase::TAMPERED)
                && annotations.get(annotation::TAMPERED_DIGEST) == Some(&found);
            Some(Tamper {
                tag: t.name.clone(),
                expected: expected.clone(),
                found,
                reported,
            })
        })
        .collect()
}

/// The patch that reports `t`: phase `Tampered`, the message, and the pin found; conditional on
/// the resourceVersion read. The tag keeps what it was moved to.
pub(crate) fn report(is: &ImageStream, t: &Tamper) -> Value {
    let stream = is.metadata.name.clone().unwrap_or_default();
    let message = format!(
        "{}; reported, not undone: promote or roll back through the gate, or set \
         onTamper: Revert on the ImagePromotion",
        t.describe(&stream)
    );
    write(
        is,
        &t.tag,
        json!({
            annotation::PHASE: phase::TAMPERED,
            annotation::MESSAGE: message,
            annotation::TAMPERED_DIGEST: t.found,
        }),
        None,
    )
}

/// The patch that undoes `t`: the tag pinned to the digest the gate served again (as
/// `oc tag` pins: ImageStreamImage `<is>@<digest>`), the message saying what was undone.
pub(crate) fn revert(is: &ImageStream, t: &Tamper) -> Value {
    let stream = is.metadata.name.clone().unwrap_or_default();
    let message = format!("{}; put back to {}", t.describe(&stream), t.expected);
    let from = json!({
        "kind": "ImageStreamImage",
        "name": format!("{stream}@{}", t.expected),
        "namespace": is.metadata.namespace,
    });
    write(
        is,
        &t.tag,
        json!({annotation::MESSAGE: message, annotation::TAMPERED_DIGEST: null}),
        Some(from),
    )
}

fn write(is: &ImageStream, tag: &str, annotations: Value, from: Option<Value>) -> Value {
    let mut t = json!({"name": tag, "annotations": annotations});
    if let Some(from) = from {
        t["from"] = from;
    }
    json!({
        "metadata": {"resourceVersion": is.metadata.resource_version},
        "spec": {"tags": [t]},
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    const B: &str = "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

    fn stream(tags: Value) -> ImageStream {
        serde_json::from_value(json!({
            "apiVersion": "image.openshift.io/v1", "kind": "ImageStream",
            "metadata": {"name": "nb", "namespace": "ds", "resourceVersion": "7"},
            "spec": {"tags": tags}
        }))
        .unwrap()
    }

    fn tag(name: &str, from: Value, annotations: Value) -> Value {
        json!({"name": name, "from": from, "annotations": annotations})
    }

    fn isimage(d: &str) -> Value {
        json!({"kind": "ImageStreamImage", "name": format!("nb@{d}")})
    }

    #[test]
    fn a_tag_the_gate_pinned_elsewhere_is_tampered_and_one_it_never_served_is_not() {
        let served = json!({annotation::SERVED_DIGEST: A, annotation::PHASE: "Promoted"});
        let is = stream(json!([
            tag("latest", isimage(B), served.clone()),
            tag("same", isimage(A), served.clone()),
            tag(
                "docker",
                json!({"kind": "DockerImage", "name": format!("quay.io/org/nb@{A}")}),
                served.clone()
            ),
            tag(
                "by-tag",
                json!({"kind": "ImageStreamTag", "name": "nb:candidate"}),
                served
            ),
            tag(
                "candidate",
                json!({"kind": "DockerImage", "name": "quay.io/org/nb:latest"}),
                json!(null)
            ),
            tag("hand-made", isimage(B), json!({"other": "x"})),
        ]));
        let found = find(&is);
        let names: Vec<(&str, &str)> = found
            .iter()
            .map(|t| (t.tag.as_str(), t.found.as_str()))
            .collect();
        assert_eq!(
            names,
            [("latest", &*format!("nb@{B}")), ("by-tag", "nb:candidate")]
        );
        assert!(found.iter().all(|t| t.expected == A && !t.reported));
    }

    #[test]
    fn a_reported_tamper_is_reported_once_and_a_new_one_again() {
        let reported = json!({
            annotation::SERVED_DIGEST: A, annotation::PHASE: phase::TAMPERED,
            annotation::TAMPERED_DIGEST: format!("nb@{B}")
        });
        let is = stream(json!([tag("latest", isimage(B), reported.clone())]));
        assert!(find(&is)[0].reported);
        let moved_again = stream(json!([tag(
            "latest",
            json!({"kind": "ImageStreamImage", "name": "nb@sha256:cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc"}),
            reported
        )]));
        assert!(!find(&moved_again)[0].reported);
    }

    #[test]
    fn the_report_marks_the_tag_and_the_revert_pins_it_back_conditionally() {
        let is = stream(json!([tag(
            "latest",
            isimage(B),
            json!({annotation::SERVED_DIGEST: A})
        )]));
        let t = &find(&is)[0];
        let r = report(&is, t);
        assert_eq!(r["metadata"]["resourceVersion"], "7");
        let annotations = &r["spec"]["tags"][0]["annotations"];
        assert_eq!(annotations[annotation::PHASE], "Tampered");
        assert_eq!(annotations[annotation::TAMPERED_DIGEST], format!("nb@{B}"));
        assert!(
            annotations[annotation::MESSAGE]
                .as_str()
                .unwrap()
                .starts_with(&format!(
                    "nb:latest was moved to nb@{B} outside the gate (the gate served {A})"
                )),
            "{annotations}"
        );
        assert!(
            r["spec"]["tags"][0].get("from").is_none(),
            "reported, not moved"
        );
        let v = revert(&is, t);
        assert_eq!(v["metadata"]["resourceVersion"], "7");
        assert_eq!(
            v["spec"]["tags"][0]["from"],
            json!({"kind": "ImageStreamImage", "name": format!("nb@{A}"), "namespace": "ds"})
        );
        assert_eq!(
            v["spec"]["tags"][0]["annotations"][annotation::TAMPERED_DIGEST],
            Value::Null
        );
    }
}
