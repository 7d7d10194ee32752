//! What the controller keeps of the cluster's CustomRuns (security review F-10): its watch lists
//! every CustomRun (the CRD has no field to select a custom task's runs by), so a tenant's runs of
//! another custom task, with large params, would grow it without bound. The store the watch fills
//! ([`imagegate::controller::watch::customruns`], against the API emulator over HTTP) keeps of a
//! foreign run only its name, namespace, uid and resourceVersion, and of its own runs everything
//! but `managedFields`.

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
async fn the_watch_keeps_only_the_names_of_other_custom_tasks_runs() {
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
    let mut ours = promotion_run("promote-b", &[("imagestream", "nb")], &json!({}));
    ours.metadata.namespace = Some("ds".into());
    runs.create(&PostParams::default(), &ours).await.unwrap();

    let reporting = Reporting {
        namespace: None,
        refusals: imagegate::watch_errors::Refusals::new(
            imagegate::admin::Health::new(),
            "CustomRun",
        ),
        restarts: Default::default(),
    };
    let (store, stream) = customruns(
        Api::all(emu.client()),
        Arc::new(RunStates::default()),
        reporting,
    );
    // The store takes the first list at once, when it is complete.
    let driver = tokio::spawn(async move {
        let mut stream = Box::pin(stream);
        while stream.next().await.is_some() {}
    });
    tokio::time::timeout(Duration::from_secs(10), store.wait_until_ready())
        .await
        .expect("the watch lists the runs")
        .unwrap();
    assert_eq!(store.state().len(), 21);
    let kept = |name: &str| store.get(&ObjectRef::new(name).within("ds")).unwrap();
    for i in 0..20 {
        let other = kept(&format!("other-{i}"));
        let size = serde_json::to_vec(&*other).unwrap().len();
        assert!(size < 400, "other-{i} kept {size} bytes: {other:?}");
        assert!(other.spec.params.is_empty() && other.metadata.annotations.is_none());
        assert!(other.metadata.uid.is_some() && other.metadata.resource_version.is_some());
    }
    let mine = kept("promote-b");
    assert_eq!(
        mine.param("imagestream").and_then(|p| p.as_str()),
        Some("nb"),
        "its own runs are kept whole"
    );
    assert!(mine.metadata.managed_fields.is_none());
    driver.abort();
}
