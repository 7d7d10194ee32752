//! `imagegate demo`, the README's first command: the real binary runs the whole loop on the
//! embedded emulator and must end with the table of what every stream serves.

use std::process::Command;

fn demo(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_imagegate"))
        .arg("demo")
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

/// The rows after the `IMAGESTREAM` header: (stream, served digest, phase, candidate).
fn table(stdout: &str) -> Vec<Vec<String>> {
    stdout
        .lines()
        .skip_while(|l| !l.starts_with("IMAGESTREAM"))
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .map(|l| l.split_whitespace().map(str::to_string).collect())
        .collect()
}

#[test]
fn the_demo_runs_every_scenario_and_ends_with_the_served_table() {
    let (ok, stdout, stderr) = demo(&[]);
    assert!(ok, "the demo failed:\n{stdout}\n{stderr}");
    let rows = table(&stdout);
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
    assert!(
        stdout.contains("All 5 scenarios ended as expected."),
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
        // The candidate moved: the older digest was refused by the controller.
        "promote: FAILED (CandidateMoved)",
        "rollback: ok (RolledBack)",
        // The served tag's own change reaches the listener and is filtered out.
        "dropped by the trigger's CEL filter",
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
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tekton");
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
