//! `POST imagestreamimports` (what `oc import-image` sends) against the emulator's upstream
//! registries: the answer carries `status.images[]` and `status.import`, and the stream's tag
//! history and conditions change exactly as after a scheduled import.

use imagegate_emulator::{Config, Emulator};
use serde_json::{Value, json};

const A: &str = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
const C: &str = "sha256:cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc";

const STREAM: &str = r#"
apiVersion: image.openshift.io/v1
kind: ImageStream
metadata: {name: nb, namespace: ds}
spec:
  tags:
  - name: candidate
    from: {kind: DockerImage, name: "quay.io/org/nb:latest"}
    importPolicy: {scheduled: true}
"#;

struct Env {
    emu: Emulator,
    http: reqwest::Client,
}

impl Env {
    async fn start() -> Env {
        crate::install_crypto_provider();
        let emu = Emulator::start(Config::default()).await.unwrap();
        emu.seed_str(STREAM).unwrap();
        // The scheduled import found A: the registry serves A for the tag from now on.
        emu.import("ds", "nb", "candidate", Some(A)).unwrap();
        Env {
            emu,
            http: reqwest::Client::new(),
        }
    }

    async fn send(&self, method: reqwest::Method, path: &str, body: Value) -> (u16, Value) {
        let resp = self
            .http
            .request(method, format!("{}{path}", self.emu.url()))
            .bearer_auth("user:operator")
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
            .await
            .unwrap();
        let code = resp.status().as_u16();
        (code, resp.json().await.unwrap_or(Value::Null))
    }

    async fn import(&self, body: Value) -> (u16, Value) {
        self.send(
            reqwest::Method::POST,
            "/apis/image.openshift.io/v1/namespaces/ds/imagestreamimports",
            body,
        )
        .await
    }

    async fn registry(&self, body: Value) -> (u16, Value) {
        self.send(reqwest::Method::POST, "/_emulator/v1/registry", body)
            .await
    }

    async fn stream(&self) -> Value {
        let (code, v) = self
            .send(
                reqwest::Method::GET,
                "/apis/image.openshift.io/v1/namespaces/ds/imagestreams/nb",
                Value::Null,
            )
            .await;
        assert_eq!(code, 200);
        v
    }
}

/// Body (E) of DERIVED_request-bodies_promote-and-import.yaml: import the candidate now.
fn import_candidate(import: bool) -> Value {
    json!({
        "kind": "ImageStreamImport", "apiVersion": "image.openshift.io/v1",
        "metadata": {"name": "nb", "namespace": "ds"},
        "spec": {"import": import, "images": [{
            "from": {"kind": "DockerImage", "name": "quay.io/org/nb:latest"},
            "to": {"name": "candidate"},
            "importPolicy": {"scheduled": true, "importMode": "Legacy"},
            "referencePolicy": {"type": "Source"}}]},
        "status": {}
    })
}

fn candidate(stream: &Value) -> Value {
    stream["status"]["tags"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["tag"] == "candidate")
        .cloned()
        .unwrap()
}

