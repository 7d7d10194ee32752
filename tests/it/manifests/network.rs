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

/// Whether the IPv4 `cidr` holds `ip`.
fn holds(cidr: &str, ip: std::net::Ipv4Addr) -> bool {
    let Some((net, bits)) = cidr.split_once('/') else {
        return false;
    };
    let (Ok(net), Ok(bits)) = (net.parse::<std::net::Ipv4Addr>(), bits.parse::<u32>()) else {
        return false;
    };
    let mask = u32::MAX
        .checked_shl(32u32.saturating_sub(bits))
        .unwrap_or(0);
    u32::from(net) & mask == u32::from(ip) & mask
}

/// Whether an egress rule of a NetworkPolicy admits connections to `ip` (outside the pod
/// network: only an `ipBlock`, or a rule without `to`, admits it).
fn egress_admits(rule: &Value, ip: std::net::Ipv4Addr) -> bool {
    let Some(to) = rule["to"].as_array().filter(|t| !t.is_empty()) else {
        return true;
    };
    to.iter().any(|peer| {
        let block = &peer["ipBlock"];
        block["cidr"].as_str().is_some_and(|c| holds(c, ip))
            && !items(&block["except"])
                .iter()
                .any(|e| e.as_str().is_some_and(|c| holds(c, ip)))
    })
}

/// F-7, F-21: the multi-tenant adapter's pods, which send to sinks tenants choose, are selected
/// by an egress NetworkPolicy that admits DNS and the cluster's pods and never the link-local
/// range (the cloud's metadata service); its own guard is the first line, this the second.
#[test]
fn the_multi_tenant_adapter_may_not_reach_the_metadata_address() {
    let read = |file: &str| -> Vec<Value> {
        let text = std::fs::read_to_string(format!("{}/{file}", super::ROOT)).unwrap();
        serde_norway::Deserializer::from_str(&text)
            .map(|d| serde::Deserialize::deserialize(d).unwrap())
            .collect()
    };
    let deployment = read("config/multi-tenant/400-deployment.yaml")
        .into_iter()
        .find(|d| d["kind"] == "Deployment")
        .unwrap();
    let pods = &deployment["spec"]["template"]["metadata"]["labels"];
    let policies: Vec<Value> = read("config/multi-tenant/410-networkpolicy.yaml")
        .into_iter()
        .filter(|d| {
            d["kind"] == "NetworkPolicy"
                && selects(&d["spec"]["podSelector"], pods)
                && items(&d["spec"]["policyTypes"])
                    .iter()
                    .any(|t| t == "Egress")
        })
        .collect();
    assert_eq!(
        policies.len(),
        1,
        "one egress policy selects the adapter's pods"
    );
    let rules = items(&policies[0]["spec"]["egress"]);
    let metadata = std::net::Ipv4Addr::new(169, 254, 169, 254);
    assert!(
        !rules.iter().any(|r| egress_admits(r, metadata)),
        "{rules:?}"
    );
    assert!(
        rules
            .iter()
            .any(|r| egress_admits(r, std::net::Ipv4Addr::new(10, 0, 0, 1))),
        "the API server and outside sinks stay reachable"
    );
    assert!(
        rules
            .iter()
            .any(|r| items(&r["ports"]).iter().any(|p| p["port"] == 53)),
        "DNS"
    );
    assert!(
        rules.iter().any(|r| items(&r["to"])
            .iter()
            .any(|p| p["namespaceSelector"] == serde_json::json!({}))
            && r["ports"].is_null()),
        "every pod of the cluster (the sinks by ref)"
    );
    assert!(holds("169.254.0.0/16", metadata) && !holds("10.0.0.0/8", metadata));
}
