//! Knative Eventing: a Trigger filters on attributes the source sends with values it sends and
//! agrees with the EventListener it feeds, the sources (ContainerSource, SinkBinding,
//! ImageStreamSource) and the Broker point at objects that exist,
//! and the EventTypes register exactly the types the source publishes, each with the `dataschema`
//! the source sends (and the `$id` of the schema in `schemas/` is that URL too).

use std::collections::BTreeMap;

use serde_json::Value;

use super::check::{Checker, list};
use super::model::{Doc, items};

/// The type of the CloudEvent an EventListener replies with (tektoncd/triggers
/// `pkg/reconciler/events`), which a Broker delivers again unless a Trigger filters it out.
const EL_ACCEPTED_TYPE: &str = "dev.tekton.event.triggers.accepted.v1";

impl<'a> Checker<'a> {
    pub fn knative_trigger(&mut self, doc: &'a Doc) {
        let spec = doc.spec();
        let ns = self.ns(doc).map(str::to_string);
        if let Some(broker) = spec["broker"].as_str()
            && self.find("Broker", broker, ns.as_deref()).is_none()
        {
            let msg = format!("Broker '{broker}' is not defined in the manifests");
            self.r.error(doc, "spec.broker", msg);
        }
        let legacy: BTreeMap<String, Value> = spec["filter"]["attributes"]
            .as_object()
            .map(|o| o.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
            .unwrap_or_default();
        let mut exact = BTreeMap::new();
        let mut excluded_types = Vec::new();
        for (k, v) in &legacy {
            self.filter_attribute(doc, &format!("spec.filter.attributes.{k}"), k, v);
        }
        for (i, f) in items(&spec["filters"]).iter().enumerate() {
            for (k, v) in f["exact"].as_object().into_iter().flatten() {
                self.filter_attribute(doc, &format!("spec.filters[{i}].exact.{k}"), k, v);
                exact.insert(k.clone(), v.clone());
            }
            if let Some(t) = f["not"]["exact"]["type"].as_str() {
                excluded_types.push(t.to_string());
            }
            for dialect in ["prefix", "suffix"] {
                for k in f[dialect].as_object().into_iter().flat_map(|o| o.keys()) {
                    let path = format!("spec.filters[{i}].{dialect}.{k}");
                    self.filter_attribute(doc, &path, k, &Value::Null);
                }
            }
        }
        if !legacy.is_empty() && !items(&spec["filters"]).is_empty() && exact != legacy {
            let msg = format!(
                "filter.attributes {legacy:?} and the exact filters {exact:?} differ: Knative >= 1.15 \
                 uses `filters`, an older one without new-trigger-filters uses `filter`"
            );
            self.r.error(doc, "spec.filters", msg);
        }
        let selected = if exact.is_empty() { &legacy } else { &exact };
        if let Some(el) = self.subscriber_event_listener(doc, &spec["subscriber"]) {
            self.trigger_to_listener(doc, el, selected, &excluded_types);
        }
        let dls = &spec["delivery"]["deadLetterSink"];
        self.destination(doc, dls, "spec.delivery.deadLetterSink");
    }

    /// A filter attribute is a CloudEvents attribute or an extension the source sends, and a
    /// `type` or `imagetag` value is one it sends.
    fn filter_attribute(&mut self, doc: &Doc, path: &str, name: &str, value: &Value) {
        let value = value.as_str().unwrap_or_default();
        let msg = if !self.code.attributes.contains(name) {
            format!(
                "'{name}' is neither a CloudEvents attribute nor an extension the source sends ({})",
                list(&self.code.attributes)
            )
        } else if name == "type"
            && !self.code.event_types.contains(value)
            && value != EL_ACCEPTED_TYPE
        {
            format!(
                "type '{value}' is not a type the source emits ({})",
                list(&self.code.event_types)
            )
        } else if name == "imagetag" && !value.is_empty() && !self.candidate_tags().contains(value)
        {
            format!(
                "imagetag '{value}' is not the candidate tag {}",
                list(self.candidate_tags())
            )
        } else {
            return;
        };
        self.r.error(doc, path, msg);
    }

    /// A Trigger whose subscriber is an EventListener: the reply loop is filtered out, the
    /// listener's CEL filter accepts what the Trigger passes, and both watch one namespace.
    fn trigger_to_listener(
        &mut self,
        doc: &Doc,
        el: &Doc,
        selected: &BTreeMap<String, Value>,
        excluded_types: &[String],
    ) {
        if !excluded_types.iter().any(|t| t == EL_ACCEPTED_TYPE) {
            let msg = format!(
                "the subscriber is an EventListener, whose reply {EL_ACCEPTED_TYPE} goes back into the \
                 Broker: add `filters: [{{not: {{exact: {{type: {EL_ACCEPTED_TYPE}}}}}}}]`"
            );
            self.r.error(doc, "spec.filters", msg);
        }
        for attr in ["type", "imagetag"] {
            let pinned = self.cel_pinned(el, &format!("ce-{attr}"));
            let value = selected
                .get(attr)
                .and_then(Value::as_str)
                .unwrap_or_default();
            if !pinned.is_empty() && !pinned.contains(value) {
                let msg = format!(
                    "the Trigger passes {attr} '{value}', but the EventListener's CEL filter accepts only \
                     {}: every event would be delivered and dropped",
                    list(&pinned)
                );
                self.r.error(doc, "spec.filters", msg);
            }
        }
        let wanted = selected.get("namespace").and_then(Value::as_str);
        if let Some(el_ns) = self.ns(el)
            && wanted != Some(el_ns)
        {
            let msg = format!(
                "the EventListener runs in namespace '{el_ns}' and its PipelineRuns can promote only \
                 ImageStreams there, but the Trigger selects namespace {wanted:?}"
            );
            self.r.error(doc, "spec.filters", msg);
        }
    }

    fn subscriber_event_listener(&mut self, doc: &Doc, sub: &Value) -> Option<&'a Doc> {
        let r = &sub["ref"];
        if r["kind"] == "EventListener" {
            let name = r["name"].as_str().unwrap_or_default();
            let el = self.find("EventListener", name, r["namespace"].as_str());
            if el.is_none() {
                let msg = format!("EventListener '{name}' is not defined in tekton/");
                self.r.error(doc, "spec.subscriber.ref", msg);
            }
            return el;
        }
        match sub["uri"].as_str() {
            Some(uri) if uri.starts_with("http") && uri.contains("://el-") => {
                self.event_listener_url(doc, "spec.subscriber.uri", uri)
            }
            _ => None,
        }
    }

