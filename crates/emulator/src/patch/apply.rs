//! Server-side apply (`application/apply-patch+yaml`), after kube's field manager
//! (`k8s.io/apiserver` `fieldmanager` over structured-merge-diff `merge.Updater`).
//!
//! The applied configuration becomes the manager's `Apply` set and is merged into the live
//! object; fields the manager applied last time but no longer does are removed unless someone
//! still owns them, and changing fields someone else set is refused (409) unless forced. The
//! ownership records it reads and writes are kept by `managed.rs`.

use serde_json::{Value, json};

use super::compare::compare;
use super::fieldset::{FieldSet, display_path, key_step, owned_fields, remove_at, value_at_mut};
use super::managed::{APPLY, Owner, UPDATE, decode, encode};
use super::{FieldConflict, MergeKey, PatchError, join_path, keys_at};

/// Who owns the fields of an object that existed before anyone tracked ownership (kube's
/// `skipNonAppliedManager`).
const BEFORE_FIRST_APPLY: &str = "before-first-apply";

/// One server-side apply (`PATCH` with `application/apply-patch+yaml`).
#[derive(Clone, Copy, Debug)]
pub struct ApplyRequest<'a> {
    /// The stored object, `None` if the apply creates it.
    pub live: Option<&'a Value>,
    /// The applied configuration (the parsed body).
    pub applied: &'a Value,
    /// `?fieldManager=`; empty is refused with 422.
    pub manager: &'a str,
    /// `?force=true`: take conflicting fields instead of failing.
    pub force: bool,
    /// The list merge keys of the kind.
    pub keys: &'a [MergeKey],
    /// The apiVersion the request was made in, recorded in the managedFields entry.
    pub api_version: &'a str,
    /// The RFC 3339 time recorded in the managedFields entry.
    pub now: &'a str,
}

/// Applies `req.applied` to `req.live` and returns the new object with its managedFields.
///
/// The server-owned metadata (name, uid, resourceVersion, ...) of the result is the live
/// object's, or the applied config's on create: the caller fills in the rest and checks a
/// `resourceVersion` precondition as for any patch.
pub fn server_side_apply(req: ApplyRequest<'_>) -> Result<Value, PatchError> {
    if req.manager.is_empty() {
        return Err(PatchError::MissingFieldManager);
    }
    check_applied(&req)?;
    let live = req.live.cloned().unwrap_or_else(|| json!({}));
    let mut owners = decode(live.pointer("/metadata/managedFields"));
    if req.live.is_some() && owners.is_empty() {
        // Fields nobody tracked belong to a stand-in owner, so applying over them conflicts.
        let set = owned_fields(&live, req.keys, false)?;
        if !set.is_empty() {
            owners.push(Owner {
                manager: BEFORE_FIRST_APPLY.into(),
                operation: UPDATE.into(),
                api_version: str_at(&live, "/apiVersion")
                    .unwrap_or(req.api_version)
                    .into(),
                time: Some(req.now.into()),
                subresource: String::new(),
                set,
            });
        }
    }

    let applied_set = owned_fields(req.applied, req.keys, true)?;
    let me = match owners.iter().position(|o| o.is(req.manager, APPLY, "")) {
        Some(i) => i,
        None => {
            owners.push(Owner {
                manager: req.manager.into(),
                operation: APPLY.into(),
                api_version: String::new(),
                time: None,
                subresource: String::new(),
                set: FieldSet::default(),
            });
            owners.len() - 1
        }
    };
    let last_applied = std::mem::replace(&mut owners[me].set, applied_set);
    owners[me].api_version = req.api_version.into();
    owners[me].time = Some(req.now.into());

    let mut merged = merge_applied(&live, req.applied, "", req.keys);
    let still_owned = owners
        .iter()
        .fold(FieldSet::default(), |acc, o| acc.union(&o.set));
    prune(&mut merged, &last_applied, &still_owned);

    let change = compare(&live, &merged, req.keys);
    let changed = change.modified.union(&change.added);
    let mut conflicts = Vec::new();
    for (i, owner) in owners.iter().enumerate() {
        if i == me {
            continue;
        }
        for path in owner.set.intersection(&changed).paths() {
            conflicts.push(FieldConflict {
                manager: owner.manager.clone(),
                operation: owner.operation.clone(),
                api_version: owner.api_version.clone(),
                subresource: owner.subresource.clone(),
                field: display_path(&path),
            });
        }
    }
    if !conflicts.is_empty() && !req.force {
        conflicts.sort_by(|a, b| (&a.manager, &a.operation).cmp(&(&b.manager, &b.operation)));
        return Err(PatchError::Conflict(conflicts));
    }
    for (i, owner) in owners.iter_mut().enumerate() {
        if i != me {
            owner.set = owner.set.difference(&changed).difference(&change.removed);
        }
    }
    owners.retain(|o| !o.set.is_empty());
    encode(&mut merged, owners);
    if req.live.is_some() && only_timestamps_differ(&live, &merged) {
        // kube's IgnoreManagedFieldsTimestampsTransformer: a no-op apply is no write at all.
        return Ok(live);
    }
    Ok(merged)
}

