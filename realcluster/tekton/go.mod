// The pinned Tekton releases imagegate's tests read and run: Tekton Pipelines and Tekton Triggers,
// one family, one module (Triggers v0.37.0 requires Pipelines v1.15.0, so their pins agree).
// Nothing here is imagegate code and nothing is vendored: this module only names versions. The
// tests read the released manifests these module zips ship (config/300-crds/*.yaml of Pipelines,
// config/300-*.yaml of Triggers) from Go's module cache: `scripts/realcluster manifests
// tekton-pipeline|tekton-triggers` prints the directory. The same module is where the Tekton
// controller is to be built from for the real-cluster tier (a `tool` line, then `go mod tidy`).
// See docs/testing.md.
module imagegate.dev/realcluster/tekton

go 1.26.4

require (
	github.com/tektoncd/pipeline v1.15.0
	github.com/tektoncd/triggers v0.37.0
)
