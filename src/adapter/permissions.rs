//! May an ImageStreamSource's service account read what the source selects? One adapter
//! serves every source with its own identity, so before it serves one it asks, as Knative's
//! ApiServerSource reconciler does (`runAccessCheck`), one SubjectAccessReview per verb
//! (`get`, `list`, `watch`) on `imagestreams.image.openshift.io` per selected namespace (or
//! once cluster-wide, when every namespace is selected). A tenant can therefore never read
//! streams its own service account could not. [`reviews`] and [`verdict`] are pure; the
//! adapter's observation asks them ([`crate::access`]).

use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewStatus,
};

use crate::access::{self, ServiceAccount};
use crate::adapter::crd::status::reason;

/// The verbs the adapter's watch needs, in the order they are asked and named.
pub(crate) const VERBS: [&str; 3] = ["get", "list", "watch"];
/// The API group of ImageStreams.
pub(crate) const GROUP: &str = "image.openshift.io";
/// The resource.
pub(crate) const RESOURCE: &str = "imagestreams";

/// Where a source reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Scope {
    /// Every namespace (an empty `namespaceSelector`): asked once, cluster-wide.
    All,
    /// These namespaces.
    Namespaces(Vec<String>),
}

/// The most namespaces asked about one by one; a source that selects more is asked about once,
/// cluster-wide (three reviews instead of thousands, whoever its selector matches: F-9), and is
/// served only if its account may read ImageStreams everywhere.
pub(crate) const MAX_REVIEWED_NAMESPACES: usize = 100;

/// Reviews of one source in flight at once: a source's reviews run concurrently, within this
/// budget, so a source with many namespaces is done soon without taking more than its share
/// of the API server (the adapter bounds the sources observed at once, first come first
/// served).
pub(crate) const REVIEWS_IN_FLIGHT: usize = 4;

/// Whether a change of RBAC in `namespace` (None: cluster-wide objects) could change what the
/// reviews of a source over `scope` answer (pure): a cluster-wide change could change any; a
/// Role or RoleBinding only those asked about in its namespace (never a cluster-wide review,
/// which no RoleBinding grants).
pub(crate) fn affected_by(scope: &Scope, namespace: Option<&str>) -> bool {
    let Some(namespace) = namespace else {
        return true;
    };
    scope.namespaces().iter().any(|n| n == namespace)
}

impl Scope {
    /// The namespaces to ask about; `""` is cluster-wide.
    fn namespaces(&self) -> Vec<String> {
        match self {
            Scope::Namespaces(names) if names.len() <= MAX_REVIEWED_NAMESPACES => names.clone(),
            _ => vec![String::new()],
        }
    }
}

/// One review to ask: about `verb` in `namespace` (`""`: cluster-wide).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Question {
    /// The namespace asked about.
    pub namespace: String,
    /// The verb asked about.
    pub verb: &'static str,
    /// The review.
    pub review: SubjectAccessReview,
}

/// The reviews to ask for `account` over `scope`: each namespace, each of [`VERBS`].
pub(crate) fn reviews(account: &ServiceAccount, scope: &Scope) -> Vec<Question> {
    let mut questions = Vec::new();
    for namespace in scope.namespaces() {
        for verb in VERBS {
            let review = account.review(ResourceAttributes {
                namespace: Some(namespace.clone()).filter(|n| !n.is_empty()),
                verb: Some(verb.to_owned()),
                group: Some(GROUP.to_owned()),
                resource: Some(RESOURCE.to_owned()),
                ..Default::default()
            });
            questions.push(Question {
                namespace: namespace.clone(),
                verb,
                review,
            });
        }
    }
    questions
}

/// What the reviews said, as the `SufficientPermissions` condition shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Verdict {
    /// Every review allowed.
    pub sufficient: bool,
    /// [`reason::PERMITTED`] or [`reason::INSUFFICIENT_PERMISSIONS`].
    pub reason: &'static str,
    /// Empty when sufficient; else which verbs are missing where, and what to grant.
    pub message: String,
}

