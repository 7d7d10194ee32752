//! The API verbs (get, list, create, update, patch, delete) for every resource type.
//!
//! One pipeline serves all stored types: parse and check the body, apply the generic metadata
//! rules (uid, creationTimestamp, generation, resourceVersion preconditions, the status
//! subresource split), then the type's strategy (OpenShift's for ImageStreams, CRD
//! registration, namespace cascade), then commit through [`Store::write`]. The virtual
//! ImageStreamTag and ImageStreamImage views are computed from ImageStreams here too.
//!
//! - [`read`]: get and list (selectors, snapshot pagination).
//! - [`write`]: create, update and delete with the generic metadata rules and strategies.
//! - [`patching`]: the four PATCH flavours, retried on a concurrent write.
//! - [`istag`]: writes through the virtual ImageStreamTag view.
//! - [`stream_import`]: `POST imagestreamimports`, an import now.

use chrono::{SecondsFormat, Utc};
use serde_json::{Map, Value, json};

mod istag;
mod names;
mod patching;
mod read;
mod stream_import;
pub mod token;
mod write;

use super::openshift::{self, Settings, StrategyError};
use super::patch::{MergeKey, PatchError};
use super::registry::{Behavior, ResourceType};
use super::status::ApiError;
use super::store::{Reader, Store};

/// The emulated cluster: the store plus the settings of its OpenShift behaviour.
pub struct Cluster {
    /// All objects and the event log.
    pub store: Store,
    /// OpenShift settings (the internal registry host name).
    pub settings: Settings,
    /// What the upstream registries serve, for `ImageStreamImport`s.
    pub upstream: crate::upstream::Upstream,
    /// The ImageStreams seeded, at the resourceVersion their seed stored: the import
    /// controllers had seen them before (`crate::imports`), so they import a seeded stream only
    /// once something writes it again.
    pub seeded: std::sync::Mutex<std::collections::HashSet<String>>,
    /// How imports run and which registries they read over the network.
    pub imports: crate::imports::Imports,
    /// Registries added since the start through the control API (`POST registries`): host,
    /// and whether it is read over plain HTTP whatever the tag says.
    pub registries_added: std::sync::Mutex<Vec<(String, bool)>>,
    /// The scheduled import controller's interval now: [`crate::imports::Imports`]'s at the
    /// start, changed through the control API (`POST imports`).
    pub schedule: tokio::sync::watch::Sender<std::time::Duration>,
}

/// What a request addresses.
#[derive(Clone, Debug)]
pub struct Target {
    /// The resource type.
    pub ty: ResourceType,
    /// The namespace from the URL (None for cluster-scoped requests and all-namespace lists).
    pub namespace: Option<String>,
    /// The object name from the URL.
    pub name: Option<String>,
    /// The subresource (`status`).
    pub subresource: Option<String>,
}

impl Target {
    fn ns(&self) -> &str {
        self.namespace.as_deref().unwrap_or("")
    }
    fn name(&self) -> &str {
        self.name.as_deref().unwrap_or("")
    }
    fn is_status(&self) -> bool {
        self.subresource.as_deref() == Some("status")
    }
}

/// Options of a list request.
#[derive(Clone, Debug, Default)]
pub struct ListOptions {
    /// `labelSelector`.
    pub label_selector: Option<String>,
    /// `fieldSelector`.
    pub field_selector: Option<String>,
    /// `limit` (0 = no limit).
    pub limit: usize,
    /// `continue`.
    pub continue_token: Option<String>,
}

/// Options of a write request.
#[derive(Clone, Debug, Default)]
pub struct WriteOptions {
    /// `fieldManager`, or the manager derived from the User-Agent.
    pub field_manager: Option<String>,
    /// The manager name derived from the User-Agent, used when `fieldManager` is absent.
    pub default_manager: String,
    /// `force` (server-side apply).
    pub force: bool,
    /// `dryRun=All`: validate and answer without storing.
    pub dry_run: bool,
    /// The write is a server-side apply, whose managedFields the apply already computed.
    pub applied: bool,
    /// `fieldValidation`: what to do with fields a custom resource's schema does not declare.
    pub field_validation: FieldValidation,
}

