//! Pure event construction: one CloudEvent per [`TagChange`] (mode `imagestreamtag`; the
//! ApiServerSource modes build theirs in [`super::apiserver`]), and the `K_CE_OVERRIDES` step
//! applied last. No I/O: the clock is passed in.
//!
//! Every id is deterministic (a truncated SHA-256 of what identifies the change, see
//! [`event_id`]), so a retried or re-sent event carries the id of the first attempt and a
//! receiver can deduplicate on it; ApiServerSource sends random UUIDs instead.
//!
//! The SDK's `Event::default()` is avoided on purpose: it draws a random UUID, reads the host
//! name and unwraps a URL parsed from it. Events are made with the builder, whose only failure
//! modes (a missing or empty `id`/`type`/`source`, an unparsable `time` or `dataschema`) are
//! excluded by construction here.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use cloudevents::event::{EventBuilderV10, TryIntoUrl};
use cloudevents::{Event, EventBuilder};
use kube::Resource;
use serde_json::{Value, json};

use super::change::{ChangeKind, TagChange};
use crate::api::imagestream::ImageStream;

/// The `type` attribute of every event imagegate sends.
pub mod types {
    /// A tag's current image changed, including its first import.
    pub(crate) const UPDATED: &str = "dev.imagegate.imagestreamtag.updated";
    /// A tag, or its whole ImageStream, went away.
    pub(crate) const DELETED: &str = "dev.imagegate.imagestreamtag.deleted";
    /// `ImportSuccess=False` appeared, or reappeared with a new generation.
    pub(crate) const IMPORT_FAILED: &str = "dev.imagegate.imagestreamtag.importfailed";
    /// Mode `resource`, watch `ADDED` (as ApiServerSource).
    pub(crate) const RESOURCE_ADD: &str = "dev.knative.apiserver.resource.add";
    /// Mode `resource`, watch `MODIFIED`.
    pub(crate) const RESOURCE_UPDATE: &str = "dev.knative.apiserver.resource.update";
    /// Mode `resource`, watch `DELETED`.
    pub(crate) const RESOURCE_DELETE: &str = "dev.knative.apiserver.resource.delete";
    /// Mode `reference`, watch `ADDED`.
    pub(crate) const REF_ADD: &str = "dev.knative.apiserver.ref.add";
    /// Mode `reference`, watch `MODIFIED`.
    pub(crate) const REF_UPDATE: &str = "dev.knative.apiserver.ref.update";
    /// Mode `reference`, watch `DELETED`.
    pub(crate) const REF_DELETE: &str = "dev.knative.apiserver.ref.delete";
}

/// Extension attribute names (lowercase alphanumeric, at most 20 characters, per the spec).
pub mod ext {
    /// Mode `imagestreamtag`: the ImageStream's namespace. Also ApiServerSource's `namespace`.
    pub(crate) const NAMESPACE: &str = "namespace";
    /// Mode `imagestreamtag`: the ImageStream's name.
    pub(crate) const IMAGESTREAM: &str = "imagestream";
    /// Mode `imagestreamtag`: the tag.
    pub(crate) const IMAGETAG: &str = "imagetag";
    /// Mode `imagestreamtag`: the digest, absent when the change has none.
    pub(crate) const IMAGEDIGEST: &str = "imagedigest";
    /// Modes `resource`/`reference`: the object's kind.
    pub(crate) const KIND: &str = "kind";
    /// Modes `resource`/`reference`: the object's apiVersion.
    pub(crate) const APIVERSION: &str = "apiversion";
    /// Modes `resource`/`reference`: the object's name.
    pub(crate) const NAME: &str = "name";
}

/// `datacontenttype` of every event.
pub(crate) const APPLICATION_JSON: &str = "application/json";
/// Where the published schemas (`schemas/` in the repository) live by default.
pub(crate) const DEFAULT_DATASCHEMA_BASE: &str = "https://imagegate.dev/schemas/";
/// The first field hashed into an image stream tag event's id, so that another derivation can
/// never collide with this one. v2: an `updated` event hashes the TagEvent's `created` where v1
/// hashed its generation, which OpenShift rewrites in place when a tag that follows the tag is
/// added (so v1 gave an image sent again after a lost checkpoint another id).
pub(crate) const ID_SCHEME: &str = "imagegate-event-id-v2";
/// The first field hashed into every other id (resource and reference events, verdicts): their
/// derivation has not changed.
pub(crate) const ID_SCHEME_V1: &str = "imagegate-event-id-v1";
/// Length of an id: 40 lowercase hex characters (160 bits of SHA-256).
pub(crate) const ID_LEN: usize = 40;

