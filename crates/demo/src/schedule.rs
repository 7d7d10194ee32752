//! What Tekton's PipelineRun reconciler decides, for the demo's pipeline stand-in
//! ([`super::pipeline`], which does the I/O of running a task): which task runs and which is
//! skipped with which reason, what a `$(...)` resolves to, the pipeline results and the
//! PipelineRun's final condition. The rules and the texts are Tekton Pipelines v1.15.0's
//! (`pkg/reconciler/pipelinerun/resources`: `pipelinerunresolution.go` for the skips,
//! `pipelinerunstate.go` for the condition), held to the released controller by
//! `tests/it/realcluster_tekton/differential/`:
//!
//! - a DAG task is skipped, in this order: `PipelineRun was stopping` once a DAG task has failed;
//!   `When Expressions evaluated to false`; `Parent Tasks were skipped` when a parent (`runAfter`,
//!   or a task whose result it reads) was skipped for any other reason than its `when` (a task
//!   after one skipped by its `when` still runs); `Results were missing` when it reads a result
//!   of a task skipped by its `when`;
//! - a `finally` task is skipped with `Results were missing` when a result it reads is missing,
//!   else with `When Expressions evaluated to false`; `$(tasks.<t>.status)` of a skipped task is
//!   `None`, `$(tasks.status)` is `Failed`, `Completed` (some skipped) or `Succeeded`;
//! - a pipeline result whose task did not produce it is left out;
//! - the PipelineRun ends `Failed` when a task failed, else `Completed` when a task was skipped,
//!   else `Succeeded`, with Tekton's message `Tasks Completed: N (Failed: F, Cancelled C), Skipped: S`.

use std::collections::{BTreeMap, BTreeSet};

use anyhow::{anyhow, bail};
use futures::future::BoxFuture;
use serde_json::Value;

use super::pipeline::{TaskOutcome, TaskStatus};
use super::tekton::{list_at, params_of, str_at};

/// Tekton's `WhenExpressionsSkip`.
pub const WHEN_FALSE: &str = "When Expressions evaluated to false";
/// Tekton's `ParentTasksSkip`.
pub const PARENT_SKIPPED: &str = "Parent Tasks were skipped";
/// Tekton's `StoppingSkip`: a DAG task failed, nothing more of the DAG starts.
pub const STOPPING: &str = "PipelineRun was stopping";
/// Tekton's `MissingResultsSkip`.
pub const RESULTS_MISSING: &str = "Results were missing";

/// What a PipelineRun's `$(params.*)` and `$(context.*)` resolve to.
pub struct RunContext<'a> {
    /// The PipelineRun's name.
    pub run: &'a str,
    /// Its namespace.
    pub namespace: &'a str,
    /// Its params, with the Pipeline's defaults.
    pub params: &'a BTreeMap<String, String>,
}

/// The PipelineRun's `Succeeded` condition at its end.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunCondition {
    /// `True` or `False`.
    pub succeeded: bool,
    /// `Succeeded`, `Completed` or `Failed`.
    pub reason: &'static str,
    /// Tekton's count of the tasks.
    pub message: String,
}

/// How a PipelineRun ended: every task in order (ran or skipped), the results, the condition.
#[derive(Clone, Debug)]
pub struct Ended {
    /// Each pipeline task and `finally` task, in the Pipeline's order.
    pub tasks: Vec<(String, TaskOutcome)>,
    /// The pipeline results that resolved.
    pub results: BTreeMap<String, String>,
    /// The final condition.
    pub condition: RunCondition,
}

/// Runs the Pipeline `spec`: each task that Tekton would start goes to `run_task` with its params
/// resolved; `done` hears of each task's end (or skip) as it happens.
pub async fn execute<'s>(
    ctx: &RunContext<'_>,
    spec: &'s Value,
    mut run_task: impl FnMut(
        &'s Value,
        BTreeMap<String, String>,
    ) -> BoxFuture<'s, anyhow::Result<TaskOutcome>>,
    mut done: impl FnMut(&str, &TaskOutcome),
) -> anyhow::Result<Ended> {
    let mut ended: Vec<(String, TaskOutcome)> = Vec::new();
    for (finally, pointer) in [(false, "/tasks"), (true, "/finally")] {
        for task in list_at(spec, pointer) {
            let name = str_at(task, "/name")?;
            let decision = if finally {
                decide_finally(ctx, task, &ended)?
            } else {
                decide_dag(ctx, task, &ended)?
            };
            let outcome = match decision {
                Decision::Skip(reason) => TaskOutcome::skipped(reason),
                Decision::Run(params) => run_task(task, params).await?,
            };
            done(name, &outcome);
            ended.push((name.to_string(), outcome));
        }
    }
    let mut results = BTreeMap::new();
    for r in list_at(spec, "/results") {
        let name = str_at(r, "/name")?;
        if let Resolved::Value(v) = resolve(str_at(r, "/value")?, ctx, &ended)? {
            results.insert(name.to_string(), v);
        }
    }
    let condition = condition(&ended);
    Ok(Ended {
        tasks: ended,
        results,
        condition,
    })
}

