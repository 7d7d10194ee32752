//! Broken manifests: each case breaks the real manifests in memory in one way and names the
//! problem the check must then report. A check that stops seeing a problem fails its case; a case
//! whose manifests no longer have the thing to break fails too (the lookups panic, naming it).
//! Most cases are the Rust checks' ([`super::check`]); the schema cases are judged by
//! `scripts/validate-manifests` and one by `kubectl kustomize` ([`super::external`]).

use serde_json::json;

use super::breaks::*;
use super::code::Code;
use super::model::Manifests;
use super::{check, external, shipped};

/// Who must catch a case.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum By {
    /// The consistency checks in Rust (and the YAML parse).
    Check,
    /// The schema validation of `scripts/validate-manifests`.
    Schema,
    /// `kubectl kustomize`.
    Kustomize,
}

/// One way to break the manifests.
pub struct Case {
    pub name: &'static str,
    pub by: By,
    pub breaks: fn(&mut Manifests),
    /// Every fragment must appear in one reported problem.
    pub expect: &'static [&'static str],
}

/// Every case: the ones here and [`super::monitoring_cases`]'.
fn all() -> impl Iterator<Item = &'static Case> {
    CASES.iter().chain(super::monitoring_cases::CASES)
}

const CASES: &[Case] = &[
    // YAML
    Case {
        name: "a file that is not YAML",
        by: By::Check,
        breaks: |m| {
            m.add_file(
                "examples/zz-broken.yaml",
                "kind: Namespace\nmetadata:\n  name: x\n   labels: {}\n",
            )
        },
        expect: &["examples/zz-broken.yaml", "YAML does not parse"],
    },
    Case {
        name: "a repeated key",
        by: By::Check,
        breaks: |m| {
            m.add_file(
                "examples/zz-dup.yaml",
                "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: a\n  name: b\n",
            )
        },
        expect: &["duplicate entry with key \"name\""],
    },
    // Kubernetes' own schemas and the CRD schemas
    Case {
        name: "a Kubernetes object with a misspelt field",
        by: By::Schema,
        breaks: |m| m.add_file("config/zz-deploy.yaml", DEPLOYMENT_WITH_TYPO),
        expect: &["imagePullPolcy: unknown field"],
    },
    Case {
        name: "a Kubernetes apiVersion that does not exist",
        by: By::Schema,
        breaks: |m| {
            m.add_file(
                "config/zz-ns.yaml",
                "apiVersion: v2\nkind: Namespace\nmetadata: {name: x}\n",
            )
        },
        expect: &["has no Namespace in v2"],
    },
    Case {
        name: "a Pipeline task field the CRD would prune",
        by: By::Schema,
        breaks: |m| pipeline_task(m, "tasks", with_run_after)["runafter"] = json!(["x"]),
        expect: &["runafter: unknown field"],
    },
    Case {
        name: "an apiVersion the CRD does not serve",
        by: By::Schema,
        breaks: |m| m.first_mut("Pipeline", "")["apiVersion"] = json!("tekton.dev/v2"),
        expect: &["not v2"],
    },
    Case {
        name: "a Pipeline param of a type Tekton does not know",
        by: By::Check,
        breaks: |m| pipeline(m)["params"][0]["type"] = json!("strng"),
        expect: &["spec.params[0].type", "'strng' is not one of"],
    },
    Case {
        name: "an ImagePromotion field the CRD would prune",
        by: By::Schema,
        breaks: |m| m.first_mut("ImagePromotion", "")["spec"]["checks"]["maxAgee"] = json!("1h"),
        expect: &["maxAgee: unknown field"],
    },
    Case {
        name: "an ImageStreamSource field its CRD would prune",
        by: By::Schema,
        breaks: |m| {
            m.add_file(
                "examples/zz-imagestreamsource.yaml",
                &image_stream_source("  emitExsting: true\n"),
            )
        },
        expect: &["spec.emitExsting: unknown field"],
    },
    Case {
        name: "an ImageStreamSource mode its CRD does not know",
        by: By::Schema,
        breaks: |m| {
            m.add_file(
                "examples/zz-imagestreamsource.yaml",
                &image_stream_source("  mode: Reference\n"),
            )
        },
        expect: &[
            "spec.mode: 'Reference' is not one of ['imagestreamtag', 'resource', 'reference'",
        ],
    },
    Case {
        name: "an ImageStreamSource sink ref without a name",
        by: By::Schema,
        breaks: |m| {
            m.add_file(
                "examples/zz-imagestreamsource.yaml",
                "apiVersion: sources.imagegate.dev/v1alpha1\nkind: ImageStreamSource\n\
                 metadata: {name: x, namespace: ds}\n\
                 spec:\n  sink:\n    ref: {apiVersion: eventing.knative.dev/v1, kind: Broker}\n",
            )
        },
        expect: &["'name' is a required property"],
    },
    Case {
        name: "a TriggerBinding field Triggers does not know (hand-written schema)",
        by: By::Schema,
        breaks: |m| m.first_mut("TriggerBinding", "")["spec"]["param"] = json!([]),
        expect: &["spec.param: unknown field"],
    },
    Case {
        name: "a ContainerSource pod template with a misspelt container field (PodTemplateSpec)",
        by: By::Schema,
        breaks: |m| source_container(m)["readinesProbe"] = json!({}),
        expect: &["readinesProbe: unknown field"],
    },
    Case {
        name: "a Broker delivery with an unknown backoff policy (hand-written schema)",
        by: By::Schema,
        breaks: |m| {
            m.first_mut("Broker", "")["spec"]["delivery"]["backoffPolicy"] = json!("exponentiel")
        },
        expect: &["is not one of ['linear', 'exponential']"],
    },
    Case {
        name: "a Knative Trigger filter with two attributes in one exact (hand-written schema)",
        by: By::Schema,
        breaks: |m| {
            push(
                &mut knative_trigger(m)["filters"],
                json!({"exact": {"type": "dev.imagegate.imagestreamtag.updated", "imagetag": "candidate"}}),
            )
        },
        expect: &["has too many properties"],
    },
    // Pipeline and Task
    Case {
        name: "a $(params.x) the Pipeline does not declare",
        by: By::Check,
        breaks: |m| {
            param(
                &mut pipeline_task(m, "tasks", custom)["params"],
                "imagestream",
            )["value"] = json!("$(params.imagestreams)")
        },
        expect: &["names param 'imagestreams'"],
    },
    Case {
        name: "a $(tasks.x.status) of a task that does not exist",
        by: By::Check,
        breaks: |m| {
            param(
                &mut pipeline_task(m, "finally", custom)["params"],
                "validation-status",
            )["value"] = json!("$(tasks.validat.status)")
        },
        expect: &["names task 'validat'"],
    },
    Case {
        name: "a runAfter of a task that does not exist",
        by: By::Check,
        breaks: |m| {
            push(
                &mut pipeline_task(m, "tasks", with_run_after)["runAfter"],
                json!("nope"),
            )
        },
        expect: &["runAfter names 'nope'"],
    },
    Case {
        name: "a Task reference that passes an undeclared param",
        by: By::Check,
        breaks: |m| {
            push(
                &mut pipeline_task(m, "tasks", task_ref)["params"],
                json!({"name": "extra", "value": "x"}),
            )
        },
        expect: &["param 'extra' is not a param of Task"],
    },
    Case {
        name: "a Task reference that omits a required param",
        by: By::Check,
        breaks: |m| drop_param(&mut pipeline_task(m, "tasks", task_ref)["params"], "image"),
        expect: &["param 'image'", "has no default and is not passed"],
    },
    // The custom task
    Case {
        name: "a custom-task kind the controller does not run",
        by: By::Check,
        breaks: |m| pipeline_task(m, "tasks", custom)["taskRef"]["kind"] = json!("ImagePromotions"),
        expect: &["ImagePromotions", "the controller runs only"],
    },
    Case {
        name: "a custom-task param the controller does not accept",
        by: By::Check,
        breaks: |m| {
            push(
                &mut pipeline_task(m, "tasks", custom)["params"],
                json!({"name": "served_tag", "value": "latest"}),
            )
        },
        expect: &["InvalidParams", "unknown param \"served_tag\""],
    },
    Case {
        name: "a custom-task action the controller does not know",
        by: By::Check,
        breaks: |m| {
            param(&mut pipeline_task(m, "tasks", custom)["params"], "action")["value"] =
                json!("promot")
        },
        expect: &["InvalidParams", "\"promot\" is not one of"],
    },
    Case {
        name: "a proof of validation naming a Pipeline that does not exist",
        by: By::Check,
        breaks: |m| {
            m.first_mut("ImagePromotion", "")["spec"]["validation"]["pipeline"] =
                json!("imagegate-promot")
        },
        expect: &[
            "Pipeline 'imagegate-promot' is not defined",
            "no run could prove",
        ],
    },
    Case {
        name: "a proof of validation naming a task the Pipeline does not have",
        by: By::Check,
        breaks: |m| {
            m.first_mut("ImagePromotion", "")["spec"]["validation"]["tasks"] = json!(["validat"])
        },
        expect: &["'validat' is not a task of Pipeline 'imagegate-promote'"],
    },
    Case {
        name: "a finally task that reads a result of a task its when can skip",
        by: By::Check,
        breaks: |m| {
            pipeline_task(m, "finally", custom)["params"]
                .as_array_mut()
                .unwrap()
                .push(json!({"name": "notebook-software", "value": "$(tasks.validate-notebook.results.software)"}))
        },
        expect: &[
            "task 'validate-notebook' has `when` expressions",
            "skips this finally task too (Results were missing)",
        ],
    },
    Case {
        name: "a validation task that validates an image of its own instead of begin's",
        by: By::Check,
        breaks: |m| {
            param(&mut pipeline_task(m, "tasks", task_ref)["params"], "image")["value"] =
                json!("quay.io/org/nb:latest")
        },
        expect: &[
            "validates image \"quay.io/org/nb:latest\"",
            "not bound to the digest promoted",
        ],
    },
    Case {
        name: "a CustomRun naming an ImagePromotion version the CRD does not serve",
        by: By::Check,
        breaks: |m| m.add_file("tekton/zz-customrun.yaml", CUSTOMRUN_WRONG_VERSION),
        expect: &["spec.customRef", "does not serve ImagePromotion v1beta1"],
    },
    // TriggerTemplate, TriggerBinding, EventListener
    Case {
        name: "a TriggerTemplate passing a param the Pipeline lacks",
        by: By::Check,
        breaks: |m| {
            push(
                &mut templated_run(m)["params"],
                json!({"name": "served-tag", "value": "latest"}),
            )
        },
        expect: &["param 'served-tag' is not a param of Pipeline"],
    },
    Case {
        name: "a TriggerTemplate not passing a Pipeline param without default",
        by: By::Check,
        breaks: |m| drop_param(&mut templated_run(m)["params"], "digest"),
        expect: &["param 'digest' of Pipeline", "has no default"],
    },
    Case {
        name: "a TriggerTemplate running its PipelineRun as an undefined ServiceAccount",
        by: By::Check,
        breaks: |m| {
            templated_run(m)["taskRunTemplate"]["serviceAccountName"] = json!("imagegate-pipelin")
        },
        expect: &["ServiceAccount 'imagegate-pipelin' is not defined"],
    },
    Case {
        name: "a $(tt.params.x) the TriggerTemplate does not declare",
        by: By::Check,
        breaks: |m| {
            param(&mut templated_run(m)["params"], "digest")["value"] =
                json!("$(tt.params.digests)")
        },
        expect: &["names 'digests', which is not a param"],
    },
    Case {
        name: "a TriggerBinding param that is not a TriggerTemplate param",
        by: By::Check,
        breaks: |m| {
            push(
                &mut m.first_mut("TriggerBinding", "")["spec"]["params"],
                json!({"name": "tag", "value": "$(body.tag)"}),
            )
        },
        expect: &["binding param 'tag' is not a param of the TriggerTemplate"],
    },
    Case {
        name: "a binding that reads the event's body (the sender's word)",
        by: By::Check,
        breaks: |m| {
            binding_param(m, "$(extensions.imagegate.digest")["value"] = json!("$(body.digest)")
        },
        expect: &["$(body.digest) binds what the sender says"],
    },
    Case {
        name: "a binding that reads a header (the sender's word)",
        by: By::Check,
        breaks: |m| {
            binding_param(m, "$(extensions.imagegate.runId")["value"] = json!("$(header.Ce-Id)")
        },
        expect: &["$(header.Ce-Id) binds what the sender says"],
    },
    Case {
        name: "a binding that reads a field the interceptor does not set",
        by: By::Check,
        breaks: |m| {
            binding_param(m, "$(extensions.imagegate.digest")["value"] =
                json!("$(extensions.imagegate.digests)")
        },
        expect: &["the imagegate interceptor sets no 'digests'"],
    },
    Case {
        name: "a trigger that does not run the imagegate interceptor",
        by: By::Check,
        breaks: |m| {
            let el = m.first_mut("EventListener", "");
            for t in el["spec"]["triggers"].as_array_mut().expect("triggers") {
                t["interceptors"]
                    .as_array_mut()
                    .expect("interceptors")
                    .retain(|ic| ic["ref"]["name"] != "imagegate");
            }
        },
        expect: &["does not run ClusterInterceptor 'imagegate'"],
    },
    Case {
        name: "a CEL filter for a type the source never emits",
        by: By::Check,
        breaks: |m| {
            edit_cel(m, |f| {
                f.replace("imagestreamtag.updated'", "imagestreamtag.update'")
            })
        },
        expect: &[
            "'dev.imagegate.imagestreamtag.update'",
            "a type the source never emits",
        ],
    },
    Case {
        name: "a CEL filter for a tag that is not the candidate tag",
        by: By::Check,
        breaks: |m| {
            edit_cel(m, |f| {
                format!("{f} && header.match('ce-imagetag', 'latest')")
            })
        },
        expect: &["accepts ce-imagetag 'latest'"],
    },
    Case {
        name: "no NetworkPolicy in front of the EventListener",
        by: By::Check,
        breaks: |m| {
            m.first_mut("NetworkPolicy", "tekton/")["spec"]["podSelector"]["matchLabels"]["eventlistener"] =
                json!("imagegate-listener")
        },
        expect: &["no NetworkPolicy selects the pods of this EventListener"],
    },
    Case {
        name: "a NetworkPolicy that shuts the source out",
        by: By::Check,
        breaks: |m| {
            m.first_mut("NetworkPolicy", "tekton/")["spec"]["ingress"][0]["from"][0]["podSelector"]
                ["matchLabels"]["app.kubernetes.io/component"] = json!("sender")
        },
        expect: &["no ingress rule admits the source's pods", "on port 8080"],
    },
    Case {
        name: "an EventListener binding to a TriggerBinding that does not exist",
        by: By::Check,
        breaks: |m| {
            push(
                &mut m.first_mut("EventListener", "")["spec"]["triggers"][0]["bindings"],
                json!({"ref": "nope"}),
            )
        },
        expect: &["TriggerBinding 'nope' is not defined"],
    },
    // Knative
    Case {
        name: "a Knative Trigger to an EventListener without the reply-loop filter",
        by: By::Check,
        breaks: |m| {
            knative_trigger(m)["filters"]
                .as_array_mut()
                .unwrap()
                .retain(|f| f.get("not").is_none())
        },
        expect: &["add `filters: [{not: {exact: {type: dev.tekton.event.triggers.accepted.v1}}}]`"],
    },
    Case {
        name: "a Knative Trigger passing a type the EventListener drops",
        by: By::Check,
        breaks: |m| {
            let spec = knative_trigger(m);
            spec["filter"]["attributes"]["type"] = json!("dev.imagegate.imagestreamtag.deleted");
            for f in spec["filters"].as_array_mut().unwrap() {
                if f["exact"].get("type").is_some() {
                    f["exact"]["type"] = json!("dev.imagegate.imagestreamtag.deleted");
                }
            }
        },
        expect: &["every event would be delivered and dropped"],
    },
    Case {
        name: "a Knative Trigger filtering on a type the source never emits",
        by: By::Check,
        breaks: |m| {
            knative_trigger(m)["filter"]["attributes"]["type"] =
                json!("dev.imagegate.imagestream.updated")
        },
        expect: &["type 'dev.imagegate.imagestream.updated' is not a type the source emits"],
    },
    Case {
        name: "an EventType whose schema is not the published one",
        by: By::Check,
        breaks: |m| {
            m.first_mut("EventType", "")["spec"]["schema"] =
                json!("https://imagegate.dev/schemas/updated.json")
        },
        expect: &["the source's dataschema is"],
    },
    Case {
        name: "a SinkBinding subject that does not exist",
        by: By::Check,
        breaks: |m| {
            m.first_mut("SinkBinding", "")["spec"]["subject"]["name"] = json!("imagegate-sauce")
        },
        expect: &["'imagegate-sauce' (namespace imagegate-system) is not defined"],
    },
    Case {
        name: "an ImageStreamSource whose sink EventListener does not exist",
        by: By::Check,
        breaks: |m| {
            m.first_mut("ImageStreamSource", "knative/140")["spec"]["sink"]["ref"]["name"] =
                json!("imagegate-typo")
        },
        expect: &["EventListener 'imagegate-typo' (namespace notebooks) is not defined"],
    },
    Case {
        name: "an ImageStreamSource whose service account does not exist",
        by: By::Check,
        breaks: |m| {
            m.first_mut("ImageStreamSource", "knative/130")["spec"]["serviceAccountName"] =
                json!("nobody")
        },
        expect: &["ServiceAccount 'nobody' is not defined"],
    },
    Case {
        name: "an ImageStreamSource field its CRD does not declare",
        by: By::Schema,
        breaks: |m| {
            m.first_mut("ImageStreamSource", "knative/130")["spec"]["sinkRef"] = json!("imagegate")
        },
        expect: &["knative/130-imagestreamsource-broker.yaml", "sinkRef"],
    },
    Case {
        name: "an imagegate container flag that does not exist",
        by: By::Check,
        breaks: |m| push(&mut source_container(m)["args"], json!("--leader-election")),
        expect: &[
            "refused by its command line",
            "unexpected argument '--leader-election'",
        ],
    },
    // kustomize
    Case {
        name: "a kustomization listing a file that does not exist",
        by: By::Kustomize,
        breaks: |m| {
            push(
                &mut m.first_mut("Kustomization", "tekton/")["resources"],
                json!("999-missing.yaml"),
            )
        },
        expect: &["`kubectl kustomize tekton/` fails", "999-missing.yaml"],
    },
]; // the table reads best one case a row