/// Context attribute names an override may not use as an extension name (CloudEvents 1.0).
const RESERVED: &str = "specversion id source type datacontenttype dataschema subject time data";
/// Every kind of change, in the order of [`types`].
pub const KINDS: [ChangeKind; 3] = [
    ChangeKind::Updated,
    ChangeKind::Deleted,
    ChangeKind::ImportFailed,
];

/// A configuration value the events cannot be built with.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum EventConfigError {
    /// The dataschema base does not give absolute URLs.
    #[error("dataschema base {base:?} does not give a valid URL: {reason}")]
    DataschemaBase { base: String, reason: String },
    /// `K_CE_OVERRIDES` is not `{"extensions": {"name": "value", ...}}` with valid names.
    #[error("K_CE_OVERRIDES: {0}")]
    Overrides(String),
}

/// What the caller decides about events (mode `imagestreamtag`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EventSettings {
    /// URL prefix of the published schemas; `dataschema` = base + `imagestreamtag-<kind>.json`
    /// (a `/` is put between them if the base does not end in one).
    dataschema_base: Arc<str>,
    /// The `dataschema` of each kind (in [`KINDS`] order), parsed once: None when the base
    /// does not make a URL (only [`EventSettings::unchecked`] lets one through). Shared: the
    /// multi-tenant adapter's every source holds the same (BENCHMARKS.md, issue 30).
    schemas: Arc<[Option<url::Url>; 3]>,
}

impl Default for EventSettings {
    fn default() -> Self {
        Self::unchecked(DEFAULT_DATASCHEMA_BASE)
    }
}

impl EventSettings {
    /// Settings with a checked base: every dataschema URL it gives parses as an absolute URL.
    pub fn new(dataschema_base: impl Into<String>) -> Result<Self, EventConfigError> {
        let settings = Self::unchecked(dataschema_base);
        for kind in KINDS {
            if let Err(e) = settings.dataschema(kind).into_url() {
                return Err(EventConfigError::DataschemaBase {
                    base: settings.dataschema_base.to_string(),
                    reason: e.to_string(),
                });
            }
        }
        Ok(settings)
    }

    /// Settings with any base; events of a kind whose dataschema is not a URL have none.
    pub(crate) fn unchecked(dataschema_base: impl Into<String>) -> Self {
        let mut settings = Self {
            dataschema_base: Arc::from(dataschema_base.into()),
            schemas: Arc::new([None, None, None]),
        };
        settings.schemas = Arc::new(KINDS.map(|kind| settings.dataschema(kind).into_url().ok()));
        settings
    }

    /// The `dataschema` of events of `kind`.
    pub(crate) fn dataschema(&self, kind: ChangeKind) -> String {
        let sep = if self.dataschema_base.ends_with('/') {
            ""
        } else {
            "/"
        };
        format!("{}{sep}{}", self.dataschema_base, schema_file(kind))
    }

    /// The parsed `dataschema` of events of `kind`, None if it is not a URL.
    fn schema_url(&self, kind: ChangeKind) -> Option<&url::Url> {
        let i = KINDS.iter().position(|k| *k == kind)?;
        self.schemas[i].as_ref()
    }
}

/// The file name of the published JSON Schema of the data of events of `kind`.
pub fn schema_file(kind: ChangeKind) -> &'static str {
    match kind {
        ChangeKind::Updated => "imagestreamtag-updated.json",
        ChangeKind::Deleted => "imagestreamtag-deleted.json",
        ChangeKind::ImportFailed => "imagestreamtag-importfailed.json",
    }
}

