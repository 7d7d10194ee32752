//! OpenShift ImageStream behaviour for the emulator, as pure functions over JSON values.
//!
//! openshift-apiserver computes much of an ImageStream on the server: defaults, generations,
//! the tag history, and the virtual `imagestreamtags` / `imagestreamimages` views. This module
//! reproduces those rules (openshift/openshift-apiserver `pkg/image/apiserver`, cited per
//! function) without I/O: the store passes the committed objects in and writes what comes out.
//!
//! - [`strategy`](self::strategy): writes to `imagestreams` and `imagestreams/status`
//!   (`Strategy`, `StatusStrategy`, `InternalStrategy`, `tagsChanged`).
//! - [`import`](self::import): what an `ImageStreamImport` writes after a (scheduled) import.
//! - [`views`](self::views): the ImageStreamTag and ImageStreamImage views and istag writes.
//!
//! This file holds the shared pieces: the error type, the settings, a typed model of
//! `spec.tags` / `status.tags` that keeps every other field of the object as it came, and the
//! tag-history rules (`AddTagEventToImageStream`, `ResolveImageID`, `UpdateTrackingTags`).

mod import;
mod strategy;
mod views;

use std::collections::{BTreeMap, BTreeSet};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

pub use import::{
    ImportSpec, import_failed, import_spec_failed, import_spec_succeeded, import_succeeded,
};
pub use strategy::{
    decorate, prepare_create, prepare_status_update, prepare_update, prepare_update_internal,
};
pub use views::{
    IstagWrite, isimage_view, istag_delete, istag_list, istag_patch_base, istag_view, istag_write,
    istag_write_response, parse_isimage_name, parse_istag_name,
};

/// `apiVersion` of every kind served here.
pub const API_VERSION: &str = "image.openshift.io/v1";
/// Stamped by every import that writes (openshift/api `image/v1/consts.go`).
pub const DOCKER_REPOSITORY_CHECK_ANNOTATION: &str = "openshift.io/image.dockerRepositoryCheck";
/// The only TagEventCondition type.
pub const IMPORT_SUCCESS: &str = "ImportSuccess";
/// The integrated registry's in-cluster hostname on OpenShift 4.
pub const DEFAULT_INTERNAL_REGISTRY: &str = "image-registry.openshift-image-registry.svc:5000";
/// `Strategy.AllowUnconditionalUpdate`: a PUT of an ImageStream without
/// `metadata.resourceVersion` is rejected with 422 Invalid.
pub const ALLOW_UNCONDITIONAL_UPDATE: bool = false;
/// The strategic-merge-patch list keys of ImageStream (`+patchMergeKey` in openshift/api):
/// dotted list path and the field that identifies an element.
pub const IMAGESTREAM_MERGE_KEYS: &[(&str, &str)] = &[
    ("spec.tags", "name"),
    ("status.tags", "tag"),
    ("status.tags.conditions", "type"),
];

/// A rejected write or read, mapped by the HTTP layer to a kube Status.
#[derive(Debug, thiserror::Error)]
pub enum StrategyError {
    /// 422 Invalid; the message is the field errors (`spec.tags[t].from.kind: Required value: …`,
    /// several as `[a, b]`), to follow `<Kind>.<group> "<name>" is invalid: ` in the Status.
    #[error("{0}")]
    Invalid(String),
    /// 404 NotFound.
    #[error("{0}")]
    NotFound(String),
    /// 400 BadRequest.
    #[error("{0}")]
    BadRequest(String),
    /// 409 Conflict.
    #[error("{0}")]
    Conflict(String),
    /// 409 AlreadyExists.
    #[error("{0}")]
    AlreadyExists(String),
}

/// Looks up an ImageStream by (namespace, name) in the store (already-committed state).
pub type StreamLookup<'a> = &'a dyn Fn(&str, &str) -> Option<Value>;

