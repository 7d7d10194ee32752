//! The RBAC of `config/` against a request log, for tests: the Roles, ClusterRoles and bindings
//! of the manifests, evaluated by the emulator's RBAC evaluator ([`imagegate_emulator::Rbac`], the
//! one it answers SubjectAccessReviews with), and a checker that maps each request of the
//! emulator's log to the attributes Kubernetes authorizes (API group, resource/subresource, verb,
//! namespace, name) and finds the rule that allows it.
//!
//! The YAML gives the rules' structure; the raw text gives each verb's comment, which serde
//! drops. The convention (documented in `config/README.md`): verbs are a block list, one verb a
//! line, each with a `# why` comment; a verb the tests cannot exercise carries
//! `unused-in-tests: <reason>` in that comment. The parsed comments are cross-checked against
//! the parsed structure, so a file that does not follow the convention fails loudly instead of
//! losing its markers.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use imagegate_emulator::control::RequestRecord;
use imagegate_emulator::{PolicyRule, Rbac, RoleKey, UserInfo};
use serde_json::Value;

pub use imagegate_emulator::Attributes;

/// The marker that exempts a granted verb from the "every grant is used" check.
pub const UNUSED_MARKER: &str = "unused-in-tests:";

/// Non-resource paths every authenticated user may GET through the default ClusterRoles
/// `system:discovery` and `system:public-info-viewer` (bound to `system:authenticated`).
const DEFAULT_NON_RESOURCE: [&str; 11] = [
    "/api",
    "/api/*",
    "/apis",
    "/apis/*",
    "/healthz",
    "/livez",
    "/openapi",
    "/openapi/*",
    "/readyz",
    "/version",
    "/version/",
];

/// One verb of a rule and the comment on its line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verb {
    /// The verb.
    pub name: String,
    /// The text of its `#` comment, trimmed (empty if none).
    pub comment: String,
}

impl Verb {
    /// The reason after the `unused-in-tests:` marker, if the comment has the marker.
    pub fn unused_reason(&self) -> Option<&str> {
        self.comment
            .find(UNUSED_MARKER)
            .map(|at| self.comment[at + UNUSED_MARKER.len()..].trim())
    }
}

/// A PolicyRule of a Role or ClusterRole.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rule {
    /// `apiGroups`.
    pub api_groups: Vec<String>,
    /// `resources` (`resource` or `resource/subresource`).
    pub resources: Vec<String>,
    /// `resourceNames` (empty: any name).
    pub resource_names: Vec<String>,
    /// `nonResourceURLs`.
    pub non_resource_urls: Vec<String>,
    /// `verbs`, with their comments.
    pub verbs: Vec<Verb>,
    /// Where the rule is written (`file:line`) and in which role, for messages.
    pub at: String,
}

/// The RBAC objects of a set of manifests, with what the text says about each rule.
#[derive(Clone, Debug, Default)]
pub struct Policy {
    /// The Roles, ClusterRoles and bindings as parsed, for the evaluator.
    objects: Vec<Value>,
    /// Each role's rules as written (verb comments, where), by role.
    rules: BTreeMap<RoleKey, Vec<Rule>>,
    /// Each binding: the evaluator's id, where it is written, and the role it names.
    bindings: Vec<(String, String, RoleKey)>,
    /// Problems found while reading (violations of the conventions).
    problems: Vec<String>,
}

/// A rule as one subject holds it: through which binding, and where it applies.
#[derive(Clone, Debug)]
pub struct Grant {
    /// The rule.
    pub rule: Rule,
    /// Where it applies: a RoleBinding's namespace, or None (everywhere) for a ClusterRoleBinding.
    pub namespace: Option<String>,
    /// The binding that grants it (where it is written).
    pub binding: String,
    /// The grant as the emulator's evaluator holds it.
    pub held: imagegate_emulator::Grant,
}

/// Go's `strconv.ParseBool` truth values.
fn go_true(v: &str) -> bool {
    matches!(v, "1" | "t" | "T" | "true" | "TRUE" | "True")
}

