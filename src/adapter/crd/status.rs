//! The status of an ImageStreamSource: Knative's SourceStatus (`observedGeneration`,
//! `conditions`, `sinkUri`, `sinkCACerts`, `ceAttributes`) plus the delivery counters a team
//! looks at to see that events flow. The condition types and reasons are constants, so that
//! what the reconciler writes and what the docs promise cannot drift apart.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Condition types.
pub mod condition {
    /// True when the sink resolved and the service account may read every selected namespace.
    pub const READY: &str = "Ready";
    /// True when `spec.sink` resolved to a URL (Knative's `SinkProvided`).
    pub const SINK_PROVIDED: &str = "SinkProvided";
    /// True when the service account may get, list and watch ImageStreams in every selected
    /// namespace (as ApiServerSource's `SufficientPermissions`).
    pub const SUFFICIENT_PERMISSIONS: &str = "SufficientPermissions";
}

/// Condition reasons.
pub mod reason {
    /// Ready: everything is in place.
    pub const READY: &str = "Ready";
    /// SinkProvided: the sink resolved.
    pub const SINK_RESOLVED: &str = "SinkResolved";
    /// SinkProvided=False: `spec.sink` has neither `ref` nor `uri`, or an absolute `uri` beside
    /// a `ref`, or a `uri` that is not a URL.
    pub const SINK_INVALID: &str = "SinkInvalid";
    /// SinkProvided=False: the object `spec.sink.ref` names does not exist (or cannot be read).
    pub const SINK_NOT_FOUND: &str = "SinkNotFound";
    /// SinkProvided=False: the object exists but has no usable address (yet).
    pub const SINK_NOT_ADDRESSABLE: &str = "SinkNotAddressable";
    /// The sink resolves to where a tenant may not send (loopback, link-local, the API
    /// server), and the operator does not allow the host.
    pub const SINK_NOT_ALLOWED: &str = "SinkNotAllowed";
    /// SufficientPermissions: every review allowed.
    pub(crate) const PERMITTED: &str = "Permitted";
    /// SufficientPermissions=False: a review was refused.
    pub const INSUFFICIENT_PERMISSIONS: &str = "InsufficientPermissions";
    /// SufficientPermissions=Unknown: the reviews could not be asked.
    pub(crate) const PERMISSIONS_UNCHECKED: &str = "PermissionsUnchecked";
    /// Ready=False: the spec contradicts itself (for example both `namespaces` and
    /// `namespaceSelector`).
    pub const INVALID_SPEC: &str = "InvalidSpec";
    /// Ready=Unknown: the first list of the namespaces it selects is not recorded yet; changes
    /// made from then on are sent once it is.
    pub const LISTING: &str = "Listing";
    /// Ready=False (multi-tenant adapter): the source's checkpoint holds more than the
    /// platform's cap (`--max-checkpoint-bytes-per-source`): it is not served; the other
    /// sources are.
    pub const CHECKPOINT_TOO_LARGE: &str = "CheckpointTooLarge";
}

/// What the adapter last observed of an ImageStreamSource.
#[derive(Serialize, Deserialize, Clone, Debug, Default, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ImageStreamSourceStatus {
    /// The `metadata.generation` this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `Ready`, `SinkProvided` and `SufficientPermissions`, each with a reason and a message
    /// saying what to do when it is not True.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// The URL events are sent to (the resolved `spec.sink`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sink_uri: Option<String>,
    /// The CA certificates trusted for the sink, when it is https.
    #[serde(
        rename = "sinkCACerts",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub sink_ca_certs: Option<String>,
    /// The `type` and `source` of the events this source sends (the source is omitted where
    /// it differs per ImageStream).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ce_attributes: Vec<CeAttributes>,
    /// What was delivered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deliveries: Option<Deliveries>,
}

/// A Knative condition (knative.dev/pkg `apis.Condition`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    /// `Ready`, `SinkProvided` or `SufficientPermissions`.
    pub r#type: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// Why, in one CamelCase word.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Why, for a person, and what to do about it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// When the status last changed (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<String>,
    /// `Error` (the default, empty), `Warning` or `Info`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub severity: Option<String>,
}

/// Knative's CloudEventAttributes: one event type this source sends.
#[derive(Serialize, Deserialize, Clone, Debug, Default, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct CeAttributes {
    /// The `type` attribute.
    pub r#type: String,
    /// The `source` attribute; omitted where it differs per ImageStream.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
}

/// Delivery counters of one source.
#[derive(Serialize, Deserialize, Clone, Debug, Default, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Deliveries {
    /// Events the sink took.
    #[serde(default)]
    pub delivered: i64,
    /// Events sent to the dead-letter sink.
    #[serde(default)]
    pub dead_lettered: i64,
    /// Delivery rounds the sink refused with no dead-letter sink taking the event (it is held and
    /// sent again).
    #[serde(default)]
    pub failed: i64,
    /// When the sink last took an event (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_delivered_time: Option<String>,
}
