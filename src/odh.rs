//! Open Data Hub / OpenShift AI: the keys its dashboard, workbench webhook and operators read on
//! notebook ImageStreams ([`key`]). What the dashboard shows for a stream is modelled outside the
//! product, for the tests and the demo (`crates/demo/src/dashboard_model.rs`); the behaviour, with
//! the upstream file for each rule, is in `../shared/reference/notes/odh-notebook-images.md` and
//! summarised in docs/odh.md.

/// Labels and annotations, as the dashboard's `frontend/src/types.ts` spells them.
pub mod key {
    /// Stream label: `"true"` lists the stream in the dashboard's spawners.
    pub const NOTEBOOK_IMAGE: &str = "opendatahub.io/notebook-image";
    /// Stream label `app.kubernetes.io/created-by: byon`: a custom (BYON) image.
    pub const CREATED_BY: &str = "app.kubernetes.io/created-by";
    /// The value of [`CREATED_BY`] on custom images.
    pub const BYON: &str = "byon";
    /// Stream annotation: the description (no per-tag description exists).
    pub const IMAGE_DESC: &str = "opendatahub.io/notebook-image-desc";
    /// Stream annotation: `"true"` hides a shipped (OOTB) stream from the spawners.
    pub const IMAGE_HIDDEN: &str = "opendatahub.io/notebook-image-hidden";
    /// Tag annotation: any non-empty value keeps the tag out of new workbenches.
    pub const TAG_OUTDATED: &str = "opendatahub.io/image-tag-outdated";
    /// Tag annotation: `"true"` sorts the tag first and labels it Latest (Recommended).
    pub const RECOMMENDED: &str = "opendatahub.io/workbench-image-recommended";
    /// Tag annotation: JSON list shown as "Software".
    pub const SOFTWARE: &str = "opendatahub.io/notebook-software";
    /// Tag annotation: JSON list shown as "Packages included".
    pub const PYTHON_DEPENDENCIES: &str = "opendatahub.io/notebook-python-dependencies";
    /// Tag annotation: the build's commit; a workbench whose commit no spec tag carries any more
    /// shows Deprecated.
    pub const BUILD_COMMIT: &str = "opendatahub.io/notebook-build-commit";
}
