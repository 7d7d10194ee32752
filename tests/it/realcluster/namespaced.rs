//! The namespace-scoped install (`config/` with the component `config/namespaced/`) on the real
//! API server: both programs, as their ServiceAccounts with only the Roles it grants and the
//! `--namespace notebooks` its Deployments get, work in `notebooks` (a run is promoted, an import
//! is delivered) and reach nothing in another namespace: a run there is never seen, an import
//! there is never sent, the real authorizer refuses them there, and a program told to watch there
//! ends at start with the reason.

use std::process::Command;
use std::time::Duration;

use serde_json::json;

use super::cluster::{CONTROLLER_SA, SOURCE_SA};
use super::runs::{Cluster, digest};
use crate::support::Process;
use crate::support::controller::{reason, result};
use crate::support::sink::Sink;
use crate::support::source::Source;

/// The namespace the component is written for, and one it does not list.
const LISTED: &str = "notebooks";
const OTHER: &str = "elsewhere";

fn validated(d: &str) -> [(&str, &str); 3] {
    [
        ("imagestream", "nb"),
        ("digest", d),
        ("validation-status", "Succeeded"),
    ]
}

/// The process's exit status and its one `imagegate: ` line.
async fn ended(mut p: Process) -> (Option<i32>, String) {
    let status = p.exited(Duration::from_secs(30)).await;
    let log = p.log();
    let line = log
        .lines()
        .find(|l| l.starts_with("imagegate: "))
        .unwrap_or_else(|| panic!("no error line: {log}"))
        .to_string();
    (status.code(), line)
}

#[tokio::test]
async fn a_namespace_scoped_install_works_in_its_namespace_and_nowhere_else() {
    let c = Cluster::start_with(super::cluster::ControlPlane::install_namespaced).await;
    let (a, b) = (digest('a'), digest('b'));
    c.promotion_stream(LISTED, &a, &b).await;
    c.promotion_namespace(OTHER, &a, &b).await;
    // OTHER is a namespace the install does not serve: not opted in either.
    c.cp.ok(&[
        "delete",
        "rolebinding",
        "imagegate-controller-writer",
        "-n",
        OTHER,
    ]);

    // What the install grants, as the real authorizer answers.
    for (user, verb, resource) in [
        (CONTROLLER_SA, "list", "tekton.dev/customruns"),
        (CONTROLLER_SA, "patch", "image.openshift.io/imagestreams"),
        (SOURCE_SA, "watch", "image.openshift.io/imagestreams"),
    ] {
        assert!(
            c.cp.can(user, verb, resource, LISTED, ""),
            "{user} {verb} {resource} in {LISTED}"
        );
        assert!(
            !c.cp.can(user, verb, resource, OTHER, ""),
            "{user} {verb} {resource} in {OTHER}"
        );
        assert!(
            !c.cp.can(user, verb, resource, "", ""),
            "{user} {verb} {resource} cluster-wide"
        );
    }

    // The controller with the Deployment's --namespace: a run in the listed namespace is
    // promoted; one in the other namespace is never even started.
    let (mut controller, admin) = c.controller(&["--namespace", LISTED]);
    crate::support::wait_ready(admin).await;
    c.create_run(OTHER, "promote-b", &validated(&b), json!({}))
        .await;
    c.create_run(LISTED, "promote-b", &validated(&b), json!({}))
        .await;
    let run = c.done(LISTED, "promote-b").await;
    assert_eq!(
        reason(&run),
        ("True".into(), "Promoted".into()),
        "{:?}",
        run.status
    );
    assert_eq!(result(&run, "promoted-digest"), b);
    assert_eq!(
        c.stream(LISTED).await.current_digest("latest"),
        Some(b.as_str())
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    let untouched = c.runs(OTHER).get("promote-b").await.unwrap();
    assert!(!untouched.has_started(), "{:?}", untouched.status);
    assert_eq!(
        c.stream(OTHER).await.current_digest("latest"),
        Some(a.as_str())
    );
    assert_eq!(c.stream_writes(OTHER).await, 0);
    controller.kill();
    c.cp.assert_never_forbidden(CONTROLLER_SA);

    // Told to watch a namespace the install does not grant, it ends at start with the reason.
    let mut command = Command::new(env!("CARGO_BIN_EXE_imagegate"));
    command
        .args([
            "controller",
            "--namespace",
            OTHER,
            "--admin-addr",
            "127.0.0.1:0",
        ])
        .env("KUBECONFIG", &c.controller_kubeconfig);
    let (status, line) = ended(Process::start("imagegate controller", command)).await;
    assert_eq!(status, Some(1));
    assert!(
        line.contains(&format!(
            "the controller may not list CustomRuns in namespace \"{OTHER}\""
        )),
        "{line}"
    );

    // The source, the same way: an import in the listed namespace is delivered, one in the
    // other namespace is not.
    let sink = Sink::start().await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("source.kubeconfig");
    c.cp.service_account_kubeconfig("imagegate-source", &kubeconfig);
    let mut src = Source::with_kubeconfig(&kubeconfig, &sink.url, &["--namespace", LISTED]);
    src.ready().await;
    c.emu.import(OTHER, "nb", "candidate", &digest('c')).await;
    c.emu.import(LISTED, "nb", "candidate", &digest('d')).await;
    let events = sink.wait_accepted(1).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let sent: Vec<(String, String)> = sink
        .accepted()
        .iter()
        .map(|e| {
            let ext = |n: &str| e.extension(n).map(|v| v.to_string()).unwrap_or_default();
            (ext("namespace"), ext("imagedigest"))
        })
        .collect();
    assert_eq!(sent, [(LISTED.to_string(), digest('d'))], "{events:?}");
    src.stop().await;

    let mut command = Command::new(env!("CARGO_BIN_EXE_imagegate"));
    command
        .args(["source", "--sink", &sink.url, "--namespace", OTHER])
        .args([
            "--checkpoint-namespace",
            "imagegate-system",
            "--admin-addr",
            "127.0.0.1:0",
        ])
        .env("KUBECONFIG", &kubeconfig);
    let (status, line) = ended(Process::start("imagegate source", command)).await;
    assert_eq!(status, Some(1));
    assert!(line.contains(OTHER), "{line}");
}
