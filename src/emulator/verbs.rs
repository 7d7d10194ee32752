//! The API verbs (get, list, create, update, patch, delete) for every resource type.
//!
//! One pipeline serves all stored types: parse and check the body, apply the generic metadata
//! rules (uid, creationTimestamp, generation, resourceVersion preconditions, the status
//! subresource split), then the type's strategy (OpenShift's for ImageStreams, CRD
//! registration, namespace cascade), then commit through [`Store::write`]. The virtual
//! ImageStreamTag and ImageStreamImage views are computed from ImageStreams here too.

use std::sync::Arc;

use chrono::{SecondsFormat, Utc};
use serde_json::{Map, Value, json};

use super::openshift::{self, IstagWrite, Settings, StrategyError};
use super::patch::{self, MergeKey, PatchError, PatchType};
use super::registry::{Behavior, ResourceType, types_from_crd};
use super::selector::{FieldSelector, LabelSelector, field_value};
use super::status::{ApiError, success_status};
use super::store::{Obj, Reader, Store, WriteOp, Written};

/// The emulated cluster: the store plus the settings of its OpenShift behaviour.
pub struct Cluster {
    /// All objects and the event log.
    pub store: Store,
    /// OpenShift settings (the internal registry host name).
    pub settings: Settings,
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

fn now() -> String {
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
    ApiError::new(e.http_code(), e.reason(), e.to_string())
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
fn comparable(obj: &Value) -> Value {
    let mut o = obj.clone();
    if let Some(m) = o.get_mut("metadata").and_then(Value::as_object_mut) {
        m.remove("resourceVersion");
        m.remove("managedFields");
    }
    o
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
    /// A cluster with the given settings and event retention.
    pub fn new(settings: Settings, retain: usize) -> Self {
        Cluster {
            store: Store::new(retain),
            settings,
        }
    }

    fn lookup_stream<'a>(reader: &'a Reader<'a>) -> impl Fn(&str, &str) -> Option<Value> + 'a {
        move |ns, name| {
            reader
                .get(IMAGE_GROUP, "imagestreams", ns, name)
                .map(|o| (*o).clone())
        }
    }

    fn image_lookup(&self) -> impl Fn(&str) -> Option<Value> + '_ {
        move |digest| {
            self.store
                .get(IMAGE_GROUP, "images", "", digest)
                .map(|o| (*o).clone())
        }
    }

    /// GET one object.
    pub fn get(&self, t: &Target) -> Result<Value, ApiError> {
        let ty = &t.ty;
        match ty.behavior {
            Behavior::ImageStreamTag => {
                let (is, tag) = openshift::parse_istag_name(t.name())
                    .map_err(|e| strategy_error(e, ty, t.name()))?;
                let stream = self
                    .store
                    .get(IMAGE_GROUP, "imagestreams", t.ns(), is)
                    .ok_or_else(|| ApiError::not_found(&ty.group, &ty.plural, t.name()))?;
                openshift::istag_view(&stream, tag, &self.image_lookup())
                    .map_err(|e| strategy_error(e, ty, t.name()))
            }
            Behavior::ImageStreamImage => {
                let is = t.name().split('@').next().unwrap_or_default();
                if !t.name().contains('@') {
                    return Err(ApiError::bad_request(
                        "ImageStreamImages must be retrieved with <name>@<id>",
                    ));
                }
                let stream = self
                    .store
                    .get(IMAGE_GROUP, "imagestreams", t.ns(), is)
                    .ok_or_else(|| ApiError::not_found(&ty.group, &ty.plural, t.name()))?;
                openshift::isimage_view(&stream, t.name(), &self.image_lookup())
                    .map_err(|e| strategy_error(e, ty, t.name()))
            }
            _ => self
                .store
                .get(&ty.group, &ty.plural, t.ns(), t.name())
                .map(|o| (*o).clone())
                .ok_or_else(|| ApiError::not_found(&ty.group, &ty.plural, t.name())),
        }
    }

    /// Checks a field selector against the fields the type supports, like kube's conversion
    /// functions do (`field label not supported`).
    pub fn field_selector(
        &self,
        ty: &ResourceType,
        s: Option<&str>,
    ) -> Result<FieldSelector, ApiError> {
        let fs = FieldSelector::parse(s.unwrap_or(""))
            .map_err(|e| ApiError::bad_request(e.to_string()))?;
        for f in fs.fields() {
            if !supported_field(ty, f) {
                return Err(ApiError::bad_request(format!(
                    "field label not supported: {f}"
                )));
            }
        }
        Ok(fs)
    }

    /// Whether an object passes the selectors of a list or watch.
    pub fn selected(obj: &Value, ls: &LabelSelector, fs: &FieldSelector) -> bool {
        ls.matches_value(obj.pointer("/metadata/labels"))
            && fs.matches(&|path: &str| field_value(obj, path))
    }

    /// LIST a collection.
    pub fn list(&self, t: &Target, opts: &ListOptions) -> Result<Value, ApiError> {
        let ty = &t.ty;
        if !ty.allows("list") {
            return Err(ApiError::method_not_allowed("list", &ty.group, &ty.plural));
        }
        let ls = LabelSelector::parse(opts.label_selector.as_deref().unwrap_or(""))
            .map_err(|e| ApiError::bad_request(e.to_string()))?;
        let fs = self.field_selector(ty, opts.field_selector.as_deref())?;
        let (items, rv, start) = match &opts.continue_token {
            Some(token) => {
                let (id, start) = decode_continue(token)?;
                let (rv, items) = self.store.snapshot(id).ok_or_else(|| {
                    ApiError::expired(
                        "The provided continue parameter is too old to display a consistent list result. \
                         You can start a new list without the continue parameter.",
                    )
                })?;
                (items, rv, start)
            }
            None => {
                let (all, rv) = if ty.behavior == Behavior::ImageStreamTag {
                    let (streams, rv) =
                        self.store
                            .list(IMAGE_GROUP, "imagestreams", t.namespace.as_deref());
                    let streams: Vec<Value> = streams
                        .iter()
                        .filter(|s| ls.matches_value(s.pointer("/metadata/labels")))
                        .map(|s| (**s).clone())
                        .collect();
                    let views = openshift::istag_list(&streams)
                        .into_iter()
                        .filter(|v| fs.matches(&|p: &str| field_value(v, p)))
                        .map(Arc::new)
                        .collect();
                    (views, rv)
                } else {
                    let (all, rv) = self
                        .store
                        .list(&ty.group, &ty.plural, t.namespace.as_deref());
                    let all = all
                        .into_iter()
                        .filter(|o| Self::selected(o, &ls, &fs))
                        .collect();
                    (all, rv)
                };
                (all, rv, 0)
            }
        };
        let mut metadata = json!({ "resourceVersion": rv.to_string() });
        let page: Vec<Value> = if opts.limit > 0 && items.len() > start + opts.limit {
            let end = start + opts.limit;
            let id = match &opts.continue_token {
                Some(token) => decode_continue(token)?.0,
                None => self.store.save_snapshot(rv, items.clone()),
            };
            metadata["continue"] = json!(encode_continue(id, end));
            metadata["remainingItemCount"] = json!(items.len() - end);
            items[start..end].iter().map(|o| (**o).clone()).collect()
        } else {
            items
                .get(start..)
                .unwrap_or_default()
                .iter()
                .map(|o| (**o).clone())
                .collect()
        };
        Ok(json!({
            "apiVersion": ty.api_version(),
            "kind": ty.list_kind(),
            "metadata": metadata,
            "items": page,
        }))
    }

    /// Checks the identity fields of a body against the URL and the type.
    fn check_body(
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
                    return Err(ApiError::bad_request(
                        "the name of the object does not match the name on the URL",
                    ));
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

    fn namespace_exists(reader: &Reader<'_>, ns: &str) -> bool {
        reader.get("", "namespaces", "", ns).is_some()
    }

    /// POST: create an object.
    pub fn create(
        &self,
        t: &Target,
        mut body: Value,
        opts: &WriteOptions,
    ) -> Result<Value, ApiError> {
        let ty = t.ty.clone();
        if !ty.allows("create") {
            return Err(ApiError::method_not_allowed(
                "create", &ty.group, &ty.plural,
            ));
        }
        if ty.behavior == Behavior::ImageStreamTag {
            return self.istag_write(t, body, IstagWrite::Create, opts);
        }
        self.check_body(t, &mut body, true)?;
        let name = md_str(&body, "name").unwrap_or_default().to_string();
        let ns = t.ns().to_string();
        let written = self
            .store
            .write(&ty.group, &ty.plural, &ns, &name, |reader, current| {
                if current.is_some() {
                    return Err(ApiError::already_exists(&ty.group, &ty.plural, &name));
                }
                if ty.namespaced && !Self::namespace_exists(reader, &ns) {
                    return Err(ApiError::not_found("", "namespaces", &ns));
                }
                let obj = self.prepare_create(reader, &ty, body, opts)?;
                if opts.dry_run {
                    return Ok(WriteOp::Unchanged(Arc::new(obj)));
                }
                Ok(WriteOp::Put(obj))
            })?;
        self.after_write(&ty, &written);
        Ok((*written.object).clone())
    }

    fn prepare_create(
        &self,
        reader: &Reader<'_>,
        ty: &ResourceType,
        mut obj: Value,
        opts: &WriteOptions,
    ) -> Result<Value, ApiError> {
        let name = md_str(&obj, "name").unwrap_or_default().to_string();
        {
            let m = md_mut(&mut obj)?;
            m.insert("uid".into(), json!(uuid::Uuid::new_v4().to_string()));
            m.insert("creationTimestamp".into(), json!(now()));
            m.remove("resourceVersion");
            m.remove("deletionTimestamp");
            m.remove("generation");
            if ty.has_generation {
                m.insert("generation".into(), json!(1));
            }
        }
        if ty.status_subresource
            && let Some(o) = obj.as_object_mut()
        {
            o.remove("status");
        }
        match ty.behavior {
            Behavior::ImageStream => {
                let lookup = Self::lookup_stream(reader);
                openshift::prepare_create(&mut obj, &self.settings, &lookup, &now())
                    .map_err(|e| strategy_error(e, ty, &name))?;
            }
            Behavior::Namespace => {
                obj["spec"] = json!({ "finalizers": ["kubernetes"] });
                obj["status"] = json!({ "phase": "Active" });
            }
            Behavior::Crd => {
                types_from_crd(&obj)
                    .map_err(|e| ApiError::invalid(&ty.group, &ty.kind, &name, e))?;
                let names = obj.pointer("/spec/names").cloned().unwrap_or(Value::Null);
                obj["status"] = json!({
                    "acceptedNames": names,
                    "conditions": [
                        {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts",
                         "message": "no conflicts found", "lastTransitionTime": now()},
                        {"type": "Established", "status": "True", "reason": "InitialNamesAccepted",
                         "message": "the initial names have been accepted", "lastTransitionTime": now()},
                    ],
                    "storedVersions": obj.pointer("/spec/versions").and_then(Value::as_array)
                        .map(|vs| vs.iter().filter(|v| v.get("storage") == Some(&json!(true)))
                            .filter_map(|v| v.get("name").cloned()).collect::<Vec<_>>())
                        .unwrap_or_default(),
                });
            }
            _ => {}
        }
        apply_schema(ty, &mut obj, opts, &name)?;
        patch::record_update(None, &mut obj, opts.manager(), &ty.api_version(), &now());
        Ok(obj)
    }

    /// Registers or unregisters CRD types after a committed write.
    fn after_write(&self, ty: &ResourceType, written: &Written) {
        if ty.behavior != Behavior::Crd {
            return;
        }
        match written.event {
            Some(super::store::EventType::Added) | Some(super::store::EventType::Modified) => {
                if let Ok(types) = types_from_crd(&written.object) {
                    self.store.register_types(types);
                }
            }
            _ => {}
        }
    }

    /// PUT: replace an object (or its status).
    pub fn update(
        &self,
        t: &Target,
        mut body: Value,
        opts: &WriteOptions,
    ) -> Result<Value, ApiError> {
        let ty = t.ty.clone();
        if !ty.allows("update") {
            return Err(ApiError::method_not_allowed(
                "update", &ty.group, &ty.plural,
            ));
        }
        if ty.behavior == Behavior::ImageStreamTag {
            return self.istag_write(t, body, IstagWrite::Update, opts);
        }
        self.check_body(t, &mut body, true)?;
        let unconditional_allowed = ty.behavior != Behavior::ImageStream;
        if !unconditional_allowed && md_str(&body, "resourceVersion").is_none_or(str::is_empty) {
            return Err(ApiError::invalid(
                &ty.group,
                &ty.kind,
                t.name(),
                "metadata.resourceVersion: Invalid value: 0x0: must be specified for an update",
            ));
        }
        self.replace(t, &ty, body, opts, None)
    }

    /// The shared tail of PUT and PATCH: preconditions, metadata rules, strategy, commit.
    /// `expected_rv` is the revision a patch was computed from (the write conflicts with any
    /// other, and is retried by the caller).
    fn replace(
        &self,
        t: &Target,
        ty: &ResourceType,
        body: Value,
        opts: &WriteOptions,
        expected_rv: Option<String>,
    ) -> Result<Value, ApiError> {
        let name = t.name().to_string();
        let ns = t.ns().to_string();
        let written = self
            .store
            .write(&ty.group, &ty.plural, &ns, &name, |reader, current| {
                let Some(current) = current else {
                    return Err(ApiError::not_found(&ty.group, &ty.plural, &name));
                };
                let current_rv = md_str(current, "resourceVersion").unwrap_or_default();
                if let Some(rv) = &expected_rv
                    && rv != current_rv
                {
                    return Err(ApiError::conflict(&ty.group, &ty.plural, &name));
                }
                if let Some(rv) = md_str(&body, "resourceVersion").filter(|rv| !rv.is_empty())
                    && rv != current_rv
                {
                    return Err(ApiError::conflict(&ty.group, &ty.plural, &name));
                }
                let new = self.prepare_update(reader, t, ty, current, body, opts)?;
                if comparable(&new) == comparable(current) || opts.dry_run {
                    return Ok(WriteOp::Unchanged(if opts.dry_run {
                        Arc::new(new)
                    } else {
                        current.clone()
                    }));
                }
                Ok(WriteOp::Put(new))
            })?;
        self.after_write(ty, &written);
        Ok((*written.object).clone())
    }

    fn prepare_update(
        &self,
        reader: &Reader<'_>,
        t: &Target,
        ty: &ResourceType,
        old: &Obj,
        mut new: Value,
        opts: &WriteOptions,
    ) -> Result<Value, ApiError> {
        let name = t.name().to_string();
        // Fields the server owns survive any write.
        {
            let m = md_mut(&mut new)?;
            for key in [
                "uid",
                "creationTimestamp",
                "generation",
                "deletionTimestamp",
            ] {
                match old.pointer(&format!("/metadata/{key}")) {
                    Some(v) => {
                        m.insert(key.into(), v.clone());
                    }
                    None => {
                        m.remove(key);
                    }
                }
            }
        }
        if t.is_status() {
            // The status subresource writes status only. Custom resources also keep their
            // metadata; openshift-apiserver's StatusStrategy applies metadata changes.
            let mut out = (**old).clone();
            out["status"] = new.get("status").cloned().unwrap_or(Value::Null);
            if ty.behavior == Behavior::ImageStream {
                out["metadata"] = new["metadata"].clone();
                openshift::prepare_status_update(old, &mut out, &self.settings)
                    .map_err(|e| strategy_error(e, ty, &name))?;
            }
            apply_schema(ty, &mut out, opts, &name)?;
            if !opts.applied {
                patch::record_update(
                    Some(old),
                    &mut out,
                    opts.manager(),
                    &ty.api_version(),
                    &now(),
                );
            }
            return Ok(out);
        }
        if ty.status_subresource {
            match old.get("status") {
                Some(s) => new["status"] = s.clone(),
                None => {
                    if let Some(o) = new.as_object_mut() {
                        o.remove("status");
                    }
                }
            }
        }
        match ty.behavior {
            Behavior::ImageStream => {
                let lookup = Self::lookup_stream(reader);
                openshift::prepare_update(old, &mut new, &self.settings, &lookup, &now())
                    .map_err(|e| strategy_error(e, ty, &name))?;
            }
            Behavior::Namespace => {
                new["status"] = old
                    .get("status")
                    .cloned()
                    .unwrap_or(json!({"phase": "Active"}));
            }
            Behavior::Crd => {
                types_from_crd(&new)
                    .map_err(|e| ApiError::invalid(&ty.group, &ty.kind, &name, e))?;
                if let Some(s) = old.get("status") {
                    new["status"] = s.clone();
                }
            }
            _ => {}
        }
        if ty.has_generation
            && ty.behavior != Behavior::ImageStream
            && spec_part(&new) != spec_part(old)
        {
            let g = old
                .pointer("/metadata/generation")
                .and_then(Value::as_i64)
                .unwrap_or(1);
            new["metadata"]["generation"] = json!(g + 1);
        }
        apply_schema(ty, &mut new, opts, &name)?;
        if !opts.applied {
            patch::record_update(
                Some(old),
                &mut new,
                opts.manager(),
                &ty.api_version(),
                &now(),
            );
        }
        Ok(new)
    }

    /// PATCH: merge, JSON, strategic merge or server-side apply. Returns the HTTP code (201
    /// when an apply created the object) and the object.
    pub fn patch(
        &self,
        t: &Target,
        kind: PatchType,
        body: &[u8],
        opts: &WriteOptions,
    ) -> Result<(u16, Value), ApiError> {
        let ty = t.ty.clone();
        if !ty.allows("patch") {
            return Err(ApiError::method_not_allowed("patch", &ty.group, &ty.plural));
        }
        if kind == PatchType::Strategic && ty.behavior == Behavior::Custom {
            return Err(ApiError::new(
                415,
                "UnsupportedMediaType",
                "the body of the request was in an unknown format - accepted media types include: \
                 application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml",
            ));
        }
        let patch_doc: Value = if kind == PatchType::Apply {
            if opts.field_manager.as_deref().unwrap_or("").is_empty() {
                return Err(ApiError::invalid(
                    "meta.k8s.io",
                    "PatchOptions",
                    "",
                    "fieldManager: Required value: is required for apply patch",
                ));
            }
            serde_yaml::from_slice(body)
                .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))?
        } else {
            serde_json::from_slice(body)
                .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?
        };
        let keys = merge_keys(&ty);
        // A patch is computed against the current object and committed only if nothing else
        // wrote meanwhile; on a race it is recomputed, as the apiserver's patcher does.
        for _ in 0..5 {
            let current = if ty.behavior == Behavior::ImageStreamTag {
                // The real server patches the synthesized view, also of a spec tag that has
                // no image yet.
                let (is, _) = openshift::parse_istag_name(t.name())
                    .map_err(|e| strategy_error(e, &ty, t.name()))?;
                let stream = self.store.get(IMAGE_GROUP, "imagestreams", t.ns(), is);
                Some(
                    openshift::istag_patch_base(stream.as_deref(), t.ns(), t.name())
                        .map_err(|e| strategy_error(e, &ty, t.name()))?,
                )
            } else {
                self.store
                    .get(&ty.group, &ty.plural, t.ns(), t.name())
                    .map(|o| (*o).clone())
            };
            let Some(current) = current else {
                if kind == PatchType::Apply {
                    let mut created = patch::server_side_apply(patch::ApplyRequest {
                        live: None,
                        applied: &patch_doc,
                        manager: opts.field_manager.as_deref().unwrap_or_default(),
                        force: opts.force,
                        keys: &keys,
                        api_version: &ty.api_version(),
                        now: &now(),
                    })
                    .map_err(patch_error)?;
                    if let Some(o) = created.as_object_mut()
                        && ty.status_subresource
                    {
                        o.remove("status");
                    }
                    let mut opts2 = opts.clone();
                    opts2.field_manager = None;
                    let target = Target {
                        name: t.name.clone(),
                        ..t.clone()
                    };
                    let obj = self.create_preserving_fields(&target, created, &opts2)?;
                    return Ok((201, obj));
                }
                return Err(ApiError::not_found(&ty.group, &ty.plural, t.name()));
            };
            let current_rv = md_str(&current, "resourceVersion").map(str::to_string);
            let patched = match kind {
                PatchType::Merge => patch::merge_patch(&current, &patch_doc),
                PatchType::Json => patch::json_patch(&current, &patch_doc).map_err(|e| {
                    let mut err = patch_error(e);
                    err.details = None;
                    err
                })?,
                PatchType::Strategic => patch::strategic_merge_patch(&current, &patch_doc, &keys)
                    .map_err(patch_error)?,
                PatchType::Apply => patch::server_side_apply(patch::ApplyRequest {
                    live: Some(&current),
                    applied: &patch_doc,
                    manager: opts.field_manager.as_deref().unwrap_or_default(),
                    force: opts.force,
                    keys: &keys,
                    api_version: &ty.api_version(),
                    now: &now(),
                })
                .map_err(patch_error)?,
            };
            if ty.behavior == Behavior::ImageStreamTag {
                let obj = self.istag_write(t, patched, IstagWrite::Update, opts)?;
                return Ok((200, obj));
            }
            // A resourceVersion inside the patch is a precondition on the stored object.
            let applied_opts = WriteOptions {
                applied: kind == PatchType::Apply,
                ..opts.clone()
            };
            let result = self.replace(t, &ty, patched, &applied_opts, current_rv);
            match result {
                Err(e) if e.code == 409 && e.reason == "Conflict" && !patch_sets_rv(&patch_doc) => {
                    continue;
                }
                other => return other.map(|o| (200, o)),
            }
        }
        Err(ApiError::conflict(&ty.group, &ty.plural, t.name()))
    }

