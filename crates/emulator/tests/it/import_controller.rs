//! The emulator's image import controllers, as OpenShift runs them
//! (`../shared/reference/objects/real-openshift/`): a new or changed `DockerImage` spec tag is
//! imported at once, a scheduled one again every interval, a failing one once (no write loop),
//! a seeded stream only once written, and nothing at all with the controllers off.

use std::time::{Duration, Instant};

use imagegate_emulator::{Config, Emulator, Imports};
use serde_json::{Value, json};

const A: &str = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
const B: &str = "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
const STREAMS: &str = "/apis/image.openshift.io/v1/namespaces/ds/imagestreams";

struct Env {
    emu: Emulator,
    http: reqwest::Client,
}

impl Env {
    async fn start(imports: Imports) -> Env {
        crate::install_crypto_provider();
        let emu = Emulator::start(Config {
            imports,
            ..Config::default()
        })
        .await
        .unwrap();
        emu.seed_str("apiVersion: v1\nkind: Namespace\nmetadata: {name: ds}\n")
            .unwrap();
        Env {
            emu,
            http: reqwest::Client::new(),
        }
    }

    async fn send(&self, method: &str, path: &str, ctype: &str, body: Value) -> (u16, Value) {
        let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
        let mut req = self
            .http
            .request(method, format!("{}{path}", self.emu.url()))
            .bearer_auth("admin");
        if !body.is_null() {
            req = req.header("content-type", ctype).body(body.to_string());
        }
        let resp = req.send().await.unwrap();
        let code = resp.status().as_u16();
        (code, resp.json().await.unwrap_or(Value::Null))
    }

    /// The upstream registry serves `digest` for `pull_spec` from now on.
    async fn serve(&self, pull_spec: &str, digest: &str) {
        let body = json!({"image": pull_spec, "digest": digest});
        let (code, answer) = self
            .send("POST", "/_emulator/v1/registry", "application/json", body)
            .await;
        assert_eq!(code, 200, "{answer}");
    }

    async fn create(&self, stream: Value) {
        let (code, answer) = self.send("POST", STREAMS, "application/json", stream).await;
        assert_eq!(code, 201, "{answer}");
    }

    async fn patch(&self, name: &str, patch: Value) {
        let path = format!("{STREAMS}/{name}");
        let ctype = "application/strategic-merge-patch+json";
        let (code, answer) = self.send("PATCH", &path, ctype, patch).await;
        assert_eq!(code, 200, "{answer}");
    }

    async fn get(&self, name: &str) -> Value {
        let (code, is) = self
            .send("GET", &format!("{STREAMS}/{name}"), "", Value::Null)
            .await;
        assert_eq!(code, 200, "{is}");
        is
    }

