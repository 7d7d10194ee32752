//! The pure parts of the Knative scenario: what Knative's webhook would add to `knative/`'s Broker
//! and Trigger (the webhook is not run), and the check of the route one event took, read from
//! the network proxy's log (`logs/network.jsonl`, written by `scripts/lib/realcluster-net.py`:
//! one JSON line per request it forwarded).
//!
//! The route of an event the source sends to the Broker, exactly: the source to the broker's
//! ingress, the ingress to the Broker's channel, the channel's dispatcher to the broker's filter
//! (the Trigger's subscription), the filter to the EventListener. Each hop keeps the CloudEvent's
//! id, so the hops of one event are the requests that carry its id.

use serde::Deserialize;
use serde_json::{Value, json};

/// The namespace of Knative Eventing's programs (the release's).
pub const SYSTEM_NAMESPACE: &str = "knative-eventing";
/// The ConfigMap `config-br-defaults` names for a Broker of class MTChannelBasedBroker.
pub const DEFAULT_BROKER_CONFIG: &str = "config-br-default-channel";
/// The label the webhook puts on a Trigger: the Broker reconciler finds its Triggers by it.
pub const BROKER_LABEL: &str = "eventing.knative.dev/broker";

/// What Knative's webhook would default on `object` before it is stored: a Broker's
/// `spec.config` (from `config-br-defaults`) and a Trigger's broker label; on both, the namespace
/// of a `deadLetterSink` or subscriber `ref` that names none is the object's own. Other kinds and
/// fields that are set stay as they are.
pub fn webhook_defaults(object: &mut Value) {
    let namespace = object["metadata"]["namespace"]
        .as_str()
        .unwrap_or("")
        .to_string();
    let in_group = object["apiVersion"]
        .as_str()
        .is_some_and(|v| v.starts_with("eventing.knative.dev/"));
    match object["kind"].as_str() {
        Some("Broker") if in_group => {
            if object["spec"]["config"].is_null() {
                object["spec"]["config"] = json!({
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "name": DEFAULT_BROKER_CONFIG,
                    "namespace": SYSTEM_NAMESPACE,
                });
            }
        }
        Some("Trigger") if in_group => {
            let broker = object["spec"]["broker"].clone();
            if let Some(broker) = broker.as_str()
                && object["metadata"]["labels"][BROKER_LABEL].is_null()
            {
                object["metadata"]["labels"][BROKER_LABEL] = json!(broker);
            }
            default_ref_namespace(object, "/spec/subscriber/ref", &namespace);
        }
        _ => return,
    }
    default_ref_namespace(object, "/spec/delivery/deadLetterSink/ref", &namespace);
}

/// Sets the namespace of the `ref` at `pointer`, if there is one that names none (a missing ref
/// stays missing).
fn default_ref_namespace(object: &mut Value, pointer: &str, namespace: &str) {
    if let Some(reference) = object.pointer_mut(pointer)
        && reference.is_object()
        && reference["namespace"].is_null()
    {
        reference["namespace"] = json!(namespace);
    }
}

/// One request the network proxy forwarded.
#[derive(Clone, Debug, Deserialize, PartialEq)]
pub struct Hop {
    /// The HTTP method.
    pub method: String,
    /// The host the client asked for (a cluster-local Service name, with its port unless 80).
    pub host: String,
    /// The request's path.
    pub path: String,
    /// The status the target answered (502 when the proxy had no route or could not connect).
    pub status: u16,
    /// The CloudEvent's id (`ce-id`, or `id` of a structured event), empty if none.
    #[serde(default)]
    pub ce_id: String,
    /// The CloudEvent's type.
    #[serde(default)]
    pub ce_type: String,
    /// When the proxy received the request (Unix seconds).
    pub received: f64,
}

/// A line of the proxy's log that is not a request it forwarded.
#[derive(Debug, thiserror::Error)]
#[error("line {line} of the network log is not a request: {source}")]
pub struct LogError {
    line: usize,
    source: serde_json::Error,
}

/// Every request of the proxy's log, in the order of the file.
pub fn parse_log(text: &str) -> Result<Vec<Hop>, LogError> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str(l).map_err(|source| LogError {
                line: i + 1,
                source,
            })
        })
        .collect()
}

/// The requests that carried event `id`, in the order the proxy received them.
pub fn hops_of(log: &[Hop], id: &str) -> Vec<Hop> {
    let mut hops: Vec<Hop> = log.iter().filter(|h| h.ce_id == id).cloned().collect();
    hops.sort_by(|a, b| a.received.total_cmp(&b.received));
    hops
}

