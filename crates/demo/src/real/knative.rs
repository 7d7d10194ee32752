//! Scenario 7: the same loop through Knative Eventing, with `knative/` as shipped. The cluster of
//! `up --tekton --knative` runs Knative's six programs (controllers, in-memory-channel dispatcher,
//! broker ingress and filter), each in a network namespace of its own; every data-plane hop goes
//! through the network proxy, which routes the cluster-local Service names and logs each request
//! (`logs/network.jsonl`).
//!
//! The scenario applies the Broker (200), the Trigger (210) and the dead-letter sink (220), with
//! what Knative's webhook (not run) would default ([`route::webhook_defaults`]); hands the
//! ImageStreams of `notebooks` from the flag-configured source to an ImageStreamSource (120, 130)
//! served by `imagegate source --multi-tenant`, which sends to the Broker; then imports a build.
//! It passes when the PipelineRun the EventListener made for it promoted the digest, and the proxy's
//! log shows that event's exactly four hops: source -> broker ingress -> channel -> broker filter
//! -> EventListener ([`route::check_route`]). Then a pod of the cluster forges the stream's events
//! (a digest of its choice for the candidate tag, the served tag's own digest), posted to the
//! Broker's ingress and straight to the EventListener: each is answered 2xx and refused by the
//! imagegate interceptor (its metric counts them), and no PipelineRun is made for them.

mod route;
#[cfg(test)]
mod tests;

use std::time::Duration;

use anyhow::{Context, anyhow};
use serde_json::Value;

use super::cluster::{env_value, until};
use super::programs::Program;
use super::scenarios::{Timing, want_task};
use super::{NAMESPACE, World};
use crate::scenarios::Expect;
use crate::timeline::short_digest;

/// The Broker of knative/200 (namespace, name) and the Trigger of 210.
const BROKER: (&str, &str) = ("imagegate-system", "imagegate");
const TRIGGER: &str = "imagegate-notebooks";
/// The EventListener's Service, as 210's subscriber names it.
const LISTENER: &str = "el-imagegate.notebooks.svc.cluster.local:8080";
/// The ImageStreamSource of knative/130, in `notebooks`.
const SOURCE: &str = "notebooks-to-broker";
const STREAM: &str = "jupyter-trustyai-notebook";
const LIMIT: Duration = Duration::from_secs(120);

/// Plays scenario 7; replaces `STREAM`'s expectation with the promoted build.
pub async fn play(w: &mut World, expect: &mut Vec<Expect>) -> anyhow::Result<Timing> {
    w.timeline.heading(
        "7. The fixed build of jupyter-trustyai-notebook comes through Knative Eventing: an \
         ImageStreamSource sends to the Broker, the Trigger delivers to the EventListener (knative/)",
    );
    let (address, audience) = install(w).await?;
    let verdicts = subscribe_to_verdicts(w, &address, &audience).await?;
    switch_source(w, &address).await?;
    let digest = crate::digest('b');
    let t = w.timed(7).await?;
    let run = w.promote(STREAM, &digest, false).await?;
    let timing = w.done_timing(t).await?;
    want_task(w, &run, "promote", "True")?;
    route_taken(w, &run).await?;
    verdict_received(w, &verdicts, &digest).await?;
    forged_refused(w, &address, &audience).await?;
    expect.retain(|e| !e.is(STREAM));
    expect.push(Expect::new(STREAM, digest, "Promoted"));
    Ok(timing)
}