/// What the emulated cluster is configured with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Settings {
    /// Host of the integrated registry, e.g. `image-registry.openshift-image-registry.svc:5000`;
    /// empty means "no integrated registry" (status then mirrors `spec.dockerImageRepository`).
    pub internal_registry: String,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            internal_registry: DEFAULT_INTERNAL_REGISTRY.to_string(),
        }
    }
}

/// The field errors of a `NewInvalid`: one as is, several as `[a, b]` (the HTTP layer adds the
/// `<Kind>.<group> "<name>" is invalid: ` prefix).
pub(crate) fn invalid(errs: &[String]) -> StrategyError {
    StrategyError::Invalid(aggregate(errs))
}

pub(crate) fn aggregate(errs: &[String]) -> String {
    match errs {
        [one] => one.clone(),
        many => format!("[{}]", many.join(", ")),
    }
}

/// Field errors worded like `field.Error.Error()`.
pub(crate) mod field {
    pub fn invalid(path: &str, value: &str, detail: &str) -> String {
        format!("{path}: Invalid value: {value:?}: {detail}")
    }
    pub fn required(path: &str, detail: &str) -> String {
        if detail.is_empty() {
            format!("{path}: Required value")
        } else {
            format!("{path}: Required value: {detail}")
        }
    }
    pub fn not_found(path: &str, value: &str) -> String {
        format!("{path}: Not found: {value:?}")
    }
    pub fn unsupported(path: &str, value: &str, supported: &[&str]) -> String {
        let s: Vec<String> = supported.iter().map(|v| format!("{v:?}")).collect();
        format!(
            "{path}: Unsupported value: {value:?}: supported values: {}",
            s.join(", ")
        )
    }
}

// --- the typed model ------------------------------------------------------------------------
// Field names, null and omitempty rules follow openshift/api image/v1/types.go. Values are
// decoded with nulls removed (Go's decoder leaves a field at its zero value for null, exactly
// as for an absent key). Unknown fields are kept in `extra`, so this layer loses nothing.

/// Decodes after dropping null-valued keys, so that null means "default" everywhere.
pub(crate) fn from_json<T: DeserializeOwned>(mut v: Value) -> Result<T, serde_json::Error> {
    fn strip(v: &mut Value) {
        match v {
            Value::Object(m) => {
                m.retain(|_, x| !x.is_null());
                m.values_mut().for_each(strip);
            }
            Value::Array(a) => a.iter_mut().for_each(strip),
            _ => {}
        }
    }
    strip(&mut v);
    serde_json::from_value(v)
}

