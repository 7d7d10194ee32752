//! The checker itself: it must be able to fail. Each case is a request log and a policy in
//! memory, and what the checker must say about them.

use crate::support::rbac::{self, Attributes, Policy};
use imagegate_emulator::control::RequestRecord;

const SA: &str = "system:serviceaccount:imagegate-system:test";

fn record(method: &str, path: &str, query: &str) -> RequestRecord {
    RequestRecord {
        method: method.into(),
        path: path.into(),
        query: query.into(),
        verb: String::new(),
        group: String::new(),
        resource: String::new(),
        subresource: String::new(),
        namespace: String::new(),
        name: String::new(),
        user_agent: String::new(),
        user: SA.into(),
        code: 200,
    }
}

const BINDINGS: &str = r#"
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: test}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: test}
subjects:
- {kind: ServiceAccount, name: test, namespace: imagegate-system}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: test, namespace: imagegate-system}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: test}
subjects:
- {kind: ServiceAccount, name: test}
"#;

const ROLES: &str = r#"
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: test}
rules:
# core
- apiGroups: [""]
  resources: ["configmaps"]
  verbs:
  - list   # read them
- apiGroups: ["tekton.dev"]
  resources: ["customruns/status"]
  verbs:
  - update # write the status
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: test, namespace: imagegate-system}
rules:
- apiGroups: ["coordination.k8s.io"]
  resources: ["leases"]
  resourceNames: ["mine"]
  verbs:
  - get    # read it
  - update # write it
"#;

fn test_policy() -> Policy {
    let mut p = Policy::default();
    p.add("roles.yaml", ROLES);
    p.add("bindings.yaml", BINDINGS);
    p
}

fn denied(requests: &[RequestRecord]) -> Vec<String> {
    rbac::audit(&test_policy(), requests, SA, SA).denied
}

#[test]
fn a_request_no_rule_grants_is_rejected_and_named() {
    let delete = record("DELETE", "/api/v1/namespaces/ds/configmaps/cm", "");
    let problems = denied(&[
        record("GET", "/api/v1/namespaces/ds/configmaps", "limit=500"),
        delete,
    ]);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(
        problems[0].contains("DELETE /api/v1/namespaces/ds/configmaps/cm")
            && problems[0].contains("verb=delete"),
        "{}",
        problems[0]
    );
}

#[test]
fn a_role_allows_only_in_its_namespace_and_only_the_names_it_lists() {
    let lease = |ns: &str, name: &str| {
        record(
            "PUT",
            &format!("/apis/coordination.k8s.io/v1/namespaces/{ns}/leases/{name}"),
            "",
        )
    };
    assert!(denied(&[lease("imagegate-system", "mine")]).is_empty());
    assert_eq!(denied(&[lease("other", "mine")]).len(), 1);
    assert_eq!(denied(&[lease("imagegate-system", "theirs")]).len(), 1);
    // A create has no name, so resourceNames never allow it.
    let create = record(
        "POST",
        "/apis/coordination.k8s.io/v1/namespaces/imagegate-system/leases",
        "",
    );
    assert_eq!(denied(&[create]).len(), 1);
}

#[test]
fn a_subresource_is_granted_apart_from_its_resource() {
    let status = record(
        "PUT",
        "/apis/tekton.dev/v1beta1/namespaces/ds/customruns/r/status",
        "",
    );
    let spec = record(
        "PUT",
        "/apis/tekton.dev/v1beta1/namespaces/ds/customruns/r",
        "",
    );
    assert!(denied(&[status]).is_empty());
    assert_eq!(denied(&[spec]).len(), 1);
}

#[test]
fn a_grant_never_used_fails_unless_its_comment_says_why() {
    let used = [record("GET", "/api/v1/configmaps", "")];
    let a = rbac::audit(&test_policy(), &used, SA, SA);
    assert_eq!(a.unused.len(), 3, "{:?}", a.unused);
    assert!(a.unused.iter().any(|u| u.contains("customruns/status")));

    let marked = ROLES.replace("# write the status", "# unused-in-tests: no run here");
    let mut p = Policy::default();
    p.add("roles.yaml", &marked);
    p.add("bindings.yaml", BINDINGS);
    let a = rbac::audit(&p, &used, SA, SA);
    assert_eq!(a.unused.len(), 2, "{:?}", a.unused);
    assert!(p.convention_problems().is_empty());

    // A marker on a verb that is used is stale.
    let stale = ROLES.replace("# read them", "# unused-in-tests: never");
    let mut p = Policy::default();
    p.add("roles.yaml", &stale);
    p.add("bindings.yaml", BINDINGS);
    assert_eq!(rbac::audit(&p, &used, SA, SA).stale_markers.len(), 1);

    // A marker without a reason breaks the convention.
    let bare = ROLES.replace("# read them", "# unused-in-tests:");
    let mut p = Policy::default();
    p.add("roles.yaml", &bare);
    assert_eq!(p.convention_problems().len(), 1);
}