/// Applies 220, 200 and 210 and waits until the Broker and the Trigger are Ready; the Broker's
/// address.
async fn install(w: &World) -> anyhow::Result<(String, String)> {
    let file = |p: &str| w.root.join("knative").join(p);
    w.cluster
        .kubectl(&[
            "apply",
            "--server-side",
            "-f",
            &file("220-dead-letter-sink.yaml").to_string_lossy(),
        ])
        .await?;
    for name in ["200-broker.yaml", "210-trigger.yaml"] {
        let text =
            std::fs::read_to_string(file(name)).with_context(|| format!("knative/{name}"))?;
        let mut object: Value =
            serde_norway::from_str(&text).with_context(|| format!("knative/{name}"))?;
        route::webhook_defaults(&mut object);
        w.cluster
            .kubectl_in(&["apply", "--server-side", "-f", "-"], &object.to_string())
            .await?;
    }
    w.timeline.line(
        "knative",
        "applied knative/200-broker.yaml, 210-trigger.yaml, 220-dead-letter-sink.yaml (with what \
         Knative's webhook would default: the Broker's channel config, the Trigger's broker label, \
         the dead-letter sinks' namespace)",
    );
    let broker = ready(w, "brokers.eventing.knative.dev", BROKER.0, BROKER.1).await?;
    let address = broker["status"]["address"]["url"]
        .as_str()
        .unwrap_or("")
        .to_string();
    let audience = broker["status"]["address"]["audience"]
        .as_str()
        .unwrap_or("")
        .to_string();
    w.timeline.line(
        "knative",
        format!(
            "Broker {} Ready (class MTChannelBasedBroker, its InMemoryChannel {}-kne-trigger): address {address}, \
             OIDC audience {audience} (authentication-oidc on: a sender without a token for it is refused)",
            BROKER.1, BROKER.1
        ),
    );
    let trigger = ready(w, "triggers.eventing.knative.dev", BROKER.0, TRIGGER).await?;
    w.timeline.line(
        "knative",
        format!(
            "Trigger {TRIGGER} Ready: subscriber {}",
            trigger["status"]["subscriberUri"].as_str().unwrap_or("")
        ),
    );
    Ok((address, audience))
}

/// Waits until `kind` `ns/name` is Ready; the object. The error carries its conditions and the
/// Knative programs' last log lines.
async fn ready(w: &World, kind: &str, ns: &str, name: &str) -> anyhow::Result<Value> {
    let get = || async {
        let text = w
            .cluster
            .kubectl(&["get", kind, "-n", ns, name, "-o", "json"])
            .await?;
        Ok::<Value, anyhow::Error>(serde_json::from_str(&text)?)
    };
    let waited = until(&format!("{kind} {ns}/{name} Ready"), LIMIT, || async {
        let object = get().await?;
        Ok(condition(&object, "Ready").then_some(object))
    })
    .await;
    match waited {
        Ok(object) => Ok(object),
        Err(e) => {
            let last = get().await.unwrap_or(Value::Null);
            let mut text = format!("{e}; its conditions: {}", last["status"]["conditions"]);
            for log in [
                "knative-mt-broker-controller",
                "knative-eventing-controller",
                "knative-imc-controller",
                "knative-imc-dispatcher",
            ] {
                text.push_str(&format!(
                    "\n--- logs/{log}.log:\n{}",
                    w.cluster.log_tail(log)
                ));
            }
            Err(anyhow!(text))
        }
    }
}