fn is_false(b: &bool) -> bool {
    !*b
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct TagReference {
    pub name: String,
    /// No omitempty in Go: `annotations: null` is the common case.
    pub annotations: Option<BTreeMap<String, String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from: Option<ObjectReference>,
    #[serde(skip_serializing_if = "is_false")]
    pub reference: bool,
    pub generation: Option<i64>,
    pub import_policy: TagImportPolicy,
    pub reference_policy: TagReferencePolicy,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct ObjectReference {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub kind: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct TagImportPolicy {
    #[serde(skip_serializing_if = "is_false")]
    pub insecure: bool,
    #[serde(skip_serializing_if = "is_false")]
    pub scheduled: bool,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub import_mode: String,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct TagReferencePolicy {
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct NamedTagEventList {
    pub tag: String,
    /// No omitempty in Go: a tag that never imported shows `items: null`.
    pub items: Option<Vec<TagEvent>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<TagEventCondition>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct TagEvent {
    pub created: Option<String>,
    pub docker_image_reference: String,
    pub image: String,
    pub generation: i64,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct TagEventCondition {
    #[serde(rename = "type")]
    pub kind: String,
    pub status: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<String>,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub reason: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub message: String,
    pub generation: i64,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl TagReference {
    /// `SetDefaults_TagReferencePolicy` / `SetDefaults_TagImportPolicy`, applied wherever a
    /// TagReference is decoded (ImageStream and ImageStreamTag alike).
    pub fn apply_defaults(&mut self) {
        if self.reference_policy.kind.is_empty() {
            self.reference_policy.kind = "Source".into();
        }
        if self.import_policy.import_mode.is_empty() {
            self.import_policy.import_mode = "Legacy".into();
        }
    }
}

/// An ImageStream with its tag lists held as maps keyed by tag name, as openshift-apiserver
/// holds them internally (which is why v1 output is sorted and duplicates collapse, last wins).
/// Every other field stays in `obj` untouched.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Stream {
    pub obj: Map<String, Value>,
    pub spec_tags: BTreeMap<String, TagReference>,
    pub status_tags: BTreeMap<String, NamedTagEventList>,
}

impl Stream {
    /// A stream that does not exist yet (what istag and import writes start from).
    pub fn empty(namespace: &str, name: &str) -> Stream {
        let obj = json!({
            "apiVersion": API_VERSION, "kind": "ImageStream",
            "metadata": {"name": name, "namespace": namespace}, "spec": {}
        });
        let Value::Object(obj) = obj else {
            unreachable!("a json! object literal")
        };
        Stream {
            obj,
            spec_tags: BTreeMap::new(),
            status_tags: BTreeMap::new(),
        }
    }

    /// Splits the tag lists out of an ImageStream; malformed shapes are 422 Invalid.
    pub fn parse(v: &Value) -> Result<Stream, StrategyError> {
        let Value::Object(obj) = v else {
            return Err(invalid(&[field::invalid(
                "<root>",
                &short(v),
                "must be an object",
            )]));
        };
        let mut obj = obj.clone();
        let mut errs = Vec::new();
        if !matches!(
            obj.get("metadata"),
            None | Some(Value::Null | Value::Object(_))
        ) {
            errs.push(field::invalid("metadata", "", "must be an object"));
        }
        let spec: Vec<TagReference> = take_list(&mut obj, "spec", "tags", &mut errs);
        let status: Vec<NamedTagEventList> = take_list(&mut obj, "status", "tags", &mut errs);
        if !errs.is_empty() {
            return Err(invalid(&errs));
        }
        Ok(Stream {
            obj,
            spec_tags: spec.into_iter().map(|t| (t.name.clone(), t)).collect(),
            status_tags: status.into_iter().map(|t| (t.tag.clone(), t)).collect(),
        })
    }

    /// The object with both tag lists back in, sorted by name (empty lists omitted, as Go's
    /// `omitempty` does).
    pub fn into_value(self) -> Value {
        let Stream {
            mut obj,
            spec_tags,
            status_tags,
        } = self;
        let spec = section(&mut obj, "spec");
        if !spec_tags.is_empty() {
            let tags = spec_tags
                .into_iter()
                .map(|(name, t)| to_value(TagReference { name, ..t }));
            spec.insert("tags".into(), Value::Array(tags.collect()));
        }
        if !status_tags.is_empty() || obj.contains_key("status") {
            let status = section(&mut obj, "status");
            if !status_tags.is_empty() {
                let tags = status_tags
                    .into_iter()
                    .map(|(tag, t)| to_value(NamedTagEventList { tag, ..t }));
                status.insert("tags".into(), Value::Array(tags.collect()));
            }
        }
        Value::Object(obj)
    }

    pub fn meta_str(&self, key: &str) -> &str {
        self.obj
            .get("metadata")
            .and_then(|m| m.get(key))
            .and_then(Value::as_str)
            .unwrap_or_default()
    }

    pub fn name(&self) -> &str {
        self.meta_str("name")
    }

    pub fn namespace(&self) -> &str {
        self.meta_str("namespace")
    }

    pub fn generation(&self) -> i64 {
        self.obj
            .get("metadata")
            .and_then(|m| m.get("generation"))
            .and_then(Value::as_i64)
            .unwrap_or(0)
    }

    pub fn metadata_mut(&mut self) -> &mut Map<String, Value> {
        section(&mut self.obj, "metadata")
    }

    pub fn set_generation(&mut self, generation: i64) {
        self.metadata_mut()
            .insert("generation".into(), json!(generation));
    }

    pub fn has_annotation(&self, key: &str) -> bool {
        self.obj
            .get("metadata")
            .and_then(|m| m.get("annotations"))
            .and_then(|a| a.get(key))
            .is_some()
    }

    pub fn set_annotation(&mut self, key: &str, value: &str) {
        let meta = self.metadata_mut();
        let annotations = meta.entry("annotations").or_insert_with(|| json!({}));
        if !annotations.is_object() {
            *annotations = json!({});
        }
        annotations[key] = json!(value);
    }

    pub fn labels(&self) -> BTreeMap<String, String> {
        string_map(self.obj.get("metadata").and_then(|m| m.get("labels")))
    }

    pub fn status_str(&self, key: &str) -> &str {
        self.obj
            .get("status")
            .and_then(|s| s.get(key))
            .and_then(Value::as_str)
            .unwrap_or_default()
    }

    /// `spec` as one value (tags included), for the "did the spec change" comparison.
    pub fn spec_value(&self) -> Value {
        let mut spec = self.obj.get("spec").cloned().unwrap_or_else(|| json!({}));
        if let Value::Object(m) = &mut spec {
            let tags = self.spec_tags.iter().map(|(name, t)| {
                to_value(TagReference {
                    name: name.clone(),
                    ..t.clone()
                })
            });
            m.insert("tags".into(), Value::Array(tags.collect()));
        }
        spec
    }

    /// The v1 defaulting openshift-apiserver applies on every decode (`v1/defaults.go`):
    /// `referencePolicy.type` Source, `importPolicy.importMode` Legacy, and the always-present
    /// `lookupPolicy`.
    pub fn apply_defaults(&mut self) {
        let spec = section(&mut self.obj, "spec");
        match spec.get_mut("lookupPolicy") {
            None | Some(Value::Null) => {
                spec.insert("lookupPolicy".into(), json!({"local": false}));
            }
            Some(Value::Object(lp)) => {
                lp.entry("local").or_insert(json!(false));
            }
            Some(_) => {}
        }
        self.spec_tags
            .values_mut()
            .for_each(TagReference::apply_defaults);
    }

    /// `collapseEmptyStatusTags`: status tags with neither items nor conditions are dropped.
    pub fn collapse_empty_status_tags(&mut self) {
        self.status_tags.retain(|_, t| {
            t.items.as_ref().is_some_and(|i| !i.is_empty()) || !t.conditions.is_empty()
        });
    }

    /// `LatestTaggedImage`: the newest TagEvent of a tag ("" means "latest").
    pub fn latest(&self, tag: &str) -> Option<&TagEvent> {
        let tag = if tag.is_empty() { "latest" } else { tag };
        self.status_tags.get(tag)?.items.as_ref()?.first()
    }

    /// `AddTagEventToImageStream` (internal/imageutil/helpers.go): prepend a new image, collapse
    /// an identical one (only the generation moves, `created` stays), patch `items[0]` in place
    /// when only one of image/reference differs. Any change clears the tag's conditions.
    pub fn add_tag_event(&mut self, tag: &str, next: TagEvent) -> bool {
        let list = self.status_tags.entry(tag.to_string()).or_default();
        let Some(previous) = list.items.as_mut().and_then(|i| i.first_mut()) else {
            *list = NamedTagEventList {
                tag: tag.to_string(),
                items: Some(vec![next]),
                ..Default::default()
            };
            return true;
        };
        let same_ref = previous.docker_image_reference == next.docker_image_reference;
        let same_image = previous.image == next.image;
        match (same_ref, same_image) {
            _ if same_ref && same_image && previous.generation == next.generation => return false,
            (true, true) => {}
            (true, false) => previous.image = next.image.clone(),
            (false, true) => previous.docker_image_reference = next.docker_image_reference.clone(),
            (false, false) => {
                list.items.get_or_insert_with(Vec::new).insert(0, next);
                list.conditions.clear();
                return true;
            }
        }
        previous.generation = next.generation;
        list.conditions.clear();
        true
    }

    /// The distinct images of all status histories matching an ID or prefix
    /// (`imageutil.DigestOrImageMatch`), and the last matching event seen.
    pub fn matching_images(&self, id: &str) -> (BTreeSet<String>, Option<&TagEvent>) {
        let mut set = BTreeSet::new();
        let mut last = None;
        for event in self
            .status_tags
            .values()
            .flat_map(|t| t.items.iter().flatten())
        {
            if digest_or_image_match(&event.image, id) {
                set.insert(event.image.clone());
                last = Some(event);
            }
        }
        (set, last)
    }

    /// `ResolveImageID`: exactly one image of any history must match; the new event copies
    /// that history entry's reference and gets `created = now`.
    pub fn resolve_image_id(&self, id: &str, now: &str) -> Result<TagEvent, String> {
        let (set, last) = self.matching_images(id);
        match (set.len(), last) {
            (1, Some(e)) => Ok(TagEvent {
                created: Some(now.to_string()),
                docker_image_reference: e.docker_image_reference.clone(),
                image: e.image.clone(),
                ..Default::default()
            }),
            (0, _) | (_, None) => Err(format!(
                "imagestreamimage.image.openshift.io {id:?} not found"
            )),
            _ => Err(format!(
                "Operation cannot be fulfilled on imagestreamimage.image.openshift.io {id:?}: \
                 multiple images match the prefix {id:?}: {}",
                set.into_iter().collect::<Vec<_>>().join(", ")
            )),
        }
    }

    /// `UpdateTrackingTags`: spec tags of this stream whose `from` is the ImageStreamTag
    /// `updated` (`oc tag --alias`) follow its newest event.
    pub fn update_tracking_tags(&mut self, updated: &str, event: &TagEvent) -> usize {
        let (ns, name) = (self.namespace().to_string(), self.name().to_string());
        let trackers: Vec<String> = self
            .spec_tags
            .iter()
            .filter(|(_, r)| {
                let Some(from) = r.from.as_ref().filter(|f| f.kind == "ImageStreamTag") else {
                    return false;
                };
                let from_ns = if from.namespace.is_empty() {
                    ns.as_str()
                } else {
                    from.namespace.as_str()
                };
                let (stream, tag) = match from.name.split_once(':') {
                    Some((s, t)) => (s, if t.is_empty() { "latest" } else { t }),
                    None => (name.as_str(), from.name.as_str()),
                };
                from_ns == ns && stream == name && tag == updated
            })
            .map(|(t, _)| t.clone())
            .collect();
        trackers
            .iter()
            .filter(|t| self.add_tag_event(t, event.clone()))
            .count()
    }
}

fn take_list<T: DeserializeOwned>(
    obj: &mut Map<String, Value>,
    section: &str,
    key: &str,
    errs: &mut Vec<String>,
) -> Vec<T> {
    let list = match obj.get_mut(section) {
        None | Some(Value::Null) => return Vec::new(),
        Some(Value::Object(m)) => m.remove(key),
        Some(other) => {
            errs.push(field::invalid(section, &short(other), "must be an object"));
            return Vec::new();
        }
    };
    match list {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => items
            .into_iter()
            .enumerate()
            .filter_map(|(i, item)| {
                let path = format!("{section}.{key}[{i}]");
                if !item.is_object() {
                    errs.push(field::invalid(&path, &short(&item), "must be an object"));
                    return None;
                }
                from_json(item)
                    .map_err(|e| errs.push(field::invalid(&path, "", &e.to_string())))
                    .ok()
            })
            .collect(),
        Some(other) => {
            errs.push(field::invalid(
                &format!("{section}.{key}"),
                &short(&other),
                "must be a list",
            ));
            Vec::new()
        }
    }
}

/// The object under `key`, created (or replacing a non-object) if needed.
pub(crate) fn section<'a>(
    obj: &'a mut Map<String, Value>,
    key: &str,
) -> &'a mut Map<String, Value> {
    let v = obj.entry(key).or_insert_with(|| json!({}));
    if !v.is_object() {
        *v = json!({});
    }
    match v {
        Value::Object(m) => m,
        _ => unreachable!("replaced by an object above"),
    }
}

pub(crate) fn to_value<T: Serialize>(t: T) -> Value {
    // Serializing these plain structs cannot fail (string keys, no custom serializers).
    serde_json::to_value(t).unwrap_or(Value::Null)
}

pub(crate) fn string_map(v: Option<&Value>) -> BTreeMap<String, String> {
    v.and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

fn short(v: &Value) -> String {
    let s = v.to_string();
    match s.char_indices().nth(60) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s,
    }
}

/// `imageutil.DigestOrImageMatch`: `id` is a prefix of the digest's hex or of the whole name.
pub(crate) fn digest_or_image_match(image: &str, id: &str) -> bool {
    match image.split_once(':') {
        Some((_, hex)) => hex.starts_with(id) || image.starts_with(id),
        None => image.starts_with(id),
    }
}

/// Null, `{}` and `[]` are the same thing to Go's semantic equality (nil and empty maps and
/// slices compare equal); a missing key is null.
pub(crate) fn semantic_eq(a: &Value, b: &Value) -> bool {
    fn empty(v: &Value) -> bool {
        match v {
            Value::Null => true,
            Value::Object(m) => m.is_empty(),
            Value::Array(a) => a.is_empty(),
            _ => false,
        }
    }
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => x.keys().chain(y.keys()).all(|k| {
            semantic_eq(
                x.get(k).unwrap_or(&Value::Null),
                y.get(k).unwrap_or(&Value::Null),
            )
        }),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| semantic_eq(p, q))
        }
        _ if empty(a) && empty(b) => true,
        _ => a == b,
    }
}

/// A container image reference split like library-go `reference.Parse`.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct DockerRef {
    pub registry: String,
    pub namespace: String,
    pub name: String,
    pub tag: String,
    pub id: String,
}

impl DockerRef {
    pub fn parse(spec: &str) -> Result<DockerRef, String> {
        const BAD: &str = "invalid reference format";
        if spec.is_empty() {
            return Err("repository name must have at least one component".into());
        }
        let (rest, id) = match spec.split_once('@') {
            Some((r, id)) => (r, id),
            None => (spec, ""),
        };
        if !id.is_empty() {
            let ok = id.split_once(':').is_some_and(|(alg, hex)| {
                !alg.is_empty()
                    && alg
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b"+._-".contains(&b))
                    && hex.len() >= 32
                    && hex.bytes().all(|b| b.is_ascii_hexdigit())
            });
            if !ok {
                return Err(BAD.into());
            }
        } else if spec.contains('@') {
            return Err(BAD.into());
        }
        let slash = rest.rfind('/').map_or(0, |i| i + 1);
        let (path, tag) = match rest[slash..].rfind(':') {
            Some(i) => (&rest[..slash + i], &rest[slash + i + 1..]),
            None => (rest, ""),
        };
        if !tag.is_empty() && !valid_tag(tag) || rest.ends_with(':') {
            return Err(BAD.into());
        }
        let mut parts: Vec<&str> = path.split('/').collect();
        let registry = match parts.as_slice() {
            [first, _, ..] if first.contains(['.', ':']) || *first == "localhost" => {
                parts.remove(0)
            }
            _ => "",
        };
        let (host, port) = registry.split_once(':').unwrap_or((registry, "0"));
        let host_ok = host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b".-".contains(&b))
            && !port.is_empty()
            && port.bytes().all(|b| b.is_ascii_digit());
        if !host_ok || parts.iter().any(|p| !valid_path_component(p)) {
            return Err(if path.bytes().any(|b| b.is_ascii_uppercase()) {
                format!("{BAD}: repository name must be lowercase")
            } else {
                BAD.into()
            });
        }
        let (namespace, name) = match parts.split_first() {
            Some((ns, more)) if !more.is_empty() => (ns.to_string(), more.join("/")),
            _ => (String::new(), parts.join("/")),
        };
        Ok(DockerRef {
            registry: registry.into(),
            namespace,
            name,
            tag: tag.into(),
            id: id.into(),
        })
    }

    /// `DockerImageReference.Exact()`.
    pub fn exact(&self) -> String {
        let mut s: Vec<&str> = Vec::new();
        for p in [&self.registry, &self.namespace, &self.name] {
            if !p.is_empty() {
                s.push(p);
            }
        }
        let mut out = s.join("/");
        if !self.tag.is_empty() {
            out = format!("{out}:{}", self.tag);
        }
        if !self.id.is_empty() {
            out = format!("{out}@{}", self.id);
        }
        out
    }
}

