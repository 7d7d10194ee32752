//! `imagegate-demo` (`cargo demo`), the README's first command: the real binary runs the whole
//! loop on the embedded emulator and must end with the table of what every stream serves.

use std::process::Command;
use std::time::{Duration, Instant};

// The workspace's helper for programs under test (the product's tests share it); this test uses
// only part of it.
#[allow(dead_code)]
#[path = "../../../tests/it/support/process.rs"]
mod process;

use process::Process;

fn demo(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_imagegate-demo"))
        .args(args)
        .env_remove("RUST_LOG")
        .output()
        .expect("the binary runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn digest(c: char) -> String {
    format!("sha256:{}", c.to_string().repeat(64))
}

/// The rows after the `n`th `IMAGESTREAM` header: the served table (stream, served digest, phase,
/// candidate), then the dashboard's (stream, offered tags, build, first workbench, the same
/// without its commit annotation, description).
fn table(stdout: &str, n: usize) -> Vec<Vec<String>> {
    let mut lines = stdout.lines();
    for _ in 0..n {
        let _ = lines.by_ref().find(|l| l.starts_with("IMAGESTREAM"));
    }
    lines
        .take_while(|l| !l.trim().is_empty())
        .map(|l| l.split_whitespace().map(str::to_string).collect())
        .collect()
}

#[test]
fn help_lists_the_demo_flags() {
    let (ok, stdout, stderr) = demo(&["--help"]);
    assert!(ok, "{stderr}");
    for flag in [
        "--keep-running",
        "--kubeconfig",
        "--tekton-dir",
        "--log-format",
        "--version",
    ] {
        assert!(stdout.contains(flag), "no {flag} in:\n{stdout}");
    }
}

#[test]
fn the_demo_runs_every_scenario_and_ends_with_the_served_table() {
    let (ok, stdout, stderr) = demo(&[]);
    assert!(ok, "the demo failed:\n{stdout}\n{stderr}");
    let rows = table(&stdout, 1);
    let expect = [
        (
            "jupyter-datascience-notebook",
            digest('2'),
            "UpdateFailed",
            "sha256:444444444444",
        ),
        (
            "jupyter-minimal-notebook",
            digest('1'),
            "RolledBack",
            "sha256:333333333333",
        ),
        (
            "jupyter-pytorch-notebook",
            digest('7'),
            "Promoted",
            "sha256:777777777777",
        ),
        (
            "jupyter-trustyai-notebook",
            digest('8'),
            "UpdateFailed",
            "sha256:999999999999",
        ),
    ];
    assert_eq!(rows.len(), expect.len(), "table:\n{stdout}");
    for (row, (is, served, phase, candidate)) in rows.iter().zip(expect) {
        assert_eq!(
            row,
            &vec![
                is.to_string(),
                served,
                phase.to_string(),
                candidate.to_string()
            ]
        );
    }
    // What the Open Data Hub dashboard shows: the candidate never offered, the failed updates
    // noted, the promoted stream's first workbench told to update, the rolled-back one not.
    let dashboard = table(&stdout, 2);
    // The same first workbench made without the commit annotation (the Jupyter tile's backend,
    // kubectl, GitOps): Deprecated once a promotion moved the served tag, even after the
    // rollback (which build it runs cannot be told); Latest where nothing moved.
    let expect = [
        (
            "jupyter-datascience-notebook",
            "build-2222222",
            "Latest",
            "Latest",
            "update-failed-note",
        ),
        (
            "jupyter-minimal-notebook",
            "build-1111111",
            "Latest",
            "Deprecated",
            "-",
        ),
        (
            "jupyter-pytorch-notebook",
            "build-7777777",
            "Deprecated",
            "Deprecated",
            "-",
        ),
        (
            "jupyter-trustyai-notebook",
            "build-8888888",
            "Latest",
            "Latest",
            "update-failed-note",
        ),
    ];
    assert_eq!(dashboard.len(), expect.len(), "table:\n{stdout}");
    for (row, (is, build, badge, without, note)) in dashboard.iter().zip(expect) {
        assert_eq!(
            row,
            &[is, "latest[Latest]", build, badge, without, note],
            "{stdout}"
        );
    }
    assert!(
        stdout.contains("All 6 scenarios ended as expected."),
        "{stdout}"
    );

    // The timeline shows what the scenarios are about, from the real programs' answers.
    for needle in [
        // The listener's simulated restart: the source retried, one PipelineRun.
        "503 (simulated restart)",
        // The nonRootUser check of tekton/100-imagepromotion.yaml, reported by the controller.
        "promote: FAILED (ValidationFailed)",
        "failed nonRootUser",
        // The smoke test failed, so the finally `reject` ran.
        "reject: FAILED (Rejected)",
        // A hand-made inline run claiming the rejected build passed: held to notebooks' proof.
        "by-hand-inline: FAILED (Unverified): nothing proves that",
        "ImagePromotion \"notebooks\" governs jupyter-trustyai-notebook and asks for proof",
        // The candidate moved on while the older build was validated: promoted all the same.
        "has since moved on to",
        "rollback: ok (RolledBack)",
        // The dashboard's view in the timeline, as the served tags change.
        "the first workbench shows Deprecated (Deprecated without its commit annotation)",
        "the description says the update failed",
        // A run as the namespace's default service account may not promote: refused at begin.
        "begin: FAILED (Forbidden): service account \"notebooks/default\" may not promote",
        // The served tag's own change reaches the listener and is refused by the imagegate
        // interceptor, which reads the stream's policy from the API.
        "refused by interceptor imagegate: tag \"latest\"",
    ] {
        assert!(
            stdout.contains(needle),
            "the timeline lacks {needle:?}:\n{stdout}"
        );
    }
    // One run per change: the redelivered first event did not start a second PipelineRun.
    let started = stdout
        .matches("started for jupyter-minimal-notebook@")
        .count();
    assert_eq!(started, 1, "{stdout}");
    assert!(
        !stderr.contains("ERROR"),
        "the programs logged errors during the demo:\n{stderr}"
    );
}

#[test]
fn the_demo_runs_the_tekton_files_it_is_given() {
    // A copy of tekton/ whose TriggerTemplate no longer passes `digest` to the Pipeline: the
    // stand-in reads the files, so the demo must fail and say why.
    let dir = tempfile::tempdir().unwrap();
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tekton");
    for entry in std::fs::read_dir(&src).unwrap() {
        let p = entry.unwrap().path();
        if p.extension().is_some_and(|x| x == "yaml") {
            let mut text = std::fs::read_to_string(&p).unwrap();
            if p.file_name().unwrap() == "420-triggertemplate.yaml" {
                text = text.replace(
                    "      - name: digest\n        value: $(tt.params.digest)\n",
                    "",
                );
            }
            std::fs::write(dir.path().join(p.file_name().unwrap()), text).unwrap();
        }
    }
    let (ok, stdout, stderr) = demo(&["--tekton-dir", dir.path().to_str().unwrap()]);
    assert!(
        !ok,
        "the demo passed with a broken TriggerTemplate:\n{stdout}"
    );
    assert!(
        stdout.contains(r#"param "digest" has no value and no default"#),
        "{stdout}\n{stderr}"
    );
}

#[tokio::test]
async fn keep_running_leaves_the_loop_up_for_kubectl_until_sigterm() {
    use imagegate::api::{CustomRun, ImageStream};
    use kube::Api;

    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("demo.kubeconfig");
    let mut command = Command::new(env!("CARGO_BIN_EXE_imagegate-demo"));
    command
        .args(["--keep-running", "--kubeconfig"])
        .arg(&kubeconfig)
        .env_remove("RUST_LOG");
    let mut demo = Process::start("imagegate-demo", command);
    let wait_for = |demo: &Process, needle: &str| {
        let deadline = Instant::now() + Duration::from_secs(60);
        while !demo.log().contains(needle) {
            assert!(
                Instant::now() < deadline,
                "no {needle:?} in the output:\n{}",
                demo.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    wait_for(&demo, "Still running");
    wait_for(
        &demo,
        &format!("export KUBECONFIG={}", kubeconfig.display()),
    );

    // The kubeconfig it wrote reaches the emulator, which holds the demo's results.
    let kc = kube::config::Kubeconfig::read_from(&kubeconfig).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .unwrap();
    let server = config.cluster_url.to_string();
    imagegate::runtime::tls::install_crypto_provider();
    let client = kube::Client::try_from(config).unwrap();
    let streams: Api<ImageStream> = Api::namespaced(client.clone(), "notebooks");
    assert_eq!(
        streams.list(&Default::default()).await.unwrap().items.len(),
        4
    );
    let runs: Api<CustomRun> = Api::namespaced(client, "notebooks");
    let runs = runs.list(&Default::default()).await.unwrap().items;
    assert!(runs.iter().all(CustomRun::is_done), "unfinished CustomRuns");
    assert!(runs.len() >= 10, "{} CustomRuns", runs.len());

    // The loop is still running: an import through the control API starts another PipelineRun.
    let import = format!(
        "{}/_emulator/v1/namespaces/notebooks/imagestreams/jupyter-minimal-notebook/import",
        server.trim_end_matches('/')
    );
    let answer = reqwest::Client::new()
        .post(import)
        .header("content-type", "application/json")
        .body(r#"{"tag":"candidate","digest":"sha256:abababababababababababababababababababababababababababababababab"}"#)
        .send()
        .await
        .unwrap();
    assert!(answer.status().is_success(), "{}", answer.status());
    wait_for(
        &demo,
        "started for jupyter-minimal-notebook@sha256:abababababab",
    );

    let exit = demo
        .stop(Duration::from_secs(60))
        .await
        .expect("the demo was running");
    assert!(exit.success(), "the demo exited {exit} on SIGTERM");
}
