//! The two checks another program does: `kubectl kustomize` builds `config/`,
//! `config/monitoring/`, `tekton/` and an overlay of `config/` with the namespace-scoped
//! component `config/namespaced/` (the pinned kubectl that `scripts/test` puts on PATH), and
//! `scripts/validate-manifests` validates
//! every object against the CRD schemas and Kubernetes' own (Python's jsonschema and
//! kubernetes-validate, in the `.venv` that `scripts/test` makes). Both run on a copy of the
//! manifests written to a temporary directory, so a test can hand them broken ones.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::ROOT;
use super::model::Manifests;

/// The directories `kubectl kustomize` must build.
const KUSTOMIZE_DIRS: [&str; 6] = [
    "config",
    "config/monitoring",
    "config/multi-tenant",
    "config/triggers",
    "tekton",
    NAMESPACED_OVERLAY,
];

/// A user's overlay of the namespace-scoped install, written next to `config/` as
/// `config/namespaced/kustomization.yaml` says (the component cannot be built on its own).
const NAMESPACED_OVERLAY: &str = "my-namespaced-install";

/// The manifests' files, as they are now, in a new temporary directory.
fn write(texts: &BTreeMap<String, String>) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("a temporary directory");
    for (file, text) in texts {
        let path = dir.path().join(file);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    dir
}

/// What `kubectl kustomize` says about each directory that does not build.
pub fn kustomize(m: &Manifests) -> Vec<String> {
    let mut texts = m.texts();
    texts.insert(
        format!("{NAMESPACED_OVERLAY}/kustomization.yaml"),
        "resources: [../config]\ncomponents: [../config/namespaced]\n".into(),
    );
    let dir = write(&texts);
    let mut problems = Vec::new();
    for d in KUSTOMIZE_DIRS {
        let out = Command::new("kubectl")
            .arg("kustomize")
            .arg(dir.path().join(d))
            .output()
            .expect("kubectl is on PATH (scripts/test builds the pinned one: scripts/realcluster bin kubectl)");
        if !out.status.success() {
            let err = String::from_utf8_lossy(&out.stderr)
                .replace(&format!("{}/", dir.path().display()), "");
            problems.push(format!("`kubectl kustomize {d}/` fails: {}", err.trim()));
        }
    }
    problems
}

/// The Python of the `.venv` that `scripts/test` makes.
fn python() -> PathBuf {
    let venv = Path::new(ROOT).join(".venv/bin/python");
    assert!(
        venv.exists(),
        "{} is missing: scripts/test creates it with the packages scripts/validate-manifests needs",
        venv.display()
    );
    venv
}

/// What `scripts/validate-manifests` reports for the manifests, one problem a line (empty when
/// it finds none).
pub fn schema_problems(m: &Manifests) -> Vec<String> {
    let dir = write(&m.texts());
    let out = Command::new(python())
        .arg(Path::new(ROOT).join("scripts/validate-manifests"))
        .arg("--manifests")
        .arg(dir.path())
        .output()
        .expect("scripts/validate-manifests runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let problems: Vec<String> = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("error: "))
        .map(str::to_string)
        .collect();
    assert_eq!(
        out.status.success(),
        problems.is_empty(),
        "scripts/validate-manifests exited {} with:\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    problems
}
