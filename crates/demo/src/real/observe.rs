//! What the real demo shows while it runs: it watches the PipelineRuns, CustomRuns and TaskRuns
//! Tekton writes in the namespace, and the ImageStreams, and prints a timeline line on each
//! transition a user would watch (a PipelineRun created, a task ended or skipped, a run ended, a
//! served tag moved). The scenarios wait on what it has seen.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use kube::Api;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::Value;

use imagegate::api::ImageStream;

use crate::timeline::{Timeline, short_digest, short_name};

/// The kinds Tekton writes that the demo watches, with their group/version.
const KINDS: [(&str, &str, &str); 3] = [
    ("PipelineRun", "tekton.dev/v1", "pipelineruns"),
    ("TaskRun", "tekton.dev/v1", "taskruns"),
    ("CustomRun", "tekton.dev/v1beta1", "customruns"),
];

/// The latest state of every watched object, by kind and name.
#[derive(Default)]
struct Seen {
    objects: HashMap<(String, String), Value>,
    reported: HashSet<(String, String, &'static str)>,
    served: HashMap<String, (String, String)>,
}

/// The watcher of the namespace's Tekton objects and ImageStreams.
#[derive(Clone)]
pub struct Observer {
    seen: Arc<Mutex<Seen>>,
    timeline: Arc<Timeline>,
}

/// The status of an object's `Succeeded` condition and its reason and message.
pub fn succeeded(object: &Value) -> Option<(&str, &str, &str)> {
    let c = object["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "Succeeded")?;
    Some((
        c["status"].as_str().unwrap_or(""),
        c["reason"].as_str().unwrap_or(""),
        c["message"].as_str().unwrap_or(""),
    ))
}

/// Whether an object's `Succeeded` condition is True or False.
pub fn finished(object: &Value) -> bool {
    matches!(succeeded(object), Some(("True" | "False", _, _)))
}

fn label<'a>(object: &'a Value, key: &str) -> &'a str {
    object["metadata"]["labels"][key].as_str().unwrap_or("")
}

/// A timeline line for a task that ended: `<run> <task>: ok (<reason>)`, or FAILED with the
/// message, as `imagegate demo` prints it.
pub fn task_line(run: &str, task: &str, object: &Value) -> String {
    let (status, reason, message) = succeeded(object).unwrap_or(("", "", ""));
    let mark = if status == "True" { "ok" } else { "FAILED" };
    let mut text = format!("{} {task}: {mark} ({reason})", short_name(run));
    if status != "True" && !message.is_empty() {
        text.push_str(&format!(": {message}"));
    }
    for r in object["status"]["results"].as_array().into_iter().flatten() {
        // `checks` is a JSON array: the final table and the conditions already say how they ended.
        if let (Some(n), Some(v)) = (r["name"].as_str(), r["value"].as_str())
            && !v.is_empty()
            && n != "checks"
        {
            text.push_str(&format!("  {n}={}", short_digest(v)));
        }
    }
    text
}

/// The timeline line of a finished PipelineRun: its verdict and results.
pub fn outcome_line(run: &Value) -> String {
    let name = run["metadata"]["name"].as_str().unwrap_or("");
    let verdict = match succeeded(run) {
        Some(("True", _, _)) => "Succeeded".to_string(),
        Some((_, reason, _)) => format!("Failed ({reason})"),
        None => "Unknown".to_string(),
    };
    let mut text = format!("{} {verdict}", short_name(name));
    for r in results(run) {
        text.push_str(&format!("  {}={}", r.0, short_digest(&r.1)));
    }
    text
}

/// A PipelineRun's results that are not empty.
pub fn results(run: &Value) -> BTreeMap<String, String> {
    run["status"]["results"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| {
            Some((
                r["name"].as_str()?.to_string(),
                r["value"].as_str()?.to_string(),
            ))
        })
        .filter(|(_, v)| !v.is_empty())
        .collect()
}

