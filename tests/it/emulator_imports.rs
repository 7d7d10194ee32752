//! The emulator's import controllers against a real registry (CNCF Distribution, started by the
//! test): what OpenShift's importer does with a push, as the real server was recorded doing it
//! (`../shared/reference/objects/real-openshift/`): a new tag imported at once with the image's
//! real metadata, a push imported by the scheduled import, a manifest list kept whole under
//! `PreserveOriginal` or resolved to linux/amd64 under `Legacy`, a plain-HTTP registry refused
//! without `insecure`, a tag the registry does not have `NotFound`.

use std::time::{Duration, Instant};

use imagegate_emulator::{Config, Emulator, Imports};
use kube::api::{Api, DynamicObject, PostParams};
use kube::discovery::ApiResource;
use serde_json::{Value, json};

use crate::support::registry::Registry;

const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";

fn resource(kind: &str, plural: &str) -> ApiResource {
    ApiResource {
        group: "image.openshift.io".into(),
        version: "v1".into(),
        api_version: "image.openshift.io/v1".into(),
        kind: kind.into(),
        plural: plural.into(),
    }
}

struct World {
    emu: Emulator,
    registry: Registry,
    streams: Api<DynamicObject>,
    images: Api<DynamicObject>,
}

impl World {
    async fn start() -> World {
        let registry = Registry::start().await;
        let emu = Emulator::start(Config {
            imports: Imports {
                scheduled_interval: Duration::from_millis(500),
                registries: vec![registry.host.clone()],
                ..Imports::default()
            },
            namespaces: vec!["default".into(), "nb".into()],
            ..Config::default()
        })
        .await
        .unwrap();
        let client = emu.client().unwrap();
        World {
            streams: Api::namespaced_with(
                client.clone(),
                "nb",
                &resource("ImageStream", "imagestreams"),
            ),
            images: Api::all_with(client, &resource("Image", "images")),
            emu,
            registry,
        }
    }

    async fn create(&self, name: &str, tags: Value) {
        let body = json!({"apiVersion": "image.openshift.io/v1", "kind": "ImageStream",
                          "metadata": {"name": name}, "spec": {"tags": tags}});
        let obj: DynamicObject = serde_json::from_value(body).unwrap();
        self.streams
            .create(&PostParams::default(), &obj)
            .await
            .unwrap();
    }

    /// The stream once `check` holds for it (10 s at most).
    async fn until(&self, name: &str, what: &str, check: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let is = serde_json::to_value(self.streams.get(name).await.unwrap()).unwrap();
            if check(&is) {
                return is;
            }
            assert!(Instant::now() < deadline, "{what}: {is:#}");
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    async fn image(&self, digest: &str) -> Value {
        serde_json::to_value(self.images.get(digest).await.unwrap()).unwrap()
    }

    /// Pushes an image for `arch` (its own config and layer) under `repo:tag`; its digest and
    /// manifest size.
    async fn push_arch(&self, repo: &str, tag: &str, arch: &str) -> (String, usize) {
        let r = &self.registry;
        let layer = format!("the {arch} layer").into_bytes();
        let layer_size = layer.len();
        let layer_digest = r.put_blob(repo, layer).await;
        let config = serde_json::to_vec(&json!({
            "architecture": arch, "os": "linux", "created": "2026-11-30T12:00:00Z",
            "config": {"Labels": {"arch": arch}, "Cmd": ["/start"]},
            "rootfs": {"type": "layers", "diff_ids": []}
        }))
        .unwrap();
        let config_size = config.len();
        let config_digest = r.put_blob(repo, config).await;
        let manifest = serde_json::to_vec(&json!({
            "schemaVersion": 2, "mediaType": OCI_MANIFEST,
            "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": config_digest, "size": config_size},
            "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": layer_digest, "size": layer_size}]
        }))
        .unwrap();
        let (digest, size) = (sha256(&manifest), manifest.len());
        r.put_manifest(repo, tag, manifest, OCI_MANIFEST).await;
        (digest, size)
    }
}

fn sha256(data: &[u8]) -> String {
    use sha2::Digest as _;
    format!("sha256:{:x}", sha2::Sha256::digest(data))
}

fn tag<'a>(is: &'a Value, name: &str) -> &'a Value {
    is["status"]["tags"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|t| t["tag"] == name)
        .unwrap_or(&Value::Null)
}

fn current(is: &Value, name: &str) -> Option<String> {
    tag(is, name)["items"][0]["image"]
        .as_str()
        .map(str::to_string)
}

fn failure(is: &Value, name: &str) -> Option<(String, String)> {
    let c = &tag(is, name)["conditions"][0];
    (c["status"] == "False").then(|| {
        (
            c["reason"].as_str().unwrap_or_default().to_string(),
            c["message"].as_str().unwrap_or_default().to_string(),
        )
    })
}

