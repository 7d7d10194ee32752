//! Server-side apply and the field-ownership bookkeeping behind it, after kube's field manager
//! (`k8s.io/apiserver` `fieldmanager` over structured-merge-diff `merge.Updater`).
//!
//! Every write records who set which fields in `metadata.managedFields`: an apply makes the
//! applied configuration the manager's `Apply` set, any other write adds the fields it changed
//! to the writer's `Update` set and takes them from everyone else. That history is what lets an
//! apply remove the fields its manager stopped applying, and refuse (409) to change fields
//! someone else set, unless forced.

use serde_json::{Map, Value, json};

use super::fieldset::{
    FieldSet, compare, display_path, key_step, owned_fields, remove_at, value_at_mut,
};
use super::{DEFAULT_MERGE_KEYS, FieldConflict, MergeKey, PatchError, join_path, keys_at};

const APPLY: &str = "Apply";
const UPDATE: &str = "Update";
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

/// Who made a non-apply write (create, update, patch), for [`record_write`].
#[derive(Clone, Copy, Debug)]
pub struct Writer<'a> {
    /// The field manager (`?fieldManager=` or [`super::default_field_manager`]).
    pub manager: &'a str,
    /// The apiVersion the request was made in.
    pub api_version: &'a str,
    /// The subresource written (`status`), empty for the main resource.
    pub subresource: &'a str,
    /// The list merge keys of the kind.
    pub keys: &'a [MergeKey],
    /// The RFC 3339 time recorded when the writer changed something.
    pub now: &'a str,
}

/// One `metadata.managedFields` entry.
#[derive(Clone, Debug)]
struct Owner {
    manager: String,
    operation: String,
    api_version: String,
    time: Option<String>,
    subresource: String,
    set: FieldSet,
}

impl Owner {
    fn is(&self, manager: &str, operation: &str, subresource: &str) -> bool {
        self.manager == manager && self.operation == operation && self.subresource == subresource
    }

    fn to_json(&self) -> Value {
        let mut entry = json!({"manager": self.manager, "operation": self.operation,
            "apiVersion": self.api_version});
        if let Some(time) = &self.time {
            entry["time"] = json!(time);
        }
        entry["fieldsType"] = json!("FieldsV1");
        entry["fieldsV1"] = self.set.to_fields_v1();
        if !self.subresource.is_empty() {
            entry["subresource"] = json!(self.subresource);
        }
        entry
    }
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

/// Ownership bookkeeping for a write that is not an apply, with [`DEFAULT_MERGE_KEYS`]:
/// `manager` (operation `Update`) now owns every field the write added or changed, and nobody
/// else does; removed fields are nobody's. Call it on the object about to be stored, with the
/// stored one as `old` (`None` on create).
pub fn record_update(
    old: Option<&Value>,
    new: &mut Value,
    manager: &str,
    operation_api_version: &str,
    now: &str,
) {
    let writer = Writer {
        manager,
        api_version: operation_api_version,
        subresource: "",
        keys: DEFAULT_MERGE_KEYS,
        now,
    };
    record_write(old, new, &writer);
}

/// [`record_update`] with the subresource and merge keys spelled out.
pub fn record_write(old: Option<&Value>, new: &mut Value, writer: &Writer<'_>) {
    let empty = json!({});
    let old = old.unwrap_or(&empty);
    let mut owners = owners_for_write(old, new, writer.subresource.is_empty());
    if let Some(meta) = new.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("managedFields");
    }
    let change = compare(old, new, writer.keys);
    let changed = change.modified.union(&change.added);
    let mut mine = FieldSet::default();
    for owner in &mut owners {
        if owner.is(writer.manager, UPDATE, writer.subresource) {
            mine = owner.set.difference(&change.removed);
            owner.set = FieldSet::default();
        } else {
            owner.set = owner.set.difference(&changed).difference(&change.removed);
        }
    }
    let had_entry = owners
        .iter()
        .any(|o| o.is(writer.manager, UPDATE, writer.subresource));
    if !changed.is_empty() || had_entry {
        let index = owners
            .iter()
            .position(|o| o.is(writer.manager, UPDATE, writer.subresource))
            .unwrap_or_else(|| {
                owners.push(Owner {
                    manager: writer.manager.into(),
                    operation: UPDATE.into(),
                    api_version: writer.api_version.into(),
                    time: Some(writer.now.into()),
                    subresource: writer.subresource.into(),
                    set: FieldSet::default(),
                });
                owners.len() - 1
            });
        let entry = &mut owners[index];
        entry.set = mine.union(&changed);
        // kube only stamps the entry when this write took fields.
        if !changed.is_empty() {
            entry.api_version = writer.api_version.into();
            entry.time = Some(writer.now.into());
        }
    }
    owners.retain(|o| !o.set.is_empty());
    encode(new, owners);
}