    /// Creates an object whose managedFields were computed by an apply.
    fn create_preserving_fields(
        &self,
        t: &Target,
        body: Value,
        opts: &WriteOptions,
    ) -> Result<Value, ApiError> {
        let managed = body.pointer("/metadata/managedFields").cloned();
        let mut obj = self.create(t, body, opts)?;
        if let Some(mf) = managed {
            // Re-store with the apply's ownership (create recorded an Update manager instead).
            let ty = t.ty.clone();
            let ns = t.ns().to_string();
            let name = md_str(&obj, "name").unwrap_or_default().to_string();
            let w = self
                .store
                .write(&ty.group, &ty.plural, &ns, &name, |_, cur| {
                    let mut o = (**cur
                        .ok_or_else(|| ApiError::not_found(&ty.group, &ty.plural, &name))?)
                    .clone();
                    o["metadata"]["managedFields"] = mf;
                    Ok(WriteOp::Put(o))
                })?;
            obj = (*w.object).clone();
        }
        Ok(obj)
    }

    /// DELETE one object.
    pub fn delete(&self, t: &Target, body: Option<Value>) -> Result<Value, ApiError> {
        let ty = t.ty.clone();
        if !ty.allows("delete") {
            return Err(ApiError::method_not_allowed(
                "delete", &ty.group, &ty.plural,
            ));
        }
        let name = t.name().to_string();
        let ns = t.ns().to_string();
        if ty.behavior == Behavior::ImageStreamTag {
            let (is, tag) =
                openshift::parse_istag_name(&name).map_err(|e| strategy_error(e, &ty, &name))?;
            let (is, tag) = (is.to_string(), tag.to_string());
            self.store
                .write(IMAGE_GROUP, "imagestreams", &ns, &is, |_, current| {
                    let current =
                        current.ok_or_else(|| ApiError::not_found(&ty.group, &ty.plural, &name))?;
                    let mut new = openshift::istag_delete(current, &tag)
                        .map_err(|e| strategy_error(e, &ty, &name))?;
                    bump_generation_if_spec_changed(current, &mut new);
                    Ok(WriteOp::Put(new))
                })?;
            return Ok(success_status(&ty.group, &ty.plural, &name, None));
        }
        let pre_uid = body
            .as_ref()
            .and_then(|b| b.pointer("/preconditions/uid"))
            .and_then(Value::as_str)
            .map(str::to_string);
        let pre_rv = body
            .as_ref()
            .and_then(|b| b.pointer("/preconditions/resourceVersion"))
            .and_then(Value::as_str)
            .map(str::to_string);
        let written = self
            .store
            .write(&ty.group, &ty.plural, &ns, &name, |_, current| {
                let Some(current) = current else {
                    return Err(ApiError::not_found(&ty.group, &ty.plural, &name));
                };
                if let Some(uid) = &pre_uid
                    && md_str(current, "uid") != Some(uid)
                {
                    return Err(ApiError::conflict(&ty.group, &ty.plural, &name));
                }
                if let Some(rv) = &pre_rv
                    && md_str(current, "resourceVersion") != Some(rv)
                {
                    return Err(ApiError::conflict(&ty.group, &ty.plural, &name));
                }
                Ok(WriteOp::Delete)
            })?;
        match ty.behavior {
            Behavior::Namespace => self.delete_namespace_content(&name),
            Behavior::Crd => {
                if let (Some(g), Some(p)) = (
                    written
                        .object
                        .pointer("/spec/group")
                        .and_then(Value::as_str),
                    written
                        .object
                        .pointer("/spec/names/plural")
                        .and_then(Value::as_str),
                ) {
                    self.store.unregister(g, p);
                }
            }
            _ => {}
        }
        let uid = md_str(&written.object, "uid");
        Ok(match ty.behavior {
            // Custom resources answer with the deleted object, built-in kinds with a Status.
            Behavior::Custom | Behavior::Crd => (*written.object).clone(),
            _ => success_status(&ty.group, &ty.plural, &name, uid),
        })
    }

