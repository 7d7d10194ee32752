//! kube-rs against the emulator over real HTTP: the verbs, watches and reflectors the product
//! relies on, including resuming after a dropped watch and re-listing after 410 Expired.

use std::time::Duration;

use futures::StreamExt;
use imagegate_emulator::control::Fault;
use imagegate_emulator::{Config, Emulator, Imports};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch,
    PatchParams, PostParams,
};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use serde_json::{Value, json};

fn imagestreams() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("image.openshift.io", "v1", "ImageStream"),
        "imagestreams",
    )
}

fn istags() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("image.openshift.io", "v1", "ImageStreamTag"),
        "imagestreamtags",
    )
}

const DIGEST_A: &str = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
const DIGEST_B: &str = "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

fn stream_body(name: &str) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "image.openshift.io/v1",
        "kind": "ImageStream",
        "metadata": {"name": name, "labels": {"opendatahub.io/notebook-image": "true"}},
        "spec": {"lookupPolicy": {"local": true}, "tags": [
            {"name": "candidate", "from": {"kind": "DockerImage", "name": "quay.io/org/nb:latest"},
             "importPolicy": {"scheduled": true}}
        ]}
    }))
    .unwrap()
}

async fn start() -> (Emulator, kube::Client) {
    crate::install_crypto_provider();
    // These tests take each import step by step through the control API (the scheduled
    // import's stand-in), so the import controllers, which would import the new candidate tag
    // on their own, are off; they are tested in `imports.rs`.
    let emu = Emulator::start(Config {
        imports: Imports {
            enabled: false,
            ..Imports::default()
        },
        ..Config::default()
    })
    .await
    .unwrap();
    emu.seed_str("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: ds\n")
        .unwrap();
    let client = emu.client().unwrap();
    (emu, client)
}

fn current_digest(obj: &Value, tag: &str) -> Option<String> {
    obj.pointer("/status/tags")?
        .as_array()?
        .iter()
        .find(|t| t["tag"] == tag)?
        .pointer("/items/0/image")?
        .as_str()
        .map(str::to_string)
}

#[tokio::test]
async fn api_verbs_work_over_http() {
    let (emu, client) = start().await;
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), "ds", &imagestreams());
    let created = api
        .create(&PostParams::default(), &stream_body("nb"))
        .await
        .unwrap();
    assert_eq!(created.metadata.generation, Some(1));
    assert!(created.metadata.uid.is_some());
    let err = api
        .create(&PostParams::default(), &stream_body("nb"))
        .await
        .unwrap_err();
    assert!(matches!(err, kube::Error::Api(ref s) if s.code == 409 && s.reason == "AlreadyExists"));

    let got = api.get("nb").await.unwrap();
    assert_eq!(
        got.metadata.resource_version,
        created.metadata.resource_version
    );
    let list = api
        .list(&ListParams::default().labels("opendatahub.io/notebook-image=true"))
        .await
        .unwrap();
    assert_eq!(list.items.len(), 1);

    // A replace with a stale resourceVersion conflicts; with the current one it succeeds.
    let mut stale = got.clone();
    api.patch(
        "nb",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"x": "1"}}})),
    )
    .await
    .unwrap();
    stale.data["spec"]["lookupPolicy"]["local"] = json!(false);
    let err = api
        .replace("nb", &PostParams::default(), &stale)
        .await
        .unwrap_err();
    assert!(matches!(err, kube::Error::Api(ref s) if s.code == 409 && s.reason == "Conflict"));
    let mut fresh = api.get("nb").await.unwrap();
    fresh.data["spec"]["lookupPolicy"]["local"] = json!(false);
    let replaced = api
        .replace("nb", &PostParams::default(), &fresh)
        .await
        .unwrap();
    assert_eq!(replaced.metadata.generation, Some(2));

    // Strategic merge on spec.tags merges by name; JSON patch with a failing test is refused.
    let patched = api
        .patch(
            "nb",
            &PatchParams::default(),
            &Patch::Strategic(json!({"spec": {"tags": [{"name": "extra", "from": {"kind": "DockerImage", "name": "quay.io/org/nb:extra"}}]}})),
        )
        .await
        .unwrap();
    let names: Vec<&str> = patched.data["spec"]["tags"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, vec!["candidate", "extra"]);
    let err = api
        .patch(
            "nb",
            &PatchParams::default(),
            &Patch::<()>::Json(
                serde_json::from_value(json!([
                    {"op": "test", "path": "/metadata/resourceVersion", "value": "1"},
                    {"op": "add", "path": "/metadata/labels/y", "value": "2"}
                ]))
                .unwrap(),
            ),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, kube::Error::Api(ref s) if s.code == 422));

    // Status goes through the status subresource only.
    let status = json!({"status": {"tags": [{"tag": "candidate", "items": [
        {"created": "2026-01-01T00:00:00Z", "dockerImageReference": format!("quay.io/org/nb@{DIGEST_A}"), "image": DIGEST_A, "generation": 2}
    ]}]}});
    let with_status = api
        .patch_status("nb", &PatchParams::default(), &Patch::Merge(status))
        .await
        .unwrap();
    assert_eq!(
        current_digest(&serde_json::to_value(&with_status).unwrap(), "candidate").as_deref(),
        Some(DIGEST_A)
    );
    assert_eq!(
        with_status.metadata.generation,
        Some(3),
        "status writes keep the generation"
    );

    // Server-side apply creates and then owns fields.
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "ds");
    let cm: ConfigMap = serde_json::from_value(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "1"}})).unwrap();
    let applied = cms
        .patch(
            "c",
            &PatchParams::apply("imagegate-test"),
            &Patch::Apply(&cm),
        )
        .await
        .unwrap();
    assert_eq!(applied.data.unwrap()["a"], "1");

    api.delete("nb", &DeleteParams::default()).await.unwrap();
    let err = api.get("nb").await.unwrap_err();
    assert!(matches!(err, kube::Error::Api(ref s) if s.code == 404 && s.reason == "NotFound"));
    emu.shutdown().await;
}