/// A docker tag: `[\w][\w.-]{0,127}`.
pub(crate) fn valid_tag(tag: &str) -> bool {
    let word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let b = tag.as_bytes();
    !b.is_empty()
        && b.len() <= 128
        && word(b[0])
        && b.iter().all(|&c| word(c) || c == b'.' || c == b'-')
}

fn valid_path_component(p: &str) -> bool {
    let alnum = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    let b = p.as_bytes();
    !b.is_empty()
        && alnum(b[0])
        && alnum(b[b.len() - 1])
        && b.iter()
            .all(|&c| alnum(c) || c == b'.' || c == b'_' || c == b'-')
}

#[cfg(test)]
pub(crate) mod testdata {
    //! Fixture loading shared by the tests of this module tree.
    use serde::Deserialize;
    use serde_json::Value;

    /// `tests/fixtures/<name>` when present (the repository's copy of the reference objects),
    /// else the inline copy the test carries so the crate stands alone.
    pub fn fixture(name: &str, inline: &str) -> String {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures")
            .join(name);
        std::fs::read_to_string(path).unwrap_or_else(|_| inline.to_string())
    }

    /// Every document of a YAML stream; a JSON `{"object": …}` envelope is unwrapped.
    pub fn docs(text: &str) -> Vec<Value> {
        serde_yaml::Deserializer::from_str(text)
            .map(|d| Value::deserialize(d).expect("fixture parses"))
            .filter(|v| !v.is_null())
            .map(|v| match v.get("object") {
                Some(o) if v.get("kind").is_none() => o.clone(),
                _ => v,
            })
            .collect()
    }

