//! The modes that send what Knative's ApiServerSource sends for ImageStreams: `resource`
//! (`dev.knative.apiserver.resource.*`, the object as data) and `reference`
//! (`dev.knative.apiserver.ref.*`, an ObjectReference as data). They announce each version of
//! a stream once ([`Announced`]) and keep no checkpoint. Like ApiServerSource, whose store
//! ignores a list (`Replace` is a no-op), they send nothing for the streams a start lists,
//! unless asked to with `--emit-existing`; a re-list sends only what changed while the watch was
//! down (ApiServerSource loses those changes).

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use cloudevents::Event;
use cloudevents::EventBuilder;
use cloudevents::event::EventBuilderV10;
use kube::Resource;
use serde_json::{Map, Value, json};

use super::checkpoint::StreamKey;
use super::event::{APPLICATION_JSON, ext, finish, hash_id, types};
use super::settings::Mode;
use crate::api::ImageStream;

/// The last resourceVersion announced (or, for a start's list, seen) per stream.
#[derive(Debug)]
pub(crate) struct Announced {
    versions: HashMap<StreamKey, String>,
    /// `--emit-existing`: a start's list announces each stream as added.
    emit_existing: bool,
}

impl Announced {
    /// Announces nothing for the streams a start lists, or with `emit_existing` an `Add` for
    /// each.
    pub(crate) fn new(emit_existing: bool) -> Announced {
        Announced {
            versions: HashMap::new(),
            emit_existing,
        }
    }

    /// What to announce for `key` seen at `resource_version`; `first_list`: it comes from the
    /// first list of its watch scope since the start. A stream a start lists is recorded and
    /// not announced (ApiServerSource sends nothing for a list), or with `--emit-existing`
    /// announced as `Add`. Otherwise (a watch event, a re-list): `Add` the first time, `Update`
    /// for a new version, None for the version announced last.
    pub(crate) fn applied(
        &mut self,
        key: &StreamKey,
        resource_version: &str,
        first_list: bool,
    ) -> Option<WatchAction> {
        let action = match self.versions.get(key) {
            Some(last) if last == resource_version => return None,
            Some(_) => Some(WatchAction::Update),
            None if first_list && !self.emit_existing => None,
            None => Some(WatchAction::Add),
        };
        self.versions
            .insert(key.clone(), resource_version.to_owned());
        action
    }

    /// Forgets a deleted stream.
    pub(crate) fn deleted(&mut self, key: &StreamKey) {
        self.versions.remove(key);
    }

    /// The streams announced and not deleted.
    pub(crate) fn keys(&self) -> impl Iterator<Item = &StreamKey> {
        self.versions.keys()
    }
}

/// What an ApiServerSource mode sends as an event's data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// Mode `resource`: the object.
    Resource,
    /// Mode `reference`: an ObjectReference to it.
    Reference,
}

impl Shape {
    /// The shape of `mode`'s events; None for mode `imagestreamtag`, which is not one of these.
    pub fn of(mode: Mode) -> Option<Shape> {
        match mode {
            Mode::Resource => Some(Shape::Resource),
            Mode::Reference => Some(Shape::Reference),
            Mode::ImageStreamTag => None,
        }
    }
}

/// The event of `shape` for `action` on `stream` (the whole object: its last state for a
/// deletion), stamped `now`; `source_url` is the API server's URL.
pub fn event(
    shape: Shape,
    action: WatchAction,
    stream: &ImageStream,
    source_url: &str,
    now: DateTime<Utc>,
) -> Event {
    let object = serde_json::to_value(stream).unwrap_or(Value::Null);
    match shape {
        Shape::Reference => reference_event(action, &object, source_url, now),
        Shape::Resource => resource_event(action, &object, source_url, now),
    }
}

/// The id of a resource/reference event: as [`super::event::event_id`], over [`super::event::ID_SCHEME`], the event type,
/// `metadata.uid` and `metadata.resourceVersion` (each empty when missing). The API server
/// gives every write, the deletion included, a new resourceVersion.
pub(crate) fn resource_event_id(ty: &str, object: &Value) -> String {
    hash_id(&[
        ty,
        meta_str(object, "uid"),
        meta_str(object, "resourceVersion"),
    ])
}

/// The watch event type an event is made for (client-go's `Add`/`Update`/`Delete` of a
/// reflector's store: `ADDED`, `MODIFIED`, `DELETED`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WatchAction {
    /// `ADDED`.
    Add,
    /// `MODIFIED`.
    Update,
    /// `DELETED` (the object is its last state).
    Delete,
}