/// Whether two versions differ in nothing but the `time` of their managedFields entries.
fn only_timestamps_differ(old: &Value, new: &Value) -> bool {
    let untimed = |obj: &Value| {
        let mut obj = obj.clone();
        if let Some(Value::Array(entries)) = obj.pointer_mut("/metadata/managedFields") {
            for entry in entries.iter_mut() {
                if let Value::Object(e) = entry {
                    e.remove("time");
                }
            }
            // Sorting looks at times, so compare the entries as a set.
            entries.sort_by_key(|e| e.to_string());
        }
        obj
    };
    untimed(old) == untimed(new)
}

/// The applied config must be a full object of the request's kind, for the live object's name,
/// and must not claim ownership itself.
fn check_applied(req: &ApplyRequest<'_>) -> Result<(), PatchError> {
    let bad = |msg: String| Err(PatchError::InvalidApplyConfig(msg));
    let applied = req.applied;
    if !applied.is_object() {
        return bad("the applied configuration must be an object".into());
    }
    let (Some(api_version), Some(kind)) =
        (str_at(applied, "/apiVersion"), str_at(applied, "/kind"))
    else {
        return bad(format!(
            "Object 'Kind' or 'apiVersion' is missing in '{applied}'"
        ));
    };
    let live_kind = req.live.and_then(|l| str_at(l, "/kind"));
    if api_version != req.api_version || live_kind.is_some_and(|k| k != kind) {
        return bad(format!("invalid object type: {api_version}, Kind={kind}"));
    }
    if applied
        .pointer("/metadata/managedFields")
        .is_some_and(|v| !v.is_null())
    {
        return bad("metadata.managedFields must be nil".into());
    }
    let live_name = req.live.and_then(|l| str_at(l, "/metadata/name"));
    if let (Some(name), Some(live_name)) = (str_at(applied, "/metadata/name"), live_name)
        && name != live_name
    {
        return bad(format!(
            "the name of the object ({name}) does not match the name on the URL ({live_name})"
        ));
    }
    Ok(())
}

fn str_at<'v>(v: &'v Value, pointer: &str) -> Option<&'v str> {
    v.pointer(pointer).and_then(Value::as_str)
}