    fn delete_namespace_content(&self, ns: &str) {
        for ty in self.store.types() {
            if !ty.namespaced || ty.is_virtual() {
                continue;
            }
            let (items, _) = self.store.list(&ty.group, &ty.plural, Some(ns));
            for o in items {
                if let Some(name) = md_str(&o, "name") {
                    let _ = self
                        .store
                        .write(&ty.group, &ty.plural, ns, name, |_, cur| match cur {
                            Some(_) => Ok(WriteOp::Delete),
                            None => Err(ApiError::not_found(&ty.group, &ty.plural, name)),
                        });
                }
            }
        }
    }

    /// POST/PUT of an ImageStreamTag: a write of its ImageStream.
    fn istag_write(
        &self,
        t: &Target,
        mut body: Value,
        mode: IstagWrite,
        opts: &WriteOptions,
    ) -> Result<Value, ApiError> {
        let ty = t.ty.clone();
        self.check_body(t, &mut body, true)?;
        let name = md_str(&body, "name").unwrap_or_default().to_string();
        let (is, _) =
            openshift::parse_istag_name(&name).map_err(|e| strategy_error(e, &ty, &name))?;
        let is = is.to_string();
        let ns = t.ns().to_string();
        let is_type = self
            .store
            .find_type(IMAGE_GROUP, "v1", "imagestreams")
            .ok_or_else(|| ApiError::internal("imagestreams are not served"))?;
        let written =
            self.store
                .write(IMAGE_GROUP, "imagestreams", &ns, &is, |reader, current| {
                    if !Self::namespace_exists(reader, &ns) {
                        return Err(ApiError::not_found("", "namespaces", &ns));
                    }
                    let stream = current.map(|c| &**c);
                    let mut new = openshift::istag_write(stream, &ns, &body, mode)
                        .map_err(|e| strategy_error(e, &ty, &name))?;
                    let lookup = Self::lookup_stream(reader);
                    match current {
                        Some(old) => {
                            {
                                let m = md_mut(&mut new)?;
                                for key in ["uid", "creationTimestamp", "generation"] {
                                    if let Some(v) = old.pointer(&format!("/metadata/{key}")) {
                                        m.insert(key.into(), v.clone());
                                    }
                                }
                            }
                            new["status"] = old.get("status").cloned().unwrap_or(Value::Null);
                            openshift::prepare_update(
                                old,
                                &mut new,
                                &self.settings,
                                &lookup,
                                &now(),
                            )
                            .map_err(|e| strategy_error(e, &is_type, &is))?;
                            patch::record_update(
                                Some(old),
                                &mut new,
                                opts.manager(),
                                &is_type.api_version(),
                                &now(),
                            );
                            if comparable(&new) == comparable(old) {
                                return Ok(WriteOp::Unchanged(old.clone()));
                            }
                        }
                        None => {
                            new["apiVersion"] = json!(is_type.api_version());
                            new["kind"] = json!(is_type.kind);
                            new["metadata"]["namespace"] = json!(ns);
                            new["metadata"]["name"] = json!(is);
                            new = self.prepare_create(reader, &is_type, new, opts)?;
                        }
                    }
                    if opts.dry_run {
                        return Ok(WriteOp::Unchanged(Arc::new(new)));
                    }
                    Ok(WriteOp::Put(new))
                })?;
        let (_, tag) =
            openshift::parse_istag_name(&name).map_err(|e| strategy_error(e, &ty, &name))?;
        openshift::istag_write_response(&written.object, tag, &self.image_lookup())
            .map_err(|e| strategy_error(e, &ty, &name))
    }