    /// Waits (10 s at most) until `check` holds for stream `name`; the stream then.
    async fn until(&self, name: &str, what: &str, check: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let is = self.get(name).await;
            if check(&is) {
                return is;
            }
            assert!(Instant::now() < deadline, "{what}: {is:#}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Asserts stream `name` is not written for `quiet`; the stream.
    async fn stays(&self, name: &str, quiet: Duration, why: &str) -> Value {
        let before = self.get(name).await;
        tokio::time::sleep(quiet).await;
        let after = self.get(name).await;
        assert_eq!(
            before["metadata"]["resourceVersion"], after["metadata"]["resourceVersion"],
            "{why}: {after:#}"
        );
        after
    }
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

fn stream(name: &str, tags: Value) -> Value {
    json!({"apiVersion": "image.openshift.io/v1", "kind": "ImageStream",
           "metadata": {"name": name}, "spec": {"tags": tags}})
}

fn fast() -> Imports {
    Imports {
        scheduled_interval: Duration::from_millis(300),
        ..Imports::default()
    }
}

#[tokio::test]
async fn a_new_tag_is_imported_at_once_as_the_real_server_imports_it() {
    let env = Env::start(Imports::default()).await;
    env.serve("quay.io/org/nb:1", A).await;
    env.create(stream(
        "nb",
        json!([{"name": "candidate", "from": {"kind": "DockerImage", "name": "quay.io/org/nb:1"}},
               {"name": "latest"}]),
    ))
    .await;
    let is = env
        .until("nb", "the new tag imported", |is| {
            current(is, "candidate").is_some()
        })
        .await;
    // What the real server showed 0.2 s after its create (04-get-is-after-first-import.json).
    assert_eq!(current(&is, "candidate").as_deref(), Some(A));
    assert_eq!(is["metadata"]["generation"], 2);
    assert_eq!(is["spec"]["tags"][0]["generation"], 2);
    assert_eq!(tag(&is, "candidate")["items"][0]["generation"], 2);
    assert!(
        is["metadata"]["annotations"]["openshift.io/image.dockerRepositoryCheck"].is_string(),
        "{is:#}"
    );
    assert_eq!(
        tag(&is, "candidate")["items"][0]["dockerImageReference"],
        format!("quay.io/org/nb@{A}")
    );
    env.stays(
        "nb",
        Duration::from_millis(400),
        "an import that changed nothing writes nothing",
    )
    .await;

    // A changed `from` is imported at once; so is `generation: 0`, the API's "import now".
    env.serve("quay.io/org/nb:2", B).await;
    env.patch(
        "nb",
        json!({"spec": {"tags": [{"name": "candidate", "from": {"kind": "DockerImage", "name": "quay.io/org/nb:2"}}]}}),
    )
    .await;
    env.until("nb", "the changed from imported", |is| {
        current(is, "candidate").as_deref() == Some(B)
    })
    .await;
    env.serve("quay.io/org/nb:2", A).await;
    env.patch(
        "nb",
        json!({"spec": {"tags": [{"name": "candidate", "generation": 0}]}}),
    )
    .await;
    let is = env
        .until("nb", "generation 0 imported", |is| {
            current(is, "candidate").as_deref() == Some(A)
        })
        .await;
    assert_eq!(tag(&is, "candidate")["items"].as_array().unwrap().len(), 3);
    env.emu.shutdown().await;
}

#[tokio::test]
async fn a_tag_its_registry_does_not_serve_fails_once_and_is_not_tried_again_until_changed() {
    let env = Env::start(Imports::default()).await;
    env.create(stream(
        "nb",
        json!([{"name": "candidate", "from": {"kind": "DockerImage", "name": "quay.io/org/gone:1"}}]),
    ))
    .await;
    let is = env
        .until("nb", "the failure recorded", |is| {
            !tag(is, "candidate")["conditions"].is_null()
        })
        .await;
    let failed = &tag(&is, "candidate")["conditions"][0];
    assert_eq!(failed["type"], "ImportSuccess");
    assert_eq!(failed["status"], "False");
    assert_eq!(failed["reason"], "NotFound");
    assert_eq!(tag(&is, "candidate")["items"], Value::Null);
    env.stays(
        "nb",
        Duration::from_millis(400),
        "a failure is recorded once",
    )
    .await;
}

#[tokio::test]
async fn a_scheduled_tag_is_imported_again_each_interval_and_an_unscheduled_one_is_not() {
    let env = Env::start(fast()).await;
    env.serve("quay.io/org/nb:s", A).await;
    env.serve("quay.io/org/nb:m", A).await;
    env.create(stream(
        "nb",
        json!([{"name": "scheduled", "from": {"kind": "DockerImage", "name": "quay.io/org/nb:s"}, "importPolicy": {"scheduled": true}},
               {"name": "manual", "from": {"kind": "DockerImage", "name": "quay.io/org/nb:m"}}]),
    ))
    .await;
    env.until("nb", "both imported at once", |is| {
        current(is, "scheduled").is_some() && current(is, "manual").is_some()
    })
    .await;
    // A push: the registry serves B for both tags now.
    env.serve("quay.io/org/nb:s", B).await;
    env.serve("quay.io/org/nb:m", B).await;
    let is = env
        .until("nb", "the scheduled import of the push", |is| {
            current(is, "scheduled").as_deref() == Some(B)
        })
        .await;
    assert_eq!(current(&is, "manual").as_deref(), Some(A), "{is:#}");
    tokio::time::sleep(Duration::from_millis(700)).await;
    let is = env.get("nb").await;
    assert_eq!(
        current(&is, "manual").as_deref(),
        Some(A),
        "a tag without importPolicy.scheduled waits for an import by hand"
    );
    assert_eq!(tag(&is, "scheduled")["items"].as_array().unwrap().len(), 2);
}

/// The interval can be changed while the emulator runs (`POST imports`), so that a demo on a
/// long-running emulator shows a scheduled import without OpenShift's 15 minutes.
#[tokio::test]
async fn the_schedule_set_through_the_control_api_takes_effect_at_once() {
    let env = Env::start(Imports::default()).await;
    env.serve("quay.io/org/nb:s", A).await;
    env.create(stream(
        "nb",
        json!([{"name": "scheduled", "from": {"kind": "DockerImage", "name": "quay.io/org/nb:s"}, "importPolicy": {"scheduled": true}}]),
    ))
    .await;
    env.until("nb", "imported at once", |is| {
        current(is, "scheduled").is_some()
    })
    .await;
    env.serve("quay.io/org/nb:s", B).await;
    env.stays(
        "nb",
        Duration::from_millis(700),
        "the push waits for the 15-minute schedule",
    )
    .await;
    let (code, now) = env
        .send(
            "POST",
            "/_emulator/v1/imports",
            "application/json",
            json!({"scheduledIntervalSeconds": 1}),
        )
        .await;
    assert_eq!(code, 200, "{now}");
    assert_eq!(now, json!({"enabled": true, "scheduledIntervalSeconds": 1}));
    env.until("nb", "the scheduled import of the push", |is| {
        current(is, "scheduled").as_deref() == Some(B)
    })
    .await;
    let (code, refused) = env
        .send(
            "POST",
            "/_emulator/v1/imports",
            "application/json",
            json!({"scheduledIntervalSeconds": 0}),
        )
        .await;
    assert_eq!(code, 400, "{refused}");
}

#[tokio::test]
async fn a_seeded_stream_is_left_as_it_was_until_something_writes_it() {
    let env = Env::start(Imports::default()).await;
    env.serve("quay.io/org/nb:1", A).await;
    env.emu
        .seed_str(
            "apiVersion: image.openshift.io/v1\nkind: ImageStream\nmetadata: {name: old, namespace: ds}\n\
             spec:\n  tags:\n  - name: candidate\n    from: {kind: DockerImage, name: 'quay.io/org/nb:1'}\n",
        )
        .unwrap();
    let is = env
        .stays(
            "old",
            Duration::from_millis(400),
            "the seed is a snapshot the controllers had seen",
        )
        .await;
    assert!(current(&is, "candidate").is_none());
    env.patch("old", json!({"metadata": {"labels": {"touched": "yes"}}}))
        .await;
    env.until("old", "imported once written", |is| {
        current(is, "candidate").as_deref() == Some(A)
    })
    .await;
}

#[tokio::test]
async fn a_docker_image_pin_is_imported_at_once_and_reference_tags_never() {
    let env = Env::start(Imports::default()).await;
    env.create(stream(
        "nb",
        json!([{"name": "latest", "from": {"kind": "DockerImage", "name": format!("quay.io/org/nb@{A}")}},
               {"name": "ref", "reference": true, "from": {"kind": "DockerImage", "name": "quay.io/org/nb:ref"}}]),
    ))
    .await;
    let is = env
        .until("nb", "the pin imported", |is| {
            current(is, "latest").is_some()
        })
        .await;
    assert_eq!(current(&is, "latest").as_deref(), Some(A));
    assert_eq!(tag(&is, "ref")["conditions"], Value::Null, "{is:#}");
}

#[tokio::test]
async fn with_the_controllers_off_nothing_is_imported_by_itself() {
    let off = Imports {
        enabled: false,
        ..fast()
    };
    let env = Env::start(off).await;
    env.serve("quay.io/org/nb:1", A).await;
    env.create(stream(
        "nb",
        json!([{"name": "candidate", "from": {"kind": "DockerImage", "name": "quay.io/org/nb:1"}, "importPolicy": {"scheduled": true}}]),
    ))
    .await;
    let is = env
        .stays("nb", Duration::from_millis(700), "no controller, no import")
        .await;
    assert!(current(&is, "candidate").is_none());
}
