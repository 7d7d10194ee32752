//! `image.openshift.io/v1` Image: the cluster-scoped record of one manifest, named by its digest.
//!
//! The checks read the image's labels, user, architecture, creation time and size from
//! `dockerImageMetadata`, the Docker 1.0 `DockerImage` shape with Go's capitalised JSON names
//! (`Config.Labels`, `Architecture`, …; openshift/api `image/docker10/dockertypes.go`). End users
//! normally cannot read `images`; the same block comes embedded in an ImageStreamTag or
//! ImageStreamImage.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::core::ClusterResourceScope;
use serde::{Deserialize, Serialize};

use super::null_as_default;

/// An Image. Top level (from `images`) it carries `apiVersion`/`kind`; embedded in an
/// ImageStreamTag or ImageStreamImage it does not, so those two are kept as read.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Image {
    /// `image.openshift.io/v1` when read from the `images` resource, else absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    /// `Image` when read from the `images` resource, else absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Name = manifest digest (`sha256:…`).
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// Pull spec by digest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub docker_image_reference: Option<String>,
    /// Image config and metadata (absent for manifest lists).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub docker_image_metadata: Option<DockerImageMetadata>,
    /// Version of `dockerImageMetadata` (`1.0`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub docker_image_metadata_version: Option<String>,
    /// Manifest media type (Docker schema 2, OCI, manifest list, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub docker_image_manifest_media_type: Option<String>,
    /// Layers, base first when annotated `image.openshift.io/dockerLayersOrder: ascending`.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub docker_image_layers: Vec<ImageLayer>,
    /// Sub-manifests, when the image is a manifest list (`importMode: PreserveOriginal`).
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub docker_image_manifests: Vec<ImageManifest>,
}

static_resource!(Image, group: "image.openshift.io", version: "v1", kind: "Image",
    plural: "images", scope: ClusterResourceScope);

impl Image {
    /// The image config labels (`dockerImageMetadata.Config.Labels`).
    pub fn labels(&self) -> Option<&BTreeMap<String, String>> {
        self.docker_image_metadata
            .as_ref()?
            .config
            .as_ref()?
            .labels
            .as_ref()
    }

    /// One image config label.
    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels()?.get(key).map(String::as_str)
    }

    /// The user the image runs as (`dockerImageMetadata.Config.User`), if set.
    pub fn user(&self) -> Option<&str> {
        self.docker_image_metadata
            .as_ref()?
            .config
            .as_ref()?
            .user
            .as_deref()
    }
}

/// `dockerImageMetadata`: the parts of the Docker 1.0 image metadata imagegate reads. Other
/// fields (`ContainerConfig`, `Id`, `Env`, …) are ignored.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct DockerImageMetadata {
    /// The image config.
    #[serde(rename = "Config", default, skip_serializing_if = "Option::is_none")]
    pub config: Option<DockerConfig>,
    /// CPU architecture, e.g. `amd64`.
    #[serde(
        rename = "Architecture",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub architecture: Option<String>,
    /// Operating system. Not in the `DockerImage` 1.0 Go type, so servers do not send it today;
    /// read it if a future version does.
    #[serde(rename = "Os", default, skip_serializing_if = "Option::is_none")]
    pub os: Option<String>,
    /// When the image was built.
    #[serde(rename = "Created", default, skip_serializing_if = "Option::is_none")]
    pub created: Option<Time>,
    /// Total size in bytes.
    #[serde(rename = "Size", default, skip_serializing_if = "Option::is_none")]
    pub size: Option<i64>,
}

/// `dockerImageMetadata.Config`: the parts of the image config imagegate reads.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct DockerConfig {
    /// Image labels (`LABEL` in a Dockerfile).
    #[serde(rename = "Labels", default, skip_serializing_if = "Option::is_none")]
    pub labels: Option<BTreeMap<String, String>>,
    /// User the container runs as (`USER`), e.g. `1001` or `root`.
    #[serde(rename = "User", default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
}

/// `dockerImageLayers[]`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ImageLayer {
    /// Layer digest.
    #[serde(default, deserialize_with = "null_as_default")]
    pub name: String,
    /// Size in bytes.
    #[serde(default, deserialize_with = "null_as_default")]
    pub size: i64,
    /// Layer media type.
    #[serde(default, deserialize_with = "null_as_default")]
    pub media_type: String,
}

/// `dockerImageManifests[]`: one platform of a manifest list.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ImageManifest {
    /// Digest of the sub-manifest (the name of its own Image).
    #[serde(default, deserialize_with = "null_as_default")]
    pub digest: String,
    /// Media type of the sub-manifest.
    #[serde(default, deserialize_with = "null_as_default")]
    pub media_type: String,
    /// Size of the sub-manifest in bytes.
    #[serde(default, deserialize_with = "null_as_default")]
    pub manifest_size: i64,
    /// CPU architecture, e.g. `arm64`.
    #[serde(default, deserialize_with = "null_as_default")]
    pub architecture: String,
    /// Operating system, e.g. `linux`.
    #[serde(default, deserialize_with = "null_as_default")]
    pub os: String,
    /// CPU variant, e.g. `v8`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variant: Option<String>,
}
