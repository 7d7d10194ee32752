//! The pins of `tekton/100-imagepromotion.yaml` are the pins of the Tasks of `tekton/` as Tekton
//! records them for a run: each Task's spec with `$(results.<name>.path)` substituted and the
//! candidate left as `$(params.image)` (Tekton v1.15 records exactly that; `scripts/realcluster
//! demo` checks that every real validate TaskRun ran this one content). A Task edited without a
//! new pin fails here, not in production.

use serde_json::Value;

use imagegate::controller::proof::pin;

use super::ROOT;

fn yaml(path: &str) -> Value {
    let text = std::fs::read_to_string(format!("{ROOT}/{path}")).unwrap();
    serde_norway::from_str(&text).unwrap()
}

/// The pin of Task `spec`, as a run of it on any candidate records it.
fn pin_of_task(spec: &Value) -> String {
    let mut text = spec.to_string();
    for r in spec["results"].as_array().into_iter().flatten() {
        let name = r["name"].as_str().unwrap();
        text = text.replace(
            &format!("$(results.{name}.path)"),
            &format!("/tekton/results/{name}"),
        );
    }
    pin::of_spec(&serde_json::from_str(&text).unwrap(), "")
}

#[test]
fn the_shipped_pins_are_the_pins_of_the_shipped_tasks() {
    let promotion = yaml("tekton/100-imagepromotion.yaml");
    let pipeline = yaml("tekton/300-pipeline.yaml");
    let pins = promotion["spec"]["validation"]["pins"]
        .as_object()
        .expect("the shipped ImagePromotion pins what validates");
    assert!(!pins.is_empty());
    for (task, want) in pins {
        let task_ref = pipeline["spec"]["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == task.as_str())
            .map(|t| t["taskRef"]["name"].as_str().unwrap().to_string())
            .unwrap_or_else(|| panic!("pipeline task {task} is not in tekton/300"));
        let file = match task_ref.as_str() {
            "imagegate-smoke-test" => "tekton/200-task-smoke-test.yaml",
            "imagegate-notebook-validation" => "tekton/210-task-notebook-validation.yaml",
            other => panic!("no file for Task {other}"),
        };
        let got = pin_of_task(&yaml(file)["spec"]);
        assert_eq!(
            want.as_str(),
            Some(got.as_str()),
            "validation.pins.{task} in tekton/100 is not the pin of {file}; pin it again"
        );
    }
}