    /// Writes an ImageStream as the import controller does (its internal strategy writes spec
    /// and status together and is not subject to the user-facing rules).
    pub fn internal_write<F>(
        &self,
        group: &str,
        plural: &str,
        ns: &str,
        name: &str,
        f: F,
    ) -> Result<Written, ApiError>
    where
        F: FnOnce(Option<&Obj>) -> Result<Option<Value>, ApiError>,
    {
        self.store
            .write(group, plural, ns, name, |_, current| match f(current)? {
                Some(v) => Ok(WriteOp::Put(v)),
                None => match current {
                    Some(c) => Ok(WriteOp::Unchanged(c.clone())),
                    None => Err(ApiError::not_found(group, plural, name)),
                },
            })
    }
}

fn bump_generation_if_spec_changed(old: &Value, new: &mut Value) {
    if spec_part(old) != spec_part(new) {
        let g = old
            .pointer("/metadata/generation")
            .and_then(Value::as_i64)
            .unwrap_or(1);
        new["metadata"]["generation"] = json!(g + 1);
    }
}

fn patch_sets_rv(patch: &Value) -> bool {
    match patch {
        Value::Object(o) => o
            .get("metadata")
            .and_then(|m| m.get("resourceVersion"))
            .is_some_and(|v| !v.is_null()),
        Value::Array(ops) => ops
            .iter()
            .any(|op| op.get("path").and_then(Value::as_str) == Some("/metadata/resourceVersion")),
        _ => false,
    }
}

