//! Create, update (PUT) and delete, for every stored type: the generic metadata rules (uid,
//! creationTimestamp, generation, resourceVersion preconditions, the status subresource
//! split), the type's strategy, then one commit through the store.

use std::sync::Arc;

use serde_json::{Value, json};

use super::{
    Cluster, Target, WriteOptions, apply_schema, md_mut, md_str, now, spec_part, strategy_error,
    unchanged,
};
use crate::openshift::{self, IstagWrite};
use crate::patch;
use crate::registry::{Behavior, ResourceType, types_from_crd};
use crate::status::{ApiError, success_status};
use crate::store::{EventType, Obj, Reader, Stored, WriteOp, Written};

const IMAGE_GROUP: &str = "image.openshift.io";

impl Cluster {
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
        if ty.behavior == Behavior::SubjectAccessReview {
            return crate::rbac::review::review(&self.store, body);
        }
        if ty.behavior == Behavior::ImageStreamImport {
            return self.stream_import(t, body, None);
        }
        if md_str(&body, "resourceVersion").is_some_and(|rv| !rv.is_empty()) {
            // The storage layer's refusal, which the registry passes on unclassified.
            return Err(ApiError::new(
                500,
                "",
                "resourceVersion should not be set on objects to be created",
            ));
        }
        self.check_body(t, &mut body, true)?;
        let name = md_str(&body, "name").unwrap_or_default().to_string();
        // Images are named by their digest (`sha256:…`), which openshift-apiserver allows.
        if matches!(ty.behavior, Behavior::Builtin | Behavior::Custom) && ty.group != IMAGE_GROUP {
            super::names::check_name(&ty, &body)?;
        }
        let ns = t.ns().to_string();
        let written =
            self.store
                .write_optimistic(&ty.group, &ty.plural, &ns, &name, |reader, current| {
                    if current.is_some() {
                        return Err(ApiError::already_exists(&ty.group, &ty.plural, &name));
                    }
                    if ty.namespaced && !Self::namespace_exists(reader, &ns) {
                        return Err(ApiError::not_found("", "namespaces", &ns));
                    }
                    let obj = self.prepare_create(reader, &ty, body.clone(), opts)?;
                    if opts.dry_run {
                        return Ok(WriteOp::Unchanged(Arc::new(Stored::new(&obj))));
                    }
                    Ok(WriteOp::Put(obj))
                })?;
        self.after_write(&ty, &written);
        Ok(written.object.value())
    }

    pub(super) fn prepare_create(
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
                label_with_name(&mut obj, &name);
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
        if !opts.applied {
            patch::record_update(None, &mut obj, opts.manager(), &ty.api_version(), &now());
        }
        Ok(obj)
    }

    /// Registers or unregisters CRD types after a committed write.
    pub(super) fn after_write(&self, ty: &ResourceType, written: &Written) {
        if ty.behavior != Behavior::Crd {
            return;
        }
        match written.event {
            Some(EventType::Added) | Some(EventType::Modified) => {
                if let Ok(types) = types_from_crd(&written.object.value()) {
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
        if md_str(&body, "resourceVersion").is_none_or(str::is_empty) {
            match ty.behavior {
                Behavior::ImageStream => {
                    return Err(ApiError::invalid(
                        &ty.group,
                        &ty.kind,
                        t.name(),
                        "metadata.resourceVersion: Invalid value: 0x0: must be specified for an update",
                    ));
                }
                // apiextensions-apiserver allows no unconditional update of a custom resource,
                // and names the resource, not the kind.
                Behavior::Custom => {
                    // Checked after the object is found: a missing one is 404 first.
                    self.get(t)?;
                    let why = "metadata.resourceVersion: Invalid value: 0: must be specified for an update";
                    return Err(ApiError::invalid(&ty.group, &ty.plural, t.name(), why)
                        .with_field_causes(&[why.to_string()]));
                }
                _ => {}
            }
        }
        self.replace(t, &ty, body, opts, None)
    }

    /// The shared tail of PUT and PATCH: preconditions, metadata rules, strategy, commit.
    /// `expected_rv` is the revision a patch was computed from (the write conflicts with any
    /// other, and is retried by the caller).
    pub(super) fn replace(
        &self,
        t: &Target,
        ty: &ResourceType,
        body: Value,
        opts: &WriteOptions,
        expected_rv: Option<String>,
    ) -> Result<Value, ApiError> {
        let name = t.name().to_string();
        let ns = t.ns().to_string();
        let written =
            self.store
                .write_optimistic(&ty.group, &ty.plural, &ns, &name, |reader, current| {
                    let Some(stored) = current else {
                        return Err(ApiError::not_found(&ty.group, &ty.plural, &name));
                    };
                    let current = &stored.value();
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
                    let new = self.prepare_update(reader, t, ty, current, body.clone(), opts)?;
                    if unchanged(&new, current) || opts.dry_run {
                        return Ok(WriteOp::Unchanged(if opts.dry_run {
                            Arc::new(Stored::new(&new))
                        } else {
                            stored.clone()
                        }));
                    }
                    Ok(WriteOp::Put(new))
                })?;
        self.after_write(ty, &written);
        Ok(written.object.value())
    }

    pub(super) fn prepare_update(
        &self,
        reader: &Reader<'_>,
        t: &Target,
        ty: &ResourceType,
        old: &Value,
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
            let mut out = old.clone();
            out["status"] = new.get("status").cloned().unwrap_or(Value::Null);
            if ty.behavior == Behavior::ImageStream {
                out["metadata"] = new["metadata"].clone();
                openshift::prepare_status_update(old, &mut out, &self.settings)
                    .map_err(|e| strategy_error(e, ty, &name))?;
            }
            apply_schema(ty, &mut out, opts, &name)?;
            if !opts.applied {
                let writer = patch::Writer {
                    manager: opts.manager(),
                    api_version: &ty.api_version(),
                    subresource: "status",
                    keys: patch::DEFAULT_MERGE_KEYS,
                    now: &now(),
                };
                patch::record_write(Some(old), &mut out, &writer);
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
                label_with_name(&mut new, &name);
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
                    let current = &current
                        .ok_or_else(|| ApiError::not_found(&ty.group, &ty.plural, &name))?
                        .value();
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
                let Some(current) = current.map(|c| c.value()) else {
                    return Err(ApiError::not_found(&ty.group, &ty.plural, &name));
                };
                let current = &current;
                if let Some(uid) = &pre_uid
                    && md_str(current, "uid") != Some(uid)
                {
                    let stored = md_str(current, "uid").unwrap_or_default();
                    return Err(ApiError::new(
                        409,
                        "Conflict",
                        format!(
                            "Operation cannot be fulfilled on {} \"{name}\": the UID in the precondition \
                             ({uid}) does not match the UID in record ({stored}). The object might have \
                             been deleted and then recreated",
                            if ty.group.is_empty() { ty.kind.clone() } else { format!("{}.{}", ty.kind, ty.group) }
                        ),
                    )
                    .with_details(&ty.group, &ty.kind, &name));
                }
                if let Some(rv) = &pre_rv
                    && md_str(current, "resourceVersion") != Some(rv)
                {
                    return Err(ApiError::conflict(&ty.group, &ty.plural, &name));
                }
                Ok(WriteOp::Delete)
            })?;
        let deleted = written.object.value();
        match ty.behavior {
            Behavior::Namespace => self.delete_namespace_content(&name),
            Behavior::Crd => {
                if let (Some(g), Some(p)) = (
                    deleted.pointer("/spec/group").and_then(Value::as_str),
                    deleted
                        .pointer("/spec/names/plural")
                        .and_then(Value::as_str),
                ) {
                    self.store.unregister(g, p);
                }
            }
            _ => {}
        }
        let uid = md_str(&deleted, "uid");
        Ok(match ty.behavior {
            // A CRD answers with the deleted object; custom resources (without finalizers:
            // deleted at once) and built-in kinds with a Status.
            Behavior::Crd => deleted.clone(),
            _ => success_status(&ty.group, &ty.plural, &name, uid),
        })
    }

    pub(super) fn delete_namespace_content(&self, ns: &str) {
        for ty in self.store.types().iter() {
            if !ty.namespaced || ty.is_virtual() {
                continue;
            }
            let (items, _) = self.store.list(&ty.group, &ty.plural, Some(ns));
            for o in items {
                if let Some(name) = md_str(&o.value(), "name") {
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
    /// Writes an ImageStream as the import controller does (its internal strategy writes spec
    /// and status together and is not subject to the user-facing rules).
    pub fn internal_write<F>(
        &self,
        group: &str,
        plural: &str,
        ns: &str,
        name: &str,
        mut f: F,
    ) -> Result<Written, ApiError>
    where
        F: FnMut(Option<&Obj>) -> Result<Option<Value>, ApiError>,
    {
        self.store
            .write_optimistic(group, plural, ns, name, |_, current| match f(current)? {
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

/// The label the API server's namespace strategy writes on every create and update since
/// Kubernetes 1.22 (`kubernetes.io/metadata.name: <name>`, overwriting any other value), so
/// that a label selector can pick namespaces by name.
fn label_with_name(obj: &mut Value, name: &str) {
    if !obj["metadata"]["labels"].is_object() {
        obj["metadata"]["labels"] = json!({});
    }
    obj["metadata"]["labels"]["kubernetes.io/metadata.name"] = json!(name);
}
