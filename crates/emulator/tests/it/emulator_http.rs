//! The emulator's REST semantics over raw HTTP, for the points of the foundation issue that
//! kube-rs and kubectl do not exercise on their own: discovery, unknown paths, pagination from
//! a snapshot, field selectors, BOOKMARKs, `timeoutSeconds`, server-side apply conflicts, the
//! media types custom resources refuse, the field manager a write without one is recorded under,
//! and patch bodies that do not decode.

use std::time::{Duration, Instant};

use imagegate_emulator::{Config, Emulator};
use serde_json::{Value, json};

async fn start() -> (Emulator, reqwest::Client) {
    crate::install_crypto_provider();
    let emu = Emulator::start(Config::default()).await.unwrap();
    emu.seed_str("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: ds\n")
        .unwrap();
    (emu, reqwest::Client::new())
}

async fn get(http: &reqwest::Client, emu: &Emulator, path: &str) -> (u16, Value) {
    let r = http
        .get(format!("{}{path}", emu.url()))
        .send()
        .await
        .unwrap();
    let code = r.status().as_u16();
    (code, r.json().await.unwrap_or(Value::Null))
}

fn configmap(name: &str, labels: Value) -> String {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": name, "namespace": "ds", "labels": labels}, "data": {"n": name}})
    .to_string()
}

