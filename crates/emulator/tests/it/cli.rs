//! The command line of the `imagegate-emulator` binary: its flags, and a clear error for a seed
//! file it cannot read.

use std::process::Command;

fn emulator(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_imagegate-emulator"))
        .args(args)
        .env_remove("RUST_LOG")
        .output()
        .expect("the imagegate-emulator binary runs")
}

#[test]
fn help_lists_every_flag_of_the_emulator() {
    let out = emulator(&["--help"]);
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    for flag in [
        "--kubeconfig",
        "--addr",
        "--seed",
        "--retained-events",
        "--internal-registry",
        "--user",
        "--log-format",
        "--version",
    ] {
        assert!(help.contains(flag), "no {flag} in:\n{help}");
    }
}

#[test]
fn version_prints_the_package_version() {
    let out = emulator(&["--version"]);
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        format!("imagegate-emulator {}", env!("CARGO_PKG_VERSION"))
    );
}

#[test]
fn emulator_refuses_a_seed_file_that_does_not_exist() {
    let dir = tempfile::tempdir().unwrap();
    let kc = dir.path().join("kubeconfig");
    let out = emulator(&[
        "--kubeconfig",
        kc.to_str().unwrap(),
        "--seed",
        "/nonexistent/seed.yaml",
    ]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot seed /nonexistent/seed.yaml"));
    assert!(
        !kc.exists(),
        "no kubeconfig for an emulator that did not start"
    );
}
