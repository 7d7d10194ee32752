//! Imports on the real tier: the image API aggregated into the real kube-apiserver runs the
//! import controllers against a real registry (CNCF Distribution, started by the test): a tag
//! created through the real server with kubectl is imported at once, with the image's real
//! metadata, and a push is imported again by `oc import-image`'s request (an ImageStreamImport
//! through the real server), as on OpenShift.

use std::time::{Duration, Instant};

use serde_json::Value;

use super::cluster::ControlPlane;
use crate::support::registry::Registry;

fn istag(cp: &ControlPlane) -> Value {
    serde_json::from_str(&cp.ok(&[
        "get",
        "imagestreamtag",
        "-n",
        "notebooks",
        "nb:candidate",
        "-o",
        "json",
    ]))
    .unwrap()
}

fn until_build(cp: &ControlPlane, build: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let out = cp.kubectl(&[
            "get",
            "imagestreamtag",
            "-n",
            "notebooks",
            "nb:candidate",
            "-o",
            "jsonpath={.image.dockerImageMetadata.Config.Labels.build}",
        ]);
        let out = String::from_utf8_lossy(&out.stdout).into_owned();
        if out.trim() == build {
            return istag(cp);
        }
        assert!(
            Instant::now() < deadline,
            "nb:candidate never showed build {build}: {out}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[tokio::test]
async fn behind_the_real_api_server_a_tag_is_imported_from_a_real_registry_with_its_metadata() {
    let cp = ControlPlane::up();
    let registry = Registry::start().await;
    let first = registry.push("jupyter", "2026.1", "first").await;
    let api = cp.image_api().await;
    api.add_registry(&registry.host, false).await;
    cp.ok(&["create", "namespace", "notebooks"]);
    let stream = format!(
        "apiVersion: image.openshift.io/v1\nkind: ImageStream\nmetadata: {{name: nb, namespace: notebooks}}\n\
         spec:\n  tags:\n  - name: candidate\n    from: {{kind: DockerImage, name: '{}/jupyter:2026.1'}}\n    importPolicy: {{insecure: true}}\n",
        registry.host
    );
    let (ok, out) = cp.apply_text(&stream);
    assert!(ok, "{out}");
    let tag = until_build(&cp, "first");
    assert_eq!(tag["image"]["metadata"]["name"], first.as_str());
    assert_eq!(tag["image"]["dockerImageMetadata"]["Architecture"], "amd64");
    assert_eq!(
        tag["image"]["dockerImageLayers"].as_array().map(Vec::len),
        Some(1),
        "{tag:#}"
    );

    // A push, then an import now through the real server (what `oc import-image` sends).
    let second = registry.push("jupyter", "2026.1", "second").await;
    let import = serde_json::json!({
        "apiVersion": "image.openshift.io/v1", "kind": "ImageStreamImport",
        "metadata": {"name": "nb", "namespace": "notebooks"},
        "spec": {"import": true, "images": [{
            "from": {"kind": "DockerImage", "name": format!("{}/jupyter:2026.1", registry.host)},
            "to": {"name": "candidate"}, "importPolicy": {"insecure": true}}]}
    });
    let (ok, out) = cp.pipe(&["create", "-f", "-", "-o", "json"], &import.to_string());
    assert!(ok, "{out}");
    let answer: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        answer["status"]["images"][0]["image"]["metadata"]["name"],
        second.as_str(),
        "{answer:#}"
    );
    let tag = until_build(&cp, "second");
    assert_eq!(tag["image"]["metadata"]["name"], second.as_str());
}
