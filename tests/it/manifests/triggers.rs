//! Tekton Triggers: the EventListener's CEL filter matches headers the source sends with values it
//! sends, every trigger runs the imagegate interceptor and its bindings read only what that
//! interceptor passed on (never the sender's body or headers), the bindings and the
//! TriggerTemplate agree on params, and the template's PipelineRun passes what the Pipeline takes.
//! The headers are the ones the source's own encoder writes in binary mode.

use std::collections::{BTreeMap, BTreeSet};

use cel::common::ast::Expr as CelExpr;
use serde_json::Value;

use super::check::{Checker, list};
use super::model::{Doc, at, duplicates, items, names_of, param_ref, refs, variables};

/// The ClusterInterceptor every trigger that starts PipelineRuns must run (config/triggers/).
const INTERCEPTOR: &str = "imagegate";
/// The fields it passes on under `extensions.imagegate` (src/interceptor/judge.rs).
const INTERCEPTOR_FIELDS: [&str; 6] = [
    "namespace",
    "imageStream",
    "tag",
    "digest",
    "runId",
    "eventId",
];

/// A binding param to check in the context of the trigger that uses it.
struct Bound<'a> {
    doc: &'a Doc,
    path: String,
    value: &'a Value,
}

impl<'a> Checker<'a> {
    pub fn trigger_template(&mut self, doc: &Doc) {
        let spec = doc.spec();
        let declared = names_of(&spec["params"]);
        for n in duplicates(&declared) {
            self.r
                .error(doc, "spec.params", format!("param '{n}' is declared twice"));
        }
        let mut used = BTreeSet::new();
        for (i, rt) in items(&spec["resourcetemplates"]).iter().enumerate() {
            let base = format!("spec.resourcetemplates[{i}]");
            for (p, expr) in variables(rt, &base, &|_| false) {
                if !expr.starts_with("tt.params") {
                    continue;
                }
                let name = param_ref(&expr, "tt.params").unwrap_or_default();
                if !declared.contains(&name) {
                    let msg = format!(
                        "$({expr}) names '{name}', which is not a param of this TriggerTemplate ({})",
                        list(&declared)
                    );
                    self.r.error(doc, &p, msg);
                }
                used.insert(name);
            }
            if rt["kind"] == "PipelineRun" {
                self.pipelinerun(doc, rt, &base);
            }
        }
        for n in declared.iter().filter(|n| !used.contains(*n)) {
            let msg = format!("param '{n}' is declared but never used in resourcetemplates");
            self.r.warn(doc, "spec.params", msg);
        }
    }

    pub fn trigger_binding(&mut self, doc: &Doc) {
        for (i, p) in items(&doc.spec()["params"]).iter().enumerate() {
            let path = format!("spec.params[{i}].value");
            for (p, expr) in variables(&p["value"], &path, &|_| false) {
                self.binding_variable(doc, &p, &expr, None, None, false);
            }
        }
    }

    /// One `$(...)` of a binding. `accepted` (the event types the trigger's CEL filter lets
    /// through) and `overlays` (its CEL overlay keys) come from the EventListener trigger that
    /// uses the binding; `in_listener`: only the checks that need them.
    fn binding_variable(
        &mut self,
        doc: &Doc,
        path: &str,
        expr: &str,
        accepted: Option<&BTreeSet<String>>,
        overlays: Option<&BTreeSet<String>>,
        in_listener: bool,
    ) {
        let is_body = expr == "body" || expr.starts_with("body.") || expr.starts_with("body[");
        if in_listener && !is_body && !expr.starts_with("extensions") {
            return;
        }
        if let Some(header) = expr.strip_prefix("header.") {
            let header = header.split('.').next().unwrap_or_default().to_lowercase();
            if let Some(attr) = header.strip_prefix("ce-")
                && !self.code.binary_headers.contains(attr)
            {
                let msg = format!(
                    "$({expr}): the source sends no ce-{attr} header in binary mode; it sends ce-{{{}}}",
                    self.binary_headers()
                );
                self.r.error(doc, path, msg);
            }
        } else if is_body {
            if let Some(accepted) = accepted {
                self.body_path(doc, path, expr, accepted);
            }
        } else if let Some(key) = expr.strip_prefix("extensions.") {
            let key = key.split('.').next().unwrap_or_default();
            if overlays.is_some_and(|o| !o.contains(key)) {
                let msg =
                    format!("$({expr}): no CEL overlay of the EventListener trigger sets '{key}'");
                self.r.error(doc, path, msg);
            }
        } else if expr.starts_with("context.") {
            if !["context.eventID", "context.eventURL", "context.triggerID"].contains(&expr) {
                let msg = format!("$({expr}) is not a Tekton Triggers context variable");
                self.r.error(doc, path, msg);
            }
        } else {
            let msg = format!(
                "$({expr}) is not a TriggerBinding variable (body, header, extensions, context)"
            );
            self.r.error(doc, path, msg);
        }
    }