/// The applied config merged into the live object the structured-merge-diff way: maps field
/// by field, keyed lists element by element (new elements appended), anything else replaced.
fn merge_applied(live: &Value, applied: &Value, path: &str, keys: &[MergeKey]) -> Value {
    match (live, applied) {
        (Value::Object(l), Value::Object(a)) => {
            let mut out = l.clone();
            for (k, av) in a {
                if av.is_null() {
                    out.remove(k);
                    continue;
                }
                let merged = match out.get(k) {
                    Some(lv) => merge_applied(lv, av, &join_path(path, k), keys),
                    None => without_nulls(av),
                };
                out.insert(k.clone(), merged);
            }
            Value::Object(out)
        }
        (Value::Array(l), Value::Array(a)) if !keys_at(keys, path).is_empty() => {
            let names = keys_at(keys, path);
            let mut out = l.clone();
            for item in a {
                let step = key_step(item, &names);
                match out
                    .iter_mut()
                    .find(|o| step.is_some() && key_step(o, &names) == step)
                {
                    Some(slot) => *slot = merge_applied(slot, item, path, keys),
                    None => out.push(without_nulls(item)),
                }
            }
            Value::Array(out)
        }
        _ => without_nulls(applied),
    }
}

fn without_nulls(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k.clone(), without_nulls(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(without_nulls).collect()),
        other => other.clone(),
    }
}

