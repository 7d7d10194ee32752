//! The released upstream manifests the tests read (Tekton Pipelines, Tekton Triggers, Knative
//! Eventing), from the pinned module versions in Go's module cache. `scripts/test` exports where
//! each is (`scripts/realcluster manifests <module>` prints the directory; the wrapper modules
//! under `realcluster/` pin the versions); a test that needs one and finds its variable unset
//! fails saying so, it is never skipped.

use std::path::PathBuf;

use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use serde_json::Value;

/// An upstream release whose manifests the tests read.
#[derive(Clone, Copy, Debug)]
pub struct Module {
    /// The environment variable that holds its directory.
    pub var: &'static str,
    /// Its name for `scripts/realcluster manifests`.
    pub name: &'static str,
}

/// `github.com/tektoncd/pipeline` (`realcluster/tekton`): `config/300-crds/*.yaml`.
pub const TEKTON_PIPELINE: Module = Module {
    var: "IMAGEGATE_TEKTON_PIPELINE_DIR",
    name: "tekton-pipeline",
};

/// `github.com/tektoncd/triggers` (`realcluster/tekton`): `config/300-*.yaml`.
pub const TEKTON_TRIGGERS: Module = Module {
    var: "IMAGEGATE_TEKTON_TRIGGERS_DIR",
    name: "tekton-triggers",
};

/// `knative.dev/eventing` (`realcluster/knative`): `config/core/resources/*.yaml`.
pub const KNATIVE_EVENTING: Module = Module {
    var: "IMAGEGATE_KNATIVE_EVENTING_DIR",
    name: "knative-eventing",
};

/// Tekton's released CustomRun CRD, inside [`TEKTON_PIPELINE`].
pub const CUSTOMRUN_CRD: &str = "config/300-crds/300-customrun.yaml";
/// Tekton's released PipelineRun CRD, inside [`TEKTON_PIPELINE`].
pub const PIPELINERUN_CRD: &str = "config/300-crds/300-pipelinerun.yaml";
/// Tekton's released TaskRun CRD, inside [`TEKTON_PIPELINE`].
pub const TASKRUN_CRD: &str = "config/300-crds/300-taskrun.yaml";

impl Module {
    /// The module's directory; fails the test with what to do when the variable is unset or
    /// names no directory.
    pub fn dir(self) -> PathBuf {
        let dir = std::env::var_os(self.var).map(PathBuf::from).unwrap_or_else(|| {
            panic!(
                "{} is not set. scripts/test sets it to the released {} manifests in Go's module \
                 cache: export {}=\"$(scripts/realcluster manifests {})\"",
                self.var, self.name, self.var, self.name
            )
        });
        assert!(
            dir.is_dir(),
            "{}={} is not a directory (scripts/realcluster manifests {} prints the right one)",
            self.var,
            dir.display(),
            self.name
        );
        dir
    }

    /// The text of a file of the release, by its path inside the module.
    pub fn read(self, path: &str) -> String {
        let file = self.dir().join(path);
        std::fs::read_to_string(&file)
            .unwrap_or_else(|e| panic!("reading {} ({}): {e}", file.display(), self.name))
    }
}

/// Replaces the emulator's stand-in CustomRun CRD (which keeps every field) with Tekton's released
/// one, so that CustomRuns are pruned and validated by Tekton's schema as on a cluster. An update,
/// as `kubectl replace` would send: the emulator then serves the released schema.
pub async fn install_released_customrun_crd(client: kube::Client) {
    let text = TEKTON_PIPELINE.read(CUSTOMRUN_CRD);
    let mut crd: Value = serde_norway::from_str(&text).expect("Tekton's CustomRun CRD is YAML");
    let name = crd["metadata"]["name"]
        .as_str()
        .expect("the CRD has a name")
        .to_string();
    let resource = ApiResource {
        group: "apiextensions.k8s.io".into(),
        version: "v1".into(),
        api_version: "apiextensions.k8s.io/v1".into(),
        kind: "CustomResourceDefinition".into(),
        plural: "customresourcedefinitions".into(),
    };
    let crds: Api<DynamicObject> = Api::all_with(client, &resource);
    let current = crds
        .get(&name)
        .await
        .expect("the emulator serves the CustomRun CRD from the start");
    crd["metadata"]["resourceVersion"] = current.metadata.resource_version.clone().into();
    let crd: DynamicObject = serde_json::from_value(crd).expect("a CRD object");
    crds.replace(&name, &PostParams::default(), &crd)
        .await
        .expect("the emulator replaces the CustomRun CRD with Tekton's released one");
}

/// Creates Tekton's released PipelineRun and TaskRun CRDs, so that the emulator serves both kinds
/// with Tekton's schema, as a cluster with Tekton installed does.
pub async fn install_released_pipelinerun_crds(client: kube::Client) {
    let resource = ApiResource {
        group: "apiextensions.k8s.io".into(),
        version: "v1".into(),
        api_version: "apiextensions.k8s.io/v1".into(),
        kind: "CustomResourceDefinition".into(),
        plural: "customresourcedefinitions".into(),
    };
    let crds: Api<DynamicObject> = Api::all_with(client, &resource);
    for path in [PIPELINERUN_CRD, TASKRUN_CRD] {
        let crd: DynamicObject = serde_norway::from_str(&TEKTON_PIPELINE.read(path))
            .unwrap_or_else(|e| panic!("Tekton's {path} is a CRD: {e}"));
        crds.create(&PostParams::default(), &crd)
            .await
            .unwrap_or_else(|e| panic!("the emulator creates Tekton's {path}: {e}"));
    }
}