/// The `fieldValidation` query parameter.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FieldValidation {
    /// Drop unknown fields silently.
    Ignore,
    /// Drop unknown fields (the server's default).
    #[default]
    Warn,
    /// Refuse a request with unknown fields (400).
    Strict,
}

impl FieldValidation {
    /// Parses the query value; None when it is not one of the three.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "Ignore" => Some(FieldValidation::Ignore),
            "Warn" | "" => Some(FieldValidation::Warn),
            "Strict" => Some(FieldValidation::Strict),
            _ => None,
        }
    }
}

/// Prunes and validates a custom resource against its CRD schema, as apiextensions-apiserver
/// does on every write.
fn apply_schema(
    ty: &ResourceType,
    obj: &mut Value,
    opts: &WriteOptions,
    name: &str,
) -> Result<(), ApiError> {
    let Some(schema) = ty
        .schema
        .as_ref()
        .filter(|_| ty.behavior == Behavior::Custom)
    else {
        return Ok(());
    };
    let unknown = super::schema::prune(schema, obj);
    if opts.field_validation == FieldValidation::Strict && !unknown.is_empty() {
        let fields: Vec<String> = unknown
            .iter()
            .map(|f| format!("unknown field \"{f}\""))
            .collect();
        return Err(ApiError::bad_request(format!(
            "{kind} in version \"{v}\" cannot be handled as a {kind}: strict decoding error: {}",
            fields.join(", "),
            kind = ty.kind,
            v = ty.version
        )));
    }
    let errors = super::schema::validate(schema, obj);
    let why = match errors.len() {
        0 => return Ok(()),
        1 => errors[0].clone(),
        _ => format!("[{}]", errors.join(", ")),
    };
    Err(ApiError::invalid(&ty.group, &ty.kind, name, why).with_field_causes(&errors))
}

impl WriteOptions {
    fn manager(&self) -> &str {
        self.field_manager
            .as_deref()
            .unwrap_or(&self.default_manager)
    }
}

pub(crate) fn now() -> String {
    Utc::now().to_rfc3339_opts(SecondsFormat::Secs, true)
}

const IMAGE_GROUP: &str = "image.openshift.io";

fn merge_keys(ty: &ResourceType) -> Vec<MergeKey> {
    let mut keys = vec![
        MergeKey {
            path: "metadata.ownerReferences",
            key: "uid",
        },
        MergeKey {
            path: "status.conditions",
            key: "type",
        },
    ];
    if ty.behavior == Behavior::ImageStream || ty.behavior == Behavior::ImageStreamTag {
        for (path, key) in openshift::IMAGESTREAM_MERGE_KEYS {
            keys.push(MergeKey { path, key });
        }
    }
    keys
}

fn strategy_error(e: StrategyError, ty: &ResourceType, name: &str) -> ApiError {
    match e {
        StrategyError::Invalid(m) => ApiError::invalid(&ty.group, &ty.kind, name, m),
        StrategyError::NotFound(m) => {
            ApiError::new(404, "NotFound", m).with_details(&ty.group, &ty.plural, name)
        }
        StrategyError::BadRequest(m) => ApiError::bad_request(m),
        StrategyError::Conflict(m) => {
            ApiError::new(409, "Conflict", m).with_details(&ty.group, &ty.plural, name)
        }
        StrategyError::AlreadyExists(m) => {
            ApiError::new(409, "AlreadyExists", m).with_details(&ty.group, &ty.plural, name)
        }
    }
}

fn patch_error(e: PatchError) -> ApiError {
    if matches!(
        e,
        PatchError::JsonPatchTestFailed { .. } | PatchError::JsonPatchFailed { .. }
    ) {
        // The patch handler wraps the JSON patch library's error in a generic 422, whose
        // message is the same for every failure.
        return ApiError::new(
            422,
            "Invalid",
            "the server rejected our request due to an error in our request",
        );
    }
    let causes = e.status_causes();
    let mut err = ApiError::new(e.http_code(), e.reason(), e.to_string());
    if !causes.is_empty() {
        err.details = Some(json!({ "causes": causes }));
    }
    err
}