    /// An EventListener's Service URL names one in the manifests, on its port.
    pub fn event_listener_url(&mut self, doc: &Doc, path: &str, uri: &str) -> Option<&'a Doc> {
        let Some((name, ns, port)) = listener_host(uri) else {
            let msg = format!(
                "'{uri}' is not an EventListener Service URL (http://el-<name>.<namespace>.svc.cluster.local:8080)"
            );
            self.r.error(doc, path, msg);
            return None;
        };
        let Some(el) = self.find("EventListener", name, Some(ns)) else {
            let msg = format!(
                "'{uri}': there is no EventListener '{name}' in namespace '{ns}' in tekton/"
            );
            self.r.error(doc, path, msg);
            return None;
        };
        if port.is_some_and(|p| p != "8080") {
            let msg = format!("'{uri}': the EventListener's Service listens on 8080");
            self.r.error(doc, path, msg);
        }
        Some(el)
    }

    /// A destination's Service or Broker exists.
    pub fn destination(&mut self, doc: &Doc, dest: &Value, path: &str) {
        let r = &dest["ref"];
        let (Some(kind @ ("Service" | "Broker" | "EventListener")), Some(name)) =
            (r["kind"].as_str(), r["name"].as_str())
        else {
            return;
        };
        let ns = r["namespace"].as_str().or(self.ns(doc)).map(str::to_string);
        if self.find(kind, name, ns.as_deref()).is_none() {
            let msg = format!(
                "{kind} '{name}' (namespace {}) is not defined in the manifests",
                ns.as_deref().unwrap_or("?")
            );
            self.r.error(doc, &format!("{path}.ref"), msg);
        }
    }

    pub fn knative_source(&mut self, doc: &Doc) {
        let spec = doc.spec();
        self.destination(doc, &spec["sink"], "spec.sink");
        let own_ns = self.ns(doc).map(str::to_string);
        if doc.kind() == "SinkBinding"
            && let Some(name) = spec["subject"]["name"].as_str()
        {
            let kind = spec["subject"]["kind"].as_str().unwrap_or_default();
            let ns = spec["subject"]["namespace"]
                .as_str()
                .map(str::to_string)
                .or(own_ns.clone());
            if self.find(kind, name, ns.as_deref()).is_none() {
                let msg = format!(
                    "{kind} '{name}' (namespace {}) is not defined in the manifests (config/)",
                    ns.as_deref().unwrap_or("?")
                );
                self.r.error(doc, "spec.subject", msg);
            }
        }
        let account = match doc.kind() {
            "ContainerSource" => Some((
                spec["template"]["spec"]["serviceAccountName"].as_str(),
                "spec.template.spec.serviceAccountName",
            )),
            // The multi-tenant adapter serves an ImageStreamSource only if its account may read
            // the streams: one that does not exist may not.
            "ImageStreamSource" => Some((
                spec["serviceAccountName"].as_str(),
                "spec.serviceAccountName",
            )),
            _ => None,
        };
        if let Some((Some(sa), path)) = account
            && self.find("ServiceAccount", sa, own_ns.as_deref()).is_none()
        {
            let msg = format!("ServiceAccount '{sa}' is not defined in the manifests");
            self.r.error(doc, path, msg);
        }
    }

    /// The EventTypes register every published type with the `dataschema` the source sends, and
    /// each `schemas/` file's `$id` is that URL.
    pub fn event_types(&mut self) {
        for (t, p) in &self.code.published {
            let id = self.code.schemas.get(&p.schema_file).map(|s| &s["$id"]);
            if id.and_then(Value::as_str) != Some(p.dataschema.as_str()) {
                self.r.file_error(
                    &format!("schemas/{}", p.schema_file),
                    format!(
                        "$id is {id:?}, but the source sends {t} with dataschema '{}'",
                        p.dataschema
                    ),
                );
            }
        }
        let docs: Vec<&Doc> = self.of_kind("EventType").collect();
        let mut registered = Vec::new();
        for d in &docs {
            let spec = d.spec();
            let v1beta3 = d.obj["apiVersion"]
                .as_str()
                .is_some_and(|v| v.ends_with("/v1beta3"));
            let (ty, schema, spath) = if v1beta3 {
                let attr = |n: &str| {
                    items(&spec["attributes"])
                        .iter()
                        .find(|a| a["name"] == n)
                        .and_then(|a| a["value"].as_str())
                };
                (
                    attr("type"),
                    attr("dataschema").or(attr("schemadata")),
                    "spec.attributes",
                )
            } else {
                (
                    spec["type"].as_str(),
                    spec["schema"].as_str(),
                    "spec.schema",
                )
            };
            let ty = ty.unwrap_or_default();
            registered.push(ty.to_string());
            let Some(p) = self.code.published.get(ty) else {
                let msg = format!(
                    "type '{ty}' is not one of the types the source publishes with a schema ({})",
                    list(self.code.published.keys())
                );
                self.r.error(d, "spec", msg);
                continue;
            };
            if schema != Some(p.dataschema.as_str()) {
                let msg = format!(
                    "the schema of {ty} is {schema:?}; the source's dataschema is '{}' (schemas/{})",
                    p.dataschema, p.schema_file
                );
                self.r.error(d, spath, msg);
            }
            let r = &spec["reference"];
            if r["kind"] == "Broker" {
                let name = r["name"].as_str().unwrap_or_default();
                let ns = r["namespace"].as_str().or(self.ns(d)).map(str::to_string);
                if self.find("Broker", name, ns.as_deref()).is_none() {
                    let msg = format!("Broker '{name}' is not defined in the manifests");
                    self.r.error(d, "spec.reference", msg);
                }
            }
        }
        if let Some(first) = docs.first() {
            for t in self
                .code
                .published
                .keys()
                .filter(|t| !registered.contains(t))
            {
                self.r
                    .file_error(&first.file, format!("no EventType registers {t}"));
            }
        }
    }
}