    /// A binding of a trigger that starts PipelineRuns reads what the imagegate interceptor
    /// passed on (read from the API), never the sender's body or headers, and only the fields it
    /// sets.
    fn believes_nothing(&mut self, doc: &Doc, path: &str, expr: &str) {
        let msg = if expr == "body"
            || expr.starts_with("body.")
            || expr.starts_with("body[")
            || expr.starts_with("header.")
        {
            format!(
                "$({expr}) binds what the sender says; bind $(extensions.{INTERCEPTOR}.<field>), \
                 what the imagegate interceptor read from the API ({})",
                INTERCEPTOR_FIELDS.join(", ")
            )
        } else if let Some(field) = expr.strip_prefix(&format!("extensions.{INTERCEPTOR}.")) {
            if INTERCEPTOR_FIELDS.contains(&field) {
                return;
            }
            format!(
                "$({expr}): the imagegate interceptor sets no '{field}' (it sets {})",
                INTERCEPTOR_FIELDS.join(", ")
            )
        } else {
            return;
        };
        self.r.error(doc, path, msg);
    }

    fn binary_headers(&self) -> String {
        self.code
            .binary_headers
            .iter()
            .cloned()
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// `$(body...)` against the data schema of each event type the trigger accepts.
    fn body_path(&mut self, doc: &Doc, path: &str, expr: &str, accepted: &BTreeSet<String>) {
        let parts = body_parts(expr);
        for t in accepted {
            let Some(published) = self.code.published.get(t) else {
                let msg = format!("$({expr}): event type {t} has no published data schema");
                self.r.error(doc, path, msg);
                continue;
            };
            let file = &published.schema_file;
            let Some(schema) = self.code.schemas.get(file) else {
                let msg = format!("$({expr}): schemas/{file} (the data of {t}) does not exist");
                self.r.error(doc, path, msg);
                continue;
            };
            match schema_property(schema, &parts) {
                None => {
                    let props = schema["properties"].as_object();
                    let msg = format!(
                        "$({expr}): schemas/{file} (the data of {t}) has no property '{}' (it has {})",
                        parts.join("."),
                        list(props.into_iter().flat_map(|p| p.keys()))
                    );
                    self.r.error(doc, path, msg);
                }
                Some(true) => self.r.warn(
                    doc,
                    path,
                    format!("$({expr}) may be null in {t} (schemas/{file})"),
                ),
                Some(false) => {}
            }
        }
    }

    pub fn event_listener(&mut self, doc: &'a Doc) {
        let spec = doc.spec();
        let ns = self.ns(doc).map(str::to_string);
        if let Some(sa) = spec["serviceAccountName"].as_str()
            && self.find("ServiceAccount", sa, ns.as_deref()).is_none()
        {
            let msg = format!("ServiceAccount '{sa}' is not defined in the manifests");
            self.r.error(doc, "spec.serviceAccountName", msg);
        }
        for (i, trig) in items(&spec["triggers"]).iter().enumerate() {
            if trig.is_object() {
                self.listener_trigger(doc, trig, &format!("spec.triggers[{i}]"), ns.as_deref());
            }
        }
    }

    fn listener_trigger(&mut self, doc: &'a Doc, trig: &'a Value, tpath: &str, ns: Option<&str>) {
        if let Some(r) = trig["triggerRef"].as_str() {
            if self.find("Trigger", r, None).is_none() {
                let msg = format!("Trigger '{r}' is not defined in the manifests");
                self.r.error(doc, &at(tpath, "triggerRef"), msg);
            }
            return;
        }
        let mut overlays = BTreeSet::new();
        let mut pinned: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (j, ic) in items(&trig["interceptors"]).iter().enumerate() {
            if ic["ref"]["name"] != "cel" {
                continue;
            }
            for (k, p) in items(&ic["params"]).iter().enumerate() {
                let ppath = format!("{tpath}.interceptors[{j}].params[{k}].value");
                match (p["name"].as_str(), &p["value"]) {
                    (Some("filter"), Value::String(filter)) => match cel_header_filters(filter) {
                        Ok(pins) => {
                            for (header, value) in pins {
                                self.cel_header(doc, &ppath, &header, &value);
                                pinned.entry(header).or_default().push(value);
                            }
                        }
                        Err(why) => {
                            let msg = format!("the CEL filter does not parse: {why}");
                            self.r.error(doc, &ppath, msg);
                        }
                    },
                    (Some("overlays"), Value::Array(list)) => overlays.extend(
                        list.iter()
                            .filter_map(|o| o["key"].as_str().map(str::to_string)),
                    ),
                    _ => {}
                }
            }
        }
        let judged = items(&trig["interceptors"]).iter().any(|ic| {
            ic["ref"]["name"] == INTERCEPTOR && ic["ref"]["kind"] == "ClusterInterceptor"
        });
        if judged {
            overlays.insert(INTERCEPTOR.to_string());
        } else {
            let msg = format!(
                "the trigger does not run ClusterInterceptor '{INTERCEPTOR}', so what a sender \
                 claims starts PipelineRuns (add {{ref: {{name: {INTERCEPTOR}, kind: \
                 ClusterInterceptor}}}} to its interceptors)"
            );
            self.r.error(doc, &at(tpath, "interceptors"), msg);
        }
        let accepted: Option<BTreeSet<String>> = pinned
            .get("ce-type")
            .map(|types| types.iter().cloned().collect());
        let (bound, binding_params) = self.bindings(doc, trig, tpath, ns);
        for n in duplicates(&bound) {
            self.r.error(
                doc,
                &at(tpath, "bindings"),
                format!("param '{n}' is bound twice"),
            );
        }
        let uses_body = binding_params
            .iter()
            .any(|b| b.value.as_str().is_some_and(|v| v.contains("$(body")));
        if uses_body && accepted.is_none() {
            let msg = "the bindings read $(body...), but no CEL filter pins ce-type, so the body's \
                       shape is unknown (add header.match('ce-type', '<type>') to the filter)";
            self.r.error(doc, tpath, msg);
        }
        for b in &binding_params {
            for (p, expr) in variables(b.value, &b.path, &|_| false) {
                self.believes_nothing(b.doc, &p, &expr);
                let in_listener = !std::ptr::eq(b.doc, doc);
                self.binding_variable(
                    b.doc,
                    &p,
                    &expr,
                    accepted.as_ref(),
                    Some(&overlays),
                    in_listener,
                );
            }
        }
        self.template_params(doc, trig, tpath, ns, &bound);
    }

    /// The params the trigger's bindings set, and each with where it is written.
    fn bindings(
        &mut self,
        doc: &'a Doc,
        trig: &'a Value,
        tpath: &str,
        ns: Option<&str>,
    ) -> (Vec<String>, Vec<Bound<'a>>) {
        let (mut bound, mut params) = (Vec::new(), Vec::new());
        for (j, b) in items(&trig["bindings"]).iter().enumerate() {
            if let Some(r) = b["ref"].as_str() {
                let kind = b["kind"].as_str().unwrap_or("TriggerBinding");
                let target_ns = if kind == "TriggerBinding" { ns } else { None };
                let Some(target) = self.find(kind, r, target_ns) else {
                    let msg = format!("{kind} '{r}' is not defined in the manifests");
                    self.r
                        .error(doc, &format!("{tpath}.bindings[{j}].ref"), msg);
                    continue;
                };
                self.used_bindings.insert(target.name().to_string());
                for (i, p) in items(&target.spec()["params"]).iter().enumerate() {
                    bound.push(p["name"].as_str().unwrap_or_default().to_string());
                    let path = format!("spec.params[{i}].value");
                    params.push(Bound {
                        doc: target,
                        path,
                        value: &p["value"],
                    });
                }
            } else if let Some(name) = b["name"].as_str() {
                bound.push(name.to_string());
                let path = format!("{tpath}.bindings[{j}].value");
                params.push(Bound {
                    doc,
                    path,
                    value: &b["value"],
                });
            }
        }
        (bound, params)
    }

    /// The trigger's bindings set exactly the params its TriggerTemplate takes.
    fn template_params(
        &mut self,
        doc: &Doc,
        trig: &Value,
        tpath: &str,
        ns: Option<&str>,
        bound: &[String],
    ) {
        let template = &trig["template"];
        let tt_params = if let Some(r) = template["ref"].as_str() {
            match self.find("TriggerTemplate", r, ns) {
                Some(t) => &t.spec()["params"],
                None => {
                    let msg = format!("TriggerTemplate '{r}' is not defined in the manifests");
                    self.r.error(doc, &format!("{tpath}.template.ref"), msg);
                    return;
                }
            }
        } else if template["spec"].is_object() {
            &template["spec"]["params"]
        } else {
            self.r.error(
                doc,
                &at(tpath, "template"),
                "a trigger needs a template (ref or spec)",
            );
            return;
        };
        let declared = names_of(tt_params);
        let bpath = at(tpath, "bindings");
        for n in bound.iter().filter(|n| !declared.contains(*n)) {
            let msg = format!(
                "binding param '{n}' is not a param of the TriggerTemplate ({})",
                list(&declared)
            );
            self.r.error(doc, &bpath, msg);
        }
        for p in items(tt_params) {
            let name = p["name"].as_str().unwrap_or_default();
            if p.get("default").is_none() && !bound.iter().any(|b| b == name) {
                let msg =
                    format!("TriggerTemplate param '{name}' has no default and no binding sets it");
                self.r.error(doc, &bpath, msg);
            }
        }
    }

    /// A header a CEL filter pins: one the source sends, with a value it sends.
    fn cel_header(&mut self, doc: &Doc, path: &str, header: &str, value: &str) {
        let Some(attr) = header.strip_prefix("ce-") else {
            return;
        };
        let msg = if !self.code.binary_headers.contains(attr) {
            format!(
                "the CEL filter matches header '{header}', which the source never sends (binary mode: ce-{{{}}})",
                self.binary_headers()
            )
        } else if attr == "type" && !self.code.event_types.contains(value) {
            format!(
                "the CEL filter accepts ce-type '{value}', a type the source never emits ({})",
                list(&self.code.event_types)
            )
        } else if attr == "specversion" && value != "1.0" {
            format!("the CEL filter wants ce-specversion '{value}'; the source sends 1.0")
        } else if attr == "imagetag" && !self.candidate_tags().contains(value) {
            format!(
                "the CEL filter accepts ce-imagetag '{value}', but the candidate tag is {} (the \
                 ImagePromotion's candidateTag, or '{}')",
                list(self.candidate_tags()),
                self.code.default_candidate_tag
            )
        } else {
            return;
        };
        self.r.error(doc, path, msg);
    }

    /// The values an EventListener's CEL filters accept for `header` (empty: not pinned).
    pub fn cel_pinned(&self, el: &Doc, header: &str) -> BTreeSet<String> {
        let mut out = BTreeSet::new();
        for trig in items(&el.spec()["triggers"]) {
            for ic in items(&trig["interceptors"]) {
                for p in items(&ic["params"]) {
                    if let (Some("filter"), Some(f)) = (p["name"].as_str(), p["value"].as_str()) {
                        out.extend(
                            cel_header_filters(f)
                                .unwrap_or_default()
                                .into_iter()
                                .filter(|(h, _)| h == header)
                                .map(|(_, v)| v),
                        );
                    }
                }
            }
        }
        out
    }
}

/// The `(header, value)` pairs a CEL filter pins with `header.match('h', 'v')` or
/// `header.canonical('h') == 'v'` (header names lowercased), read from its syntax tree (the `cel`
/// crate's parser, of the language Triggers' CEL interceptor evaluates); a filter that does not
/// parse is an error, as Triggers would refuse every event with it.
pub fn cel_header_filters(expression: &str) -> Result<Vec<(String, String)>, String> {
    let tree = cel::parser::Parser::new()
        .parse(expression)
        .map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    pins(&tree.expr, &mut out);
    Ok(out)
}

/// Walks `expr` for the header pins of [`cel_header_filters`].
fn pins(expr: &CelExpr, out: &mut Vec<(String, String)>) {
    let CelExpr::Call(call) = expr else {
        return;
    };
    if let (true, [h, v]) = (on_header(call, "match"), &call.args[..])
        && let (Some(h), Some(v)) = (string(h), string(v))
    {
        out.push((h.to_lowercase(), v));
    }
    if let ("_==_", [l, r]) = (call.func_name.as_str(), &call.args[..]) {
        for (side, value) in [(l, r), (r, l)] {
            if let CelExpr::Call(canonical) = &side.expr
                && let (true, [h]) = (on_header(canonical, "canonical"), &canonical.args[..])
                && let (Some(h), Some(v)) = (string(h), string(value))
            {
                out.push((h.to_lowercase(), v));
            }
        }
    }
    for operand in call.target.iter().map(|t| &**t).chain(&call.args) {
        pins(&operand.expr, out);
    }
}

/// Whether `call` is `header.<name>(...)`.
fn on_header(call: &cel::common::ast::CallExpr, name: &str) -> bool {
    call.func_name == name
        && matches!(call.target.as_deref().map(|t| &t.expr), Some(CelExpr::Ident(h)) if h == "header")
}

/// A string literal's value.
fn string(e: &cel::IdedExpr) -> Option<String> {
    match &e.expr {
        CelExpr::Literal(cel::common::ast::LiteralValue::String(s)) => Some(s.to_string()),
        _ => None,
    }
}

/// `body.a.b[0]` as `["a", "b", "0"]` (a `\.` stays inside a key).
fn body_parts(expr: &str) -> Vec<String> {
    let rest = &expr["body".len()..];
    let (mut parts, mut cur) = (Vec::new(), String::new());
    let mut chars = rest.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => cur.extend(chars.next()),
            '.' | '[' => {
                if !cur.is_empty() {
                    parts.push(std::mem::take(&mut cur));
                }
                if c == '[' {
                    let inner: String = chars.by_ref().take_while(|c| *c != ']').collect();
                    parts.push(inner.trim_matches(['\'', '"']).to_string());
                }
            }
            _ => cur.push(c),
        }
    }
    if !cur.is_empty() {
        parts.push(cur);
    }
    parts
}

