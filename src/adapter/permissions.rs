//! May an ImageStreamSource's service account read what the source selects? One adapter
//! serves every source with its own identity, so before it serves one it asks, as Knative's
//! ApiServerSource reconciler does (`runAccessCheck`), one SubjectAccessReview per verb
//! (`get`, `list`, `watch`) on `imagestreams.image.openshift.io` per selected namespace (or
//! once cluster-wide, when every namespace is selected). A tenant can therefore never read
//! streams its own service account could not. [`reviews`] and [`verdict`] are pure; [`check`]
//! asks ([`crate::access`]).

use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewStatus,
};

use crate::access::{self, ServiceAccount};
use crate::adapter::crd::status::reason;

/// The verbs the adapter's watch needs, in the order they are asked and named.
pub const VERBS: [&str; 3] = ["get", "list", "watch"];
/// The API group of ImageStreams.
pub const GROUP: &str = "image.openshift.io";
/// The resource.
pub const RESOURCE: &str = "imagestreams";

/// Where a source reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Scope {
    /// Every namespace (an empty `namespaceSelector`): asked once, cluster-wide.
    All,
    /// These namespaces.
    Namespaces(Vec<String>),
}

/// The most namespaces asked about one by one; a source that selects more is asked about once,
/// cluster-wide (three reviews instead of thousands, whoever its selector matches: F-9), and is
/// served only if its account may read ImageStreams everywhere.
pub const MAX_REVIEWED_NAMESPACES: usize = 100;

/// Reviews of one source in flight at once: a source's reviews run concurrently, within this
/// budget, so a source with many namespaces is done soon without taking more than its share
/// of the API server (the adapter bounds the sources observed at once, first come first
/// served).
pub const REVIEWS_IN_FLIGHT: usize = 4;

/// Whether a change of RBAC in `namespace` (None: cluster-wide objects) could change what the
/// reviews of a source over `scope` answer (pure): a cluster-wide change could change any; a
/// Role or RoleBinding only those asked about in its namespace (never a cluster-wide review,
/// which no RoleBinding grants).
pub fn affected_by(scope: &Scope, namespace: Option<&str>) -> bool {
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
pub struct Question {
    /// The namespace asked about.
    pub namespace: String,
    /// The verb asked about.
    pub verb: &'static str,
    /// The review.
    pub review: SubjectAccessReview,
}

/// The reviews to ask for `account` over `scope`: each namespace, each of [`VERBS`].
pub fn reviews(account: &ServiceAccount, scope: &Scope) -> Vec<Question> {
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
pub struct Verdict {
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
pub fn verdict(
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

/// Asks every review of `account` over `scope` and gives the verdict. A review that cannot be
/// asked is an error (the condition is then Unknown, and the check retried).
pub async fn check(
    client: &kube::Client,
    account: &ServiceAccount,
    scope: &Scope,
    named: &[String],
) -> Result<Verdict, kube::Error> {
    Ok(check_each(client, account, scope, named).await?.0)
}

/// [`check`], with the namespaces where a review was refused (`""`: cluster-wide), which the
/// multi-tenant adapter leaves out of what the source is served.
pub async fn check_each(
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
pub fn denied(answers: &[(Question, SubjectAccessReviewStatus)]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for (question, status) in answers {
        if !access::allowed(status) && !out.contains(&question.namespace) {
            out.push(question.namespace.clone());
        }
    }
    out
}

#[cfg(test)]
mod tests;