/// Whether condition `kind` of `object` is True.
fn condition(object: &Value, kind: &str) -> bool {
    object["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["type"] == kind && c["status"] == "True")
}

/// Hands `notebooks` to the ImageStreamSource of 130: the multi-tenant adapter starts (through the
/// network proxy: the Broker's address is a cluster-local name), the source is Ready with the
/// Broker as its sink and has recorded what is there (its checkpoint marker), then the
/// flag-configured source stops.
async fn switch_source(w: &mut World, address: &str) -> anyhow::Result<()> {
    let file = |p: &str| {
        w.root
            .join("knative")
            .join(p)
            .to_string_lossy()
            .into_owned()
    };
    // The adapter's overlay (its identity, rights and the ImageStreamSource CRD): a platform
    // opts into it.
    let overlay = w
        .root
        .join("config/multi-tenant")
        .to_string_lossy()
        .into_owned();
    w.cluster
        .kubectl(&["apply", "--server-side", "-k", &overlay])
        .await?;
    w.cluster
        .kubectl(&[
            "wait",
            "--for=condition=Established",
            "crd/imagestreamsources.sources.imagegate.dev",
        ])
        .await?;
    w.cluster
        .kubectl(&[
            "apply",
            "--server-side",
            "-f",
            &file("120-imagestreamsource-reader.yaml"),
            "-f",
            &file("130-imagestreamsource-broker.yaml"),
        ])
        .await?;
    let env = std::fs::read_to_string(w.cluster.dir.join("env")).context("the cluster's env")?;
    let port = env_value(&env, "NET_PROXY_PORT").ok_or_else(|| {
        anyhow!("the cluster has no network proxy: start it with `up --tekton --knative`")
    })?;
    let proxy = format!("http://127.0.0.1:{port}");
    let adapter = Program::start_with_env(
        "source-multi-tenant",
        &w.cluster,
        &w.imagegate,
        "imagegate-source-multi-tenant",
        // knative/130's Broker is the platform's, in imagegate-system: a ref across namespaces,
        // which 130's Role lets the source's account subscribe to.
        &["source", "--multi-tenant", "--allow-cross-namespace-sinks"],
        &[
            ("HTTP_PROXY", &proxy),
            ("NO_PROXY", "127.0.0.1,localhost"),
            // config/multi-tenant/400 sets it to the pod's own: tokens for the Broker's audience.
            ("K_OIDC_SERVICE_ACCOUNT", "imagegate-source-multi-tenant"),
            ("POD_NAMESPACE", "imagegate-system"),
        ],
    )
    .await?;
    let source = until(
        &format!("ImageStreamSource {NAMESPACE}/{SOURCE} Ready with the Broker as its sink"),
        LIMIT,
        || async {
            let text = w
                .cluster
                .kubectl(&[
                    "get",
                    "imagestreamsource",
                    "-n",
                    NAMESPACE,
                    SOURCE,
                    "-o",
                    "json",
                ])
                .await?;
            let object: Value = serde_json::from_str(&text)?;
            Ok(
                (condition(&object, "Ready") && object["status"]["sinkUri"] == address)
                    .then_some(object),
            )
        },
    )
    .await
    .map_err(|e| {
        anyhow!(
            "{e}\n--- logs/source-multi-tenant.log:\n{}",
            w.cluster.log_tail("source-multi-tenant")
        )
    })?;
    // In the adapter's namespace, never the tenant's.
    let marker = format!("{NAMESPACE}.{SOURCE}-imagegate-checkpoint");
    until(
        &format!("the checkpoint marker {marker}"),
        LIMIT,
        || async {
            Ok(w.cluster
                .kubectl(&[
                    "get",
                    "configmap",
                    "-n",
                    "imagegate-system",
                    &marker,
                    "-o",
                    "name",
                ])
                .await
                .ok())
        },
    )
    .await?;
    let old = std::mem::replace(&mut w.source, adapter);
    old.stop().await?;
    w.timeline.line(
        "source",
        format!(
            "imagegate source --multi-tenant serves ImageStreamSource {NAMESPACE}/{SOURCE} \
             (knative/130): Ready, sink {} through the network proxy {proxy}; the flag-configured \
             source stopped",
            source["status"]["sinkUri"].as_str().unwrap_or("")
        ),
    );
    Ok(())
}

/// The Trigger of the verdicts' subscriber: `dev.imagegate.verdict.promoted` on the Broker.
const VERDICT_TRIGGER: &str = r#"{
  "apiVersion": "eventing.knative.dev/v1", "kind": "Trigger",
  "metadata": {"name": "imagegate-verdicts-promoted", "namespace": "imagegate-system"},
  "spec": {"broker": "imagegate", "filter": {"attributes": {"type": "dev.imagegate.verdict.promoted"}},
           "subscriber": {"uri": "http://verdicts.imagegate-system.svc.cluster.local"}}
}"#;

/// What the verdicts' subscriber received: (type, data), in order.
type Received = std::sync::Arc<std::sync::Mutex<Vec<(String, Value)>>>;