/// The `type` of events of `kind`.
pub(crate) fn tag_type(kind: ChangeKind) -> &'static str {
    match kind {
        ChangeKind::Updated => types::UPDATED,
        ChangeKind::Deleted => types::DELETED,
        ChangeKind::ImportFailed => types::IMPORT_FAILED,
    }
}

/// The deterministic id of a change: the same change always gets the same id, across retries
/// and restarts, and a different change a different one. 40 lowercase hex characters, so it is
/// a valid DNS-1123 label (it may start with a digit) and a TriggerTemplate can name a
/// PipelineRun after it.
///
/// Exactly: the first 20 bytes, in lowercase hex, of SHA-256 over the concatenated netstrings
/// (`<byte length in decimal>:<UTF-8 bytes>,`) of, in order:
/// [`ID_SCHEME`], the event type, `imageStreamUID`, `namespace`, `imageStream`, `tag`,
/// `digest` (empty when none), and what tells this image of the tag from another time the tag
/// had it: for `updated`, the TagEvent's `created` as the API gave it (its generation in
/// decimal where it has none); otherwise the generation (decimal, `-` for negative).
/// Not in it: `previousDigest`, `dockerImageReference`, `reason`, `message`, and the time of
/// the others; they follow from the identity or describe it, and a deleted event's time is the
/// caller's clock. Not an `updated` event's generation: OpenShift rewrites it in place (a tag
/// added to follow this one; the collapse of a re-import), `created` it keeps.
pub fn event_id(change: &TagChange) -> String {
    let generation = change.generation.to_string();
    let when = match (change.kind, change.time.as_deref()) {
        (ChangeKind::Updated, Some(created)) => created,
        _ => generation.as_str(),
    };
    hash_id_with(
        ID_SCHEME,
        &[
            tag_type(change.kind),
            &change.image_stream_uid,
            &change.namespace,
            &change.image_stream,
            &change.tag,
            change.digest.as_deref().unwrap_or(""),
            when,
        ],
    )
}

/// The id of `fields` under [`ID_SCHEME_V1`] (resource and reference events, verdicts).
pub(crate) fn hash_id(fields: &[&str]) -> String {
    hash_id_with(ID_SCHEME_V1, fields)
}

fn hash_id_with(scheme: &str, fields: &[&str]) -> String {
    // The netstrings go into one buffer hashed at once, the lengths and the hex written by
    // hand: through `format!` and a digest update per piece, this took as many instructions
    // as building the rest of the event.
    let fields = std::iter::once(&scheme).chain(fields);
    let mut text = Vec::with_capacity(fields.clone().map(|f| f.len() + 22).sum());
    for field in fields {
        push_decimal(&mut text, field.len());
        text.push(b':');
        text.extend_from_slice(field.as_bytes());
        text.push(b',');
    }
    let digest = ring::digest::digest(&ring::digest::SHA256, &text);
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut id = String::with_capacity(ID_LEN);
    for byte in &digest.as_ref()[..ID_LEN / 2] {
        id.push(char::from(HEX[usize::from(byte >> 4)]));
        id.push(char::from(HEX[usize::from(byte & 0xf)]));
    }
    id
}

/// Appends `n` in decimal.
fn push_decimal(out: &mut Vec<u8>, mut n: usize) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[at..]);
}