/// The verdict of the `answers` to [`reviews`] for `account`, for the source's status: it names
/// only the namespaces of `named` (those the tenant named itself, and its own); a namespace its
/// `namespaceSelector` found is counted, never named, nor is what the API server said of it
/// (F-7: the status must not list namespaces the tenant cannot read). [`denied`] has them all,
/// for the adapter's log.
pub(crate) fn verdict(
    account: &ServiceAccount,
    answers: &[(Question, SubjectAccessReviewStatus)],
    named: &[String],
) -> Verdict {
    // Per namespace, in the order asked: the verbs refused, and what the API server said.
    let mut missing: Vec<(String, Vec<&str>, Vec<String>)> = Vec::new();
    for (question, status) in answers {
        if access::allowed(status) {
            continue;
        }
        let said = access::said(status).into_iter().map(str::to_owned);
        match missing
            .iter_mut()
            .find(|(ns, _, _)| *ns == question.namespace)
        {
            Some((_, verbs, words)) => {
                verbs.push(question.verb);
                words.extend(said);
            }
            None => missing.push((
                question.namespace.clone(),
                vec![question.verb],
                said.collect(),
            )),
        }
    }
    if missing.is_empty() {
        return Verdict {
            sufficient: true,
            reason: reason::PERMITTED,
            message: String::new(),
        };
    }
    let (shown, withheld): (Vec<_>, Vec<_>) = missing
        .into_iter()
        .partition(|(namespace, _, _)| namespace.is_empty() || named.contains(namespace));
    let mut parts: Vec<String> = shown
        .iter()
        .map(|(namespace, verbs, words)| {
            let place = if namespace.is_empty() {
                format!(
                    "cluster-wide (every namespace is selected, or more than \
                     {MAX_REVIEWED_NAMESPACES}, which are asked about at once)"
                )
            } else {
                format!("in namespace {namespace:?}")
            };
            let mut words = words.clone();
            words.dedup();
            let quoted = if words.is_empty() {
                String::new()
            } else {
                format!(" (the API server says: {})", words.join("; "))
            };
            format!("{} {place}{quoted}", verbs.join(", "))
        })
        .collect();
    if !withheld.is_empty() {
        parts.push(format!(
            "a verb in {} namespace{} its namespaceSelector selects (not named here: the \
             adapter's log names them for the platform)",
            withheld.len(),
            if withheld.len() == 1 { "" } else { "s" }
        ));
    }
    Verdict {
        sufficient: false,
        reason: reason::INSUFFICIENT_PERMISSIONS,
        message: format!(
            "service account {:?} ({}) may not read {RESOURCE}.{GROUP}: it lacks {}; grant it \
             get, list and watch on {RESOURCE} ({GROUP}) there, for example with a RoleBinding \
             per namespace, or select fewer namespaces",
            account.describe(),
            account.user(),
            parts.join("; and ")
        ),
    }
}

/// The reviews of a source's namespaces, asked, with the namespaces where a review was refused (`""`: cluster-wide), which the
/// multi-tenant adapter leaves out of what the source is served.
pub(crate) async fn check_each(
    client: &kube::Client,
    account: &ServiceAccount,
    scope: &Scope,
    named: &[String],
) -> Result<(Verdict, Vec<String>), kube::Error> {
    use futures::{StreamExt, TryStreamExt};
    let answers: Vec<(Question, SubjectAccessReviewStatus)> =
        futures::stream::iter(reviews(account, scope))
            .map(|question| async move {
                let status = access::ask(client, &question.review).await?;
                Ok::<_, kube::Error>((question, status))
            })
            .buffered(REVIEWS_IN_FLIGHT)
            .try_collect()
            .await?;
    Ok((verdict(account, &answers, named), denied(&answers)))
}

/// The namespaces of the `answers` that refused a verb, each once, in the order asked.
pub(crate) fn denied(answers: &[(Question, SubjectAccessReviewStatus)]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for (question, status) in answers {
        if !access::allowed(status) && !out.contains(&question.namespace) {
            out.push(question.namespace.clone());
        }
    }
    out
}

#[cfg(test)]
mod tests {
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
}
