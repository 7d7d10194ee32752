//! Who may do what, asked of the API server with SubjectAccessReviews on behalf of a service
//! account: the part the controller (may a run's account `promote`?) and the source (may an
//! ImageStreamSource's account read the streams it selects?) share. The reviews are built
//! pure ([`ServiceAccount::review`]); [`ask`] is the one call.

use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec, SubjectAccessReviewStatus,
};
use kube::api::{Api, PostParams};

/// The service account used when an object names none (Kubernetes' and Tekton's default).
pub(crate) const DEFAULT_SERVICE_ACCOUNT: &str = "default";

/// A service account, by namespace and name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ServiceAccount {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
}

impl ServiceAccount {
    /// `name` in `namespace`, or `default` when `name` is None or empty.
    pub(crate) fn or_default(namespace: &str, name: Option<&str>) -> ServiceAccount {
        ServiceAccount {
            namespace: namespace.to_owned(),
            name: name
                .filter(|n| !n.is_empty())
                .unwrap_or(DEFAULT_SERVICE_ACCOUNT)
                .to_owned(),
        }
    }

    /// Its user name, `system:serviceaccount:NAMESPACE:NAME`.
    pub(crate) fn user(&self) -> String {
        format!("system:serviceaccount:{}:{}", self.namespace, self.name)
    }

    /// `NAMESPACE/NAME`, as messages name it.
    pub(crate) fn describe(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// The groups its token carries, so that bindings to them count as they would for its
    /// requests.
    pub(crate) fn groups(&self) -> Vec<String> {
        vec![
            "system:serviceaccounts".to_string(),
            format!("system:serviceaccounts:{}", self.namespace),
            "system:authenticated".to_string(),
        ]
    }

    /// The review asking whether it may do `attributes`.
    pub(crate) fn review(&self, attributes: ResourceAttributes) -> SubjectAccessReview {
        SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: Some(self.user()),
                groups: Some(self.groups()),
                resource_attributes: Some(attributes),
                ..Default::default()
            },
            ..Default::default()
        }
    }
}

/// Whether an answered review allows the request (allowed, and not explicitly denied).
pub(crate) fn allowed(status: &SubjectAccessReviewStatus) -> bool {
    status.allowed && status.denied != Some(true)
}

/// What the API server said about a refusal (its reason and evaluation error, the non-empty
/// ones), to quote in a message.
pub(crate) fn said(status: &SubjectAccessReviewStatus) -> Vec<&str> {
    [&status.reason, &status.evaluation_error]
        .into_iter()
        .flatten()
        .map(String::as_str)
        .filter(|s| !s.is_empty())
        .collect()
}

/// Asks `review`; the answer's status (an empty one, which allows nothing, if the API server
/// sent none).
pub(crate) async fn ask(
    client: &kube::Client,
    review: &SubjectAccessReview,
) -> Result<SubjectAccessReviewStatus, kube::Error> {
    let reviews: Api<SubjectAccessReview> = Api::all(client.clone());
    let answered = reviews.create(&PostParams::default(), review).await?;
    Ok(answered.status.unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unnamed_account_is_default_and_its_review_carries_its_groups() {
        let sa = ServiceAccount::or_default("ds", Some(""));
        assert_eq!(sa.user(), "system:serviceaccount:ds:default");
        let review = sa.review(ResourceAttributes {
            verb: Some("list".into()),
            ..Default::default()
        });
        let spec = review.spec;
        assert_eq!(
            spec.user.as_deref(),
            Some("system:serviceaccount:ds:default")
        );
        assert_eq!(
            spec.groups.unwrap(),
            [
                "system:serviceaccounts",
                "system:serviceaccounts:ds",
                "system:authenticated"
            ]
        );
    }

    #[test]
    fn a_denial_wins_over_an_allowance_and_only_non_empty_words_are_quoted() {
        let status = SubjectAccessReviewStatus {
            allowed: true,
            denied: Some(true),
            reason: Some(String::new()),
            evaluation_error: Some("webhook down".into()),
        };
        assert!(!allowed(&status));
        assert_eq!(said(&status), ["webhook down"]);
        assert!(allowed(&SubjectAccessReviewStatus {
            allowed: true,
            ..Default::default()
        }));
    }
}