#[tokio::test]
async fn a_push_is_imported_with_its_real_metadata_at_once_and_again_on_schedule() {
    let w = World::start().await;
    let host = w.registry.host.clone();
    let first = w.registry.push("jupyter", "2026.1", "first").await;
    w.create(
        "jupyter",
        json!([{"name": "candidate", "from": {"kind": "DockerImage", "name": format!("{host}/jupyter:2026.1")},
                "importPolicy": {"scheduled": true, "insecure": true}}]),
    )
    .await;
    let is = w
        .until("jupyter", "the new tag imported at once", |is| {
            current(is, "candidate").is_some()
        })
        .await;
    assert_eq!(current(&is, "candidate").as_deref(), Some(first.as_str()));
    assert_eq!(
        tag(&is, "candidate")["items"][0]["dockerImageReference"],
        format!("{host}/jupyter@{first}")
    );
    // The Image as the real importer makes it: the config's metadata, the layers, the size.
    let image = w.image(&first).await;
    let meta = &image["dockerImageMetadata"];
    assert_eq!(meta["Config"]["Labels"]["build"], "first", "{image:#}");
    assert_eq!(meta["Architecture"], "amd64");
    assert!(meta["Id"].as_str().unwrap().starts_with("sha256:"));
    assert!(meta["Size"].as_i64().unwrap() > 0);
    let layers = image["dockerImageLayers"].as_array().unwrap();
    assert_eq!(layers.len(), 1, "{image:#}");
    assert_eq!(image["dockerImageManifestMediaType"], OCI_MANIFEST);
    assert_eq!(
        image["metadata"]["annotations"]["image.openshift.io/dockerLayersOrder"],
        "ascending"
    );

    // A push under the same tag: the scheduled import finds it.
    let second = w.registry.push("jupyter", "2026.1", "second").await;
    let is = w
        .until("jupyter", "the push imported on schedule", |is| {
            current(is, "candidate").as_deref() == Some(second.as_str())
        })
        .await;
    assert_eq!(tag(&is, "candidate")["items"][1]["image"], first.as_str());
    w.emu.shutdown().await;
}

#[tokio::test]
async fn a_plain_http_registry_is_refused_without_insecure_and_an_unknown_tag_is_not_found() {
    let w = World::start().await;
    let host = w.registry.host.clone();
    w.registry.push("jupyter", "1", "one").await;
    w.create(
        "jupyter",
        json!([{"name": "secure", "from": {"kind": "DockerImage", "name": format!("{host}/jupyter:1")}},
               {"name": "missing", "from": {"kind": "DockerImage", "name": format!("{host}/jupyter:nope")},
                "importPolicy": {"insecure": true}}]),
    )
    .await;
    let is = w
        .until("jupyter", "both imports failed", |is| {
            failure(is, "secure").is_some() && failure(is, "missing").is_some()
        })
        .await;
    let (reason, message) = failure(&is, "secure").unwrap();
    assert_eq!(reason, "InternalError", "{message}");
    assert!(message.contains(&format!("{host}/jupyter:1")), "{message}");
    assert_eq!(current(&is, "secure"), None);
    let (reason, message) = failure(&is, "missing").unwrap();
    assert_eq!(reason, "NotFound");
    assert_eq!(
        message,
        format!("dockerimage.image.openshift.io \"{host}/jupyter:nope\" not found")
    );
    w.emu.shutdown().await;
}

#[tokio::test]
async fn a_manifest_list_is_kept_whole_under_preserve_original_and_resolved_to_amd64_under_legacy()
{
    let w = World::start().await;
    let host = w.registry.host.clone();
    let (amd, amd_size) = w.push_arch("ml", "amd64", "amd64").await;
    let (arm, arm_size) = w.push_arch("ml", "arm64", "arm64").await;
    let index = serde_json::to_vec(&json!({
        "schemaVersion": 2, "mediaType": OCI_INDEX,
        "manifests": [
            {"mediaType": OCI_MANIFEST, "digest": arm, "size": arm_size, "platform": {"architecture": "arm64", "os": "linux"}},
            {"mediaType": OCI_MANIFEST, "digest": amd, "size": amd_size, "platform": {"architecture": "amd64", "os": "linux"}}
        ]
    }))
    .unwrap();
    let index_digest = sha256(&index);
    w.registry.put_manifest("ml", "1", index, OCI_INDEX).await;
    let from = json!({"kind": "DockerImage", "name": format!("{host}/ml:1")});
    w.create(
        "ml",
        json!([{"name": "whole", "from": from, "importPolicy": {"insecure": true, "importMode": "PreserveOriginal"}},
               {"name": "legacy", "from": from, "importPolicy": {"insecure": true}}]),
    )
    .await;
    let is = w
        .until("ml", "both imported", |is| {
            current(is, "whole").is_some() && current(is, "legacy").is_some()
        })
        .await;
    assert_eq!(
        current(&is, "whole").as_deref(),
        Some(index_digest.as_str())
    );
    assert_eq!(
        current(&is, "legacy").as_deref(),
        Some(amd.as_str()),
        "Legacy imports linux/amd64's manifest, another digest than the list's"
    );
    // The index's Image: its manifests, and none of a platform image's metadata (as the real
    // server's ml-isimage-l1.json).
    let image = w.image(&index_digest).await;
    assert_eq!(image["dockerImageManifestMediaType"], OCI_INDEX);
    let manifests = image["dockerImageManifests"].as_array().unwrap();
    assert_eq!(manifests.len(), 2, "{image:#}");
    assert_eq!(manifests[0]["architecture"], "arm64");
    assert_eq!(manifests[0]["digest"], arm.as_str());
    let meta = &image["dockerImageMetadata"];
    for absent in ["Architecture", "Config", "Size"] {
        assert!(meta.get(absent).is_none(), "{absent}: {image:#}");
    }
    // Each platform's manifest has its Image, with its own metadata.
    let arm_image = w.image(&arm).await;
    assert_eq!(arm_image["dockerImageMetadata"]["Architecture"], "arm64");
    assert_eq!(
        arm_image["dockerImageMetadata"]["Config"]["Labels"]["arch"],
        "arm64"
    );
    w.emu.shutdown().await;
}
