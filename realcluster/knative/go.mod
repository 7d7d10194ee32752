// The pinned Knative Eventing release imagegate's tests read: its released CRDs
// (config/core/resources/*.yaml: ContainerSource, SinkBinding, EventType) validate knative/.
// Nothing here is imagegate code and nothing is vendored: this module only names the version.
// v0.47.0 is the module tag of Knative Eventing 1.20, the newest release whose go.mod the
// checksum database knows. `scripts/realcluster manifests knative-eventing` prints the module's
// directory in Go's module cache. See docs/testing.md.
module imagegate.dev/realcluster/knative

go 1.24.0

require knative.dev/eventing v0.47.0
