//! RBAC as kube-apiserver's authorizer evaluates it (k8s.io/kubernetes
//! `plugin/pkg/auth/authorizer/rbac`): the Roles, ClusterRoles, RoleBindings and
//! ClusterRoleBindings given as objects, a user with their groups, and the attributes of a
//! request. The emulator answers SubjectAccessReviews with it ([`review`]), over the RBAC objects
//! it stores; imagegate's tests check a request log against the manifests in `config/` with the
//! same evaluator, so the two never disagree on what a rule allows. Aggregated ClusterRoles
//! (`aggregationRule`) are not expanded: their own rules count, as written.

pub mod review;

use std::collections::BTreeMap;
use std::fmt;

use serde_json::Value;

/// The RBAC API group.
pub const GROUP: &str = "rbac.authorization.k8s.io";

/// What Kubernetes authorizes a request as (k8s.io/apiserver `authorizer.Attributes`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Attributes {
    /// A request for an API resource.
    Resource {
        /// `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`, `deletecollection`,
        /// or any other verb a review asks about (`promote`).
        verb: String,
        /// API group (`""` for core).
        group: String,
        /// Resource (plural).
        resource: String,
        /// Subresource, empty if none.
        subresource: String,
        /// Namespace, empty for cluster-scoped and all-namespace requests.
        namespace: String,
        /// Name, empty for collections.
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
        let or_none = |s: &str| if s.is_empty() { "(none)" } else { s }.to_string();
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
                write!(f, " namespace={}", or_none(namespace))?;
                write!(f, " name={}", or_none(name))
            }
            Attributes::NonResource { verb, path } => write!(f, "non-resource {verb} {path}"),
        }
    }
}

/// A user as the authenticator hands it to the authorizer: a name and groups.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UserInfo {
    /// `system:serviceaccount:<ns>:<name>` for a ServiceAccount.
    pub name: String,
    /// The user's groups.
    pub groups: Vec<String>,
}

impl UserInfo {
    /// The user named `name` with the groups the API server's authenticators give it: a
    /// ServiceAccount's token brings `system:serviceaccounts` and `system:serviceaccounts:<ns>`,
    /// and every authenticated user is in `system:authenticated`.
    pub fn authenticated(name: &str) -> UserInfo {
        let mut groups = Vec::new();
        if let Some((ns, _)) = name
            .strip_prefix("system:serviceaccount:")
            .and_then(|rest| rest.split_once(':'))
        {
            groups.push("system:serviceaccounts".to_string());
            groups.push(format!("system:serviceaccounts:{ns}"));
        }
        groups.push("system:authenticated".to_string());
        UserInfo {
            name: name.to_string(),
            groups,
        }
    }
}