/// Whether a property path exists in a JSON Schema (objects and arrays), and if so whether it
/// may be null on the way.
fn schema_property(schema: &Value, parts: &[String]) -> Option<bool> {
    let (mut node, mut nullable) = (schema, false);
    for part in parts {
        node = if part == "*" || part.chars().all(|c| c.is_ascii_digit()) {
            node.get("items").filter(|i| i.is_object())?
        } else {
            node["properties"].get(part)?
        };
        let t = &node["type"];
        nullable |= t == "null" || items(t).iter().any(|x| x == "null");
    }
    Some(nullable)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cel_filters_pin_headers_in_both_forms() {
        let f = "header.match('Ce-Type', 'a.b') && header.canonical(\"ce-imagetag\") == 'candidate' \
                 && body.x == 'y' && (header.match('x-other', 'z') || 'w' == header.canonical('X-W'))";
        assert_eq!(
            cel_header_filters(f).unwrap(),
            vec![
                ("ce-type".to_string(), "a.b".to_string()),
                ("ce-imagetag".to_string(), "candidate".to_string()),
                ("x-other".to_string(), "z".to_string()),
                ("x-w".to_string(), "w".to_string()),
            ]
        );
        // A pin inside a string is no pin; a filter Triggers could not parse is an error.
        let quoted = "body.note == \"header.match('ce-type', 'x')\"";
        assert_eq!(cel_header_filters(quoted).unwrap(), vec![]);
        assert!(cel_header_filters("header.match('broken'").is_err());
    }

    #[test]
    fn body_paths_split_on_dots_and_brackets() {
        assert_eq!(body_parts("body.a.b[0]"), vec!["a", "b", "0"]);
        assert_eq!(body_parts("body['x.y'].z"), vec!["x.y", "z"]);
        assert_eq!(body_parts("body.a\\.b"), vec!["a.b"]);
        assert!(refs("$(body)").contains(&"body".to_string()));
    }
}