fn md(obj: &Value) -> Option<&Map<String, Value>> {
    obj.get("metadata").and_then(Value::as_object)
}

fn md_str<'a>(obj: &'a Value, key: &str) -> Option<&'a str> {
    md(obj).and_then(|m| m.get(key)).and_then(Value::as_str)
}

fn md_mut(obj: &mut Value) -> Result<&mut Map<String, Value>, ApiError> {
    let o = obj
        .as_object_mut()
        .ok_or_else(|| ApiError::bad_request("the body is not a JSON object"))?;
    let m = o.entry("metadata").or_insert_with(|| json!({}));
    if m.is_null() {
        *m = json!({});
    }
    m.as_object_mut()
        .ok_or_else(|| ApiError::bad_request("metadata must be an object"))
}

/// Everything but metadata and status: what `metadata.generation` tracks.
fn spec_part(obj: &Value) -> Value {
    let mut o = obj.clone();
    if let Some(m) = o.as_object_mut() {
        m.remove("metadata");
        m.remove("status");
        m.remove("apiVersion");
        m.remove("kind");
    }
    o
}

/// The object without the fields every write changes, to tell a no-op update.
/// Whether a write leaves an object as it was, its bookkeeping aside (`resourceVersion`,
/// `managedFields`): such a write is a no-op, with no new revision and no event.
fn unchanged(a: &Value, b: &Value) -> bool {
    let (Some(a), Some(b)) = (a.as_object(), b.as_object()) else {
        return a == b;
    };
    let bookkeeping = |k: &str| k == "resourceVersion" || k == "managedFields";
    let same_metadata = |x: Option<&Value>, y: Option<&Value>| match (x, y) {
        (Some(Value::Object(x)), Some(Value::Object(y))) => {
            let x: Vec<_> = x.iter().filter(|(k, _)| !bookkeeping(k)).collect();
            let y: Vec<_> = y.iter().filter(|(k, _)| !bookkeeping(k)).collect();
            x == y
        }
        (x, y) => x == y,
    };
    a.len() == b.len()
        && a.iter().all(|(k, v)| match k.as_str() {
            "metadata" => same_metadata(Some(v), b.get("metadata")),
            _ => b.get(k) == Some(v),
        })
}

fn random_suffix() -> String {
    let id = uuid::Uuid::new_v4().simple().to_string();
    // generateName suffixes are 5 characters from a consonant-digit alphabet.
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    id.bytes()
        .take(5)
        .map(|b| ALPHABET[b as usize % ALPHABET.len()] as char)
        .collect()
}

impl Cluster {
    /// A cluster with the given settings and watch window.
    pub fn new(settings: Settings, window: crate::window::Window) -> Self {
        Cluster {
            store: Store::new(window),
            settings,
            upstream: Default::default(),
            seeded: Default::default(),
            imports: Default::default(),
            registries_added: Default::default(),
            schedule: tokio::sync::watch::Sender::new(crate::imports::DEFAULT_SCHEDULED_INTERVAL),
        }
    }

    /// Whether `stream` is exactly as its seed stored it (see [`Cluster::seeded`]).
    pub fn is_as_seeded(&self, stream: &Value) -> bool {
        let (name, version) = seeded_key(stream);
        let seeded = self.seeded.lock().unwrap_or_else(|p| p.into_inner());
        // `name@` while its seed is being written: its event may be seen before the seed
        // knows the resourceVersion it got.
        seeded.contains(&format!("{name}@{version}")) || seeded.contains(&format!("{name}@"))
    }

