//! `image.openshift.io/v1` ImageStream and its virtual views ImageStreamTag and ImageStreamImage.
//!
//! The source watches ImageStreams (ImageStreamTags cannot be watched: the server answers 405)
//! and reads the current digest of a tag from `status.tags[tag].items[0]`, newest first. The
//! promotion writes a spec tag whose `from` is an `ImageStreamImage` (`<stream>@sha256:…`).
//!
//! Field shapes follow openshift/api `image/v1/types.go`. Three Go fields have no `omitempty`
//! and are sent as `null` by real servers, so they are `Option`s that always serialize:
//! `TagReference.annotations`, `TagReference.generation` and `NamedTagEventList.items`
//! (`items: null` is what a tag whose first import failed looks like).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::core::NamespaceResourceScope;
use kube::{CustomResource, Resource};
use serde::ser::SerializeStruct;
use serde::{Deserialize, Serialize, Serializer};

use super::image::Image;
use super::{is_false, null_as_default};

/// `TagEventCondition.type` of the only condition the import controller writes.
pub const IMPORT_SUCCESS: &str = "ImportSuccess";
/// `from.kind` of a tag that imports from an external registry.
pub(crate) const KIND_DOCKER_IMAGE: &str = "DockerImage";
/// `from.kind` of a tag pinned to one image of a stream by digest (what a promotion writes).
pub(crate) const KIND_IMAGE_STREAM_IMAGE: &str = "ImageStreamImage";

/// Spec of an ImageStream; the derive generates [`ImageStream`] (shortname `is`).
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "image.openshift.io",
    version = "v1",
    kind = "ImageStream",
    plural = "imagestreams",
    shortname = "is",
    namespaced,
    status = "ImageStreamStatus",
    schema = "disabled",
    derive = "PartialEq",
    derive = "Default"
)]
#[serde(rename_all = "camelCase")]
pub struct ImageStreamSpec {
    /// Whether short references (`is:tag`) in this namespace resolve to the stream.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lookup_policy: Option<ImageLookupPolicy>,
    /// Deprecated since 3.7; kept because old streams still carry it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub docker_image_repository: Option<String>,
    /// Spec tags; the server returns them sorted by name.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub tags: Vec<TagReference>,
}

/// `spec.lookupPolicy`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ImageLookupPolicy {
    /// Rewrite short references in this namespace to the resolved image.
    #[serde(default, deserialize_with = "null_as_default")]
    pub local: bool,
}

/// One entry of `spec.tags`: what a tag should point at.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct TagReference {
    /// Tag name (the merge key of `spec.tags`).
    #[serde(default, deserialize_with = "null_as_default")]
    pub name: String,
    /// Annotations applied to images read through the tag. No `omitempty` in Go: `null` is
    /// the common value and is serialized back as `null`.
    #[serde(default)]
    pub annotations: Option<BTreeMap<String, String>>,
    /// Source: `DockerImage`, `ImageStreamTag` or `ImageStreamImage`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<ObjectReference>,
    /// `true`: the tag only references `from` and is never imported.
    #[serde(default, skip_serializing_if = "is_false")]
    pub reference: bool,
    /// Generation of the last spec change of this tag; `0` asks for a re-import. No
    /// `omitempty` in Go, so `null` is serialized.
    #[serde(default)]
    pub generation: Option<i64>,
    /// How and whether the tag is imported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub import_policy: Option<TagImportPolicy>,
    /// Which pull spec consumers get: `Source` (default) or `Local`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference_policy: Option<TagReferencePolicy>,
}

/// `spec.tags[].importPolicy`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct TagImportPolicy {
    /// Allow plain HTTP / unverified TLS to the source registry.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "is_false"
    )]
    pub insecure: bool,
    /// Re-import periodically (every 15 minutes by default on OCP 4).
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "is_false"
    )]
    pub scheduled: bool,
    /// `Legacy` (server default) or `PreserveOriginal` (keep manifest lists).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub import_mode: Option<String>,
}

/// `spec.tags[].referencePolicy`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct TagReferencePolicy {
    /// `Source` or `Local`.
    #[serde(rename = "type", default, deserialize_with = "null_as_default")]
    pub type_: String,
}

