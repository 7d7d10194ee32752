//! The product's clients against kube-rs: HTTPS clients build with the rustls crypto provider
//! the binary installs (ring), and the typed API types of `imagegate::api` work against the emulator
//! over real HTTP.

use imagegate_emulator::{Config, Emulator};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

const DIGEST_A: &str = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";

fn stream_body(name: &str) -> serde_json::Value {
    json!({
        "apiVersion": "image.openshift.io/v1",
        "kind": "ImageStream",
        "metadata": {"name": name, "labels": {"opendatahub.io/notebook-image": "true"}},
        "spec": {"lookupPolicy": {"local": true}, "tags": [
            {"name": "candidate", "from": {"kind": "DockerImage", "name": "quay.io/org/nb:latest"},
             "importPolicy": {"scheduled": true}}
        ]}
    })
}

async fn start() -> (Emulator, kube::Client) {
    imagegate::runtime::tls::install_crypto_provider();
    let emu = Emulator::start(Config::default()).await.unwrap();
    emu.seed_str("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: ds\n")
        .unwrap();
    let client = emu.client().unwrap();
    crate::support::upstream::install_released_customrun_crd(client.clone()).await;
    (emu, client)
}

#[test]
fn https_clients_build_with_one_crypto_provider() {
    imagegate::runtime::tls::install_crypto_provider();
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let config = kube::Config::new("https://127.0.0.1:6443".parse().unwrap());
        kube::Client::try_from(config).expect("kube builds an HTTPS client");
        reqwest::Client::builder()
            .use_rustls_tls()
            .build()
            .expect("reqwest builds an HTTPS client");
    });
    // Two providers are compiled in (aws-lc-rs comes with sigstore, src/runtime/tls.rs says why): the one
    // installed, and so used by every client above, is ring.
    let installed = rustls::crypto::CryptoProvider::get_default().expect("a provider is installed");
    let ring = rustls::crypto::ring::default_provider();
    assert_eq!(
        format!("{:?}", installed.cipher_suites),
        format!("{:?}", ring.cipher_suites),
        "the process default is ring's"
    );
    let lock = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.lock")).unwrap();
    assert!(!lock.contains("name = \"openssl-sys\""), "OpenSSL crept in");
}

#[tokio::test]
async fn the_typed_api_types_work_against_the_emulator() {
    use imagegate::api::{CustomRun, ImageStream, ImageStreamImage, ImageStreamTag};
    let (emu, client) = start().await;
    let streams: Api<ImageStream> = Api::namespaced(client.clone(), "ds");
    let created = streams
        .create(
            &PostParams::default(),
            &serde_json::from_value(stream_body("nb")).unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(created.spec_tag("candidate").unwrap().generation, Some(1));
    emu.import("ds", "nb", "candidate", Some(DIGEST_A)).unwrap();
    let is = streams.get("nb").await.unwrap();
    assert_eq!(is.current_digest("candidate"), Some(DIGEST_A));

    let istags: Api<ImageStreamTag> = Api::namespaced(client.clone(), "ds");
    let tag = istags.get("nb:candidate").await.unwrap();
    assert_eq!(tag.image.metadata.name.as_deref(), Some(DIGEST_A));
    let isimages: Api<ImageStreamImage> = Api::namespaced(client.clone(), "ds");
    let image = isimages.get(&format!("nb@{DIGEST_A}")).await.unwrap();
    assert_eq!(image.image.metadata.name.as_deref(), Some(DIGEST_A));

    let runs: Api<CustomRun> = Api::namespaced(client.clone(), "ds");
    let run: CustomRun = serde_json::from_value(json!({
        "apiVersion": "tekton.dev/v1beta1", "kind": "CustomRun",
        "metadata": {"name": "promote-1"},
        "spec": {"customRef": {"apiVersion": "imagegate.dev/v1alpha1", "kind": "ImagePromotion"},
                 "params": [{"name": "imagestream", "value": "nb"}]}
    }))
    .unwrap();
    runs.create(&PostParams::default(), &run).await.unwrap();
    let status = json!({"status": {"conditions": [{"type": "Succeeded", "status": "Unknown", "reason": "Running"}],
                                   "extraFields": {"target": DIGEST_A}}});
    let updated = runs
        .patch_status("promote-1", &PatchParams::default(), &Patch::Merge(status))
        .await
        .unwrap();
    assert_eq!(updated.param_str("imagestream"), Some("nb"));
    assert_eq!(
        updated.succeeded_condition().unwrap().reason.as_deref(),
        Some("Running")
    );
    assert_eq!(updated.status.unwrap().extra_fields["target"], DIGEST_A);
    emu.shutdown().await;
}
