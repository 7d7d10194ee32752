//! `image.openshift.io/v1` ImageStreamImport (create only): import images into a stream now,
//! what `oc import-image` sends and what the scheduled import sends every 15 minutes. The answer
//! is the request with `status.images[]` (one per requested image: a `metav1.Status` of
//! `Success` or `Failure`, the tag, and the Image on success) and, with `spec.import: true`,
//! `status.import`, the stream after the import. Nothing is stored.
//!
//! Field shapes follow openshift/api `image/v1/types.go` (`ImageStreamImport`,
//! `ImageImportSpec`, `ImageImportStatus`); only the fields imagegate uses.

use k8s_openapi::api::core::v1::{LocalObjectReference, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::core::NamespaceResourceScope;
use serde::ser::SerializeStruct;
use serde::{Deserialize, Serialize, Serializer};

use super::image::Image;
use super::imagestream::{ImageStream, TagImportPolicy, TagReferencePolicy};
use super::null_as_default;

/// An ImageStreamImport: named like the stream it imports into.
#[derive(Deserialize, Clone, Debug, Default, PartialEq)]
pub struct ImageStreamImport {
    /// Name (the stream's) and namespace.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// What to import.
    #[serde(default)]
    pub spec: ImageStreamImportSpec,
    /// What the import found (only in the server's answer).
    #[serde(default)]
    pub status: Option<ImageStreamImportStatus>,
}

static_resource!(ImageStreamImport, group: "image.openshift.io", version: "v1",
    kind: "ImageStreamImport", plural: "imagestreamimports", scope: NamespaceResourceScope);

impl Serialize for ImageStreamImport {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use kube::Resource;
        let mut obj = serializer.serialize_struct("ImageStreamImport", 5)?;
        obj.serialize_field("apiVersion", &Self::api_version(&()))?;
        obj.serialize_field("kind", &Self::kind(&()))?;
        obj.serialize_field("metadata", &self.metadata)?;
        obj.serialize_field("spec", &self.spec)?;
        if let Some(status) = &self.status {
            obj.serialize_field("status", status)?;
        }
        obj.end()
    }
}

/// `spec` of an ImageStreamImport.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ImageStreamImportSpec {
    /// `true`: write what was found into the stream; `false`: only report it.
    #[serde(default, deserialize_with = "null_as_default")]
    pub import: bool,
    /// The images to import, each into one tag.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub images: Vec<ImageImportSpec>,
}

/// `spec.images[]`: import `from` into the tag `to`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ImageImportSpec {
    /// The source, `{kind: DockerImage, name: <pull spec>}`.
    pub from: ObjectReference,
    /// The tag to import into (`{name: <tag>}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<LocalObjectReference>,
    /// The tag's import policy (scheduled, insecure, importMode).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub import_policy: Option<TagImportPolicy>,
    /// The tag's reference policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference_policy: Option<TagReferencePolicy>,
}

/// `status` of an ImageStreamImport.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ImageStreamImportStatus {
    /// The stream after the import (with `spec.import: true`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub import: Option<ImageStream>,
    /// One entry per `spec.images[]`, in order.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub images: Vec<ImageImportStatus>,
}

/// `status.images[]`: how one image's import went.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ImageImportStatus {
    /// `status: Success`, or `Failure` with `reason` (`NotFound`, `Unauthorized`,
    /// `InternalError`), `message` and `code`.
    #[serde(default)]
    pub status: ImportResult,
    /// The Image found (on success).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<Image>,
    /// The tag imported into.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tag: Option<String>,
}

/// `status.images[].status`: a `metav1.Status` embedded without `kind` and `apiVersion` (which
/// k8s-openapi's `Status` requires), so modelled here with the fields read.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct ImportResult {
    /// `Success` or `Failure`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// Why it failed: `NotFound`, `Unauthorized`, `InternalError`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The importer's message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The HTTP code of the failure (404, 401, 500).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<i32>,
}

impl ImageImportStatus {
    /// Whether the image was imported (`status.status: Success`).
    pub(crate) fn succeeded(&self) -> bool {
        self.status.status.as_deref() == Some("Success")
    }

    /// The digest found (the Image's name), on success.
    pub(crate) fn digest(&self) -> Option<&str> {
        self.image.as_ref()?.metadata.name.as_deref()
    }
}
