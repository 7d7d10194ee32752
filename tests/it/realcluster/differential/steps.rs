//! The request sequence of the differential check, for a built-in kind (ConfigMap) and a CRD
//! kind (Tekton's CustomRun): creates, a conflict and an invalid object, reads, updates with a
//! stale, the current and no resourceVersion, a no-op update, every patch type the product uses
//! (JSON merge: the source's checkpoint; JSON patch: Tekton's cancel; strategic merge: the
//! controller's ImageStream write, refused for a CRD; server-side apply, its conflict and its
//! force), a patch's resourceVersion precondition, paging, selectors, deletes with and without a
//! precondition, a watch replayed from a list's resourceVersion, a streaming list's bookmark, and
//! a watch from a resourceVersion too old (410).

use serde_json::{Value, json};

/// One step of the sequence.
pub enum Step {
    /// The same request to both servers.
    Call {
        name: String,
        method: &'static str,
        path: String,
        content_type: &'static str,
        body: Option<String>,
    },
    /// Both servers forget the history before now: the emulator by its control API's `compact`,
    /// the real server by a restart of kube-apiserver with etcd compacted meanwhile (its watch
    /// cache otherwise holds every event since it started).
    Compact,
}

const JSON: &str = "application/json";
const MERGE: &str = "application/merge-patch+json";
const JSON_PATCH: &str = "application/json-patch+json";
const STRATEGIC: &str = "application/strategic-merge-patch+json";
const APPLY: &str = "application/apply-patch+yaml";

/// What differs between the two kinds' sequences.
pub struct Kind {
    /// `configmap` or `customrun`, the prefix of every step's name.
    pub prefix: &'static str,
    pub api_version: &'static str,
    pub kind: &'static str,
    /// The collection, in the namespace `diff`.
    pub collection: &'static str,
    /// The payload of a new object (its `data` or `spec`).
    pub payload: fn(&str) -> Value,
    /// A change of one field of the payload, as a merge patch.
    pub change: fn(&str) -> Value,
    /// A JSON patch that adds a field to the payload, and its path.
    pub json_patch: fn() -> Value,
    /// A JSON patch whose `test` fails.
    pub failing_test: fn() -> Value,
    /// An object the server must refuse (422).
    pub invalid: fn() -> Value,
}

/// The ConfigMap kind.
pub fn configmap() -> Kind {
    Kind {
        prefix: "configmap",
        api_version: "v1",
        kind: "ConfigMap",
        collection: "/api/v1/namespaces/diff/configmaps",
        payload: |v| json!({"data": {"k": v}}),
        change: |v| json!({"data": {"m": v}}),
        json_patch: || json!([{"op": "add", "path": "/data/j", "value": "1"}]),
        failing_test: || json!([{"op": "test", "path": "/data/k", "value": "not-this"}]),
        invalid: || json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "Not_Valid"}}),
    }
}

/// Tekton's CustomRun kind (its released CRD from Go's module cache, a status subresource).
pub fn customrun() -> Kind {
    Kind {
        prefix: "customrun",
        api_version: "tekton.dev/v1beta1",
        kind: "CustomRun",
        collection: "/apis/tekton.dev/v1beta1/namespaces/diff/customruns",
        payload: |v| {
            json!({"spec": {"customRef": {"apiVersion": "imagegate.dev/v1alpha1", "kind": "ImagePromotion"},
                   "params": [{"name": "imagestream", "value": v}]}})
        },
        change: |v| json!({"spec": {"serviceAccountName": v}}),
        json_patch: || json!([{"op": "add", "path": "/spec/status", "value": "RunCancelled"}]),
        failing_test: || json!([{"op": "test", "path": "/spec/status", "value": "not-this"}]),
        invalid: || {
            json!({"apiVersion": "tekton.dev/v1beta1", "kind": "CustomRun", "metadata": {"name": "invalid"},
                   "spec": {"params": "not a list"}})
        },
    }
}

impl Kind {
    fn object(&self, name: &str, value: &str, extra: Value) -> String {
        let mut o =
            json!({"apiVersion": self.api_version, "kind": self.kind, "metadata": {"name": name}});
        json_patch::merge(&mut o, &(self.payload)(value));
        json_patch::merge(&mut o, &extra);
        o.to_string()
    }

    fn call(
        &self,
        name: &str,
        method: &'static str,
        path: String,
        ct: &'static str,
        body: Option<String>,
    ) -> Step {
        Step::Call {
            name: format!("{}: {name}", self.prefix),
            method,
            path,
            content_type: ct,
            body,
        }
    }

