//! Field-ownership bookkeeping in `metadata.managedFields`, after kube's field manager: every
//! write records who set which fields. An apply makes the applied configuration the manager's
//! `Apply` set (see `apply.rs`); any other write adds the fields it changed to the writer's
//! `Update` set and takes them from everyone else. That history is what lets an apply remove
//! the fields its manager stopped applying, and refuse to change fields someone else set.

use serde_json::{Map, Value, json};

use super::compare::compare;
use super::fieldset::FieldSet;
use super::{DEFAULT_MERGE_KEYS, MergeKey};

pub(super) const APPLY: &str = "Apply";
pub(super) const UPDATE: &str = "Update";

/// Who made a non-apply write (create, update, patch), for [`record_write`].
#[derive(Clone, Copy, Debug)]
pub struct Writer<'a> {
    /// The field manager (`?fieldManager=`, else the product of the User-Agent).
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
pub(super) struct Owner {
    pub(super) manager: String,
    pub(super) operation: String,
    pub(super) api_version: String,
    pub(super) time: Option<String>,
    pub(super) subresource: String,
    pub(super) set: FieldSet,
}

impl Owner {
    pub(super) fn is(&self, manager: &str, operation: &str, subresource: &str) -> bool {
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

pub(super) fn decode(managed: Option<&Value>) -> Vec<Owner> {
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
pub(super) fn encode(obj: &mut Value, mut owners: Vec<Owner>) {
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
    use crate::patch::fixtures::{LATER, NOW, apply, cfg, owners, stored};

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
