//! The emulator held to a real openshift-apiserver: every recorded operation of
//! `tests/real-openshift/` (its README says where they come from) is sent again, in order, to a
//! fresh emulator, and its answer compared with the real one: the status code always, the body
//! field by field, leaving out only what differs between any two servers (uids, resource
//! versions, timestamps, managed fields). Every difference left must be one of [`KEPT`], each
//! with its reason; a difference not listed fails, and so does a listed one that no longer
//! occurs (the emulator came closer: take it off the list).

use std::collections::BTreeSet;
use std::time::Duration;

use imagegate_emulator::{Config, Emulator, Imports};
use serde_json::Value;

/// The differences kept on purpose: (operation glob, field path glob, why). `*` matches any run
/// of characters.
const KEPT: &[(&str, &str, &str)] = &[
    // Synthetic images: the replay's registry is the answers recorded through the control API
    // (the digests the real imports found, not the real registry's bytes), so its imports make
    // Images with no layers and default metadata. Imports from a real registry carry the real
    // metadata: `tests/it/emulator_imports.rs` of the workspace.
    (
        "*",
        "body*dockerImageLayers",
        "synthetic images have no layers",
    ),
    (
        "*",
        "body*dockerImageManifestMediaType",
        "synthetic images are OCI manifests; the real registry served Docker schema 2",
    ),
    (
        "*",
        "body*dockerImageMetadata*",
        "synthetic images carry default metadata (no config, size, id; Created is the import time)",
    ),
    (
        "*",
        "body*image.metadata.annotations*",
        "the real server records the layer order of real layers (dockerLayersOrder)",
    ),
    (
        "image-get",
        "body.metadata.annotations",
        "the real server records the layer order of real layers (dockerLayersOrder) on the Image too",
    ),
    // Not the emulator: the real cluster also held other namespaces' streams (the conformance
    // suite's, run on it before), which sort before this run's in a list of all namespaces.
    (
        "imagestreams-list-all-namespaces-limit1",
        "body.items[0]*",
        "the real cluster's first stream of all namespaces was another run's (conformance labels)",
    ),
    (
        "imagestreams-list-all-namespaces-limit1",
        "body.metadata.*",
        "the real cluster held more streams in all: another continue token and remaining count",
    ),
    (
        "isi-*",
        "body.status.*",
        "an import of a synthetic image: its Image, and the tag it names (the real one names the source's tag)",
    ),
    // Texts and small fields of Status answers.
    (
        "*",
        "body.details.causes",
        "422 Status without details.causes (the message carries the same text)",
    ),
    (
        "*",
        "body.details.kind",
        "details.kind spelled as the resource (imagestreams) or singular (imagestreamimage) where the real server differs",
    ),
    (
        "*",
        "body.message",
        "Status message texts differ in small ways (kind vs resource, `[]:` vs `:`, the 404 naming `nope:latest`)",
    ),
    (
        "get-istag-unknown-stream",
        "body.details.name",
        "the 404 of an ImageStreamTag of a missing stream names the tag (`nope:latest`); the real server names the stream",
    ),
    // ImageStreamImage: the real server echoes the requested name and the stream's annotations.
    (
        "get-isimage-*",
        "body.metadata.name",
        "ImageStreamImage metadata.name is the canonical `<is>@sha256:<hex>`; the real server echoes the requested form",
    ),
    (
        "get-isimage-*",
        "body.metadata.annotations",
        "the real ImageStreamImage carries the stream's annotations",
    ),
    (
        "*",
        "body.details",
        "a 422 of a failed JSON-patch test and a deleted ImageStreamTag's Status carry details the real server leaves empty",
    ),
    (
        "*",
        "body.items[*].apiVersion",
        "list items of ImageStreamTags carry apiVersion and kind in the emulator",
    ),
    (
        "*",
        "body.items[*].kind",
        "list items of ImageStreamTags carry apiVersion and kind in the emulator",
    ),
];

/// Fields any two servers answer differently.
const VOLATILE: &[&str] = &[
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "managedFields",
    "selfLink",
    "lastTransitionTime",
    "created",
    "openshift.io/image.dockerRepositoryCheck",
];

fn glob(pattern: &str, text: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    let mut rest = text;
    for (i, part) in parts.iter().enumerate() {
        if i == 0 {
            let Some(r) = rest.strip_prefix(part) else {
                return false;
            };
            rest = r;
        } else if i == parts.len() - 1 {
            return rest.ends_with(part);
        } else {
            let Some(at) = rest.find(part) else {
                return false;
            };
            rest = &rest[at + part.len()..];
        }
    }
    rest.is_empty()
}