#[tokio::test]
async fn imagestreamtags_cannot_be_watched() {
    let (emu, client) = start().await;
    let api: Api<DynamicObject> = Api::namespaced_with(client, "ds", &istags());
    let err = api
        .watch(&kube::api::WatchParams::default(), "0")
        .await
        .err()
        .expect("a watch on imagestreamtags must be refused");
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 405 && s.reason == "MethodNotAllowed")
    );
    emu.shutdown().await;
}

/// Collects watcher events until `pred` holds for the reflected state or the time runs out.
async fn wait_for<F>(store: &reflector::Store<DynamicObject>, mut pred: F)
where
    F: FnMut(&[std::sync::Arc<DynamicObject>]) -> bool,
{
    for _ in 0..200 {
        if pred(&store.state()) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!(
        "the reflector never reached the expected state: {:?}",
        store.state()
    );
}

fn reflected_digest(state: &[std::sync::Arc<DynamicObject>], name: &str) -> Option<String> {
    let obj = state
        .iter()
        .find(|o| o.metadata.name.as_deref() == Some(name))?;
    current_digest(&serde_json::to_value(obj.as_ref()).ok()?, "candidate")
}

async fn reflect(client: kube::Client, config: watcher::Config) -> reflector::Store<DynamicObject> {
    let api: Api<DynamicObject> = Api::namespaced_with(client, "ds", &imagestreams());
    let writer = reflector::store::Writer::new(imagestreams());
    let reader = writer.as_reader();
    let stream = watcher(api, config)
        .default_backoff()
        .reflect(writer)
        .applied_objects();
    tokio::spawn(async move {
        // Errors (a 410) are part of what is tested: keep consuming after them.
        stream.for_each(|_| async {}).await;
    });
    reader
}

#[tokio::test]
async fn watcher_resumes_after_a_dropped_watch_without_relisting() {
    let (emu, client) = start().await;
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), "ds", &imagestreams());
    api.create(&PostParams::default(), &stream_body("nb"))
        .await
        .unwrap();
    let store = reflect(client, watcher::Config::default()).await;
    wait_for(&store, |s| s.len() == 1).await;
    emu.import("ds", "nb", "candidate", Some(DIGEST_A)).unwrap();
    wait_for(&store, |s| {
        reflected_digest(s, "nb").as_deref() == Some(DIGEST_A)
    })
    .await;

    let lists_before = emu
        .requests()
        .iter()
        .filter(|r| r.verb == "list" && r.resource == "imagestreams")
        .count();
    emu.drop_watches();
    emu.import("ds", "nb", "candidate", Some(DIGEST_B)).unwrap();
    wait_for(&store, |s| {
        reflected_digest(s, "nb").as_deref() == Some(DIGEST_B)
    })
    .await;
    let reqs = emu.requests();
    let lists_after = reqs
        .iter()
        .filter(|r| r.verb == "list" && r.resource == "imagestreams")
        .count();
    assert_eq!(
        lists_before, lists_after,
        "a dropped watch resumes from its resourceVersion"
    );
    let watches: Vec<_> = reqs
        .iter()
        .filter(|r| r.verb == "watch" && r.resource == "imagestreams")
        .collect();
    assert!(watches.len() >= 2);
    assert!(watches.last().unwrap().query.contains("resourceVersion="));
    emu.shutdown().await;
}