#[test]
fn rules_that_break_the_conventions_are_reported() {
    let cases = [
        ("verbs: [get]", "as a block list"),
        ("verbs:\n  - get\n", "has no `# why` comment"),
        ("verbs:\n  - '*' # all", "a wildcard"),
        ("verbs:\n  - get # unused-in-tests:", "needs the reason"),
    ];
    for (verbs, want) in cases {
        let text = format!(
            "kind: ClusterRole\nmetadata: {{name: x}}\nrules:\n- apiGroups: [\"\"]\n  resources: [\"configmaps\"]\n  {verbs}\n"
        );
        let mut p = Policy::default();
        p.add("x.yaml", &text);
        let problems = p.convention_problems();
        assert!(
            problems.iter().any(|m| m.contains(want)),
            "{verbs:?} should be reported ({want}): {problems:?}"
        );
    }
    let two_groups = "kind: ClusterRole\nmetadata: {name: x}\nrules:\n- apiGroups: [\"\", \"apps\"]\n  resources: [\"configmaps\"]\n  verbs:\n  - get  # why\n";
    let mut p = Policy::default();
    p.add("x.yaml", two_groups);
    assert_eq!(p.convention_problems().len(), 1);
}

#[test]
fn requests_are_authorized_as_the_api_server_sees_them() {
    let res = |verb: &str, group: &str, resource: &str, sub: &str, ns: &str, name: &str| {
        Attributes::Resource {
            verb: verb.into(),
            group: group.into(),
            resource: resource.into(),
            subresource: sub.into(),
            namespace: ns.into(),
            name: name.into(),
        }
    };
    let cases = [
        (
            (
                "GET",
                "/apis/image.openshift.io/v1/imagestreams",
                "limit=500",
            ),
            res("list", "image.openshift.io", "imagestreams", "", "", ""),
        ),
        (
            (
                "GET",
                "/apis/image.openshift.io/v1/namespaces/ns/imagestreams",
                "watch=true&resourceVersion=5",
            ),
            res("watch", "image.openshift.io", "imagestreams", "", "ns", ""),
        ),
        (
            ("GET", "/api/v1/watch/namespaces/ns/configmaps", ""),
            res("watch", "", "configmaps", "", "ns", ""),
        ),
        (
            (
                "GET",
                "/apis/coordination.k8s.io/v1/namespaces/ns/leases",
                "fieldSelector=metadata.name%3Dl",
            ),
            res("list", "coordination.k8s.io", "leases", "", "ns", "l"),
        ),
        (
            (
                "GET",
                "/apis/image.openshift.io/v1/namespaces/ds/imagestreamimages/nb%40sha256:ab",
                "",
            ),
            res(
                "get",
                "image.openshift.io",
                "imagestreamimages",
                "",
                "ds",
                "nb@sha256:ab",
            ),
        ),
        (
            (
                "PUT",
                "/apis/tekton.dev/v1beta1/namespaces/ds/customruns/r/status",
                "",
            ),
            res("update", "tekton.dev", "customruns", "status", "ds", "r"),
        ),
        (
            (
                "PATCH",
                "/apis/events.k8s.io/v1/namespaces/ds/events/e.1",
                "",
            ),
            res("patch", "events.k8s.io", "events", "", "ds", "e.1"),
        ),
        (
            ("POST", "/api/v1/namespaces/ns/configmaps", ""),
            res("create", "", "configmaps", "", "ns", ""),
        ),
        (
            ("DELETE", "/api/v1/namespaces/ns/configmaps", ""),
            res("deletecollection", "", "configmaps", "", "ns", ""),
        ),
        (
            ("GET", "/api/v1/namespaces/ns", ""),
            res("get", "", "namespaces", "", "ns", "ns"),
        ),
        (
            ("PUT", "/api/v1/namespaces/ns/finalize", ""),
            res("update", "", "namespaces", "finalize", "ns", "ns"),
        ),
    ];
    for ((method, path, query), want) in cases {
        assert_eq!(
            rbac::attributes_of(method, path, query),
            want,
            "{method} {path}?{query}"
        );
    }
    for path in ["/apis", "/api/v1", "/apis/tekton.dev/v1beta1", "/version"] {
        assert_eq!(
            rbac::attributes_of("GET", path, ""),
            Attributes::NonResource {
                verb: "get".into(),
                path: path.into()
            }
        );
    }
    // Discovery is open to every authenticated user; anything else off the API is not.
    assert!(denied(&[record("GET", "/apis/tekton.dev/v1beta1", "")]).is_empty());
    assert_eq!(denied(&[record("GET", "/metrics", "")]).len(), 1);
}
