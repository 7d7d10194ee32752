//! Bad configuration, refused at the door: each value that can be checked without the API
//! server ends the real binary before it connects, with the exit status of its kind (2 for what
//! clap refuses, 1 for the rest) and exactly one line on stderr that names the input and what is
//! wrong; in JSON log mode that line is the one JSON error record.

use std::process::{Command, Output};

/// Runs `imagegate` with `args` and extra environment; nothing else of the test's environment
/// that the programs read leaks in.
fn imagegate(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_imagegate"));
    command
        .args(args)
        .env_remove("RUST_LOG")
        .env_remove("K_SINK")
        .env_remove("K_CE_OVERRIDES")
        .env_remove("K_AUDIENCE")
        .env_remove("K_OIDC_SERVICE_ACCOUNT")
        .env("KUBECONFIG", "/nonexistent/imagegate-test-kubeconfig");
    for (k, v) in env {
        command.env(k, v);
    }
    command.output().expect("the binary runs")
}

/// The one line a refused start prints, after checking the exit status.
fn refused(out: &Output, status: i32) -> String {
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(status), "{err}");
    err
}

/// The single line of an error of the program itself (exit status 1).
fn one_line(out: &Output) -> String {
    let err = refused(out, 1);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "one line: {err}");
    lines[0].to_string()
}

/// The first line of a usage error (exit status 2; clap adds a hint after a blank line).
fn usage(out: &Output) -> String {
    let err = refused(out, 2);
    err.lines().next().unwrap_or_default().to_string()
}

#[test]
fn a_sink_that_is_not_http_is_refused() {
    let out = imagegate(&["source", "--sink", "ftp://x/"], &[]);
    assert_eq!(
        one_line(&out),
        "imagegate: --sink/K_SINK \"ftp://x/\" is not an http or https URL with a host (the scheme is \"ftp\")"
    );
    let out = imagegate(&["source"], &[("K_SINK", "unix:/run/sink.sock")]);
    assert_eq!(
        one_line(&out),
        "imagegate: --sink/K_SINK \"unix:/run/sink.sock\" is not an http or https URL with a host (the scheme is \"unix\")"
    );
    let out = imagegate(
        &[
            "source",
            "--sink",
            "http://x/",
            "--dead-letter-sink",
            "mailto:ops@example.com",
        ],
        &[],
    );
    assert_eq!(
        one_line(&out),
        "imagegate: --dead-letter-sink \"mailto:ops@example.com\" is not an http or https URL with a host (the scheme is \"mailto\")"
    );
}

#[test]
fn a_label_selector_the_api_server_would_refuse_is_refused_before_connecting() {
    let out = imagegate(
        &["source", "--sink", "http://x/", "--selector", "=bad"],
        &[],
    );
    assert_eq!(
        usage(&out),
        "error: invalid value '=bad' for '--selector <SELECTOR>': \"=bad\" is not a label \
         selector: requirement 1 (\"=bad\") has no key"
    );
    let out = imagegate(
        &["source", "--sink", "http://x/", "--selector", "team in ds"],
        &[],
    );
    assert_eq!(
        usage(&out),
        "error: invalid value 'team in ds' for '--selector <SELECTOR>': \"team in ds\" is not a \
         label selector: requirement 1 (\"team in ds\") needs its values in parentheses, e.g. (a,b)"
    );
}

#[test]
fn a_tag_that_is_no_tag_name_is_refused() {
    let out = imagegate(&["source", "--sink", "http://x/", "--tag", "a/b"], &[]);
    assert_eq!(
        usage(&out),
        "error: invalid value 'a/b' for '--tag <NAME>': \"a/b\" is not a tag name (at most 128 \
         letters, digits, '_', '.' and '-', starting with a letter, digit or '_')"
    );
}

