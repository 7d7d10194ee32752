//! The demo's Tekton stand-ins held to the real thing: the same inputs to `imagegate demo`'s
//! EventListener and pipeline runner (`imagegate_demo::standin`, the code the demo runs over the
//! `tekton/` files compiled into it) and to the released Triggers sink (v0.37.0) and Pipelines
//! controller (v1.15.0) running the same `tekton/` files, and what matters compared, case by case.
//! A difference is fixed in the stand-in, never here; the cases and what they found are listed in
//! docs/testing.md.
//!
//! - [`events`]: CloudEvents (the source's own, and requests no source sends) to the shipped
//!   EventListener: whether a PipelineRun is created, its name, labels, annotations and spec.
//! - [`pipelines`]: PipelineRuns of the shipped Pipeline whose tasks end as the case says (the
//!   test plays the custom-task controller on both sides; kwok ends the smoke test on the real
//!   one): which tasks ran with which params, which were skipped and why, the results and the
//!   final condition.

mod events;
mod pipelines;

/// Reads `tekton/<file>`.
fn tekton_file(file: &str) -> String {
    let path = format!("{}/tekton/{file}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The test's one runtime (reqwest's client lives on it).
fn block_on<T>(f: impl std::future::Future<Output = T>) -> T {
    static RUNTIME: std::sync::OnceLock<tokio::runtime::Runtime> = std::sync::OnceLock::new();
    RUNTIME
        .get_or_init(|| tokio::runtime::Runtime::new().unwrap())
        .block_on(f)
}