fn normalized(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, _)| !VOLATILE.contains(&k.as_str()))
                .map(|(k, x)| (k.clone(), normalized(x)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(normalized).collect()),
        other => other.clone(),
    }
}

fn differences(real: &Value, emulated: &Value, path: &str, out: &mut Vec<String>) {
    match (real, emulated) {
        (Value::Object(a), Value::Object(b)) => {
            let keys: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
            for k in keys {
                let p = format!("{path}.{k}");
                match (a.get(k), b.get(k)) {
                    (Some(x), Some(y)) => differences(x, y, &p, out),
                    _ => out.push(p),
                }
            }
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => {
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                differences(x, y, &format!("{path}[{i}]"), out);
            }
        }
        (a, b) if a != b => out.push(path.to_string()),
        _ => {}
    }
}

/// The pull spec the recording's stream imports, and what its registry served at the start.
const FIRST_PULL_SPEC: &str = "127.0.0.1:5000/y:1";
const FIRST_IMAGE: &str = "sha256:ed510c94d4c06ac4f83c6bad5553a49640416fcc6ee10990020a82acac486713";

/// A watch event as `83-watch-summary.json` records it: type, name, generation, and each status
/// tag's images (their first 8 hex digits), newest first.
fn watch_summary(e: &Value) -> Value {
    let o = &e["object"];
    let mut tags = serde_json::Map::new();
    for t in o["status"]["tags"].as_array().into_iter().flatten() {
        let images: Vec<Value> = t["items"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|i| {
                let image = i["image"].as_str().unwrap_or_default();
                Value::String(image.chars().take("sha256:".len() + 8).collect())
            })
            .collect();
        let images = if images.is_empty() {
            vec![Value::String(String::new())]
        } else {
            images
        };
        tags.insert(t["tag"].as_str().unwrap().to_string(), Value::Array(images));
    }
    serde_json::json!({
        "type": e["type"], "name": o["metadata"]["name"],
        "generation": o["metadata"]["generation"], "tags": tags,
    })
}

struct Replay {
    emu: Emulator,
    http: reqwest::Client,
}

impl Replay {
    async fn send(
        &self,
        method: &str,
        path: &str,
        ctype: Option<&str>,
        body: Option<String>,
    ) -> (u16, Value) {
        let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
        let mut req = self
            .http
            .request(method, format!("{}{path}", self.emu.url()))
            .bearer_auth("admin");
        if let Some(ctype) = ctype {
            req = req.header("Content-Type", ctype);
        }
        if let Some(body) = body {
            req = req.body(body);
        }
        let answer = req.send().await.unwrap();
        let code = answer.status().as_u16();
        let text = answer.text().await.unwrap();
        (
            code,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        )
    }

