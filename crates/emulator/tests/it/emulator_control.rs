//! The emulator's control API over HTTP (what another process uses while kubectl or imagegate
//! watch), fault injection as kube-rs sees it, the request log, and seeding of the real
//! reference objects.

use std::path::Path;
use std::time::Duration;

use futures::StreamExt;
use imagegate_emulator::{Config, Emulator};
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, WatchEvent, WatchParams,
};
use serde_json::{Value, json};

fn imagestreams() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("image.openshift.io", "v1", "ImageStream"),
        "imagestreams",
    )
}

const STREAM: &str = r#"
apiVersion: image.openshift.io/v1
kind: ImageStream
metadata: {name: nb, namespace: ds, labels: {team: a}}
spec:
  tags:
  - name: candidate
    from: {kind: DockerImage, name: "quay.io/org/nb:latest"}
    importPolicy: {scheduled: true}
"#;

async fn start() -> (Emulator, reqwest::Client) {
    crate::install_crypto_provider();
    let emu = Emulator::start(Config::default()).await.unwrap();
    (emu, reqwest::Client::new())
}

async fn control(
    http: &reqwest::Client,
    emu: &Emulator,
    method: reqwest::Method,
    path: &str,
    body: Option<&str>,
) -> (u16, Value) {
    let mut req = http.request(method, format!("{}/_emulator/v1/{path}", emu.url()));
    if let Some(b) = body {
        req = req.body(b.to_string());
    }
    let resp = req.send().await.unwrap();
    let code = resp.status().as_u16();
    (code, resp.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn seeding_and_imports_work_over_http() {
    let (emu, http) = start().await;
    let (code, out) = control(&http, &emu, reqwest::Method::POST, "seed", Some(STREAM)).await;
    assert_eq!(code, 200, "{out}");
    assert_eq!(out["seeded"], json!(["ds/nb"]));

    let digest = "sha256:4444444444444444444444444444444444444444444444444444444444444444";
    let body = json!({"tag": "candidate", "digest": digest,
                      "dockerImageMetadata": {"Config": {"Labels": {"io.k8s.display-name": "nb"}, "User": "1001"}, "Size": 12345}});
    let (code, out) = control(
        &http,
        &emu,
        reqwest::Method::POST,
        "namespaces/ds/imagestreams/nb/import",
        Some(&body.to_string()),
    )
    .await;
    assert_eq!(code, 200, "{out}");
    assert_eq!(out["changed"], true);
    assert_eq!(
        out["imageStream"]["status"]["tags"][0]["items"][0]["image"],
        digest
    );
    assert_eq!(
        out["imageStream"]["status"]["tags"][0]["items"][0]["dockerImageReference"],
        format!("quay.io/org/nb@{digest}")
    );

    // The image's metadata is readable through the ImageStreamImage view, as the controller reads it.
    let isimage: Value = http
        .get(format!(
            "{}/apis/image.openshift.io/v1/namespaces/ds/imagestreamimages/nb@{digest}",
            emu.url()
        ))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        isimage["image"]["dockerImageMetadata"]["Config"]["User"],
        "1001"
    );
    assert_eq!(isimage["image"]["dockerImageMetadata"]["Size"], 12345);

    let (code, _) = control(
        &http,
        &emu,
        reqwest::Method::PUT,
        &format!("images/{digest}/metadata"),
        Some(r#"{"Architecture": "arm64"}"#),
    )
    .await;
    assert_eq!(code, 200);
    let image: Value = http
        .get(format!(
            "{}/apis/image.openshift.io/v1/images/{digest}",
            emu.url()
        ))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(image["dockerImageMetadata"]["Architecture"], "arm64");
    assert_eq!(
        image["dockerImageMetadata"]["Config"]["User"], "1001",
        "a metadata update merges"
    );

    let (code, out) = control(
        &http,
        &emu,
        reqwest::Method::POST,
        "namespaces/ds/imagestreams/nb/importfailure",
        Some(r#"{"tag": "candidate", "reason": "Unauthorized"}"#),
    )
    .await;
    assert_eq!(code, 200, "{out}");
    let cond = &out["imageStream"]["status"]["tags"][0]["conditions"][0];
    assert_eq!(cond["reason"], "Unauthorized");
    assert_eq!(cond["status"], "False");
    assert_eq!(
        cond["message"],
        "you may not have access to the container image \"quay.io/org/nb:latest\""
    );

    let (code, out) = control(
        &http,
        &emu,
        reqwest::Method::POST,
        "namespaces/ds/imagestreams/missing/import",
        Some(r#"{"tag": "candidate"}"#),
    )
    .await;
    assert_eq!(code, 404);
    assert_eq!(out["reason"], "NotFound");
    // A digest that is not 64 lower-case hex digits is refused, not stored or ignored.
    for bad in [
        "sha256:gg",
        &format!("sha256:{}", "g".repeat(64)),
        &format!("sha256:{}", "A".repeat(64)),
    ] {
        let body = json!({"tag": "candidate", "digest": bad}).to_string();
        let (code, out) = control(
            &http,
            &emu,
            reqwest::Method::POST,
            "namespaces/ds/imagestreams/nb/import",
            Some(&body),
        )
        .await;
        assert_eq!(code, 400, "{bad}: {out}");
        assert_eq!(out["reason"], "BadRequest");
    }
    let (code, _) = control(&http, &emu, reqwest::Method::POST, "no-such-endpoint", None).await;
    assert_eq!(code, 404);
    emu.shutdown().await;
}

#[tokio::test]
async fn injected_faults_reach_the_client_then_stop() {
    let (emu, http) = start().await;
    emu.seed_str(STREAM).unwrap();
    // 500: kube-rs retries 429, 503 and 504 by itself, which would hide the fault.
    let fault = json!({"verb": "list", "resource": "imagestreams", "count": 2, "status": 500, "message": "etcd is down"});
    let (code, _) = control(
        &http,
        &emu,
        reqwest::Method::POST,
        "faults",
        Some(&fault.to_string()),
    )
    .await;
    assert_eq!(code, 200);
    let api: Api<DynamicObject> =
        Api::namespaced_with(emu.client().unwrap(), "ds", &imagestreams());
    for _ in 0..2 {
        let err = api.list(&ListParams::default()).await.unwrap_err();
        assert!(
            matches!(err, kube::Error::Api(ref s) if s.code == 500 && s.message == "etcd is down"),
            "{err:?}"
        );
    }
    assert_eq!(
        api.list(&ListParams::default()).await.unwrap().items.len(),
        1
    );

    // A delay holds the request back, then serves it.
    let fault = json!({"verb": "get", "resource": "imagestreams", "count": 1, "delayMs": 300});
    control(
        &http,
        &emu,
        reqwest::Method::POST,
        "faults",
        Some(&fault.to_string()),
    )
    .await;
    let t0 = std::time::Instant::now();
    api.get("nb").await.unwrap();
    assert!(t0.elapsed() >= Duration::from_millis(300));

    let fault = json!({"verb": "get", "count": 5, "status": 500});
    control(
        &http,
        &emu,
        reqwest::Method::POST,
        "faults",
        Some(&fault.to_string()),
    )
    .await;
    control(&http, &emu, reqwest::Method::DELETE, "faults", None).await;
    api.get("nb").await.expect("cleared faults no longer apply");
    emu.shutdown().await;
}

#[tokio::test]
async fn the_request_log_records_who_did_what() {
    let (emu, http) = start().await;
    emu.seed_str(STREAM).unwrap();
    let api: Api<DynamicObject> =
        Api::namespaced_with(emu.client_as("controller").unwrap(), "ds", &imagestreams());
    api.get("nb").await.unwrap();
    api.patch(
        "nb",
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(json!({"metadata": {"labels": {"x": "y"}}})),
    )
    .await
    .unwrap();
    let (_, all) = control(&http, &emu, reqwest::Method::GET, "requests", None).await;
    let (_, mutating) = control(
        &http,
        &emu,
        reqwest::Method::GET,
        "requests?mutating=true",
        None,
    )
    .await;
    let all = all["items"].as_array().unwrap().clone();
    let mutating = mutating["items"].as_array().unwrap().clone();
    let get = all.iter().find(|r| r["verb"] == "get").unwrap();
    assert_eq!(get["resource"], "imagestreams");
    assert_eq!(get["namespace"], "ds");
    assert_eq!(get["name"], "nb");
    assert_eq!(get["user"], "controller");
    assert_eq!(get["code"], 200);
    assert_eq!(mutating.len(), 1);
    assert_eq!(mutating[0]["verb"], "patch");
    assert_eq!(mutating[0]["group"], "image.openshift.io");
    control(&http, &emu, reqwest::Method::DELETE, "requests", None).await;
    assert!(emu.requests().is_empty());
    emu.shutdown().await;
}

#[tokio::test]
async fn compaction_and_dropped_watches_over_http() {
    let (emu, http) = start().await;
    emu.seed_str(STREAM).unwrap();
    let api: Api<DynamicObject> =
        Api::namespaced_with(emu.client().unwrap(), "ds", &imagestreams());
    let rv = api
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let mut stream = api
        .watch(&WatchParams::default(), &rv)
        .await
        .unwrap()
        .boxed();
    control(&http, &emu, reqwest::Method::POST, "drop-watches", None).await;
    let end = tokio::time::timeout(Duration::from_secs(5), stream.next())
        .await
        .unwrap();
    assert!(end.is_none(), "a dropped watch ends its stream");

    emu.import("ds", "nb", "candidate", None).unwrap();
    let (_, out) = control(&http, &emu, reqwest::Method::POST, "compact", None).await;
    assert!(
        out["compactedTo"].as_str().unwrap().parse::<u64>().unwrap() > rv.parse::<u64>().unwrap()
    );
    let mut stream = api
        .watch(&WatchParams::default(), &rv)
        .await
        .unwrap()
        .boxed();
    match stream.next().await {
        Some(Ok(WatchEvent::Error(e))) => assert_eq!((e.code, e.reason.as_str()), (410, "Expired")),
        other => panic!("expected 410 Expired, got {other:?}"),
    }
    emu.shutdown().await;
}

#[tokio::test]
async fn label_selector_watches_see_objects_enter_and_leave() {
    let (emu, _) = start().await;
    emu.seed_str(STREAM).unwrap();
    emu.seed_str(
        &STREAM
            .replace("name: nb,", "name: other,")
            .replace("team: a", "team: b"),
    )
    .unwrap();
    let api: Api<DynamicObject> =
        Api::namespaced_with(emu.client().unwrap(), "ds", &imagestreams());
    let rv = api
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let mut stream = api
        .watch(&WatchParams::default().labels("team=a"), &rv)
        .await
        .unwrap()
        .boxed();
    let merge =
        |team: &str| kube::api::Patch::Merge(json!({"metadata": {"labels": {"team": team}}}));
    api.patch("nb", &Default::default(), &merge("b"))
        .await
        .unwrap();
    api.patch("other", &Default::default(), &merge("a"))
        .await
        .unwrap();
    let mut seen = Vec::new();
    while seen.len() < 2 {
        match tokio::time::timeout(Duration::from_secs(5), stream.next())
            .await
            .unwrap()
        {
            Some(Ok(WatchEvent::Deleted(o))) => seen.push(("DELETED", o.metadata.name.unwrap())),
            Some(Ok(WatchEvent::Added(o))) => seen.push(("ADDED", o.metadata.name.unwrap())),
            Some(Ok(WatchEvent::Bookmark(_))) => {}
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(
        seen,
        vec![
            ("DELETED", "nb".to_string()),
            ("ADDED", "other".to_string())
        ]
    );
    emu.shutdown().await;
}

/// Every real ImageStream in tests/fixtures seeds with its history, generations and conditions
/// intact, and its current tags read back through the ImageStreamTag view.
#[tokio::test]
async fn real_imagestream_fixtures_seed_and_read_back() {
    let (emu, _) = start().await;
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures");
    let files = [
        "ci-note_ansible-runner_imagestream_import-failed.yaml",
        "rhpam-lab_rhpam-kieserver-rhel8_imagestream_never-imported.yaml",
        "community-okd_python_imagestream_after-prune.json",
        "oc-testdata_ruby-20-centos7_imagestream_isimage-tag.yaml",
        "odh-notebook-controller_webhook-test_imagestream_TRANSCRIBED.json",
        "openshift-docs_origin-ruby-sample_imagestream.yaml",
        "odh-notebooks_jupyter-minimal-notebook_imagestream_manifest.yaml",
        "odh-notebooks_docs_example-workbench-imagestream.yaml",
    ];
    let client = emu.client().unwrap();
    for f in files {
        let text = std::fs::read_to_string(dir.join(f)).unwrap();
        // Some fixtures wrap the object in an envelope naming its source.
        let originals: Vec<Value> = serde_norway::Deserializer::from_str(&text)
            .map(|d| serde::Deserialize::deserialize(d).unwrap())
            .map(|v: Value| v.get("object").cloned().unwrap_or(v))
            .filter(|v: &Value| v.get("kind").and_then(Value::as_str) == Some("ImageStream"))
            .collect();
        let text = originals
            .iter()
            .map(|o| serde_json::to_string(o).unwrap())
            .collect::<Vec<_>>()
            .join("\n---\n");
        let names = emu.seed_str(&text).unwrap_or_else(|e| panic!("{f}: {e}"));
        assert_eq!(names.len(), originals.len(), "{f}");
        for (orig, name) in originals.iter().zip(names) {
            let (ns, n) = name.split_once('/').unwrap();
            let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &imagestreams());
            let got = serde_json::to_value(api.get(n).await.unwrap()).unwrap();
            assert_eq!(
                got["metadata"]["generation"],
                orig["metadata"]
                    .get("generation")
                    .cloned()
                    .unwrap_or(json!(1)),
                "{f}"
            );
            for st in orig
                .pointer("/status/tags")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let tag = st["tag"].as_str().unwrap();
                let got_tag = got["status"]["tags"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|t| t["tag"] == tag)
                    .unwrap();
                assert_eq!(got_tag["items"], st["items"], "{f}: history of {tag}");
                assert_eq!(
                    got_tag.get("conditions"),
                    st.get("conditions"),
                    "{f}: conditions of {tag}"
                );
                if let Some(digest) = st.pointer("/items/0/image").and_then(Value::as_str) {
                    let istags = ApiResource::from_gvk_with_plural(
                        &GroupVersionKind::gvk("image.openshift.io", "v1", "ImageStreamTag"),
                        "imagestreamtags",
                    );
                    let istag_api: Api<DynamicObject> =
                        Api::namespaced_with(client.clone(), ns, &istags);
                    let view = istag_api
                        .get(&format!("{n}:{tag}"))
                        .await
                        .unwrap_or_else(|e| panic!("{f}: istag {n}:{tag}: {e}"));
                    assert_eq!(view.data["image"]["metadata"]["name"], digest, "{f}");
                }
            }
        }
    }
    emu.shutdown().await;
}

#[tokio::test]
async fn a_registry_added_over_http_is_listed_and_a_bad_host_refused() {
    let (emu, http) = start().await;
    let post = |body: Value| {
        let (http, emu) = (&http, &emu);
        async move {
            control(
                http,
                emu,
                reqwest::Method::POST,
                "registries",
                Some(&body.to_string()),
            )
            .await
        }
    };
    let (code, out) = post(json!({"host": "127.0.0.1:5000", "insecure": true})).await;
    assert_eq!(code, 200, "{out}");
    let (code, _) = post(json!({"host": "127.0.0.1:5000"})).await;
    assert_eq!(code, 200, "added again: replaced, not repeated");
    for bad in [
        json!({"host": ""}),
        json!({"host": "r.example/org"}),
        json!({"host": "r.example", "tls": true}),
        json!({"insecure": true}),
    ] {
        let (code, out) = post(bad.clone()).await;
        assert_eq!(code, 400, "{bad}: {out}");
    }
    let (code, out) = control(&http, &emu, reqwest::Method::GET, "registries", None).await;
    assert_eq!(code, 200);
    assert_eq!(
        out["added"],
        json!([{"host": "127.0.0.1:5000", "insecure": false}])
    );
    emu.shutdown().await;
}