/// `(name, namespace, port)` of `http(s)://el-<name>.<namespace>.svc[.cluster.local][:port][/]`.
fn listener_host(uri: &str) -> Option<(&str, &str, Option<&str>)> {
    let rest = uri
        .strip_prefix("http://")
        .or_else(|| uri.strip_prefix("https://"))?
        .strip_prefix("el-")?;
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    let (host, port) = match rest.split_once(':') {
        Some((h, p)) if !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()) => (h, Some(p)),
        Some(_) => return None,
        None => (rest, None),
    };
    let host = host.strip_suffix(".cluster.local").unwrap_or(host);
    let (name_ns, svc) = host.rsplit_once('.')?;
    let (name, ns) = name_ns.split_once('.')?;
    let label = |s: &str| {
        !s.is_empty()
            && s.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    };
    (svc == "svc" && label(name) && label(ns)).then_some((name, ns, port))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_listener_service_urls() {
        assert_eq!(
            listener_host("http://el-imagegate.notebooks.svc.cluster.local:8080"),
            Some(("imagegate", "notebooks", Some("8080")))
        );
        assert_eq!(listener_host("https://el-a.b.svc/"), Some(("a", "b", None)));
        assert_eq!(listener_host("http://el-a.b.c.svc"), None);
        assert_eq!(listener_host("http://broker.b.svc"), None);
        assert_eq!(listener_host("http://el-a.b.svc:x"), None);
    }
}
