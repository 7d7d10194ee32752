//! Which tags a push concerns: the candidate tags of governed streams (every ImageStream an
//! ImagePromotion gates, [`crate::controller::policy::gates`]) whose `from` is a `DockerImage`
//! pull spec naming the pushed registry, repository and tag. Pure. Nothing else is imported on a
//! push: not an ungoverned stream, not a served tag, not a tag pinned by digest.

use oci_client::Reference;

use crate::api::ImageStream;
use crate::api::imagestream::KIND_DOCKER_IMAGE;
use crate::controller::crd::ImagePromotion;
use crate::controller::policy;

use super::wire::Push;

/// A candidate tag to import now.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct Target {
    /// The stream's namespace.
    pub(crate) namespace: String,
    /// The stream.
    pub(crate) stream: String,
    /// The candidate tag.
    pub(crate) tag: String,
}

/// `registry/repository:tag` of a pull spec as clients name it (`docker.io/library/x` for `x`);
/// None for a pull spec by digest or one that does not parse.
fn named_tag(pull_spec: &str) -> Option<Push> {
    let r: Reference = pull_spec.parse().ok()?;
    if r.digest().is_some() {
        return None;
    }
    Some(Push {
        registry: super::wire::canonical_registry(r.registry()),
        repository: r.repository().to_string(),
        tag: r.tag()?.to_string(),
    })
}

/// The candidate tags `pushes` concern, each once, sorted.
pub(crate) fn of(
    pushes: &[Push],
    promotions: &[ImagePromotion],
    streams: &[ImageStream],
) -> Vec<Target> {
    let mut found = Vec::new();
    for stream in streams {
        let ns = stream.metadata.namespace.as_deref().unwrap_or_default();
        let name = stream.metadata.name.as_deref().unwrap_or_default();
        for p in promotions {
            let p_ns = p.metadata.namespace.as_deref().unwrap_or_default();
            if p_ns != ns || !policy::gates(&p.spec, ns, stream) {
                continue;
            }
            let tag = p.spec.candidate_tag_or_default();
            let from = stream
                .spec_tag(tag)
                .and_then(|t| t.from.as_ref())
                .filter(|f| f.kind.as_deref() == Some(KIND_DOCKER_IMAGE))
                .and_then(|f| f.name.as_deref())
                .and_then(named_tag);
            if from.is_some_and(|f| pushes.contains(&f)) {
                found.push(Target {
                    namespace: ns.to_string(),
                    stream: name.to_string(),
                    tag: tag.to_string(),
                });
            }
        }
    }
    found.sort();
    found.dedup();
    found
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn promotion(ns: &str, spec: serde_json::Value) -> ImagePromotion {
        serde_json::from_value(json!({
            "apiVersion": "imagegate.dev/v1alpha1", "kind": "ImagePromotion",
            "metadata": {"name": "p", "namespace": ns}, "spec": spec
        }))
        .unwrap()
    }

    fn stream(ns: &str, name: &str, tags: serde_json::Value) -> ImageStream {
        serde_json::from_value(json!({
            "apiVersion": "image.openshift.io/v1", "kind": "ImageStream",
            "metadata": {"name": name, "namespace": ns}, "spec": {"tags": tags}
        }))
        .unwrap()
    }

    fn push(registry: &str, repository: &str, tag: &str) -> Push {
        Push {
            registry: registry.into(),
            repository: repository.into(),
            tag: tag.into(),
        }
    }

    fn docker(name: &str) -> serde_json::Value {
        json!({"kind": "DockerImage", "name": name})
    }

    #[test]
    fn only_governed_candidate_tags_importing_the_pushed_tag_are_imported() {
        let streams = [
            stream(
                "ds",
                "nb",
                json!([{"name": "candidate", "from": docker("r.example:5000/org/nb:2026.1")},
                                      {"name": "latest", "from": docker("r.example:5000/org/nb:2026.1")}]),
            ),
            stream(
                "ds",
                "other-tag",
                json!([{"name": "candidate", "from": docker("r.example:5000/org/nb:2025.2")}]),
            ),
            stream(
                "ds",
                "pinned",
                json!([{"name": "candidate", "from": docker("r.example:5000/org/nb@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef")}]),
            ),
            stream(
                "ds",
                "no-candidate",
                json!([{"name": "latest", "from": docker("r.example:5000/org/nb:2026.1")}]),
            ),
            stream(
                "free",
                "nb",
                json!([{"name": "candidate", "from": docker("r.example:5000/org/nb:2026.1")}]),
            ),
            stream(
                "ds",
                "custom",
                json!([{"name": "next", "from": docker("R.Example:5000/org/nb:2026.1")}]),
            ),
        ];
        let promotions = [
            promotion("ds", json!({})),
            promotion(
                "ds",
                json!({"imageStream": "custom", "candidateTag": "next"}),
            ),
        ];
        let pushes = [push("r.example:5000", "org/nb", "2026.1")];
        let got = of(&pushes, &promotions, &streams);
        let names: Vec<String> = got
            .iter()
            .map(|t| format!("{}/{}:{}", t.namespace, t.stream, t.tag))
            .collect();
        assert_eq!(names, ["ds/custom:next", "ds/nb:candidate"]);
    }

    #[test]
    fn docker_hub_names_are_compared_as_clients_name_them() {
        let streams = [stream(
            "ds",
            "py",
            json!([{"name": "candidate", "from": docker("python:3.12")}]),
        )];
        let promotions = [promotion("ds", json!({}))];
        let pushes = [push("docker.io", "library/python", "3.12")];
        assert_eq!(of(&pushes, &promotions, &streams).len(), 1);
        let elsewhere = [push("quay.io", "library/python", "3.12")];
        assert!(of(&elsewhere, &promotions, &streams).is_empty());
    }
}