/// Run a task with these params, or skip it for this reason.
#[derive(Debug, PartialEq)]
enum Decision {
    Run(BTreeMap<String, String>),
    Skip(&'static str),
}

fn outcome_of<'a>(ended: &'a [(String, TaskOutcome)], task: &str) -> Option<&'a TaskOutcome> {
    ended.iter().find(|(t, _)| t == task).map(|(_, o)| o)
}

fn decide_dag(
    ctx: &RunContext<'_>,
    task: &Value,
    ended: &[(String, TaskOutcome)],
) -> anyhow::Result<Decision> {
    if ended.iter().any(|(_, o)| o.status == TaskStatus::Failed) {
        return Ok(Decision::Skip(STOPPING));
    }
    let when = when_holds(ctx, task, ended)?;
    if when == Some(false) {
        return Ok(Decision::Skip(WHEN_FALSE));
    }
    let parents = parents_of(task);
    let skipped = |reason: &dyn Fn(&str) -> bool| {
        parents.iter().any(|p| {
            outcome_of(ended, p)
                .is_some_and(|o| o.status == TaskStatus::None && reason(o.reason.as_str()))
        })
    };
    if skipped(&|r| r != WHEN_FALSE) {
        return Ok(Decision::Skip(PARENT_SKIPPED));
    }
    match (when, resolve_params(ctx, task, ended)?) {
        (Some(true), Some(params)) => Ok(Decision::Run(params)),
        _ if skipped(&|r| r == WHEN_FALSE) => Ok(Decision::Skip(RESULTS_MISSING)),
        _ => bail!(
            "task {}: a result it reads is missing from a task that ran (Tekton fails the \
             PipelineRun: InvalidTaskResultReference)",
            str_at(task, "/name")?
        ),
    }
}

fn decide_finally(
    ctx: &RunContext<'_>,
    task: &Value,
    ended: &[(String, TaskOutcome)],
) -> anyhow::Result<Decision> {
    let (Some(when), Some(params)) = (
        when_holds(ctx, task, ended)?,
        resolve_params(ctx, task, ended)?,
    ) else {
        return Ok(Decision::Skip(RESULTS_MISSING));
    };
    Ok(if when {
        Decision::Run(params)
    } else {
        Decision::Skip(WHEN_FALSE)
    })
}

/// Whether every `when` holds; None when an input reads a missing result.
fn when_holds(
    ctx: &RunContext<'_>,
    task: &Value,
    ended: &[(String, TaskOutcome)],
) -> anyhow::Result<Option<bool>> {
    let name = str_at(task, "/name")?;
    for w in list_at(task, "/when") {
        let Resolved::Value(input) = resolve(str_at(w, "/input")?, ctx, ended)? else {
            return Ok(None);
        };
        let values: Vec<&str> = list_at(w, "/values")
            .iter()
            .filter_map(Value::as_str)
            .collect();
        let holds = match str_at(w, "/operator")? {
            "in" => values.contains(&input.as_str()),
            "notin" => !values.contains(&input.as_str()),
            other => bail!("task {name}: unknown when operator {other:?}"),
        };
        if !holds {
            return Ok(Some(false));
        }
    }
    Ok(Some(true))
}

/// The task's params resolved; None when one reads a missing result.
fn resolve_params(
    ctx: &RunContext<'_>,
    task: &Value,
    ended: &[(String, TaskOutcome)],
) -> anyhow::Result<Option<BTreeMap<String, String>>> {
    let mut resolved = BTreeMap::new();
    for (name, value) in params_of(list_at(task, "/params"))? {
        match resolve(&value, ctx, ended)? {
            Resolved::Value(v) => resolved.insert(name, v),
            Resolved::Missing => return Ok(None),
        };
    }
    Ok(Some(resolved))
}

/// The tasks a task depends on: its `runAfter` and every task whose result it reads.
fn parents_of(task: &Value) -> BTreeSet<String> {
    let mut parents: BTreeSet<String> = list_at(task, "/runAfter")
        .iter()
        .filter_map(Value::as_str)
        .map(str::to_string)
        .collect();
    let texts = list_at(task, "/params")
        .iter()
        .filter_map(|p| p.get("value").and_then(Value::as_str))
        .chain(
            list_at(task, "/when")
                .iter()
                .filter_map(|w| w.get("input").and_then(Value::as_str)),
        );
    for text in texts {
        for expr in expressions(text) {
            if let Some((t, "results", _)) = split_task_ref(expr, "tasks.") {
                parents.insert(t.to_string());
            }
        }
    }
    parents
}

