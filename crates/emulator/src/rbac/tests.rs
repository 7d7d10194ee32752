//! The evaluator's rules, each as the real authorizer applies it.

use super::*;
use serde_json::json;

fn res(verb: &str, group: &str, resource: &str, ns: &str, name: &str) -> Attributes {
    let (resource, subresource) = resource.split_once('/').unwrap_or((resource, ""));
    Attributes::Resource {
        verb: verb.into(),
        group: group.into(),
        resource: resource.into(),
        subresource: subresource.into(),
        namespace: ns.into(),
        name: name.into(),
    }
}

fn rbac() -> Rbac {
    let objects = [
        json!({"kind": "ClusterRole", "metadata": {"name": "promoter"},
               "rules": [{"apiGroups": ["imagegate.dev"], "resources": ["imagepromotions"], "verbs": ["promote"]}]}),
        json!({"kind": "ClusterRole", "metadata": {"name": "status-writer"},
               "rules": [{"apiGroups": ["*"], "resources": ["*/status"], "verbs": ["update"]}]}),
        json!({"kind": "ClusterRole", "metadata": {"name": "discovery"},
               "rules": [{"nonResourceURLs": ["/apis/*"], "verbs": ["get"]}]}),
        json!({"kind": "Role", "metadata": {"name": "lease", "namespace": "sys"},
               "rules": [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                          "resourceNames": ["mine"], "verbs": ["get", "update"]}]}),
        // The pipeline's service account may promote in ds only; the subject has no namespace,
        // so it is the binding's.
        json!({"kind": "RoleBinding", "metadata": {"name": "p", "namespace": "ds"},
               "roleRef": {"kind": "ClusterRole", "name": "promoter"},
               "subjects": [{"kind": "ServiceAccount", "name": "pipeline"}]}),
        json!({"kind": "ClusterRoleBinding", "metadata": {"name": "w"},
               "roleRef": {"kind": "ClusterRole", "name": "status-writer"},
               "subjects": [{"kind": "Group", "name": "writers"}]}),
        json!({"kind": "ClusterRoleBinding", "metadata": {"name": "d"},
               "roleRef": {"kind": "ClusterRole", "name": "discovery"},
               "subjects": [{"kind": "User", "name": "alice"}]}),
        json!({"kind": "RoleBinding", "metadata": {"name": "l", "namespace": "sys"},
               "roleRef": {"kind": "Role", "name": "lease"},
               "subjects": [{"kind": "ServiceAccount", "name": "ctl", "namespace": "sys"}]}),
        // A ClusterRoleBinding cannot grant a Role, and a binding to a missing role grants nothing.
        json!({"kind": "ClusterRoleBinding", "metadata": {"name": "bad"},
               "roleRef": {"kind": "Role", "name": "lease"},
               "subjects": [{"kind": "User", "name": "alice"}]}),
        json!({"kind": "RoleBinding", "metadata": {"name": "gone", "namespace": "ds"},
               "roleRef": {"kind": "ClusterRole", "name": "no-such-role"},
               "subjects": [{"kind": "User", "name": "alice"}]}),
        json!({"kind": "ConfigMap", "metadata": {"name": "ignored"}}),
    ];
    Rbac::from_objects(&objects)
}

fn allowed(user: &str, attrs: &Attributes) -> bool {
    rbac()
        .authorize(&UserInfo::authenticated(user), attrs)
        .is_some()
}

#[test]
fn a_service_account_gets_its_groups_and_every_user_is_authenticated() {
    let sa = UserInfo::authenticated("system:serviceaccount:ds:pipeline");
    assert_eq!(
        sa.groups,
        [
            "system:serviceaccounts",
            "system:serviceaccounts:ds",
            "system:authenticated"
        ]
    );
    assert_eq!(
        UserInfo::authenticated("alice").groups,
        ["system:authenticated"]
    );
}

