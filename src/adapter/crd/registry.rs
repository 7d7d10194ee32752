//! The `registry.knative.dev/eventTypes` annotation of the ImageStreamSource CRD: every event
//! type a source can send, with the JSON Schema of its data where one is published, in the
//! form Knative's event registry reads from source CRDs (a JSON array of `type`, `schema`,
//! `description`). Built from the same constants the events are made with
//! ([`crate::source::event::types`], [`crate::source::event::schema_file`]).

use serde_json::{Value, json};

use crate::source::change::ChangeKind;
use crate::source::event::{self, DEFAULT_DATASCHEMA_BASE, types};

/// One registered event type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct EventType {
    /// The `type` attribute.
    pub ty: &'static str,
    /// The data's JSON Schema, where published.
    pub schema: Option<String>,
    /// What it means.
    pub description: &'static str,
}

/// Every event type, mode `imagestreamtag` first, then ApiServerSource's resource and
/// reference modes.
pub(crate) fn event_types() -> Vec<EventType> {
    let tag = |kind: ChangeKind, description| EventType {
        ty: event::tag_type(kind),
        schema: Some(format!(
            "{DEFAULT_DATASCHEMA_BASE}{}",
            event::schema_file(kind)
        )),
        description,
    };
    let apiserver = |ty, description| EventType {
        ty,
        schema: None,
        description,
    };
    vec![
        tag(
            ChangeKind::Updated,
            "Mode imagestreamtag: a tag's current image changed, including its first import; one event per new history entry, oldest first",
        ),
        tag(
            ChangeKind::Deleted,
            "Mode imagestreamtag: a tag, or its whole ImageStream, went away",
        ),
        tag(
            ChangeKind::ImportFailed,
            "Mode imagestreamtag: ImportSuccess=False appeared on a tag, or reappeared with a new generation",
        ),
        apiserver(
            types::RESOURCE_ADD,
            "Mode resource: an ImageStream was added (the object as data)",
        ),
        apiserver(
            types::RESOURCE_UPDATE,
            "Mode resource: an ImageStream changed (the object as data)",
        ),
        apiserver(
            types::RESOURCE_DELETE,
            "Mode resource: an ImageStream was deleted (its last state as data)",
        ),
        apiserver(
            types::REF_ADD,
            "Mode reference: an ImageStream was added (an ObjectReference as data)",
        ),
        apiserver(
            types::REF_UPDATE,
            "Mode reference: an ImageStream changed (an ObjectReference as data)",
        ),
        apiserver(
            types::REF_DELETE,
            "Mode reference: an ImageStream was deleted (an ObjectReference as data)",
        ),
    ]
}

/// The annotation's value: the event types as a JSON array.
pub(crate) fn annotation() -> String {
    let items: Vec<Value> = event_types()
        .into_iter()
        .map(|t| {
            let mut item = json!({"type": t.ty, "description": t.description});
            if let Some(schema) = t.schema {
                item["schema"] = json!(schema);
            }
            item
        })
        .collect();
    serde_json::to_string_pretty(&items).expect("JSON values always serialize")
}
