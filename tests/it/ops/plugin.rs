//! The binary as the kubectl plugin: installed as `kubectl-imagegate` on the `PATH`, the real
//! kubectl (the pinned one `scripts/test` puts on the `PATH`) finds it and runs
//! `kubectl imagegate ...`, with kubectl's `--kubeconfig`, `--context` and `-n` flags.

use std::path::{Path, PathBuf};

use super::{Ops, Output, with_ds_context};

/// A directory holding `kubectl-imagegate`, a symlink to the binary under test (the install
/// README.md describes), and the `PATH` with it first.
fn plugin_path(dir: &Path) -> std::ffi::OsString {
    let link = dir.join("kubectl-imagegate");
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_imagegate"), &link).unwrap();
    let mut paths = vec![dir.to_path_buf()];
    paths.extend(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    ));
    std::env::join_paths(paths).unwrap()
}

async fn kubectl(path: &std::ffi::OsStr, kubeconfig: Option<&Path>, args: &[&str]) -> Output {
    let mut cmd = tokio::process::Command::new("kubectl");
    cmd.args(args)
        .env("PATH", path)
        .env_remove("KUBECONFIG")
        .env_remove("RUST_LOG");
    if let Some(k) = kubeconfig {
        cmd.env("KUBECONFIG", k);
    }
    cmd.output()
        .await
        .expect("kubectl is on PATH (scripts/test puts the pinned one there)")
        .into()
}

#[tokio::test]
async fn kubectl_runs_the_plugin_with_its_flags_and_exit_status() {
    let o = Ops::new().await;
    let promoted = o
        .run(&[
            "promote",
            "nb",
            "-n",
            "ds",
            "--validation-status",
            "Succeeded",
        ])
        .await;
    assert_eq!(promoted.code, Some(0), "{promoted}");
    let dir = tempfile::tempdir().unwrap();
    let path = plugin_path(dir.path());

    let list = kubectl(&path, None, &["plugin", "list"]).await;
    let installed: PathBuf = dir.path().join("kubectl-imagegate");
    assert!(
        list.stdout.contains(&installed.display().to_string()),
        "{list}"
    );

    // KUBECONFIG from the environment, -n after the command.
    let out = kubectl(
        &path,
        Some(&o.kubeconfig),
        &["imagegate", "status", "-n", "ds"],
    )
    .await;
    assert_eq!(out.code, Some(0), "{out}");
    let row = out.stdout.lines().nth(1).unwrap_or_default().to_string();
    assert!(
        row.starts_with("nb:latest") && row.contains("Promoted"),
        "{out}"
    );

    // --kubeconfig and --context, as kubectl's: the context's namespace is ds.
    let two_contexts = dir.path().join("two-contexts");
    with_ds_context(&o.kubeconfig, &two_contexts);
    let by_context = kubectl(
        &path,
        None,
        &[
            "imagegate",
            "status",
            "--kubeconfig",
            two_contexts.to_str().unwrap(),
            "--context",
            "ds-context",
            "-o",
            "json",
        ],
    )
    .await;
    assert_eq!(by_context.code, Some(0), "{by_context}");
    let v: serde_json::Value = serde_json::from_str(&by_context.stdout).unwrap();
    assert_eq!(v["items"][0]["namespace"], "ds", "{by_context}");
    let default_ns = kubectl(
        &path,
        None,
        &[
            "imagegate",
            "status",
            "--kubeconfig",
            two_contexts.to_str().unwrap(),
        ],
    )
    .await;
    assert_eq!(
        default_ns.stdout, "No ImageStreams gated by imagegate found.\n",
        "the current context's namespace is default: {default_ns}"
    );

    // The plugin's exit status reaches kubectl's caller: 3 once the candidate is rejected.
    o.emu()
        .import("ds", "nb", "candidate", crate::support::controller::C)
        .await;
    let rejected = o.run(&["reject", "nb", "-n", "ds"]).await;
    assert_eq!(rejected.code, Some(0), "{rejected}");
    let failed = kubectl(
        &path,
        Some(&o.kubeconfig),
        &["imagegate", "status", "-n", "ds"],
    )
    .await;
    assert_eq!(failed.code, Some(3), "{failed}");

    // As a plugin it is the operator commands alone, named as kubectl runs it.
    let help = kubectl(&path, None, &["imagegate", "--help"]).await;
    assert_eq!(help.code, Some(0), "{help}");
    assert!(
        help.stdout.contains("Usage: kubectl imagegate <COMMAND>"),
        "{help}"
    );
    let commands: Vec<&str> = help
        .stdout
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(
        commands,
        [
            "status", "promote", "rollback", "reject", "import", "pin", "help"
        ],
        "{help}"
    );
    let unknown = kubectl(&path, None, &["imagegate", "controller"]).await;
    assert_eq!(unknown.code, Some(2), "{unknown}");
}
