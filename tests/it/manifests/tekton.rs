//! Tekton Pipelines: a Pipeline's `$(params...)`, `$(tasks...)` and `$(finally...)` name what it
//! declares, a task reference passes exactly the params the Task takes, and the results a task
//! reads are ones the referenced Task (or, for the custom task, the controller) reports. The
//! custom task's references and params are [`super::custom_task`]'s.

use std::collections::BTreeSet;

use serde_json::Value;

use super::check::{Checker, list};
use super::custom_task::CUSTOM_GROUP;
use super::model::{Doc, at, duplicates, items, names_of, param_ref, variables};

fn is_custom(r: &Value) -> bool {
    r["apiVersion"].as_str().is_some_and(|v| !v.is_empty())
        && r["kind"].as_str().is_some_and(|k| !k.is_empty())
}

impl Checker<'_> {
    /// The results of the task a pipeline task runs, when known.
    fn task_results(&self, task: &Value) -> Option<BTreeSet<String>> {
        let (r, ts) = (&task["taskRef"], &task["taskSpec"]);
        let custom = |v: &Value| {
            v["apiVersion"]
                .as_str()
                .is_some_and(|a| a.starts_with(CUSTOM_GROUP))
                .then(|| self.code.results.clone())
        };
        if r.is_object() {
            if is_custom(r) {
                return custom(r);
            }
            if r.get("resolver").is_some() {
                return None;
            }
            let kind = r["kind"].as_str().unwrap_or("Task");
            let t = self.find(kind, r["name"].as_str().unwrap_or_default(), None)?;
            return Some(names_of(&t.spec()["results"]).into_iter().collect());
        }
        if ts.is_object() {
            if is_custom(ts) {
                return custom(ts);
            }
            return Some(names_of(&ts["results"]).into_iter().collect());
        }
        None
    }

    /// A Pipeline spec (of a Pipeline, or a PipelineRun's `pipelineSpec`) at `base`.
    pub fn pipeline(&mut self, doc: &Doc, spec: &Value, base: &str) {
        let declared = names_of(&spec["params"]);
        for n in duplicates(&declared) {
            self.r.error(
                doc,
                &at(base, "params"),
                format!("param '{n}' is declared twice"),
            );
        }
        self.param_types(doc, &spec["params"], &at(base, "params"));
        let tnames = names_of(&spec["tasks"]);
        let fnames = names_of(&spec["finally"]);
        let all: Vec<String> = tnames.iter().chain(&fnames).cloned().collect();
        for n in duplicates(&all) {
            self.r
                .error(doc, base, format!("pipeline task name '{n}' is used twice"));
        }
        let scope = Scope {
            declared: &declared,
            tasks: &tnames,
            finally: &fnames,
            spec,
        };
        for section in ["tasks", "finally"] {
            for (i, task) in items(&spec[section]).iter().enumerate() {
                if task.is_object() {
                    let tpath = format!("{base}.{section}[{i}]");
                    self.pipeline_task(doc, &scope, section, task, &tpath);
                }
            }
        }
        for (i, res) in items(&spec["results"]).iter().enumerate() {
            for (p, expr) in variables(res, &format!("{base}.results[{i}]"), &|_| false) {
                self.pipeline_var(doc, &scope, &expr, &p, "results");
            }
        }
    }

    fn pipeline_task(&mut self, doc: &Doc, s: &Scope, section: &str, task: &Value, tpath: &str) {
        for (j, ra) in items(&task["runAfter"]).iter().enumerate() {
            let ra = ra.as_str().unwrap_or_default();
            let p = format!("{tpath}.runAfter[{j}]");
            if section == "finally" {
                self.r.error(
                    doc,
                    &at(tpath, "runAfter"),
                    "finally tasks cannot have runAfter",
                );
            } else if !s.tasks.iter().any(|t| t == ra) {
                let msg = format!(
                    "runAfter names '{ra}', which is not a task in spec.tasks ({})",
                    list(s.tasks)
                );
                self.r.error(doc, &p, msg);
            } else if task["name"] == ra {
                self.r.error(doc, &p, "a task cannot run after itself");
            }
        }
        let (r, ts) = (&task["taskRef"], &task["taskSpec"]);
        let inline_task = ts.is_object() && !is_custom(ts);
        let spec_path = at(tpath, "taskSpec");
        for (p, expr) in variables(task, tpath, &|p| inline_task && p == spec_path) {
            self.pipeline_var(doc, s, &expr, &p, section);
        }
        let passed = &task["params"];
        let ppath = at(tpath, "params");
        for n in duplicates(&names_of(passed)) {
            self.r
                .error(doc, &ppath, format!("param '{n}' is passed twice"));
        }
        if is_custom(r) {
            let name = r["name"].as_str().filter(|n| !n.is_empty());
            self.custom_task(
                doc,
                &at(tpath, "taskRef"),
                r,
                name,
                passed,
                &ppath,
                &Value::Null,
            );
        } else if is_custom(ts) {
            self.custom_task(doc, &spec_path, ts, None, passed, &ppath, &ts["spec"]);
        } else if r.is_object() {
            if r.get("resolver").is_some() {
                return;
            }
            let kind = r["kind"].as_str().unwrap_or("Task");
            let name = r["name"].as_str().unwrap_or_default();
            match self.find(kind, name, None) {
                None => {
                    let msg = format!("{kind} '{name}' is not defined in the manifests");
                    self.r.error(doc, &at(tpath, "taskRef"), msg);
                }
                Some(t) => {
                    let target = format!("{kind} '{name}' ({})", t.file);
                    self.passed_params(doc, &ppath, passed, &t.spec()["params"], &target);
                }
            }
        } else if inline_task {
            self.passed_params(doc, &ppath, passed, &ts["params"], "the inline taskSpec");
            self.task(doc, ts, &spec_path);
        } else {
            self.r
                .error(doc, tpath, "a pipeline task needs a taskRef or a taskSpec");
        }
    }

    /// One `$(...)` of a Pipeline, used in `section` (tasks, finally or results).
    fn pipeline_var(&mut self, doc: &Doc, s: &Scope, expr: &str, path: &str, section: &str) {
        if expr.starts_with("params") {
            match param_ref(expr, "params") {
                None => {
                    let msg = format!("$({expr}) is not a param reference Tekton understands");
                    self.r.error(doc, path, msg);
                }
                Some(n) if !s.declared.contains(&n) => {
                    let msg = format!(
                        "$({expr}) names param '{n}', which the Pipeline does not declare (it has {})",
                        list(s.declared)
                    );
                    self.r.error(doc, path, msg);
                }
                Some(_) => {}
            }
            return;
        }
        for (scope, allowed) in [("tasks", s.tasks), ("finally", s.finally)] {
            let Some(rest) = expr.strip_prefix(&format!("{scope}.")) else {
                continue;
            };
            if expr == "tasks.status" || expr == "tasks.reason" {
                if section != "finally" {
                    let msg = format!("$({expr}) is only available in finally tasks");
                    self.r.error(doc, path, msg);
                }
                return;
            }
            if scope == "finally" && section != "results" {
                let msg = format!("$({expr}) is only available in the Pipeline's results");
                self.r.error(doc, path, msg);
            }
            let parts: Vec<&str> = rest.split('.').collect();
            if !allowed.iter().any(|t| t == parts[0]) {
                let what = if scope == "tasks" {
                    "task"
                } else {
                    "finally task"
                };
                let msg = format!(
                    "$({expr}) names {what} '{}', which is not in spec.{scope} ({})",
                    parts[0],
                    list(allowed)
                );
                self.r.error(doc, path, msg);
                return;
            }
            if parts.len() >= 2
                && ["status", "reason"].contains(&parts[1])
                && scope == "tasks"
                && section != "finally"
            {
                let msg = format!("$({expr}): a task's status is only available in finally tasks");
                self.r.error(doc, path, msg);
            }
            if parts.len() >= 3 && parts[1] == "results" {
                let result = parts[2].split('[').next().unwrap_or_default();
                let task = s.task(parts[0]);
                // Tekton skips a finally task whose params read a result that is missing
                // ("Results were missing"), as it is when its task's `when` skipped it.
                if section == "finally"
                    && scope == "tasks"
                    && task.is_some_and(|t| !items(&t["when"]).is_empty())
                {
                    let msg = format!(
                        "$({expr}): task '{}' has `when` expressions, and when they skip it Tekton \
                         skips this finally task too (Results were missing)",
                        parts[0]
                    );
                    self.r.error(doc, path, msg);
                }
                if let Some(known) = task.and_then(|t| self.task_results(t))
                    && !known.contains(result)
                {
                    let msg = format!(
                        "$({expr}): task '{}' has no result '{result}' (it has {})",
                        parts[0],
                        list(&known)
                    );
                    self.r.error(doc, path, msg);
                }
            }
            return;
        }
    }

    /// The params a reference passes against the params its target declares.
    fn passed_params(
        &mut self,
        doc: &Doc,
        path: &str,
        passed: &Value,
        declared: &Value,
        target: &str,
    ) {
        let (passed_names, declared_names) = (names_of(passed), names_of(declared));
        for n in &passed_names {
            if !declared_names.contains(n) {
                let msg = format!(
                    "param '{n}' is not a param of {target} (it has {})",
                    list(&declared_names)
                );
                self.r.error(doc, path, msg);
            }
        }
        for item in items(declared) {
            let name = item["name"].as_str().unwrap_or_default();
            if item.get("default").is_none() && !passed_names.iter().any(|n| n == name) {
                let msg = format!("param '{name}' of {target} has no default and is not passed");
                self.r.error(doc, path, msg);
            }
        }
    }

    /// Tekton's webhook accepts only these ParamTypes (the CRD does not enumerate them).
    fn param_types(&mut self, doc: &Doc, params: &Value, path: &str) {
        for (i, p) in items(params).iter().enumerate() {
            let t = p["type"].as_str().unwrap_or("string");
            if !["string", "array", "object"].contains(&t) {
                let msg = format!("'{t}' is not one of ['string', 'array', 'object']");
                self.r.error(doc, &format!("{path}[{i}].type"), msg);
            }
        }
    }

    /// A Task spec at `base`: its `$(params...)` and `$(results...)` name what it declares.
    pub fn task(&mut self, doc: &Doc, spec: &Value, base: &str) {
        let declared = names_of(&spec["params"]);
        let results = names_of(&spec["results"]);
        for n in duplicates(&declared) {
            self.r.error(
                doc,
                &at(base, "params"),
                format!("param '{n}' is declared twice"),
            );
        }
        self.param_types(doc, &spec["params"], &at(base, "params"));
        for (p, expr) in variables(spec, base, &|_| false) {
            if expr.starts_with("params") {
                let name = param_ref(&expr, "params").unwrap_or_default();
                if !declared.contains(&name) {
                    let msg = format!(
                        "$({expr}) names param '{name}', which the Task does not declare (it has {})",
                        list(&declared)
                    );
                    self.r.error(doc, &p, msg);
                }
            } else if let Some(rest) = expr.strip_prefix("results.") {
                let name = rest.split('.').next().unwrap_or_default();
                if !results.iter().any(|r| r == name) {
                    let msg = format!(
                        "$({expr}) names result '{name}', which the Task does not declare (it has {})",
                        list(&results)
                    );
                    self.r.error(doc, &p, msg);
                }
            }
        }
    }

    /// A PipelineRun (or a TriggerTemplate's resource template) at `base`.
    pub fn pipelinerun(&mut self, doc: &Doc, obj: &Value, base: &str) {
        let spec = &obj["spec"];
        // Its CustomRuns carry this account, which the controller asks may promote.
        if let Some(sa) = spec["taskRunTemplate"]["serviceAccountName"].as_str() {
            let ns = self.ns(doc).map(str::to_string);
            if self.find("ServiceAccount", sa, ns.as_deref()).is_none() {
                let msg = format!("ServiceAccount '{sa}' is not defined in the manifests");
                let path = at(base, "spec.taskRunTemplate.serviceAccountName");
                self.r.error(doc, &path, msg);
            }
        }
        let passed = &spec["params"];
        let ppath = at(base, "spec.params");
        for n in duplicates(&names_of(passed)) {
            self.r
                .error(doc, &ppath, format!("param '{n}' is passed twice"));
        }
        let (r, pspec) = (&spec["pipelineRef"], &spec["pipelineSpec"]);
        if r.is_object() && r.get("resolver").is_none() {
            let name = r["name"].as_str().unwrap_or_default();
            match self.find("Pipeline", name, None) {
                None => {
                    let msg = format!("Pipeline '{name}' is not defined in the manifests");
                    self.r.error(doc, &at(base, "spec.pipelineRef.name"), msg);
                }
                Some(t) => {
                    let target = format!("Pipeline '{name}' ({})", t.file);
                    self.passed_params(doc, &ppath, passed, &t.spec()["params"], &target);
                }
            }
        } else if pspec.is_object() {
            self.pipeline(doc, pspec, &at(base, "spec.pipelineSpec"));
            self.passed_params(doc, &ppath, passed, &pspec["params"], "its pipelineSpec");
        } else if !r.is_object() {
            let msg = "a PipelineRun needs a pipelineRef or a pipelineSpec";
            self.r.error(doc, &at(base, "spec"), msg);
        }
    }
}

/// What a Pipeline declares, for its `$(...)` references.
struct Scope<'s> {
    declared: &'s [String],
    tasks: &'s [String],
    finally: &'s [String],
    spec: &'s Value,
}

impl Scope<'_> {
    fn task(&self, name: &str) -> Option<&Value> {
        ["tasks", "finally"]
            .iter()
            .flat_map(|s| items(&self.spec[*s]))
            .find(|t| t["name"] == name)
    }
}
