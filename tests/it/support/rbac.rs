//! RBAC as the API server evaluates it, for tests: the Roles, ClusterRoles and bindings of
//! `config/`, and a checker that maps each request of the emulator's log to the attributes
//! Kubernetes authorizes (API group, resource/subresource, verb, namespace, name) and finds the
//! rule that allows it.
//!
//! The YAML gives the rules' structure; the raw text gives each verb's comment, which serde
//! drops. The convention (documented in `config/README.md`): verbs are a block list, one verb a
//! line, each with a `# why` comment; a verb the tests cannot exercise carries
//! `unused-in-tests: <reason>` in that comment. The parsed comments are cross-checked against
//! the parsed structure, so a file that does not follow the convention fails loudly instead of
//! losing its markers.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::Path;

use imagegate_emulator::control::RequestRecord;
use serde_json::Value;

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

/// A Role or ClusterRole.
#[derive(Clone, Debug)]
struct Role {
    rules: Vec<Rule>,
}

/// A RoleBinding or ClusterRoleBinding.
#[derive(Clone, Debug)]
struct Binding {
    /// `ClusterRoleBinding/name` or `RoleBinding/ns/name`.
    id: String,
    /// The RoleBinding's namespace; None for a ClusterRoleBinding.
    namespace: Option<String>,
    /// `Role` or `ClusterRole`.
    role_kind: String,
    role_name: String,
    subjects: Vec<Value>,
}

/// The RBAC objects of a set of manifests.
#[derive(Clone, Debug, Default)]
pub struct Policy {
    /// Key: (`Role`, namespace, name) or (`ClusterRole`, "", name).
    roles: BTreeMap<(String, String, String), Role>,
    bindings: Vec<Binding>,
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
    /// The binding that grants it.
    pub binding: String,
}

/// What Kubernetes authorizes a request as (k8s.io/apiserver `RequestInfoFactory`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Attributes {
    /// A request for an API resource.
    Resource {
        /// `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`, `deletecollection`.
        verb: String,
        /// API group (`""` for core).
        group: String,
        /// Resource (plural).
        resource: String,
        /// Subresource, empty if none.
        subresource: String,
        /// Namespace, empty for cluster-scoped and all-namespace requests.
        namespace: String,
        /// Name, empty for collections (or from a `metadata.name` field selector).
        name: String,
    },
    /// Any other path (discovery, /version, ...).
    NonResource {
        /// The lower-case HTTP method.
        verb: String,
        /// The path.
        path: String,
    },
}

impl fmt::Display for Attributes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Attributes::Resource {
                verb,
                group,
                resource,
                subresource,
                namespace,
                name,
            } => {
                let res = if subresource.is_empty() {
                    resource.clone()
                } else {
                    format!("{resource}/{subresource}")
                };
                write!(f, "verb={verb} apiGroup={group:?} resource={res}")?;
                write!(
                    f,
                    " namespace={}",
                    if namespace.is_empty() {
                        "(none)"
                    } else {
                        namespace
                    }
                )?;
                write!(f, " name={}", if name.is_empty() { "(none)" } else { name })
            }
            Attributes::NonResource { verb, path } => write!(f, "non-resource {verb} {path}"),
        }
    }
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

