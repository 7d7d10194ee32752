//! The demo's stand-in for a Tekton Triggers EventListener: a real HTTP server that
//! `imagegate source` delivers to. For each request it does what the committed EventListener
//! (`tekton/430-eventlistener.yaml`) says: the CEL filter, the TriggerBinding, the
//! TriggerTemplate, and the PipelineRun the template renders, named after the event id, so a
//! redelivered event finds the name taken. It answers like the Triggers sink (v0.37.0): 400 for a
//! body that is not a JSON object (its payload validation reads the body into a map), else 202,
//! whatever its triggers then do.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use anyhow::{anyhow, bail};
use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use cloudevents::AttributesReader;
use serde_json::{Value, json};

use super::clusterinterceptor::ClusterInterceptors;
use super::interceptor::Interceptor;
use super::pipeline::{Created, Runner};
use super::request::Request;
use super::tekton::{TektonFiles, defaults_of, list_at, str_at, substitute, substitute_value};
use super::timeline::{Timeline, short_digest, short_name};

/// The EventListener stand-in.
pub struct Listener {
    files: TektonFiles,
    /// Triggers' CEL environment, for the `cel` interceptors.
    cel: Interceptor,
    /// Every other ClusterInterceptor (the imagegate interceptor), called as Triggers calls it.
    interceptors: ClusterInterceptors,
    /// The listener's namespace (its triggers' `trigger_id`).
    namespace: String,
    runner: Runner,
    timeline: Arc<Timeline>,
    /// Answer the next N requests with 503, as an EventListener that is restarting would.
    outage: AtomicU32,
    /// Every event id received, to point out redeliveries.
    seen: std::sync::Mutex<std::collections::HashSet<String>>,
    /// The last trigger that failed, and why.
    failed: tokio::sync::watch::Sender<Option<String>>,
}

impl Listener {
    /// A listener running what `files` says through `runner`.
    pub fn new(
        files: TektonFiles,
        interceptors: ClusterInterceptors,
        namespace: &str,
        runner: Runner,
        timeline: Arc<Timeline>,
    ) -> anyhow::Result<Arc<Listener>> {
        Ok(Arc::new(Listener {
            files,
            cel: Interceptor::new()?,
            interceptors,
            namespace: namespace.to_string(),
            runner,
            timeline,
            outage: AtomicU32::new(0),
            seen: Default::default(),
            failed: tokio::sync::watch::channel(None).0,
        }))
    }

    /// Makes the next `n` deliveries fail with 503.
    pub fn fail_next(&self, n: u32) {
        self.outage.store(n, Ordering::SeqCst);
    }

    /// Resolves with the error of a trigger that failed (at once if one already has): in the
    /// demo, every trigger must run.
    pub async fn failure(&self) -> String {
        let mut rx = self.failed.subscribe();
        loop {
            if let Some(e) = rx.borrow_and_update().clone() {
                return e;
            }
            if rx.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    }

    /// Serves on `listener` until `shutdown` resolves.
    pub async fn serve(
        self: Arc<Self>,
        listener: tokio::net::TcpListener,
        shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        // Like the EventListener, every path and every method reaches the handler.
        let app = Router::new().fallback(receive).with_state(self);
        axum::serve(listener, app)
            .with_graceful_shutdown(shutdown)
            .await
    }

    /// Runs the triggers over one request and starts what they rendered; what happened, for the
    /// timeline.
    async fn handle(&self, request: &Request) -> anyhow::Result<Vec<String>> {
        let mut lines = Vec::new();
        let on = Interceptors {
            cel: &self.cel,
            others: &self.interceptors,
            namespace: &self.namespace,
        };
        for triggered in triggers(&self.files, &on, request).await? {
            let (params, resources) = match triggered {
                Triggered::Dropped { why, .. } => {
                    lines.push(why);
                    continue;
                }
                Triggered::Rendered { params, resources } => (params, resources),
            };
            for resource in resources {
                match self.runner.start(resource)? {
                    Created::Started(name) => lines.push(format!(
                        "PipelineRun {} started for {}@{}",
                        short_name(&name),
                        params.get("imagestream").map_or("?", String::as_str),
                        short_digest(params.get("digest").map_or("", String::as_str)),
                    )),
                    Created::AlreadyExists(name) => lines.push(format!(
                        "PipelineRun {} already exists: a redelivery, no second run",
                        short_name(&name)
                    )),
                }
            }
        }
        Ok(lines)
    }
}

/// What one trigger of the EventListener did with a request.
#[derive(Clone, Debug, PartialEq)]
pub enum Triggered {
    /// An interceptor stopped it: its filter did not pass, or it could not read the request.
    Dropped {
        /// Why, for the timeline.
        why: String,
    },
    /// Its binding and template rendered these resources (PipelineRuns).
    Rendered {
        /// The TriggerTemplate's params.
        params: BTreeMap<String, String>,
        /// The resources, rendered.
        resources: Vec<Value>,
    },
}

/// The interceptors an EventListener of `namespace` runs: Triggers' CEL in process, every
/// other ClusterInterceptor called over the network.
pub struct Interceptors<'a> {
    /// The `cel` ClusterInterceptor.
    pub cel: &'a Interceptor,
    /// The others.
    pub others: &'a ClusterInterceptors,
    /// The EventListener's namespace.
    pub namespace: &'a str,
}