/// A PolicyRule of a Role or ClusterRole.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PolicyRule {
    /// `apiGroups`.
    pub api_groups: Vec<String>,
    /// `resources` (`resource`, `resource/subresource`, `*` or `*/subresource`).
    pub resources: Vec<String>,
    /// `resourceNames` (empty: any name).
    pub resource_names: Vec<String>,
    /// `nonResourceURLs` (a trailing `*` matches a prefix).
    pub non_resource_urls: Vec<String>,
    /// `verbs`.
    pub verbs: Vec<String>,
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .map(|s| s.as_str().map_or_else(|| s.to_string(), str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

fn has(list: &[String], want: &str) -> bool {
    list.iter().any(|x| x == "*" || x == want)
}

impl PolicyRule {
    /// The rule of a `rules[]` item.
    pub fn from_value(v: &Value) -> PolicyRule {
        PolicyRule {
            api_groups: strings(&v["apiGroups"]),
            resources: strings(&v["resources"]),
            resource_names: strings(&v["resourceNames"]),
            non_resource_urls: strings(&v["nonResourceURLs"]),
            verbs: strings(&v["verbs"]),
        }
    }

    /// Whether the rule allows the request (RBAC's `RuleAllows`); where it applies is the
    /// binding's business ([`Grant::allows`]).
    pub fn allows(&self, attrs: &Attributes) -> bool {
        match attrs {
            Attributes::Resource {
                verb,
                group,
                resource,
                subresource,
                name,
                ..
            } => {
                let combined = if subresource.is_empty() {
                    resource.clone()
                } else {
                    format!("{resource}/{subresource}")
                };
                let resource_ok = self.resources.iter().any(|r| {
                    r == "*"
                        || *r == combined
                        || (!subresource.is_empty() && *r == format!("*/{subresource}"))
                });
                has(&self.verbs, verb)
                    && has(&self.api_groups, group)
                    && resource_ok
                    && (self.resource_names.is_empty() || self.resource_names.contains(name))
            }
            Attributes::NonResource { verb, path } => {
                has(&self.verbs, verb)
                    && self
                        .non_resource_urls
                        .iter()
                        .any(|u| match u.strip_suffix('*') {
                            Some(prefix) => path.starts_with(prefix),
                            None => u == path,
                        })
            }
        }
    }
}

/// Which role a binding refers to: (`Role`, its namespace, name) or (`ClusterRole`, "", name).
pub type RoleKey = (String, String, String);

/// A RoleBinding or ClusterRoleBinding.
#[derive(Clone, Debug)]
struct Binding {
    /// `ClusterRoleBinding/<name>` or `RoleBinding/<namespace>/<name>`.
    id: String,
    /// The RoleBinding's namespace; None for a ClusterRoleBinding.
    namespace: Option<String>,
    role: RoleKey,
    subjects: Vec<Value>,
}

impl Binding {
    /// The subject of the binding that is the user or one of its groups, described as the
    /// API server describes it (RBAC's `appliesToUser`; a ServiceAccount subject without a
    /// namespace is in the binding's).
    fn subject_of(&self, user: &UserInfo) -> Option<String> {
        self.subjects.iter().find_map(|s| {
            let name = s["name"].as_str().unwrap_or_default();
            match s["kind"].as_str().unwrap_or_default() {
                "User" => (name == user.name).then(|| format!("User {name:?}")),
                "Group" => user
                    .groups
                    .iter()
                    .any(|g| g == name)
                    .then(|| format!("Group {name:?}")),
                "ServiceAccount" => {
                    let ns = s["namespace"]
                        .as_str()
                        .filter(|n| !n.is_empty())
                        .or(self.namespace.as_deref())
                        .unwrap_or_default();
                    (user.name == format!("system:serviceaccount:{ns}:{name}"))
                        .then(|| format!("ServiceAccount \"{name}/{ns}\""))
                }
                _ => None,
            }
        })
    }

    /// `RoleBinding "name/ns"` or `ClusterRoleBinding "name"`.
    fn describe(&self) -> String {
        let name = self.id.rsplit('/').next().unwrap_or_default();
        match &self.namespace {
            Some(ns) => format!("RoleBinding \"{name}/{ns}\""),
            None => format!("ClusterRoleBinding {name:?}"),
        }
    }
}

/// A rule as one user holds it: through which binding, and where it applies.
#[derive(Clone, Debug)]
pub struct Grant {
    /// The rule.
    pub rule: PolicyRule,
    /// Where it applies: a RoleBinding's namespace, or None (everywhere, cluster-scoped
    /// requests included) for a ClusterRoleBinding.
    pub namespace: Option<String>,
    /// The binding that grants it (`ClusterRoleBinding/<name>`, `RoleBinding/<ns>/<name>`).
    pub binding: String,
    /// The role that holds the rule.
    pub role: RoleKey,
    /// The rule's index in the role's `rules`.
    pub index: usize,
    /// Why the binding applies, as the API server says it: `RoleBinding "p/ds" of ClusterRole
    /// "promoter" to ServiceAccount "pipeline/ds"`.
    pub source: String,
}

impl Grant {
    /// Whether this grant allows the request: the rule, where the binding applies (a
    /// RoleBinding only in its namespace, and never for non-resource URLs).
    pub fn allows(&self, attrs: &Attributes) -> bool {
        let placed = match (&self.namespace, attrs) {
            (None, _) => true,
            (Some(ns), Attributes::Resource { namespace, .. }) => ns == namespace,
            (Some(_), Attributes::NonResource { .. }) => false,
        };
        placed && self.rule.allows(attrs)
    }

    /// The reason the API server gives when this grant allows a review.
    pub fn reason(&self) -> String {
        format!("RBAC: allowed by {}", self.source)
    }
}

/// The RBAC objects in force: roles and bindings.
#[derive(Clone, Debug, Default)]
pub struct Rbac {
    roles: BTreeMap<RoleKey, Vec<PolicyRule>>,
    bindings: Vec<Binding>,
}

impl Rbac {
    /// Reads the Roles, ClusterRoles and bindings among `objects` (other kinds are skipped).
    pub fn from_objects<'a>(objects: impl IntoIterator<Item = &'a Value>) -> Rbac {
        let mut rbac = Rbac::default();
        for v in objects {
            let kind = v["kind"].as_str().unwrap_or_default();
            let name = v["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            let ns = v["metadata"]["namespace"].as_str().unwrap_or_default();
            match kind {
                "Role" | "ClusterRole" => {
                    let rules = v["rules"].as_array().map(Vec::as_slice).unwrap_or_default();
                    let ns = if kind == "Role" { ns } else { "" };
                    rbac.roles.insert(
                        (kind.to_string(), ns.to_string(), name),
                        rules.iter().map(PolicyRule::from_value).collect(),
                    );
                }
                "RoleBinding" | "ClusterRoleBinding" => {
                    let role_kind = v["roleRef"]["kind"].as_str().unwrap_or_default();
                    let role_name = v["roleRef"]["name"].as_str().unwrap_or_default();
                    let (id, namespace) = match kind {
                        "RoleBinding" => (format!("{kind}/{ns}/{name}"), Some(ns.to_string())),
                        _ => (format!("{kind}/{name}"), None),
                    };
                    let role_ns = match role_kind {
                        "Role" => ns.to_string(),
                        _ => String::new(),
                    };
                    rbac.bindings.push(Binding {
                        id,
                        namespace,
                        role: (role_kind.to_string(), role_ns, role_name.to_string()),
                        subjects: v["subjects"].as_array().cloned().unwrap_or_default(),
                    });
                }
                _ => {}
            }
        }
        rbac
    }

    /// Every rule granted to `user`, with where it applies. A binding to a role that does not
    /// exist grants nothing, as on a real server.
    pub fn grants(&self, user: &UserInfo) -> Vec<Grant> {
        let mut out = Vec::new();
        for b in &self.bindings {
            let Some(subject) = b.subject_of(user) else {
                continue;
            };
            // A RoleBinding may refer only to a Role of its own namespace or a ClusterRole; a
            // ClusterRoleBinding only to a ClusterRole.
            if b.namespace.is_none() && b.role.0 != "ClusterRole" {
                continue;
            }
            let Some(rules) = self.roles.get(&b.role) else {
                continue;
            };
            let source = format!(
                "{} of {} {:?} to {subject}",
                b.describe(),
                b.role.0,
                b.role.2
            );
            out.extend(rules.iter().enumerate().map(|(index, rule)| Grant {
                rule: rule.clone(),
                namespace: b.namespace.clone(),
                binding: b.id.clone(),
                role: b.role.clone(),
                index,
                source: source.clone(),
            }));
        }
        out
    }

    /// The first grant that allows `user` the request, if any.
    pub fn authorize(&self, user: &UserInfo, attrs: &Attributes) -> Option<Grant> {
        self.grants(user).into_iter().find(|g| g.allows(attrs))
    }
}

#[cfg(test)]
mod tests;
