//! `imagegate adopt`: turn an existing ImageStream into the gated shape the rest of imagegate
//! works on, and find the adopted streams whose shape drifted since.
//!
//! The gated shape (docs/adopt.md): the **served** tag, which users get, pinned by digest and no
//! longer imported on a schedule; a hidden **candidate** tag whose scheduled import follows what
//! the served tag used to follow (the source reports its moves, a pipeline validates them); a
//! hidden **previous** tag (`<served>-previous`) pinned to the digest served before, for a
//! rollback. The stream is labelled [`names::MANAGED_LABEL`] and records the tag names it was
//! adopted with, so that a drift check needs nothing but the stream.
//!
//! One module per step: [`shape`] (pure: what kind of stream this is, which tags play which
//! role), [`plan`] (pure: the stream in, the objects to write or the reason to refuse out),
//! [`check`] (pure: how an adopted stream drifted), [`diff`] (pure: the change as a unified diff
//! of YAML), [`listing`] (what a drift check reads) and [`apply`] (the reads and the writes, and
//! what the command prints).

pub mod apply;
pub mod check;
pub mod diff;
pub mod listing;
pub mod plan;
pub mod shape;

/// The labels and annotations adopt reads and writes.
pub mod names {
    /// Label on every adopted stream (the drift check and `imagegate source --selector` use it).
    pub const MANAGED_LABEL: &str = "imagegate.dev/managed";
    /// Stream annotation: the candidate tag's name.
    pub const CANDIDATE_TAG: &str = "imagegate.dev/candidate-tag";
    /// Stream annotation: the served tag's name.
    pub const SERVED_TAG: &str = "imagegate.dev/served-tag";
    /// Stream annotation: the pull spec the candidate imports (to restore a dropped candidate).
    pub const CANDIDATE_FROM: &str = "imagegate.dev/candidate-from";
    /// On a gated copy: the operator-shipped stream it copies.
    pub const COPY_OF: &str = "imagegate.dev/copy-of";
    /// On an operator-shipped stream: the gated copy that replaces it in the dashboard.
    pub const GATED_COPY: &str = "imagegate.dev/gated-copy";
    /// Tag annotation naming the tag's role (`candidate`), as in `examples/`.
    pub const ROLE: &str = "imagegate.dev/role";
    /// Open Data Hub's stream annotation that hides an operator-shipped image from the spawners.
    pub const ODH_IMAGE_HIDDEN: &str = "opendatahub.io/notebook-image-hidden";
    /// Open Data Hub's stream label: the dashboard lists the stream.
    pub const ODH_NOTEBOOK_IMAGE: &str = "opendatahub.io/notebook-image";
    /// Open Data Hub's tag annotation: the recommended (default) version of a shipped image.
    pub const ODH_RECOMMENDED: &str = "opendatahub.io/workbench-image-recommended";
    /// The dashboard's label on custom (BYON) images, judged by `spec.tags[0]` alone.
    pub const BYON_CREATED_BY: (&str, &str) = ("app.kubernetes.io/created-by", "byon");
    /// Open Data Hub's operator opt-out (OP-old only): a stream it no longer applies.
    pub const ODH_MANAGED: &str = "opendatahub.io/managed";
    /// The labels the Open Data Hub operators put on the streams they ship and re-apply
    /// (workbenches-operator `internal/controller/manifests.go`, and the in-tree operator before
    /// it): any one of them, with its value, marks a stream the operator owns.
    pub const OPERATOR_LABELS: &[(&str, &str)] = &[
        ("app.opendatahub.io/workbenches", "true"),
        ("app.kubernetes.io/part-of", "workbenches"),
        ("platform.opendatahub.io/part-of", "workbenches"),
    ];
}

/// What the platform engineer asked for (`imagegate adopt` flags), all optional.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Options {
    /// The tag users are served; default: the only tag, or the one tag recommended.
    pub served_tag: Option<String>,
    /// The candidate tag; default `candidate`, or `<served>-candidate` where `spec.tags[0]`
    /// matters and `candidate` would sort first.
    pub candidate_tag: Option<String>,
    /// The pull spec the candidate imports; default: what the served tag imports.
    pub candidate_from: Option<String>,
    /// `Local` or `Source` for the tags adopt writes; default: the served tag's own.
    pub reference_policy: Option<String>,
    /// The name of the gated copy of an operator-shipped stream; default `<name>-gated`.
    pub copy_name: Option<String>,
}

/// What an adoption did, or would do, in words the command prints.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    /// The stream that carries the gated shape (`namespace/name`): the stream itself, or the copy.
    pub gated: String,
    /// The served tag.
    pub served: String,
    /// The digest the served tag is pinned to.
    pub served_digest: String,
    /// The candidate tag.
    pub candidate: String,
    /// What the candidate imports on a schedule.
    pub candidate_from: String,
    /// The previous tag and the digest it keeps, when the served tag served another before.
    pub previous: Option<(String, String)>,
    /// The notes worth a line each (why a name was chosen, what was left as it was).
    pub notes: Vec<String>,
}
