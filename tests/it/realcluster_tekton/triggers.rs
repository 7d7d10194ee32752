//! Tekton Triggers for real: an EventListener (its sink v0.37.0, run as the EventListener's
//! ServiceAccount) receives CloudEvents over HTTP; the core `cel` interceptor filters them, a
//! TriggerBinding reads a header and the body, and a TriggerTemplate creates the PipelineRun named
//! after the event's id, which the real Pipelines controller then runs.

use std::time::{Duration, Instant};

use super::cluster::{cluster, condition, finished, succeeded};

/// The EventListener's identity, bound to Triggers' own ClusterRoles (as tekton/ binds its own).
const RBAC: &str = r#"
apiVersion: v1
kind: ServiceAccount
metadata: {name: listener}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: listener}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: tekton-triggers-eventlistener-roles}
subjects: [{kind: ServiceAccount, name: listener}]
"#;

const CLUSTER_RBAC: &str = r#"
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: tekton-triggers-test-listener}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: tekton-triggers-eventlistener-clusterroles}
subjects: [{kind: ServiceAccount, name: listener, namespace: tekton-triggers}]
"#;

/// A one-step Task whose result the kwok Stage writes, and its Pipeline.
const PIPELINE: &str = r#"
apiVersion: tekton.dev/v1
kind: Task
metadata: {name: greet}
spec:
  params: [{name: who, type: string}]
  results: [{name: greeting, type: string}]
  steps:
  - name: greet
    image: registry.example/greet@sha256:2222222222222222222222222222222222222222222222222222222222222222
    command: ["/bin/true"]
    env: [{name: REALCLUSTER_RESULT_greeting, value: hello from $(params.who)}]
---
apiVersion: tekton.dev/v1
kind: Pipeline
metadata: {name: greet}
spec:
  params: [{name: who, type: string}]
  tasks:
  - name: greet
    taskRef: {name: greet}
    params: [{name: who, value: $(params.who)}]
  results: [{name: greeting, value: $(tasks.greet.results.greeting)}]
"#;

/// The binding (a header and the body), the template (a PipelineRun named after the event id) and
/// the listener with its CEL filter on a header and the body.
const TRIGGER: &str = r#"
apiVersion: triggers.tekton.dev/v1beta1
kind: TriggerBinding
metadata: {name: event}
spec:
  params:
  - {name: id, value: $(header.Ce-Id)}
  - {name: who, value: $(body.who)}
---
apiVersion: triggers.tekton.dev/v1beta1
kind: TriggerTemplate
metadata: {name: run}
spec:
  params: [{name: id}, {name: who}]
  resourcetemplates:
  - apiVersion: tekton.dev/v1
    kind: PipelineRun
    metadata: {name: run-$(tt.params.id)}
    spec:
      pipelineRef: {name: greet}
      params: [{name: who, value: $(tt.params.who)}]
---
apiVersion: triggers.tekton.dev/v1beta1
kind: EventListener
metadata: {name: listener}
spec:
  serviceAccountName: listener
  triggers:
  - name: greet
    interceptors:
    - ref: {name: cel, kind: ClusterInterceptor}
      params:
      - name: filter
        value: header.match('ce-type', 'dev.example.greet') && body.who != ''
    bindings: [{ref: event}]
    template: {ref: run}
"#;

/// POSTs a binary-mode CloudEvent; the HTTP status.
fn post(url: &str, id: &str, kind: &str, body: &str) -> u16 {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        reqwest::Client::new()
            .post(url)
            .header("ce-specversion", "1.0")
            .header("ce-id", id)
            .header("ce-type", kind)
            .header("ce-source", "/imagegate/tests")
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
            .await
            .unwrap_or_else(|e| panic!("POST {url}: {e}"))
            .status()
            .as_u16()
    })
}

#[test]
fn an_eventlistener_turns_the_cloudevent_its_filter_passes_into_exactly_its_pipelinerun() {
    let c = cluster();
    let k = c.kubectl();
    let ns = "tekton-triggers";
    k.namespace(ns);
    k.create(ns, RBAC);
    k.create(ns, CLUSTER_RBAC);
    k.create(ns, PIPELINE);
    k.create(ns, TRIGGER);

    // The sink is up and its address written, as the Triggers controller writes a Service's.
    let listener = k.wait(ns, "eventlistener/listener", 60, |el| {
        condition(el, "Ready").is_some_and(|r| r["status"] == "True")
    });
    let url = listener["status"]["address"]["url"]
        .as_str()
        .expect("the EventListener's address")
        .to_string();

    // Dropped by the filter: the wrong type, then the right type without `who`.
    assert_eq!(
        post(&url, "dropped-type", "dev.example.other", r#"{"who": "x"}"#),
        202
    );
    assert_eq!(
        post(&url, "dropped-body", "dev.example.greet", r#"{"who": ""}"#),
        202
    );
    assert_eq!(
        post(
            &url,
            "passed",
            "dev.example.greet",
            r#"{"who": "triggers"}"#
        ),
        202
    );

    let run = k.wait(ns, "pipelinerun/run-passed", 60, |_| true);
    assert_eq!(
        run["metadata"]["labels"]["triggers.tekton.dev/eventlistener"], "listener",
        "{run:#}"
    );
    assert_eq!(run["spec"]["params"][0]["value"], "triggers");
    let run = k.wait(ns, "pipelinerun/run-passed", 90, finished);
    assert_eq!(succeeded(&run), Some("True"), "{run:#}");
    assert_eq!(run["status"]["results"][0]["value"], "hello from triggers");

    // The dropped events were sent first and take the same path up to the filter; a little more
    // time for them, then exactly the one PipelineRun exists.
    let settle = Instant::now() + Duration::from_secs(3);
    while Instant::now() < settle {
        let names = k.ok(&["get", "pipelineruns", "-n", ns, "-o", "name"]);
        assert_eq!(
            names.trim(),
            "pipelinerun.tekton.dev/run-passed",
            "--- sink log:\n{}",
            c.log_tail(&format!("eventlistener-{ns}-listener"))
        );
        std::thread::sleep(Duration::from_millis(300));
    }
}
