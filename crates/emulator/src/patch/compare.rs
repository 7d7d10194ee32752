//! What changed between two versions of an object, in owned-field terms (SMD `Compare`):
//! the member fields only the new version has, those only the old one has, and those both
//! have with different values.
//!
//! The two versions are walked side by side and an equal subtree is skipped whole: its fields
//! are the same on both sides and none of them changed. A write that changes a few entries of
//! a large map (a checkpoint shard of 2,500 entries) then costs what it changes, not what the
//! object holds. Where the two sides differ in shape (a map became a list, a keyed list lost
//! its keys, a key appears twice), the subtree is compared as sets, exactly as SMD defines it.

use serde_json::{Map, Value};

use super::fieldset::{
    FieldPath, FieldSet, element_steps, server_owned, value_at, walk_entry, walk_map,
};
use super::{MergeKey, join_path};

/// What changed; see the module doc.
#[derive(Debug, Default)]
pub(crate) struct Comparison {
    pub(crate) added: FieldSet,
    pub(crate) removed: FieldSet,
    pub(crate) modified: FieldSet,
}

pub(crate) fn compare(old: &Value, new: &Value, keys: &[MergeKey]) -> Comparison {
    let empty = Map::new();
    let mut walk = Walk {
        old_root: old,
        new_root: new,
        keys,
        out: Comparison::default(),
    };
    // A stored object that is not a map has no fields, as in `owned_fields`.
    walk.maps(
        old.as_object().unwrap_or(&empty),
        new.as_object().unwrap_or(&empty),
        "",
        &mut Vec::new(),
    );
    let server = server_owned();
    let out = walk.out;
    Comparison {
        added: out.added.without_subtrees(&server),
        removed: out.removed.without_subtrees(&server),
        modified: out.modified.without_subtrees(&server),
    }
}

struct Walk<'a> {
    old_root: &'a Value,
    new_root: &'a Value,
    keys: &'a [MergeKey],
    out: Comparison,
}