/// `$(...)` resolved, or a result reference that has nothing to read.
#[derive(Debug, PartialEq)]
enum Resolved {
    Value(String),
    Missing,
}

/// Replaces every `$(expr)` of `text`. An expression that names nothing known is an error, as
/// Tekton's validation makes it one; a result of a task that produced none is [`Resolved::Missing`].
fn resolve(
    text: &str,
    ctx: &RunContext<'_>,
    ended: &[(String, TaskOutcome)],
) -> anyhow::Result<Resolved> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("$(") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let end = after
            .find(')')
            .ok_or_else(|| anyhow!("unterminated $( in {text:?}"))?;
        let expr = after[..end].trim();
        match lookup(expr, ctx, ended) {
            Some(Resolved::Value(v)) => out.push_str(&v),
            Some(Resolved::Missing) => return Ok(Resolved::Missing),
            None => bail!("$({expr}) in {text:?} names nothing known"),
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(Resolved::Value(out))
}

fn lookup(expr: &str, ctx: &RunContext<'_>, ended: &[(String, TaskOutcome)]) -> Option<Resolved> {
    if let Some(p) = expr.strip_prefix("params.") {
        return ctx.params.get(p).cloned().map(Resolved::Value);
    }
    let value = match expr {
        "context.pipelineRun.name" => Some(ctx.run.to_string()),
        "context.pipelineRun.namespace" => Some(ctx.namespace.to_string()),
        "tasks.status" => Some(aggregate_status(ended).to_string()),
        _ => None,
    };
    if let Some(v) = value {
        return Some(Resolved::Value(v));
    }
    lookup_results(expr, ended)
}

/// `tasks.<t>.status`, `tasks.<t>.results.<r>` and `finally.<t>.results.<r>`.
fn lookup_results(expr: &str, ended: &[(String, TaskOutcome)]) -> Option<Resolved> {
    let (task, what, result) =
        split_task_ref(expr, "tasks.").or_else(|| split_task_ref(expr, "finally."))?;
    let outcome = outcome_of(ended, task);
    if what == "status" {
        let status = outcome.map_or(TaskStatus::None, |o| o.status);
        return Some(Resolved::Value(status.as_str().to_string()));
    }
    Some(
        match outcome
            .filter(|o| o.status != TaskStatus::None)
            .and_then(|o| o.results.get(result?))
        {
            Some(v) => Resolved::Value(v.clone()),
            None => Resolved::Missing,
        },
    )
}

/// `<prefix><task>.status` or `<prefix><task>.results.<name>`: (task, `status`|`results`, name).
fn split_task_ref<'a>(expr: &'a str, prefix: &str) -> Option<(&'a str, &'a str, Option<&'a str>)> {
    let (task, what) = expr.strip_prefix(prefix)?.split_once('.')?;
    match what.split_once('.') {
        Some(("results", name)) => Some((task, "results", Some(name))),
        None if what == "status" => Some((task, "status", None)),
        _ => None,
    }
}

/// Every `$(...)` expression of `text`.
fn expressions(text: &str) -> impl Iterator<Item = &str> {
    text.split("$(")
        .skip(1)
        .filter_map(|s| s.split_once(')').map(|(e, _)| e.trim()))
}

/// `$(tasks.status)`: the DAG tasks' aggregate, as `finally` reads it.
fn aggregate_status(ended: &[(String, TaskOutcome)]) -> &'static str {
    if ended.iter().any(|(_, o)| o.status == TaskStatus::Failed) {
        "Failed"
    } else if ended.iter().any(|(_, o)| o.status == TaskStatus::None) {
        "Completed"
    } else {
        "Succeeded"
    }
}

/// The PipelineRun's condition once every task ran or was skipped.
pub fn condition(ended: &[(String, TaskOutcome)]) -> RunCondition {
    let count = |s: TaskStatus| ended.iter().filter(|(_, o)| o.status == s).count();
    let (succeeded, failed, skipped) = (
        count(TaskStatus::Succeeded),
        count(TaskStatus::Failed),
        count(TaskStatus::None),
    );
    let (ok, reason) = if failed > 0 {
        (false, "Failed")
    } else if skipped > 0 {
        (true, "Completed")
    } else {
        (true, "Succeeded")
    };
    RunCondition {
        succeeded: ok,
        reason,
        message: format!(
            "Tasks Completed: {} (Failed: {failed}, Cancelled 0), Skipped: {skipped}",
            succeeded + failed
        ),
    }
}

#[cfg(test)]
mod tests;