/// Removes the fields the applier applied last time but no longer does, unless someone (the
/// applier included) still owns them or something below them.
fn prune(obj: &mut Value, last_applied: &FieldSet, still_owned: &FieldSet) {
    // Parents first: removing a list element by its key must happen before its key field goes.
    for path in last_applied.paths() {
        if still_owned.touches(&path) || !remove_at(obj, &path) {
            continue;
        }
        // A map or list left empty by the removal goes as well, as Go's `omitempty` would drop
        // it, unless someone owns it as it is; the top-level sections stay.
        let mut parent = path[..path.len() - 1].to_vec();
        while parent.len() > 1 && !still_owned.has(&parent) {
            let empty = value_at_mut(obj, &parent).is_some_and(|v| match v {
                Value::Object(m) => m.is_empty(),
                Value::Array(items) => items.is_empty(),
                _ => false,
            });
            if !empty || !remove_at(obj, &parent) {
                break;
            }
            parent.pop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::patch::fixtures::{LATER, NOW, apply, cfg, fields_of, owners, stored};
    use crate::patch::{DEFAULT_MERGE_KEYS, record_update};

    #[test]
    fn apply_creates_and_records_the_manager_in_the_real_format() {
        // Conformance 4.9.
        let out = apply(None, &cfg(json!({"x": "1", "y": "2"})), "conf-a", false).unwrap();
        assert_eq!(out["data"], json!({"x": "1", "y": "2"}));
        assert_eq!(
            out["metadata"]["managedFields"],
            json!([{"manager": "conf-a", "operation": "Apply", "apiVersion": "v1", "time": NOW,
                "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {"f:x": {}, "f:y": {}},
                    "f:metadata": {"f:labels": {"f:conformance": {}}}}}])
        );
    }

    #[test]
    fn apply_sequence_of_the_conformance_suite() {
        // 4.9 create, 4.10 update, 4.11 remove y, 4.12 conflict then force.
        let live = stored(apply(None, &cfg(json!({"x": "1", "y": "2"})), "conf-a", false).unwrap());
        let live = apply(
            Some(&live),
            &cfg(json!({"x": "1", "y": "3", "z": "4"})),
            "conf-a",
            false,
        )
        .unwrap();
        assert_eq!(live["data"], json!({"x": "1", "y": "3", "z": "4"}));
        assert_eq!(live["metadata"]["uid"], "u-1");
        let live = apply(
            Some(&live),
            &cfg(json!({"x": "1", "z": "4"})),
            "conf-a",
            false,
        )
        .unwrap();
        assert_eq!(live["data"], json!({"x": "1", "z": "4"}));

        let err = apply(Some(&live), &cfg(json!({"x": "9"})), "conf-b", false).unwrap_err();
        assert_eq!((err.http_code(), err.reason()), (409, "Conflict"));
        assert_eq!(
            err.to_string(),
            "Apply failed with 1 conflict: conflict with \"conf-a\": .data.x"
        );

        let live = apply(Some(&live), &cfg(json!({"x": "9"})), "conf-b", true).unwrap();
        assert_eq!(live["data"], json!({"x": "9", "z": "4"}));
        assert_eq!(
            fields_of(&live, "conf-a", "Apply")["f:data"],
            json!({"f:z": {}})
        );
        assert_eq!(
            fields_of(&live, "conf-b", "Apply")["f:data"],
            json!({"f:x": {}})
        );
        // The label is applied by both with the same value: shared, no conflict.
        for m in ["conf-a", "conf-b"] {
            assert_eq!(
                fields_of(&live, m, "Apply")["f:metadata"],
                json!({"f:labels": {"f:conformance": {}}})
            );
        }
    }

    #[test]
    fn reapplying_the_same_config_changes_nothing_not_even_the_time() {
        let first = stored(apply(None, &cfg(json!({"x": "1"})), "conf-a", false).unwrap());
        let again = server_side_apply(ApplyRequest {
            live: Some(&first),
            applied: &cfg(json!({"x": "1"})),
            manager: "conf-a",
            force: false,
            keys: DEFAULT_MERGE_KEYS,
            api_version: "v1",
            now: LATER,
        })
        .unwrap();
        assert_eq!(again, first);
    }

    #[test]
    fn apply_without_field_manager_is_invalid() {
        // Conformance 4.13.
        let err = apply(None, &cfg(json!({})), "", false).unwrap_err();
        assert_eq!((err.http_code(), err.reason()), (422, "Invalid"));
    }

    #[test]
    fn a_field_still_owned_by_another_manager_is_not_removed() {
        let live = apply(None, &cfg(json!({"x": "1", "y": "2"})), "conf-a", false).unwrap();
        let live = apply(Some(&live), &cfg(json!({"y": "2"})), "conf-b", false).unwrap();
        let live = apply(Some(&live), &cfg(json!({"x": "1"})), "conf-a", false).unwrap();
        assert_eq!(live["data"], json!({"x": "1", "y": "2"}));
        // conf-b gives it up too: now it goes.
        let live = apply(Some(&live), &cfg(json!({})), "conf-b", false).unwrap();
        assert_eq!(live["data"], json!({"x": "1"}));
    }

    #[test]
    fn an_update_takes_the_fields_it_changes_so_a_later_apply_conflicts() {
        let live = apply(None, &cfg(json!({"x": "1", "y": "2"})), "conf-a", false).unwrap();
        let mut new = live.clone();
        new["data"]["x"] = json!("edited");
        new["data"]["w"] = json!("added");
        record_update(Some(&live), &mut new, "kubectl-edit", "v1", LATER);
        assert_eq!(
            owners(&new),
            [
                ("conf-a".into(), "Apply".into()),
                ("kubectl-edit".into(), "Update".into())
            ]
        );
        assert_eq!(
            fields_of(&new, "kubectl-edit", "Update"),
            &json!({"f:data": {"f:w": {}, "f:x": {}}})
        );
        assert_eq!(
            fields_of(&new, "conf-a", "Apply")["f:data"],
            json!({"f:y": {}})
        );

        let err = apply(
            Some(&new),
            &cfg(json!({"x": "1", "y": "2"})),
            "conf-a",
            false,
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "Apply failed with 1 conflict: conflict with \"kubectl-edit\" using v1: .data.x"
        );
        // Re-applying the value the editor set is no conflict: the field becomes shared.
        let shared = apply(
            Some(&new),
            &cfg(json!({"x": "edited", "y": "2"})),
            "conf-a",
            false,
        )
        .unwrap();
        assert_eq!(
            fields_of(&shared, "conf-a", "Apply")["f:data"],
            json!({"f:x": {}, "f:y": {}})
        );
        assert_eq!(
            fields_of(&shared, "kubectl-edit", "Update")["f:data"],
            json!({"f:w": {}, "f:x": {}})
        );
    }

    fn image_stream(tags: Value) -> Value {
        json!({"apiVersion": "image.openshift.io/v1", "kind": "ImageStream",
            "metadata": {"name": "is"}, "spec": {"tags": tags}})
    }

    fn apply_is(
        live: Option<&Value>,
        applied: &Value,
        manager: &str,
        force: bool,
    ) -> Result<Value, PatchError> {
        server_side_apply(ApplyRequest {
            live,
            applied,
            manager,
            force,
            keys: DEFAULT_MERGE_KEYS,
            api_version: "image.openshift.io/v1",
            now: NOW,
        })
    }

    #[test]
    fn apply_merges_spec_tags_by_name_and_owns_elements_by_key() {
        let a = json!({"name": "a", "from": {"kind": "DockerImage", "name": "r/a"}});
        let live = apply_is(None, &image_stream(json!([a])), "promoter", false).unwrap();
        assert_eq!(
            fields_of(&live, "promoter", "Apply"),
            &json!({"f:spec": {"f:tags": {"k:{\"name\":\"a\"}": {".": {},
                "f:from": {"f:kind": {}, "f:name": {}}, "f:name": {}}}}})
        );
        let b = json!({"name": "b", "annotations": {"x": "1"}});
        let live = apply_is(Some(&live), &image_stream(json!([b])), "importer", false).unwrap();
        assert_eq!(live["spec"]["tags"], json!([a, b]));
        // The promoter stops applying tag a: it goes, b (the importer's) stays.
        let live = apply_is(Some(&live), &image_stream(json!([])), "promoter", false).unwrap();
        assert_eq!(live["spec"]["tags"], json!([b]));
        assert_eq!(owners(&live), [("importer".into(), "Apply".into())]);
        // Changing the importer's tag is a conflict that names the element.
        let err = apply_is(
            Some(&live),
            &image_stream(json!([{"name": "b", "annotations": {"x": "2"}}])),
            "promoter",
            false,
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "Apply failed with 1 conflict: conflict with \"importer\": .spec.tags[name=\"b\"].annotations.x"
        );
    }

    #[test]
    fn apply_over_an_untracked_object_conflicts_with_before_first_apply() {
        let live = stored(cfg(json!({"x": "1"})));
        let err = apply(Some(&live), &cfg(json!({"x": "2"})), "conf-a", false).unwrap_err();
        assert_eq!(
            err.to_string(),
            "Apply failed with 1 conflict: conflict with \"before-first-apply\" using v1: .data.x"
        );
        let same = apply(Some(&live), &cfg(json!({"x": "1"})), "conf-a", false).unwrap();
        assert_eq!(
            owners(&same),
            [
                ("conf-a".into(), "Apply".into()),
                ("before-first-apply".into(), "Update".into())
            ]
        );
    }

    #[test]
    fn invalid_applied_configs_are_bad_requests() {
        let live = stored(cfg(json!({})));
        let mut with_owners = cfg(json!({}));
        with_owners["metadata"]["managedFields"] = json!([]);
        let mut renamed = cfg(json!({}));
        renamed["metadata"]["name"] = json!("other");
        let cases = [
            (
                "no kind",
                json!({"apiVersion": "v1", "metadata": {"name": "ssa"}}),
            ),
            (
                "other version",
                json!({"apiVersion": "v2", "kind": "ConfigMap"}),
            ),
            ("other kind", json!({"apiVersion": "v1", "kind": "Secret"})),
            ("managedFields", with_owners),
            ("other name", renamed),
            (
                "keyed element without key",
                json!({"apiVersion": "v1", "kind": "ConfigMap", "spec": {"tags": [{}]}}),
            ),
        ];
        for (name, applied) in cases {
            let err = apply(Some(&live), &applied, "m", false).unwrap_err();
            assert_eq!(
                (err.http_code(), err.reason()),
                (400, "BadRequest"),
                "{name}: {err}"
            );
        }
    }
}