impl WatchAction {
    /// The type of mode `resource` events.
    pub(crate) fn resource_type(self) -> &'static str {
        match self {
            Self::Add => types::RESOURCE_ADD,
            Self::Update => types::RESOURCE_UPDATE,
            Self::Delete => types::RESOURCE_DELETE,
        }
    }

    /// The type of mode `reference` events.
    pub(crate) fn reference_type(self) -> &'static str {
        match self {
            Self::Add => types::REF_ADD,
            Self::Update => types::REF_UPDATE,
            Self::Delete => types::REF_DELETE,
        }
    }
}

/// Mode `resource`: what ApiServerSource sends for an ImageStream watch event, the object
/// itself as data. See [`reference_event`] for the attributes; only the type and data differ.
pub(crate) fn resource_event(
    action: WatchAction,
    object: &Value,
    source_url: &str,
    now: DateTime<Utc>,
) -> Event {
    let mut data = object.clone();
    // List items may come without kind/apiVersion; client-go fills them in before
    // ApiServerSource sees the object, so its consumers always get them.
    if let Value::Object(map) = &mut data {
        let (kind, api_version) = kind_and_api_version(object);
        map.entry("apiVersion")
            .or_insert_with(|| json!(api_version));
        map.entry("kind").or_insert_with(|| json!(kind));
    }
    apiserver_event(action.resource_type(), object, source_url, now, data)
}

/// Mode `reference`: what ApiServerSource sends for an ImageStream watch event, with a
/// `corev1.ObjectReference` as data (`kind`, `namespace`, `name`, `apiVersion`, empty ones
/// omitted as Go's `omitempty` does; no uid, no resourceVersion).
///
/// As ApiServerSource: `source` = the API server URL the adapter talks to (`rest.Config.Host`,
/// e.g. `https://172.30.0.1:443`; `/` if empty), `subject` = Knative's guessed self link
/// `/apis/{apiVersion}/namespaces/{ns}/{lowercase kind}s/{name}`, `time` = `now` (sdk-go sets
/// the send time), extensions `kind`, `apiversion`, `name`, `namespace`, no `dataschema`.
/// Unlike it, the id is [`resource_event_id`], not a random UUID.
pub(crate) fn reference_event(
    action: WatchAction,
    object: &Value,
    source_url: &str,
    now: DateTime<Utc>,
) -> Event {
    let (kind, api_version) = kind_and_api_version(object);
    let mut reference = Map::new();
    for (field, value) in [
        ("kind", kind.as_str()),
        ("namespace", meta_str(object, "namespace")),
        ("name", meta_str(object, "name")),
        ("apiVersion", api_version.as_str()),
    ] {
        if !value.is_empty() {
            reference.insert(field.to_owned(), json!(value));
        }
    }
    let data = Value::Object(reference);
    apiserver_event(action.reference_type(), object, source_url, now, data)
}

fn apiserver_event(
    ty: &str,
    object: &Value,
    source_url: &str,
    now: DateTime<Utc>,
    data: Value,
) -> Event {
    let (kind, api_version) = kind_and_api_version(object);
    let (namespace, name) = (meta_str(object, "namespace"), meta_str(object, "name"));
    let source = if source_url.is_empty() {
        "/"
    } else {
        source_url
    };
    let builder = EventBuilderV10::new()
        .id(resource_event_id(ty, object))
        .ty(ty)
        .source(source)
        .subject(self_link(&api_version, &kind, namespace, name))
        .time(now)
        .extension(ext::KIND, kind.as_str())
        .extension(ext::APIVERSION, api_version.as_str())
        .extension(ext::NAME, name)
        .extension(ext::NAMESPACE, namespace)
        .data(APPLICATION_JSON, data);
    finish(builder)
}

/// Knative's `createSelfLink`: the plural is guessed as lowercase kind + `s`, and an apiVersion
/// that is a group without a version gets `/versionUnknown`.
fn self_link(api_version: &str, kind: &str, namespace: &str, name: &str) -> String {
    let version = if api_version.contains('.') && !api_version.contains('/') {
        format!("{api_version}/versionUnknown")
    } else {
        api_version.to_owned()
    };
    let plural = format!("{}s", kind.to_lowercase());
    format!("/apis/{version}/namespaces/{namespace}/{plural}/{name}")
}

fn kind_and_api_version(object: &Value) -> (String, String) {
    let field = |name: &str, default: String| match object.get(name).and_then(Value::as_str) {
        Some(value) if !value.is_empty() => value.to_owned(),
        _ => default,
    };
    let kind = field("kind", ImageStream::kind(&()).into_owned());
    let api_version = field("apiVersion", ImageStream::api_version(&()).into_owned());
    (kind, api_version)
}

fn meta_str<'a>(object: &'a Value, field: &str) -> &'a str {
    object
        .get("metadata")
        .and_then(|m| m.get(field))
        .and_then(Value::as_str)
        .unwrap_or("")
}

#[cfg(test)]
mod tests;
