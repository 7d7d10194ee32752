//! Who may make the controller write. The controller writes with its own identity, so before
//! any action that writes the served tag (every action: `begin`, `promote`, `reject`,
//! `rollback`) it asks the API server, with one SubjectAccessReview each, whether the run's own
//! service account may `promote` every ImagePromotion that governs the run's stream and the one
//! the run names (`customRef.name`); where there are none (a stream no ImagePromotion governs,
//! and an inline `customSpec` or params only), every ImagePromotion of the namespace. So a
//! `Role` with `resourceNames` limits an account to the streams its ImagePromotions govern. A
//! refusal ends the run `Forbidden`, saying which account lacks which permission, and nothing is
//! written. [`Promoter`] is the pure part: what is asked and what a refusal says;
//! the review itself is [`crate::access`]'s, shared with the source.

use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewStatus,
};
use kube::ResourceExt;

use crate::access::{self, ServiceAccount};
use crate::api::CustomRun;

use super::context::Context;
use super::error::Error;
use super::policy::Judged;
use super::status::{Outcome, reason};

/// The verb a promoter needs on `imagepromotions.imagegate.dev`.
pub(crate) const VERB: &str = "promote";
/// The API group of the ImagePromotion resource.
pub(crate) const GROUP: &str = "imagegate.dev";
/// The resource the verb is granted on.
pub(crate) const RESOURCE: &str = "imagepromotions";
/// The ClusterRole `config/` ships with the verb, named in refusals.
pub(crate) const PROMOTER_CLUSTERROLE: &str = "imagegate-promoter";

/// The identity a run acts for, and what it must be allowed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Promoter {
    /// The run's namespace.
    pub namespace: String,
    /// `spec.serviceAccountName`, or `default`.
    pub service_account: String,
    /// The ImagePromotions it needs the verb on ([`Judged::reviews`]); empty: every
    /// ImagePromotion of the namespace.
    pub imagepromotions: Vec<String>,
    /// The ImagePromotions among them that govern the run's stream, and the stream.
    pub governing: (Vec<String>, String),
}

impl Promoter {
    /// The promoter of `run`, judged as `judged`.
    pub(crate) fn of(run: &CustomRun, judged: &Judged) -> Promoter {
        let namespace = run.namespace().unwrap_or_default();
        let account =
            ServiceAccount::or_default(&namespace, run.spec.service_account_name.as_deref());
        Promoter {
            namespace,
            service_account: account.name,
            imagepromotions: judged.reviews.clone(),
            governing: (judged.governing.clone(), judged.request.imagestream.clone()),
        }
    }

    fn account(&self) -> ServiceAccount {
        ServiceAccount {
            namespace: self.namespace.clone(),
            name: self.service_account.clone(),
        }
    }

    /// The service account's user name.
    pub(crate) fn user(&self) -> String {
        self.account().user()
    }

    /// The reviews to ask, each about one ImagePromotion (one about every ImagePromotion of the
    /// namespace where there is none to name): the user with the groups its token would carry,
    /// the verb `promote`.
    pub(crate) fn reviews(&self) -> Vec<(Option<String>, SubjectAccessReview)> {
        let names: Vec<Option<String>> = match self.imagepromotions.as_slice() {
            [] => vec![None],
            names => names.iter().cloned().map(Some).collect(),
        };
        names
            .into_iter()
            .map(|name| {
                let review = self.account().review(ResourceAttributes {
                    namespace: Some(self.namespace.clone()),
                    verb: Some(VERB.to_string()),
                    group: Some(GROUP.to_string()),
                    resource: Some(RESOURCE.to_string()),
                    name: name.clone(),
                    ..Default::default()
                });
                (name, review)
            })
            .collect()
    }

    /// The outcome of a review refused for `name`: `Forbidden`, naming the account and the
    /// permission.
    pub(crate) fn refusal(
        &self,
        name: Option<&str>,
        status: &SubjectAccessReviewStatus,
    ) -> Outcome {
        let account = format!("{}/{}", self.namespace, self.service_account);
        let (governing, stream) = &self.governing;
        let what = match name {
            Some(name) if governing.iter().any(|g| g == name) => format!(
                "ImagePromotion {name:?} in namespace {:?} (it governs ImageStream {stream:?})",
                self.namespace
            ),
            Some(name) => format!(
                "ImagePromotion {name:?} in namespace {:?} (the run names it)",
                self.namespace
            ),
            None => format!(
                "every ImagePromotion of namespace {:?} (the run names no ImagePromotion and none \
                 governs ImageStream {stream:?})",
                self.namespace
            ),
        };
        let mut message = format!(
            "service account {account:?} may not promote: it needs the verb {VERB:?} on \
             {RESOURCE}.{GROUP} for {what}, for example through a RoleBinding of the ClusterRole \
             {PROMOTER_CLUSTERROLE} or a Role with resourceNames; nothing was written"
        );
        for said in access::said(status) {
            message.push_str(&format!(" (the API server says: {said})"));
        }
        Outcome::failed(reason::FORBIDDEN, message)
    }
}