    pub(super) fn lookup_stream<'a>(
        reader: &'a Reader<'a>,
    ) -> impl Fn(&str, &str) -> Option<Value> + 'a {
        move |ns, name| {
            reader
                .get(IMAGE_GROUP, "imagestreams", ns, name)
                .map(|o| o.value())
        }
    }

    pub(super) fn image_lookup(&self) -> impl Fn(&str) -> Option<Value> + '_ {
        move |digest| {
            self.store
                .get(IMAGE_GROUP, "images", "", digest)
                .map(|o| o.value())
        }
    }

    /// Checks the identity fields of a body against the URL and the type.
    pub(super) fn check_body(
        &self,
        t: &Target,
        body: &mut Value,
        name_required: bool,
    ) -> Result<(), ApiError> {
        let ty = &t.ty;
        if !body.is_object() {
            return Err(ApiError::bad_request(
                "the body of the request is not a JSON object",
            ));
        }
        if let Some(kind) = body.get("kind").and_then(Value::as_str)
            && kind != ty.kind
        {
            return Err(ApiError::bad_request(format!(
                "the kind \"{kind}\" of the body does not match the resource {} (kind {})",
                ty.plural, ty.kind
            )));
        }
        if let Some(av) = body.get("apiVersion").and_then(Value::as_str)
            && av != ty.api_version()
        {
            return Err(ApiError::bad_request(format!(
                "the API version in the data ({av}) does not match the expected API version ({})",
                ty.api_version()
            )));
        }
        body["apiVersion"] = json!(ty.api_version());
        body["kind"] = json!(ty.kind);
        let url_ns = t.namespace.clone();
        let m = md_mut(body)?;
        if ty.namespaced {
            let ns = url_ns.unwrap_or_default();
            match m.get("namespace").and_then(Value::as_str) {
                Some(b) if !b.is_empty() && b != ns => {
                    return Err(ApiError::bad_request(
                        "the namespace of the provided object does not match the namespace sent on the request",
                    ));
                }
                _ => {
                    m.insert("namespace".into(), json!(ns));
                }
            }
        } else {
            m.remove("namespace");
        }
        if let Some(url_name) = &t.name {
            match m.get("name").and_then(Value::as_str) {
                Some(b) if b != url_name => {
                    return Err(ApiError::bad_request(format!(
                        "the name of the object ({b}) does not match the name on the URL ({url_name})"
                    )));
                }
                _ => {
                    m.insert("name".into(), json!(url_name));
                }
            }
        }
        if m.get("name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .is_empty()
        {
            if let Some(prefix) = m
                .get("generateName")
                .and_then(Value::as_str)
                .filter(|p| !p.is_empty())
            {
                let name = format!("{prefix}{}", random_suffix());
                m.insert("name".into(), json!(name));
            } else if name_required {
                return Err(ApiError::invalid(
                    &ty.group,
                    &ty.kind,
                    "",
                    "metadata.name: Required value: name or generateName is required",
                ));
            }
        }
        Ok(())
    }

    pub(super) fn namespace_exists(reader: &Reader<'_>, ns: &str) -> bool {
        reader.get("", "namespaces", "", ns).is_some()
    }
}

/// `namespace/name` and `resourceVersion` of an object.
pub(crate) fn seeded_key(obj: &Value) -> (String, String) {
    let m = |k: &str| {
        obj.pointer(&format!("/metadata/{k}"))
            .and_then(Value::as_str)
            .unwrap_or_default()
    };
    (
        format!("{}/{}", m("namespace"), m("name")),
        m("resourceVersion").to_string(),
    )
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::unchanged;

    #[test]
    fn a_write_is_unchanged_when_only_the_bookkeeping_differs() {
        let stored = json!({"metadata": {"name": "a", "resourceVersion": "5", "managedFields": [{"manager": "x"}]}, "data": {"k": "v"}});
        let same = json!({"metadata": {"name": "a", "resourceVersion": "9"}, "data": {"k": "v"}});
        assert!(unchanged(&stored, &same));
        assert!(unchanged(&same, &stored));
        for changed in [
            json!({"metadata": {"name": "a", "labels": {"x": "1"}}, "data": {"k": "v"}}),
            json!({"metadata": {"name": "a"}, "data": {"k": "w"}}),
            json!({"metadata": {"name": "a"}, "data": {"k": "v"}, "extra": 1}),
            json!({"data": {"k": "v"}, "other": {}}),
            json!({"metadata": {"name": "a"}}),
            json!(null),
        ] {
            assert!(!unchanged(&stored, &changed), "{changed}");
            assert!(!unchanged(&changed, &stored), "{changed}");
        }
    }
}