    /// Opens a watch of `path` from now; its events, as they come.
    async fn watch(&self, path: &str) -> std::sync::Arc<std::sync::Mutex<Vec<Value>>> {
        let events = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let mut resp = self
            .http
            .get(format!(
                "{}{path}?watch=true&timeoutSeconds=600",
                self.emu.url()
            ))
            .bearer_auth("admin")
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200);
        let sink = events.clone();
        tokio::spawn(async move {
            let mut buf = Vec::new();
            while let Ok(Some(chunk)) = resp.chunk().await {
                buf.extend_from_slice(&chunk);
                while let Some(i) = buf.iter().position(|b| *b == b'\n') {
                    let line: Vec<u8> = buf.drain(..=i).collect();
                    let e: Value = serde_json::from_slice(&line).unwrap();
                    sink.lock().unwrap().push(e);
                }
            }
        });
        events
    }

    /// The upstream registry serves `digest` for `pull_spec` from now on (a push).
    async fn serve_upstream(&self, pull_spec: &str, digest: &str) {
        let body = serde_json::json!({"image": pull_spec, "digest": digest}).to_string();
        let (code, answer) = self
            .send(
                "POST",
                "/_emulator/v1/registry",
                Some("application/json"),
                Some(body),
            )
            .await;
        assert_eq!(code, 200, "{answer}");
    }

    /// Waits (10 s at most) until the import controller has imported `digest` into `tag`.
    async fn wait_for_import(&self, op: &str, stream: &str, tag: &str, digest: &str) {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            let (_, is) = self.send("GET", stream, None, None).await;
            let current = is["status"]["tags"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|t| t["tag"] == tag)
                .and_then(|t| t["items"][0]["image"].as_str());
            if current == Some(digest) {
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{op}: the import controller did not import {digest} into {tag}: {is}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The resourceVersion of the stream a request is about, now (the recorded requests carry
    /// the versions of the run they were recorded in).
    async fn current_version(&self, path: &str) -> Option<String> {
        let path = path.split('?').next()?;
        let (prefix, rest) = match path.split_once("/imagestreamtags/") {
            Some((p, r)) => (p, r.split(':').next()?),
            None => path.split_once("/imagestreams/")?,
        };
        let name = rest.split('/').next()?;
        let (code, is) = self
            .send("GET", &format!("{prefix}/imagestreams/{name}"), None, None)
            .await;
        (code == 200).then(|| {
            is["metadata"]["resourceVersion"]
                .as_str()
                .map(str::to_string)
        })?
    }
}

#[tokio::test]
async fn every_recorded_operation_answers_as_the_real_server_did_but_for_the_listed_differences() {
    crate::install_crypto_provider();
    // The real controller-manager ran its scheduled imports every 30 s; a second here.
    let imports = Imports {
        scheduled_interval: Duration::from_secs(1),
        ..Imports::default()
    };
    let r = Replay {
        emu: Emulator::start(Config {
            imports,
            ..Config::default()
        })
        .await
        .unwrap(),
        http: reqwest::Client::new(),
    };
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/real-openshift");
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    assert_eq!(files.len(), 80, "the recorded operations");
    // Then `probes2/`: 21 more operations the real servers answered after the run, on its state.
    let mut probes: Vec<_> = std::fs::read_dir(format!("{dir}/probes2"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    probes.sort();
    assert_eq!(probes.len(), 21, "the second probes");
    files.extend(probes);
    // The whole run as a watch of the namespace saw it (`watches/83-watch-summary.json`).
    let watched = r
        .watch("/apis/image.openshift.io/v1/namespaces/diff/imagestreams")
        .await;
    // The image was in the registry before the stream that imports it was created: the real
    // import controller imported it 0.2 s after the create (03-first-import.json).
    r.serve_upstream(FIRST_PULL_SPEC, FIRST_IMAGE).await;
    let (mut codes, mut unexpected, mut used) = (0, Vec::new(), BTreeSet::new());
    let mut main_run: Option<Vec<Value>> = None;
    for (i, file) in files.iter().enumerate() {
        if i == 80 {
            // The main run is over: what its watch saw is what `83-watch-summary.json` holds.
            tokio::time::sleep(Duration::from_millis(500)).await;
            main_run = Some(watched.lock().unwrap().clone());
        }
        let t: Value = serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
        let op = t["op"].as_str().unwrap();
        let er = &t["emulator_request"];
        let path = er["path"].as_str().unwrap();
        let real_code = t["real"]["code"].as_u64();
        if real_code.is_none() {
            // An import the real import controller made: on a push, the registry serves the
            // new digest; then the emulator's import controller must import it, as the real
            // one did (at once for a new tag, on its schedule for a push).
            let digest = er["body"]["digest"].as_str().unwrap();
            let tag = er["body"]["tag"].as_str().unwrap();
            let stream = path
                .trim_start_matches("/_emulator/v1")
                .trim_end_matches("/import");
            let stream = format!("/apis/image.openshift.io/v1{stream}");
            if t["request"]["method"].as_str().unwrap().contains("push") {
                let pushed = t["request"]["path"].as_str().unwrap();
                r.serve_upstream(pushed, digest).await;
            }
            r.wait_for_import(op, &stream, tag, digest).await;
            continue;
        }
        let mut body = er["body"].clone();
        // A status write sends the status the real client sent (the one recorded for the
        // emulator was read from the emulator of the recording, before it rewrote a tracked
        // tag's generation as the real server does).
        if body["status"].is_object() && t["request"]["body"]["status"].is_object() {
            body["status"] = t["request"]["body"]["status"].clone();
        }
        // The versions of today's run: current where the real request was current, stale
        // where it was refused as stale.
        if body["metadata"]["resourceVersion"].is_string()
            && real_code != Some(409)
            && let Some(now) = r.current_version(path).await
        {
            body["metadata"]["resourceVersion"] = Value::String(now);
        }
        // The same for a deletion's precondition.
        if body["preconditions"]["resourceVersion"].is_string()
            && real_code != Some(409)
            && let Some(now) = r.current_version(path).await
        {
            body["preconditions"]["resourceVersion"] = Value::String(now);
        }
        let body = match &body {
            Value::Null => None,
            Value::String(raw) => Some(raw.clone()),
            other => Some(other.to_string()),
        };
        let (code, answer) = r
            .send(
                er["method"].as_str().unwrap(),
                path,
                er["contentType"].as_str(),
                body,
            )
            .await;
        let Some(real_code) = real_code else {
            unreachable!("{op}: imports are waited for before requests are sent");
        };
        codes += 1;
        assert_eq!(
            u64::from(code),
            real_code,
            "{op}: the status code; answer {answer}"
        );
        let mut found = Vec::new();
        let real = normalized(&t["real"]["body"]);
        differences(&real, &normalized(&answer), "body", &mut found);
        for path in found {
            match KEPT
                .iter()
                .position(|(o, p, _)| glob(o, op) && glob(p, &path))
            {
                Some(i) => {
                    used.insert(i);
                }
                None => unexpected.push(format!("{op}: {path}")),
            }
        }
    }
    assert_eq!(codes, 78 + 21, "status codes compared");
    // Every change the real server's watch showed, in order, and no other: one MODIFIED per
    // import and per write, the same generations and the same images in each tag's history.
    let seen: Vec<Value> = main_run.unwrap().iter().map(watch_summary).collect();
    let recorded: Value = serde_json::from_str(
        &std::fs::read_to_string(format!("{dir}/watches/83-watch-summary.json")).unwrap(),
    )
    .unwrap();
    let real: Vec<Value> = recorded["real"]["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            let mut e = e.clone();
            e.as_object_mut().unwrap().remove("rv");
            e
        })
        .collect();
    assert_eq!(
        seen.len(),
        real.len(),
        "the watch's events: {seen:#?}\nthe real server's: {real:#?}"
    );
    for (i, (s, r)) in seen.iter().zip(&real).enumerate() {
        assert_eq!(s, r, "watch event {i}");
    }
    assert!(
        unexpected.is_empty(),
        "differences from the real server that are not listed:\n{}",
        unexpected.join("\n")
    );
    let unused: Vec<&str> = (0..KEPT.len())
        .filter(|i| !used.contains(i))
        .map(|i| KEPT[i].2)
        .collect();
    assert!(
        unused.is_empty(),
        "listed differences that no longer occur (take them off KEPT): {unused:?}"
    );
}

/// A stream whose candidate the registry does not have ends as on the real server with its real
/// import controller (`endstates/87-import-failure.json`): imported at once, and failed, with
/// the same `ImportSuccess=False` condition, generation and message, and no history.
#[tokio::test]
async fn a_failed_first_import_ends_as_on_the_real_server() {
    crate::install_crypto_provider();
    let r = Replay {
        emu: Emulator::start(Config::default()).await.unwrap(),
        http: reqwest::Client::new(),
    };
    let file = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/real-openshift/endstates/87-import-failure.json"
    );
    let real: Value = serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
    let real = &real["real"];
    let (code, _) = r
        .send(
            "POST",
            "/api/v1/namespaces",
            Some("application/json"),
            Some(
                r#"{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "notebooks"}}"#
                    .into(),
            ),
        )
        .await;
    assert_eq!(code, 201);
    let mut create = serde_json::json!({"apiVersion": "image.openshift.io/v1", "kind": "ImageStream",
        "metadata": {"name": "broken"}, "spec": real["spec"].clone()});
    for tag in create["spec"]["tags"].as_array_mut().unwrap() {
        let tag = tag.as_object_mut().unwrap();
        tag.remove("generation");
        tag.remove("annotations");
    }
    let path = "/apis/image.openshift.io/v1/namespaces/notebooks/imagestreams";
    let (code, answer) = r
        .send(
            "POST",
            path,
            Some("application/json"),
            Some(create.to_string()),
        )
        .await;
    assert_eq!(code, 201, "{answer}");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let is = loop {
        let (_, is) = r.send("GET", &format!("{path}/broken"), None, None).await;
        if is["status"]["tags"][0]["conditions"].is_array() {
            break is;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no failed import: {is}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let mut found = Vec::new();
    differences(&normalized(real), &normalized(&is), "", &mut found);
    // The real server writes `annotations: null` on spec tags; the emulator leaves it out.
    found.retain(|p| !p.ends_with(".annotations"));
    assert!(found.is_empty(), "differences: {found:?}\n{is:#}");
}