impl Walk<'_> {
    /// The entries of the maps at `dotted` (path `path`) on both sides.
    fn maps(
        &mut self,
        old: &Map<String, Value>,
        new: &Map<String, Value>,
        dotted: &str,
        path: &mut FieldPath,
    ) {
        for (name, o) in old {
            match new.get(name) {
                None => self.one_side(name, o, dotted, path, Side::Old),
                Some(n) if n == o => {}
                Some(n) => self.entries(name, o, n, dotted, path),
            }
        }
        for (name, n) in new {
            if !old.contains_key(name) {
                self.one_side(name, n, dotted, path, Side::New);
            }
        }
    }

    /// One entry present on both sides with different values.
    fn entries(
        &mut self,
        name: &str,
        old: &Value,
        new: &Value,
        dotted: &str,
        path: &mut FieldPath,
    ) {
        let sub = join_path(dotted, name);
        match (old, new) {
            (Value::Object(o), Value::Object(n)) if !o.is_empty() && !n.is_empty() => {
                path.push(format!("f:{name}"));
                self.maps(o, n, &sub, path);
                path.pop();
            }
            (Value::Array(o), Value::Array(n)) => {
                let steps = (
                    element_steps(o, &sub, self.keys, false).ok().flatten(),
                    element_steps(n, &sub, self.keys, false).ok().flatten(),
                );
                match steps {
                    (Some(os), Some(ns)) if distinct(&os) && distinct(&ns) => {
                        path.push(format!("f:{name}"));
                        self.lists((o, &os), (n, &ns), &sub, path);
                        path.pop();
                    }
                    _ => self.as_sets(name, old, new, dotted, path),
                }
            }
            _ => self.as_sets(name, old, new, dotted, path),
        }
    }

    /// Two keyed lists at `dotted`, each key once: elements matched by key.
    fn lists(
        &mut self,
        (old, old_steps): (&[Value], &[String]),
        (new, new_steps): (&[Value], &[String]),
        dotted: &str,
        path: &mut FieldPath,
    ) {
        let find = |steps: &[String], step: &str| steps.iter().position(|s| s == step);
        for (step, o) in old_steps.iter().zip(old) {
            path.push(step.clone());
            match find(new_steps, step).map(|i| &new[i]) {
                None => self.element(o, dotted, path, Side::Old),
                Some(n) if n == o => {}
                // The element is a member on both sides and, being a map, never "modified"
                // itself: its fields are compared.
                Some(n) => {
                    let empty = Map::new();
                    self.maps(
                        o.as_object().unwrap_or(&empty),
                        n.as_object().unwrap_or(&empty),
                        dotted,
                        path,
                    );
                }
            }
            path.pop();
        }
        for (step, n) in new_steps.iter().zip(new) {
            if find(old_steps, step).is_none() {
                path.push(step.clone());
                self.element(n, dotted, path, Side::New);
                path.pop();
            }
        }
    }

    /// An element (at `path`, already pushed) only one side has: it and its fields.
    fn element(&mut self, item: &Value, dotted: &str, path: &mut FieldPath, side: Side) {
        let keys = self.keys;
        let set = self.set(side);
        set.insert(path);
        if let Value::Object(m) = item {
            let _ = walk_map(m, dotted, keys, false, path, set);
        }
    }

    /// An entry only one side has: all its fields.
    fn one_side(&mut self, name: &str, v: &Value, dotted: &str, path: &mut FieldPath, side: Side) {
        let keys = self.keys;
        let _ = walk_entry(name, v, dotted, keys, false, path, self.set(side));
    }

    /// An entry whose two versions differ in shape: their field sets compared as SMD does.
    fn as_sets(
        &mut self,
        name: &str,
        old: &Value,
        new: &Value,
        dotted: &str,
        path: &mut FieldPath,
    ) {
        let (mut o, mut n) = (FieldSet::default(), FieldSet::default());
        let _ = walk_entry(name, old, dotted, self.keys, false, path, &mut o);
        let _ = walk_entry(name, new, dotted, self.keys, false, path, &mut n);
        for p in o.intersection(&n).paths() {
            let (a, b) = (value_at(self.old_root, &p), value_at(self.new_root, &p));
            // Two maps at a member path are keyed list elements: their fields are compared on
            // their own, so the element itself only changes by being added or removed.
            let both_maps = a.is_some_and(Value::is_object) && b.is_some_and(Value::is_object);
            if a != b && !both_maps {
                self.out.modified.insert(&p);
            }
        }
        let (added, removed) = (n.difference(&o), o.difference(&n));
        self.out.added = self.out.added.union(&added);
        self.out.removed = self.out.removed.union(&removed);
    }

    fn set(&mut self, side: Side) -> &mut FieldSet {
        match side {
            Side::Old => &mut self.out.removed,
            Side::New => &mut self.out.added,
        }
    }
}

#[derive(Clone, Copy)]
enum Side {
    Old,
    New,
}

