//! Answers the differential check (`tests/it/realcluster/differential/` in the workspace) found
//! to differ from a real kube-apiserver v1.35 and that were fixed here: each test pins the real
//! server's answer, as observed, for a ConfigMap or a CustomRun.

use imagegate_emulator::{Config, Emulator};
use serde_json::{Value, json};

async fn start() -> (Emulator, reqwest::Client) {
    crate::install_crypto_provider();
    let emu = Emulator::start(Config::default()).await.unwrap();
    emu.seed_str("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: ds\n")
        .unwrap();
    (emu, reqwest::Client::new())
}

const CMS: &str = "/api/v1/namespaces/ds/configmaps";
const RUNS: &str = "/apis/tekton.dev/v1beta1/namespaces/ds/customruns";

/// Sends a request; the code and the body (JSON, or a watch's events as an array).
async fn send(
    http: &reqwest::Client,
    emu: &Emulator,
    method: &str,
    path: &str,
    content_type: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let mut req = http.request(
        reqwest::Method::from_bytes(method.as_bytes()).unwrap(),
        format!("{}{path}", emu.url()),
    );
    if let Some(b) = body {
        req = req.header("Content-Type", content_type).body(b.to_string());
    }
    let r = req.send().await.unwrap();
    let code = r.status().as_u16();
    let text = r.text().await.unwrap();
    let v = if path.contains("watch=true") {
        Value::Array(
            text.lines()
                .filter_map(|l| serde_json::from_str(l).ok())
                .collect(),
        )
    } else {
        serde_json::from_str(&text).unwrap_or_default()
    };
    (code, v)
}

fn run(name: &str) -> Value {
    json!({"apiVersion": "tekton.dev/v1beta1", "kind": "CustomRun", "metadata": {"name": name},
           "spec": {"customRef": {"apiVersion": "imagegate.dev/v1alpha1", "kind": "ImagePromotion"}}})
}

#[tokio::test]
async fn names_and_generate_names_must_be_subdomains() {
    let (emu, http) = start().await;
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "Not_Valid"}});
    let (code, s) = send(&http, &emu, "POST", CMS, "application/json", Some(cm)).await;
    assert_eq!(code, 422);
    assert!(
        s["message"]
            .as_str()
            .unwrap()
            .starts_with("ConfigMap \"Not_Valid\" is invalid: metadata.name: Invalid value: \"Not_Valid\": a lowercase RFC 1123 subdomain"),
        "{s}"
    );
    assert_eq!(s["details"]["kind"], "ConfigMap");
    assert_eq!(s["details"]["causes"][0]["field"], "metadata.name");
    assert_eq!(s["details"]["causes"][0]["reason"], "FieldValueInvalid");
    let event =
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"generateName": "promote."}});
    let (code, s) = send(&http, &emu, "POST", CMS, "application/json", Some(event)).await;
    assert_eq!(code, 422);
    assert_eq!(s["details"]["causes"][0]["field"], "metadata.generateName");
    let ok = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"generateName": "checkpoint-"}});
    let (code, _) = send(&http, &emu, "POST", CMS, "application/json", Some(ok)).await;
    assert_eq!(code, 201);
    // Images are named by their digest, which is no subdomain.
    let digest = format!("sha256:{}", "a".repeat(64));
    let image = json!({"apiVersion": "image.openshift.io/v1", "kind": "Image", "metadata": {"name": digest},
                       "dockerImageReference": format!("quay.io/org/nb@{digest}")});
    let (code, s) = send(
        &http,
        &emu,
        "POST",
        "/apis/image.openshift.io/v1/images",
        "application/json",
        Some(image),
    )
    .await;
    assert_eq!(code, 201, "{s}");
}

#[tokio::test]
async fn a_create_with_a_resource_version_is_an_unclassified_500() {
    let (emu, http) = start().await;
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "r", "resourceVersion": "5"}});
    let (code, s) = send(&http, &emu, "POST", CMS, "application/json", Some(cm)).await;
    assert_eq!(code, 500);
    assert_eq!(
        s["message"],
        "resourceVersion should not be set on objects to be created"
    );
    assert!(s.get("reason").is_none(), "{s}");
}

