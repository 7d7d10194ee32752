//! One side of the differential check (the real kube-apiserver or the emulator): it sends a
//! request as admin and reduces the answer to what must be the same on both servers: the status
//! code; a `Status`'s reason, details and message; an object's kind, name, the metadata fields it
//! has and its payload; a list's items and paging; a watch's events. A resourceVersion is opaque
//! to clients, so it is never compared as a value: it is named after the step that first
//! answered it (`rv:<step>`), so "this watch event carries the resourceVersion of that write"
//! and "this no-op did not change it" compare across servers, and each new one is checked to be
//! greater than every earlier one (both servers use etcd-like counters, and the programs rely
//! on none of that, but a server that went backwards would break watch resumption).

use std::collections::HashMap;

use serde_json::{Map, Value, json};

/// A server under comparison, and what its answers so far taught about its resourceVersions.
pub struct Side {
    pub name: &'static str,
    client: kube::Client,
    /// resourceVersion → the label it was given (`rv:<step>`).
    labels: HashMap<String, String>,
    /// label → resourceVersion, to put into later requests' bodies.
    values: HashMap<String, String>,
    /// `body:<step>` → the body that step answered, to send back (a no-op update).
    bodies: HashMap<String, String>,
    /// The greatest resourceVersion seen.
    newest: u64,
    /// Whether the answer being read is a watch's.
    in_watch: bool,
    /// resourceVersions that went backwards, or were not numbers.
    pub rv_problems: Vec<String>,
}

/// A request of a step. `{rv:<step>}` in the path or the body is that step's resourceVersion on
/// this side.
pub struct Request<'a> {
    pub method: &'a str,
    pub path: &'a str,
    pub content_type: &'a str,
    pub body: Option<&'a str>,
}

impl Side {
    pub fn new(name: &'static str, client: kube::Client) -> Side {
        Side {
            name,
            client,
            labels: HashMap::new(),
            values: HashMap::new(),
            bodies: HashMap::new(),
            newest: 0,
            in_watch: false,
            rv_problems: Vec::new(),
        }
    }

    /// `text` with each `{rv:<step>}` replaced by that step's resourceVersion on this side.
    fn fill(&self, text: &str) -> String {
        let mut out = text.to_string();
        for (label, value) in self.values.iter().chain(&self.bodies) {
            out = out.replace(&format!("{{{label}}}"), value);
        }
        out
    }

    /// Sends the request; the answer's code and body.
    pub async fn send(&self, r: &Request<'_>) -> (u16, Vec<u8>) {
        let path = self.fill(r.path);
        let body = r.body.map(|b| self.fill(b)).unwrap_or_default();
        let mut req = http::Request::builder().method(r.method).uri(path);
        if r.body.is_some() {
            req = req.header("Content-Type", r.content_type);
        }
        let req = req
            .body(kube::client::Body::from(body.into_bytes()))
            .unwrap();
        let resp = self
            .client
            .send(req)
            .await
            .unwrap_or_else(|e| panic!("{}: {} {} failed: {e}", self.name, r.method, r.path));
        let code = resp.status().as_u16();
        let bytes = resp.into_body().collect_bytes().await.unwrap_or_default();
        (code, bytes.to_vec())
    }

    /// The label of a resourceVersion, naming it after `step` when it is new.
    fn label(&mut self, rv: &str, step: &str) -> String {
        let label = format!("rv:{step}");
        // The first resourceVersion a step answered is `{rv:<step>}` in later requests, also
        // when it is not new (a list's, after the last write).
        self.values.entry(label.clone()).or_insert(rv.to_string());
        if let Some(l) = self.labels.get(rv) {
            return l.clone();
        }
        match rv.parse::<u64>() {
            // A write that only a watch shows (a delete answers a Status) is older than the
            // writes answered since: the order of a watch's events is checked on its own.
            Ok(n) if n > self.newest || self.in_watch => self.newest = self.newest.max(n),
            Ok(n) => self.rv_problems.push(format!(
                "{step}: resourceVersion {n} is new but not greater than {}",
                self.newest
            )),
            Err(_) => self
                .rv_problems
                .push(format!("{step}: resourceVersion {rv:?} is not a number")),
        }
        self.labels.insert(rv.to_string(), label.clone());
        label
    }

    /// What must be the same on both servers about an answer to `step`.
    pub fn observe(&mut self, step: &str, path: &str, code: u16, body: &[u8]) -> Value {
        self.bodies.insert(
            format!("body:{step}"),
            String::from_utf8_lossy(body).into_owned(),
        );
        let mut seen = Map::new();
        seen.insert("code".into(), json!(code));
        let text = String::from_utf8_lossy(body);
        let watch = code == 200 && path.contains("watch=true");
        if !watch && let Ok(v) = serde_json::from_str::<Value>(&text) {
            seen.insert("body".into(), self.reduce(step, &v));
        } else if !text.trim().is_empty() {
            // A watch: one JSON event a line, each object's resourceVersion newer than the last.
            self.in_watch = true;
            let mut last = 0u64;
            for l in text.lines() {
                let e: Value = serde_json::from_str(l).unwrap_or_default();
                if e["type"] == "BOOKMARK" || e["type"] == "ERROR" {
                    continue;
                }
                let rv = e["object"]["metadata"]["resourceVersion"]
                    .as_str()
                    .unwrap_or_default();
                match rv.parse::<u64>() {
                    Ok(n) if n > last => last = n,
                    _ => self.rv_problems.push(format!(
                        "{step}: a watch event's resourceVersion {rv:?} does not follow {last}"
                    )),
                }
            }
            let events: Vec<Value> = text
                .lines()
                .filter(|l| !l.trim().is_empty())
                .map(|l| match serde_json::from_str::<Value>(l) {
                    Ok(e) if e["type"] == "BOOKMARK" => self.bookmark(&e["object"]),
                    Ok(e) => json!({"type": e["type"], "object": self.reduce(step, &e["object"])}),
                    Err(_) => json!({"unreadable": l}),
                })
                .collect();
            self.in_watch = false;
            seen.insert("events".into(), json!(events));
        }
        Value::Object(seen)
    }

