//! Reconcile tests: the real `reconcile` function against the emulated API over HTTP, with an
//! injected clock, asserting the exact requests it makes (method, resource, body) in Tekton's
//! fixed order.

use std::sync::{Arc, Mutex};

use futures::StreamExt;
use imagegate::api::{CustomRun, ImageStream};
use imagegate::controller::context::Context;
use imagegate::controller::metrics::Metrics;
use imagegate::controller::reconcile::reconcile;
use imagegate::controller::watch;
use imagegate_emulator::control::RequestRecord;
use imagegate_emulator::{Config, Emulator};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::events::{Recorder, Reporter};
use serde_json::{Value, json};

const A: &str = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
const B: &str = "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

struct Harness {
    emu: Emulator,
    ctx: Arc<Context>,
    now: Arc<Mutex<Timestamp>>,
}

async fn harness() -> Harness {
    imagegate::runtime::tls::install_crypto_provider();
    let emu = Emulator::start(Config::default()).await.unwrap();
    crate::support::upstream::install_released_customrun_crd(emu.client().unwrap()).await;
    emu.seed_str(&imagegate::controller::crd::crd_yaml())
        .unwrap();
    emu.seed_str(
        r#"
apiVersion: image.openshift.io/v1
kind: ImageStream
metadata: {name: nb, namespace: ds}
spec:
  tags:
  - name: candidate
    from: {kind: DockerImage, name: "quay.io/org/nb:latest"}
"#,
    )
    .unwrap();
    emu.import("ds", "nb", "candidate", Some(A)).unwrap();
    emu.import("ds", "nb", "candidate", Some(B)).unwrap();
    // The runs' service account (`default`) may promote in ds.
    emu.seed_str(&crate::support::controller::promoter_role())
        .unwrap();
    emu.seed_str(
        r#"
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: promoter-default, namespace: ds}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: imagegate-promoter}
subjects:
- {kind: ServiceAccount, name: default, namespace: ds}
"#,
    )
    .unwrap();
    let client = emu.client_as("controller").unwrap();
    let now = Arc::new(Mutex::new(
        "2026-12-01T10:00:00Z".parse::<Timestamp>().unwrap(),
    ));
    let clock_now = now.clone();
    let mut registry = prometheus_client::registry::Registry::default();
    let ctx = Arc::new(Context {
        client: client.clone(),
        recorder: Recorder::new(client, Reporter::from("imagegate-test")),
        metrics: Metrics::register(&mut registry),
        clock: Arc::new(move || *clock_now.lock().unwrap()),
        runs: Default::default(),
        verdicts: None,
        own_namespace: "imagegate-system".into(),
    });
    Harness { emu, ctx, now }
}

impl Harness {
    fn runs(&self) -> Api<CustomRun> {
        Api::namespaced(self.ctx.client.clone(), "ds")
    }

    async fn create(&self, params: Value, spec_extra: Value) -> CustomRun {
        let mut body = json!({
            "apiVersion": "tekton.dev/v1beta1", "kind": "CustomRun",
            "metadata": {"name": "run-1", "namespace": "ds"},
            "spec": {"customRef": {"apiVersion": "imagegate.dev/v1alpha1", "kind": "ImagePromotion"},
                     "params": params}
        });
        json_patch::merge(&mut body["spec"], &spec_extra);
        self.runs()
            .create(
                &PostParams::default(),
                &serde_json::from_value(body).unwrap(),
            )
            .await
            .unwrap()
    }

    async fn get(&self) -> CustomRun {
        self.runs().get("run-1").await.unwrap()
    }

    /// Reconciles `run` once; the controller's requests it made, as [`Self::take_requests`].
    async fn reconcile(&self, run: CustomRun) -> Vec<String> {
        self.take_requests();
        reconcile(Arc::new(run), self.ctx.clone()).await.unwrap();
        self.take_requests()
    }

    /// The controller's requests since the last call, as "verb resource[/sub]".
    fn take_requests(&self) -> Vec<String> {
        let out = self
            .emu
            .requests()
            .into_iter()
            .filter(|r: &RequestRecord| r.user == "controller" && r.resource != "events")
            .map(|r| {
                let sub = if r.subresource.is_empty() {
                    String::new()
                } else {
                    format!("/{}", r.subresource)
                };
                format!("{} {}{sub}", r.verb, r.resource)
            })
            .collect();
        self.emu.clear_requests();
        out
    }
}

/// The params of a promotion of B that the pipeline validated.
fn validated_b() -> Value {
    json!([
        {"name": "imagestream", "value": "nb"}, {"name": "digest", "value": B},
        {"name": "validation-status", "value": "Succeeded"}
    ])
}

fn condition(run: &CustomRun) -> (String, String) {
    let c = run.succeeded_condition().unwrap();
    (c.status.clone(), c.reason.clone().unwrap_or_default())
}

