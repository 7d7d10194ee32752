//! The demo's stand-in for Tekton's pipeline controller: it runs the PipelineRuns the
//! EventListener stand-in renders, task by task, the way Tekton does for this Pipeline's shape:
//! `runAfter` order, a failed task skipping the rest, `finally` tasks with `when` expressions over
//! `$(tasks.<name>.status)`, and pipeline results.
//!
//! A task whose `taskRef` names a custom task becomes a real `tekton.dev/v1beta1` CustomRun in the
//! API server, named `<pipelinerun>-<task>` with the pipeline task's params, `timeout` and
//! `retries` and the PipelineRun's service account, owned by the PipelineRun, exactly as Tekton
//! creates it; `imagegate controller` reconciles it and the runner waits for its `Succeeded`
//! condition. A `Task` (a container) is handed to a [`Validator`]: the demo runs no containers,
//! but it records the TaskRun Tekton would have, with the outcome. The PipelineRun, its TaskRuns
//! and their links are written to the API server by [`super::objects`]; they are the proof of
//! validation the controller reads.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, anyhow, bail};
use futures::future::BoxFuture;
use kube::Api;
use kube::api::PostParams;
use serde_json::{Value, json};

use imagegate::api::CustomRun;

use super::objects::RunObjects;
use super::schedule::{self, Ended, RunContext};
use super::tekton::{TektonFiles, defaults_of, list_at, params_of, str_at};
use super::timeline::{Timeline, short_name};

/// How a pipeline task ended, as `$(tasks.<name>.status)` reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TaskStatus {
    /// It ran and succeeded.
    Succeeded,
    /// It ran and failed.
    Failed,
    /// It did not run (skipped).
    None,
}

impl TaskStatus {
    /// As `$(tasks.<name>.status)` reads it.
    pub fn as_str(self) -> &'static str {
        match self {
            TaskStatus::Succeeded => "Succeeded",
            TaskStatus::Failed => "Failed",
            TaskStatus::None => "None",
        }
    }
}

/// One task's outcome.
#[derive(Clone, Debug)]
pub struct TaskOutcome {
    /// Succeeded, Failed or None.
    pub status: TaskStatus,
    /// The condition's reason (`Promoted`, `CandidateMoved`, ...).
    pub reason: String,
    /// The condition's message.
    pub message: String,
    /// The task's results.
    pub results: BTreeMap<String, String>,
}

impl TaskOutcome {
    /// A task Tekton skipped, with the reason its `skippedTasks` gives.
    pub fn skipped(reason: &str) -> TaskOutcome {
        TaskOutcome {
            status: TaskStatus::None,
            reason: reason.into(),
            message: String::new(),
            results: BTreeMap::new(),
        }
    }
}

/// A container Task the runner was asked to run.
#[derive(Clone, Debug)]
pub struct TaskCall {
    /// The PipelineRun's name.
    pub pipeline_run: String,
    /// The pipeline task's name.
    pub task: String,
    /// Its params, resolved.
    pub params: BTreeMap<String, String>,
    /// The literal environment its Task's steps set (a `$(...)` value as written).
    pub env: BTreeMap<String, String>,
}

/// Runs a container Task in the demo (which has no containers): decides its outcome.
pub type Validator = Arc<dyn Fn(TaskCall) -> BoxFuture<'static, TaskOutcome> + Send + Sync>;

/// A PipelineRun the runner knows.
#[derive(Clone, Debug, Default)]
pub struct RunRecord {
    /// Its name.
    pub name: String,
    /// Its params, resolved with the Pipeline's defaults.
    pub params: BTreeMap<String, String>,
    /// The service account its tasks run as (`taskRunTemplate.serviceAccountName`, else
    /// `default`), which its CustomRuns carry.
    pub service_account: String,
    /// Whether it finished.
    pub done: bool,
    /// Whether it succeeded (when done).
    pub succeeded: bool,
    /// The reason of its final condition (`Succeeded`, `Completed`, `Failed`), when done.
    pub reason: String,
    /// Each task that ran or was skipped, in order.
    pub tasks: Vec<(String, TaskOutcome)>,
    /// The pipeline results that resolved.
    pub results: BTreeMap<String, String>,
}

