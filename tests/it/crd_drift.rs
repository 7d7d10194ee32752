//! The committed CRDs (ImagePromotion, ImageStreamSource) match the Rust types, and an API server
//! accepts them: each CRD registers, a typed object round-trips through it, and a field of the
//! wrong type is refused by the CRD's schema.
//!
//! To regenerate the manifests after changing the types:
//! `cargo run -- crds imagepromotions > config/300-imagepromotion-crd.yaml`,
//! `cargo run -- crds imagestreamsources > config/multi-tenant/300-imagestreamsource-crd.yaml`, or
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
const COMMITTED_SOURCE: &str = "config/multi-tenant/300-imagestreamsource-crd.yaml";

fn committed_path(file: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(file)
}

/// Fails unless `file` holds `generated` (writes it first with IMAGEGATE_UPDATE_CRDS set).
fn assert_committed(file: &str, plural: &str, generated: &str) {
    let path = committed_path(file);
    if std::env::var_os("IMAGEGATE_UPDATE_CRDS").is_some() {
        std::fs::write(&path, generated).unwrap();
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "{file} differs from the Rust types; regenerate it with\n  \
         cargo run -- crds {plural} > {file}\n(or IMAGEGATE_UPDATE_CRDS=1 cargo test --test it crd_drift) \
         and commit the result"
    );
}

#[test]
fn the_committed_crd_matches_the_rust_types() {
    assert_committed(COMMITTED, "imagepromotions", &crd_yaml());
    assert_committed(
        COMMITTED_SOURCE,
        "imagestreamsources",
        &imagegate::adapter::crd::crd_yaml(),
    );
}

#[test]
fn the_committed_crd_parses_as_a_crd_of_the_same_shape() {
    let committed = std::fs::read_to_string(committed_path(COMMITTED)).unwrap();
    let parsed: CustomResourceDefinition = serde_norway::from_str(&committed).unwrap();
    assert_eq!(parsed, ImagePromotion::crd());
    let committed = std::fs::read_to_string(committed_path(COMMITTED_SOURCE)).unwrap();
    let parsed: CustomResourceDefinition = serde_norway::from_str(&committed).unwrap();
    assert_eq!(parsed, imagegate::adapter::crd::crd());
}

async fn start() -> (Emulator, kube::Client) {
    imagegate::runtime::tls::install_crypto_provider();
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
                pins: Default::default(),
                chains: None,
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

#[tokio::test]
async fn an_image_stream_source_and_its_status_round_trip_through_the_registered_crd() {
    use imagegate::adapter::crd::{self, ImageStreamSource, ImageStreamSourceSpec};
    imagegate::runtime::tls::install_crypto_provider();
    let emu = Emulator::start(Config::default()).await.unwrap();
    emu.seed_str("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: ds\n")
        .unwrap();
    let client = emu.client().unwrap();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.create(&PostParams::default(), &crd::crd())
        .await
        .unwrap();

    let sources: Api<ImageStreamSource> = Api::namespaced(client.clone(), "ds");
    let spec: ImageStreamSourceSpec = serde_json::from_value(json!({
        "sink": {"ref": {"apiVersion": "eventing.knative.dev/v1", "kind": "Broker", "name": "default"}},
        "ceOverrides": {"extensions": {"team": "a"}},
        "namespaceSelector": {"matchLabels": {"team": "a"}},
        "selector": {"matchExpressions": [{"key": "tier", "operator": "Exists"}]},
        "tags": ["candidate"], "mode": "reference", "contentMode": "binary",
        "delivery": {"retry": 2, "backoffPolicy": "exponential", "backoffDelay": "PT0.5S",
                     "deadLetterSink": {"uri": "http://dls.ds.svc.cluster.local"}, "timeout": "PT5S"},
        "serviceAccountName": "watcher", "emitExisting": true
    }))
    .unwrap();
    let created = sources
        .create(
            &PostParams::default(),
            &ImageStreamSource::new("team-a", spec.clone()),
        )
        .await
        .unwrap();
    assert_eq!(created.spec, spec);

    let status = json!({"status": {
        "observedGeneration": 1,
        "conditions": [{"type": "Ready", "status": "False", "reason": "SinkNotFound",
                        "message": "no Broker ds/default", "lastTransitionTime": "2026-12-01T10:00:00Z"}],
        "sinkUri": "http://broker-ingress.knative-eventing.svc.cluster.local/ds/default",
        "ceAttributes": [{"type": "dev.knative.apiserver.ref.add", "source": "https://10.0.0.1:443"}],
        "deliveries": {"delivered": 3, "deadLettered": 1, "failed": 0, "lastDeliveredTime": "2026-12-01T10:00:00Z"}
    }});
    sources
        .patch_status(
            "team-a",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&status),
        )
        .await
        .unwrap();
    let read = sources.get("team-a").await.unwrap();
    assert_eq!(
        serde_json::to_value(read.status.unwrap()).unwrap(),
        status["status"]
    );
    assert_eq!(read.spec, spec, "a status write leaves the spec alone");

    let resource = ApiResource::erase::<ImageStreamSource>(&());
    let api: Api<DynamicObject> = Api::namespaced_with(client, "ds", &resource);
    let body: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "sources.imagegate.dev/v1alpha1", "kind": "ImageStreamSource",
        "metadata": {"name": "wrong"},
        "spec": {"sink": {"uri": 7}, "emitExisting": "yes"}
    }))
    .unwrap();
    let err = api.create(&PostParams::default(), &body).await.unwrap_err();
    let kube::Error::Api(status) = err else {
        panic!("expected an API error, got {err:?}");
    };
    assert_eq!(status.code, 422, "{status:?}");
    assert!(
        status.message.contains("spec.sink.uri") && status.message.contains("spec.emitExisting"),
        "{}",
        status.message
    );
    emu.shutdown().await;
}