#[tokio::test]
async fn a_promotion_reads_writes_and_finishes_in_the_fixed_order() {
    let h = harness().await;
    let run = h.create(validated_b(), json!({})).await;
    assert_eq!(
        h.reconcile(run).await,
        vec![
            "list imagepromotions",
            "create subjectaccessreviews",
            "update customruns/status",
            "get imagestreams",
            "get imagestreamimages",
            "patch imagestreams",
            "update customruns/status"
        ],
        "the policy, may the run's account promote, start, read the stream and the candidate \
         (one image, not an index), the one write, finish"
    );
    let run = h.get().await;
    assert_eq!(condition(&run), ("True".into(), "Promoted".into()));
    assert_eq!(
        run.status.as_ref().unwrap().start_time.as_ref().unwrap().0,
        *h.now.lock().unwrap()
    );
    let target = &run.status.as_ref().unwrap().extra_fields["target"];
    assert_eq!(target["digest"], B);
    assert_eq!(target["action"], "promote");

    // Done: nothing more to do, nothing read.
    assert!(h.reconcile(run).await.is_empty());
}

#[tokio::test]
async fn bad_params_end_the_run_in_one_write() {
    let h = harness().await;
    let run = h
        .create(json!([{"name": "imagestream", "value": "nb"}]), json!({}))
        .await;
    assert_eq!(
        h.reconcile(run).await,
        vec!["list imagepromotions", "update customruns/status"]
    );
    let run = h.get().await;
    assert_eq!(condition(&run), ("False".into(), "InvalidParams".into()));
    let names: Vec<_> = run
        .status
        .unwrap()
        .results
        .iter()
        .map(|r| r.name.clone())
        .collect();
    assert_eq!(
        names,
        vec![
            "promoted-digest",
            "previous-digest",
            "phase",
            "checks",
            "image"
        ]
    );
}

#[tokio::test]
async fn a_run_whose_service_account_may_not_promote_ends_forbidden_in_one_write() {
    let h = harness().await;
    let run = h
        .create(validated_b(), json!({"serviceAccountName": "intruder"}))
        .await;
    assert_eq!(
        h.reconcile(run).await,
        vec![
            "list imagepromotions",
            "create subjectaccessreviews",
            "update customruns/status"
        ],
        "the policy, asked, refused, no ImageStream request at all"
    );
    let run = h.get().await;
    assert_eq!(condition(&run), ("False".into(), "Forbidden".into()));
    let message = run.succeeded_condition().unwrap().message.clone().unwrap();
    assert!(
        message.starts_with("service account \"ds/intruder\" may not promote"),
        "{message}"
    );
}

#[tokio::test]
async fn the_injected_clock_decides_timeouts_and_nil_means_sixty_minutes() {
    let h = harness().await;
    // Make the work fail so the run stays started, then move the clock.
    h.emu.inject_fault(imagegate_emulator::control::Fault {
        verb: Some("get".into()),
        resource: Some("imagestreams".into()),
        count: 100,
        status: Some(500),
        ..Default::default()
    });
    let run = h.create(validated_b(), json!({})).await;
    assert!(reconcile(Arc::new(run), h.ctx.clone()).await.is_err());
    let started = h.get().await;
    assert_eq!(condition(&started), ("Unknown".into(), "Started".into()));

    *h.now.lock().unwrap() += SignedDuration::from_mins(59);
    assert!(
        reconcile(Arc::new(started.clone()), h.ctx.clone())
            .await
            .is_err(),
        "59 minutes in: still working"
    );
    *h.now.lock().unwrap() += SignedDuration::from_mins(2);
    reconcile(Arc::new(h.get().await), h.ctx.clone())
        .await
        .unwrap();
    let run = h.get().await;
    assert_eq!(
        condition(&run),
        ("False".into(), "CustomRunTimedOut".into())
    );
    assert!(
        run.succeeded_condition()
            .unwrap()
            .message
            .as_deref()
            .unwrap()
            .contains("1h0m0s, the default")
    );
}

#[tokio::test]
async fn a_cancelled_run_that_wrote_nothing_is_cancelled_with_the_message() {
    let h = harness().await;
    let run = h
        .create(
            validated_b(),
            json!({"status": "RunCancelled", "statusMessage": "CustomRun cancelled as the PipelineRun it belongs to has timed out."}),
        )
        .await;
    assert_eq!(
        h.reconcile(run).await,
        vec!["update customruns/status"],
        "no ImageStream request at all"
    );
    let run = h.get().await;
    assert_eq!(
        condition(&run),
        ("False".into(), "CustomRunCancelled".into())
    );
    assert_eq!(
        run.succeeded_condition().unwrap().message.as_deref(),
        Some("CustomRun cancelled as the PipelineRun it belongs to has timed out.")
    );
}