    /// The sequence for this kind. Step names are unique; `{rv:<kind>: <step>}` in a path or a
    /// body is the resourceVersion that step answered.
    pub fn steps(&self) -> Vec<Step> {
        let c = self.collection;
        let a = format!("{c}/a");
        let p = self.prefix;
        let rv = |step: &str| format!("{{rv:{p}: {step}}}");
        let with_rv = |name: &str, value: &str, rv: &str| {
            self.object(
                name,
                value,
                json!({"metadata": {"resourceVersion": rv, "labels": {"set": "x"}}}),
            )
        };
        let mut s = vec![
            self.call("list empty", "GET", c.to_string(), JSON, None),
            self.call(
                "create a",
                "POST",
                c.to_string(),
                JSON,
                Some(self.object("a", "one", json!({"metadata": {"labels": {"set": "x"}}}))),
            ),
            self.call(
                "create a again",
                "POST",
                c.to_string(),
                JSON,
                Some(self.object("a", "one", json!({}))),
            ),
            self.call(
                "create invalid",
                "POST",
                c.to_string(),
                JSON,
                Some((self.invalid)().to_string()),
            ),
            self.call(
                "create with a resourceVersion",
                "POST",
                c.to_string(),
                JSON,
                Some(with_rv("r", "one", "5")),
            ),
            self.call("get a", "GET", a.clone(), JSON, None),
            self.call("get missing", "GET", format!("{c}/missing"), JSON, None),
            self.call(
                "update stale",
                "PUT",
                a.clone(),
                JSON,
                Some(with_rv("a", "two", &rv("list empty"))),
            ),
            self.call(
                "update current",
                "PUT",
                a.clone(),
                JSON,
                Some(with_rv("a", "two", &rv("create a"))),
            ),
            self.call(
                "update without resourceVersion",
                "PUT",
                a.clone(),
                JSON,
                Some(self.object("a", "three", json!({"metadata": {"labels": {"set": "x"}}}))),
            ),
            self.call("get a again", "GET", a.clone(), JSON, None),
            self.call(
                "update no-op",
                "PUT",
                a.clone(),
                JSON,
                Some(format!("{{body:{p}: get a again}}")),
            ),
            self.call(
                "update name mismatch",
                "PUT",
                a.clone(),
                JSON,
                Some(self.object("b", "x", json!({}))),
            ),
            self.call(
                "update missing",
                "PUT",
                format!("{c}/missing"),
                JSON,
                Some(self.object("missing", "x", json!({}))),
            ),
            self.call(
                "merge patch",
                "PATCH",
                a.clone(),
                MERGE,
                Some((self.change)("merged").to_string()),
            ),
            self.call(
                "merge patch no-op",
                "PATCH",
                a.clone(),
                MERGE,
                Some((self.change)("merged").to_string()),
            ),
            self.call(
                "merge patch stale precondition",
                "PATCH",
                a.clone(),
                MERGE,
                Some(json!({"metadata": {"resourceVersion": "1"}}).to_string()),
            ),
            self.call(
                "json patch",
                "PATCH",
                a.clone(),
                JSON_PATCH,
                Some((self.json_patch)().to_string()),
            ),
            self.call(
                "json patch failing test",
                "PATCH",
                a.clone(),
                JSON_PATCH,
                Some((self.failing_test)().to_string()),
            ),
            self.call(
                "json patch not a list",
                "PATCH",
                a.clone(),
                JSON_PATCH,
                Some("{}".into()),
            ),
            self.call(
                "strategic merge patch",
                "PATCH",
                a.clone(),
                STRATEGIC,
                Some((self.change)("strategic").to_string()),
            ),
            self.call(
                "patch unsupported type",
                "PATCH",
                a.clone(),
                "text/plain",
                Some("x".into()),
            ),
            self.call(
                "patch missing",
                "PATCH",
                format!("{c}/missing"),
                MERGE,
                Some("{}".into()),
            ),
            self.call(
                "apply without field manager",
                "PATCH",
                a.clone(),
                APPLY,
                Some(self.object("a", "applied", json!({}))),
            ),
            self.call(
                "apply conflict",
                "PATCH",
                format!("{a}?fieldManager=diff"),
                APPLY,
                Some(self.object("a", "applied", json!({}))),
            ),
            self.call(
                "apply force",
                "PATCH",
                format!("{a}?fieldManager=diff&force=true"),
                APPLY,
                Some(self.object("a", "applied", json!({}))),
            ),
            self.call(
                "apply creates",
                "PATCH",
                format!("{c}/b?fieldManager=diff"),
                APPLY,
                Some(self.object("b", "one", json!({"metadata": {"labels": {"set": "y"}}}))),
            ),
            self.call("list", "GET", c.to_string(), JSON, None),
            self.call("list limit 1", "GET", format!("{c}?limit=1"), JSON, None),
            self.call(
                "list label selector",
                "GET",
                format!("{c}?labelSelector=set%3Dy"),
                JSON,
                None,
            ),
            self.call(
                "list bad label selector",
                "GET",
                format!("{c}?labelSelector=%3D%3D"),
                JSON,
                None,
            ),
            self.call(
                "list field selector",
                "GET",
                format!("{c}?fieldSelector=metadata.name%3Da"),
                JSON,
                None,
            ),
            self.call(
                "list resourceVersion 0",
                "GET",
                format!("{c}?resourceVersion=0"),
                JSON,
                None,
            ),
            self.call(
                "delete precondition",
                "DELETE",
                format!("{c}/b"),
                JSON,
                Some(
                    json!({"preconditions": {"uid": "00000000-0000-0000-0000-000000000000"}})
                        .to_string(),
                ),
            ),
            self.call("delete b", "DELETE", format!("{c}/b"), JSON, None),
            self.call("delete missing", "DELETE", format!("{c}/b"), JSON, None),
        ];
        s.extend(self.status_steps());
        s.extend([
            self.call("watch from the first list", "GET", format!("{c}?watch=true&timeoutSeconds=2&resourceVersion={}", rv("list empty")), JSON, None),
            self.call("watch a by name", "GET", format!("{c}?watch=true&timeoutSeconds=1&fieldSelector=metadata.name%3Da&resourceVersion={}", rv("json patch")), JSON, None),
            self.call("streaming list", "GET", format!("{c}?watch=true&timeoutSeconds=2&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true"), JSON, None),
            self.call("streaming list without bookmarks", "GET", format!("{c}?watch=true&timeoutSeconds=2&sendInitialEvents=true&resourceVersionMatch=NotOlderThan"), JSON, None),
            self.call("watch bad resourceVersion", "GET", format!("{c}?watch=true&timeoutSeconds=1&resourceVersion=abc"), JSON, None),
        ]);
        s
    }