/// kube's `decodeLiveOrNew`: a write may carry managedFields of its own (`[]` or `[{}]` clear
/// them), otherwise the stored ones stay; a subresource write always keeps the stored ones.
fn owners_for_write(old: &Value, new: &Value, main_resource: bool) -> Vec<Owner> {
    let stored = || decode(old.pointer("/metadata/managedFields"));
    if !main_resource {
        return stored();
    }
    match new.pointer("/metadata/managedFields") {
        Some(Value::Array(entries))
            if entries.is_empty() || (entries.len() == 1 && entries[0] == json!({})) =>
        {
            Vec::new()
        }
        Some(sent @ Value::Array(_)) => match decode(Some(sent)) {
            owners if owners.is_empty() => stored(),
            owners => owners,
        },
        _ => stored(),
    }
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

fn decode(managed: Option<&Value>) -> Vec<Owner> {
    let Some(Value::Array(entries)) = managed else {
        return Vec::new();
    };
    let text = |e: &Value, k: &str| e.get(k).and_then(Value::as_str).map(str::to_owned);
    entries
        .iter()
        .filter(|e| e.get("fieldsType").is_none_or(|t| t == "FieldsV1"))
        .filter_map(|e| {
            Some(Owner {
                manager: text(e, "manager").unwrap_or_default(),
                operation: text(e, "operation")?,
                api_version: text(e, "apiVersion").unwrap_or_default(),
                time: text(e, "time"),
                subresource: text(e, "subresource").unwrap_or_default(),
                set: FieldSet::from_fields_v1(e.get("fieldsV1").unwrap_or(&json!({})))?,
            })
        })
        .collect()
}

/// Writes the owners into `metadata.managedFields` in kube's order (operation, time, manager,
/// apiVersion, subresource), or removes the field when nobody owns anything.
fn encode(obj: &mut Value, mut owners: Vec<Owner>) {
    owners.sort_by(|a, b| {
        let seconds = |o: &Owner| {
            o.time
                .as_deref()
                .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
                .map_or(0, |t| t.timestamp())
        };
        (
            &a.operation,
            seconds(a),
            &a.manager,
            &a.api_version,
            &a.subresource,
        )
            .cmp(&(
                &b.operation,
                seconds(b),
                &b.manager,
                &b.api_version,
                &b.subresource,
            ))
    });
    let Some(root) = obj.as_object_mut() else {
        return;
    };
    if owners.is_empty() {
        if let Some(Value::Object(meta)) = root.get_mut("metadata") {
            meta.remove("managedFields");
        }
        return;
    }
    let meta = root
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Value::Object(meta) = meta {
        meta.insert(
            "managedFields".into(),
            owners.iter().map(Owner::to_json).collect(),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: &str = "2025-01-02T03:04:05Z";
    const LATER: &str = "2025-01-02T03:05:00Z";

    /// The ConfigMap the conformance suite applies (4.9-4.13).
    fn cfg(data: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "ssa", "labels": {"conformance": "ssa"}}, "data": data})
    }

    fn apply(
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
            api_version: "v1",
            now: NOW,
        })
    }

    /// What the store adds on create.
    fn stored(mut obj: Value) -> Value {
        obj["metadata"]["namespace"] = json!("conf");
        obj["metadata"]["uid"] = json!("u-1");
        obj["metadata"]["resourceVersion"] = json!("1");
        obj
    }

    fn owners(obj: &Value) -> Vec<(String, String)> {
        obj["metadata"]["managedFields"]
            .as_array()
            .map(|entries| {
                entries
                    .iter()
                    .map(|e| {
                        (
                            e["manager"].as_str().unwrap().into(),
                            e["operation"].as_str().unwrap().into(),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    fn fields_of<'v>(obj: &'v Value, manager: &str, operation: &str) -> &'v Value {
        obj["metadata"]["managedFields"]
            .as_array()
            .and_then(|entries| {
                entries
                    .iter()
                    .find(|e| e["manager"] == manager && e["operation"] == operation)
            })
            .map_or(&Value::Null, |e| &e["fieldsV1"])
    }

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

    #[test]
    fn record_update_on_create_owns_everything_but_server_fields() {
        let mut new = stored(cfg(json!({"a": "1"})));
        new["metadata"]["creationTimestamp"] = json!(NOW);
        record_update(None, &mut new, "kubectl-create", "v1", NOW);
        assert_eq!(
            new["metadata"]["managedFields"],
            json!([{"manager": "kubectl-create", "operation": "Update", "apiVersion": "v1", "time": NOW,
                "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {"f:a": {}},
                    "f:metadata": {"f:labels": {"f:conformance": {}}}}}])
        );
    }

    #[test]
    fn record_update_cases() {
        let base = {
            let mut o = stored(cfg(json!({"a": "1"})));
            record_update(None, &mut o, "creator", "v1", NOW);
            o
        };
        type Case = (
            &'static str,
            fn(&mut Value),
            Vec<(&'static str, &'static str)>,
        );
        let cases: Vec<Case> = vec![
            (
                "a no-op write changes nothing",
                |_| {},
                vec![("creator", "Update")],
            ),
            (
                "removing a field drops it from its owner",
                |o| drop(o.as_object_mut().unwrap().remove("data")),
                vec![("creator", "Update")],
            ),
            (
                "removing every field drops the owner",
                |o| {
                    o.as_object_mut().unwrap().remove("data");
                    o["metadata"].as_object_mut().unwrap().remove("labels");
                },
                vec![],
            ),
            (
                "managedFields [] in the write resets ownership",
                |o| o["metadata"]["managedFields"] = json!([]),
                vec![],
            ),
        ];
        for (name, edit, want) in cases {
            let mut new = base.clone();
            edit(&mut new);
            record_update(Some(&base), &mut new, "writer", "v1", LATER);
            let got = owners(&new);
            let want: Vec<(String, String)> = want
                .into_iter()
                .map(|(m, o)| (m.into(), o.into()))
                .collect();
            assert_eq!(got, want, "{name}");
        }
    }

    #[test]
    fn record_update_keeps_the_time_of_an_owner_that_took_nothing() {
        let mut first = cfg(json!({"a": "1"}));
        record_update(None, &mut first, "w", "v1", NOW);
        let mut second = first.clone();
        second["data"]["a"] = json!("1");
        record_update(Some(&first), &mut second, "w", "v1", LATER);
        assert_eq!(second["metadata"]["managedFields"][0]["time"], NOW);
    }

    #[test]
    fn a_status_write_is_recorded_with_its_subresource() {
        let live = json!({"apiVersion": "image.openshift.io/v1", "kind": "ImageStream", "metadata": {"name": "is"}});
        let mut new = live.clone();
        new["status"] = json!({"tags": [{"tag": "latest", "items": [{"image": "sha256:1"}]}]});
        let writer = Writer {
            manager: "openshift-controller-manager",
            api_version: "image.openshift.io/v1",
            subresource: "status",
            keys: DEFAULT_MERGE_KEYS,
            now: NOW,
        };
        record_write(Some(&live), &mut new, &writer);
        let entry = &new["metadata"]["managedFields"][0];
        assert_eq!(entry["subresource"], "status");
        assert_eq!(
            entry["fieldsV1"],
            json!({"f:status": {"f:tags": {"k:{\"tag\":\"latest\"}": {".": {}, "f:items": {}, "f:tag": {}}}}})
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

    #[test]
    fn managed_fields_are_sorted_apply_first_then_by_time() {
        let mut obj = cfg(json!({"a": "1"}));
        record_update(None, &mut obj, "zeta", "v1", NOW);
        let obj = apply(
            Some(&obj),
            &cfg(json!({"a": "1", "b": "2"})),
            "alpha",
            false,
        )
        .unwrap();
        let mut later = obj.clone();
        later["data"]["c"] = json!("3");
        record_update(Some(&obj), &mut later, "beta", "v1", LATER);
        assert_eq!(
            owners(&later),
            [
                ("alpha".into(), "Apply".into()),
                ("zeta".into(), "Update".into()),
                ("beta".into(), "Update".into())
            ]
        );
    }
}
