//! The differential check: the same request sequence ([`steps`]) to the real kube-apiserver
//! and to the emulator, for a built-in kind (ConfigMap) and a CRD kind (Tekton's CustomRun),
//! answer by answer ([`observe`] says what is compared). Every difference must be in
//! [`KNOWN`], with why it does not matter (the same list is in docs/testing.md); a difference
//! not listed fails the test, and so does a listed one that is gone (the list stays true).
//! Differences that mattered were fixed in the emulator, each with a test in its own suite.

mod observe;
mod steps;

use serde_json::Value;

use super::cluster::ControlPlane;
use crate::support::EmulatorServer;
use observe::{Request, Side};
use steps::{Kind, Step};

/// The steps whose answers differ, each with why that does not matter to the programs.
const KNOWN: &[(&str, &str)] = &[
    (
        "configmap: json patch not a list",
        "the same 400 BadRequest; the message is each server's JSON decoder's wording",
    ),
    (
        "customrun: json patch not a list",
        "the same 400 BadRequest; the message is each server's JSON decoder's wording",
    ),
    (
        "configmap: list",
        "the items of a built-in kind's list carry no kind and apiVersion on the real server; \
         the emulator writes its stored objects as they are, and every client takes the type \
         from the list",
    ),
    ("configmap: list limit 1", "as `configmap: list`"),
    ("configmap: list label selector", "as `configmap: list`"),
    ("configmap: list field selector", "as `configmap: list`"),
    ("configmap: list resourceVersion 0", "as `configmap: list`"),
    (
        "configmap: watch bad resourceVersion",
        "a resourceVersion that is not a number: the real server answers 500 with Go's parse \
         error, the emulator 422; the programs only send resourceVersions a server gave them",
    ),
    (
        "customrun: watch bad resourceVersion",
        "as `configmap: watch bad resourceVersion`",
    ),
    (
        "configmap: list too old",
        "a list at an exact resourceVersion (resourceVersionMatch=Exact) is served from the \
         current state by the emulator, 410 on the real server once compacted; the programs \
         never list at an exact resourceVersion (kube's watcher lists the newest state)",
    ),
    ("customrun: list too old", "as `configmap: list too old`"),
];

/// Runs the steps on both sides; the steps whose answers differ, each with both answers.
async fn run(
    steps: Vec<Step>,
    real: &mut Side,
    emulator: &mut Side,
    servers: (&ControlPlane, &EmulatorServer),
) -> Vec<(String, Value, Value)> {
    let mut differences = Vec::new();
    for step in steps {
        let (name, method, path, content_type, body) = match &step {
            Step::Compact => {
                servers.1.compact().await;
                servers.0.restart_apiserver(true);
                continue;
            }
            Step::Call {
                name,
                method,
                path,
                content_type,
                body,
            } => (name, method, path, content_type, body),
        };
        let req = Request {
            method,
            path,
            content_type,
            body: body.as_deref(),
        };
        let mut seen = Vec::new();
        for side in [&mut *real, &mut *emulator] {
            let (code, bytes) = side.send(&req).await;
            seen.push(side.observe(name, path, code, &bytes));
        }
        let (r, e) = (seen.remove(0), seen.remove(0));
        if r != e {
            differences.push((name.clone(), r, e));
        }
    }
    differences
}

#[tokio::test]
async fn the_emulator_answers_as_the_real_api_server_for_configmaps_and_customruns() {
    let cp = ControlPlane::up();
    cp.ok(&[
        "apply",
        "--server-side",
        "-f",
        &crate::support::upstream::TEKTON_PIPELINE
            .dir()
            .join(crate::support::upstream::CUSTOMRUN_CRD)
            .to_string_lossy(),
    ]);
    cp.established("customruns.tekton.dev");
    cp.ok(&["create", "namespace", "diff"]);
    let emu = EmulatorServer::start().await;
    emu.seed(
        serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "diff"}}),
    )
    .await;

    let mut real = Side::new("kube-apiserver", cp.client().await);
    let mut emulator = Side::new("emulator", emu.client());
    let kinds = [steps::configmap(), steps::customrun()];
    let mut sequence: Vec<Step> = kinds.iter().flat_map(Kind::steps).collect();
    sequence.push(Step::Compact);
    sequence.extend(kinds.iter().flat_map(Kind::after_compaction));
    let differences = run(sequence, &mut real, &mut emulator, (&cp, &emu)).await;

    let mut report = Vec::new();
    for (name, r, e) in &differences {
        let known = KNOWN.iter().any(|(k, _)| k == name);
        println!(
            "{} {name}\n  real:     {r}\n  emulator: {e}",
            if known { "known" } else { "NEW" }
        );
        if !known {
            report.push(format!("{name}:\n  real:     {r}\n  emulator: {e}"));
        }
    }
    for (k, why) in KNOWN {
        if !differences.iter().any(|(n, _, _)| n == k) {
            report.push(format!(
                "{k}: listed as a difference ({why}) but the answers are the same now"
            ));
        }
    }
    for side in [&real, &emulator] {
        for p in &side.rv_problems {
            report.push(format!("{}: {p}", side.name));
        }
    }
    assert!(report.is_empty(), "{}", report.join("\n"));
}
