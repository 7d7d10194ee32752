//! The controller's start-up checks of what only the API server can say: that it serves
//! CustomRuns and lets the controller list them in every watched scope, that the controller
//! may ask SubjectAccessReviews (without which every run would retry a 403), and that it serves
//! ImagePromotions (by discovery, which every authenticated user may read). A refusal of these
//! is permanent (a missing CRD, RBAC) and ends the controller with one line that says what to
//! fix, instead of leaving it unready or retrying every run; an API server in trouble is left to
//! the readiness check and the reconciles, which retry.

use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::{Api, ListParams, PostParams};
use kube::{Client, Resource};

use crate::api::{CustomRun, status_code};

use super::authorize;
use super::crd::ImagePromotion;

/// A permanent refusal found at start.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(crate) struct PreflightError(String);

/// Checks the CustomRun API of each scope and the reviews.
pub(crate) async fn check(
    client: &Client,
    scopes: &[(Option<String>, Api<CustomRun>)],
) -> Result<(), PreflightError> {
    for (namespace, api) in scopes {
        let Err(e) = api.list_metadata(&ListParams::default().limit(1)).await else {
            continue;
        };
        let whereabouts = match namespace {
            Some(ns) => format!(" in namespace {ns:?}"),
            None => String::new(),
        };
        match status_code(&e) {
            Some(404) => {
                return Err(PreflightError(format!(
                    "the API server does not serve tekton.dev/v1beta1 CustomRuns (the CRD \
                     customruns.tekton.dev is missing): install Tekton Pipelines v0.44 or later, \
                     whose release.yaml has it (the API server says: {})",
                    said(&e)
                )));
            }
            Some(403) => {
                return Err(PreflightError(format!(
                    "the controller may not list CustomRuns{whereabouts}: grant it list and watch \
                     on customruns (config/202-clusterrole-controller.yaml; with --namespace, \
                     config/namespaced/) (the API server says: {})",
                    said(&e)
                )));
            }
            _ => {}
        }
    }
    let reviews: Api<SubjectAccessReview> = Api::all(client.clone());
    if let Err(e) = reviews.create(&PostParams::default(), &probe()).await
        && status_code(&e) == Some(403)
    {
        return Err(PreflightError(format!(
            "the controller may not create subjectaccessreviews, which it needs to check that a \
             run's service account may promote: grant it create on subjectaccessreviews \
             (config/202-clusterrole-controller.yaml) (the API server says: {})",
            said(&e)
        )));
    }
    served_imagepromotions(client).await
}

/// Whether the API server serves ImagePromotions: discovery of their group-version lists them.
/// Only a 404 or a list without them is a refusal; other errors are left to the reconciles.
async fn served_imagepromotions(client: &Client) -> Result<(), PreflightError> {
    let version = ImagePromotion::api_version(&());
    let plural = ImagePromotion::plural(&());
    let missing = |said: String| {
        PreflightError(format!(
            "the API server does not serve {version} ImagePromotions (the CRD \
             {plural}.imagegate.dev is missing): apply config/300-imagepromotion-crd.yaml \
             (kubectl apply -f config/300-imagepromotion-crd.yaml, or all of config/) ({said})"
        ))
    };
    match client.list_api_group_resources(&version).await {
        Ok(list) if list.resources.iter().any(|r| r.name == plural) => Ok(()),
        Ok(list) => Err(missing(format!(
            "{version} serves only: {}",
            list.resources
                .iter()
                .map(|r| r.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ))),
        Err(e) if status_code(&e) == Some(404) => {
            Err(missing(format!("the API server says: {}", said(&e))))
        }
        Err(_) => Ok(()),
    }
}

/// A review that asks nothing of consequence: may an anonymous user promote in `default`.
fn probe() -> SubjectAccessReview {
    SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some("system:anonymous".into()),
            resource_attributes: Some(ResourceAttributes {
                namespace: Some("default".into()),
                verb: Some(authorize::VERB.into()),
                group: Some(authorize::GROUP.into()),
                resource: Some(authorize::RESOURCE.into()),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    }
}

/// The API server's message of an error.
fn said(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) => s.message.clone(),
        other => other.to_string(),
    }
}