    /// The steps after both servers forgot the history before now ([`Step::Compact`]).
    pub fn after_compaction(&self) -> Vec<Step> {
        let c = self.collection;
        let p = self.prefix;
        vec![
            self.call(
                "watch too old",
                "GET",
                format!("{c}?watch=true&timeoutSeconds=2&resourceVersion={{rv:{p}: list empty}}"),
                JSON,
                None,
            ),
            self.call(
                "list too old",
                "GET",
                format!("{c}?resourceVersion={{rv:{p}: list empty}}&resourceVersionMatch=Exact"),
                JSON,
                None,
            ),
            self.call("delete a", "DELETE", format!("{c}/a"), JSON, None),
        ]
    }

    /// The status subresource's rules (CustomRun only): a status write ignores the spec, a
    /// main-resource write ignores the status, and only a spec change moves the generation.
    fn status_steps(&self) -> Vec<Step> {
        if self.kind != "CustomRun" {
            return vec![self.call(
                "status subresource",
                "GET",
                format!("{}/a/status", self.collection),
                JSON,
                None,
            )];
        }
        let a = format!("{}/a", self.collection);
        let status = json!({"status": {"conditions": [{"type": "Succeeded", "status": "Unknown", "reason": "Started"}]}, "spec": {"serviceAccountName": "ignored"}});
        vec![
            self.call(
                "status merge patch",
                "PATCH",
                format!("{a}/status"),
                MERGE,
                Some(status.to_string()),
            ),
            self.call(
                "status in a main write",
                "PATCH",
                a.clone(),
                MERGE,
                Some(json!({"status": {"conditions": []}}).to_string()),
            ),
            self.call("get status", "GET", format!("{a}/status"), JSON, None),
            self.call(
                "status update stale",
                "PUT",
                format!("{a}/status"),
                JSON,
                Some(self.object(
                    "a",
                    "x",
                    json!({"metadata": {"resourceVersion": "{rv:customrun: list empty}"}}),
                )),
            ),
        ]
    }
}
