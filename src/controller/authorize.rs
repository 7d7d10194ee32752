//! Who may make the controller write. The controller writes with its own identity, so before
//! any action that writes the served tag (every action: `begin`, `promote`, `reject`,
//! `rollback`) it asks the API server, with a SubjectAccessReview, whether the run's own service
//! account may `promote` the ImagePromotion the run names (`customRef.name`), or every
//! ImagePromotion of the namespace when the run names none (an inline `customSpec`, or params
//! only). A refusal ends the run `Forbidden`, saying which account lacks which permission, and
//! nothing is written. [`Promoter`] is the pure part: what is asked and what a refusal says;
//! the review itself is [`crate::access`]'s, shared with the source.

use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewStatus,
};
use kube::ResourceExt;

use crate::access::{self, ServiceAccount};
use crate::api::CustomRun;

use super::error::Error;
use super::reconcile::Context;
use super::status::{Outcome, reason};

/// The verb a promoter needs on `imagepromotions.imagegate.dev`.
pub const VERB: &str = "promote";
/// The API group of the ImagePromotion resource.
pub const GROUP: &str = "imagegate.dev";
/// The resource the verb is granted on.
pub const RESOURCE: &str = "imagepromotions";
/// The service account a run without `spec.serviceAccountName` runs as (Tekton's default).
pub const DEFAULT_SERVICE_ACCOUNT: &str = access::DEFAULT_SERVICE_ACCOUNT;
/// The ClusterRole `config/` ships with the verb, named in refusals.
pub const PROMOTER_CLUSTERROLE: &str = "imagegate-promoter";

/// The identity a run acts for, and what it must be allowed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Promoter {
    /// The run's namespace.
    pub namespace: String,
    /// `spec.serviceAccountName`, or `default`.
    pub service_account: String,
    /// The ImagePromotion named by `customRef.name`; None for an inline spec or none at all,
    /// which needs the verb on every ImagePromotion of the namespace.
    pub imagepromotion: Option<String>,
}

impl Promoter {
    /// The promoter of `run`.
    pub fn of(run: &CustomRun) -> Promoter {
        let named = run
            .spec
            .custom_ref
            .as_ref()
            .filter(|_| run.spec.custom_spec.is_none())
            .and_then(|r| r.name.clone())
            .filter(|n| !n.is_empty());
        let namespace = run.namespace().unwrap_or_default();
        let account =
            ServiceAccount::or_default(&namespace, run.spec.service_account_name.as_deref());
        Promoter {
            namespace,
            service_account: account.name,
            imagepromotion: named,
        }
    }

    fn account(&self) -> ServiceAccount {
        ServiceAccount {
            namespace: self.namespace.clone(),
            name: self.service_account.clone(),
        }
    }

    /// The service account's user name.
    pub fn user(&self) -> String {
        self.account().user()
    }

    /// The review to ask: the user with the groups its token would carry, the verb `promote`
    /// on the ImagePromotion (any of the namespace when none is named).
    pub fn review(&self) -> SubjectAccessReview {
        self.account().review(ResourceAttributes {
            namespace: Some(self.namespace.clone()),
            verb: Some(VERB.to_string()),
            group: Some(GROUP.to_string()),
            resource: Some(RESOURCE.to_string()),
            name: self.imagepromotion.clone(),
            ..Default::default()
        })
    }

    /// The outcome of a refused review: `Forbidden`, naming the account and the permission.
    pub fn refusal(&self, status: &SubjectAccessReviewStatus) -> Outcome {
        let account = format!("{}/{}", self.namespace, self.service_account);
        let what = match &self.imagepromotion {
            Some(name) => format!("ImagePromotion {name:?}"),
            None => format!("every ImagePromotion of namespace {:?}", self.namespace),
        };
        let why = match &self.imagepromotion {
            Some(_) => String::new(),
            None => " (the run names no ImagePromotion: it has an inline spec or none)".into(),
        };
        let mut message = format!(
            "service account {account:?} may not promote{why}: it needs the verb {VERB:?} on \
             {RESOURCE}.{GROUP} for {what} in namespace {:?}, for example through a RoleBinding \
             of the ClusterRole {PROMOTER_CLUSTERROLE}; nothing was written",
            self.namespace
        );
        for said in access::said(status) {
            message.push_str(&format!(" (the API server says: {said})"));
        }
        Outcome::failed(reason::FORBIDDEN, message)
    }
}

/// Asks whether the run's service account may promote: `None` when it may, the `Forbidden`
/// outcome when it may not. A failed review is an API error (retried).
pub async fn authorize(run: &CustomRun, ctx: &Context) -> Result<Option<Outcome>, Error> {
    let promoter = Promoter::of(run);
    let status = access::ask(&ctx.client, &promoter.review())
        .await
        .map_err(|source| Error::Authorize {
            user: promoter.user(),
            source,
        })?;
    if access::allowed(&status) {
        return Ok(None);
    }
    Ok(Some(promoter.refusal(&status)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(spec: serde_json::Value) -> CustomRun {
        serde_json::from_value(json!({
            "apiVersion": "tekton.dev/v1beta1", "kind": "CustomRun",
            "metadata": {"name": "r", "namespace": "ds"},
            "spec": spec,
        }))
        .unwrap()
    }

    fn custom_ref(name: Option<&str>) -> serde_json::Value {
        json!({"apiVersion": "imagegate.dev/v1alpha1", "kind": "ImagePromotion", "name": name})
    }

    #[test]
    fn a_named_imagepromotion_is_asked_about_by_name_for_the_runs_service_account() {
        let p = Promoter::of(&run(json!({
            "customRef": custom_ref(Some("notebooks")), "serviceAccountName": "pipeline"
        })));
        let review = serde_json::to_value(p.review()).unwrap();
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
    fn an_inline_spec_or_no_name_needs_every_imagepromotion_and_default_is_the_account() {
        let inline = run(json!({"customSpec": {
            "apiVersion": "imagegate.dev/v1alpha1", "kind": "ImagePromotion", "spec": {}
        }}));
        let unnamed = run(json!({"customRef": custom_ref(None), "serviceAccountName": ""}));
        for r in [inline, unnamed] {
            let p = Promoter::of(&r);
            assert_eq!(p.service_account, "default");
            assert_eq!(p.imagepromotion, None);
            let attrs = p.review().spec.resource_attributes.unwrap();
            assert_eq!(attrs.name, None, "all ImagePromotions of the namespace");
        }
    }

    #[test]
    fn a_refusal_is_forbidden_and_names_the_account_and_the_permission() {
        let p = Promoter::of(&run(json!({"customRef": custom_ref(Some("notebooks"))})));
        let refused = p.refusal(&SubjectAccessReviewStatus {
            allowed: false,
            reason: Some("no RBAC policy matched".into()),
            ..Default::default()
        });
        assert_eq!(
            (refused.reason, refused.succeeded),
            (reason::FORBIDDEN, false)
        );
        assert_eq!(
            refused.message,
            "service account \"ds/default\" may not promote: it needs the verb \"promote\" on \
             imagepromotions.imagegate.dev for ImagePromotion \"notebooks\" in namespace \"ds\", \
             for example through a RoleBinding of the ClusterRole imagegate-promoter; nothing \
             was written (the API server says: no RBAC policy matched)"
        );
        let all = Promoter::of(&run(json!({"customRef": custom_ref(None)})));
        let refused = all.refusal(&SubjectAccessReviewStatus::default());
        assert!(
            refused
                .message
                .contains("for every ImagePromotion of namespace \"ds\""),
            "{}",
            refused.message
        );
    }
}
