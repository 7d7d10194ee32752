//! The upstream registries an `ImageStreamImport` reads from: what each pull spec resolves to
//! now. A real import asks the registry named in `from` for the manifest behind a tag; here the
//! answers are what the tests (control API `POST registry`), the simulated scheduled imports
//! (`POST .../import`, `.../importfailure`: the registry served that digest, or refused) and
//! seeded ImageStreams (the digest last imported for each `DockerImage` tag) recorded.
//!
//! A reference by digest (`repo@sha256:…`) always resolves to that digest, as a registry serves
//! any manifest it holds by its digest; a tag nobody recorded is `NotFound`, with the message
//! openshift-apiserver's importer gives (`formatRepositoryError`).

use std::collections::BTreeMap;
use std::sync::Mutex;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// What a pull spec resolves to.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", untagged)]
pub enum Answer {
    /// The registry serves this image.
    Image {
        /// The manifest digest (`sha256:…`).
        digest: String,
        /// `dockerImageMetadata` of the Image (merged over defaults on first import).
        #[serde(
            default,
            rename = "dockerImageMetadata",
            skip_serializing_if = "Option::is_none"
        )]
        metadata: Option<Value>,
    },
    /// Read from a real registry ([`crate::pull`]): the digest imported and the Image objects
    /// the import creates, the imported one first. Never recorded, so never read or listed by
    /// the control API.
    #[serde(skip)]
    Pulled {
        /// The manifest digest (`sha256:…`).
        digest: String,
        /// The Images, as [`crate::pull::Pulled`] has them.
        images: Vec<Value>,
    },
    /// The registry refuses: `NotFound`, `Unauthorized` or `InternalError`.
    Failure {
        /// The failure: the reason as the importer classifies it, and its message.
        failure: Failure,
    },
}

/// A refusal as the importer reports it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Failure {
    /// `NotFound`, `Unauthorized` or `InternalError`.
    pub reason: String,
    /// The status message.
    pub message: String,
}

impl Failure {
    /// A failure of `reason` for `pull_spec`, with the importer's message unless one is given.
    pub fn new(reason: &str, pull_spec: &str, message: Option<&str>) -> Failure {
        let message = message
            .map(str::to_string)
            .unwrap_or_else(|| default_message(reason, pull_spec));
        Failure {
            reason: reason.to_string(),
            message,
        }
    }

    /// The HTTP code of the per-image `metav1.Status` (`imageImportStatus`).
    pub fn code(&self) -> u16 {
        match self.reason.as_str() {
            "NotFound" => 404,
            "Unauthorized" => 401,
            _ => 500,
        }
    }
}

/// The importer's message for a refusal (openshift-apiserver `importer.go`).
pub fn default_message(reason: &str, pull_spec: &str) -> String {
    match reason {
        "NotFound" => format!("dockerimage.image.openshift.io \"{pull_spec}\" not found"),
        "Unauthorized" => {
            format!("you may not have access to the container image \"{pull_spec}\"")
        }
        _ => format!("Internal error occurred: {pull_spec}: unknown error"),
    }
}