/// What the judge of `by` reports for `m`, one problem a string.
fn problems(by: By, m: &Manifests, code: &Code) -> Vec<String> {
    match by {
        By::Check => check::check(m, code)
            .errors
            .iter()
            .map(ToString::to_string)
            .collect(),
        By::Schema => external::schema_problems(m),
        By::Kustomize => external::kustomize(m),
    }
}

/// Runs every case `by` judges; fails naming each case that was not caught.
fn run_cases(by: By) {
    let real = shipped();
    let code = Code::ask();
    let baseline = problems(by, &real, &code);
    let mut missed = Vec::new();
    let mut ran = 0;
    for case in all().filter(|c| c.by == by) {
        ran += 1;
        let mut m = real.clone();
        (case.breaks)(&mut m);
        let new: Vec<String> = problems(by, &m, &code)
            .into_iter()
            .filter(|p| !baseline.contains(p))
            .collect();
        if !new
            .iter()
            .any(|p| case.expect.iter().all(|e| p.contains(e)))
        {
            missed.push(format!(
                "{}: expected a problem with {:?}; new problems:\n    {}",
                case.name,
                case.expect,
                if new.is_empty() {
                    "(none)".to_string()
                } else {
                    new.join("\n    ")
                }
            ));
        }
    }
    assert!(ran > 0, "no case for {by:?}");
    assert!(
        missed.is_empty(),
        "{} of {ran} broken manifests were not caught:\n{}",
        missed.len(),
        missed.join("\n")
    );
}

#[test]
fn every_case_is_named_once_and_all_65_are_here() {
    assert_eq!(CASES.len(), 52);
    assert_eq!(super::monitoring_cases::CASES.len(), 13);
    let mut names: Vec<&str> = all().map(|c| c.name).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), all().count(), "a case name is used twice");
}

#[test]
fn broken_manifests_are_caught_by_the_consistency_checks() {
    run_cases(By::Check);
}

#[test]
fn broken_manifests_are_caught_by_the_schema_validation() {
    run_cases(By::Schema);
}

#[test]
fn a_broken_kustomization_is_caught_by_kubectl_kustomize() {
    run_cases(By::Kustomize);
}
