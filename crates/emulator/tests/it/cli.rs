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
        "--serve-image-api-only",
        "--secure-port",
        "--bind-address",
        "--tls-cert-file",
        "--tls-private-key-file",
        "--requestheader-client-ca-file",
        "--requestheader-allowed-names",
        "--requestheader-username-headers",
        "--requestheader-group-headers",
        "--requestheader-extra-headers-prefix",
        "--authorization-kubeconfig",
        "--authorization-always-allow-paths",
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

#[test]
fn the_image_api_mode_names_the_flags_it_lacks() {
    let out = emulator(&["--serve-image-api-only"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    for flag in [
        "--tls-cert-file",
        "--tls-private-key-file",
        "--requestheader-client-ca-file",
        "--authorization-kubeconfig",
    ] {
        assert!(err.contains(flag), "{flag} not named in:\n{err}");
    }
    // Without the mode, the kubeconfig to write is required, and the mode's flags are refused.
    let out = emulator(&[]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--kubeconfig"));
    let out = emulator(&["--kubeconfig", "/dev/null", "--secure-port", "8443"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--serve-image-api-only"));
}

#[test]
fn the_image_api_mode_says_which_file_it_cannot_read() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.crt");
    let missing = missing.to_str().unwrap();
    let out = emulator(&[
        "--serve-image-api-only",
        "--tls-cert-file",
        missing,
        "--tls-private-key-file",
        missing,
        "--requestheader-client-ca-file",
        missing,
        "--authorization-kubeconfig",
        missing,
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("the serving certificate") && err.contains("missing.crt"),
        "{err}"
    );
}
