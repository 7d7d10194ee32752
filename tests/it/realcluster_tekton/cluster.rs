//! The one control plane with Tekton (`scripts/realcluster up --tekton`) that the tests of a run
//! share, each in a namespace of its own. Starting it takes tens of seconds, so the first test to
//! need it starts it and the others use it: under cargo-nextest every test is a process of its own,
//! so the cluster lives in a directory named after the run (`NEXTEST_RUN_ID`), guarded by a file
//! lock, and a watchdog stops it (`scripts/realcluster down`) once the test runner has exited.
//! Under `cargo test` the tests are threads of one process, which is then the owner.

use std::fs::{File, OpenOptions};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde_json::Value;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// The shared cluster: its admin kubeconfig and its directory (logs in `logs/`).
pub struct Cluster {
    /// The admin kubeconfig (`system:masters`).
    pub kubeconfig: PathBuf,
    /// Where `up` keeps everything.
    pub dir: PathBuf,
}

/// The cluster of this test run, started by the first test that asks.
pub fn cluster() -> &'static Cluster {
    static CLUSTER: OnceLock<Cluster> = OnceLock::new();
    CLUSTER.get_or_init(shared)
}

/// The run this process belongs to and the process whose end ends the cluster: the nextest runner
/// (the parent of every test process) or, under `cargo test`, this process.
fn run_and_owner() -> (String, u32) {
    let nextest = std::env::var("NEXTEST_EXECUTION_MODE").as_deref() == Ok("process-per-test");
    match std::env::var("NEXTEST_RUN_ID") {
        Ok(run) if nextest => (run, std::os::unix::process::parent_id()),
        _ => (format!("pid-{}", std::process::id()), std::process::id()),
    }
}

fn shared() -> Cluster {
    let (run, owner) = run_and_owner();
    let dir = std::env::temp_dir().join(format!("imagegate-tekton-{run}"));
    let lock_path = dir.with_extension("lock");
    let failed = dir.with_extension("failed");
    let lock: File = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .expect("the cluster's lock file opens");
    lock.lock().expect("the cluster's lock is taken");
    let cluster = Cluster {
        kubeconfig: dir.join("admin.kubeconfig"),
        dir: dir.clone(),
    };
    if let Ok(why) = std::fs::read_to_string(&failed) {
        panic!("scripts/realcluster up --tekton failed for an earlier test of this run:\n{why}");
    }
    if dir.join("ready").exists() {
        return cluster;
    }
    assert!(
        !dir.exists(),
        "{} exists but was never ready: an earlier `up --tekton` of this run did not finish",
        dir.display()
    );
    let started = Instant::now();
    let out = Command::new(Path::new(ROOT).join("scripts/realcluster"))
        .args(["up", "--tekton"])
        .arg(&dir)
        .env("IMAGEGATE_ETCD_UNSAFE_NO_FSYNC", "1")
        .env(
            "IMAGEGATE_EMULATOR",
            crate::realcluster::cluster::emulator_binary(),
        )
        // The imagegate interceptor the shipped EventListener asks (config/triggers/).
        .env("IMAGEGATE_BIN", env!("CARGO_BIN_EXE_imagegate"))
        // Its own process group: the cluster outlives the test that started it (a runner that
        // kills a timed-out test's group must not take the others' cluster with it).
        .process_group(0)
        .stdin(Stdio::null())
        .output()
        .expect("scripts/realcluster runs");
    if !out.status.success() {
        let why = String::from_utf8_lossy(&out.stderr).into_owned();
        let _ = std::fs::write(&failed, &why);
        panic!("scripts/realcluster up --tekton failed:\n{why}");
    }
    eprintln!(
        "the shared Tekton cluster started in {:.1} s ({}):\n{}",
        started.elapsed().as_secs_f64(),
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    watch_owner(owner, &dir, &[&lock_path, &failed]);
    std::fs::write(dir.join("ready"), b"").expect("the ready mark is written");
    cluster
}

/// Stops the cluster (and removes its lock files) once `owner` has exited: a watchdog in the
/// background of a shell that exits at once, so that nobody waits for it.
fn watch_owner(owner: u32, dir: &Path, files: &[&Path]) {
    let status = Command::new("sh")
        .arg("-c")
        .arg(
            r#"(while kill -0 "$0" 2>/dev/null; do sleep 1; done; "$1" down "$2"; shift 2; rm -f "$@") &"#,
        )
        .arg(owner.to_string())
        .arg(Path::new(ROOT).join("scripts/realcluster"))
        .arg(dir)
        .args(files)
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("the cluster's watchdog starts");
    assert!(status.success(), "the cluster's watchdog did not start");
}

/// kubectl against the shared cluster, as admin.
pub struct Kubectl<'a> {
    cluster: &'a Cluster,
}