#[tokio::test]
async fn a_run_cancelled_after_its_promotion_landed_reports_the_promotion() {
    let h = harness().await;
    let run = h.create(validated_b(), json!({})).await;
    reconcile(Arc::new(run), h.ctx.clone()).await.unwrap();
    let done = h.get().await;
    assert_eq!(condition(&done), ("True".into(), "Promoted".into()));

    // As if the final status write had been lost: the run is back to Started (its target
    // recorded), and the pipeline cancels it.
    let api = h.runs();
    api.patch(
        "run-1",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"status": "RunCancelled", "statusMessage": "late"}})),
    )
    .await
    .unwrap();
    let mut current = api.get("run-1").await.unwrap();
    let status = current.status.as_mut().unwrap();
    status.conditions[0].status = "Unknown".into();
    status.conditions[0].reason = Some("Started".into());
    status.completion_time = None;
    status.results.clear();
    let current = api
        .replace_status("run-1", &PostParams::default(), &current)
        .await
        .unwrap();
    h.take_requests();
    reconcile(Arc::new(current), h.ctx.clone()).await.unwrap();
    let run = api.get("run-1").await.unwrap();
    assert_eq!(
        condition(&run),
        ("True".into(), "Promoted".into()),
        "the landed promotion wins over a late cancel"
    );
    assert!(
        !h.take_requests().iter().any(|r| r == "patch imagestreams"),
        "and it is not written twice"
    );
    let streams: Api<ImageStream> = Api::namespaced(h.ctx.client.clone(), "ds");
    assert_eq!(
        streams.get("nb").await.unwrap().current_digest("latest"),
        Some(B)
    );
}

/// Makes the controller remember a new run `name`: its first reconcile writes the start of the
/// attempt and fails on the ImageStream read (faulted).
async fn remembered(h: &Harness, name: &str) {
    let body = json!({
        "apiVersion": "tekton.dev/v1beta1", "kind": "CustomRun",
        "metadata": {"name": name, "namespace": "ds"},
        "spec": {"customRef": {"apiVersion": "imagegate.dev/v1alpha1", "kind": "ImagePromotion"},
                 "params": [{"name": "imagestream", "value": "nb"}, {"name": "digest", "value": B}]}
    });
    let run = h
        .runs()
        .create(
            &PostParams::default(),
            &serde_json::from_value(body).unwrap(),
        )
        .await
        .unwrap();
    h.emu.inject_fault(imagegate_emulator::control::Fault {
        verb: Some("get".into()),
        resource: Some("imagestreams".into()),
        count: 1,
        status: Some(500),
        ..Default::default()
    });
    assert!(reconcile(Arc::new(run), h.ctx.clone()).await.is_err());
}

/// Where the watch of these tests reports its errors (nowhere anyone reads).
fn reporting(h: &Harness) -> watch::Reporting {
    watch::Reporting {
        namespace: None,
        refusals: imagegate::runtime::watch_errors::Refusals::new(
            imagegate::runtime::admin::Health::new(),
            "CustomRun",
        ),
        restarts: h.ctx.metrics.watch_restarts.clone(),
    }
}

async fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
    while !cond() {
        assert!(tokio::time::Instant::now() < deadline, "timed out: {what}");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_deleted_run_is_forgotten() {
    let h = harness().await;
    remembered(&h, "run-1").await;
    assert_eq!(h.ctx.runs.len(), 1);
    let (store, runs) = watch::customruns(
        Api::all(h.ctx.client.clone()),
        h.ctx.runs.clone(),
        reporting(&h),
    );
    let watching = tokio::spawn(runs.for_each(|_| async {}));
    eventually("the watch lists the run", || store.state().len() == 1).await;
    assert_eq!(h.ctx.runs.len(), 1, "a listed run is remembered");

    let admin: Api<CustomRun> = Api::namespaced(h.emu.client().unwrap(), "ds");
    admin
        .delete("run-1", &DeleteParams::default())
        .await
        .unwrap();
    eventually("the deleted run to be forgotten", || h.ctx.runs.is_empty()).await;
    watching.abort();
}

#[tokio::test]
async fn a_run_deleted_while_no_watch_ran_is_forgotten_on_the_next_list() {
    let h = harness().await;
    remembered(&h, "run-1").await;
    remembered(&h, "run-2").await;
    assert_eq!(h.ctx.runs.len(), 2);
    let admin: Api<CustomRun> = Api::namespaced(h.emu.client().unwrap(), "ds");
    admin
        .delete("run-1", &DeleteParams::default())
        .await
        .unwrap();

    let (store, runs) = watch::customruns(
        Api::all(h.ctx.client.clone()),
        h.ctx.runs.clone(),
        reporting(&h),
    );
    let watching = tokio::spawn(runs.for_each(|_| async {}));
    eventually("the list", || store.state().len() == 1).await;
    eventually("run-1 to be forgotten", || h.ctx.runs.len() == 1).await;
    watching.abort();
}
