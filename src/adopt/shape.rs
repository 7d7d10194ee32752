//! What kind of stream this is and which tag plays which role, read from the stream alone
//! (pure). The rules come from how Open Data Hub reads notebook streams
//! (`../shared/reference/notes/odh-notebook-images.md`): the dashboard judges a custom (BYON)
//! image by `spec.tags[0]`, and the API server returns `spec.tags` sorted by name; the operators
//! re-apply the tags of the streams they ship, so those are copied, never edited.

use serde_json::{Map, Value, json};

use super::names;
use crate::api::ImageStream;
use crate::controller::decide::annotation::ODH_OUTDATED;
use crate::controller::params::{DEFAULT_CANDIDATE_TAG, PREVIOUS_TAG_SUFFIX};

/// Who shapes the stream's tags, which decides how it is adopted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Shipped and re-applied by the Open Data Hub operator: adopted as a gated copy.
    Shipped,
    /// A dashboard-created custom image: judged by `spec.tags[0]`, adopted in place.
    Custom,
    /// Any other stream: adopted in place.
    Plain,
}

impl Kind {
    /// The kind of `is`.
    pub(crate) fn of(is: &ImageStream) -> Kind {
        let labels = &is.metadata.labels;
        let label = |k: &str| labels.as_ref().and_then(|l| l.get(k)).map(String::as_str);
        let (byon_key, byon_value) = names::BYON_CREATED_BY;
        if label(byon_key) == Some(byon_value) {
            return Kind::Custom;
        }
        let opted_out = label(names::ODH_MANAGED) == Some("false")
            || annotation(is, names::ODH_MANAGED) == Some("false");
        let operator = names::OPERATOR_LABELS
            .iter()
            .any(|&(k, v)| label(k) == Some(v));
        if operator && !opted_out {
            Kind::Shipped
        } else {
            Kind::Plain
        }
    }

    /// Whether the dashboard takes `spec.tags[0]` as the image (custom images).
    pub(crate) fn judged_by_first_tag(self) -> bool {
        self == Kind::Custom
    }
}

/// A stream annotation.
pub(crate) fn annotation<'a>(is: &'a ImageStream, key: &str) -> Option<&'a str> {
    is.metadata
        .annotations
        .as_ref()?
        .get(key)
        .map(String::as_str)
}

/// Whether adopt shaped this stream (it carries [`names::MANAGED_LABEL`]).
pub(crate) fn is_managed(is: &ImageStream) -> bool {
    is.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(names::MANAGED_LABEL))
        .is_some_and(|v| v == "true")
}

/// A tag annotation.
pub(crate) fn tag_annotation<'a>(is: &'a ImageStream, tag: &str, key: &str) -> Option<&'a str> {
    is.spec_tag(tag)?
        .annotations
        .as_ref()?
        .get(key)
        .map(String::as_str)
}

/// The served tag: the one asked for, the only tag, or the one tag Open Data Hub recommends.
pub(crate) fn served_tag(is: &ImageStream, asked: Option<&str>) -> Result<String, String> {
    let tags: Vec<&str> = is.spec.tags.iter().map(|t| t.name.as_str()).collect();
    if tags.is_empty() {
        return Err("it has no spec tags: there is nothing served to gate".into());
    }
    if let Some(asked) = asked {
        return if tags.contains(&asked) {
            Ok(asked.to_string())
        } else {
            Err(format!(
                "it has no tag {asked:?} (its tags: {})",
                tags.join(", ")
            ))
        };
    }
    if let [only] = tags.as_slice() {
        return Ok(only.to_string());
    }
    let recommended: Vec<&str> = tags
        .iter()
        .copied()
        .filter(|t| tag_annotation(is, t, names::ODH_RECOMMENDED) == Some("true"))
        .collect();
    match recommended.as_slice() {
        [one] => Ok(one.to_string()),
        _ => Err(format!(
            "several tags could be the served one ({}) and not exactly one is recommended \
             ({}: \"true\"); name it with --served-tag",
            tags.join(", "),
            names::ODH_RECOMMENDED
        )),
    }
}

