// The pinned prometheus-operator release whose CRDs imagegate's monitoring manifests are checked
// against (config/monitoring/: ServiceMonitor, PrometheusRule). Nothing here is imagegate code and
// nothing is vendored: this module only names a version. scripts/validate-manifests reads the
// released CRDs the module zip ships (example/prometheus-operator-crd/*.yaml) from Go's module
// cache: `scripts/realcluster manifests prometheus-operator` prints the directory. See
// tests/crds/README.md.
module imagegate.dev/realcluster/prometheus

go 1.26.4

require github.com/prometheus-operator/prometheus-operator v0.85.0