    /// A bookmark's resourceVersion is the server's progress, which on the real server moves
    /// with writes to anything in etcd (kube-apiserver's own Leases, say), not only to this
    /// collection: what must hold is that it is not older than the newest write seen.
    fn bookmark(&self, object: &Value) -> Value {
        let rv = object["metadata"]["resourceVersion"]
            .as_str()
            .unwrap_or_default();
        let not_older = rv.parse::<u64>().is_ok_and(|n| n >= self.newest);
        json!({"type": "BOOKMARK", "kind": object["kind"], "apiVersion": object["apiVersion"],
               "annotations": object["metadata"]["annotations"],
               "resourceVersionNotOlderThanTheNewestWrite": not_older})
    }

    fn reduce(&mut self, step: &str, v: &Value) -> Value {
        let kind = v["kind"].as_str().unwrap_or_default();
        if kind == "Status" {
            // An empty `details` decodes as none; a uid is each server's own.
            let mut details = v["details"].clone();
            if let Some(d) = details.as_object_mut()
                && d.remove("uid").is_some()
            {
                d.insert("uid".into(), json!("<uid>"));
            }
            if details == json!({}) {
                details = Value::Null;
            }
            let mut message = json!(uuids_out(v["message"].as_str().unwrap_or_default()));
            if v["reason"] == "Expired" {
                // `too old resource version: <asked> (<oldest>)`: the numbers are each server's.
                message = json!(numbers_out(message.as_str().unwrap_or_default()));
            }
            return json!({
                "kind": "Status", "status": v["status"], "reason": v["reason"], "code": v["code"],
                "message": message, "details": details,
            });
        }
        if kind.ends_with("List") {
            let items: Vec<Value> = v["items"]
                .as_array()
                .map(|a| a.iter().map(|i| self.reduce(step, i)).collect())
                .unwrap_or_default();
            let meta = &v["metadata"];
            let rv = meta["resourceVersion"]
                .as_str()
                .map(|r| self.label(r, step));
            return json!({
                "kind": kind, "apiVersion": v["apiVersion"], "items": items,
                "resourceVersion": rv.is_some(),
                "continue": meta["continue"].as_str().is_some_and(|c| !c.is_empty()),
                "remainingItemCount": meta["remainingItemCount"],
            });
        }
        let meta = &v["metadata"];
        let rv = meta["resourceVersion"]
            .as_str()
            .map(|r| self.label(r, step));
        let keys: Vec<&String> = meta
            .as_object()
            .map(|m| m.keys().collect())
            .unwrap_or_default();
        let mut out = json!({
            "kind": v["kind"], "apiVersion": v["apiVersion"], "name": meta["name"],
            "metadataFields": keys, "resourceVersion": rv,
            "labels": meta["labels"], "annotations": meta["annotations"],
            "generation": meta["generation"],
            "managers": meta["managedFields"].as_array().map(|a| a.iter().map(|f| json!([f["manager"], f["operation"], f["subresource"]])).collect::<Vec<_>>()),
        });
        for k in ["data", "spec", "status"] {
            if !v[k].is_null() {
                out[k] = strip_times(&v[k]);
            }
        }
        out
    }
}

/// `v` with every RFC 3339 time replaced by `<time>` (the servers' clocks are not compared).
fn strip_times(v: &Value) -> Value {
    match v {
        Value::String(s) if chrono::DateTime::parse_from_rfc3339(s).is_ok() => json!("<time>"),
        Value::Array(a) => Value::Array(a.iter().map(strip_times).collect()),
        Value::Object(m) => {
            Value::Object(m.iter().map(|(k, v)| (k.clone(), strip_times(v))).collect())
        }
        other => other.clone(),
    }
}

/// `text` with each run of digits replaced by `N`.
fn numbers_out(text: &str) -> String {
    let mut out = String::new();
    let mut in_number = false;
    for ch in text.chars() {
        if ch.is_ascii_digit() {
            if !in_number {
                out.push('N');
            }
            in_number = true;
        } else {
            out.push(ch);
            in_number = false;
        }
    }
    out
}

/// `text` with each UUID (8-4-4-4-12 hex digits) replaced by `<uid>`: each server makes its own.
fn uuids_out(text: &str) -> String {
    let shape = [8, 4, 4, 4, 12];
    let is_uuid = |w: &str| {
        let parts: Vec<&str> = w.split('-').collect();
        parts.len() == 5
            && parts
                .iter()
                .zip(shape)
                .all(|(p, n)| p.len() == n && p.chars().all(|c| c.is_ascii_hexdigit()))
    };
    let mut out = String::new();
    let mut word = String::new();
    for ch in text.chars().chain(std::iter::once(' ')) {
        if ch.is_ascii_hexdigit() || ch == '-' {
            word.push(ch);
            continue;
        }
        out.push_str(if is_uuid(&word) { "<uid>" } else { &word });
        word.clear();
        out.push(ch);
    }
    out.pop();
    out
}
