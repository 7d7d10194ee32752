//! Interop with the official Python CloudEvents SDK (PyPI `cloudevents`, installed by
//! scripts/test into .venv): what `imagegate source` sends parses in both content modes.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::support::{EmulatorServer, Process, free_port};
use serde_json::{Value, json};

const A: &str = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
const B: &str = "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

fn python() -> PathBuf {
    if let Ok(p) = std::env::var("IMAGEGATE_PYTHON") {
        return p.into();
    }
    let venv = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".venv/bin/python");
    if venv.exists() {
        venv
    } else {
        "python3".into()
    }
}

async fn receive_one(mode: &str) -> Value {
    let emu = EmulatorServer::start().await;
    emu.seed_str(&json!({
        "apiVersion": "image.openshift.io/v1", "kind": "ImageStream",
        "metadata": {"name": "nb", "namespace": "ds"},
        "spec": {"tags": [{"name": "candidate", "from": {"kind": "DockerImage", "name": "quay.io/org/nb:latest"}}]}
    }).to_string())
    .await;
    emu.import("ds", "nb", "candidate", A).await;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("events.jsonl");
    let port = free_port();
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/python/cloudevents_sink.py");
    let mut sink = Command::new(python());
    sink.arg(&script).arg(port.to_string()).arg(&out);
    let _sink = Process::start(
        "the Python CloudEvents sink (scripts/test installs the SDK into .venv)",
        sink,
    );
    let kubeconfig = dir.path().join("kubeconfig");
    emu.write_kubeconfig(&kubeconfig, "source");
    let admin = free_port();
    let mut source = Command::new(env!("CARGO_BIN_EXE_imagegate"));
    source
        .args([
            "source",
            "--sink",
            &format!("http://127.0.0.1:{port}/"),
            "--content-mode",
            mode,
        ])
        .args([
            "--checkpoint-namespace",
            "default",
            "--backoff-delay",
            "PT0.05S",
        ])
        .args(["--admin-addr", &format!("127.0.0.1:{admin}")])
        .env("KUBECONFIG", &kubeconfig)
        .env("K_CE_OVERRIDES", r#"{"extensions": {"team": "notebooks"}}"#);
    let _source = Process::start("imagegate source", source);
    crate::support::wait_ready(admin).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    emu.import("ds", "nb", "candidate", B).await;
    loop {
        let text = std::fs::read_to_string(&out).unwrap_or_default();
        if let Some(line) = text.lines().find(|l| !l.trim().is_empty()) {
            return serde_json::from_str(line).unwrap();
        }
        assert!(
            Instant::now() < deadline,
            "the Python sink received nothing (is the `cloudevents` package installed?)"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn check(record: &Value) {
    assert!(
        record.get("error").is_none(),
        "the Python SDK refused the event: {record}"
    );
    let a = &record["attributes"];
    assert_eq!(a["specversion"], "1.0");
    assert_eq!(a["type"], "dev.imagegate.imagestreamtag.updated");
    assert_eq!(
        a["source"],
        "/apis/image.openshift.io/v1/namespaces/ds/imagestreams/nb"
    );
    assert_eq!(a["subject"], "nb:candidate");
    assert_eq!(a["imagedigest"], B);
    assert_eq!(a["imagetag"], "candidate");
    assert_eq!(a["team"], "notebooks", "K_CE_OVERRIDES extensions arrive");
    assert!(a["id"].as_str().is_some_and(|id| id.len() <= 40));
    assert_eq!(record["data"]["digest"], B);
    assert_eq!(record["data"]["previousDigest"], A);
}

#[tokio::test]
async fn the_python_sdk_parses_binary_mode() {
    let record = receive_one("binary").await;
    assert!(
        record["content_type"]
            .as_str()
            .unwrap()
            .starts_with("application/json")
    );
    check(&record);
}

#[tokio::test]
async fn the_python_sdk_parses_structured_mode() {
    let record = receive_one("structured").await;
    assert!(
        record["content_type"]
            .as_str()
            .unwrap()
            .starts_with("application/cloudevents+json")
    );
    check(&record);
}