/// Asks whether the run's service account may promote through every ImagePromotion that judges
/// it: `None` when it may, the `Forbidden` outcome of the first refusal when it may not. A failed
/// review is an API error (retried).
pub(crate) async fn authorize(
    run: &CustomRun,
    ctx: &Context,
    judged: &Judged,
) -> Result<Option<Outcome>, Error> {
    let promoter = Promoter::of(run, judged);
    for (name, review) in promoter.reviews() {
        let status =
            access::ask(&ctx.client, &review)
                .await
                .map_err(|source| Error::Authorize {
                    user: promoter.user(),
                    source,
                })?;
        if !access::allowed(&status) {
            return Ok(Some(promoter.refusal(name.as_deref(), &status)));
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn promoter(names: &[&str], governing: &[&str]) -> Promoter {
        Promoter {
            namespace: "ds".into(),
            service_account: "pipeline".into(),
            imagepromotions: names.iter().map(|n| n.to_string()).collect(),
            governing: (
                governing.iter().map(|n| n.to_string()).collect(),
                "nb".into(),
            ),
        }
    }

    #[test]
    fn each_imagepromotion_is_asked_about_by_name_for_the_runs_service_account() {
        let p = promoter(&["gov", "notebooks"], &["gov"]);
        let reviews = p.reviews();
        assert_eq!(reviews.len(), 2);
        assert_eq!(reviews[0].0.as_deref(), Some("gov"));
        let review = serde_json::to_value(&reviews[1].1).unwrap();
        assert_eq!(
            review,
            json!({
                "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
                "metadata": {},
                "spec": {
                    "user": "system:serviceaccount:ds:pipeline",
                    "groups": ["system:serviceaccounts", "system:serviceaccounts:ds", "system:authenticated"],
                    "resourceAttributes": {
                        "namespace": "ds", "verb": "promote", "group": "imagegate.dev",
                        "resource": "imagepromotions", "name": "notebooks"
                    }
                }
            })
        );
    }

    #[test]
    fn with_no_imagepromotion_to_name_the_review_is_about_every_one_of_the_namespace() {
        let reviews = promoter(&[], &[]).reviews();
        assert_eq!(reviews.len(), 1);
        let attrs = reviews[0].1.spec.resource_attributes.clone().unwrap();
        assert_eq!(attrs.name, None, "all ImagePromotions of the namespace");
    }

    #[test]
    fn the_default_account_is_the_runs_when_it_names_none() {
        let run: CustomRun = serde_json::from_value(json!({
            "apiVersion": "tekton.dev/v1beta1", "kind": "CustomRun",
            "metadata": {"name": "r", "namespace": "ds"},
            "spec": {"serviceAccountName": ""},
        }))
        .unwrap();
        let account = ServiceAccount::or_default("ds", run.spec.service_account_name.as_deref());
        assert_eq!(account.name, "default");
    }

    #[test]
    fn a_refusal_is_forbidden_and_names_the_account_the_permission_and_why_it_is_asked() {
        let p = promoter(&["gov", "notebooks"], &["gov"]);
        let refused = p.refusal(
            Some("gov"),
            &SubjectAccessReviewStatus {
                allowed: false,
                reason: Some("no RBAC policy matched".into()),
                ..Default::default()
            },
        );
        assert_eq!(
            (refused.reason, refused.succeeded),
            (reason::FORBIDDEN, false)
        );
        assert_eq!(
            refused.message,
            "service account \"ds/pipeline\" may not promote: it needs the verb \"promote\" on \
             imagepromotions.imagegate.dev for ImagePromotion \"gov\" in namespace \"ds\" (it \
             governs ImageStream \"nb\"), for example through a RoleBinding of the ClusterRole \
             imagegate-promoter or a Role with resourceNames; nothing was written (the API \
             server says: no RBAC policy matched)"
        );
        let named = p.refusal(Some("notebooks"), &SubjectAccessReviewStatus::default());
        assert!(
            named.message.contains("(the run names it)"),
            "{}",
            named.message
        );
        let all = promoter(&[], &[]).refusal(None, &SubjectAccessReviewStatus::default());
        assert!(
            all.message.contains(
                "for every ImagePromotion of namespace \"ds\" (the run names no ImagePromotion \
                 and none governs ImageStream \"nb\")"
            ),
            "{}",
            all.message
        );
    }
}