impl Cluster {
    /// kubectl as admin.
    pub fn kubectl(&self) -> Kubectl<'_> {
        Kubectl { cluster: self }
    }

    /// A kubeconfig (written to `path`) for ServiceAccount `ns/sa`, with a TokenRequest token as
    /// a pod's projected token would be: the identity a program under test runs as.
    pub fn kubeconfig_of(&self, ns: &str, sa: &str, path: &Path) {
        let k = self.kubectl();
        let token = k.ok(&["create", "token", "-n", ns, sa, "--duration=1h"]);
        let server = k.ok(&[
            "config",
            "view",
            "--minify",
            "-o",
            "jsonpath={.clusters[0].cluster.server}",
        ]);
        let ca = format!(
            "--certificate-authority={}",
            self.dir.join("pki/ca.crt").display()
        );
        let config = |args: &[&str]| {
            let out = Command::new("kubectl")
                .env("KUBECONFIG", path)
                .arg("config")
                .args(args)
                .output()
                .expect("kubectl runs");
            assert!(out.status.success(), "kubectl config {args:?}: {out:?}");
        };
        config(&[
            "set-cluster",
            "realcluster",
            "--server",
            &server,
            &ca,
            "--embed-certs",
        ]);
        config(&["set-credentials", sa, "--token", token.trim()]);
        config(&[
            "set-context",
            "realcluster",
            "--cluster=realcluster",
            "--user",
            sa,
        ]);
        config(&["use-context", "realcluster"]);
    }

    /// A log of a component `up --tekton` started (for a failure's message).
    pub fn log_tail(&self, name: &str) -> String {
        let text = std::fs::read_to_string(self.dir.join("logs").join(format!("{name}.log")))
            .unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }
}

impl Kubectl<'_> {
    /// kubectl with `args`, and `stdin` as its input.
    pub fn run(&self, args: &[&str], stdin: &str) -> Output {
        use std::io::Write;
        let mut child = Command::new("kubectl")
            .env("KUBECONFIG", &self.cluster.kubeconfig)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("kubectl is on PATH (scripts/test builds the pinned one)");
        child
            .stdin
            .take()
            .unwrap()
            .write_all(stdin.as_bytes())
            .unwrap();
        child.wait_with_output().unwrap()
    }

    /// kubectl with `args`; fails the test with its output unless it succeeds. Its stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        self.ok_with(args, "")
    }

    fn ok_with(&self, args: &[&str], stdin: &str) -> String {
        let out = self.run(args, stdin);
        assert!(
            out.status.success(),
            "kubectl {args:?} failed:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Creates the objects of a YAML text in namespace `ns` (server-side validation, strict).
    pub fn create(&self, ns: &str, yaml: &str) {
        self.ok_with(&["create", "-n", ns, "-f", "-"], yaml);
    }

    /// A namespace of its own for a test, with the ServiceAccount `default` that a controller
    /// manager would make (there is none here) and that Tekton reads for every TaskRun's pod.
    pub fn namespace(&self, ns: &str) {
        self.ok(&["create", "namespace", ns]);
        self.ok(&["create", "serviceaccount", "-n", ns, "default"]);
    }

    /// An object as JSON, or None when it does not exist.
    pub fn get(&self, ns: &str, what: &str) -> Option<Value> {
        let out = self.run(&["get", "-n", ns, what, "-o", "json"], "");
        if !out.status.success() {
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(err.contains("NotFound"), "kubectl get {what} failed: {err}");
            return None;
        }
        Some(serde_json::from_slice(&out.stdout).expect("kubectl prints JSON"))
    }

    /// Polls `what` until `done` holds for it (every 200 ms, at most `seconds`); the object then.
    pub fn wait(&self, ns: &str, what: &str, seconds: u64, done: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + Duration::from_secs(seconds);
        loop {
            let object = self.get(ns, what);
            if let Some(object) = object.as_ref().filter(|o| done(o)) {
                return object.clone();
            }
            assert!(
                Instant::now() < deadline,
                "{ns}/{what} did not get there in {seconds} s; last seen:\n{}\n--- tekton-pipelines-controller.log:\n{}",
                serde_json::to_string_pretty(&object).unwrap(),
                self.cluster.log_tail("tekton-pipelines-controller")
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

/// The status of an object's `Succeeded` condition (`True`, `False`, `Unknown`), if it has one.
pub fn succeeded(object: &Value) -> Option<&str> {
    condition(object, "Succeeded").and_then(|c| c["status"].as_str())
}

/// An object's condition of type `kind`.
pub fn condition<'a>(object: &'a Value, kind: &str) -> Option<&'a Value> {
    object["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == kind)
}

/// Done: a `Succeeded` condition that is no longer `Unknown`.
pub fn finished(object: &Value) -> bool {
    matches!(succeeded(object), Some("True" | "False"))
}
