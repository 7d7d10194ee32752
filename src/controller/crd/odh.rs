//! The ImagePromotion settings for Open Data Hub / OpenShift AI notebook streams: how the
//! promotion pins the served tag ([`PromoteAs`]) and what the dashboard is told ([`Odh`]). What
//! the dashboard, the workbench webhook and the operators read is in docs/odh.md.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The image labels read, in order, for `opendatahub.io/notebook-build-commit` when `odh.buildCommitLabels`
/// is not set: the label Konflux and OSBS builds stamp, the OCI one, and the one OpenShift builds stamp.
pub const DEFAULT_BUILD_COMMIT_LABELS: &[&str] = &[
    "vcs-ref",
    "org.opencontainers.image.revision",
    "io.openshift.build.commit.id",
];
/// The image label read for `opendatahub.io/notebook-software` when `odh.softwareLabel` is not set.
pub const DEFAULT_SOFTWARE_LABEL: &str = "opendatahub.io/notebook-software";
/// The image label read for `opendatahub.io/notebook-python-dependencies` when
/// `odh.pythonDependenciesLabel` is not set.
pub const DEFAULT_PYTHON_DEPENDENCIES_LABEL: &str = "opendatahub.io/notebook-python-dependencies";

/// How a promotion (and a rollback) pins the served tag to the digest.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, JsonSchema, PartialEq, Eq)]
pub enum PromoteAs {
    // `from: {kind: ImageStreamImage, name: <imagestream>@<digest>}`, as `oc tag` writes it: the
    // image already in the stream is served, nothing is pulled from upstream at promotion, so an
    // image deleted upstream stays served. (Plain comments: a documented variant would turn the
    // CRD schema's `enum` into a `oneOf`, which structural schemas do not allow here.)
    #[default]
    ImageStreamImage,
    // `from: {kind: DockerImage, name: <repository>@<digest>}`, the repository the candidate
    // imported the digest from: OpenShift imports it again by digest, and the Open Data Hub
    // dashboard then shows the build date and matches workbenches by `from`.
    DockerImage,
}

/// What the Open Data Hub dashboard shows about a gated notebook stream. Off unless `enabled`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Odh {
    /// Keep the dashboard's view true to the gate (default `false`): every run hides the
    /// candidate tag from spawners (`opendatahub.io/image-tag-outdated: "true"`); a promotion
    /// sets the served tag's `opendatahub.io/notebook-software`,
    /// `opendatahub.io/notebook-python-dependencies` and `opendatahub.io/notebook-build-commit`
    /// to describe the new image (workbenches started from the old build then show Deprecated);
    /// a failed update appends a note to the stream's `opendatahub.io/notebook-image-desc` until
    /// the next success; and the served tag is never created without an image.
    #[serde(default, skip_serializing_if = "is_false")]
    pub enabled: bool,
    /// Image labels read, first non-empty wins, for `opendatahub.io/notebook-build-commit`
    /// (default `vcs-ref`, `org.opencontainers.image.revision`, `io.openshift.build.commit.id`).
    /// An image with none of them gets `sha256:` and the first 12 hex digits of its digest.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub build_commit_labels: Vec<String>,
    /// Image label holding the JSON list for `opendatahub.io/notebook-software` when the
    /// `promote` run has no `notebook-software` param (default
    /// `opendatahub.io/notebook-software`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub software_label: Option<String>,
    /// Image label holding the JSON list for `opendatahub.io/notebook-python-dependencies` when
    /// the `promote` run has no `notebook-python-dependencies` param (default
    /// `opendatahub.io/notebook-python-dependencies`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub python_dependencies_label: Option<String>,
}

impl PromoteAs {
    /// True for the default, `ImageStreamImage`.
    pub(crate) fn is_default(&self) -> bool {
        *self == PromoteAs::default()
    }
}

fn is_false(value: &bool) -> bool {
    !*value
}

impl Odh {
    /// True when nothing is set (off).
    pub(crate) fn is_default(&self) -> bool {
        self == &Odh::default()
    }
}