impl Attributes {
    /// The attributes of a request, derived from its method, path and query exactly as the API
    /// server's `RequestInfoFactory` derives them (independently of what the emulator recorded).
    pub fn of(method: &str, path: &str, query: &str) -> Attributes {
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
    pub fn of_record(r: &RequestRecord) -> Attributes {
        Attributes::of(&r.method, &r.path, &r.query)
    }
}

/// A request the policy does not allow, or a grant the run did not use.
pub type Problems = Vec<String>;

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .map(|s| s.as_str().map_or_else(|| s.to_string(), str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

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
            let v: Value = match serde_yaml::from_str(&doc) {
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
                    let scanned = scan_verbs(&doc);
                    let structural = v["rules"].as_array().cloned().unwrap_or_default();
                    if scanned.len() != structural.len() {
                        self.problems.push(format!(
                            "{at}: found {} rules in the text but {} in the YAML; write each rule as `- apiGroups: [...]` under a top-level `rules:`",
                            scanned.len(),
                            structural.len()
                        ));
                    }
                    let mut rules = Vec::new();
                    for (i, r) in structural.iter().enumerate() {
                        let verbs = strings(&r["verbs"]);
                        let rule_line = scanned.get(i).map_or(0, |(n, _)| *n);
                        let rule_at =
                            format!("{file}:{} {kind}/{name} rule {}", line + rule_line, i + 1);
                        let commented = match scanned.get(i) {
                            Some((_, Some(lines)))
                                if lines.iter().map(|v| &v.name).eq(verbs.iter()) =>
                            {
                                lines.clone()
                            }
                            _ => {
                                self.problems.push(format!(
                                    "{rule_at}: write `verbs:` as a block list, one verb a line with a `# why` comment (found {verbs:?})"
                                ));
                                verbs
                                    .iter()
                                    .map(|n| Verb {
                                        name: n.clone(),
                                        comment: String::new(),
                                    })
                                    .collect()
                            }
                        };
                        rules.push(Rule {
                            api_groups: strings(&r["apiGroups"]),
                            resources: strings(&r["resources"]),
                            resource_names: strings(&r["resourceNames"]),
                            non_resource_urls: strings(&r["nonResourceURLs"]),
                            verbs: commented,
                            at: rule_at,
                        });
                    }
                    let key = (
                        kind.to_string(),
                        if kind == "Role" {
                            namespace.unwrap_or_default()
                        } else {
                            String::new()
                        },
                        name,
                    );
                    self.roles.insert(key, Role { rules });
                }
                "RoleBinding" | "ClusterRoleBinding" => {
                    if kind == "RoleBinding" && namespace.is_none() {
                        self.problems.push(format!(
                            "{at}: a RoleBinding needs an explicit metadata.namespace"
                        ));
                    }
                    self.bindings.push(Binding {
                        id: at,
                        namespace: if kind == "RoleBinding" {
                            Some(namespace.unwrap_or_default())
                        } else {
                            None
                        },
                        role_kind: v["roleRef"]["kind"].as_str().unwrap_or_default().into(),
                        role_name: v["roleRef"]["name"].as_str().unwrap_or_default().into(),
                        subjects: v["subjects"].as_array().cloned().unwrap_or_default(),
                    });
                }
                _ => {}
            }
        }
    }

    /// Whether a binding's subject is the ServiceAccount user `user`
    /// (`system:serviceaccount:NS:NAME`), directly or through one of its groups.
    fn subject_is(subject: &Value, user: &str, binding_ns: Option<&str>) -> bool {
        let kind = subject["kind"].as_str().unwrap_or_default();
        let name = subject["name"].as_str().unwrap_or_default();
        let sa = user
            .strip_prefix("system:serviceaccount:")
            .and_then(|rest| rest.split_once(':'));
        match kind {
            "User" => name == user,
            "ServiceAccount" => {
                // A RoleBinding's subject without a namespace means the binding's namespace.
                let ns = subject["namespace"]
                    .as_str()
                    .filter(|n| !n.is_empty())
                    .or(binding_ns)
                    .unwrap_or_default();
                sa == Some((ns, name))
            }
            "Group" => {
                name == "system:authenticated"
                    || sa.is_some_and(|(ns, _)| {
                        name == "system:serviceaccounts"
                            || name == format!("system:serviceaccounts:{ns}")
                    })
            }
            _ => false,
        }
    }

    /// Every rule granted to `user`, with where it applies.
    pub fn grants(&self, user: &str) -> Vec<Grant> {
        let mut out = Vec::new();
        for b in &self.bindings {
            if !b
                .subjects
                .iter()
                .any(|s| Policy::subject_is(s, user, b.namespace.as_deref()))
            {
                continue;
            }
            let key = match b.role_kind.as_str() {
                "Role" => (
                    "Role".to_string(),
                    b.namespace.clone().unwrap_or_default(),
                    b.role_name.clone(),
                ),
                _ => (
                    "ClusterRole".to_string(),
                    String::new(),
                    b.role_name.clone(),
                ),
            };
            if let Some(role) = self.roles.get(&key) {
                out.extend(role.rules.iter().map(|r| Grant {
                    rule: r.clone(),
                    namespace: b.namespace.clone(),
                    binding: b.id.clone(),
                }));
            }
        }
        out
    }

    /// The conventions of `config/`: no wildcard, one API group per rule, a `# why` comment on
    /// every verb, a reason after every `unused-in-tests:` marker, no binding to a role that is
    /// not defined here, and the problems found while reading.
    pub fn convention_problems(&self) -> Problems {
        let mut problems = self.problems.clone();
        for role in self.roles.values() {
            for r in &role.rules {
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
        }
        for b in &self.bindings {
            let key = if b.role_kind == "Role" {
                (
                    "Role".to_string(),
                    b.namespace.clone().unwrap_or_default(),
                    b.role_name.clone(),
                )
            } else {
                (
                    "ClusterRole".to_string(),
                    String::new(),
                    b.role_name.clone(),
                )
            };
            if !self.roles.contains_key(&key) {
                problems.push(format!(
                    "{}: binds {} {:?}, which config/ does not define",
                    b.id, b.role_kind, b.role_name
                ));
            }
        }
        problems
    }
}