    pub fn doc(text: &str) -> Value {
        docs(text).into_iter().next().expect("one document")
    }

    /// The object without the fields the store (not the strategy) owns.
    pub fn without_rv(mut v: Value) -> Value {
        if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
            m.remove("resourceVersion");
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(image: &str, reference: &str, generation: i64, created: &str) -> TagEvent {
        TagEvent {
            created: Some(created.into()),
            docker_image_reference: reference.into(),
            image: image.into(),
            generation,
            ..Default::default()
        }
    }

    fn stream_with(tag: &str, items: Vec<TagEvent>) -> Stream {
        let mut s = Stream::empty("ds", "nb");
        s.status_tags.insert(
            tag.into(),
            NamedTagEventList {
                tag: tag.into(),
                items: Some(items),
                ..Default::default()
            },
        );
        s
    }

    #[test]
    fn a_new_image_is_prepended_and_clears_conditions() {
        let mut s = stream_with("t", vec![ev("sha256:a", "r@sha256:a", 2, "t1")]);
        s.status_tags
            .get_mut("t")
            .unwrap()
            .conditions
            .push(TagEventCondition {
                kind: IMPORT_SUCCESS.into(),
                ..Default::default()
            });
        assert!(s.add_tag_event("t", ev("sha256:b", "r@sha256:b", 3, "t2")));
        let list = &s.status_tags["t"];
        let images: Vec<&str> = list
            .items
            .iter()
            .flatten()
            .map(|e| e.image.as_str())
            .collect();
        assert_eq!(images, ["sha256:b", "sha256:a"]);
        assert!(list.conditions.is_empty());
    }

    #[test]
    fn the_same_image_and_reference_collapse_to_a_generation_update() {
        let mut s = stream_with("t", vec![ev("sha256:a", "r@sha256:a", 2, "t1")]);
        assert!(s.add_tag_event("t", ev("sha256:a", "r@sha256:a", 5, "t9")));
        assert_eq!(
            s.status_tags["t"].items,
            Some(vec![ev("sha256:a", "r@sha256:a", 5, "t1")])
        );
        assert!(
            !s.add_tag_event("t", ev("sha256:a", "r@sha256:a", 5, "t10")),
            "identical event is a no-op"
        );
    }

    #[test]
    fn only_the_reference_changing_patches_the_newest_event_in_place() {
        let mut s = stream_with("t", vec![ev("sha256:a", "old@sha256:a", 2, "t1")]);
        s.add_tag_event("t", ev("sha256:a", "new@sha256:a", 3, "t2"));
        assert_eq!(
            s.status_tags["t"].items,
            Some(vec![ev("sha256:a", "new@sha256:a", 3, "t1")])
        );
    }

    #[test]
    fn image_ids_resolve_by_unique_prefix_across_all_histories() {
        let mut s = stream_with("a", vec![ev("sha256:abc1", "r@sha256:abc1", 1, "t")]);
        s.status_tags.insert(
            "b".into(),
            NamedTagEventList {
                items: Some(vec![ev("sha256:abd2", "q@sha256:abd2", 1, "t")]),
                ..Default::default()
            },
        );
        assert_eq!(
            s.resolve_image_id("abd", "now")
                .unwrap()
                .docker_image_reference,
            "q@sha256:abd2"
        );
        assert_eq!(
            s.resolve_image_id("sha256:abc1", "now")
                .unwrap()
                .created
                .as_deref(),
            Some("now")
        );
        assert!(
            s.resolve_image_id("ab", "now")
                .unwrap_err()
                .contains("multiple images match the prefix")
        );
        assert!(
            s.resolve_image_id("ff", "now")
                .unwrap_err()
                .ends_with("not found")
        );
    }

    #[test]
    fn docker_references_split_like_library_go() {
        let r = DockerRef::parse("image-registry.openshift-image-registry.svc:5000/ds/nb:latest")
            .unwrap();
        assert_eq!(
            (
                r.registry.as_str(),
                r.namespace.as_str(),
                r.name.as_str(),
                r.tag.as_str()
            ),
            (
                "image-registry.openshift-image-registry.svc:5000",
                "ds",
                "nb",
                "latest"
            )
        );
        let d = format!("sha256:{}", "a".repeat(64));
        let r = DockerRef::parse(&format!("python@{d}")).unwrap();
        assert_eq!((r.name.as_str(), r.id.as_str()), ("python", d.as_str()));
        assert_eq!(
            DockerRef::parse("quay.io/org/nb:3.8.12").unwrap().exact(),
            "quay.io/org/nb:3.8.12"
        );
        for bad in ["", "Quay/Org", "nb@sha256:zz", "nb:", "a b", "nb:bad/tag"] {
            assert!(DockerRef::parse(bad).is_err(), "{bad:?} must not parse");
        }
    }

    #[test]
    fn semantic_equality_treats_null_and_empty_alike_but_not_zero() {
        assert!(semantic_eq(&json!({"a": null, "b": []}), &json!({"a": {}})));
        assert!(!semantic_eq(
            &json!({"generation": null}),
            &json!({"generation": 0})
        ));
    }

    #[test]
    fn malformed_streams_are_invalid_not_panics() {
        for bad in [
            json!(3),
            json!({"spec": 1}),
            json!({"spec": {"tags": {}}}),
            json!({"spec": {"tags": [1]}}),
            json!({"spec": {"tags": [{"name": "a", "generation": "x"}]}}),
            json!({"status": {"tags": [{"tag": "a", "items": 7}]}}),
        ] {
            assert!(
                matches!(Stream::parse(&bad), Err(StrategyError::Invalid(_))),
                "{bad}"
            );
        }
        let ok = Stream::parse(
            &json!({"spec": {"tags": null}, "status": {"tags": [{"tag": "a", "items": null}]}}),
        )
        .unwrap();
        assert!(ok.spec_tags.is_empty() && ok.status_tags["a"].items.is_none());
    }
}