fn names(list: &Value) -> Vec<String> {
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["metadata"]["name"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn discovery_lists_every_served_resource_and_unknown_paths_are_status_404() {
    let (emu, http) = start().await;
    let (_, groups) = get(&http, &emu, "/apis").await;
    let gvs: Vec<&str> = groups["groups"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|g| g["versions"].as_array().unwrap())
        .map(|v| v["groupVersion"].as_str().unwrap())
        .collect();
    for gv in [
        "image.openshift.io/v1",
        "tekton.dev/v1beta1",
        "events.k8s.io/v1",
        "coordination.k8s.io/v1",
        "apiextensions.k8s.io/v1",
    ] {
        assert!(gvs.contains(&gv), "{gv} missing from {gvs:?}");
    }
    let (_, core) = get(&http, &emu, "/api/v1").await;
    let core: Vec<&str> = core["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    for r in ["namespaces", "configmaps", "events"] {
        assert!(core.contains(&r), "{r} missing from {core:?}");
    }
    for path in [
        "/nope",
        "/apis/nope.dev/v1",
        "/apis/image.openshift.io/v1/namespaces/ds/nopes",
    ] {
        let (code, body) = get(&http, &emu, path).await;
        assert_eq!(code, 404, "{path}");
        assert_eq!(body["kind"], "Status", "{path}");
        assert_eq!(body["reason"], "NotFound", "{path}");
    }
    emu.shutdown().await;
}

#[tokio::test]
async fn pages_come_from_the_first_pages_snapshot_and_field_selectors_filter() {
    let (emu, http) = start().await;
    for n in ["a", "b", "c", "d", "e"] {
        emu.seed_str(&configmap(n, json!({"set": "list"}))).unwrap();
    }
    let base = "/api/v1/namespaces/ds/configmaps";
    let (_, first) = get(&http, &emu, &format!("{base}?limit=2")).await;
    assert_eq!(names(&first), vec!["a", "b"]);
    let rv = first["metadata"]["resourceVersion"].clone();
    emu.seed_str(&configmap("aa", json!({"set": "list"})))
        .unwrap();
    let mut seen = names(&first);
    let mut token = first["metadata"]["continue"].as_str().unwrap().to_string();
    loop {
        let (code, page) = get(&http, &emu, &format!("{base}?limit=2&continue={token}")).await;
        assert_eq!(code, 200);
        assert_eq!(
            page["metadata"]["resourceVersion"], rv,
            "later pages keep the list's version"
        );
        seen.extend(names(&page));
        match page["metadata"]["continue"].as_str() {
            Some(t) if !t.is_empty() => token = t.to_string(),
            _ => break,
        }
    }
    assert_eq!(
        seen,
        vec!["a", "b", "c", "d", "e"],
        "aa was created after the first page"
    );
    let (code, _) = get(&http, &emu, &format!("{base}?limit=2&continue=garbage")).await;
    assert_eq!(code, 400);

    let (_, one) = get(
        &http,
        &emu,
        &format!("{base}?fieldSelector=metadata.name%3Dc"),
    )
    .await;
    assert_eq!(names(&one), vec!["c"]);
    let (_, rest) = get(
        &http,
        &emu,
        &format!("{base}?fieldSelector=metadata.name!%3Dc&labelSelector=set%20in%20(list)"),
    )
    .await;
    assert_eq!(names(&rest).len(), 5);
    let (code, err) = get(&http, &emu, &format!("{base}?fieldSelector=spec.nope%3D1")).await;
    assert_eq!(code, 400);
    assert!(
        err["message"]
            .as_str()
            .unwrap()
            .contains("field label not supported")
    );
    emu.shutdown().await;
}

/// openshift-apiserver takes only `metadata.name` and `metadata.namespace` in a field selector
/// of its image API, and says so in its own words (recorded: `69-list-is-bad-fieldselector`);
/// a field kube-apiserver would take on a core kind is refused there too.
#[tokio::test]
async fn the_image_api_takes_only_name_and_namespace_field_selectors_as_openshift_does() {
    let (emu, http) = start().await;
    let base = "/apis/image.openshift.io/v1/namespaces/ds/imagestreams";
    let (code, _) = get(
        &http,
        &emu,
        &format!("{base}?fieldSelector=metadata.name%3Dnb"),
    )
    .await;
    assert_eq!(code, 200);
    for field in [
        "spec.dockerImageRepository",
        "status.dockerImageRepository",
        "spec.tags",
    ] {
        let (code, err) = get(&http, &emu, &format!("{base}?fieldSelector={field}%3Dx")).await;
        assert_eq!(code, 400, "{field}");
        assert_eq!(
            err["message"],
            format!(
                r#""{field}" is not a known field selector: only "metadata.name", "metadata.namespace""#
            ),
        );
    }
    emu.shutdown().await;
}

/// Reads a watch response line by line until `stop` says enough, or the stream ends. Every
/// line must open with `type`, as the API server writes them (clients decode the object
/// straight into its type only when they know the type first).
pub(crate) async fn read_watch(
    mut resp: reqwest::Response,
    within: Duration,
    mut stop: impl FnMut(&[Value]) -> bool,
) -> (Vec<Value>, bool) {
    let deadline = Instant::now() + within;
    let mut buf = Vec::new();
    let mut events = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, resp.chunk()).await {
            Err(_) => return (events, false),
            Ok(Ok(None)) => return (events, true),
            Ok(Err(_)) => return (events, true),
            Ok(Ok(Some(chunk))) => {
                buf.extend_from_slice(&chunk);
                while let Some(i) = buf.iter().position(|b| *b == b'\n') {
                    let line: Vec<u8> = buf.drain(..=i).collect();
                    assert!(
                        line.starts_with(br#"{"type":""#),
                        "the type comes first: {}",
                        String::from_utf8_lossy(&line)
                    );
                    events.push(serde_json::from_slice(&line).unwrap());
                }
                if stop(&events) {
                    return (events, false);
                }
            }
        }
    }
}

#[tokio::test]
async fn watches_send_bookmarks_and_end_at_their_timeout() {
    let (emu, http) = start().await;
    emu.seed_str(&configmap("a", json!({}))).unwrap();
    let (_, list) = get(&http, &emu, "/api/v1/namespaces/ds/configmaps").await;
    let rv = list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    let url = format!(
        "{}/api/v1/namespaces/ds/configmaps?watch=true&resourceVersion={rv}&allowWatchBookmarks=true&timeoutSeconds=3",
        emu.url()
    );
    let resp = http.get(url).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    emu.seed_str(&configmap("b", json!({}))).unwrap();
    let (events, ended) = read_watch(resp, Duration::from_secs(10), |_| false).await;
    assert!(ended, "timeoutSeconds ends the stream by itself");
    let types: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(types.first(), Some(&"ADDED"));
    let bookmark = events
        .iter()
        .find(|e| e["type"] == "BOOKMARK")
        .expect("a bookmark after progress");
    assert_eq!(bookmark["object"]["kind"], "ConfigMap");
    let bm_rv: u64 = bookmark["object"]["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let added_rv: u64 = events[0]["object"]["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(bm_rv >= added_rv, "a bookmark never goes back");
    emu.shutdown().await;
}

#[tokio::test]
async fn server_side_apply_conflicts_between_managers_and_force_takes_over() {
    let (emu, http) = start().await;
    let url = |manager: &str, force: bool| {
        format!(
            "{}/api/v1/namespaces/ds/configmaps/ssa?fieldManager={manager}{}",
            emu.url(),
            if force { "&force=true" } else { "" }
        )
    };
    let apply = |x: &str| {
        format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ssa\ndata:\n  x: \"{x}\"\n")
    };
    let send = |u: String, body: String| {
        http.patch(u)
            .header("content-type", "application/apply-patch+yaml")
            .body(body)
            .send()
    };
    assert_eq!(
        send(url("a", false), apply("1")).await.unwrap().status(),
        201
    );
    let conflict = send(url("b", false), apply("2")).await.unwrap();
    assert_eq!(conflict.status(), 409);
    let status: Value = conflict.json().await.unwrap();
    assert_eq!(status["reason"], "Conflict");
    let forced = send(url("b", true), apply("2")).await.unwrap();
    assert_eq!(forced.status(), 200);
    let obj: Value = forced.json().await.unwrap();
    assert_eq!(obj["data"]["x"], "2");
    let managers: Vec<&str> = obj["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["manager"].as_str().unwrap())
        .collect();
    assert!(managers.contains(&"b"));
    let no_manager = http
        .patch(format!("{}/api/v1/namespaces/ds/configmaps/ssa", emu.url()))
        .header("content-type", "application/apply-patch+yaml")
        .body(apply("3"))
        .send()
        .await
        .unwrap();
    assert_eq!(no_manager.status(), 422);
    emu.shutdown().await;
}

#[tokio::test]
async fn custom_resources_refuse_strategic_merge_and_keep_status_out_of_main_writes() {
    let (emu, http) = start().await;
    let base = format!(
        "{}/apis/tekton.dev/v1beta1/namespaces/ds/customruns",
        emu.url()
    );
    let created = http
        .post(&base)
        .json(
            &json!({"apiVersion": "tekton.dev/v1beta1", "kind": "CustomRun",
                      "metadata": {"name": "r"},
                      "spec": {"customRef": {"apiVersion": "x.dev/v1", "kind": "X"}},
                      "status": {"conditions": [{"type": "Succeeded", "status": "True"}]}}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201);
    let obj: Value = created.json().await.unwrap();
    assert!(
        obj.get("status")
            .is_none_or(|s| s.get("conditions").is_none()),
        "status is dropped on create"
    );
    assert_eq!(obj["metadata"]["generation"], 1);
    let smp = http
        .patch(format!("{base}/r"))
        .header("content-type", "application/strategic-merge-patch+json")
        .body(r#"{"metadata":{"labels":{"a":"b"}}}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(smp.status(), 415);
    let status = http
        .patch(format!("{base}/r/status"))
        .header("content-type", "application/merge-patch+json")
        .body(r#"{"status":{"conditions":[{"type":"Succeeded","status":"Unknown","reason":"Running"}]}}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(status.status(), 200);
    let obj: Value = status.json().await.unwrap();
    assert_eq!(obj["status"]["conditions"][0]["reason"], "Running");
    assert_eq!(
        obj["metadata"]["generation"], 1,
        "a status write keeps the generation"
    );
    emu.shutdown().await;
}

#[tokio::test]
async fn bodies_in_a_format_the_emulator_cannot_decode_get_415_and_nothing_is_stored() {
    let (emu, http) = start().await;
    let url = format!("{}/api/v1/namespaces/ds/configmaps", emu.url());
    // What kubectl's imperative `create configmap` sends: protobuf, which the emulator has no
    // codec for. The real server's answer to an unknown format is 415, not a parse error.
    let r = http
        .post(&url)
        .header("content-type", "application/vnd.kubernetes.protobuf")
        .body(b"k8s\0\x0a\x0f".to_vec())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 415);
    let status: Value = r.json().await.unwrap();
    assert_eq!(status["reason"], "UnsupportedMediaType");
    assert!(
        status["message"]
            .as_str()
            .unwrap()
            .contains("application/json"),
        "{status}"
    );
    let (_, list) = get(&http, &emu, "/api/v1/namespaces/ds/configmaps").await;
    assert!(names(&list).is_empty(), "{list}");
    // JSON (with a charset parameter) is taken.
    let r = http
        .post(&url)
        .header("content-type", "application/json; charset=utf-8")
        .body(configmap("ok", json!({})))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 201);
}

#[tokio::test]
async fn a_write_without_a_field_manager_is_recorded_under_the_user_agent_product() {
    let (emu, http) = start().await;
    let url = format!("{}/api/v1/namespaces/ds/configmaps", emu.url());
    let long = "x".repeat(300);
    let cases = [
        ("kubectl/v1.31.0 (linux/amd64) kubernetes/abc", "kubectl"),
        ("python-requests/2.31", "python-requests"),
        (long.as_str(), &long[..128]),
    ];
    for (i, (user_agent, manager)) in cases.into_iter().enumerate() {
        let r = http
            .post(&url)
            .header("user-agent", user_agent)
            .body(configmap(&format!("ua-{i}"), json!({})))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 201, "{user_agent}");
        let obj: Value = r.json().await.unwrap();
        assert_eq!(
            obj["metadata"]["managedFields"][0]["manager"], manager,
            "{user_agent}"
        );
    }
    emu.shutdown().await;
}

#[tokio::test]
async fn patch_bodies_that_do_not_decode_are_400_and_change_nothing() {
    let (emu, http) = start().await;
    let base = format!("{}/api/v1/namespaces/ds/configmaps", emu.url());
    let created = http
        .post(&base)
        .body(configmap("p", json!({})))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status().as_u16(), 201);
    let before: Value = created.json().await.unwrap();
    let cases = [
        ("application/merge-patch+json", "{"),
        ("application/json-patch+json", "{]"),
        ("application/strategic-merge-patch+json", "{"),
        ("application/apply-patch+yaml", "kind: [unterminated"),
    ];
    for (content_type, body) in cases {
        let r = http
            .patch(format!("{base}/p?fieldManager=t"))
            .header("content-type", content_type)
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 400, "{content_type} {body:?}");
        let status: Value = r.json().await.unwrap();
        assert_eq!(status["reason"], "BadRequest", "{content_type}: {status}");
    }
    let (_, after) = get(&http, &emu, "/api/v1/namespaces/ds/configmaps/p").await;
    assert_eq!(
        after["metadata"]["resourceVersion"],
        before["metadata"]["resourceVersion"]
    );
    emu.shutdown().await;
}
