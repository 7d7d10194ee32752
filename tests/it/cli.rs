//! The command line of the real binary: version, clear errors for bad flags, and the log formats.

use std::process::Command;

fn imagegate(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_imagegate"))
        .args(args)
        .env_remove("RUST_LOG")
        .output()
        .expect("the binary runs")
}

#[test]
fn version_prints_the_package_version() {
    let out = imagegate(&["--version"]);
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        format!("imagegate {}", env!("CARGO_PKG_VERSION"))
    );
}

#[test]
fn help_lists_the_product_subcommands_only() {
    let out = imagegate(&["--help"]);
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    let commands: Vec<&str> = help
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(
        commands,
        [
            "source",
            "controller",
            "interceptor",
            "receiver",
            "crds",
            "adopt",
            "status",
            "promote",
            "rollback",
            "reject",
            "import",
            "pin",
            "help"
        ],
        "{help}"
    );
    assert!(help.contains("--version"), "{help}");
}

#[test]
fn a_bad_sink_is_refused_with_a_clear_error() {
    let out = imagegate(&["source", "--sink", "not a url"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(r#"--sink/K_SINK "not a url" is not a URL"#),
        "{err}"
    );
}

#[test]
fn a_namespace_that_is_no_dns_label_is_refused_before_anything_connects() {
    for program in [&["source", "--sink", "http://x/"][..], &["controller"]] {
        let args: Vec<&str> = program
            .iter()
            .copied()
            .chain(["--namespace", "Bad_NS"])
            .collect();
        let out = imagegate(&args);
        assert_eq!(out.status.code(), Some(2), "a usage error: {program:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            err.lines().next().unwrap_or_default(),
            "error: invalid value 'Bad_NS' for '--namespace <NS>': \"Bad_NS\" is not a namespace \
             name (a DNS label: at most 63 lowercase letters, digits and '-', starting and ending \
             with a letter or digit)",
            "{program:?}"
        );
    }
}

#[test]
fn json_log_format_writes_one_json_object_per_line() {
    let out = imagegate(&["--log-format", "json", "source", "--sink", "not a url"]);
    let err = String::from_utf8_lossy(&out.stderr);
    let json_lines: Vec<serde_json::Value> = err
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let line = json_lines
        .iter()
        .find(|v| v["level"] == "ERROR")
        .unwrap_or_else(|| panic!("no JSON error line in {err}"));
    assert_eq!(line["message"], "imagegate failed");
    assert!(line["error"].as_str().unwrap().contains("is not a URL"));
}

#[test]
fn rust_log_sets_the_level() {
    let quiet = Command::new(env!("CARGO_BIN_EXE_imagegate"))
        .args(["--log-format", "json", "source", "--sink", "not a url"])
        .env("RUST_LOG", "off")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&quiet.stderr);
    assert!(
        !err.lines().any(|l| l.starts_with('{')),
        "RUST_LOG=off still logged: {err}"
    );
}
