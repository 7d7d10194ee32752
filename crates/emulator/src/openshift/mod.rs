//! OpenShift ImageStream behaviour for the emulator, as pure functions over JSON values.
//!
//! openshift-apiserver computes much of an ImageStream on the server: defaults, generations,
//! the tag history, and the virtual `imagestreamtags` / `imagestreamimages` views. This module
//! reproduces those rules (openshift/openshift-apiserver `pkg/image/apiserver`, cited per
//! function) without I/O: the store passes the committed objects in and writes what comes out.
//!
//! - [`model`](self::model): a typed model of `spec.tags` / `status.tags` that keeps every other
//!   field of the object as it came, and Go's semantic equality over JSON values.
//! - [`reference`](self::reference): container image references (`DockerRef`) and tag names.
//! - [`tagevents`](self::tagevents): the tag history (`AddTagEventToImageStream`,
//!   `ResolveImageID`, `UpdateTrackingTags`) and `tagsChanged`, which resolves spec tags that
//!   point inside the cluster into TagEvents.
//! - [`strategy`](self::strategy): writes to `imagestreams` and `imagestreams/status`
//!   (`Strategy`, `StatusStrategy`, `InternalStrategy`) and their validation.
//! - [`import`](self::import): what an `ImageStreamImport` writes after a (scheduled) import.
//! - [`stream_import`](self::stream_import): the `ImageStreamImport` request (which tags from
//!   where) and its per-image answer.
//! - [`views`](self::views): the ImageStreamTag and ImageStreamImage views and istag writes.
//!
//! This file holds the shared pieces: the constants, the error type and its field-error
//! wording, the settings, and the re-exports that keep every item at `openshift::<item>`.

mod import;
mod model;
mod pending;
mod reference;
mod strategy;
mod stream_import;
mod tagevents;
mod views;

use serde_json::Value;

pub(crate) use import::ImportSpec;
pub use import::{import_failed, import_spec_failed, import_spec_succeeded, import_succeeded};
pub(crate) use model::{
    NamedTagEventList, ObjectReference, Stream, TagEvent, TagEventCondition, TagImportPolicy,
    TagReference, TagReferencePolicy, from_json, section, semantic_eq, string_map, to_value,
};
pub use pending::{due_now, scheduled};
pub(crate) use reference::{DockerRef, digest_or_image_match, valid_tag};
pub use strategy::{decorate, prepare_create, prepare_status_update, prepare_update};
pub use stream_import::{default_images, image_failed, image_succeeded, requested_images};
pub use views::{
    IstagWrite, isimage_view, istag_delete, istag_list, istag_patch_base, istag_view, istag_write,
    istag_write_response, parse_istag_name,
};

/// `apiVersion` of every kind served here.
pub const API_VERSION: &str = "image.openshift.io/v1";
/// Stamped by every import that writes (openshift/api `image/v1/consts.go`).
pub const DOCKER_REPOSITORY_CHECK_ANNOTATION: &str = "openshift.io/image.dockerRepositoryCheck";
/// The only TagEventCondition type.
pub const IMPORT_SUCCESS: &str = "ImportSuccess";
/// The integrated registry's in-cluster hostname on OpenShift 4.
pub const DEFAULT_INTERNAL_REGISTRY: &str = "image-registry.openshift-image-registry.svc:5000";
/// The strategic-merge-patch list keys of ImageStream (`+patchMergeKey` in openshift/api):
/// dotted list path and the field that identifies an element.
pub const IMAGESTREAM_MERGE_KEYS: &[(&str, &str)] = &[
    ("spec.tags", "name"),
    ("status.tags", "tag"),
    ("status.tags.conditions", "type"),
];

/// A rejected write or read, mapped by the HTTP layer to a kube Status.
#[derive(Debug, thiserror::Error)]
pub enum StrategyError {
    /// 422 Invalid; the message is the field errors (`spec.tags[t].from.kind: Required value: …`,
    /// several as `[a, b]`), to follow `<Kind>.<group> "<name>" is invalid: ` in the Status.
    #[error("{0}")]
    Invalid(String),
    /// 404 NotFound.
    #[error("{0}")]
    NotFound(String),
    /// 400 BadRequest.
    #[error("{0}")]
    BadRequest(String),
    /// 409 Conflict.
    #[error("{0}")]
    Conflict(String),
    /// 409 AlreadyExists.
    #[error("{0}")]
    AlreadyExists(String),
}

/// Looks up an ImageStream by (namespace, name) in the store (already-committed state).
pub type StreamLookup<'a> = &'a dyn Fn(&str, &str) -> Option<Value>;

/// What the emulated cluster is configured with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Settings {
    /// Host of the integrated registry, e.g. `image-registry.openshift-image-registry.svc:5000`;
    /// empty means "no integrated registry" (status then mirrors `spec.dockerImageRepository`).
    pub internal_registry: String,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            internal_registry: DEFAULT_INTERNAL_REGISTRY.to_string(),
        }
    }
}

/// The field errors of a `NewInvalid`: one as is, several as `[a, b]` (the HTTP layer adds the
/// `<Kind>.<group> "<name>" is invalid: ` prefix).
pub(crate) fn invalid(errs: &[String]) -> StrategyError {
    StrategyError::Invalid(aggregate(errs))
}

pub(crate) fn aggregate(errs: &[String]) -> String {
    match errs {
        [one] => one.clone(),
        many => format!("[{}]", many.join(", ")),
    }
}

/// Field errors worded like `field.Error.Error()`.
pub(crate) mod field {
    pub fn invalid(path: &str, value: &str, detail: &str) -> String {
        format!("{path}: Invalid value: {value:?}: {detail}")
    }
    pub fn required(path: &str, detail: &str) -> String {
        if detail.is_empty() {
            format!("{path}: Required value")
        } else {
            format!("{path}: Required value: {detail}")
        }
    }
    pub fn not_found(path: &str, value: &str) -> String {
        format!("{path}: Not found: {value:?}")
    }
    pub fn unsupported(path: &str, value: &str, supported: &[&str]) -> String {
        let s: Vec<String> = supported.iter().map(|v| format!("{v:?}")).collect();
        format!(
            "{path}: Unsupported value: {value:?}: supported values: {}",
            s.join(", ")
        )
    }
}

#[cfg(test)]
pub(crate) mod testdata {
    //! Fixture loading shared by the tests of this module tree.
    use serde::Deserialize;
    use serde_json::Value;

    /// The workspace's `tests/fixtures/<name>` when present (the repository's copy of the
    /// reference objects), else the inline copy the test carries so the crate stands alone.
    pub fn fixture(name: &str, inline: &str) -> String {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/fixtures")
            .join(name);
        std::fs::read_to_string(path).unwrap_or_else(|_| inline.to_string())
    }

    /// Every document of a YAML stream; a JSON `{"object": …}` envelope is unwrapped.
    pub fn docs(text: &str) -> Vec<Value> {
        serde_norway::Deserializer::from_str(text)
            .map(|d| Value::deserialize(d).expect("fixture parses"))
            .filter(|v| !v.is_null())
            .map(|v| match v.get("object") {
                Some(o) if v.get("kind").is_none() => o.clone(),
                _ => v,
            })
            .collect()
    }

    pub fn doc(text: &str) -> Value {
        docs(text).into_iter().next().expect("one document")
    }

    /// The object without the fields the store (not the strategy) owns.
    pub fn without_rv(mut v: Value) -> Value {
        if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
            m.remove("resourceVersion");
        }
        v
    }
}