/// `status` of an ImageStream: the observed history of every tag.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ImageStreamStatus {
    /// Pull spec of the stream in the integrated registry (decorated on every read; `""` when
    /// the registry is not configured). No `omitempty` in Go.
    #[serde(default, deserialize_with = "null_as_default")]
    pub docker_image_repository: String,
    /// Pull spec through the registry's external route, when exposed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub public_docker_image_repository: Option<String>,
    /// Per-tag history; sorted by tag name. A tag removed from spec keeps its history here.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub tags: Vec<NamedTagEventList>,
}

/// `status.tags[]`: the history of one tag, newest first, and its import conditions.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct NamedTagEventList {
    /// Tag name (the merge key of `status.tags`).
    #[serde(default, deserialize_with = "null_as_default")]
    pub tag: String,
    /// History, newest first; `items[0]` is what the tag currently points at. `null` (not
    /// `[]`) when the tag never imported; no `omitempty` in Go, so serialized as `null`.
    #[serde(default)]
    pub items: Option<Vec<TagEvent>>,
    /// Import conditions; only `ImportSuccess=False` is ever written, and a success clears it.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub conditions: Vec<TagEventCondition>,
}

/// One point in a tag's history.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct TagEvent {
    /// When the tag started pointing at this image (Go zero time is sent as `null`).
    #[serde(default)]
    pub created: Option<Time>,
    /// Pull spec by digest, e.g. `quay.io/org/nb@sha256:…`.
    #[serde(default, deserialize_with = "null_as_default")]
    pub docker_image_reference: String,
    /// Image name = manifest digest (`sha256:…`); empty for `reference: true` tags.
    #[serde(default, deserialize_with = "null_as_default")]
    pub image: String,
    /// Stream generation at which this event was written.
    #[serde(default, deserialize_with = "null_as_default")]
    pub generation: i64,
}

/// A condition of a status tag; in practice `ImportSuccess=False` after a failed import.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct TagEventCondition {
    /// Always `ImportSuccess` ([`IMPORT_SUCCESS`]).
    #[serde(rename = "type", default, deserialize_with = "null_as_default")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    #[serde(default, deserialize_with = "null_as_default")]
    pub status: String,
    /// When the condition last changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
    /// Machine-readable cause: `NotFound`, `Unauthorized`, `InternalError`, …
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Human-readable cause, usually the registry's error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Stream generation of the failed import attempt.
    #[serde(default, deserialize_with = "null_as_default")]
    pub generation: i64,
}

/// Returns the digest (`sha256:…`) of a pull spec `repo@sha256:…`, if it has one.
pub fn digest_from_reference(reference: &str) -> Option<&str> {
    reference
        .rsplit_once('@')
        .map(|(_, digest)| digest)
        .filter(|digest| digest.contains(':'))
}

impl TagEvent {
    /// The image digest of this event: `image`, or else the digest of `dockerImageReference`.
    pub fn digest(&self) -> Option<&str> {
        if self.image.is_empty() {
            digest_from_reference(&self.docker_image_reference)
        } else {
            Some(&self.image)
        }
    }
}

impl TagEventCondition {
    /// Whether this is a failed import (`ImportSuccess=False`).
    pub(crate) fn is_import_failure(&self) -> bool {
        self.type_ == IMPORT_SUCCESS && self.status == "False"
    }
}

impl NamedTagEventList {
    /// The history, newest first; empty when `items` is `null`.
    pub(crate) fn history(&self) -> &[TagEvent] {
        self.items.as_deref().unwrap_or_default()
    }

    /// The event the tag currently points at (`items[0]`).
    pub fn current(&self) -> Option<&TagEvent> {
        self.history().first()
    }

    /// The digest the tag currently points at.
    pub(crate) fn current_digest(&self) -> Option<&str> {
        self.current().and_then(TagEvent::digest)
    }

    /// The `ImportSuccess=False` condition, if the last import of this tag failed.
    pub(crate) fn import_failure(&self) -> Option<&TagEventCondition> {
        self.conditions.iter().find(|c| c.is_import_failure())
    }
}

impl ImageStream {
    /// The spec tag called `name`.
    pub fn spec_tag(&self, name: &str) -> Option<&TagReference> {
        self.spec.tags.iter().find(|t| t.name == name)
    }

    /// The status (history and conditions) of the tag called `name`.
    pub fn status_tag(&self, name: &str) -> Option<&NamedTagEventList> {
        self.status.as_ref()?.tags.iter().find(|t| t.tag == name)
    }

    /// The history of `tag`, newest first; empty if the tag never imported.
    pub fn history(&self, tag: &str) -> &[TagEvent] {
        self.status_tag(tag)
            .map(NamedTagEventList::history)
            .unwrap_or_default()
    }