/// A subscriber of the Broker for `promoted` verdicts (a Trigger; its Service name routed by the
/// network proxy to an HTTP server of the demo), and the controller restarted with `K_SINK` =
/// the Broker, as knative/150's SinkBinding injects it.
async fn subscribe_to_verdicts(
    w: &mut World,
    broker: &str,
    audience: &str,
) -> anyhow::Result<Received> {
    let received: Received = Default::default();
    let app = axum::Router::new().fallback({
        let received = received.clone();
        move |headers: axum::http::HeaderMap, body: axum::body::Bytes| {
            let received = received.clone();
            async move {
                if let Ok(e) = cloudevents::binding::http::to_event(&headers, body.to_vec()) {
                    use cloudevents::AttributesReader;
                    let data = match e.data() {
                        Some(cloudevents::Data::Json(v)) => v.clone(),
                        Some(cloudevents::Data::Binary(b)) => {
                            serde_json::from_slice(b).unwrap_or(Value::Null)
                        }
                        _ => Value::Null,
                    };
                    received
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .push((e.ty().to_string(), data));
                }
                axum::http::StatusCode::ACCEPTED
            }
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let port = listener.local_addr()?.port();
    tokio::spawn(async move { axum::serve(listener, app).await });
    let routes = w.cluster.dir.join("net/routes");
    let mut text = std::fs::read_to_string(&routes).unwrap_or_default();
    text.push_str(&format!(
        "verdicts.imagegate-system.svc tcp:127.0.0.1:{port}\n"
    ));
    std::fs::write(&routes, text).context("the network proxy's routes")?;
    w.cluster
        .kubectl_in(&["apply", "--server-side", "-f", "-"], VERDICT_TRIGGER)
        .await?;
    ready(
        w,
        "triggers.eventing.knative.dev",
        BROKER.0,
        "imagegate-verdicts-promoted",
    )
    .await?;
    let env = std::fs::read_to_string(w.cluster.dir.join("env")).context("the cluster's env")?;
    let proxy = env_value(&env, "NET_PROXY_PORT").ok_or_else(|| anyhow!("no network proxy"))?;
    let proxy = format!("http://127.0.0.1:{proxy}");
    let controller = Program::start_with_env(
        "controller-verdicts",
        &w.cluster,
        &w.imagegate,
        "imagegate-controller",
        &["controller", "--verdict-grace", "30"],
        &[
            ("K_SINK", broker),
            ("K_AUDIENCE", audience),
            ("K_OIDC_SERVICE_ACCOUNT", "imagegate-controller"),
            ("POD_NAMESPACE", "imagegate-system"),
            ("HTTP_PROXY", &proxy),
            ("NO_PROXY", "127.0.0.1,localhost"),
        ],
    )
    .await?;
    let old = std::mem::replace(&mut w.controller, controller);
    old.stop().await?;
    w.timeline.line(
        "knative",
        format!(
            "Trigger imagegate-verdicts-promoted Ready (type dev.imagegate.verdict.promoted, a \
             subscriber of the demo); imagegate controller restarted with K_SINK={broker} and \
             K_AUDIENCE={audience}, as knative/150's SinkBinding sets them: its verdicts carry a token \
             of imagegate-system/imagegate-controller"
        ),
    );
    Ok(received)
}

/// The subscriber receives the `promoted` verdict of `digest` on STREAM.
async fn verdict_received(w: &World, received: &Received, digest: &str) -> anyhow::Result<()> {
    let data = until(
        "the Broker's subscriber receives the promoted verdict",
        Duration::from_secs(30),
        || async {
            let got = received.lock().unwrap_or_else(|p| p.into_inner()).clone();
            Ok(got
                .into_iter()
                .find(|(ty, d)| {
                    ty == "dev.imagegate.verdict.promoted"
                        && d["imageStream"] == STREAM
                        && d["digest"] == digest
                })
                .map(|(_, d)| d))
        },
    )
    .await
    .map_err(|e| {
        anyhow!(
            "{e}\n--- logs/controller-verdicts.log:\n{}",
            w.cluster.log_tail("controller-verdicts")
        )
    })?;
    w.timeline.line(
        "subscriber",
        format!(
            "received dev.imagegate.verdict.promoted from the Broker: {}:{} now serves {} (was {}), CustomRun {}",
            STREAM,
            data["servedTag"].as_str().unwrap_or(""),
            short_digest(digest),
            short_digest(data["previousDigest"].as_str().unwrap_or("")),
            data["customRun"].as_str().unwrap_or("")
        ),
    );
    Ok(())
}

/// The interceptor's count of refused events.
async fn refused(admin: &str) -> anyhow::Result<f64> {
    let text = reqwest::get(format!("http://127.0.0.1:{admin}/metrics"))
        .await?
        .text()
        .await?;
    Ok(text
        .lines()
        .filter(|l| l.starts_with("imagegate_interceptor_events_total{verdict=\"refused\""))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum())
}

/// Forged events, posted through the network proxy (as any pod of the cluster could): to the
/// Broker's ingress without a token (401: authentication-oidc) and with a tenant pod's token
/// (`notebooks/default`, 403: no EventPolicy admits it, and the default mode admits only the
/// Broker's namespace), and to the EventListener, where the imagegate interceptor refuses it; no
/// PipelineRun is made for what they name.
async fn forged_refused(w: &World, broker: &str, audience: &str) -> anyhow::Result<()> {
    let env = std::fs::read_to_string(w.cluster.dir.join("env")).context("the cluster's env")?;
    let proxy = env_value(&env, "NET_PROXY_PORT").ok_or_else(|| anyhow!("no network proxy"))?;
    let admin = env_value(&env, "IMAGEGATE_INTERCEPTOR_ADMIN_PORT")
        .ok_or_else(|| anyhow!("the cluster runs no imagegate interceptor (IMAGEGATE_BIN)"))?;
    let http = reqwest::Client::builder()
        .proxy(reqwest::Proxy::http(format!("http://127.0.0.1:{proxy}"))?)
        .build()?;
    let served = w
        .cluster
        .kubectl(&[
            "get",
            "imagestream",
            STREAM,
            "-n",
            NAMESPACE,
            "-o",
            "jsonpath={.status.tags[?(@.tag==\"latest\")].items[0].image}",
        ])
        .await?;
    let chosen = crate::digest('f');
    let tenant_token = w
        .cluster
        .kubectl(&[
            "create",
            "token",
            "default",
            "-n",
            NAMESPACE,
            "--audience",
            audience,
        ])
        .await?;
    // An identity the Broker admits (its own namespace's): a compromised source pod.
    let admitted_token = w
        .cluster
        .kubectl(&[
            "create",
            "token",
            "imagegate-source",
            "-n",
            "imagegate-system",
            "--audience",
            audience,
        ])
        .await?;
    let forgeries = [
        (
            "the Broker's ingress, without a token",
            broker.to_string(),
            "candidate",
            chosen.clone(),
            None,
            401,
        ),
        (
            "the Broker's ingress, with a token of notebooks/default (a tenant's pod)",
            broker.to_string(),
            "candidate",
            chosen.clone(),
            Some(tenant_token.trim().to_string()),
            403,
        ),
        (
            "the Broker's ingress, with a token of imagegate-system/imagegate-source (an admitted sender)",
            broker.to_string(),
            "candidate",
            chosen.clone(),
            Some(admitted_token.trim().to_string()),
            202,
        ),
        (
            "the EventListener",
            format!("http://{LISTENER}"),
            "latest",
            served.trim().to_string(),
            None,
            202,
        ),
    ];
    let before = refused(&admin).await?;
    for (i, (to, url, tag, digest, token, want)) in forgeries.iter().enumerate() {
        let body = serde_json::json!({"namespace": NAMESPACE, "imageStream": STREAM, "tag": tag,
            "digest": digest, "previousDigest": null, "dockerImageReference": "", "generation": 9,
            "created": "2026-12-06T00:00:00Z", "imageStreamUID": ""});
        let mut request = http.post(url);
        if let Some(t) = token {
            request = request.bearer_auth(t);
        }
        let answer = request
            .header("ce-specversion", "1.0")
            .header(
                "ce-id",
                format!("f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f{i}"),
            )
            .header("ce-type", "dev.imagegate.imagestreamtag.updated")
            .header("ce-source", "/forged")
            .header("ce-namespace", NAMESPACE)
            .header("ce-imagestream", STREAM)
            .header("ce-imagetag", *tag)
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
            .await
            .with_context(|| format!("POST a forged event to {to}"))?;
        w.timeline.line(
            "forger",
            format!(
                "a forged {STREAM}:{tag} -> {} posted to {to}: {}",
                short_digest(digest),
                answer.status()
            ),
        );
        if answer.status().as_u16() != *want {
            return Err(anyhow!(
                "{to} answered the forged event {}, not {want}",
                answer.status()
            ));
        }
    }
    // Those taken (by the Broker, which delivers to the EventListener, and by the EventListener):
    // refused by the interceptor, each by its id in its log (other events are refused meanwhile
    // too: the served tags' own changes).
    let taken: Vec<String> = forgeries
        .iter()
        .enumerate()
        .filter(|(_, f)| f.5 == 202)
        .map(|(i, _)| format!("f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f{i}"))
        .collect();
    let log = w.cluster.dir.join("logs/imagegate-interceptor.log");
    until(
        "the imagegate interceptor refuses the forged events the Broker and the EventListener took",
        Duration::from_secs(30),
        || async {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            let refused_ids: Vec<(String, String)> = text
                .lines()
                .filter_map(|l| serde_json::from_str::<Value>(l).ok())
                .filter(|l| {
                    l["message"]
                        .as_str()
                        .is_some_and(|m| m.starts_with("refused an event"))
                })
                .map(|l| {
                    (
                        l["event_id"].as_str().unwrap_or("").to_string(),
                        l["reason"].as_str().unwrap_or("").to_string(),
                    )
                })
                .collect();
            let refused_all = taken
                .iter()
                .all(|id| refused_ids.iter().any(|(i, _)| i == id));
            let counted = refused(&admin).await? >= before + taken.len() as f64;
            Ok((refused_all && counted).then_some(refused_ids))
        },
    )
    .await?;
    let runs = w
        .cluster
        .kubectl(&["get", "pipelineruns", "-n", NAMESPACE, "-o", "json"])
        .await?;
    let runs: Value = serde_json::from_str(&runs)?;
    for r in runs["items"].as_array().into_iter().flatten() {
        let d = r["metadata"]["annotations"]["imagegate.dev/digest"].as_str();
        let id = r["metadata"]["annotations"]["imagegate.dev/event-id"]
            .as_str()
            .unwrap_or("");
        if d == Some(chosen.as_str()) || id.starts_with("f0f0f0") {
            return Err(anyhow!(
                "a forged event made PipelineRun {}",
                r["metadata"]["name"]
            ));
        }
    }
    w.timeline.line(
        "interceptor",
        "refused the forged events the admitted sender got through the Broker and the one posted \
         to the EventListener (imagegate_interceptor_events_total{verdict=\"refused\"}); the \
         Broker's ingress refused the other two (authentication-oidc); no PipelineRun was made for any",
    );
    Ok(())
}

/// Checks, from the proxy's log, the hops of the event that made PipelineRun `run`, and prints
/// them.
async fn route_taken(w: &World, run: &Value) -> anyhow::Result<()> {
    let name = run["metadata"]["name"].as_str().unwrap_or("");
    let id = route::event_id_of_run(run)
        .ok_or_else(|| anyhow!("PipelineRun {name} has no imagegate.dev/event-id"))?
        .to_string();
    let expected = route::expected_route(BROKER, TRIGGER, LISTENER);
    let path = w.cluster.dir.join("logs/network.jsonl");
    // Each hop is logged once answered; the PipelineRun's end is well after the EventListener's
    // answer, but the source's own request may be answered last.
    let hops = until(
        &format!("the four hops of event {id} in logs/network.jsonl"),
        Duration::from_secs(10),
        || async {
            let text = std::fs::read_to_string(&path)
                .with_context(|| format!("cannot read {}", path.display()))?;
            let hops = route::hops_of(&route::parse_log(&text)?, &id);
            let hops = route::for_trigger(hops, BROKER.0, TRIGGER);
            Ok((hops.len() >= expected.len()).then_some(hops))
        },
    )
    .await
    .or_else(|_| -> anyhow::Result<_> {
        let text = std::fs::read_to_string(&path)?;
        Ok(route::for_trigger(
            route::hops_of(&route::parse_log(&text)?, &id),
            BROKER.0,
            TRIGGER,
        ))
    })?;
    route::check_route(&id, &hops, &expected)?;
    for (hop, want) in hops.iter().zip(&expected) {
        w.timeline.line(
            "network",
            format!("{}: {}", want.what, short_digest(&route::describe(hop))),
        );
    }
    w.timeline.line(
        "knative",
        format!(
            "event {} went source -> Broker -> channel -> Trigger -> EventListener, exactly once each \
             (logs/network.jsonl)",
            short_digest(&id)
        ),
    );
    Ok(())
}