#[tokio::test]
async fn watcher_relists_after_410_expired_and_sees_changes_made_meanwhile() {
    let (emu, client) = start().await;
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), "ds", &imagestreams());
    api.create(&PostParams::default(), &stream_body("nb"))
        .await
        .unwrap();
    let store = reflect(client, watcher::Config::default()).await;
    wait_for(&store, |s| s.len() == 1).await;
    // Hold the next watch requests back so the change and the compaction happen while no
    // watch is open: the resume then asks for a compacted resourceVersion.
    emu.inject_fault(Fault {
        verb: Some("watch".into()),
        resource: Some("imagestreams".into()),
        count: 1,
        delay_ms: Some(300),
        ..Default::default()
    });
    emu.drop_watches();
    emu.import("ds", "nb", "candidate", Some(DIGEST_A)).unwrap();
    api.create(&PostParams::default(), &stream_body("nb2"))
        .await
        .unwrap();
    emu.compact();
    wait_for(&store, |s| {
        s.len() == 2 && reflected_digest(s, "nb").as_deref() == Some(DIGEST_A)
    })
    .await;
    let lists = emu
        .requests()
        .iter()
        .filter(|r| r.verb == "list" && r.resource == "imagestreams")
        .count();
    assert!(
        lists >= 2,
        "a 410 Expired makes kube's watcher re-list (saw {lists} lists)"
    );
    emu.shutdown().await;
}

#[tokio::test]
async fn streaming_lists_work_without_a_list_request() {
    let (emu, client) = start().await;
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), "ds", &imagestreams());
    api.create(&PostParams::default(), &stream_body("nb"))
        .await
        .unwrap();
    let store = reflect(client, watcher::Config::default().streaming_lists()).await;
    wait_for(&store, |s| s.len() == 1).await;
    emu.import("ds", "nb", "candidate", Some(DIGEST_A)).unwrap();
    wait_for(&store, |s| {
        reflected_digest(s, "nb").as_deref() == Some(DIGEST_A)
    })
    .await;
    assert!(
        !emu.requests()
            .iter()
            .any(|r| r.verb == "list" && r.resource == "imagestreams")
    );
    emu.shutdown().await;
}

#[tokio::test]
async fn raw_watch_from_an_expired_resource_version_is_an_in_stream_410() {
    let (emu, client) = start().await;
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), "ds", &imagestreams());
    let created = api
        .create(&PostParams::default(), &stream_body("nb"))
        .await
        .unwrap();
    let rv = created.metadata.resource_version.clone().unwrap();
    api.patch(
        "nb",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"x": "1"}}})),
    )
    .await
    .unwrap();
    emu.compact();
    let mut events = api
        .watch(&kube::api::WatchParams::default(), &rv)
        .await
        .unwrap()
        .boxed();
    match events.next().await {
        Some(Ok(kube::api::WatchEvent::Error(e))) => {
            assert_eq!(e.code, 410);
            assert_eq!(e.reason, "Expired");
        }
        other => panic!("expected an in-stream 410, got {other:?}"),
    }
    emu.shutdown().await;
}

