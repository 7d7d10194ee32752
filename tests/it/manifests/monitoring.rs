//! The monitoring that ships (`config/402-metrics-services.yaml`, `config/monitoring/`): each
//! program's Deployment has one Service that reaches its `metrics` port, the ServiceMonitor
//! selects those Services by a port they have, and every PromQL expression of the PrometheusRule
//! and the Grafana dashboard names series and labels the programs export ([`super::exported`])
//! or a known kube-state-metrics series, with label values the code uses.

use std::collections::BTreeSet;

use serde_json::Value;

use super::check::{Checker, list};
use super::model::{Doc, at, items};
use super::promql::{self, Refs};

/// Labels Prometheus adds to every series it scrapes through a ServiceMonitor.
const TARGET_LABELS: &[&str] = &[
    "namespace",
    "pod",
    "service",
    "job",
    "instance",
    "endpoint",
    "container",
];

/// Series the rules may use that other exporters provide: (name, labels).
const EXTERNAL: &[(&str, &[&str])] = &[(
    // kube-state-metrics, part of OpenShift's platform monitoring.
    "kube_deployment_status_replicas_ready",
    &["namespace", "deployment"],
)];

/// Severities the alerts use (OpenShift's alerting rules' values).
const SEVERITIES: &[&str] = &["critical", "warning", "info"];

impl<'a> Checker<'a> {
    /// Checks the Services, ServiceMonitors, PrometheusRules and dashboards.
    pub fn monitoring(&mut self) {
        let services = self.metrics_services();
        for d in self.of_kind("ServiceMonitor") {
            self.service_monitor(d, &services);
        }
        for d in self.of_kind("PrometheusRule") {
            self.prometheus_rule(d);
        }
        let dashboards = self.docs.iter().filter(|d| d.file.ends_with(".json"));
        for d in dashboards {
            let panels = d.obj["panels"].clone();
            self.panels(d, &panels, "panels");
        }
    }

