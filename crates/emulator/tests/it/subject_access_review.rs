//! SubjectAccessReviews over HTTP: kube-rs creates them as a controller does, and the emulator
//! answers each from the Roles, ClusterRoles and bindings it stores, as the API server's RBAC
//! authorizer would; a review is never stored, and a malformed one is refused with 422.

use imagegate_emulator::{Config, Emulator};
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::{Api, PostParams};

const RBAC: &str = r#"
apiVersion: v1
kind: Namespace
metadata: {name: ds}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: imagegate-promoter}
rules:
- apiGroups: [imagegate.dev]
  resources: [imagepromotions]
  verbs: [promote]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: pipeline-promotes, namespace: ds}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: imagegate-promoter}
subjects:
- {kind: ServiceAccount, name: pipeline, namespace: ds}
"#;

fn review(user: &str, groups: &[&str], namespace: &str, name: &str) -> SubjectAccessReview {
    SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(user.into()),
            groups: Some(groups.iter().map(|g| g.to_string()).collect()),
            resource_attributes: Some(ResourceAttributes {
                namespace: Some(namespace.into()),
                verb: Some("promote".into()),
                group: Some("imagegate.dev".into()),
                resource: Some("imagepromotions".into()),
                name: Some(name.into()).filter(|n: &String| !n.is_empty()),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    }
}

#[tokio::test]
async fn reviews_are_answered_from_the_stored_rbac_objects() {
    crate::install_crypto_provider();
    let emu = Emulator::start(Config::default()).await.unwrap();
    let reviews: Api<SubjectAccessReview> = Api::all(emu.client().unwrap());
    let ask = |r: SubjectAccessReview| {
        let reviews = reviews.clone();
        async move {
            let answered = reviews.create(&PostParams::default(), &r).await.unwrap();
            answered.status.expect("a review is answered")
        }
    };
    let pipeline = "system:serviceaccount:ds:pipeline";
    let groups = ["system:serviceaccounts", "system:serviceaccounts:ds"];
    // No RBAC objects yet: nobody may.
    assert!(
        !ask(review(pipeline, &groups, "ds", "notebooks"))
            .await
            .allowed
    );

    emu.seed_str(RBAC).unwrap();
    let allowed = ask(review(pipeline, &groups, "ds", "notebooks")).await;
    assert!(allowed.allowed);
    assert_eq!(
        allowed.reason.as_deref(),
        Some(
            "RBAC: allowed by RoleBinding \"pipeline-promotes/ds\" of ClusterRole \"imagegate-promoter\" to ServiceAccount \"pipeline/ds\""
        )
    );
    // Any ImagePromotion of the namespace (an inline spec), but not another namespace, and not
    // another service account of the namespace.
    assert!(ask(review(pipeline, &groups, "ds", "")).await.allowed);
    assert!(
        !ask(review(pipeline, &groups, "other", "notebooks"))
            .await
            .allowed
    );
    let default = "system:serviceaccount:ds:default";
    assert!(
        !ask(review(default, &groups, "ds", "notebooks"))
            .await
            .allowed
    );
    // Nothing was stored.
    assert!(
        emu.requests()
            .iter()
            .all(|r| r.resource == "subjectaccessreviews" && r.code == 201),
        "{:?}",
        emu.requests()
    );
}

#[tokio::test]
async fn a_review_without_a_user_or_attributes_is_invalid() {
    crate::install_crypto_provider();
    let emu = Emulator::start(Config::default()).await.unwrap();
    let reviews: Api<SubjectAccessReview> = Api::all(emu.client().unwrap());
    let mut nobody = review("", &[], "ds", "x");
    nobody.spec.user = None;
    nobody.spec.groups = None;
    let mut nothing = review("alice", &[], "ds", "x");
    nothing.spec.resource_attributes = None;
    for (bad, want) in [
        (nobody, "at least one of user or group must be specified"),
        (
            nothing,
            "exactly one of nonResourceAttributes or resourceAttributes",
        ),
    ] {
        match reviews.create(&PostParams::default(), &bad).await {
            Err(kube::Error::Api(s)) => {
                assert_eq!(s.code, 422);
                assert!(s.message.contains(want), "{}", s.message);
            }
            other => panic!("{other:?}"),
        }
    }
}