/// Percent-decodes one path segment.
fn unescape(segment: &str) -> String {
    let bytes = segment.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let Some(b) = bytes
                .get(i + 1..i + 3)
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        {
            out.push(b);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The attributes of a request, derived from its method, path and query exactly as the API
/// server's `RequestInfoFactory` derives them (independently of what the emulator recorded).
pub fn attributes_of(method: &str, path: &str, query: &str) -> Attributes {
    let non_resource = || Attributes::NonResource {
        verb: method.to_ascii_lowercase(),
        path: path.to_string(),
    };
    let parts: Vec<String> = path
        .trim_matches('/')
        .split('/')
        .filter(|s| !s.is_empty())
        .map(unescape)
        .collect();
    if parts.len() < 3 {
        return non_resource();
    }
    let (group, mut rest) = match parts[0].as_str() {
        "api" => (String::new(), &parts[1..]),
        "apis" if parts.len() >= 4 => (parts[1].clone(), &parts[2..]),
        _ => return non_resource(),
    };
    // Skip the version.
    rest = &rest[1..];
    let mut verb = match method {
        "POST" => "create",
        "GET" | "HEAD" => "get",
        "PUT" => "update",
        "PATCH" => "patch",
        "DELETE" => "delete",
        _ => "",
    }
    .to_string();
    if rest.first().is_some_and(|p| p == "watch" || p == "proxy") {
        if rest.len() < 2 {
            return non_resource();
        }
        verb = rest[0].clone();
        rest = &rest[1..];
    }
    let mut namespace = String::new();
    if rest[0] == "namespaces" && rest.len() > 1 {
        namespace = rest[1].clone();
        // `namespaces/{ns}/status` and `/finalize` are subresources of the namespace.
        if rest.len() > 2 && rest[2] != "status" && rest[2] != "finalize" {
            rest = &rest[2..];
        }
    }
    let resource = rest[0].clone();
    let mut name = rest.get(1).cloned().unwrap_or_default();
    let subresource = if verb == "proxy" {
        String::new()
    } else {
        rest.get(2).cloned().unwrap_or_default()
    };
    let params: Vec<(String, String)> = form_urlencoded::parse(query.as_bytes())
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect();
    if name.is_empty() && verb == "get" {
        let watch = params.iter().any(|(k, v)| k == "watch" && go_true(v));
        verb = if watch { "watch" } else { "list" }.into();
    }
    if name.is_empty() && (verb == "list" || verb == "watch") {
        // A list or watch of one object by field selector is authorized for that name.
        if let Some((_, selector)) = params.iter().find(|(k, _)| k == "fieldSelector") {
            for term in selector.split(',') {
                let value = term
                    .strip_prefix("metadata.name==")
                    .or_else(|| term.strip_prefix("metadata.name="));
                if let Some(v) = value {
                    name = v.to_string();
                }
            }
        }
    }
    if name.is_empty() && verb == "delete" {
        verb = "deletecollection".into();
    }
    Attributes::Resource {
        verb,
        group,
        resource,
        subresource,
        namespace,
        name,
    }
}

/// The attributes of a logged request.
pub fn attributes_of_record(r: &RequestRecord) -> Attributes {
    attributes_of(&r.method, &r.path, &r.query)
}

/// A request the policy does not allow, or a grant the run did not use.
pub type Problems = Vec<String>;

/// The verb lines of each rule of a Role/ClusterRole document, read from its text: for each
/// item of the top-level `rules:` list, the `- verb  # comment` lines of its `verbs:` key.
/// Each rule comes with its line in `doc` (0-based); its verbs are None when they are not a
/// block list.
fn scan_verbs(doc: &str) -> Vec<(usize, Option<Vec<Verb>>)> {
    let mut rules: Vec<(usize, Option<Vec<Verb>>)> = Vec::new();
    let mut in_rules = false;
    let mut item_indent: Option<usize> = None;
    let mut in_verbs: Option<usize> = None;
    for (n, line) in doc.lines().enumerate() {
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        if indent == 0 && !trimmed.starts_with("- ") {
            in_rules = trimmed.starts_with("rules:");
            item_indent = None;
            in_verbs = None;
            continue;
        }
        if !in_rules {
            continue;
        }
        // The key part of the line, after a list dash that opens a rule.
        let mut body = trimmed;
        if trimmed.starts_with("- ") && item_indent.is_none_or(|i| i == indent) {
            item_indent = Some(indent);
            rules.push((n, Some(Vec::new())));
            body = trimmed[2..].trim_start();
        } else if let Some(key_indent) = in_verbs
            && indent >= key_indent
            && let Some(item) = trimmed.strip_prefix("- ")
        {
            let (name, comment) = match item.split_once('#') {
                Some((n, c)) => (n.trim(), c.trim()),
                None => (item.trim(), ""),
            };
            if let Some((_, Some(verbs))) = rules.last_mut() {
                verbs.push(Verb {
                    name: name.trim_matches(|c| c == '"' || c == '\'').to_string(),
                    comment: comment.to_string(),
                });
            }
            continue;
        }
        in_verbs = None;
        if let Some(value) = body.strip_prefix("verbs:") {
            let value = value.split('#').next().unwrap_or("").trim();
            if value.is_empty() {
                in_verbs = Some(item_indent.unwrap_or(0));
            } else if let Some((_, last)) = rules.last_mut() {
                // A flow list: no room for a comment per verb.
                *last = None;
            }
        }
    }
    rules
}

/// The documents of a multi-document YAML text, with the line each starts on (1-based).
fn documents(text: &str) -> Vec<(usize, String)> {
    let mut docs = vec![(1, String::new())];
    for (i, line) in text.lines().enumerate() {
        if line == "---" || line.starts_with("--- ") {
            docs.push((i + 2, String::new()));
        } else if let Some((_, doc)) = docs.last_mut() {
            doc.push_str(line);
            doc.push('\n');
        }
    }
    docs
}

impl Policy {
    /// Reads every `*.yaml` file of `dir`.
    pub fn load(dir: &Path) -> Policy {
        let mut files: Vec<_> = std::fs::read_dir(dir)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "yaml" || e == "yml"))
            .collect();
        files.sort();
        let mut policy = Policy::default();
        for file in files {
            let text = std::fs::read_to_string(&file).unwrap();
            let name = file.file_name().unwrap().to_string_lossy().into_owned();
            policy.add(&name, &text);
        }
        policy
    }

    /// Adds the RBAC objects of one file's text (`file` names it in messages).
    pub fn add(&mut self, file: &str, text: &str) {
        for (line, doc) in documents(text) {
            let v: Value = match serde_norway::from_str(&doc) {
                Ok(v) => v,
                Err(e) => panic!("{file}:{line}: not YAML: {e}"),
            };
            if !v.is_object() {
                continue;
            }
            let kind = v["kind"].as_str().unwrap_or_default();
            let name = v["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            let namespace = v["metadata"]["namespace"].as_str().map(str::to_string);
            let at = format!("{file}:{line} {kind}/{name}");
            match kind {
                "Role" | "ClusterRole" => {
                    if kind == "Role" && namespace.is_none() {
                        self.problems
                            .push(format!("{at}: a Role needs an explicit metadata.namespace"));
                    }
                    let rules = self.commented_rules(&at, file, line, &doc, &v);
                    let ns = if kind == "Role" {
                        namespace.unwrap_or_default()
                    } else {
                        String::new()
                    };
                    self.rules.insert((kind.to_string(), ns, name), rules);
                }
                "RoleBinding" | "ClusterRoleBinding" => {
                    let ns = namespace.clone().unwrap_or_default();
                    if kind == "RoleBinding" && namespace.is_none() {
                        self.problems.push(format!(
                            "{at}: a RoleBinding needs an explicit metadata.namespace"
                        ));
                    }
                    let id = if kind == "RoleBinding" {
                        format!("{kind}/{ns}/{name}")
                    } else {
                        format!("{kind}/{name}")
                    };
                    let role_kind = v["roleRef"]["kind"].as_str().unwrap_or_default();
                    let role_ns = if role_kind == "Role" {
                        ns
                    } else {
                        String::new()
                    };
                    let role_name = v["roleRef"]["name"].as_str().unwrap_or_default();
                    let role = (role_kind.to_string(), role_ns, role_name.to_string());
                    self.bindings.push((id, at, role));
                }
                _ => continue,
            }
            self.objects.push(v);
        }
    }

    /// The rules of a Role/ClusterRole document, each with its verbs' comments from the text
    /// (checked against the parsed structure) and where it is written.
    fn commented_rules(
        &mut self,
        at: &str,
        file: &str,
        line: usize,
        doc: &str,
        v: &Value,
    ) -> Vec<Rule> {
        let scanned = scan_verbs(doc);
        let structural = v["rules"].as_array().cloned().unwrap_or_default();
        if scanned.len() != structural.len() {
            self.problems.push(format!(
                "{at}: found {} rules in the text but {} in the YAML; write each rule as `- apiGroups: [...]` under a top-level `rules:`",
                scanned.len(),
                structural.len()
            ));
        }
        // `at` is `file:line Kind/name`.
        let kind_name = at.split_once(' ').map_or("", |(_, k)| k);
        let mut rules = Vec::new();
        for (i, r) in structural.iter().enumerate() {
            let parsed = PolicyRule::from_value(r);
            let rule_line = scanned.get(i).map_or(0, |(n, _)| *n);
            let rule_at = format!("{file}:{} {kind_name} rule {}", line + rule_line, i + 1);
            let verbs = match scanned.get(i) {
                Some((_, Some(lines))) if lines.iter().map(|v| &v.name).eq(parsed.verbs.iter()) => {
                    lines.clone()
                }
                _ => {
                    self.problems.push(format!(
                        "{rule_at}: write `verbs:` as a block list, one verb a line with a `# why` comment (found {:?})",
                        parsed.verbs
                    ));
                    parsed
                        .verbs
                        .iter()
                        .map(|n| Verb {
                            name: n.clone(),
                            comment: String::new(),
                        })
                        .collect()
                }
            };
            rules.push(Rule {
                api_groups: parsed.api_groups,
                resources: parsed.resources,
                resource_names: parsed.resource_names,
                non_resource_urls: parsed.non_resource_urls,
                verbs,
                at: rule_at,
            });
        }
        rules
    }

    /// Every rule granted to the user `user` (with the groups its authenticator gives it), with
    /// where it applies, as the emulator's evaluator finds them.
    pub fn grants(&self, user: &str) -> Vec<Grant> {
        let rbac = Rbac::from_objects(&self.objects);
        rbac.grants(&UserInfo::authenticated(user))
            .into_iter()
            .filter_map(|held| {
                let rule = self.rules.get(&held.role)?.get(held.index)?.clone();
                let binding = self
                    .bindings
                    .iter()
                    .find(|(id, _, _)| *id == held.binding)
                    .map_or_else(|| held.binding.clone(), |(_, at, _)| at.clone());
                Some(Grant {
                    rule,
                    namespace: held.namespace.clone(),
                    binding,
                    held,
                })
            })
            .collect()
    }

    /// The conventions of `config/`: no wildcard, one API group per rule, a `# why` comment on
    /// every verb, a reason after every `unused-in-tests:` marker, no binding to a role that is
    /// not defined here, and the problems found while reading.
    pub fn convention_problems(&self) -> Problems {
        let mut problems = self.problems.clone();
        for r in self.rules.values().flatten() {
            let all = r
                .api_groups
                .iter()
                .chain(&r.resources)
                .chain(&r.resource_names)
                .chain(&r.non_resource_urls)
                .chain(r.verbs.iter().map(|v| &v.name));
            if all.clone().any(|s| s.contains('*')) {
                problems.push(format!("{}: a wildcard", r.at));
            }
            if r.non_resource_urls.is_empty() && r.api_groups.len() != 1 {
                problems.push(format!(
                    "{}: one API group per rule (found {:?})",
                    r.at, r.api_groups
                ));
            }
            for v in &r.verbs {
                if v.comment.is_empty() {
                    problems.push(format!(
                        "{}: verb {:?} has no `# why` comment",
                        r.at, v.name
                    ));
                }
                if v.unused_reason().is_some_and(str::is_empty) {
                    problems.push(format!(
                        "{}: verb {:?}: `{UNUSED_MARKER}` needs the reason after it",
                        r.at, v.name
                    ));
                }
            }
        }
        for (_, at, role) in &self.bindings {
            if !self.rules.contains_key(role) {
                problems.push(format!(
                    "{at}: binds {} {:?}, which config/ does not define",
                    role.0, role.2
                ));
            }
        }
        problems
    }
}

/// Whether the grant allows `attrs` through one cell of its rule: API group `group`, resource
/// `resource` and verb `verb` (with the rule's resource names), where the binding applies.
fn cell_allows(g: &Grant, group: &str, resource: &str, verb: &str, attrs: &Attributes) -> bool {
    let cell = imagegate_emulator::Grant {
        rule: PolicyRule {
            api_groups: vec![group.to_string()],
            resources: vec![resource.to_string()],
            resource_names: g.rule.resource_names.clone(),
            non_resource_urls: Vec::new(),
            verbs: vec![verb.to_string()],
        },
        ..g.held.clone()
    };
    cell.allows(attrs)
}

/// Whether a non-resource request is allowed, by a rule or by the default discovery roles.
fn non_resource_allowed(grants: &[Grant], attrs: &Attributes) -> bool {
    let Attributes::NonResource { verb, path } = attrs else {
        return false;
    };
    let matches = |pattern: &str| match pattern.strip_suffix('*') {
        Some(prefix) => path.starts_with(prefix),
        None => pattern == path,
    };
    let default =
        (verb == "get" || verb == "head") && DEFAULT_NON_RESOURCE.iter().any(|p| matches(p));
    default || grants.iter().any(|g| g.held.allows(attrs))
}

/// One cell of a granted rule: (where it is written, where it applies, group, resource, verb).
type Cell = (String, Option<String>, String, String, String);

/// What a run did against a policy, for one user.
#[derive(Debug, Default)]
pub struct Audit {
    /// How many requests the user made.
    pub requests: usize,
    /// The requests no rule allows (each named).
    pub denied: Problems,
    /// Granted cells no request used, without an `unused-in-tests:` marker.
    pub unused: Problems,
    /// Cells marked `unused-in-tests:` that a request did use (stale markers).
    pub stale_markers: Problems,
}

fn describe(r: &RequestRecord, attrs: &Attributes) -> String {
    let query = if r.query.is_empty() {
        String::new()
    } else {
        format!("?{}", r.query)
    };
    format!(
        "{} {}{} (answered {}) = {attrs}",
        r.method, r.path, query, r.code
    )
}

/// Checks every request `logged_as` made against what the policy grants the ServiceAccount user
/// `sa` (the two differ when a test runs a program under another name), and the grants against
/// the requests.
pub fn audit(policy: &Policy, records: &[RequestRecord], logged_as: &str, sa: &str) -> Audit {
    let grants = policy.grants(sa);
    let mut audit = Audit::default();
    let mut used: BTreeSet<Cell> = BTreeSet::new();
    let mut denied_seen = BTreeSet::new();
    for r in records.iter().filter(|r| r.user == logged_as) {
        audit.requests += 1;
        let attrs = attributes_of_record(r);
        let mut allowed = non_resource_allowed(&grants, &attrs);
        for g in &grants {
            for group in &g.rule.api_groups {
                for resource in &g.rule.resources {
                    for verb in &g.rule.verbs {
                        if cell_allows(g, group, resource, &verb.name, &attrs) {
                            allowed = true;
                            used.insert((
                                g.rule.at.clone(),
                                g.namespace.clone(),
                                group.clone(),
                                resource.clone(),
                                verb.name.clone(),
                            ));
                        }
                    }
                }
            }
        }
        if !allowed {
            let text = describe(r, &attrs);
            if denied_seen.insert(attrs.to_string()) {
                audit.denied.push(format!("{sa} is not allowed: {text}"));
            }
        }
    }
    for g in &grants {
        for group in &g.rule.api_groups {
            for resource in &g.rule.resources {
                for verb in &g.rule.verbs {
                    let cell = (
                        g.rule.at.clone(),
                        g.namespace.clone(),
                        group.clone(),
                        resource.clone(),
                        verb.name.clone(),
                    );
                    let scope = g.namespace.as_deref().unwrap_or("all namespaces");
                    let what = format!(
                        "{}: apiGroup {group:?} resource {resource:?} verb {:?} ({scope}, via {})",
                        g.rule.at, verb.name, g.binding
                    );
                    match (used.contains(&cell), verb.unused_reason()) {
                        (false, None) => audit.unused.push(format!(
                            "granted to {sa} but never used: {what}; remove it, or say why with `{UNUSED_MARKER} <reason>` in its comment"
                        )),
                        (true, Some(_)) => audit.stale_markers.push(format!(
                            "marked `{UNUSED_MARKER}` but used by {sa}: {what}; remove the marker"
                        )),
                        _ => {}
                    }
                }
            }
        }
    }
    audit
}

/// Panics, naming each offending request, unless the policy allows every request `logged_as`
/// made as the ServiceAccount user `sa`. For end-to-end tests that run a program under another
/// user name than its ServiceAccount's.
pub fn assert_allowed(policy: &Policy, records: &[RequestRecord], logged_as: &str, sa: &str) {
    let a = audit(policy, records, logged_as, sa);
    assert!(
        a.denied.is_empty(),
        "{} of {} requests are not allowed by config/:\n{}",
        a.denied.len(),
        a.requests,
        a.denied.join("\n")
    );
}

/// The ServiceAccount user `config/` runs `imagegate <program>` as.
pub fn service_account(program: &str) -> String {
    format!("system:serviceaccount:imagegate-system:imagegate-{program}")
}

/// The text of `tekton/330-controller-rbac.yaml` as `kubectl apply -k tekton/` applies it in
/// `namespace`: the RoleBinding that opts the namespace in to the controller's writes.
pub fn onboarding(namespace: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tekton/330-controller-rbac.yaml");
    let text = std::fs::read_to_string(&path).unwrap();
    let named = "metadata:\n  name: imagegate-controller-writer\n";
    assert!(
        text.contains(named),
        "{}: no RoleBinding imagegate-controller-writer",
        path.display()
    );
    text.replace(named, &format!("{named}  namespace: {namespace}\n"))
}

impl Policy {
    /// `config/` as `kubectl apply -k config/` installs it, with the multi-tenant adapter's
    /// overlay (`config/multi-tenant/`, its own identity) and each namespace of `onboarded` opted
    /// in as `kubectl apply -k tekton/` does ([`onboarding`]).
    pub fn installed(onboarded: &[&str]) -> Policy {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut policy = Policy::load(&root.join("config"));
        let overlay = root.join("config/multi-tenant/200-rbac.yaml");
        let text = std::fs::read_to_string(&overlay).unwrap();
        policy.add("multi-tenant/200-rbac.yaml", &text);
        let receiver = root.join("config/receiver/200-rbac.yaml");
        let text = std::fs::read_to_string(&receiver).unwrap();
        policy.add("receiver/200-rbac.yaml", &text);
        for ns in onboarded {
            policy.add(
                &format!("tekton/330-controller-rbac.yaml in {ns}"),
                &onboarding(ns),
            );
        }
        policy
    }
}

/// For an end-to-end test: panics unless `config/` grants the program's ServiceAccount
/// ([`service_account`]) every request `imagegate <program>`, logged in to `emu` as the user
/// `<program>`, made. The namespaces the tests gate (those that hold an ImagePromotion, a
/// CustomRun or an adopted ImageStream) are opted in, as applying `tekton/` there (its 330) does; no other. That the
/// controller writes nowhere else is `rbac::calls` and `realcluster::onboarding`.
pub async fn assert_config_allows(emu: &super::EmulatorServer, program: &str) {
    let promotions: kube::Api<imagegate::controller::crd::ImagePromotion> =
        kube::Api::all(emu.client());
    let runs: kube::Api<imagegate::api::CustomRun> = kube::Api::all(emu.client());
    let mut onboarded: BTreeSet<String> = promotions
        .list(&Default::default())
        .await
        .map(|l| {
            l.items
                .iter()
                .filter_map(|p| p.metadata.namespace.clone())
                .collect()
        })
        .unwrap_or_default();
    if let Ok(l) = runs.list(&Default::default()).await {
        onboarded.extend(l.items.iter().filter_map(|r| r.metadata.namespace.clone()));
    }
    let adopted: kube::Api<imagegate::api::ImageStream> = kube::Api::all(emu.client());
    let managed = kube::api::ListParams::default().labels("imagegate.dev/managed=true");
    if let Ok(l) = adopted.list(&managed).await {
        onboarded.extend(l.items.iter().filter_map(|r| r.metadata.namespace.clone()));
    }
    let onboarded: Vec<&str> = onboarded.iter().map(String::as_str).collect();
    let policy = Policy::installed(&onboarded);
    assert_allowed(
        &policy,
        &emu.requests().await,
        program,
        &service_account(program),
    );
}
