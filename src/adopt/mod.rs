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

pub(crate) mod apply;
pub(crate) mod check;
pub(crate) mod diff;
pub(crate) mod listing;
pub(crate) mod plan;
pub(crate) mod shape;

/// The labels and annotations adopt reads and writes.
pub(crate) mod names {
    /// Label on every adopted stream (the drift check and `imagegate source --selector` use it).
    pub(crate) const MANAGED_LABEL: &str = "imagegate.dev/managed";
    /// Stream annotation: the candidate tag's name.
    pub(crate) const CANDIDATE_TAG: &str = "imagegate.dev/candidate-tag";
    /// Stream annotation: the served tag's name.
    pub(crate) const SERVED_TAG: &str = "imagegate.dev/served-tag";
    /// Stream annotation: the pull spec the candidate imports (to restore a dropped candidate).
    pub(crate) const CANDIDATE_FROM: &str = "imagegate.dev/candidate-from";
    /// On a gated copy: the operator-shipped stream it copies.
    pub(crate) const COPY_OF: &str = "imagegate.dev/copy-of";
    /// On an operator-shipped stream: the gated copy that replaces it in the dashboard.
    pub(crate) const GATED_COPY: &str = "imagegate.dev/gated-copy";
    /// Tag annotation naming the tag's role (`candidate`), as in `examples/`.
    pub(crate) const ROLE: &str = "imagegate.dev/role";
    /// Open Data Hub's stream annotation that hides an operator-shipped image from the spawners.
    pub(crate) const ODH_IMAGE_HIDDEN: &str = "opendatahub.io/notebook-image-hidden";
    /// Open Data Hub's stream label: the dashboard lists the stream.
    pub(crate) const ODH_NOTEBOOK_IMAGE: &str = "opendatahub.io/notebook-image";
    /// Open Data Hub's tag annotation: the recommended (default) version of a shipped image.
    pub(crate) const ODH_RECOMMENDED: &str = "opendatahub.io/workbench-image-recommended";
    /// The dashboard's label on custom (BYON) images, judged by `spec.tags[0]` alone.
    pub(crate) const BYON_CREATED_BY: (&str, &str) = ("app.kubernetes.io/created-by", "byon");
    /// Open Data Hub's operator opt-out (OP-old only): a stream it no longer applies.
    pub(crate) const ODH_MANAGED: &str = "opendatahub.io/managed";
    /// The labels the Open Data Hub operators put on the streams they ship and re-apply
    /// (workbenches-operator `internal/controller/manifests.go`, and the in-tree operator before
    /// it): any one of them, with its value, marks a stream the operator owns.
    pub(crate) const OPERATOR_LABELS: &[(&str, &str)] = &[
        ("app.opendatahub.io/workbenches", "true"),
        ("app.kubernetes.io/part-of", "workbenches"),
        ("platform.opendatahub.io/part-of", "workbenches"),
    ];
}

/// What the platform engineer asked for (`imagegate adopt` flags), all optional.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Options {
    /// The tag users are served; default: the only tag, or the one tag recommended.
    pub(crate) served_tag: Option<String>,
    /// The candidate tag; default `candidate`, or `<served>-candidate` where `spec.tags[0]`
    /// matters and `candidate` would sort first.
    pub(crate) candidate_tag: Option<String>,
    /// The pull spec the candidate imports; default: what the served tag imports.
    pub(crate) candidate_from: Option<String>,
    /// `Local` or `Source` for the tags adopt writes; default: the served tag's own.
    pub(crate) reference_policy: Option<String>,
    /// The name of the gated copy of an operator-shipped stream; default `<name>-gated`.
    pub(crate) copy_name: Option<String>,
}

/// What an adoption did, or would do, in words the command prints.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Summary {
    /// The stream that carries the gated shape (`namespace/name`): the stream itself, or the copy.
    pub(crate) gated: String,
    /// The served tag.
    pub(crate) served: String,
    /// The digest the served tag is pinned to.
    pub(crate) served_digest: String,
    /// The candidate tag.
    pub(crate) candidate: String,
    /// What the candidate imports on a schedule.
    pub(crate) candidate_from: String,
    /// The previous tag and the digest it keeps, when the served tag served another before.
    pub(crate) previous: Option<(String, String)>,
    /// The notes worth a line each (why a name was chosen, what was left as it was).
    pub(crate) notes: Vec<String>,
}