fn supported_field(ty: &ResourceType, field: &str) -> bool {
    if field == "metadata.name" || (field == "metadata.namespace" && ty.namespaced) {
        return true;
    }
    match (ty.group.as_str(), ty.plural.as_str()) {
        (IMAGE_GROUP, "imagestreams") => {
            matches!(
                field,
                "spec.dockerImageRepository" | "status.dockerImageRepository"
            )
        }
        ("", "events") => matches!(
            field,
            "involvedObject.kind"
                | "involvedObject.namespace"
                | "involvedObject.name"
                | "involvedObject.uid"
                | "involvedObject.apiVersion"
                | "involvedObject.resourceVersion"
                | "involvedObject.fieldPath"
                | "reason"
                | "reportingComponent"
                | "source"
                | "type"
        ),
        ("", "namespaces") => field == "status.phase",
        _ => false,
    }
}

fn encode_continue(id: u64, start: usize) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(format!("{{\"s\":{id},\"o\":{start}}}"))
}

fn decode_continue(token: &str) -> Result<(u64, usize), ApiError> {
    use base64::Engine;
    let bad = || ApiError::bad_request("continue key is not valid: invalid continue token");
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(token)
        .map_err(|_| bad())?;
    let v: Value = serde_json::from_slice(&raw).map_err(|_| bad())?;
    let id = v.get("s").and_then(Value::as_u64).ok_or_else(bad)?;
    let start = v.get("o").and_then(Value::as_u64).ok_or_else(bad)? as usize;
    Ok((id, start))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn continue_tokens_round_trip() {
        let t = encode_continue(12, 500);
        assert_eq!(decode_continue(&t).unwrap(), (12, 500));
        assert!(decode_continue("not a token!").is_err());
    }
}