#[tokio::test]
async fn promotion_through_an_imagestreamtag_follows_the_oracle() {
    let (emu, client) = start().await;
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), "ds", &imagestreams());
    api.create(&PostParams::default(), &stream_body("nb"))
        .await
        .unwrap();
    emu.import("ds", "nb", "candidate", Some(DIGEST_A)).unwrap();
    assert!(
        emu.import("ds", "nb", "candidate", Some(DIGEST_A))
            .unwrap()
            .is_none(),
        "an unchanged digest writes nothing"
    );
    emu.import("ds", "nb", "candidate", Some(DIGEST_B)).unwrap();
    let is = serde_json::to_value(api.get("nb").await.unwrap()).unwrap();
    assert_eq!(is["metadata"]["generation"], 3);
    assert_eq!(
        is.pointer("/status/tags/0/items")
            .unwrap()
            .as_array()
            .unwrap()
            .len(),
        2
    );

    // `oc tag ds/nb@B ds/nb:served` = PUT imagestreamtags/nb:served.
    let istags: Api<DynamicObject> = Api::namespaced_with(client.clone(), "ds", &istags());
    let body: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "image.openshift.io/v1", "kind": "ImageStreamTag",
        "metadata": {"name": "nb:served", "namespace": "ds"},
        "tag": {"name": "served", "from": {"kind": "ImageStreamImage", "name": format!("nb@{DIGEST_B}"), "namespace": "ds"}}
    }))
    .unwrap();
    let view = istags
        .replace("nb:served", &PostParams::default(), &body)
        .await
        .unwrap();
    let view = serde_json::to_value(view).unwrap();
    assert_eq!(view["image"]["metadata"]["name"], DIGEST_B);
    let is = serde_json::to_value(api.get("nb").await.unwrap()).unwrap();
    assert_eq!(is["metadata"]["generation"], 4);
    assert_eq!(current_digest(&is, "served").as_deref(), Some(DIGEST_B));
    let served = is["status"]["tags"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["tag"] == "served")
        .unwrap();
    assert_eq!(served["items"][0]["generation"], 4);
    assert_eq!(
        served["items"][0]["dockerImageReference"],
        format!("quay.io/org/nb@{DIGEST_B}")
    );

    // A failed import keeps the history and adds ImportSuccess=False once.
    emu.import_failure("ds", "nb", "candidate", "NotFound", None)
        .unwrap()
        .unwrap();
    assert!(
        emu.import_failure("ds", "nb", "candidate", "NotFound", None)
            .unwrap()
            .is_none()
    );
    let is = serde_json::to_value(api.get("nb").await.unwrap()).unwrap();
    let cand = &is["status"]["tags"][0];
    assert_eq!(cand["conditions"][0]["reason"], "NotFound");
    assert_eq!(cand["conditions"][0]["generation"], 5);
    assert_eq!(current_digest(&is, "candidate").as_deref(), Some(DIGEST_B));
    emu.shutdown().await;
}

#[tokio::test]
async fn namespaces_carry_their_name_as_a_label_like_the_api_server_writes_it() {
    use k8s_openapi::api::core::v1::Namespace;
    let (_emu, client) = start().await;
    let namespaces: Api<Namespace> = Api::all(client);
    let forged: Namespace = serde_json::from_value(json!({
        "metadata": {"name": "team-a", "labels": {"kubernetes.io/metadata.name": "other", "team": "a"}}
    }))
    .unwrap();
    let created = namespaces
        .create(&PostParams::default(), &forged)
        .await
        .unwrap();
    let labels = created.metadata.labels.clone().unwrap();
    assert_eq!(labels["kubernetes.io/metadata.name"], "team-a");
    assert_eq!(labels["team"], "a");
    // An update that drops every label gets the name label back, as on a real server.
    let mut bare = created.clone();
    bare.metadata.labels = None;
    let updated = namespaces
        .replace("team-a", &PostParams::default(), &bare)
        .await
        .unwrap();
    assert_eq!(
        updated.metadata.labels.unwrap()["kubernetes.io/metadata.name"],
        "team-a"
    );
    let picked = namespaces
        .list(&ListParams::default().labels("kubernetes.io/metadata.name=team-a"))
        .await
        .unwrap();
    assert_eq!(picked.items.len(), 1);
}
