//! The unit of work of the source: one change of one tag of one ImageStream, as found by
//! diffing the state last delivered against the state now ([`super::diff`]).

use serde::{Deserialize, Serialize};

/// What happened to a tag.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ChangeKind {
    /// The tag's current image (`status.tags[t].items[0].image`) changed, including its first
    /// import. One change per history entry the receiver has not seen, oldest first.
    Updated,
    /// The tag, or its whole ImageStream, went away.
    Deleted,
    /// `ImportSuccess=False` appeared, or reappeared with a new generation.
    ImportFailed,
}

/// One change of one tag.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TagChange {
    /// What happened.
    pub kind: ChangeKind,
    /// The ImageStream's namespace.
    pub namespace: String,
    /// The ImageStream's name.
    pub image_stream: String,
    /// The ImageStream's uid (a stream deleted and re-created is another stream).
    pub image_stream_uid: String,
    /// The tag.
    pub tag: String,
    /// Updated: the new digest. Deleted: the last digest known. ImportFailed: the digest the
    /// tag still points at (the failed import kept it), if any.
    pub digest: Option<String>,
    /// Updated: the digest before this one (None for a first import).
    pub previous_digest: Option<String>,
    /// The pull spec by digest of `digest`, from the tag's history.
    pub docker_image_reference: Option<String>,
    /// Updated: the TagEvent's generation. ImportFailed: the condition's generation.
    /// Deleted: the last generation known.
    pub generation: i64,
    /// Updated: the TagEvent's `created`. ImportFailed: the condition's `lastTransitionTime`.
    /// Deleted: None (the API does not say when).
    pub time: Option<String>,
    /// ImportFailed: the condition's reason (`NotFound`, `Unauthorized`, `InternalError`).
    pub reason: Option<String>,
    /// ImportFailed: the condition's message.
    pub message: Option<String>,
}