impl Observer {
    /// Starts the watches of `namespace` (they run until `stop` turns true); the served tag is
    /// `served_tag`.
    pub fn start(
        client: kube::Client,
        namespace: &str,
        served_tag: &str,
        timeline: Arc<Timeline>,
        stop: tokio::sync::watch::Receiver<bool>,
    ) -> Observer {
        let observer = Observer {
            seen: Arc::default(),
            timeline,
        };
        for (kind, api_version, plural) in KINDS {
            let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
            let resource = ApiResource::from_gvk_with_plural(
                &GroupVersionKind::gvk(group, version, kind),
                plural,
            );
            let api: Api<DynamicObject> =
                Api::namespaced_with(client.clone(), namespace, &resource);
            let o = observer.clone();
            let mut stop = stop.clone();
            tokio::spawn(async move {
                let mut events = watcher::watcher(api, watcher::Config::default())
                    .default_backoff()
                    .applied_objects()
                    .boxed();
                loop {
                    let ev = tokio::select! {
                        ev = events.next() => ev,
                        _ = imagegate::runtime::leader::until(&mut stop, true) => return,
                    };
                    match ev {
                        Some(Ok(obj)) => match serde_json::to_value(&obj) {
                            Ok(v) => o.saw(kind, v),
                            Err(e) => tracing::warn!(error = %e, "an object that is not JSON"),
                        },
                        Some(Err(e)) => tracing::debug!(error = %e, kind, "watch error"),
                        None => return,
                    }
                }
            });
        }
        let streams: Api<ImageStream> = Api::namespaced(client, namespace);
        let o = observer.clone();
        let served = served_tag.to_string();
        let mut stop = stop;
        tokio::spawn(async move {
            let mut events = watcher::watcher(streams, watcher::Config::default())
                .default_backoff()
                .boxed();
            let mut listed = false;
            loop {
                let ev = tokio::select! {
                    ev = events.next() => ev,
                    _ = imagegate::runtime::leader::until(&mut stop, true) => return,
                };
                match ev {
                    Some(Ok(watcher::Event::Apply(s) | watcher::Event::InitApply(s))) => {
                        o.saw_stream(&s, &served, listed)
                    }
                    Some(Ok(watcher::Event::InitDone)) => listed = true,
                    Some(_) => {}
                    None => return,
                }
            }
        });
        observer
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Seen> {
        self.seen.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn saw_stream(&self, stream: &ImageStream, served: &str, listed: bool) {
        let Some(name) = stream.metadata.name.clone() else {
            return;
        };
        let now = (
            crate::served_digest(stream, served),
            crate::phase(stream, served),
        );
        let mut seen = self.lock();
        if seen.served.get(&name) != Some(&now) {
            if listed {
                self.timeline.line(
                    "users see",
                    format!(
                        "{name}:{served} -> {}  phase {}",
                        short_digest(&now.0),
                        if now.1.is_empty() { "-" } else { &now.1 }
                    ),
                );
            }
            seen.served.insert(name, now);
        }
    }

    /// Records an object and prints the transitions it shows, once each.
    fn saw(&self, kind: &'static str, object: Value) {
        let name = object["metadata"]["name"]
            .as_str()
            .unwrap_or("")
            .to_string();
        let mut seen = self.lock();
        let mut once =
            |what: &'static str| seen.reported.insert((kind.to_string(), name.clone(), what));
        let mut lines = Vec::new();
        match kind {
            "PipelineRun" => {
                if once("created") {
                    let a = &object["metadata"]["annotations"];
                    let by = match label(&object, "triggers.tekton.dev/eventlistener") {
                        "" => String::new(),
                        el => format!(" by EventListener {el}"),
                    };
                    let what = match (
                        a["imagegate.dev/imagestream"].as_str(),
                        a["imagegate.dev/digest"].as_str(),
                    ) {
                        (Some(is), Some(d)) => format!(" for {is}@{}", short_digest(d)),
                        _ => String::new(),
                    };
                    lines.push((
                        "tekton",
                        format!("PipelineRun {} created{by}{what}", short_name(&name)),
                    ));
                }
                if finished(&object) && once("done") {
                    for s in object["status"]["skippedTasks"]
                        .as_array()
                        .into_iter()
                        .flatten()
                    {
                        lines.push((
                            "task",
                            format!(
                                "{} {}: skipped ({})",
                                short_name(&name),
                                s["name"].as_str().unwrap_or(""),
                                s["reason"].as_str().unwrap_or("")
                            ),
                        ));
                    }
                    lines.push(("pipeline", outcome_line(&object)));
                }
            }
            _ => {
                if finished(&object) && once("done") {
                    let run = label(&object, "tekton.dev/pipelineRun");
                    let task = label(&object, "tekton.dev/pipelineTask");
                    let who = if kind == "CustomRun" {
                        "controller"
                    } else {
                        "validate"
                    };
                    let mut text = task_line(run, task, &object);
                    if kind == "TaskRun"
                        && let Some(code) =
                            object["status"]["steps"][0]["terminated"]["exitCode"].as_i64()
                    {
                        text.push_str(&format!("  (pod ended by kwok: exit {code})"));
                    }
                    lines.push((who, text));
                }
            }
        }
        seen.objects.insert((kind.to_string(), name), object);
        drop(seen);
        for (who, text) in lines {
            self.timeline.line(who, text);
        }
    }

    /// The objects of `kind` seen so far that satisfy `pick`.
    pub fn find(&self, kind: &str, pick: impl Fn(&Value) -> bool) -> Vec<Value> {
        self.lock()
            .objects
            .iter()
            .filter(|((k, _), v)| k == kind && pick(v))
            .map(|(_, v)| v.clone())
            .collect()
    }

    /// Waits (at most `limit`) until an object of `kind` satisfies `pick`; that object.
    pub async fn wait(
        &self,
        what: &str,
        kind: &str,
        limit: Duration,
        pick: impl Fn(&Value) -> bool,
    ) -> anyhow::Result<Value> {
        super::cluster::until(what, limit, || {
            let found = self.find(kind, &pick).into_iter().next();
            async move { Ok(found) }
        })
        .await
    }
}

/// Whether a PipelineRun is the one the shipped TriggerTemplate made for `imagestream` (as
/// `<namespace>/<name>`) at `digest`.
pub fn run_for(run: &Value, imagestream: &str, digest: &str) -> bool {
    let a = &run["metadata"]["annotations"];
    a["imagegate.dev/imagestream"] == imagestream && a["imagegate.dev/digest"] == digest
}

/// Whether a Tekton object belongs to PipelineRun `run` as its pipeline task `task`.
pub fn task_of(object: &Value, run: &str, task: &str) -> bool {
    label(object, "tekton.dev/pipelineRun") == run
        && label(object, "tekton.dev/pipelineTask") == task
}
