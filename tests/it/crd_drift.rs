//! The committed ImagePromotion CRD matches the Rust types, and an API server accepts it: the
//! CRD registers, a typed ImagePromotion round-trips through it, and a field of the wrong type
//! is refused by the CRD's schema.
//!
//! To regenerate the manifest after changing the types:
//! `cargo run -- crds > config/300-imagepromotion-crd.yaml`, or
//! `IMAGEGATE_UPDATE_CRDS=1 cargo test --test it crd_drift`.

use std::path::PathBuf;

use imagegate::controller::crd::{
    Checks, ImagePromotion, ImagePromotionSpec, Validation, crd_yaml,
};
use imagegate_emulator::{Config, Emulator};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, PostParams};
use kube::{CustomResourceExt, Resource};
use serde_json::json;

const COMMITTED: &str = "config/300-imagepromotion-crd.yaml";

fn committed_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(COMMITTED)
}

#[test]
fn the_committed_crd_matches_the_rust_types() {
    let generated = crd_yaml();
    let path = committed_path();
    if std::env::var_os("IMAGEGATE_UPDATE_CRDS").is_some() {
        std::fs::write(&path, &generated).unwrap();
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "{COMMITTED} differs from the ImagePromotion types; regenerate it with\n  \
         cargo run -- crds > {COMMITTED}\n(or IMAGEGATE_UPDATE_CRDS=1 cargo test --test it crd_drift) \
         and commit the result"
    );
}

#[test]
fn the_committed_crd_parses_as_a_crd_of_the_same_shape() {
    let committed = std::fs::read_to_string(committed_path()).unwrap();
    let parsed: CustomResourceDefinition = serde_yaml::from_str(&committed).unwrap();
    assert_eq!(parsed, ImagePromotion::crd());
}

async fn start() -> (Emulator, kube::Client) {
    imagegate::tls::install_crypto_provider();
    let emu = Emulator::start(Config::default()).await.unwrap();
    emu.seed_str("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: ci\n")
        .unwrap();
    let client = emu.client().unwrap();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.create(&PostParams::default(), &ImagePromotion::crd())
        .await
        .unwrap();
    (emu, client)
}

#[tokio::test]
async fn an_image_promotion_round_trips_through_the_registered_crd() {
    let (emu, client) = start().await;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let name = ImagePromotion::crd_name();
    assert_eq!(crds.get(name).await.unwrap().spec.group, "imagegate.dev");

    let promotions: Api<ImagePromotion> = Api::namespaced(client, "ci");
    let mut promotion = ImagePromotion::new(
        "notebooks",
        ImagePromotionSpec {
            image_stream: Some("jupyter".into()),
            served_tag: Some("stable".into()),
            checks: Checks {
                required_labels: vec!["vcs-ref".into(), "vendor=Red Hat, Inc.".into()],
                allowed_registries: vec!["quay.io/org".into()],
                allowed_architectures: vec!["amd64".into()],
                allowed_os: vec!["linux".into()],
                max_age: Some("720h".into()),
                max_size: Some("5Gi".into()),
                non_root_user: true,
            },
            validation: Validation {
                required: Some(true),
                pipeline: Some("imagegate-promote".into()),
                tasks: vec!["validate".into(), "scan".into()],
            },
            ..ImagePromotionSpec::default()
        },
    );
    promotion.meta_mut().namespace = Some("ci".into());
    promotions
        .create(&PostParams::default(), &promotion)
        .await
        .unwrap();
    let read = promotions.get("notebooks").await.unwrap();
    assert_eq!(read.spec, promotion.spec);
    assert!(read.spec.checks.parse().is_ok());

    let empty = ImagePromotion::new("defaults", ImagePromotionSpec::default());
    promotions
        .create(&PostParams::default(), &empty)
        .await
        .unwrap();
    let read = promotions.get("defaults").await.unwrap();
    assert_eq!(read.spec, ImagePromotionSpec::default());
    emu.shutdown().await;
}

#[tokio::test]
async fn a_field_of_the_wrong_type_is_refused_by_the_crd_schema() {
    let (emu, client) = start().await;
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("imagegate.dev", "v1alpha1", "ImagePromotion"),
        "imagepromotions",
    );
    let api: Api<DynamicObject> = Api::namespaced_with(client, "ci", &resource);
    let body: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "imagegate.dev/v1alpha1",
        "kind": "ImagePromotion",
        "metadata": {"name": "wrong"},
        "spec": {"checks": {"nonRootUser": "yes", "maxAge": 720}}
    }))
    .unwrap();
    let err = api.create(&PostParams::default(), &body).await.unwrap_err();
    let kube::Error::Api(status) = err else {
        panic!("expected an API error, got {err:?}");
    };
    assert_eq!(status.code, 422, "{status:?}");
    assert!(
        status.message.contains("spec.checks.nonRootUser")
            && status.message.contains("spec.checks.maxAge"),
        "{}",
        status.message
    );
    emu.shutdown().await;
}