#[tokio::test]
async fn an_import_of_a_new_upstream_digest_prepends_it_like_a_scheduled_import() {
    let env = Env::start().await;
    let (code, out) = env
        .registry(json!({"image": "quay.io/org/nb:latest", "digest": C}))
        .await;
    assert_eq!(code, 200, "{out}");
    let generation = env.stream().await["metadata"]["generation"]
        .as_i64()
        .unwrap();

    let (code, answer) = env.import(import_candidate(true)).await;
    assert_eq!(code, 201, "{answer}");
    assert_eq!(answer["kind"], "ImageStreamImport");
    let image = &answer["status"]["images"][0];
    assert_eq!(image["status"]["status"], "Success");
    assert_eq!(image["tag"], "candidate");
    assert_eq!(image["image"]["metadata"]["name"], C);
    assert_eq!(
        image["image"]["dockerImageReference"],
        format!("quay.io/org/nb@{C}")
    );

    let stream = env.stream().await;
    assert_eq!(
        answer["status"]["import"]["metadata"]["resourceVersion"],
        stream["metadata"]["resourceVersion"]
    );
    let tag = candidate(&stream);
    let items: Vec<&Value> = tag["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| &i["image"])
        .collect();
    assert_eq!(items, [C, A], "the new digest is prepended, the old kept");
    assert_eq!(
        stream["metadata"]["generation"].as_i64(),
        Some(generation + 1)
    );
    assert_eq!(
        candidate(&stream)["items"][0]["generation"].as_i64(),
        Some(generation + 1)
    );

    // Importing what is already current writes nothing.
    let rv = stream["metadata"]["resourceVersion"].clone();
    let (code, again) = env.import(import_candidate(true)).await;
    assert_eq!(code, 201, "{again}");
    assert_eq!(env.stream().await["metadata"]["resourceVersion"], rv);
}

#[tokio::test]
async fn a_refused_import_records_the_condition_and_keeps_the_history() {
    let env = Env::start().await;
    let (code, out) = env
        .registry(json!({"image": "quay.io/org/nb:latest", "failure": {"reason": "NotFound"}}))
        .await;
    assert_eq!(code, 200, "{out}");
    let (code, answer) = env.import(import_candidate(true)).await;
    assert_eq!(code, 201, "{answer}");
    let message = "dockerimage.image.openshift.io \"quay.io/org/nb:latest\" not found";
    assert_eq!(
        answer["status"]["images"][0]["status"],
        json!({"metadata": {}, "status": "Failure", "message": message, "reason": "NotFound",
               "details": {"name": "quay.io/org/nb:latest", "group": "image.openshift.io", "kind": "dockerimage"},
               "code": 404})
    );
    let tag = candidate(&env.stream().await);
    assert_eq!(tag["items"][0]["image"], A, "the last good digest stays");
    assert_eq!(tag["conditions"][0]["reason"], "NotFound");
    assert_eq!(tag["conditions"][0]["message"], message);
}

#[tokio::test]
async fn an_import_without_spec_import_only_reports() {
    let env = Env::start().await;
    env.registry(json!({"image": "quay.io/org/nb:latest", "digest": C}))
        .await;
    let before = env.stream().await;
    let (code, answer) = env.import(import_candidate(false)).await;
    assert_eq!(code, 201, "{answer}");
    assert_eq!(
        answer["status"]["images"][0]["image"]["metadata"]["name"],
        C
    );
    assert!(answer["status"].get("import").is_none());
    assert_eq!(env.stream().await, before);
}

#[tokio::test]
async fn bad_imports_are_refused_as_the_api_server_refuses_them() {
    let env = Env::start().await;
    let mut bad = import_candidate(true);
    bad["spec"]["images"][0]["from"]["kind"] = json!("ImageStreamTag");
    let (code, out) = env.import(bad).await;
    assert_eq!(code, 422, "{out}");
    assert_eq!(out["reason"], "Invalid");
    assert!(
        out["message"]
            .as_str()
            .unwrap()
            .contains("spec.images[0].from.kind: Unsupported value"),
        "{out}"
    );

    let mut missing = import_candidate(true);
    missing["metadata"]["name"] = json!("absent");
    let (code, out) = env.import(missing).await;
    assert_eq!(
        (code, out["reason"].as_str()),
        (404, Some("NotFound")),
        "{out}"
    );

    let (code, out) = env
        .send(
            reqwest::Method::GET,
            "/apis/image.openshift.io/v1/namespaces/ds/imagestreamimports",
            Value::Null,
        )
        .await;
    assert_eq!(
        (code, out["reason"].as_str()),
        (405, Some("MethodNotAllowed")),
        "{out}"
    );

    let (code, out) = env
        .registry(json!({"image": "quay.io/org/nb:latest", "digest": "sha256:nope"}))
        .await;
    assert_eq!(code, 400, "{out}");
}

#[tokio::test]
async fn discovery_serves_imagestreamimports_for_create_only() {
    let env = Env::start().await;
    let (code, doc) = env
        .send(
            reqwest::Method::GET,
            "/apis/image.openshift.io/v1",
            Value::Null,
        )
        .await;
    assert_eq!(code, 200);
    let r = doc["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "imagestreamimports")
        .cloned()
        .expect("imagestreamimports is in discovery");
    assert_eq!(
        (r["kind"].as_str(), r["namespaced"].as_bool(), &r["verbs"]),
        (Some("ImageStreamImport"), Some(true), &json!(["create"]))
    );
}

#[tokio::test]
async fn seeded_streams_tell_the_registry_what_it_served() {
    crate::install_crypto_provider();
    let emu = Emulator::start(Config::default()).await.unwrap();
    emu.seed_str(&format!(
        "{STREAM}status:\n  tags:\n  - tag: candidate\n    items:\n    - {{created: '2026-01-01T00:00:00Z', dockerImageReference: 'quay.io/org/nb@{A}', image: '{A}', generation: 1}}\n"
    ))
    .unwrap();
    let http = reqwest::Client::new();
    let registry: Value = http
        .get(format!("{}/_emulator/v1/registry", emu.url()))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        registry["images"]["quay.io/org/nb:latest"],
        json!({"digest": A})
    );
}