/// Runs the EventListener of `files` over one request, as the Triggers sink does: each trigger's
/// interceptors, then its bindings (a path that resolves to nothing takes the template's default)
/// and its template. An error is a trigger that cannot run (the sink logs it; the request was
/// answered 202 already).
pub async fn triggers(
    files: &TektonFiles,
    on: &Interceptors<'_>,
    request: &Request,
) -> anyhow::Result<Vec<Triggered>> {
    let el = files.single("EventListener")?;
    let mut out = Vec::new();
    for trigger in list_at(el, "/spec/triggers") {
        let tname = trigger.get("name").and_then(Value::as_str).unwrap_or("");
        let extensions = match intercepted(on, trigger, tname, request).await? {
            Err(why) => {
                out.push(Triggered::Dropped { why });
                continue;
            }
            Ok(extensions) => Value::Object(extensions),
        };
        let mut tt_params = BTreeMap::new();
        for b in list_at(trigger, "/bindings") {
            let binding = files.get("TriggerBinding", str_at(b, "/ref")?)?;
            for p in list_at(binding, "/spec/params") {
                let pname = str_at(p, "/name")?;
                // A path that resolves to nothing falls back to the template's default.
                let lookup = |e: &str| match e.strip_prefix("extensions.") {
                    Some(path) => {
                        let v = path.split('.').try_fold(&extensions, |v, k| v.get(k))?;
                        Some(v.as_str().map_or_else(|| v.to_string(), str::to_string))
                    }
                    None => request.binding(e),
                };
                if let Ok(v) = substitute(str_at(p, "/value")?, &lookup) {
                    tt_params.insert(pname.to_string(), v);
                }
            }
        }
        let template = files.get("TriggerTemplate", str_at(trigger, "/template/ref")?)?;
        for (k, v) in defaults_of(list_at(template, "/spec/params")) {
            tt_params.entry(k).or_insert(v);
        }
        for p in list_at(template, "/spec/params") {
            let pname = str_at(p, "/name")?;
            if !tt_params.contains_key(pname) {
                bail!("trigger {tname}: TriggerTemplate param {pname:?} has no value");
            }
        }
        let lookup = |e: &str| {
            e.strip_prefix("tt.params.")
                .and_then(|p| tt_params.get(p).cloned())
        };
        let mut resources = Vec::new();
        for resource in list_at(template, "/spec/resourcetemplates") {
            let rendered = substitute_value(resource, &lookup)?;
            if rendered.get("kind").and_then(Value::as_str) != Some("PipelineRun") {
                bail!(
                    "the demo creates PipelineRuns only, not {:?}",
                    rendered.get("kind")
                );
            }
            resources.push(rendered);
        }
        out.push(Triggered::Rendered {
            params: tt_params,
            resources,
        });
    }
    Ok(out)
}