    /// Each `imagegate` Deployment's one Service; returns them.
    fn metrics_services(&mut self) -> Vec<&'a Doc> {
        let mut found = Vec::new();
        for dep in self
            .of_kind("Deployment")
            .filter(|d| d.directory() == "config")
        {
            let template = &dep.spec()["template"];
            let Some(container) = items(&template["spec"]["containers"])
                .iter()
                .find(|c| c["image"].as_str().is_some_and(|i| i.contains("imagegate")))
            else {
                continue;
            };
            let ns = self.ns(dep).map(str::to_string);
            let pods = &template["metadata"]["labels"];
            let services: Vec<&'a Doc> = self
                .of_kind("Service")
                .filter(|s| {
                    s.directory() == "config"
                        && self.ns(s) == ns.as_deref()
                        && selects(&s.spec()["selector"], pods)
                })
                .collect();
            let [service] = services[..] else {
                self.r.error(
                    dep,
                    "spec.template.metadata.labels",
                    format!(
                        "{} Services select this Deployment's pods; one must, to scrape its /metrics",
                        services.len()
                    ),
                );
                continue;
            };
            self.service_reaches_metrics(service, container);
            found.push(service);
        }
        for s in self
            .of_kind("Service")
            .filter(|d| d.directory() == "config")
        {
            if !found.iter().any(|f| std::ptr::eq(*f, s)) {
                self.r
                    .error(s, "spec.selector", "selects no imagegate Deployment's pods");
            }
        }
        found
    }

    /// `service` has a port `metrics` whose targetPort is the container's `metrics` port.
    fn service_reaches_metrics(&mut self, service: &Doc, container: &Value) {
        let container_port = items(&container["ports"])
            .iter()
            .find(|p| p["name"] == "metrics")
            .and_then(|p| p["containerPort"].as_u64());
        let ports = items(&service.spec()["ports"]);
        let Some((i, port)) = ports
            .iter()
            .enumerate()
            .find(|(_, p)| p["name"] == "metrics")
        else {
            self.r
                .error(service, "spec.ports", "no port named `metrics`");
            return;
        };
        let target = &port["targetPort"];
        let reaches = match target {
            Value::String(name) => name == "metrics" && container_port.is_some(),
            Value::Number(n) => n.as_u64().is_some() && n.as_u64() == container_port,
            _ => port["port"].as_u64().is_some() && port["port"].as_u64() == container_port,
        };
        if !reaches {
            self.r.error(
                service,
                &format!("spec.ports[{i}].targetPort"),
                format!(
                    "{target} is not the container's `metrics` port ({})",
                    container_port.map_or("none".into(), |p| p.to_string())
                ),
            );
        }
    }

    fn service_monitor(&mut self, d: &Doc, services: &[&Doc]) {
        let ns = self.ns(d).map(str::to_string);
        let names = d.spec()["namespaceSelector"]["matchNames"].as_array();
        for s in services {
            let own = self.ns(s).map(str::to_string);
            let in_ns = match names {
                Some(names) => names.iter().any(|n| n.as_str() == own.as_deref()),
                None => own == ns,
            };
            if !in_ns || !selects_labels(&d.spec()["selector"], &s.obj["metadata"]["labels"]) {
                self.r.error(
                    d,
                    "spec.selector",
                    format!(
                        "does not select Service/{} (its namespace or labels)",
                        s.name()
                    ),
                );
                continue;
            }
            let ports = names_of_ports(s);
            for (i, e) in items(&d.spec()["endpoints"]).iter().enumerate() {
                let path = format!("spec.endpoints[{i}]");
                match e["port"].as_str() {
                    Some(p) if ports.contains(p) => {}
                    p => self.r.error(
                        d,
                        &at(&path, "port"),
                        format!(
                            "{p:?} is not a port of Service/{}: {}",
                            s.name(),
                            list(&ports)
                        ),
                    ),
                }
                if e["path"].as_str().is_some_and(|p| p != "/metrics") {
                    self.r
                        .error(d, &at(&path, "path"), "the admin server serves /metrics");
                }
            }
        }
    }

    fn prometheus_rule(&mut self, d: &Doc) {
        let mut alerts = BTreeSet::new();
        for (g, group) in items(&d.spec()["groups"]).iter().enumerate() {
            for (i, rule) in items(&group["rules"]).iter().enumerate() {
                let path = format!("spec.groups[{g}].rules[{i}]");
                let alert = rule["alert"].as_str().unwrap_or_default();
                if !alerts.insert(alert.to_string()) {
                    self.r
                        .error(d, &at(&path, "alert"), format!("{alert:?} twice"));
                }
                let Some(refs) = self.expr(d, &at(&path, "expr"), &rule["expr"]) else {
                    continue;
                };
                let severity = rule["labels"]["severity"].as_str().unwrap_or_default();
                if !SEVERITIES.contains(&severity) {
                    self.r.error(
                        d,
                        &at(&path, "labels.severity"),
                        format!("{severity:?} is none of {}", list(SEVERITIES)),
                    );
                }
                let labels = self.kept(&refs);
                for (k, text) in rule["annotations"].as_object().into_iter().flatten() {
                    for l in placeholders(text.as_str().unwrap_or_default(), "$labels.", "}}") {
                        if !labels.contains(&l) {
                            let msg =
                                format!("`$labels.{l}`: the expression keeps {}", list(&labels));
                            self.r
                                .error(d, &at(&path, &format!("annotations.{k}")), msg);
                        }
                    }
                }
            }
        }
    }

    fn panels(&mut self, d: &Doc, panels: &Value, path: &str) {
        for (i, panel) in items(panels).iter().enumerate() {
            let path = format!("{path}[{i}]");
            if panel["title"].as_str().is_none_or(str::is_empty) {
                self.r
                    .error(d, &at(&path, "title"), "a panel without a title");
            }
            let nested = panel["panels"].clone();
            self.panels(d, &nested, &at(&path, "panels"));
            if panel["type"] == "row" {
                continue;
            }
            let targets = items(&panel["targets"]);
            if targets.is_empty() {
                self.r
                    .error(d, &at(&path, "targets"), "a panel with no query");
            }
            let mut ref_ids = BTreeSet::new();
            for (t, target) in targets.iter().enumerate() {
                let tpath = format!("{path}.targets[{t}]");
                if !ref_ids.insert(target["refId"].as_str().unwrap_or_default()) {
                    self.r
                        .error(d, &at(&tpath, "refId"), "missing or repeated in the panel");
                }
                let Some(refs) = self.expr(d, &at(&tpath, "expr"), &target["expr"]) else {
                    continue;
                };
                let labels = self.kept(&refs);
                let legend = target["legendFormat"].as_str().unwrap_or_default();
                for l in placeholders(legend, "{{", "}}") {
                    if !labels.contains(&l) {
                        let msg = format!("`{{{{{l}}}}}`: the expression keeps {}", list(&labels));
                        self.r.error(d, &at(&tpath, "legendFormat"), msg);
                    }
                }
            }
        }
    }

    /// Reads one PromQL expression and checks its series, labels and label values.
    fn expr(&mut self, d: &Doc, path: &str, expr: &Value) -> Option<Refs> {
        let text = expr.as_str().unwrap_or_default();
        let refs = match promql::read(text) {
            Ok(refs) => refs,
            Err(e) => {
                self.r.error(d, path, format!("{e}: {text}"));
                return None;
            }
        };
        for s in &refs.selectors {
            let Some(name) = &s.name else {
                self.r.error(d, path, "a selector without a metric name");
                continue;
            };
            let Some(known) = self.series_labels(name) else {
                self.r.error(
                    d,
                    path,
                    format!(
                        "`{name}` is neither exported by imagegate nor a known external series"
                    ),
                );
                continue;
            };
            for (label, op, value) in &s.matchers {
                if !known.contains(label) {
                    let msg = format!("`{name}` has no label `{label}`: it has {}", list(&known));
                    self.r.error(d, path, msg);
                } else if op == "=" && !self.label_value_known(label, value) {
                    let msg = format!("`{label}=\"{value}\"`: the code never sets that value");
                    self.r.error(d, path, msg);
                }
            }
        }
        let labels = self.labels_of(&refs);
        for l in &refs.grouping {
            if !labels.contains(l) {
                let msg = format!(
                    "groups by `{l}`, which none of its series has: {}",
                    list(&labels)
                );
                self.r.error(d, path, msg);
            }
        }
        Some(refs)
    }

    /// The labels of a series: the exported ones and the scrape's, or an external series'.
    fn series_labels(&self, name: &str) -> Option<BTreeSet<String>> {
        if let Some(own) = self.code.metrics.get(name) {
            let mut labels = own.clone();
            labels.extend(TARGET_LABELS.iter().map(|l| l.to_string()));
            return Some(labels);
        }
        EXTERNAL
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, labels)| labels.iter().map(|l| l.to_string()).collect())
    }

    /// The labels the result of `refs`' expression keeps: an aggregation's `by` labels, else
    /// every label of its series.
    fn kept(&self, refs: &Refs) -> BTreeSet<String> {
        match refs.kept() {
            Some(by) => by.iter().cloned().collect(),
            None => self.labels_of(refs),
        }
    }

    /// Every label any series of `refs` has.
    fn labels_of(&self, refs: &Refs) -> BTreeSet<String> {
        refs.selectors
            .iter()
            .filter_map(|s| s.name.as_deref().and_then(|n| self.series_labels(n)))
            .flatten()
            .collect()
    }

    /// Whether an exact match on `label` can match what the code sets (labels whose values the
    /// code fixes: the event `type`, and `succeeded`).
    fn label_value_known(&self, label: &str, value: &str) -> bool {
        match label {
            "type" => self.code.event_types.contains(value),
            "succeeded" => value == "true" || value == "false",
            _ => true,
        }
    }
}