/// The candidate tag's name: the one asked for, else `candidate`, else (for a stream judged by
/// `spec.tags[0]` whose served tag sorts after `candidate`, such as `latest`) `<served>-candidate`,
/// which always sorts right after the served tag. Refuses a name that would sort first where that
/// matters.
pub(crate) fn candidate_tag(
    kind: Kind,
    served: &str,
    asked: Option<&str>,
) -> Result<String, String> {
    let name = match asked {
        Some(asked) => asked.to_string(),
        None if !kind.judged_by_first_tag() || DEFAULT_CANDIDATE_TAG > served => {
            DEFAULT_CANDIDATE_TAG.to_string()
        }
        None => format!("{served}-candidate"),
    };
    if name == served {
        return Err(format!(
            "the candidate tag and the served tag are both {name:?}; they must differ"
        ));
    }
    if name == previous_tag(served) {
        return Err(format!(
            "the candidate tag {name:?} is the served tag's previous tag; name another"
        ));
    }
    if kind.judged_by_first_tag() && name.as_str() < served {
        return Err(format!(
            "the candidate tag {name:?} sorts before the served tag {served:?}, and the dashboard \
             judges a custom image by spec.tags[0] (the API sorts tags by name); name one that \
             sorts after it, such as \"{served}-candidate\""
        ));
    }
    Ok(name)
}

/// The previous tag the controller writes by default: `<served>-previous`.
pub(crate) fn previous_tag(served: &str) -> String {
    format!("{served}{PREVIOUS_TAG_SUFFIX}")
}

/// Whether a tag `from` is pinned to one image (an `ImageStreamImage`, or a pull spec by digest).
pub(crate) fn pinned_by_digest(from: Option<&Value>) -> bool {
    let Some(from) = from else { return false };
    let kind = from["kind"].as_str().unwrap_or_default();
    let name = from["name"].as_str().unwrap_or_default();
    kind == "ImageStreamImage" || (kind == "DockerImage" && name.contains("@sha256:"))
}

/// The tags that show the stream was gated by other means than adopt (by hand, or by an
/// older shape): a tag with imagegate's candidate role or previous-of mark, or a served tag
/// with an imagegate phase.
pub(crate) fn gated_by_hand(is: &ImageStream) -> Option<String> {
    use crate::controller::decide::annotation::{PHASE, PREVIOUS_OF};
    is.spec.tags.iter().find_map(|t| {
        let a = t.annotations.as_ref()?;
        let mark = [names::ROLE, PREVIOUS_OF, PHASE]
            .into_iter()
            .find(|k| a.contains_key(*k))?;
        Some(format!("tag {:?} carries {mark}", t.name))
    })
}

/// The spec tag `name` of a stream as JSON (every field the server sent, known to us or not).
pub(crate) fn tag_value<'a>(stream: &'a Value, name: &str) -> Option<&'a Value> {
    stream["spec"]["tags"]
        .as_array()?
        .iter()
        .find(|t| t["name"] == name)
}

/// Replaces (or adds) the spec tag `tag["name"]`, keeping `spec.tags` sorted by name as the API
/// server returns it.
pub(crate) fn put_tag(stream: &mut Value, tag: Value) {
    let spec = object(stream, "spec");
    let tags = spec.entry("tags").or_insert_with(|| json!([]));
    if !tags.is_array() {
        *tags = json!([]);
    }
    let list = tags.as_array_mut().expect("made an array above");
    list.retain(|t| t["name"] != tag["name"]);
    list.push(tag);
    list.sort_by(|a, b| {
        let name = |t: &Value| t["name"].as_str().unwrap_or_default().to_string();
        name(a).cmp(&name(b))
    });
}

/// Sets `key: value` in the map `field` (`labels`, `annotations`) of `obj` (an object or its
/// `metadata`), creating the map when it is missing or `null`.
pub(crate) fn set_entry(obj: &mut Value, field: &str, key: &str, value: &str) {
    let map = object(obj, field);
    map.insert(key.to_string(), Value::String(value.to_string()));
}

/// The object at `obj[key]`, created when missing or `null`.
pub(crate) fn object<'a>(obj: &'a mut Value, key: &str) -> &'a mut Map<String, Value> {
    if !obj.is_object() {
        *obj = json!({});
    }
    let slot = obj
        .as_object_mut()
        .expect("made an object above")
        .entry(key)
        .or_insert_with(|| json!({}));
    if !slot.is_object() {
        *slot = json!({});
    }
    slot.as_object_mut().expect("made an object above")
}

/// The annotations a hidden tag (the candidate, the previous tag) carries: OpenShift's `hidden`
/// and Open Data Hub's outdated mark, so no console or spawner offers it.
pub(crate) fn hide_tag(tag: &mut Value) {
    use crate::controller::decide::annotation::HIDDEN;
    set_entry(tag, "annotations", HIDDEN, "true");
    set_entry(tag, "annotations", ODH_OUTDATED, "true");
}

#[cfg(test)]
mod tests {
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
}