/// Whether `rule`, granted where `grant_ns` says, allows `attrs` through its API group
/// `group`, resource `resource` and verb `verb` (one cell of the rule), as RBAC's `RuleAllows`.
fn cell_allows(
    rule: &Rule,
    grant_ns: Option<&str>,
    group: &str,
    resource: &str,
    verb: &str,
    attrs: &Attributes,
) -> bool {
    let Attributes::Resource {
        verb: want_verb,
        group: want_group,
        resource: want_resource,
        subresource,
        namespace,
        name,
    } = attrs
    else {
        return false;
    };
    if let Some(ns) = grant_ns
        && ns != namespace
    {
        return false;
    }
    let combined = if subresource.is_empty() {
        want_resource.clone()
    } else {
        format!("{want_resource}/{subresource}")
    };
    let resource_ok = resource == "*"
        || resource == combined
        || (!subresource.is_empty() && resource == format!("*/{subresource}"));
    (verb == "*" || verb == want_verb)
        && (group == "*" || group == want_group)
        && resource_ok
        && (rule.resource_names.is_empty() || rule.resource_names.contains(name))
}

/// Whether a non-resource request is allowed, by a rule or by the default discovery roles.
fn non_resource_allowed(grants: &[Grant], verb: &str, path: &str) -> bool {
    let matches = |pattern: &str| match pattern.strip_suffix('*') {
        Some(prefix) => path.starts_with(prefix),
        None => pattern == path,
    };
    let default =
        (verb == "get" || verb == "head") && DEFAULT_NON_RESOURCE.iter().any(|p| matches(p));
    default
        || grants.iter().any(|g| {
            g.namespace.is_none()
                && g.rule.non_resource_urls.iter().any(|p| matches(p))
                && g.rule.verbs.iter().any(|v| v.name == "*" || v.name == verb)
        })
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
        let attrs = Attributes::of_record(r);
        let mut allowed = false;
        if let Attributes::NonResource { verb, path } = &attrs {
            allowed = non_resource_allowed(&grants, verb, path);
        }
        for g in &grants {
            for group in &g.rule.api_groups {
                for resource in &g.rule.resources {
                    for verb in &g.rule.verbs {
                        if cell_allows(
                            &g.rule,
                            g.namespace.as_deref(),
                            group,
                            resource,
                            &verb.name,
                            &attrs,
                        ) {
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

/// For an end-to-end test: panics unless `config/` grants the program's ServiceAccount
/// ([`service_account`]) every request `imagegate <program>`, logged in to `emu` as the user
/// `<program>`, made.
pub async fn assert_config_allows(emu: &super::EmulatorServer, program: &str) {
    let policy = Policy::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("config"));
    assert_allowed(
        &policy,
        &emu.requests().await,
        program,
        &service_account(program),
    );
}