/// The trigger's interceptors in order: the extensions they added, or why one of them stopped
/// the request.
async fn intercepted(
    on: &Interceptors<'_>,
    trigger: &Value,
    tname: &str,
    request: &Request,
) -> anyhow::Result<Result<serde_json::Map<String, Value>, String>> {
    let mut extensions = serde_json::Map::new();
    for i in list_at(trigger, "/interceptors") {
        let name = i.pointer("/ref/name").and_then(Value::as_str).unwrap_or("");
        if name != "cel" {
            if i.pointer("/ref/kind").and_then(Value::as_str) != Some("ClusterInterceptor") {
                bail!("the demo runs ClusterInterceptors only, not {i}");
            }
            let answer = (on.others)
                .call(name, on.namespace, tname, request, &extensions)
                .await?;
            if !answer.continue_ {
                return Ok(Err(format!(
                    "refused by interceptor {name}: {}",
                    answer.message
                )));
            }
            extensions.extend(answer.extensions);
            continue;
        }
        for p in list_at(i, "/params") {
            match p.get("name").and_then(Value::as_str) {
                Some("filter") => {
                    let filter = p
                        .get("value")
                        .and_then(Value::as_str)
                        .ok_or_else(|| anyhow!("the cel filter is not a string"))?;
                    if !on.cel.filter(filter, request)? {
                        return Ok(Err("dropped by the trigger's CEL filter".into()));
                    }
                }
                other => bail!("the demo does not run cel param {other:?}"),
            }
        }
    }
    Ok(Ok(extensions))
}

/// The body, if it is a JSON object: the Triggers sink's payload validation
/// (`pkg/sink/validate_payload.go`) answers 400 to anything else before any trigger runs.
pub fn body_of(body: &[u8]) -> Option<Value> {
    match serde_json::from_slice(body) {
        Ok(v @ Value::Object(_)) => Some(v),
        _ => None,
    }
}

async fn receive(
    State(listener): State<Arc<Listener>>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> (StatusCode, String) {
    let event = cloudevents::binding::http::to_event(&headers, body.to_vec()).ok();
    let mut what = match &event {
        Some(e) => format!(
            "{} {} id={}",
            e.ty(),
            e.subject().unwrap_or(""),
            short_name(e.id())
        ),
        None => "a request that is not a CloudEvent".to_string(),
    };
    if let Some(e) = &event {
        let mut seen = listener.seen.lock().unwrap_or_else(|p| p.into_inner());
        if !seen.insert(e.id().to_string()) {
            what.push_str(" (the source retried: same id)");
        }
    }
    if listener
        .outage
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
        .is_ok()
    {
        listener
            .timeline
            .line("listener", format!("503 (simulated restart) for {what}"));
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            "EventListener Timeout!\n".into(),
        );
    }
    let Some(body_json) = body_of(&body) else {
        listener.timeline.line(
            "listener",
            format!("400: the body is not a JSON object ({what})"),
        );
        return (
            StatusCode::BAD_REQUEST,
            json!({"eventListener": "imagegate", "errorMessage": "Invalid event body format"})
                .to_string(),
        );
    };
    let request = Request::from_http(uri.to_string(), &headers, body_json);
    listener.timeline.line("event", &what);
    match listener.handle(&request).await {
        Ok(lines) => {
            for l in lines {
                listener.timeline.line("listener", l);
            }
        }
        // The real EventListener has already answered 202 when a trigger fails; it only logs.
        Err(e) => {
            listener
                .timeline
                .line("listener", format!("trigger failed: {e:#}"));
            listener.failed.send_replace(Some(format!("{e:#}")));
        }
    }
    (
        StatusCode::ACCEPTED,
        json!({"eventListener": "imagegate", "eventID": uuid::Uuid::new_v4().to_string()})
            .to_string(),
    )
}