/// Creating a PipelineRun: created, or refused because the name is taken.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Created {
    /// A new run started.
    Started(String),
    /// A run of that name exists (the API server's AlreadyExists).
    AlreadyExists(String),
}

struct Inner {
    files: TektonFiles,
    client: kube::Client,
    namespace: String,
    validator: Validator,
    timeline: Arc<Timeline>,
    runs: Mutex<BTreeMap<String, RunRecord>>,
    changed: tokio::sync::watch::Sender<u64>,
}

/// The stand-in pipeline controller.
#[derive(Clone)]
pub struct Runner(Arc<Inner>);

impl Runner {
    /// A runner creating CustomRuns in `namespace` with `client` (the pipeline controller's
    /// identity).
    pub fn new(
        files: TektonFiles,
        client: kube::Client,
        namespace: &str,
        validator: Validator,
        timeline: Arc<Timeline>,
    ) -> Runner {
        Runner(Arc::new(Inner {
            files,
            client,
            namespace: namespace.to_string(),
            validator,
            timeline,
            runs: Mutex::new(BTreeMap::new()),
            changed: tokio::sync::watch::channel(0).0,
        }))
    }

    /// Every run so far.
    pub fn runs(&self) -> Vec<RunRecord> {
        self.lock().values().cloned().collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, RunRecord>> {
        self.0.runs.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn bump(&self) {
        self.0.changed.send_modify(|n| *n += 1);
    }

    /// Waits until a finished run matches `pred`, and returns it.
    pub async fn wait_done(
        &self,
        what: &str,
        timeout: Duration,
        pred: impl Fn(&RunRecord) -> bool,
    ) -> anyhow::Result<RunRecord> {
        let mut rx = self.0.changed.subscribe();
        let wait = async {
            loop {
                if let Some(r) = self.lock().values().find(|r| r.done && pred(r)) {
                    return r.clone();
                }
                if rx.changed().await.is_err() {
                    std::future::pending::<()>().await;
                }
            }
        };
        tokio::time::timeout(timeout, wait)
            .await
            .map_err(|_| anyhow!("no PipelineRun finished for {what} within {timeout:?}"))
    }

    /// Starts a PipelineRun (the object the TriggerTemplate rendered, or the rollback example).
    pub fn start(&self, pipeline_run: Value) -> anyhow::Result<Created> {
        let Prepared {
            name,
            pipeline_run,
            spec,
            params,
        } = prepare(&self.0.files, pipeline_run)?;
        {
            let mut runs = self.lock();
            if runs.contains_key(&name) {
                return Ok(Created::AlreadyExists(name));
            }
            let service_account = str_at(&pipeline_run, "/spec/taskRunTemplate/serviceAccountName")
                .unwrap_or("default")
                .to_string();
            runs.insert(
                name.clone(),
                RunRecord {
                    name: name.clone(),
                    params: params.clone(),
                    service_account,
                    ..RunRecord::default()
                },
            );
        }
        self.bump();
        let runner = self.clone();
        let run_name = name.clone();
        tokio::spawn(async move {
            let outcome = runner.run(&run_name, &pipeline_run, &spec, &params).await;
            let mut runs = runner.lock();
            if let Some(r) = runs.get_mut(&run_name) {
                r.done = true;
                match outcome {
                    Ok(ended) => {
                        r.succeeded = ended.condition.succeeded;
                        r.reason = ended.condition.reason.to_string();
                        r.results = ended.results;
                    }
                    Err(e) => {
                        r.succeeded = false;
                        r.reason = "Failed".to_string();
                        runner.0.timeline.line(
                            "pipeline",
                            format!("{}: failed: {e:#}", short_name(&run_name)),
                        );
                    }
                }
            }
            drop(runs);
            runner.bump();
        });
        Ok(Created::Started(name))
    }

    fn record(&self, run: &str, task: &str, outcome: &TaskOutcome) {
        if let Some(r) = self.lock().get_mut(run) {
            r.tasks.push((task.to_string(), outcome.clone()));
        }
        self.bump();
    }

    /// Creates the PipelineRun in the API server, runs it, and records how it ended.
    async fn run(
        &self,
        run: &str,
        pipeline_run: &Value,
        spec: &Value,
        params: &BTreeMap<String, String>,
    ) -> anyhow::Result<Ended> {
        let objects =
            RunObjects::create(&self.0.client, &self.0.namespace, run, pipeline_run).await?;
        let ctx = RunContext {
            run,
            namespace: &self.0.namespace,
            params,
        };
        let ended = schedule::execute(
            &ctx,
            spec,
            |task, resolved| Box::pin(self.run_task(run, task, resolved, &objects)),
            |name, outcome| {
                self.report(run, name, outcome);
                self.record(run, name, outcome);
            },
        )
        .await?;
        objects.finish(&ended.condition).await?;
        Ok(ended)
    }

    fn report(&self, run: &str, task: &str, o: &TaskOutcome) {
        let mark = match o.status {
            TaskStatus::Succeeded => "ok",
            TaskStatus::Failed => "FAILED",
            TaskStatus::None => "skipped",
        };
        let mut text = format!("{} {task}: {mark} ({})", short_name(run), o.reason);
        if !o.message.is_empty() {
            text.push_str(&format!(": {}", o.message));
        }
        self.0.timeline.line("task", text);
    }

    /// Runs a task Tekton would start (its params resolved) as a CustomRun or through the
    /// validator.
    async fn run_task(
        &self,
        run: &str,
        task: &Value,
        resolved: BTreeMap<String, String>,
        objects: &RunObjects,
    ) -> anyhow::Result<TaskOutcome> {
        let name = str_at(task, "/name")?;
        let task_ref = task
            .get("taskRef")
            .ok_or_else(|| anyhow!("task {name}: the demo runs tasks with a taskRef"))?;
        let api_version = task_ref.get("apiVersion").and_then(Value::as_str);
        match api_version {
            Some(av) if !av.starts_with("tekton.dev/") => {
                self.custom_run(run, name, task, task_ref, &resolved, objects)
                    .await
            }
            _ => {
                let task_name = str_at(task_ref, "/name")?;
                // The Task must exist in tekton/ and take exactly these params.
                let declared = self.0.files.get("Task", task_name)?;
                for p in resolved.keys() {
                    if !list_at(declared, "/spec/params")
                        .iter()
                        .any(|d| d.get("name").and_then(Value::as_str) == Some(p))
                    {
                        bail!("task {name} passes {p:?}, which Task {task_name} does not declare");
                    }
                }
                let env = list_at(declared, "/spec/steps")
                    .iter()
                    .flat_map(|step| list_at(step, "/env"))
                    .filter_map(|e| {
                        let name = e.get("name")?.as_str()?;
                        Some((name.to_string(), e.get("value")?.as_str()?.to_string()))
                    })
                    .collect();
                let outcome = (self.0.validator)(TaskCall {
                    pipeline_run: run.to_string(),
                    task: name.to_string(),
                    params: resolved.clone(),
                    env,
                })
                .await;
                let ran = recorded_spec(&declared["spec"], &resolved);
                objects
                    .task_run(name, task_name, &resolved, &outcome, ran)
                    .await?;
                Ok(outcome)
            }
        }
    }

    /// Creates the CustomRun Tekton would create for a custom task and waits for it to finish.
    async fn custom_run(
        &self,
        run: &str,
        task: &str,
        pipeline_task: &Value,
        task_ref: &Value,
        params: &BTreeMap<String, String>,
        objects: &RunObjects,
    ) -> anyhow::Result<TaskOutcome> {
        let name = format!("{run}-{task}");
        let service_account = self
            .lock()
            .get(run)
            .map_or_else(|| "default".to_string(), |r| r.service_account.clone());
        let mut spec = json!({
            "customRef": task_ref,
            "params": params.iter().map(|(k, v)| json!({"name": k, "value": v})).collect::<Vec<_>>(),
            "serviceAccountName": service_account,
        });
        if let Some(t) = pipeline_task.get("timeout") {
            spec["timeout"] = t.clone();
        }
        if let Some(r) = pipeline_task.get("retries") {
            spec["retries"] = r.clone();
        }
        let mut object = json!({
            "apiVersion": "tekton.dev/v1beta1",
            "kind": "CustomRun",
            "metadata": objects.child_metadata(task),
            "spec": spec,
        });
        object["metadata"]["name"] = json!(name);
        object["metadata"]["namespace"] = json!(self.0.namespace);
        let custom_run: CustomRun =
            serde_json::from_value(object).context("building the CustomRun")?;
        let api: Api<CustomRun> = Api::namespaced(self.0.client.clone(), &self.0.namespace);
        api.create(&PostParams::default(), &custom_run)
            .await
            .with_context(|| format!("creating CustomRun {name}"))?;
        objects
            .child("tekton.dev/v1beta1", "CustomRun", &name, task)
            .await?;
        let done = kube::runtime::wait::await_condition(api, &name, |r: Option<&CustomRun>| {
            r.is_some_and(CustomRun::is_done)
        });
        let finished = tokio::time::timeout(Duration::from_secs(20), done)
            .await
            .map_err(|_| anyhow!("CustomRun {name} did not finish within 20 s"))?
            .with_context(|| format!("watching CustomRun {name}"))?
            .ok_or_else(|| anyhow!("CustomRun {name} was deleted"))?;
        let condition = finished.succeeded_condition().cloned().unwrap_or_default();
        Ok(TaskOutcome {
            status: if condition.is_true() {
                TaskStatus::Succeeded
            } else {
                TaskStatus::Failed
            },
            reason: condition.reason.unwrap_or_default(),
            message: condition.message.unwrap_or_default(),
            results: finished
                .status
                .map(|s| s.results.into_iter().map(|r| (r.name, r.value)).collect())
                .unwrap_or_default(),
        })
    }
}

/// The Task's spec as Tekton records it for a run (`status.taskSpec`): each `$(params.<name>)`
/// replaced by the run's value (else the param's default) and each `$(results.<name>.path)` by
/// `/tekton/results/<name>`. Tekton v1.15 records exactly this for the Tasks of `tekton/` (the
/// real-cluster demo compares their pins), so the pins of `tekton/100` hold in the demo too.
pub fn recorded_spec(spec: &Value, params: &BTreeMap<String, String>) -> Value {
    let mut values: Vec<(String, String)> = list_at(spec, "/params")
        .iter()
        .filter_map(|p| {
            let name = p.get("name")?.as_str()?;
            let value = params
                .get(name)
                .cloned()
                .or_else(|| p.get("default")?.as_str().map(str::to_string))?;
            Some((format!("$(params.{name})"), value))
        })
        .collect();
    for r in list_at(spec, "/results") {
        if let Some(name) = r.get("name").and_then(Value::as_str) {
            values.push((
                format!("$(results.{name}.path)"),
                format!("/tekton/results/{name}"),
            ));
        }
    }
    let mut out = spec.clone();
    substitute(&mut out, &values);
    out
}

fn substitute(v: &mut Value, values: &[(String, String)]) {
    match v {
        Value::String(s) => {
            for (from, to) in values {
                if s.contains(from.as_str()) {
                    *s = s.replace(from.as_str(), to);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|i| substitute(i, values)),
        Value::Object(fields) => fields.values_mut().for_each(|f| substitute(f, values)),
        _ => {}
    }
}

/// A PipelineRun as Tekton takes it in: its name (generated from `generateName`), its Pipeline's
/// spec and its params with the Pipeline's defaults.
pub struct Prepared {
    /// The PipelineRun's name.
    pub name: String,
    /// The PipelineRun, its name filled in.
    pub pipeline_run: Value,
    /// Its Pipeline's spec (`pipelineSpec`, or the Pipeline of `tekton/` it names).
    pub spec: Value,
    /// Its params with the Pipeline's defaults.
    pub params: BTreeMap<String, String>,
}

/// Takes a PipelineRun in as the API server and Tekton would: a name the API server accepts,
/// a Pipeline that exists, a value for every param.
pub fn prepare(files: &TektonFiles, mut pipeline_run: Value) -> anyhow::Result<Prepared> {
    let name = match pipeline_run
        .pointer("/metadata/name")
        .and_then(Value::as_str)
    {
        Some(n) => n.to_string(),
        None => {
            let prefix = str_at(&pipeline_run, "/metadata/generateName")
                .context("a PipelineRun needs a name or a generateName")?;
            let suffix = uuid::Uuid::new_v4().simple().to_string();
            format!("{prefix}{}", &suffix[..5])
        }
    };
    check_name(&name)?;
    pipeline_run["metadata"]["name"] = Value::String(name.clone());
    as_tekton_stores(&mut pipeline_run);
    let spec = match pipeline_run.pointer("/spec/pipelineSpec") {
        Some(spec) => spec.clone(),
        None => {
            let pipeline = str_at(&pipeline_run, "/spec/pipelineRef/name")?;
            files
                .get("Pipeline", pipeline)?
                .get("spec")
                .cloned()
                .ok_or_else(|| anyhow!("Pipeline {pipeline} has no spec"))?
        }
    };
    let mut params = defaults_of(list_at(&spec, "/params"));
    params.extend(params_of(list_at(&pipeline_run, "/spec/params"))?);
    for p in list_at(&spec, "/params") {
        let pname = str_at(p, "/name")?;
        if !params.contains_key(pname) {
            bail!("PipelineRun {name}: param {pname:?} has no value and no default");
        }
    }
    Ok(Prepared {
        name,
        pipeline_run,
        spec,
        params,
    })
}

/// The PipelineRun as it reads once Tekton's controller has written it back (it updates the
/// object typed, to set its labels): `spec.timeouts` as Go prints a duration (`1h` -> `1h0m0s`).
pub fn as_tekton_stores(pipeline_run: &mut Value) {
    if let Some(timeouts) = pipeline_run
        .pointer_mut("/spec/timeouts")
        .and_then(Value::as_object_mut)
    {
        for v in timeouts.values_mut() {
            if let Some(go) = v.as_str().and_then(go_duration) {
                *v = Value::String(go);
            }
        }
    }
}

/// A duration of whole seconds in `h`, `m` and `s` as Go's `time.Duration.String` prints it;
/// None for anything else (left as written).
fn go_duration(text: &str) -> Option<String> {
    let mut total: u64 = 0;
    let mut number = String::new();
    for c in text.chars() {
        if c.is_ascii_digit() {
            number.push(c);
            continue;
        }
        let unit = match c {
            'h' => 3600,
            'm' => 60,
            's' => 1,
            _ => return None,
        };
        total += number.parse::<u64>().ok()? * unit;
        number.clear();
    }
    if !number.is_empty() || text.is_empty() {
        return None;
    }
    let (h, m, s) = (total / 3600, total % 3600 / 60, total % 60);
    Some(match (h, m) {
        (0, 0) => format!("{s}s"),
        (0, _) => format!("{m}m{s}s"),
        _ => format!("{h}h{m}m{s}s"),
    })
}

/// A PipelineRun's name as the API server (a DNS-1123 subdomain: lowercase letters, digits, `-`
/// and `.`, starting and ending with a letter or digit) and Tekton's webhook (at most 63
/// characters, as it becomes a label value) accept it.
pub fn check_name(name: &str) -> anyhow::Result<()> {
    let edge = |c: Option<char>| c.is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    let body = name
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.');
    if !(body && edge(name.chars().next()) && edge(name.chars().last())) {
        bail!(
            "PipelineRun name {name:?} is not a DNS-1123 subdomain (lowercase letters, digits, \
             '-' and '.', starting and ending with a letter or digit): the API server refuses it"
        );
    }
    if name.len() > 63 {
        bail!("PipelineRun name {name:?} is longer than 63 characters");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_as_go_prints_them() {
        for (written, go) in [
            ("1h", "1h0m0s"),
            ("90m", "1h30m0s"),
            ("2m", "2m0s"),
            ("30s", "30s"),
            ("0s", "0s"),
        ] {
            assert_eq!(go_duration(written).as_deref(), Some(go), "{written}");
        }
        for other in ["1.5h", "10ms", "", "h", "5"] {
            assert_eq!(go_duration(other), None, "{other}");
        }
    }

    #[test]
    fn a_pipelinerun_name_must_be_one_the_api_server_takes() {
        check_name("imagegate-0123abcd").unwrap();
        for bad in [
            "imagegate-ABC",
            "imagegate-",
            "-x",
            "a_b",
            "",
            &"x".repeat(64),
        ] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
    }
}
