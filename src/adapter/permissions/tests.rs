//! The reviews a source's permission check asks, and what their answers make of the
//! `SufficientPermissions` condition.

use serde_json::json;

use super::*;

fn account() -> ServiceAccount {
    ServiceAccount::or_default("ds", Some("watcher"))
}

fn answered(
    questions: Vec<Question>,
    refuse: &[(&str, &str)],
) -> Vec<(Question, SubjectAccessReviewStatus)> {
    questions
        .into_iter()
        .map(|q| {
            let refused = refuse
                .iter()
                .any(|(ns, verb)| *ns == q.namespace && *verb == q.verb);
            let status = SubjectAccessReviewStatus {
                allowed: !refused,
                reason: refused.then(|| "no RBAC policy matched".to_owned()),
                ..Default::default()
            };
            (q, status)
        })
        .collect()
}

#[test]
fn each_verb_is_asked_in_each_namespace_for_the_sources_account() {
    let scope = Scope::Namespaces(vec!["ds".into(), "ml".into()]);
    let questions = reviews(&account(), &scope);
    let asked: Vec<(&str, &str)> = questions
        .iter()
        .map(|q| (q.namespace.as_str(), q.verb))
        .collect();
    assert_eq!(
        asked,
        [
            ("ds", "get"),
            ("ds", "list"),
            ("ds", "watch"),
            ("ml", "get"),
            ("ml", "list"),
            ("ml", "watch")
        ]
    );
    assert_eq!(
        serde_json::to_value(&questions[4].review).unwrap(),
        json!({
            "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
            "metadata": {},
            "spec": {
                "user": "system:serviceaccount:ds:watcher",
                "groups": ["system:serviceaccounts", "system:serviceaccounts:ds", "system:authenticated"],
                "resourceAttributes": {"namespace": "ml", "verb": "list", "group": "image.openshift.io", "resource": "imagestreams"}
            }
        })
    );
}

#[test]
fn every_namespace_is_asked_once_cluster_wide() {
    let questions = reviews(&account(), &Scope::All);
    assert_eq!(questions.len(), 3);
    for q in &questions {
        let attrs = q.review.spec.resource_attributes.as_ref().unwrap();
        assert_eq!(
            attrs.namespace, None,
            "a cluster-wide review has no namespace"
        );
    }
}

#[test]
fn all_allowed_is_sufficient() {
    let scope = Scope::Namespaces(vec!["ds".into()]);
    let v = verdict(&account(), &answered(reviews(&account(), &scope), &[]), &[]);
    assert_eq!(
        v,
        Verdict {
            sufficient: true,
            reason: reason::PERMITTED,
            message: String::new()
        }
    );
}

#[test]
fn a_refusal_names_the_namespace_and_the_verbs() {
    let scope = Scope::Namespaces(vec!["ds".into(), "ml".into(), "ops".into()]);
    let answers = answered(
        reviews(&account(), &scope),
        &[("ml", "list"), ("ml", "watch"), ("ops", "get")],
    );
    let named = ["ml".to_string(), "ops".to_string()];
    let v = verdict(&account(), &answers, &named);
    assert!(!v.sufficient);
    assert_eq!(v.reason, reason::INSUFFICIENT_PERMISSIONS);
    assert_eq!(
        v.message,
        "service account \"ds/watcher\" (system:serviceaccount:ds:watcher) may not read \
         imagestreams.image.openshift.io: it lacks list, watch in namespace \"ml\" (the API \
         server says: no RBAC policy matched); and get in namespace \"ops\" (the API server \
         says: no RBAC policy matched); grant it get, list and watch on imagestreams \
         (image.openshift.io) there, for example with a RoleBinding per namespace, or select \
         fewer namespaces"
    );
}

#[test]
fn a_cluster_wide_refusal_says_so() {
    let answers = answered(reviews(&account(), &Scope::All), &[("", "watch")]);
    let v = verdict(&account(), &answers, &[]);
    assert!(
        v.message
            .contains("it lacks watch cluster-wide (every namespace is selected"),
        "{}",
        v.message
    );
}

#[test]
fn a_namespace_the_selector_found_is_counted_never_named() {
    let scope = Scope::Namespaces(vec!["ds".into(), "secret-team".into(), "other".into()]);
    let answers = answered(
        reviews(&account(), &scope),
        &[("secret-team", "get"), ("other", "list"), ("ds", "watch")],
    );
    let v = verdict(&account(), &answers, &["ds".to_string()]);
    assert!(!v.sufficient);
    assert!(
        !v.message.contains("secret-team") && !v.message.contains("other"),
        "{}",
        v.message
    );
    assert!(
        v.message.contains("watch in namespace \"ds\""),
        "{}",
        v.message
    );
    assert!(
        v.message
            .contains("a verb in 2 namespaces its namespaceSelector selects"),
        "{}",
        v.message
    );
    assert_eq!(
        denied(&answers),
        ["ds", "secret-team", "other"],
        "the log has them all"
    );
}

#[test]
fn a_selection_of_more_than_the_bound_is_asked_about_once_cluster_wide() {
    let many: Vec<String> = (0..=MAX_REVIEWED_NAMESPACES)
        .map(|i| format!("n{i}"))
        .collect();
    let questions = reviews(&account(), &Scope::Namespaces(many.clone()));
    assert_eq!(questions.len(), 3, "three reviews, not {}", 3 * many.len());
    assert!(questions.iter().all(|q| q.namespace.is_empty()));
    let v = verdict(&account(), &answered(questions, &[("", "list")]), &[]);
    assert!(
        v.message
            .contains("cluster-wide (every namespace is selected, or more than 100"),
        "{}",
        v.message
    );
    let few = reviews(&account(), &Scope::Namespaces(many[..100].to_vec()));
    assert_eq!(few.len(), 300, "up to the bound, one by one");
}

#[test]
fn an_rbac_change_concerns_the_sources_asked_about_its_namespace_or_any_when_cluster_wide() {
    let few = Scope::Namespaces(vec!["ds".into(), "ml".into()]);
    assert!(affected_by(&few, Some("ml")));
    assert!(!affected_by(&few, Some("ops")));
    assert!(
        affected_by(&few, None),
        "a ClusterRole(Binding) can change any"
    );
    // Asked about cluster-wide: no RoleBinding changes that answer.
    assert!(!affected_by(&Scope::All, Some("ds")));
    assert!(affected_by(&Scope::All, None));
    let many = Scope::Namespaces(
        (0..=MAX_REVIEWED_NAMESPACES)
            .map(|i| format!("n{i}"))
            .collect(),
    );
    assert!(!affected_by(&many, Some("n1")), "asked about cluster-wide");
    assert!(affected_by(&many, None));
}
