//! Who can reach the EventListener, and whose streams start runs there: every EventListener is
//! selected by a NetworkPolicy (by the `eventlistener: <name>` label Tekton Triggers puts on its
//! pods) in its own namespace, that policy admits the source's pods (the `imagegate source`
//! Deployment's pod labels, from its namespace) on the port of the source's `K_SINK`, and each
//! trigger's CEL filter pins `ce-namespace` to the listener's own namespace.

use serde_json::Value;

use super::check::Checker;
use super::model::{Doc, items};

/// The namespace label every namespace carries (Kubernetes sets it).
const NAMESPACE_LABEL: &str = "kubernetes.io/metadata.name";

impl<'a> Checker<'a> {
    pub fn event_listener_reachability(&mut self, el: &'a Doc) {
        let ns = self.ns(el).map(str::to_string);
        let policies: Vec<&Doc> = self
            .of_kind("NetworkPolicy")
            .filter(|p| self.ns(p).map(str::to_string) == ns)
            .filter(|p| {
                p.spec()["podSelector"]["matchLabels"]["eventlistener"].as_str() == Some(el.name())
            })
            .collect();
        if policies.is_empty() {
            let msg = format!(
                "no NetworkPolicy selects the pods of this EventListener (podSelector \
                 eventlistener: {}), so anyone who can reach its Service can start PipelineRuns",
                el.name()
            );
            self.r.error(el, "", msg);
            return;
        }
        let Some((source_ns, labels, port)) = self.source_pods() else {
            return;
        };
        for p in policies {
            if !admits(p.spec(), &source_ns, &labels, port) {
                let msg = format!(
                    "no ingress rule admits the source's pods (namespace {source_ns}, labels \
                     {labels}) on port {port}, the port of its K_SINK",
                );
                self.r.error(p, "spec.ingress", msg);
            }
        }
    }

    /// The `imagegate source` Deployment's namespace, pod labels and the port of its `K_SINK`.
    fn source_pods(&self) -> Option<(String, Value, u16)> {
        let d = self
            .of_kind("Deployment")
            .find(|d| d.name() == "imagegate-source")?;
        let template = &d.spec()["template"];
        let sink = items(&template["spec"]["containers"][0]["env"])
            .iter()
            .find(|e| e["name"] == "K_SINK")?["value"]
            .as_str()?;
        let port = reqwest::Url::parse(sink).ok()?.port_or_known_default()?;
        let ns = self.ns(d)?.to_string();
        Some((ns, template["metadata"]["labels"].clone(), port))
    }
}

/// Whether one ingress rule of the policy lets pods with `labels` in namespace `ns` in on `port`.
fn admits(spec: &Value, ns: &str, labels: &Value, port: u16) -> bool {
    items(&spec["ingress"]).iter().any(|rule| {
        let port_ok = items(&rule["ports"]).is_empty()
            || items(&rule["ports"])
                .iter()
                .any(|p| p["port"].as_u64() == Some(u64::from(port)));
        let peer_ok = items(&rule["from"]).iter().any(|peer| {
            let ns_ok = peer["namespaceSelector"]["matchLabels"][NAMESPACE_LABEL] == ns;
            ns_ok && selects(&peer["podSelector"], labels)
        });
        port_ok && peer_ok
    })
}

/// Whether a selector's `matchLabels` (none: every pod) all hold on `labels`.
fn selects(selector: &Value, labels: &Value) -> bool {
    selector["matchLabels"]
        .as_object()
        .is_none_or(|want| want.iter().all(|(k, v)| &labels[k] == v))
}