#[test]
fn a_rolebinding_of_a_clusterrole_grants_only_in_its_namespace() {
    let promote = |ns: &str| res("promote", "imagegate.dev", "imagepromotions", ns, "nb");
    let pipeline = "system:serviceaccount:ds:pipeline";
    assert!(allowed(pipeline, &promote("ds")));
    assert!(!allowed(pipeline, &promote("other")));
    assert!(!allowed(pipeline, &promote("")));
    // The same name in another namespace is another service account.
    assert!(!allowed(
        "system:serviceaccount:other:pipeline",
        &promote("ds")
    ));
    assert!(!allowed(
        pipeline,
        &res("get", "imagegate.dev", "imagepromotions", "ds", "nb")
    ));
}

#[test]
fn groups_wildcards_and_subresources_match_as_rbac_matches_them() {
    let writer = UserInfo {
        name: "bob".into(),
        groups: vec!["writers".into()],
    };
    let status = res("update", "tekton.dev", "customruns/status", "ds", "r");
    assert!(rbac().authorize(&writer, &status).is_some());
    // `*/status` is every status subresource, never the resource itself.
    assert!(
        rbac()
            .authorize(
                &writer,
                &res("update", "tekton.dev", "customruns", "ds", "r")
            )
            .is_none()
    );
    assert!(!allowed("bob", &status), "bob alone is not in the group");
}

#[test]
fn resource_names_allow_only_those_names_and_never_a_create() {
    let ctl = "system:serviceaccount:sys:ctl";
    assert!(allowed(
        ctl,
        &res("update", "coordination.k8s.io", "leases", "sys", "mine")
    ));
    assert!(!allowed(
        ctl,
        &res("update", "coordination.k8s.io", "leases", "sys", "theirs")
    ));
    assert!(!allowed(
        ctl,
        &res("create", "coordination.k8s.io", "leases", "sys", "")
    ));
}

#[test]
fn non_resource_urls_match_by_prefix_through_a_clusterrolebinding() {
    let get = |path: &str| Attributes::NonResource {
        verb: "get".into(),
        path: path.into(),
    };
    assert!(allowed("alice", &get("/apis/tekton.dev/v1")));
    assert!(!allowed("alice", &get("/metrics")));
    let grant = rbac()
        .authorize(&UserInfo::authenticated("alice"), &get("/apis/x"))
        .unwrap();
    assert_eq!(grant.binding, "ClusterRoleBinding/d");
}

#[test]
fn bindings_to_roles_they_cannot_name_or_that_do_not_exist_grant_nothing() {
    let grants = rbac().grants(&UserInfo::authenticated("alice"));
    let bindings: Vec<&str> = grants.iter().map(|g| g.binding.as_str()).collect();
    assert_eq!(bindings, ["ClusterRoleBinding/d"]);
}

#[test]
fn a_grant_names_its_binding_role_and_rule_and_says_so_in_the_reason() {
    let user = UserInfo::authenticated("system:serviceaccount:ds:pipeline");
    let grant = rbac()
        .authorize(
            &user,
            &res("promote", "imagegate.dev", "imagepromotions", "ds", "x"),
        )
        .unwrap();
    assert_eq!(grant.binding, "RoleBinding/ds/p");
    assert_eq!(
        grant.role,
        ("ClusterRole".into(), String::new(), "promoter".into())
    );
    assert_eq!((grant.index, grant.namespace.as_deref()), (0, Some("ds")));
    assert_eq!(
        grant.reason(),
        "RBAC: allowed by RoleBinding \"p/ds\" of ClusterRole \"promoter\" to ServiceAccount \"pipeline/ds\""
    );
}

#[test]
fn attributes_read_like_the_api_servers_audit_log() {
    assert_eq!(
        res("update", "tekton.dev", "customruns/status", "ds", "r").to_string(),
        "verb=update apiGroup=\"tekton.dev\" resource=customruns/status namespace=ds name=r"
    );
    assert_eq!(
        res("list", "", "configmaps", "", "").to_string(),
        "verb=list apiGroup=\"\" resource=configmaps namespace=(none) name=(none)"
    );
}