/// The hops of an event that belong to Trigger `trigger` of namespace `ns`: the broker filter
/// is asked once per Trigger of the Broker (another Trigger's filter answers too, and delivers
/// nothing further when its filter does not pass), so the deliveries to other Triggers' filter
/// paths are left out.
pub fn for_trigger(hops: Vec<Hop>, ns: &str, trigger: &str) -> Vec<Hop> {
    let own = format!("/triggers/{ns}/{trigger}/");
    hops.into_iter()
        .filter(|h| !h.path.starts_with("/triggers/") || h.path.starts_with(&own))
        .collect()
}

/// The route an event must take from the source through Broker `broker` (`<ns>/<name>`) and
/// Trigger `trigger` (in the Broker's namespace) to the EventListener at `listener` (its
/// cluster-local host and port): (what the hop is, host, path prefix), in order.
pub fn expected_route(broker: (&str, &str), trigger: &str, listener: &str) -> [Expected; 4] {
    let (ns, name) = broker;
    let svc = |n: &str| format!("{n}.{SYSTEM_NAMESPACE}.svc.cluster.local");
    [
        Expected::new(
            "source -> broker ingress",
            svc("broker-ingress"),
            format!("/{ns}/{name}"),
        ),
        // The Broker's channel: an InMemoryChannel `<broker>-kne-trigger`, served by the dispatcher
        // under the name of its ExternalName Service.
        Expected::new(
            "ingress -> channel (dispatcher)",
            format!("{name}-kne-trigger-kn-channel.{ns}.svc.cluster.local"),
            "/".to_string(),
        ),
        Expected::new(
            "dispatcher -> broker filter (the Trigger's subscription)",
            svc("broker-filter"),
            format!("/triggers/{ns}/{trigger}/"),
        ),
        Expected::new(
            "filter -> EventListener",
            listener.to_string(),
            "/".to_string(),
        ),
    ]
}

/// One hop of the expected route.
#[derive(Clone, Debug, PartialEq)]
pub struct Expected {
    /// What the hop is, for the timeline and the error.
    pub what: &'static str,
    /// The host the request must name.
    pub host: String,
    /// What its path must start with.
    pub path: String,
}

impl Expected {
    fn new(what: &'static str, host: String, path: String) -> Expected {
        Expected { what, host, path }
    }
}

/// How the hops of an event differ from the route.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum RouteError {
    /// Not exactly one request per hop.
    #[error(
        "event {id}: {got} requests carried it through the proxy, the route has {want}: {hops:?}"
    )]
    Count {
        /// The event's id.
        id: String,
        /// How many carried it.
        got: usize,
        /// How many the route has.
        want: usize,
        /// The requests, as `METHOD host path -> status`.
        hops: Vec<String>,
    },
    /// A hop went elsewhere or was refused.
    #[error("event {id}, hop {number} ({what}): expected POST {host}{path}... -> 2xx, got {got}")]
    Hop {
        /// The event's id.
        id: String,
        /// The hop's number, from 1.
        number: usize,
        /// What the hop is.
        what: &'static str,
        /// The expected host.
        host: String,
        /// The expected path prefix.
        path: String,
        /// The request, as `METHOD host path -> status`.
        got: String,
    },
}

/// A request as `METHOD host path -> status`.
pub fn describe(hop: &Hop) -> String {
    format!("{} {}{} -> {}", hop.method, hop.host, hop.path, hop.status)
}

/// Checks that `hops` (those of event `id`, in order) are exactly the route: one POST per hop,
/// to its host and path, answered 2xx.
pub fn check_route(id: &str, hops: &[Hop], route: &[Expected]) -> Result<(), RouteError> {
    if hops.len() != route.len() {
        return Err(RouteError::Count {
            id: id.to_string(),
            got: hops.len(),
            want: route.len(),
            hops: hops.iter().map(describe).collect(),
        });
    }
    for (i, (hop, want)) in hops.iter().zip(route).enumerate() {
        let ok = hop.method == "POST"
            && hop.host == want.host
            && hop.path.starts_with(&want.path)
            && (200..300).contains(&hop.status);
        if !ok {
            return Err(RouteError::Hop {
                id: id.to_string(),
                number: i + 1,
                what: want.what,
                host: want.host.clone(),
                path: want.path.clone(),
                got: describe(hop),
            });
        }
    }
    Ok(())
}

/// The event id a PipelineRun of the shipped TriggerTemplate was made for: its annotation
/// `imagegate.dev/event-id` (tekton/420-triggertemplate.yaml; its name is keyed by the
/// interceptor's run key, not the event's id).
pub fn event_id_of_run(run: &serde_json::Value) -> Option<&str> {
    run["metadata"]["annotations"]["imagegate.dev/event-id"]
        .as_str()
        .filter(|id| !id.is_empty())
}
