//! The notebook validation Task's script (`tekton/210-task-notebook-validation.yaml`), run here
//! as its step runs it: the script and the step's environment read from the committed file, its
//! `$(params...)` filled from the Task's defaults (or a case's values) and its `$(results...)`
//! paths pointed at files, `python3 -c` in a fresh virtualenv. The notebook server is a stand-in
//! that reads the `NOTEBOOK_ARGS` the Task passes, as `start-notebook.sh` hands them to Jupyter,
//! and answers `<base_url>/api` as Jupyter Server does; the packages the results report and the
//! broken requirement `pip check` finds are distributions' metadata on `PYTHONPATH`, and
//! papermill is a stand-in module that runs no kernel: the script's own logic (the probe, its
//! timeout, pip check, the notebooks, the results in ODH's JSON, stopping the server) is what
//! is exercised.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{Value, json};

const TASK: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tekton/210-task-notebook-validation.yaml"
);

/// A Jupyter Server stand-in: listens where `--ServerApp.port` says, answers
/// `<--ServerApp.base_url>/api` with its version once `READY_AFTER` seconds have passed (503
/// before), or never when `READY_AFTER` is `never`; writes its pid to `SERVER_PID`.
const FAKE_SERVER: &str = r#"
import http.server, os, shlex, sys, time
args = dict(a.split("=", 1) for a in shlex.split(os.environ["NOTEBOOK_ARGS"]))
port, base = int(args["--ServerApp.port"]), args["--ServerApp.base_url"].rstrip("/")
assert args["--ServerApp.token"] == "" and args["--ServerApp.password"] == "", args
open(os.environ["SERVER_PID"], "w").write(str(os.getpid()))
ready = os.environ["READY_AFTER"]
start = time.monotonic()
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        up = ready != "never" and time.monotonic() - start >= float(ready)
        if self.path != base + "/api" or not up:
            self.send_response(404 if self.path != base + "/api" else 503)
            self.end_headers()
            return
        body = b'{"version": "2.14.2"}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
print("fake jupyter server on", port, base, flush=True)
http.server.HTTPServer(("127.0.0.1", port), H).serve_forever()
"#;

/// A papermill stand-in (`python -m papermill IN OUT --cwd DIR`): fails a notebook whose source
/// has `raise`, copies the others to OUT.
const FAKE_PAPERMILL: &str = r#"
import json, shutil, sys
src, out = sys.argv[1], sys.argv[2]
cells = json.load(open(src))["cells"]
if any("raise" in "".join(c["source"]) for c in cells):
    print("PapermillExecutionError: Exception encountered at cell 1", flush=True)
    sys.exit(1)
shutil.copy(src, out)
"#;

