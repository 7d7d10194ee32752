//! The shipped manifests (`config/`, `tekton/`, `knative/`, `examples/`): that every file is YAML
//! without repeated keys, that `kubectl kustomize` builds `config/` and `tekton/`, and that the
//! files fit together and fit the code they configure. What the code defines is asked of the code
//! ([`code::Code`]): the clap command, the events the source builds and the headers it puts on the
//! wire, the JSON Schemas in `schemas/`, the controller's own param parser, the results a finished
//! run reports, and the generated ImagePromotion CRD. Nothing reads Rust or Markdown as text.
//!
//! The checks, by what they look at: [`tekton`] (Pipeline, Task, PipelineRun), [`custom_task`]
//! (the ImagePromotion references and params), [`triggers`] (TriggerTemplate, TriggerBinding, EventListener and its CEL filter),
//! [`network`] (the NetworkPolicy in front of the EventListener), [`knative`]
//! (Trigger filters, sources, EventTypes), [`containers`] (the `imagegate` containers' args and
//! env), [`monitoring`] (the metrics Services, the ServiceMonitor, and the PromQL of the
//! PrometheusRule and the Grafana dashboard, read by [`promql`], against the series the programs
//! export, [`exported`]). [`cases`] breaks the real manifests in memory, one way per case ([`breaks`] finds what to
//! break), and shows that each is reported. Schema validation (the CRDs' and Kubernetes' own schemas) is Python's job, in
//! `scripts/validate-manifests`; [`external`] runs it and `kubectl kustomize`.

mod alerts_doc;
mod breaks;
mod cases;
mod check;
mod code;
mod containers;
mod custom_task;
mod exported;
mod external;
mod knative;
mod model;
mod monitoring;
mod monitoring_cases;
mod network;
mod pins;
mod promql;
mod tekton;
mod triggers;

use std::path::Path;

use self::code::Code;
use self::model::Manifests;

/// The repository root.
const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// The manifests of the repository, as they are.
fn shipped() -> Manifests {
    Manifests::load(Path::new(ROOT))
}

#[test]
fn the_shipped_manifests_parse_fit_together_and_fit_the_code() {
    let report = check::check(&shipped(), &Code::ask());
    for w in &report.warnings {
        eprintln!("warning: {w}");
    }
    assert!(
        report.errors.is_empty(),
        "{} problems in the manifests:\n{}",
        report.errors.len(),
        report
            .errors
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("\n")
    );
}

#[test]
fn the_shipped_manifests_build_with_kubectl_kustomize() {
    let problems = external::kustomize(&shipped());
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn every_manifest_directory_has_files_to_check() {
    let m = shipped();
    for dir in model::MANIFEST_DIRS {
        assert!(
            m.files.keys().any(|f| f.starts_with(&format!("{dir}/"))),
            "no YAML file in {dir}/"
        );
    }
    for kind in [
        "Pipeline",
        "TriggerTemplate",
        "TriggerBinding",
        "EventListener",
        "ImagePromotion",
        "ContainerSource",
        "SinkBinding",
        "EventType",
        "Deployment",
        "Service",
        "ServiceMonitor",
        "PrometheusRule",
    ] {
        assert!(m.docs.iter().any(|d| d.kind() == kind), "no {kind}");
    }
}