#[tokio::test]
async fn a_custom_resource_has_no_unconditional_update() {
    let (emu, http) = start().await;
    let (code, s) = send(
        &http,
        &emu,
        "PUT",
        &format!("{RUNS}/missing"),
        "application/json",
        Some(run("missing")),
    )
    .await;
    assert_eq!((code, s["reason"].as_str()), (404, Some("NotFound")));
    send(
        &http,
        &emu,
        "POST",
        RUNS,
        "application/json",
        Some(run("a")),
    )
    .await;
    let (code, s) = send(
        &http,
        &emu,
        "PUT",
        &format!("{RUNS}/a"),
        "application/json",
        Some(run("a")),
    )
    .await;
    assert_eq!(code, 422);
    assert_eq!(
        s["message"],
        "customruns.tekton.dev \"a\" is invalid: metadata.resourceVersion: Invalid value: 0: must be specified for an update"
    );
    assert_eq!(s["details"]["kind"], "customruns");
    assert_eq!(
        s["details"]["causes"][0]["field"],
        "metadata.resourceVersion"
    );
    // A ConfigMap may be updated without one.
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}});
    send(
        &http,
        &emu,
        "POST",
        CMS,
        "application/json",
        Some(cm.clone()),
    )
    .await;
    let (code, _) = send(
        &http,
        &emu,
        "PUT",
        &format!("{CMS}/c"),
        "application/json",
        Some(cm),
    )
    .await;
    assert_eq!(code, 200);
}

#[tokio::test]
async fn refusals_are_worded_as_kube_apiserver_words_them() {
    let (emu, http) = start().await;
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}, "data": {"k": "v"}});
    let (_, created) = send(&http, &emu, "POST", CMS, "application/json", Some(cm)).await;
    let a = format!("{CMS}/a");
    let other = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "b"}});
    let (code, s) = send(&http, &emu, "PUT", &a, "application/json", Some(other)).await;
    assert_eq!(code, 400);
    assert_eq!(
        s["message"],
        "the name of the object (b) does not match the name on the URL (a)"
    );

    let failing = json!([{"op": "test", "path": "/data/k", "value": "x"}]);
    let (code, s) = send(
        &http,
        &emu,
        "PATCH",
        &a,
        "application/json-patch+json",
        Some(failing),
    )
    .await;
    assert_eq!((code, s["reason"].as_str()), (422, Some("Invalid")));
    assert_eq!(
        s["message"],
        "the server rejected our request due to an error in our request"
    );

    let (code, s) = send(&http, &emu, "PATCH", &a, "text/plain", Some(json!("x"))).await;
    assert_eq!(
        (code, s["message"].as_str()),
        (415, Some("415: Unsupported Media Type"))
    );
    send(
        &http,
        &emu,
        "POST",
        RUNS,
        "application/json",
        Some(run("r")),
    )
    .await;
    let (code, s) = send(
        &http,
        &emu,
        "PATCH",
        &format!("{RUNS}/r"),
        "text/plain",
        Some(json!("x")),
    )
    .await;
    assert_eq!(code, 415);
    assert_eq!(
        s["message"],
        "the body of the request was in an unknown format - accepted media types include: \
         application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml"
    );

    let uid = created["metadata"]["uid"].as_str().unwrap();
    let pre = json!({"preconditions": {"uid": "00000000-0000-0000-0000-000000000000"}});
    let (code, s) = send(&http, &emu, "DELETE", &a, "application/json", Some(pre)).await;
    assert_eq!(code, 409);
    assert_eq!(
        s["message"],
        format!(
            "Operation cannot be fulfilled on ConfigMap \"a\": the UID in the precondition \
             (00000000-0000-0000-0000-000000000000) does not match the UID in record ({uid}). \
             The object might have been deleted and then recreated"
        )
    );
    assert_eq!(s["details"], json!({"kind": "ConfigMap", "name": "a"}));
}

#[tokio::test]
async fn apply_refusals_carry_their_causes() {
    let (emu, http) = start().await;
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}, "data": {"k": "v"}});
    send(&http, &emu, "POST", CMS, "application/json", Some(cm)).await;
    let a = format!("{CMS}/a");
    let applied = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}, "data": {"k": "applied"}});
    let (code, s) = send(
        &http,
        &emu,
        "PATCH",
        &a,
        "application/apply-patch+yaml",
        Some(applied.clone()),
    )
    .await;
    assert_eq!(code, 422);
    assert_eq!(
        s["details"]["causes"],
        json!([{"reason": "FieldValueRequired", "message": "Required value: is required for apply patch", "field": "fieldManager"}])
    );
    let (code, s) = send(
        &http,
        &emu,
        "PATCH",
        &format!("{a}?fieldManager=m"),
        "application/apply-patch+yaml",
        Some(applied),
    )
    .await;
    assert_eq!(code, 409);
    assert_eq!(s["details"]["causes"][0]["reason"], "FieldManagerConflict");
    assert_eq!(s["details"]["causes"][0]["field"], ".data.k");
}