/// The Task's `validate` step: its script and its env (name -> value with `$(...)`).
fn step() -> (String, Vec<(String, String)>, BTreeMap<String, String>) {
    let task: Value = serde_norway::from_str(&std::fs::read_to_string(TASK).unwrap()).unwrap();
    let spec = &task["spec"];
    let defaults = spec["params"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| {
            Some((
                p["name"].as_str()?.to_string(),
                p["default"].as_str()?.to_string(),
            ))
        })
        .collect();
    let step = &spec["steps"][0];
    assert_eq!(step["command"], json!(["python3", "-c"]));
    let script = step["args"][0].as_str().unwrap().to_string();
    let env = step["env"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["name"].as_str().unwrap().to_string(),
                e["value"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    (script, env, defaults)
}

/// Tekton's substitution of `$(params.NAME)` and `$(results.NAME.path)`.
fn substitute(text: &str, params: &BTreeMap<String, String>, results: &Path) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find("$(") {
        out.push_str(&rest[..at]);
        let end = rest[at..].find(')').unwrap() + at;
        let expr = &rest[at + 2..end];
        let value = if let Some(p) = expr.strip_prefix("params.") {
            params
                .get(p)
                .unwrap_or_else(|| panic!("no param {p}"))
                .clone()
        } else if let Some(r) = expr
            .strip_prefix("results.")
            .and_then(|r| r.strip_suffix(".path"))
        {
            results.join(r).to_string_lossy().into_owned()
        } else {
            panic!("unexpected $({expr})")
        };
        out.push_str(&value);
        rest = &rest[end + 1..];
    }
    out.push_str(rest);
    out
}

/// A fresh virtualenv (so `pip check` sees only what a case puts there), a working directory,
/// and a directory on `PYTHONPATH` for distributions' metadata and the papermill stand-in.
struct Image {
    dir: tempfile::TempDir,
    /// The server's port (the Task's default, 8888, is another test's too).
    port: u16,
}

impl Image {
    fn new() -> Image {
        let dir = tempfile::tempdir().unwrap();
        let venv = dir.path().join("venv");
        let out = Command::new("python3")
            .args(["-m", "venv"])
            .arg(&venv)
            .output()
            .expect("python3 runs");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        for d in ["site", "home", "work", "results", "bin"] {
            std::fs::create_dir(dir.path().join(d)).unwrap();
        }
        std::fs::write(dir.path().join("server.py"), FAKE_SERVER).unwrap();
        // The Task's default start command, as the ODH images have it on PATH.
        let start = dir.path().join("bin/start-notebook.sh");
        let script = format!(
            "#!/bin/sh\nexec python3 {}\n",
            dir.path().join("server.py").display()
        );
        std::fs::write(&start, script).unwrap();
        let mut perms = std::fs::metadata(&start).unwrap().permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
        std::fs::set_permissions(&start, perms).unwrap();
        Image {
            dir,
            port: crate::support::free_port(),
        }
    }

    fn path(&self, p: &str) -> PathBuf {
        self.dir.path().join(p)
    }

    /// Installs the metadata of a distribution (what importlib.metadata and pip read).
    fn distribution(&self, name: &str, version: &str, requires: &[&str]) {
        // The directory's name has the name normalised (`-` to `_`), as installers write it.
        let dir = format!("{}-{version}.dist-info", name.replace('-', "_"));
        let info = self.path("site").join(dir);
        std::fs::create_dir(&info).unwrap();
        let mut meta = format!("Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n");
        for r in requires {
            meta.push_str(&format!("Requires-Dist: {r}\n"));
        }
        std::fs::write(info.join("METADATA"), meta).unwrap();
        std::fs::write(info.join("RECORD"), "").unwrap();
    }

    fn papermill(&self) {
        let pkg = self.path("site").join("papermill");
        std::fs::create_dir(&pkg).unwrap();
        std::fs::write(pkg.join("__init__.py"), "").unwrap();
        std::fs::write(pkg.join("__main__.py"), FAKE_PAPERMILL).unwrap();
    }

    fn notebook(&self, name: &str, source: &str) {
        let nb = json!({"cells": [{"cell_type": "code", "source": [source], "metadata": {}, "outputs": []}],
                        "metadata": {}, "nbformat": 4, "nbformat_minor": 5});
        std::fs::write(self.path("work").join(name), nb.to_string()).unwrap();
    }

    /// Runs the step with `params` over the Task's defaults (and a free port) and `env` over
    /// the step's.
    fn run(&self, params: &[(&str, &str)], env: &[(&str, &str)]) -> Run {
        let (script, step_env, mut values) = step();
        values.insert("port".into(), self.port.to_string());
        for (k, v) in params {
            values.insert(k.to_string(), v.to_string());
        }
        let results = self.path("results");
        let bin = self.path("venv/bin");
        let path = format!(
            "{}:{}:{}",
            self.path("bin").display(),
            bin.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let mut command = Command::new(bin.join("python3"));
        command
            .arg("-c")
            .arg(substitute(&script, &values, &results))
            .current_dir(self.path("work"))
            .env_clear()
            .env("PATH", path)
            .env("HOME", self.path("home"))
            .env("PYTHONPATH", self.path("site"))
            .env("SERVER_PID", self.path("server.pid"))
            .env("READY_AFTER", "1");
        for (k, v) in step_env {
            command.env(k, substitute(&v, &values, &results));
        }
        command.envs(env.iter().copied());
        Run {
            out: command.output().unwrap(),
            results,
        }
    }

    fn server_pid(&self) -> Option<i32> {
        std::fs::read_to_string(self.path("server.pid"))
            .ok()
            .and_then(|s| s.trim().parse().ok())
    }
}

struct Run {
    out: Output,
    results: PathBuf,
}

impl Run {
    fn log(&self) -> String {
        format!(
            "{}{}",
            String::from_utf8_lossy(&self.out.stdout),
            String::from_utf8_lossy(&self.out.stderr)
        )
    }

    fn result(&self, name: &str) -> String {
        std::fs::read_to_string(self.results.join(name)).unwrap_or_default()
    }

    /// The one line that says why it failed (exit status 1).
    fn failure(&self) -> String {
        assert_eq!(self.out.status.code(), Some(1), "{}", self.log());
        let log = self.log();
        let at = log
            .find("notebook validation failed: ")
            .unwrap_or_else(|| panic!("no failure line: {log}"));
        log[at..].to_string()
    }
}

fn alive(pid: i32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
        && !std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .unwrap_or_default()
            .contains(") Z ")
}

fn python_minor() -> String {
    let out = Command::new("python3")
        .args(["-c", "import sys; print('v%d.%d' % sys.version_info[:2])"])
        .output()
        .unwrap();
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

#[test]
fn a_workbench_that_starts_and_passes_its_checks_reports_its_software_in_odh_json() {
    let image = Image::new();
    image.distribution("jupyterlab", "4.5.1", &[]);
    image.distribution("numpy", "2.1.3", &[]);
    image.papermill();
    image.notebook("smoke.ipynb", "print('hello')");
    let run = image.run(
        &[("test-notebooks", "smoke.ipynb")],
        &[("CUDA_VERSION", "12.6.3"), ("READY_AFTER", "2")],
    );
    let log = run.log();
    assert!(run.out.status.success(), "{log}");
    assert_eq!(
        serde_json::from_str::<Value>(&run.result("software")).unwrap(),
        json!([{"name": "Python", "version": python_minor()}, {"name": "CUDA", "version": "12.6"}])
    );
    assert_eq!(
        run.result("python-dependencies"),
        r#"[{"name":"JupyterLab","version":"4.5"},{"name":"Numpy","version":"2.1"}]"#,
        "compact, major.minor, in the param's order, the missing ones left out"
    );
    assert_eq!(run.result("server-version"), "2.14.2");
    let probing = format!(
        "probing http://127.0.0.1:{}/notebook/imagegate/validation/api for up to 300s",
        image.port
    );
    for line in [
        "HOME ",
        probing.as_str(),
        "the notebook server answered (version 2.14.2)",
        "pip check: No broken requirements found.",
        "test notebook smoke.ipynb passed",
        "notebook validation passed",
    ] {
        assert!(log.contains(line), "{line:?} in {log}");
    }
    let pid = image.server_pid().expect("the server started");
    assert!(!alive(pid), "the server is stopped when the step ends");
}

#[test]
fn each_failed_check_fails_the_step_with_its_reason() {
    let image = Image::new();

    // The server never answers 200: the probe gives up at the timeout, with the last answer.
    let run = image.run(&[("ready-timeout", "3")], &[("READY_AFTER", "never")]);
    let port = image.port;
    assert!(
        run.failure().starts_with(&format!(
            "notebook validation failed: http://127.0.0.1:{port}/notebook/imagegate/validation/api \
             did not answer 200 within 3s (last: HTTP 503); the server's last output:\n\
             fake jupyter server on {port} /notebook/imagegate/validation"
        )),
        "{}",
        run.log()
    );
    assert!(
        !alive(image.server_pid().unwrap()),
        "stopped after a failed probe"
    );

    // The server exits: its status and output, without waiting for the timeout.
    let run = image.run(
        &[(
            "start-command",
            "python3 -c 'print(\"no kernel\"); raise SystemExit(3)'",
        )],
        &[],
    );
    assert!(
        run.failure().starts_with(&format!(
            "notebook validation failed: the notebook server exited with status 3 before \
             http://127.0.0.1:{port}/notebook/imagegate/validation/api answered; its last \
             output:\nno kernel"
        )),
        "{}",
        run.log()
    );

    // A HOME the pod's user cannot write, as an image built for a fixed UID has.
    let run = image.run(&[], &[("HOME", "/nonexistent/home")]);
    assert!(
        run.failure().starts_with(
            "notebook validation failed: HOME /nonexistent/home is not writable by uid "
        ),
        "{}",
        run.log()
    );

    // Test notebooks without papermill in the image.
    image.notebook("smoke.ipynb", "print('hello')");
    let run = image.run(&[("test-notebooks", "smoke.ipynb")], &[]);
    assert_eq!(
        run.failure().trim(),
        "notebook validation failed: test-notebooks are given but papermill is not installed in \
         the image"
    );

    // A failing notebook names itself.
    image.papermill();
    image.notebook("broken.ipynb", "raise ValueError('x')");
    let run = image.run(&[("test-notebooks", "smoke.ipynb broken.ipynb")], &[]);
    assert!(
        run.log().contains("test notebook smoke.ipynb passed"),
        "{}",
        run.log()
    );
    assert_eq!(
        run.failure().trim(),
        "notebook validation failed: test notebook broken.ipynb failed:\n\
         PapermillExecutionError: Exception encountered at cell 1"
    );

    // A broken requirement: pip check's own words.
    image.distribution("needs-more", "1.0", &["not-installed-anywhere>=2"]);
    let run = image.run(&[], &[]);
    assert_eq!(
        run.failure().trim(),
        "notebook validation failed: pip check found broken requirements:\n\
         needs-more 1.0 requires not-installed-anywhere, which is not installed."
    );
    // The results were written before the checks: a failed run still says what it found.
    assert!(run.result("software").starts_with(r#"[{"name":"Python","#));

    // A malformed param is refused by name.
    let run = image.run(&[("python-dependencies", "JupyterLab")], &[]);
    assert_eq!(
        run.failure().trim(),
        "notebook validation failed: python-dependencies: 'JupyterLab' is not <display \
         name>=<distribution>"
    );
}