/// Whether `s` is `sha256:` and 64 lowercase hex digits.
pub fn is_digest(s: &str) -> bool {
    s.strip_prefix("sha256:").is_some_and(|hex| {
        hex.len() == 64
            && hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

/// For each `DockerImage` spec tag of a stream with a history: its `from` pull spec and the
/// digest the last import found there (`status.tags[tag].items[0].image`).
pub fn last_imported(stream: &Value) -> Vec<(String, String)> {
    let tags = stream.pointer("/spec/tags").and_then(Value::as_array);
    let history = |tag: &str| {
        stream
            .pointer("/status/tags")
            .and_then(Value::as_array)?
            .iter()
            .find(|s| s.get("tag").and_then(Value::as_str) == Some(tag))?
            .pointer("/items/0/image")
            .and_then(Value::as_str)
            .filter(|d| !d.is_empty())
            .map(str::to_string)
    };
    tags.into_iter()
        .flatten()
        .filter(|t| t.pointer("/from/kind").and_then(Value::as_str) == Some("DockerImage"))
        .filter_map(|t| {
            let from = t.pointer("/from/name").and_then(Value::as_str)?;
            let digest = history(t.get("name").and_then(Value::as_str)?)?;
            Some((from.to_string(), digest))
        })
        .collect()
}

/// The digest a by-digest pull spec names (`quay.io/org/nb@sha256:…`).
fn digest_of(pull_spec: &str) -> Option<&str> {
    pull_spec
        .rsplit_once('@')
        .map(|(_, d)| d)
        .filter(|d| d.starts_with("sha256:"))
}

/// The answers of every upstream registry, by pull spec.
#[derive(Debug, Default)]
pub struct Upstream {
    answers: Mutex<BTreeMap<String, Answer>>,
}

impl Upstream {
    /// Records what `pull_spec` resolves to from now on.
    pub fn set(&self, pull_spec: &str, answer: Answer) {
        self.lock().insert(pull_spec.to_string(), answer);
    }

    /// Records `answer` only when nothing is recorded for `pull_spec` yet.
    pub fn set_if_unknown(&self, pull_spec: &str, answer: Answer) {
        self.lock().entry(pull_spec.to_string()).or_insert(answer);
    }

    /// What `pull_spec` resolves to now.
    pub fn resolve(&self, pull_spec: &str) -> Answer {
        if let Some(a) = self.lock().get(pull_spec) {
            return a.clone();
        }
        match digest_of(pull_spec) {
            Some(digest) => Answer::Image {
                digest: digest.to_string(),
                metadata: None,
            },
            None => Answer::Failure {
                failure: Failure::new("NotFound", pull_spec, None),
            },
        }
    }

    /// Every recorded answer, by pull spec.
    pub fn all(&self) -> BTreeMap<String, Answer> {
        self.lock().clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Answer>> {
        self.answers.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";

    #[test]
    fn an_unknown_tag_is_not_found_with_the_importers_message() {
        let u = Upstream::default();
        assert_eq!(
            u.resolve("quay.io/org/nb:latest"),
            Answer::Failure {
                failure: Failure {
                    reason: "NotFound".into(),
                    message: "dockerimage.image.openshift.io \"quay.io/org/nb:latest\" not found"
                        .into()
                }
            }
        );
    }

    #[test]
    fn a_reference_by_digest_resolves_to_its_digest() {
        let u = Upstream::default();
        assert_eq!(
            u.resolve(&format!("quay.io/org/nb@{A}")),
            Answer::Image {
                digest: A.into(),
                metadata: None
            }
        );
    }

    #[test]
    fn the_last_answer_recorded_wins_and_set_if_unknown_keeps_it() {
        let u = Upstream::default();
        let served = Answer::Image {
            digest: A.into(),
            metadata: None,
        };
        u.set("quay.io/org/nb:latest", served.clone());
        u.set_if_unknown(
            "quay.io/org/nb:latest",
            Answer::Failure {
                failure: Failure::new("InternalError", "quay.io/org/nb:latest", None),
            },
        );
        assert_eq!(u.resolve("quay.io/org/nb:latest"), served);
    }

    #[test]
    fn a_stream_tells_what_each_imported_tag_last_found() {
        let stream = serde_json::json!({
            "spec": {"tags": [
                {"name": "candidate", "from": {"kind": "DockerImage", "name": "quay.io/org/nb:latest"}},
                {"name": "never", "from": {"kind": "DockerImage", "name": "quay.io/org/nb:next"}},
                {"name": "latest", "from": {"kind": "ImageStreamImage", "name": format!("nb@{A}")}}]},
            "status": {"tags": [
                {"tag": "candidate", "items": [{"image": A}]},
                {"tag": "never", "items": null},
                {"tag": "latest", "items": [{"image": A}]}]}
        });
        assert_eq!(
            last_imported(&stream),
            [("quay.io/org/nb:latest".to_string(), A.to_string())]
        );
        assert!(is_digest(A) && !is_digest("sha256:ABC"));
    }

    #[test]
    fn answers_read_from_json_as_the_control_api_takes_them() {
        let image: Answer = serde_json::from_str(&format!(r#"{{"digest": "{A}"}}"#)).unwrap();
        assert!(matches!(image, Answer::Image { .. }));
        let refused: Answer =
            serde_json::from_str(r#"{"failure": {"reason": "Unauthorized", "message": "m"}}"#)
                .unwrap();
        assert_eq!(
            refused,
            Answer::Failure {
                failure: Failure {
                    reason: "Unauthorized".into(),
                    message: "m".into()
                }
            }
        );
    }
}