/// Whether a Service's `selector` map selects pods labelled `labels`.
fn selects(selector: &Value, labels: &Value) -> bool {
    selector
        .as_object()
        .is_some_and(|m| !m.is_empty() && m.iter().all(|(k, v)| &labels[k] == v))
}

/// Whether a LabelSelector (`matchLabels`, `matchExpressions`) selects `labels`.
fn selects_labels(selector: &Value, labels: &Value) -> bool {
    let plain = selector["matchLabels"]
        .as_object()
        .into_iter()
        .flatten()
        .all(|(k, v)| &labels[k] == v);
    let expressions = items(&selector["matchExpressions"]).iter().all(|e| {
        let value = labels[e["key"].as_str().unwrap_or_default()].as_str();
        let among = value.is_some_and(|v| items(&e["values"]).iter().any(|x| x == v));
        match e["operator"].as_str() {
            Some("In") => among,
            Some("NotIn") => !among,
            Some("Exists") => value.is_some(),
            Some("DoesNotExist") => value.is_none(),
            _ => false,
        }
    });
    plain && expressions
}

fn names_of_ports(service: &Doc) -> BTreeSet<String> {
    items(&service.spec()["ports"])
        .iter()
        .filter_map(|p| p["name"].as_str().map(str::to_string))
        .collect()
}

/// The names between `open` and `close` in a template (`{{ $labels.kind }}`, `{{kind}}`).
fn placeholders(text: &str, open: &str, close: &str) -> Vec<String> {
    text.split(open)
        .skip(1)
        .filter_map(|rest| rest.split_once(close).map(|(name, _)| name))
        .map(|name| name.trim().trim_end_matches('}').trim().to_string())
        .collect()
}