fn distinct(steps: &[String]) -> bool {
    let mut sorted: Vec<&String> = steps.iter().collect();
    sorted.sort_unstable();
    sorted.windows(2).all(|w| w[0] != w[1])
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::DEFAULT_MERGE_KEYS;
    use super::super::fieldset::owned_fields;
    use super::*;

    // The merge keys every write is recorded with (nested: status.tags[].conditions[]).
    const KEYS: &[MergeKey] = DEFAULT_MERGE_KEYS;

    /// SMD's definition, over whole field sets: the oracle the walk must agree with.
    fn by_sets(old: &Value, new: &Value) -> Comparison {
        let old_set = owned_fields(old, KEYS, false).unwrap_or_default();
        let new_set = owned_fields(new, KEYS, false).unwrap_or_default();
        let mut modified = FieldSet::default();
        for path in old_set.intersection(&new_set).paths() {
            let (a, b) = (value_at(old, &path), value_at(new, &path));
            let both_maps = a.is_some_and(Value::is_object) && b.is_some_and(Value::is_object);
            if a != b && !both_maps {
                modified.insert(&path);
            }
        }
        Comparison {
            added: new_set.difference(&old_set),
            removed: old_set.difference(&new_set),
            modified,
        }
    }

    fn agree(old: &Value, new: &Value) {
        let (walk, sets) = (compare(old, new, KEYS), by_sets(old, new));
        let show = |c: &Comparison| {
            (
                c.added.to_fields_v1(),
                c.removed.to_fields_v1(),
                c.modified.to_fields_v1(),
            )
        };
        assert_eq!(show(&walk), show(&sets), "old {old}\nnew {new}");
    }

    #[test]
    fn compare_reports_added_removed_and_modified_leaves() {
        let old = json!({"data": {"x": "1", "y": "2"}, "spec": {"tags": [{"name": "a", "from": {"name": "1"}}]}});
        let new = json!({"data": {"x": "9", "z": "3"}, "spec": {"tags": [{"name": "a", "from": {"name": "2"}}]}});
        let c = compare(&old, &new, KEYS);
        assert_eq!(c.added.to_fields_v1(), json!({"f:data": {"f:z": {}}}));
        assert_eq!(c.removed.to_fields_v1(), json!({"f:data": {"f:y": {}}}));
        assert_eq!(
            c.modified.to_fields_v1(),
            json!({"f:data": {"f:x": {}}, "f:spec": {"f:tags": {"k:{\"name\":\"a\"}": {"f:from": {"f:name": {}}}}}})
        );
    }

    #[test]
    fn the_side_by_side_walk_agrees_with_the_set_definition() {
        // Pairs chosen to reach every branch: equal subtrees, maps that empty or fill, a map
        // that becomes a list or a scalar, keyed lists that gain, lose and change elements,
        // lose their keys (atomic) or repeat one, nested keyed lists, server-owned fields.
        let versions = [
            json!({}),
            json!(null),
            json!({"metadata": {"name": "a", "uid": "u", "labels": {"x": "1"}}, "data": {"k": "v"}}),
            json!({"metadata": {"name": "b", "uid": "w", "labels": {}}, "data": {"k": "v", "l": "w"}}),
            json!({"metadata": {"name": "a", "labels": {"x": "2", "y": "1"}}, "data": []}),
            json!({"data": {"k": {"deep": [1, 2]}}, "spec": {"tags": "none"}}),
            json!({"data": {"k": {}}, "spec": {"tags": []}}),
            json!({"spec": {"tags": [{"name": "a", "from": {"kind": "DockerImage", "name": "x:1"}}]}}),
            json!({"spec": {"tags": [{"name": "a", "from": {"kind": "DockerImage", "name": "x:2"}}, {"name": "b"}]}}),
            json!({"spec": {"tags": [{"name": "b"}, {"name": "c", "annotations": {"p": "q"}}]}}),
            json!({"spec": {"tags": [{"name": "a"}, {"name": "a", "extra": 1}]}}),
            json!({"spec": {"tags": [{"name": "a"}, {"noname": true}]}}),
            json!({"spec": {"tags": [{"name": "a"}, "scalar"]}}),
            json!({"spec": {"tags": {"name": "a"}}}),
            json!({"status": {"tags": [{"tag": "t", "conditions": [{"type": "ImportSuccess", "status": "False"}]}]}}),
            json!({"status": {"tags": [{"tag": "t", "conditions": [{"type": "Other", "status": "True"}, {"type": "ImportSuccess", "status": "False"}]}]}}),
            json!({"status": {"tags": [{"tag": "t", "conditions": [{"type": "ImportSuccess", "status": "True"}]}, {"tag": "u", "conditions": null}]}}),
            json!({"metadata": {"ownerReferences": [{"uid": "1", "name": "a"}]}, "status": {"tags": [{"tag": "t", "items": [{"image": "x"}]}]}}),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"resourceVersion": "9", "managedFields": [{"x": 1}]}}),
        ];
        for old in &versions {
            for new in &versions {
                agree(old, new);
            }
        }
    }

    #[test]
    fn a_few_changed_entries_of_a_large_map_are_all_that_is_reported() {
        let old: Map<String, Value> = (0..2500).map(|i| (format!("k{i}"), json!(i))).collect();
        let mut new = old.clone();
        new.insert("k7".into(), json!("changed"));
        new.remove("k8");
        new.insert("added".into(), json!(1));
        let (old, new) = (json!({"data": old}), json!({"data": new}));
        let c = compare(&old, &new, KEYS);
        assert_eq!(c.modified.to_fields_v1(), json!({"f:data": {"f:k7": {}}}));
        assert_eq!(c.removed.to_fields_v1(), json!({"f:data": {"f:k8": {}}}));
        assert_eq!(c.added.to_fields_v1(), json!({"f:data": {"f:added": {}}}));
        agree(&old, &new);
    }
}