#[test]
fn bad_overrides_name_k_ce_overrides_once() {
    let out = imagegate(
        &["source", "--sink", "http://x/"],
        &[("K_CE_OVERRIDES", r#"{"extensions": 5}"#)],
    );
    assert_eq!(
        one_line(&out),
        "imagegate: K_CE_OVERRIDES: \"extensions\" must be an object, got 5"
    );
    let out = imagegate(
        &["source", "--sink", "http://x/"],
        &[("K_CE_OVERRIDES", "{extensions}")],
    );
    assert_eq!(
        one_line(&out),
        "imagegate: K_CE_OVERRIDES \"{extensions}\" is not JSON: key must be a string at line 1 column 2"
    );
}

#[test]
fn a_bad_backoff_delay_is_refused_before_connecting() {
    let out = imagegate(
        &["source", "--sink", "http://x/", "--backoff-delay", "5s"],
        &[],
    );
    let line = one_line(&out);
    assert!(
        line.starts_with("imagegate: --backoff-delay \"5s\": "),
        "{line}"
    );
}

#[test]
fn a_missing_kubeconfig_is_one_short_line_printed_once() {
    for program in [&["controller"][..], &["source", "--sink", "http://x/"]] {
        let out = imagegate(program, &[]);
        assert_eq!(
            one_line(&out),
            "imagegate: KUBECONFIG \"/nonexistent/imagegate-test-kubeconfig\" cannot be read: \
             No such file or directory (os error 2)",
            "{program:?}"
        );
    }
}

#[test]
fn in_json_log_mode_the_error_is_the_one_json_record() {
    let out = imagegate(
        &["--log-format", "json", "source", "--sink", "ftp://x/"],
        &[],
    );
    let line = one_line(&out);
    let record: serde_json::Value = serde_json::from_str(&line).expect("a JSON record");
    assert_eq!(record["level"], "ERROR");
    assert_eq!(record["message"], "imagegate failed");
    assert_eq!(
        record["error"],
        "--sink/K_SINK \"ftp://x/\" is not an http or https URL with a host (the scheme is \"ftp\")"
    );
}

/// What needs the API server is checked at start: ImageStreams the source may not list (a
/// refused selector, RBAC, no OpenShift) or a checkpoint that cannot be written at all end the
/// source before it delivers anything, and CustomRuns the controller cannot list (no Tekton, no
/// RBAC), or reviews it may not ask, end the controller; each with the reason in one line,
/// printed once.
mod at_start {
    use std::process::Command;
    use std::time::Duration;

    use imagegate_emulator::control::Fault;

    use crate::support::EmulatorServer;
    use crate::support::process::Process;
    use crate::support::sink::Sink;
    use crate::support::source::Source;

    /// Starts the controller against `emu` after it injected `fault`; its exit status and the
    /// one line of its error (the one line that starts with `imagegate: `).
    async fn controller_refused(emu: &EmulatorServer, fault: Fault) -> (Option<i32>, String) {
        emu.inject_fault(fault).await;
        controller_ended(emu).await
    }

    /// Starts the controller against `emu`; its exit status and the one line of its error.
    async fn controller_ended(emu: &EmulatorServer) -> (Option<i32>, String) {
        controller_ended_with(emu, &[]).await
    }

    /// [`controller_ended`], with `extra` flags.
    async fn controller_ended_with(emu: &EmulatorServer, extra: &[&str]) -> (Option<i32>, String) {
        let dir = tempfile::tempdir().unwrap();
        let kubeconfig = dir.path().join("kubeconfig");
        emu.write_kubeconfig(&kubeconfig, "controller");
        let mut command = Command::new(env!("CARGO_BIN_EXE_imagegate"));
        command
            .args(["controller", "--admin-addr", "127.0.0.1:0"])
            .args(extra)
            .env("KUBECONFIG", &kubeconfig)
            .env("RUST_LOG", "info");
        let mut controller = Process::start("imagegate controller", command);
        let status = controller.exited(Duration::from_secs(20)).await;
        let log = controller.log();
        let errors: Vec<&str> = log
            .lines()
            .filter(|l| l.starts_with("imagegate: "))
            .collect();
        assert_eq!(errors.len(), 1, "printed once: {log}");
        (status.code(), errors[0].to_string())
    }

    #[tokio::test]
    async fn a_cluster_without_customruns_ends_the_controller_at_start() {
        let emu = EmulatorServer::start().await;
        let not_served = Fault {
            verb: Some("list".into()),
            resource: Some("customruns".into()),
            count: 1,
            status: Some(404),
            ..Fault::default()
        };
        let (status, line) = controller_refused(&emu, not_served).await;
        assert_eq!(status, Some(1));
        assert!(
            line.starts_with(
                "imagegate: the API server does not serve tekton.dev/v1beta1 CustomRuns (the CRD \
                 customruns.tekton.dev is missing): install Tekton Pipelines v0.44 or later, whose \
                 release.yaml has it (the API server says: "
            ),
            "{line}"
        );
    }

    /// A fresh emulator serves CustomRuns (its stand-in for Tekton's CRD) but not ImagePromotions
    /// until their CRD is applied: the controller names the CRD and the manifest, and ends; with
    /// the CRD applied it starts (and becomes ready).
    #[tokio::test]
    async fn a_cluster_without_the_imagepromotion_crd_ends_the_controller_at_start() {
        let emu = EmulatorServer::start().await;
        let (status, line) = controller_ended(&emu).await;
        assert_eq!(status, Some(1));
        assert_eq!(
            line,
            "imagegate: the API server does not serve imagegate.dev/v1alpha1 ImagePromotions (the \
             CRD imagepromotions.imagegate.dev is missing): apply \
             config/300-imagepromotion-crd.yaml (kubectl apply -f \
             config/300-imagepromotion-crd.yaml, or all of config/) (the API server says: the \
             server could not find the requested resource)"
        );

        emu.seed_str(&imagegate::controller::crd::crd_yaml()).await;
        let dir = tempfile::tempdir().unwrap();
        let kubeconfig = dir.path().join("kubeconfig");
        emu.write_kubeconfig(&kubeconfig, "controller");
        let admin = crate::support::free_port();
        let mut command = Command::new(env!("CARGO_BIN_EXE_imagegate"));
        command
            .args(["controller", "--admin-addr", &format!("127.0.0.1:{admin}")])
            .env("KUBECONFIG", &kubeconfig);
        let mut controller = Process::start("imagegate controller", command);
        crate::support::wait_ready(admin).await;
        controller.kill();
    }

    #[tokio::test]
    async fn a_controller_rbac_refuses_ends_it_at_start() {
        let emu = EmulatorServer::start().await;
        let no_list = Fault {
            verb: Some("list".into()),
            resource: Some("customruns".into()),
            count: 1,
            status: Some(403),
            ..Fault::default()
        };
        let (status, line) = controller_refused(&emu, no_list).await;
        assert_eq!(status, Some(1));
        assert!(
            line.starts_with(
                "imagegate: the controller may not list CustomRuns: grant it list and watch on \
                 customruns (config/202-clusterrole-controller.yaml; with --namespace, \
                 config/namespaced/)"
            ),
            "{line}"
        );
        let no_reviews = Fault {
            verb: Some("create".into()),
            resource: Some("subjectaccessreviews".into()),
            count: 1,
            status: Some(403),
            ..Fault::default()
        };
        let (status, line) = controller_refused(&emu, no_reviews).await;
        assert_eq!(status, Some(1));
        assert!(
            line.starts_with(
                "imagegate: the controller may not create subjectaccessreviews, which it needs to \
                 check that a run's service account may promote: grant it create on \
                 subjectaccessreviews (config/202-clusterrole-controller.yaml)"
            ),
            "{line}"
        );
    }

    /// A Lease the program cannot use (F-12: every replica would stand by, ready, for ever)
    /// ends it at start: RBAC refuses it (403), its namespace does not exist (404), or its name
    /// is refused (422). The checks are dry runs: no Lease is left behind.
    #[tokio::test]
    async fn a_lease_that_cannot_be_used_ends_the_program_at_start() {
        let emu = EmulatorServer::start().await;
        emu.seed_str(&imagegate::controller::crd::crd_yaml()).await;
        emu.seed_str("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: imagegate-system\n")
            .await;
        let elect = ["--leader-elect", "--identity", "pod-1"];
        let (status, line) = controller_ended_with(
            &emu,
            &[&elect[..], &["--lease-namespace", "nowhere"]].concat(),
        )
        .await;
        assert_eq!(status, Some(1));
        assert!(
            line.starts_with(
                "imagegate: the leader Lease nowhere/imagegate-controller cannot be used: \
                 namespace nowhere does not exist: point --lease-namespace (POD_NAMESPACE) at \
                 the namespace the program runs in (the API server says: "
            ),
            "{line}"
        );
        let (status, line) = controller_ended_with(
            &emu,
            &[&elect[..], &["--lease-name", "Not_A_Name"]].concat(),
        )
        .await;
        assert_eq!(status, Some(1));
        assert!(
            line.starts_with(
                "imagegate: the leader Lease imagegate-system/Not_A_Name cannot be used: the API \
                 server refuses it (an invalid --lease-name or --lease-namespace)"
            ),
            "{line}"
        );
        emu.inject_fault(Fault {
            verb: Some("get".into()),
            resource: Some("leases".into()),
            count: 1,
            status: Some(403),
            ..Fault::default()
        })
        .await;
        let (status, line) = controller_ended_with(&emu, &elect).await;
        assert_eq!(status, Some(1));
        assert!(
            line.starts_with(
                "imagegate: the leader Lease imagegate-system/imagegate-controller cannot be \
                 used: the program may not get it: grant get, create and update on leases"
            ),
            "{line}"
        );
        let leases: kube::Api<k8s_openapi::api::coordination::v1::Lease> =
            kube::Api::all(emu.client());
        assert!(
            leases
                .list(&Default::default())
                .await
                .unwrap()
                .items
                .is_empty(),
            "the checks wrote nothing"
        );
    }

    /// Starts the source against `emu` and returns its exit status and the one line of its
    /// error.
    async fn refused_at_start(emu: &EmulatorServer) -> (Option<i32>, String) {
        let dir = tempfile::tempdir().unwrap();
        let sink = Sink::start().await;
        let mut src = Source::new(emu, &dir, &sink.url, &[]);
        let status = src.exited().await;
        let log = src.log();
        let errors: Vec<&str> = log
            .lines()
            .filter(|l| l.contains("the checkpoint cannot be written"))
            .collect();
        assert_eq!(errors.len(), 1, "printed once: {log}");
        assert!(sink.accepted().is_empty(), "nothing was delivered");
        (status.code(), errors[0].to_string())
    }

    /// Starts the source against `emu` after it injected `fault`; its exit status and the one
    /// line of its error.
    async fn source_refused(emu: &EmulatorServer, fault: Fault) -> (Option<i32>, String) {
        emu.inject_fault(fault).await;
        let dir = tempfile::tempdir().unwrap();
        let sink = Sink::start().await;
        let mut src = Source::new(emu, &dir, &sink.url, &["--selector", "team=ds"]);
        let status = src.exited().await;
        let log = src.log();
        let errors: Vec<&str> = log
            .lines()
            .filter(|l| l.starts_with("imagegate: "))
            .collect();
        assert_eq!(errors.len(), 1, "printed once: {log}");
        assert!(sink.accepted().is_empty(), "nothing was delivered");
        (status.code(), errors[0].to_string())
    }

    #[tokio::test]
    async fn an_imagestream_list_the_api_server_refuses_ends_the_source_at_start() {
        let emu = EmulatorServer::start().await;
        emu.seed_str("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: imagegate-system\n")
            .await;
        let list_refused = |status| Fault {
            verb: Some("list".into()),
            resource: Some("imagestreams".into()),
            count: 1,
            status: Some(status),
            ..Fault::default()
        };
        for (status, starts) in [
            (
                400,
                "imagegate: the API server refuses to list ImageStreams with --selector \"team=ds\" \
                 (the API server says: ",
            ),
            (
                403,
                "imagegate: the source may not list ImageStreams: grant it list and watch on \
                 imagestreams (config/201-clusterrole-source.yaml; with --namespace, \
                 config/namespaced/) (the API server says: ",
            ),
            (
                404,
                "imagegate: the API server does not serve image.openshift.io/v1 ImageStreams: \
                 imagegate needs OpenShift or OKD (the API server says: ",
            ),
        ] {
            let (code, line) = source_refused(&emu, list_refused(status)).await;
            assert_eq!(code, Some(1), "{status}");
            assert!(line.starts_with(starts), "{status}: {line}");
        }
    }

    #[tokio::test]
    async fn a_missing_checkpoint_namespace_ends_the_source_at_start() {
        // No namespace imagegate-system.
        let emu = EmulatorServer::start().await;
        assert_eq!(
            refused_at_start(&emu).await,
            (
                Some(1),
                "imagegate: the checkpoint cannot be written: namespace imagegate-system does not \
                 exist: create it, or point --checkpoint-namespace at the source's namespace (the \
                 API server says: namespaces \"imagegate-system\" not found)"
                    .to_string()
            )
        );
    }

    #[tokio::test]
    async fn a_checkpoint_rbac_refuses_ends_the_source_at_start() {
        let emu = EmulatorServer::start().await;
        emu.seed_str("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: imagegate-system\n")
            .await;
        emu.inject_fault(Fault {
            verb: Some("create".into()),
            resource: Some("configmaps".into()),
            count: 1,
            status: Some(403),
            ..Fault::default()
        })
        .await;
        let (status, line) = refused_at_start(&emu).await;
        assert_eq!(status, Some(1));
        assert!(
            line.starts_with(
                "imagegate: the checkpoint cannot be written: the source's ServiceAccount may not \
                 write ConfigMaps in namespace imagegate-system: grant it list, create, patch and \
                 delete on configmaps there"
            ),
            "{line}"
        );
    }
}

#[test]
fn an_audience_without_a_service_account_is_refused_before_connecting() {
    let out = imagegate(
        &["source", "--sink", "http://x/"],
        &[("K_AUDIENCE", "broker-aud")],
    );
    assert_eq!(
        one_line(&out),
        "imagegate: --sink-audience (K_AUDIENCE) needs --oidc-service-account (K_OIDC_SERVICE_ACCOUNT): the ServiceAccount whose token is sent"
    );
}

#[test]
fn a_receiver_without_a_sender_or_with_a_weak_or_unreadable_secret_is_refused() {
    let out = imagegate(&["receiver"], &[]);
    assert_eq!(
        one_line(&out),
        "imagegate: no sender configured: give --distribution-secret-file, --harbor-secret-file, --github-secret-file, --quay-secret-file or --dockerhub-secret-file"
    );
    let dir = tempfile::tempdir().unwrap();
    // A secret that goes in the URL must read the same however a sender encodes the URL.
    let spaced = dir.path().join("spaced");
    std::fs::write(&spaced, "a secret/with spaces and a slash\n").unwrap();
    let out = imagegate(
        &["receiver", "--quay-secret-file", spaced.to_str().unwrap()],
        &[],
    );
    assert_eq!(
        one_line(&out),
        format!(
            "imagegate: --quay-secret-file {}: the secret goes in the URL: use only letters, digits, '-', '.', '_' and '~'",
            spaced.display()
        )
    );
    let short = dir.path().join("short");
    std::fs::write(&short, "guessable\n").unwrap();
    let out = imagegate(
        &[
            "receiver",
            "--distribution-secret-file",
            short.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(
        one_line(&out),
        format!(
            "imagegate: --distribution-secret-file {}: the secret has 9 bytes; at least 16 are needed",
            short.display()
        )
    );
    let missing = dir.path().join("missing");
    let out = imagegate(
        &[
            "receiver",
            "--distribution-secret-file",
            missing.to_str().unwrap(),
        ],
        &[],
    );
    let line = one_line(&out);
    assert!(
        line.starts_with(&format!(
            "imagegate: cannot read --distribution-secret-file {}: ",
            missing.display()
        )),
        "{line}"
    );
    let out = imagegate(&["receiver", "--min-interval-seconds", "0"], &[]);
    assert!(usage(&out).contains("--min-interval-seconds"), "{out:?}");
}