#[tokio::test]
async fn an_apply_that_creates_is_one_write_and_a_custom_resource_delete_answers_a_status() {
    let (emu, http) = start().await;
    let (_, list) = send(&http, &emu, "GET", RUNS, "", None).await;
    let from = list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    let (code, _) = send(
        &http,
        &emu,
        "PATCH",
        &format!("{RUNS}/b?fieldManager=m"),
        "application/apply-patch+yaml",
        Some(run("b")),
    )
    .await;
    assert_eq!(code, 201);
    let (code, s) = send(&http, &emu, "DELETE", &format!("{RUNS}/b"), "", None).await;
    assert_eq!(
        (code, s["kind"].as_str(), s["status"].as_str()),
        (200, Some("Status"), Some("Success"))
    );
    assert_eq!(s["details"]["kind"], "customruns");
    let (_, events) = send(
        &http,
        &emu,
        "GET",
        &format!("{RUNS}?watch=true&timeoutSeconds=1&resourceVersion={from}"),
        "",
        None,
    )
    .await;
    let types: Vec<&str> = events
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["type"].as_str().unwrap())
        .collect();
    assert_eq!(types, ["ADDED", "DELETED"]);
    assert_eq!(
        events[0]["object"]["metadata"]["managedFields"][0]["manager"],
        "m"
    );
}

#[tokio::test]
async fn a_status_write_is_recorded_for_the_status_subresource_and_type_errors_name_the_type() {
    let (emu, http) = start().await;
    // Tekton's released CRD, whose schema types the fields (the emulator's stand-in keeps any).
    let text = std::fs::read_to_string(crate::kubectl::released_customrun_crd()).unwrap();
    let mut crd: Value = serde_norway::from_str(&text).unwrap();
    let path = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/customruns.tekton.dev";
    let (_, current) = send(&http, &emu, "GET", path, "application/json", None).await;
    crd["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"].clone();
    let (code, _) = send(&http, &emu, "PUT", path, "application/json", Some(crd)).await;
    assert_eq!(code, 200, "the released CRD replaces the stand-in");
    send(
        &http,
        &emu,
        "POST",
        RUNS,
        "application/json",
        Some(run("a")),
    )
    .await;
    let status = json!({"status": {"conditions": [{"type": "Succeeded", "status": "Unknown"}]}});
    let (code, s) = send(
        &http,
        &emu,
        "PATCH",
        &format!("{RUNS}/a/status"),
        "application/merge-patch+json",
        Some(status),
    )
    .await;
    assert_eq!(code, 200);
    let entries: Vec<(&str, Option<&str>)> = s["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (f["operation"].as_str().unwrap(), f["subresource"].as_str()))
        .collect();
    assert_eq!(entries, [("Update", None), ("Update", Some("status"))]);
    let mut bad = run("bad");
    bad["spec"]["params"] = json!("not a list");
    let (code, s) = send(&http, &emu, "POST", RUNS, "application/json", Some(bad)).await;
    assert_eq!(code, 422);
    assert_eq!(
        s["details"]["causes"][0],
        json!({"reason": "FieldValueTypeInvalid", "field": "spec.params",
               "message": "Invalid value: \"string\": spec.params in body must be of type array: \"string\""})
    );
}

#[tokio::test]
async fn a_streaming_list_ends_with_a_bookmark_only_when_bookmarks_are_allowed() {
    let (emu, http) = start().await;
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}});
    send(&http, &emu, "POST", CMS, "application/json", Some(cm)).await;
    let stream = format!(
        "{CMS}?watch=true&timeoutSeconds=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan"
    );
    let (_, events) = send(&http, &emu, "GET", &stream, "", None).await;
    let types = |events: &Value| -> Vec<String> {
        events
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["type"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(types(&events), ["ADDED"]);
    let (_, events) = send(
        &http,
        &emu,
        "GET",
        &format!("{stream}&allowWatchBookmarks=true"),
        "",
        None,
    )
    .await;
    assert_eq!(types(&events), ["ADDED", "BOOKMARK"]);
    assert_eq!(
        events[1]["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"],
        "true"
    );
}