/// Mode `imagestreamtag`: the CloudEvent for one change.
///
/// `source` = `/apis/image.openshift.io/v1/namespaces/{ns}/imagestreams/{name}`, `subject` =
/// `{name}:{tag}`, `time` = the change's time (the TagEvent's `created`, the condition's
/// `lastTransitionTime`), or `now` when the change has none or it does not parse (deleted).
/// Extensions `namespace`, `imagestream`, `imagetag` and `imagedigest` (only with a digest).
/// Data (camelCase): `namespace`, `imageStream`, `tag`, `digest`, `previousDigest`,
/// `dockerImageReference`, `generation`, `created` (the change's time verbatim, or null),
/// `imageStreamUID`, and for importfailed `reason`, `message`; absent values are `null`.
pub fn tag_event(change: &TagChange, settings: &EventSettings, now: DateTime<Utc>) -> Event {
    let time = change
        .time
        .as_deref()
        .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
        .map_or(now, |t| t.with_timezone(&Utc));
    let source = format!(
        "/apis/{}/namespaces/{}/imagestreams/{}",
        ImageStream::api_version(&()),
        change.namespace,
        change.image_stream
    );
    let builder = EventBuilderV10::new()
        .id(event_id(change))
        .ty(tag_type(change.kind))
        .source(source)
        .subject(format!("{}:{}", change.image_stream, change.tag))
        .time(time)
        .extension(ext::NAMESPACE, change.namespace.as_str())
        .extension(ext::IMAGESTREAM, change.image_stream.as_str())
        .extension(ext::IMAGETAG, change.tag.as_str());
    let builder = match &change.digest {
        Some(digest) => builder.extension(ext::IMAGEDIGEST, digest.as_str()),
        None => builder,
    };
    let data = tag_data(change);
    let builder = match settings.schema_url(change.kind) {
        Some(schema) => builder.data_with_schema(APPLICATION_JSON, schema.clone(), data),
        None => builder.data(APPLICATION_JSON, data),
    };
    finish(builder)
}

fn tag_data(change: &TagChange) -> Value {
    let mut data = json!({
        "namespace": change.namespace,
        "imageStream": change.image_stream,
        "tag": change.tag,
        "digest": change.digest,
        "previousDigest": change.previous_digest,
        "dockerImageReference": change.docker_image_reference,
        "generation": change.generation,
        "created": change.time,
        "imageStreamUID": change.image_stream_uid,
    });
    if change.kind == ChangeKind::ImportFailed {
        data["reason"] = json!(change.reason);
        data["message"] = json!(change.message);
    }
    data
}

pub(crate) fn finish(builder: EventBuilderV10) -> Event {
    builder
        .build()
        .expect("id, type and a non-empty source are set; time and dataschema are parsed values")
}

/// `K_CE_OVERRIDES` (`{"extensions": {"name": "value", ...}}`), applied last and overriding,
/// as Knative's adapters do. A JSON `null` or `{}` changes nothing. Checked in full before the
/// event is touched: extension names must be lowercase ASCII letters and digits and no context
/// attribute name; values must be strings (Knative's type is `map[string]string`) of printable
/// ASCII, since the SDK puts them into `ce-` headers without percent-encoding.
pub(crate) fn apply_overrides(
    event: &mut Event,
    overrides: &Value,
) -> Result<(), EventConfigError> {
    for (name, value) in override_extensions(overrides)? {
        event.set_extension(name, value);
    }
    Ok(())
}

/// Checks `K_CE_OVERRIDES` once, at start-up, and returns the extensions it sets.
pub(crate) fn override_extensions(
    overrides: &Value,
) -> Result<Vec<(&str, &str)>, EventConfigError> {
    let invalid = |why: String| Err(EventConfigError::Overrides(why));
    let map = match overrides {
        Value::Null => return Ok(Vec::new()),
        Value::Object(map) => map,
        other => return invalid(format!("expected an object, got {other}")),
    };
    if let Some(field) = map.keys().find(|k| *k != "extensions") {
        return invalid(format!(
            "unknown field {field:?}, only \"extensions\" is supported"
        ));
    }
    let extensions = match map.get("extensions") {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Object(extensions)) => extensions,
        Some(other) => return invalid(format!("\"extensions\" must be an object, got {other}")),
    };
    let mut checked = Vec::with_capacity(extensions.len());
    for (name, value) in extensions {
        if name.is_empty()
            || !name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        {
            return invalid(format!(
                "extension name {name:?} is not lowercase [a-z0-9]+"
            ));
        }
        if RESERVED.split(' ').any(|reserved| reserved == name) {
            return invalid(format!("{name:?} is a context attribute, not an extension"));
        }
        let Some(value) = value.as_str() else {
            return invalid(format!("extension {name:?} must be a string, got {value}"));
        };
        if !value.bytes().all(|b| (b' '..=b'~').contains(&b)) {
            return invalid(format!("extension {name:?} must be printable ASCII"));
        }
        checked.push((name.as_str(), value));
    }
    Ok(checked)
}

#[cfg(test)]
mod tests;