    /// The digest `tag` currently points at: `items[0].image`, falling back to the digest in
    /// `items[0].dockerImageReference`. `None` if the tag has no history.
    pub fn current_digest(&self, tag: &str) -> Option<&str> {
        self.status_tag(tag)?.current_digest()
    }

    /// The `ImportSuccess=False` condition of `tag`, if its last import failed. The history
    /// (and so [`Self::current_digest`]) is kept when an import fails.
    pub fn import_failure(&self, tag: &str) -> Option<&TagEventCondition> {
        self.status_tag(tag)?.import_failure()
    }
}

/// ImageStreamTag (`istag`, virtual): one tag of a stream, composed by the server from the
/// stream and the Image. Get/list/create/update/patch/delete; no watch.
#[derive(Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ImageStreamTag {
    /// Name `<stream>:<tag>`; namespace, uid, labels and resourceVersion are the stream's.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// Copy of the spec tag; `null` for a tag that exists only in status (pushed).
    #[serde(default)]
    pub tag: Option<TagReference>,
    /// `items[0].generation` (not the spec tag's generation: if that is ahead, an import is
    /// pending or failed, see `conditions`).
    #[serde(default, deserialize_with = "null_as_default")]
    pub generation: i64,
    /// The stream's lookup policy.
    #[serde(default)]
    pub lookup_policy: Option<ImageLookupPolicy>,
    /// The status tag's conditions.
    #[serde(default, deserialize_with = "null_as_default")]
    pub conditions: Vec<TagEventCondition>,
    /// The Image `items[0]` points at, with the reference rewritten by the reference policy.
    #[serde(default, deserialize_with = "null_as_default")]
    pub image: Image,
}

static_resource!(ImageStreamTag, group: "image.openshift.io", version: "v1",
    kind: "ImageStreamTag", plural: "imagestreamtags", scope: NamespaceResourceScope);

// Serialized by hand so that apiVersion and kind are always sent (like the derived and
// k8s-openapi types): an ImageStreamTag is also a PUT body.
impl Serialize for ImageStreamTag {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut obj = serializer.serialize_struct("ImageStreamTag", 8)?;
        obj.serialize_field("apiVersion", &Self::api_version(&()))?;
        obj.serialize_field("kind", &Self::kind(&()))?;
        obj.serialize_field("metadata", &self.metadata)?;
        obj.serialize_field("tag", &self.tag)?;
        obj.serialize_field("generation", &self.generation)?;
        if let Some(lookup_policy) = &self.lookup_policy {
            obj.serialize_field("lookupPolicy", lookup_policy)?;
        }
        if !self.conditions.is_empty() {
            obj.serialize_field("conditions", &self.conditions)?;
        }
        obj.serialize_field("image", &self.image)?;
        obj.end()
    }
}

impl ImageStreamTag {
    /// The object name of tag `tag` of stream `stream`: `<stream>:<tag>`.
    pub fn name_for(stream: &str, tag: &str) -> String {
        format!("{stream}:{tag}")
    }

    /// Splits the object name into `(stream, tag)`.
    pub fn stream_and_tag(&self) -> Option<(&str, &str)> {
        self.metadata.name.as_deref()?.split_once(':')
    }
}

/// ImageStreamImage (`isimage`, virtual, get only): one image of a stream by digest, found in
/// any tag's history.
#[derive(Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ImageStreamImage {
    /// Name `<stream>@<digest>`.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// The Image.
    #[serde(default, deserialize_with = "null_as_default")]
    pub image: Image,
}

static_resource!(ImageStreamImage, group: "image.openshift.io", version: "v1",
    kind: "ImageStreamImage", plural: "imagestreamimages", scope: NamespaceResourceScope);

impl Serialize for ImageStreamImage {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut obj = serializer.serialize_struct("ImageStreamImage", 4)?;
        obj.serialize_field("apiVersion", &Self::api_version(&()))?;
        obj.serialize_field("kind", &Self::kind(&()))?;
        obj.serialize_field("metadata", &self.metadata)?;
        obj.serialize_field("image", &self.image)?;
        obj.end()
    }
}

impl ImageStreamImage {
    /// The object name of the image `digest` in stream `stream`: `<stream>@<digest>`; also the
    /// `from.name` of a tag pinned to that image.
    pub fn name_for(stream: &str, digest: &str) -> String {
        format!("{stream}@{digest}")
    }
}
