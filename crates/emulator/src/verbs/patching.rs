//! PATCH in its four flavours (merge, JSON, strategic merge, server-side apply), computed
//! against the current object and committed only if nothing else wrote meanwhile.

use serde_json::Value;

use super::{Cluster, Target, WriteOptions, md_str, merge_keys, now, patch_error, strategy_error};
use crate::openshift::{self, IstagWrite};
use crate::patch::{self, PatchType};
use crate::registry::Behavior;
use crate::status::ApiError;

const IMAGE_GROUP: &str = "image.openshift.io";

impl Cluster {
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
                let why = "fieldManager: Required value: is required for apply patch";
                return Err(ApiError::invalid("meta.k8s.io", "PatchOptions", "", why)
                    .with_field_causes(&[why.to_string()]));
            }
            serde_norway::from_slice(body)
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
                let stream = self
                    .store
                    .get(IMAGE_GROUP, "imagestreams", t.ns(), is)
                    .map(|s| s.value());
                Some(
                    openshift::istag_patch_base(stream.as_ref(), t.ns(), t.name())
                        .map_err(|e| strategy_error(e, &ty, t.name()))?,
                )
            } else {
                self.store
                    .get(&ty.group, &ty.plural, t.ns(), t.name())
                    .map(|o| o.value())
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

    /// Creates an object whose managedFields were computed by an apply, in one write (one
    /// resourceVersion, one ADDED event), as the real server does.
    pub(super) fn create_preserving_fields(
        &self,
        t: &Target,
        body: Value,
        opts: &WriteOptions,
    ) -> Result<Value, ApiError> {
        let applied = WriteOptions {
            applied: true,
            ..opts.clone()
        };
        self.create(t, body, &applied)
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
