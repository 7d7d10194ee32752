//! What the controller keeps of the cluster's CustomRuns (security review F-10): its watch lists
//! every CustomRun (the CRD has no field to select a custom task's runs by), so a tenant's runs of
//! another custom task, with large params, would grow it without bound, and each would be a
//! reconcile held at once. The watch ([`imagegate::controller::watch::customruns`], against the
//! API emulator over HTTP) stores and hands on only this task's runs, everything of them but
//! `managedFields`; a run that stops being this task's leaves the store.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use imagegate::api::CustomRun;
use imagegate::controller::runs::RunStates;
use imagegate::controller::watch::{Reporting, customruns};
use kube::api::{Api, PostParams};
use kube::runtime::reflector::ObjectRef;
use serde_json::json;

use crate::support::EmulatorServer;
use crate::support::promotion_run;

/// A run of another custom task with `bytes` of params, as a tenant may make one.
fn foreign(name: &str, bytes: usize) -> CustomRun {
    serde_json::from_value(json!({
        "apiVersion": "tekton.dev/v1beta1", "kind": "CustomRun",
        "metadata": {"name": name, "namespace": "ds", "labels": {"team": "x".repeat(60)},
                     "annotations": {"big": "a".repeat(bytes / 2)}},
        "spec": {"customRef": {"apiVersion": "wait.testing.tekton.dev/v1beta1", "kind": "Wait"},
                 "params": [{"name": "blob", "value": "p".repeat(bytes / 2)}]}
    }))
    .unwrap()
}

#[tokio::test]
async fn the_watch_keeps_and_hands_on_only_this_tasks_runs() {
    let emu = EmulatorServer::start().await;
    emu.seed(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ds"}}))
        .await;
    let runs: Api<CustomRun> = Api::namespaced(emu.client(), "ds");
    for i in 0..20 {
        runs.create(
            &PostParams::default(),
            &foreign(&format!("other-{i}"), 200_000),
        )
        .await
        .unwrap();
    }
    for name in ["promote-b", "promote-c"] {
        let mut ours = promotion_run(name, &[("imagestream", "nb")], &json!({}));
        ours.metadata.namespace = Some("ds".into());
        runs.create(&PostParams::default(), &ours).await.unwrap();
    }

    let reporting = Reporting {
        namespace: None,
        refusals: imagegate::runtime::watch_errors::Refusals::new(
            imagegate::runtime::admin::Health::new(),
            "CustomRun",
        ),
        restarts: Default::default(),
    };
    let (store, stream) = customruns(
        Api::all(emu.client()),
        Arc::new(RunStates::default()),
        reporting,
    );
    // Every run the stream hands on (what the controller would reconcile), by name.
    let handed: Arc<std::sync::Mutex<Vec<String>>> = Default::default();
    let driver = tokio::spawn({
        let handed = handed.clone();
        async move {
            let mut stream = Box::pin(stream);
            while let Some(run) = stream.next().await {
                let run = run.unwrap();
                handed.lock().unwrap().push(run.metadata.name.unwrap());
            }
        }
    });
    tokio::time::timeout(Duration::from_secs(10), store.wait_until_ready())
        .await
        .expect("the watch lists the runs")
        .unwrap();
    let mut names: Vec<String> = store
        .state()
        .iter()
        .map(|r| r.metadata.name.clone().unwrap())
        .collect();
    names.sort();
    assert_eq!(
        names,
        ["promote-b", "promote-c"],
        "only this task's runs are kept"
    );
    let mine = store
        .get(&ObjectRef::new("promote-b").within("ds"))
        .unwrap();
    assert_eq!(
        mine.param("imagestream").and_then(|p| p.as_str()),
        Some("nb"),
        "its own runs are kept whole"
    );
    assert!(mine.metadata.managed_fields.is_none());

    // Another task's run changed, and one of ours made another task's: neither is handed on,
    // and the latter leaves the store.
    let patch = |v| kube::api::Patch::Merge(v);
    runs.patch(
        "other-3",
        &Default::default(),
        &patch(json!({"metadata": {"labels": {"touched": "yes"}}})),
    )
    .await
    .unwrap();
    runs.patch(
        "promote-c",
        &Default::default(),
        &patch(json!({"spec": {"customRef": {"apiVersion": "wait.testing.tekton.dev/v1beta1", "kind": "Wait", "name": null}}})),
    )
    .await
    .unwrap();
    // A change of ours after both, so that the stream has handed on everything before it.
    runs.patch(
        "promote-b",
        &Default::default(),
        &patch(json!({"metadata": {"labels": {"touched": "yes"}}})),
    )
    .await
    .unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while handed.lock().unwrap().len() < 3 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{:?}",
            handed.lock().unwrap()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        *handed.lock().unwrap(),
        ["promote-b", "promote-c", "promote-b"].map(String::from),
        "the first list's runs of this task, then its change; nothing of another task's"
    );
    assert!(
        store
            .get(&ObjectRef::new("promote-c").within("ds"))
            .is_none(),
        "a run that is no longer this task's is not kept"
    );
    assert_eq!(store.state().len(), 1);
    driver.abort();
}
