//! A real client that nobody here wrote: kubectl, with its default client-side validation,
//! against the `imagegate-emulator` binary.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::process::Process;

/// The emulator binary, killed on drop (its log printed if the test failed).
struct Server {
    _process: Process,
    kubeconfig: PathBuf,
    url: String,
    _dir: tempfile::TempDir,
}

fn start() -> Server {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    let seed =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/notebook-imagestreams.yaml");
    let mut command = Command::new(env!("CARGO_BIN_EXE_imagegate-emulator"));
    command
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .arg("--seed")
        .arg(&seed);
    let process = Process::start("imagegate-emulator", command);
    let deadline = Instant::now() + Duration::from_secs(20);
    while !kubeconfig.exists() {
        assert!(
            Instant::now() < deadline,
            "the emulator never wrote its kubeconfig"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let text = std::fs::read_to_string(&kubeconfig).unwrap();
    let url = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("server: "))
        .expect("the kubeconfig names a server")
        .to_string();
    Server {
        _process: process,
        kubeconfig,
        url,
        _dir: dir,
    }
}

impl Server {
    fn kubectl(&self, args: &[&str]) -> (bool, String, String) {
        let out = Command::new("kubectl")
            .env("KUBECONFIG", &self.kubeconfig)
            .env("HOME", self._dir.path())
            .args(args)
            .output()
            .expect("kubectl is on PATH (scripts/test builds the pinned one: scripts/realcluster build kubectl)");
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    fn ok(&self, args: &[&str]) -> String {
        let (ok, out, err) = self.kubectl(args);
        assert!(ok, "kubectl {args:?} failed:\nstdout: {out}\nstderr: {err}");
        out
    }

    fn file(&self, name: &str, text: &str) -> String {
        let p = self._dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        p.to_string_lossy().into_owned()
    }

    /// POSTs to the control API with a raw HTTP/1.1 request (no client library needed).
    fn control(&self, path: &str, body: &str) -> String {
        use std::io::{Read, Write};
        let addr = self.url.trim_start_matches("http://");
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        write!(
            s,
            "POST /_emulator/v1/{path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        let mut resp = String::new();
        s.read_to_string(&mut resp).unwrap();
        assert!(
            resp.starts_with("HTTP/1.1 200"),
            "control request failed: {resp}"
        );
        resp
    }
}

#[test]
fn kubectl_gets_imagestreams_across_namespaces() {
    let s = start();
    let out = s.ok(&["get", "imagestreams", "-A"]);
    assert!(out.contains("jupyter-minimal-notebook"), "{out}");
    assert!(out.contains("jupyter-datascience-notebook"), "{out}");
    let out = s.ok(&[
        "get",
        "is",
        "-n",
        "notebooks",
        "jupyter-minimal-notebook",
        "-o",
        "jsonpath={.status.tags[*].tag}",
    ]);
    assert_eq!(out, "candidate latest");
    let out = s.ok(&[
        "get",
        "istag",
        "-n",
        "notebooks",
        "jupyter-minimal-notebook:latest",
        "-o",
        "jsonpath={.image.metadata.name}",
    ]);
    assert_eq!(
        out,
        "sha256:1111111111111111111111111111111111111111111111111111111111111111"
    );
}

#[test]
fn kubectl_watch_sees_a_simulated_import() {
    let s = start();
    let mut watch = Command::new("kubectl")
        .env("KUBECONFIG", &s.kubeconfig)
        .env("HOME", s._dir.path())
        .args(["get", "imagestreams", "-n", "notebooks", "-w", "--output-watch-events", "-o", "jsonpath={.type} {.object.metadata.name} {.object.status.tags[0].items[0].image}{\"\\n\"}"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = watch.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    // The initial state arrives first.
    let first = rx
        .recv_timeout(Duration::from_secs(20))
        .expect("the watch lists the existing streams");
    assert!(first.starts_with("ADDED"), "{first}");
    let digest = "sha256:3333333333333333333333333333333333333333333333333333333333333333";
    s.control(
        "namespaces/notebooks/imagestreams/jupyter-minimal-notebook/import",
        &format!("{{\"tag\":\"candidate\",\"digest\":\"{digest}\"}}"),
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut seen = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) => {
                if line == format!("MODIFIED jupyter-minimal-notebook {digest}") {
                    break;
                }
                seen.push(line);
            }
            Err(_) => panic!("kubectl -w never showed the import; saw {seen:?}"),
        }
    }
    let _ = watch.kill();
    let _ = watch.wait();
}

const NEW_STREAM: &str = r#"apiVersion: image.openshift.io/v1
kind: ImageStream
metadata:
  name: rstudio
  namespace: notebooks
  labels:
    opendatahub.io/notebook-image: "true"
spec:
  lookupPolicy:
    local: true
  tags:
  - name: candidate
    from:
      kind: DockerImage
      name: quay.io/opendatahub/workbench-images:rstudio
    importPolicy:
      scheduled: true
"#;

#[test]
fn kubectl_create_apply_patch_delete_with_default_validation() {
    let s = start();
    let f = s.file("rstudio.yaml", NEW_STREAM);
    let out = s.ok(&["create", "-f", &f]);
    assert!(
        out.contains("imagestream.image.openshift.io/rstudio created"),
        "{out}"
    );
    let (ok, _, err) = s.kubectl(&["create", "-f", &f]);
    assert!(!ok && err.contains("AlreadyExists"), "{err}");

    let cm = s.file(
        "cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: notebooks\ndata:\n  a: \"1\"\n",
    );
    let out = s.ok(&["apply", "-f", &cm]);
    assert!(out.contains("configmap/settings created"), "{out}");
    let cm2 = s.file(
        "cm2.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: notebooks\ndata:\n  b: \"2\"\n",
    );
    let out = s.ok(&["apply", "-f", &cm2]);
    assert!(out.contains("configmap/settings configured"), "{out}");
    let out = s.ok(&[
        "get",
        "cm",
        "settings",
        "-n",
        "notebooks",
        "-o",
        "jsonpath={.data}",
    ]);
    assert_eq!(
        out, r#"{"b":"2"}"#,
        "apply removes what the last applied configuration had"
    );

    let out = s.ok(&["apply", "-f", &f]);
    assert!(
        out.contains("imagestream.image.openshift.io/rstudio"),
        "{out}"
    );

    let out = s.ok(&[
        "patch",
        "is",
        "rstudio",
        "-n",
        "notebooks",
        "--type=merge",
        "-p",
        r#"{"metadata":{"labels":{"opendatahub.io/notebook-image":"false"}}}"#,
    ]);
    assert!(out.contains("patched"), "{out}");
    let out = s.ok(&[
        "get",
        "is",
        "rstudio",
        "-n",
        "notebooks",
        "-o",
        "jsonpath={.metadata.labels}",
    ]);
    assert!(
        out.contains(r#""opendatahub.io/notebook-image":"false""#),
        "{out}"
    );

    let run = s.file(
        "run.yaml",
        "apiVersion: tekton.dev/v1beta1\nkind: CustomRun\nmetadata:\n  name: promote-1\n  namespace: notebooks\nspec:\n  customRef:\n    apiVersion: imagegate.dev/v1alpha1\n    kind: ImagePromotion\n  params:\n  - name: imagestream\n    value: rstudio\n",
    );
    let out = s.ok(&["create", "-f", &run]);
    assert!(
        out.contains("customrun.tekton.dev/promote-1 created"),
        "{out}"
    );

    let out = s.ok(&["delete", "is", "rstudio", "-n", "notebooks"]);
    assert!(out.contains("deleted"), "{out}");
    let (ok, _, err) = s.kubectl(&["get", "is", "rstudio", "-n", "notebooks"]);
    assert!(!ok && err.contains("NotFound"), "{err}");
}

/// Tekton's released CustomRun CRD in Go's module cache (`scripts/test` exports where the
/// pinned Tekton Pipelines release is: `scripts/realcluster manifests tekton-pipeline`).
pub(crate) fn released_customrun_crd() -> PathBuf {
    let var = "IMAGEGATE_TEKTON_PIPELINE_DIR";
    let dir = std::env::var_os(var).unwrap_or_else(|| {
        panic!(
            "{var} is not set. scripts/test sets it to the released Tekton Pipelines manifests in \
             Go's module cache: export {var}=\"$(scripts/realcluster manifests tekton-pipeline)\""
        )
    });
    let crd = Path::new(&dir).join("config/300-crds/300-customrun.yaml");
    assert!(crd.is_file(), "{} is not a file ({var})", crd.display());
    crd
}

#[test]
fn kubectl_default_validation_rejects_bad_custom_resources() {
    let s = start();
    // Tekton's released CRD replaces the emulator's stand-in (which keeps every field), as
    // `kubectl replace` updates a CRD on a cluster.
    let out = s.ok(&["replace", "-f", &released_customrun_crd().to_string_lossy()]);
    assert!(out.contains("customruns.tekton.dev replaced"), "{out}");
    // `retries` is an integer in Tekton's CustomRun schema.
    let bad = s.file(
        "bad.yaml",
        "apiVersion: tekton.dev/v1beta1\nkind: CustomRun\nmetadata:\n  name: bad\n  namespace: notebooks\nspec:\n  retries: many\n  customRef:\n    apiVersion: imagegate.dev/v1alpha1\n    kind: ImagePromotion\n",
    );
    let (ok, out, err) = s.kubectl(&["create", "-f", &bad]);
    assert!(!ok, "kubectl accepted an invalid CustomRun: {out}");
    assert!(err.contains("spec.retries"), "{err}");
    assert!(err.contains("must be of type integer"), "{err}");

    // kubectl's default `--validate=strict` asks the server to refuse unknown fields, which it
    // does for custom resources from their CRD schema.
    let unknown = s.file(
        "unknown.yaml",
        "apiVersion: tekton.dev/v1beta1\nkind: CustomRun\nmetadata:\n  name: unknown\n  namespace: notebooks\nspec:\n  bogus: 1\n  customRef:\n    apiVersion: imagegate.dev/v1alpha1\n    kind: ImagePromotion\n",
    );
    let (ok, _, err) = s.kubectl(&["create", "-f", &unknown]);
    assert!(!ok && err.contains("unknown field \"spec.bogus\""), "{err}");
    // With validation off the field is pruned instead, as on a real cluster.
    s.ok(&["create", "--validate=false", "-f", &unknown]);
    let out = s.ok(&[
        "get",
        "customrun",
        "unknown",
        "-n",
        "notebooks",
        "-o",
        "jsonpath={.spec}",
    ]);
    assert!(!out.contains("bogus"), "{out}");
}
