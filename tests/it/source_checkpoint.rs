//! End to end, the source's checkpoint: the real `imagegate source` binary against the API
//! emulator over HTTP. A checkpoint that outgrows a ConfigMap, writes that are refused,
//! a namespace deleted under it, shards lost while it is down: `/readyz` and the metrics say so,
//! and a restart sends every change made meanwhile (a duplicate is allowed, a loss is not).

use std::time::{Duration, Instant};

use crate::support::sink::Sink;
use crate::support::source::Source;
use crate::support::{EmulatorServer, eventually};
use cloudevents::AttributesReader;
use imagegate::source::checkpoint;
use imagegate_emulator::control::Fault;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, ListParams};
use serde_json::{Value, json};

const NS: &str = "imagegate-system";
const MARKER: &str = "imagegate-source-checkpoint";

fn digest(c: char) -> String {
    format!("sha256:{}", c.to_string().repeat(64))
}

/// An ImageStream with a scheduled `candidate` tag, created empty (imports fill it).
fn stream(ns: &str, name: &str) -> Value {
    json!({
        "apiVersion": "image.openshift.io/v1", "kind": "ImageStream",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"tags": [{"name": "candidate", "from": {"kind": "DockerImage", "name": format!("quay.io/org/{name}:latest")}, "importPolicy": {"scheduled": true}}]}
    })
}

/// An ImageStream with `tags` tags, each already imported once (status and history as
/// openshift-apiserver writes them), so that its checkpoint entry is large.
fn imported_stream(ns: &str, name: &str, tags: usize) -> Value {
    let names: Vec<String> = (0..tags).map(|t| format!("v1.{t}")).collect();
    let spec: Vec<Value> = (names.iter())
        .map(|t| json!({"name": t, "from": {"kind": "DockerImage", "name": format!("quay.io/org/{name}:{t}")}}))
        .collect();
    let status: Vec<Value> = (names.iter().enumerate())
        .map(|(i, t)| {
            let d = format!("sha256:{:064x}", i as u64 * 7919 + name.len() as u64);
            json!({"tag": t, "items": [{"created": "2026-11-30T08:00:00Z", "dockerImageReference": format!("quay.io/org/{name}@{d}"), "image": d, "generation": 1}]})
        })
        .collect();
    json!({
        "apiVersion": "image.openshift.io/v1", "kind": "ImageStream",
        "metadata": {"name": name, "namespace": ns, "generation": 1},
        "spec": {"tags": spec},
        "status": {"dockerImageRepository": format!("image-registry.openshift-image-registry.svc:5000/{ns}/{name}"), "tags": status},
    })
}

async fn setup(streams: &[&str]) -> (EmulatorServer, tempfile::TempDir, Sink) {
    let emu = EmulatorServer::start().await;
    emu.seed_str(&format!(
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {NS}\n"
    ))
    .await;
    for name in streams {
        emu.seed(stream("ds", name)).await;
        emu.import("ds", name, "candidate", &digest('a')).await;
    }
    (emu, tempfile::tempdir().unwrap(), Sink::start().await)
}

fn configmaps(emu: &EmulatorServer) -> Api<ConfigMap> {
    Api::namespaced(emu.client(), NS)
}

/// The checkpoint's ConfigMaps: the shards, and whether the marker is there.
async fn checkpoint_objects(emu: &EmulatorServer) -> (Vec<ConfigMap>, bool) {
    let list = configmaps(emu).list(&ListParams::default()).await.unwrap();
    let marker = list
        .items
        .iter()
        .any(|cm| cm.metadata.name.as_deref() == Some(MARKER));
    let shards = (list.items.into_iter())
        .filter(|cm| {
            cm.metadata
                .name
                .as_deref()
                .is_some_and(|n| n.starts_with("imagegate-source-checkpoint-"))
        })
        .collect();
    (shards, marker)
}

/// The digests the sink accepted for `ns/name:tag`, in order.
fn delivered(sink: &Sink, name: &str) -> Vec<String> {
    (sink.accepted().iter())
        .filter(|e| e.extension("imagestream").map(|v| v.to_string()).as_deref() == Some(name))
        .filter_map(|e| e.extension("imagedigest").map(|v| v.to_string()))
        .collect()
}

/// Waits until `/readyz` fails; its reason.
async fn unready(src: &Source) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (code, body) = src.readyz().await;
        if code == 503 {
            return body;
        }
        assert!(Instant::now() < deadline, "/readyz never failed");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The value of a metric line (the first whose name and labels start with `series`).
fn metric(text: &str, series: &str) -> f64 {
    (text.lines())
        .find(|l| l.starts_with(series))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
        .unwrap_or(0.0)
}

#[tokio::test]
async fn a_true_first_start_sends_nothing_and_then_marks_the_checkpoint() {
    let (emu, dir, sink) = setup(&["nb", "other"]).await;
    let src = Source::new(&emu, &dir, &sink.url, &[]);
    src.ready().await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        sink.accepted().is_empty(),
        "the existing state is a baseline"
    );
    let (shards, marker) = checkpoint_objects(&emu).await;
    assert!(marker, "ready only once the first checkpoint is written");
    assert_eq!(shards.len(), 1);
    let m = src.metrics().await;
    assert_eq!(metric(&m, "imagegate_source_checkpoint_shards "), 1.0);
    assert!(
        metric(&m, "imagegate_source_checkpoint_bytes ") > 0.0,
        "{m}"
    );
}

#[tokio::test]
async fn a_checkpoint_that_outgrows_a_configmap_splits_and_a_restart_loses_nothing() {
    let emu = EmulatorServer::start().await;
    emu.seed_str(&format!(
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {NS}\n"
    ))
    .await;
    // 1,200 streams of 12 tags: about 0.9 MB of checkpoint, more than one shard may hold.
    let names: Vec<String> = (0..1200).map(|i| format!("nb-{i:04}")).collect();
    for chunk in names.chunks(200) {
        let items: Vec<Value> = chunk.iter().map(|n| imported_stream("ds", n, 12)).collect();
        emu.seed(json!({"apiVersion": "v1", "kind": "List", "items": items}))
            .await;
    }
    let (dir, sink) = (tempfile::tempdir().unwrap(), Sink::start().await);
    let mut src = Source::new(&emu, &dir, &sink.url, &[]);
    src.ready().await;
    let (shards, _) = checkpoint_objects(&emu).await;
    assert!(shards.len() >= 2, "{} shard(s)", shards.len());
    let mut streams = 0;
    for cm in &shards {
        let data = cm.data.clone().unwrap_or_default();
        let bytes: usize = data.iter().map(|(k, v)| k.len() + v.len()).sum();
        assert!(
            bytes <= checkpoint::SPLIT_ABOVE,
            "{:?} holds {bytes} bytes",
            cm.metadata.name
        );
        streams += data.len();
    }
    assert_eq!(streams, names.len(), "every stream once");
    src.stop().await;

    // While it is down: five imports.
    let changed = ["nb-0003", "nb-0250", "nb-0601", "nb-0999", "nb-1199"];
    for n in changed {
        emu.import("ds", n, "v1.5", &digest('f')).await;
    }
    src.start();
    src.ready().await;
    let events = sink.wait_accepted(5).await;
    let mut got: Vec<String> = (events.iter())
        .map(|e| e.extension("imagestream").unwrap().to_string())
        .collect();
    got.sort();
    assert_eq!(got, changed, "exactly the changes made while down");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(sink.accepted().len(), 5);
}

#[tokio::test]
async fn refused_checkpoint_writes_make_the_source_unready_and_a_restart_loses_nothing() {
    let (emu, dir, sink) = setup(&["nb"]).await;
    let mut src = Source::new(&emu, &dir, &sink.url, &[]);
    src.ready().await;
    // The source's RBAC loses its ConfigMap writes (a 403, as a missing rule gives).
    for verb in ["create", "patch"] {
        emu.inject_fault(Fault {
            verb: Some(verb.into()),
            resource: Some("configmaps".into()),
            count: 100_000,
            status: Some(403),
            ..Fault::default()
        })
        .await;
    }
    emu.import("ds", "nb", "candidate", &digest('b')).await;
    sink.wait_accepted(1).await;
    let why = unready(&src).await;
    assert!(
        why.contains("checkpoint writes are failing") && why.contains("403"),
        "{why}"
    );
    assert!(
        why.contains("may not write ConfigMaps in namespace imagegate-system"),
        "{why}"
    );
    let m = src.metrics().await;
    assert!(
        metric(
            &m,
            r#"imagegate_source_checkpoint_write_failures_total{reason="forbidden"}"#
        ) >= 3.0,
        "{m}"
    );
    assert!(
        metric(&m, "imagegate_source_checkpoint_pending_entries ") >= 1.0,
        "{m}"
    );
    assert!(
        metric(&m, "imagegate_source_checkpoint_pending_age_seconds ") > 0.0,
        "{m}"
    );
    src.stop().await;

    // While it is down: another import. Then the rule is back, and it restarts.
    emu.import("ds", "nb", "candidate", &digest('c')).await;
    emu.clear_faults().await;
    src.start();
    src.ready().await;
    eventually("the change made while down", || async {
        delivered(&sink, "nb").contains(&digest('c'))
    })
    .await;
    let got = delivered(&sink, "nb");
    assert_eq!(got.first(), Some(&digest('b')));
    assert_eq!(got.last(), Some(&digest('c')), "oldest first: {got:?}");
    assert!(got.len() <= 3, "B again at most once: {got:?}");
    assert_eq!(src.readyz().await.0, 200);
}

#[tokio::test]
async fn a_deleted_checkpoint_namespace_is_reported_and_the_checkpoint_rewritten_when_it_returns() {
    let (emu, dir, sink) = setup(&["nb"]).await;
    let mut src = Source::new(&emu, &dir, &sink.url, &[]);
    src.ready().await;
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(emu.client());
    namespaces
        .delete(NS, &DeleteParams::default())
        .await
        .unwrap();
    emu.import("ds", "nb", "candidate", &digest('b')).await;
    sink.wait_accepted(1).await;
    let why = unready(&src).await;
    assert!(
        why.contains("namespace imagegate-system does not exist"),
        "{why}"
    );
    assert!(
        metric(
            &src.metrics().await,
            r#"imagegate_source_checkpoint_write_failures_total{reason="namespace_missing"}"#
        ) >= 1.0
    );

    emu.seed_str(&format!(
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {NS}\n"
    ))
    .await;
    eventually("/readyz to pass", || async { src.readyz().await.0 == 200 }).await;
    let (shards, marker) = checkpoint_objects(&emu).await;
    assert!(
        marker && !shards.is_empty(),
        "the shards and the marker are written again"
    );
    src.stop().await;
    emu.import("ds", "nb", "candidate", &digest('c')).await;
    src.start();
    src.ready().await;
    eventually("the change made while down", || async {
        delivered(&sink, "nb").contains(&digest('c'))
    })
    .await;
    assert_eq!(delivered(&sink, "nb"), [digest('b'), digest('c')]);
}

#[tokio::test]
async fn shards_lost_while_down_resend_their_streams_current_tags_with_the_same_ids() {
    let (emu, dir, sink) = setup(&["nb", "quiet"]).await;
    let mut src = Source::new(&emu, &dir, &sink.url, &[]);
    src.ready().await;
    emu.import("ds", "nb", "candidate", &digest('b')).await;
    let first = sink.wait_accepted(1).await[0].id().to_string();
    src.stop().await;
    // Every shard is deleted; the marker stays, so this is no first start.
    let (shards, marker) = checkpoint_objects(&emu).await;
    assert!(marker);
    for cm in shards {
        let name = cm.metadata.name.unwrap();
        configmaps(&emu)
            .delete(&name, &DeleteParams::default())
            .await
            .unwrap();
    }
    src.start();
    src.ready().await;
    let events = sink.wait_accepted(3).await;
    let resent: Vec<(String, String, String)> = (events[1..].iter())
        .map(|e| {
            let name = e.extension("imagestream").unwrap().to_string();
            let d = e.extension("imagedigest").unwrap().to_string();
            (name, d, e.id().to_string())
        })
        .collect();
    let nb = resent
        .iter()
        .find(|(n, _, _)| n == "nb")
        .expect("nb's current tag again");
    assert_eq!(
        (nb.1.as_str(), nb.2.as_str()),
        (digest('b').as_str(), first.as_str()),
        "the same event, same id"
    );
    let quiet = resent
        .iter()
        .find(|(n, _, _)| n == "quiet")
        .expect("quiet's current tag");
    assert_eq!(quiet.1, digest('a'));
    assert_eq!(
        metric(
            &src.metrics().await,
            "imagegate_source_checkpoint_lost_streams_total "
        ),
        2.0
    );
    // The checkpoint is whole again: a clean restart sends nothing.
    src.stop().await;
    src.start();
    src.ready().await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(sink.accepted().len(), 3);
}

/// OpenShift rewrites a tag's items[0].generation when a tag that follows it is added (the
/// real server: `loop/06-nb-*-track.json`; the emulator does it too). The id an image is sent
/// again with after a lost checkpoint is still the id it was first sent with.
#[tokio::test]
async fn a_tag_added_to_follow_the_candidate_keeps_the_id_its_image_is_sent_again_with() {
    let (emu, dir, sink) = setup(&["nb"]).await;
    let mut src = Source::new(&emu, &dir, &sink.url, &[]);
    src.ready().await;
    emu.import("ds", "nb", "candidate", &digest('b')).await;
    let first = sink.wait_accepted(1).await[0].id().to_string();
    let streams: Api<kube::api::DynamicObject> = Api::namespaced_with(
        emu.client(),
        "ds",
        &kube::discovery::ApiResource::from_gvk_with_plural(
            &kube::api::GroupVersionKind::gvk("image.openshift.io", "v1", "ImageStream"),
            "imagestreams",
        ),
    );
    let generation_of_candidate = |is: &kube::api::DynamicObject| {
        is.data["status"]["tags"]
            .as_array()
            .and_then(|t| t.iter().find(|t| t["tag"] == "candidate"))
            .map(|t| t["items"][0]["generation"].clone())
    };
    let before = generation_of_candidate(&streams.get("nb").await.unwrap());
    let track = json!({"spec": {"tags": [{"name": "track", "from": {"kind": "ImageStreamTag", "name": "candidate"}}]}});
    streams
        .patch(
            "nb",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Strategic(track),
        )
        .await
        .unwrap();
    let after = generation_of_candidate(&streams.get("nb").await.unwrap());
    assert_ne!(
        before, after,
        "the candidate's items[0].generation was rewritten"
    );
    sink.wait_accepted(2).await; // the new tag `track`
    src.stop().await;
    for cm in checkpoint_objects(&emu).await.0 {
        configmaps(&emu)
            .delete(&cm.metadata.name.unwrap(), &DeleteParams::default())
            .await
            .unwrap();
    }
    src.start();
    src.ready().await;
    let start = Instant::now();
    let resent = loop {
        let again = (sink.accepted().iter().skip(2))
            .find(|e| {
                e.extension("imagetag").map(|v| v.to_string()).as_deref() == Some("candidate")
            })
            .map(|e| e.id().to_string());
        if let Some(id) = again {
            break id;
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "the candidate was not sent again"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(resent, first, "the same event, the same id");
}

#[tokio::test]
async fn a_source_that_fails_before_its_first_list_writes_no_checkpoint() {
    // The flow fails at once (K_CA_CERTS holds no certificate), and on its way out the source
    // releases its Lease, which takes a few round trips. Nothing may be flushed meanwhile: an
    // empty checkpoint with its marker would make the next start take every stream for new and
    // send its whole history. Several times, since a flush there would be a race.
    let (emu, dir, sink) = setup(&["nb"]).await;
    for _ in 0..5 {
        let mut source = Source::with_env(
            &emu,
            &dir,
            &sink.url,
            &["--leader-elect"],
            &[("K_CA_CERTS", "not a certificate")],
        );
        let exit = source.exited().await;
        assert!(!exit.success(), "{exit:?}");
        let (shards, marker) = checkpoint_objects(&emu).await;
        assert!(
            shards.is_empty() && !marker,
            "{} shards, marker {marker}",
            shards.len()
        );
    }
    // A start with a good configuration is still a first start: it sends nothing.
    let mut source = Source::new(&emu, &dir, &sink.url, &[]);
    source.ready().await;
    let (shards, marker) = checkpoint_objects(&emu).await;
    assert!(!shards.is_empty() && marker);
    source.stop().await;
    assert!(sink.received().is_empty(), "a first start sends nothing");
}

/// F-11: a leader that lost its Lease writes no checkpoint after it. The source leads; its
/// checkpoint writes and its renewals start failing together, and a change is delivered (so its
/// checkpoint has a pending entry). Once it stops leading (after the renew deadline), the
/// ConfigMap writes work again but the Lease's still do not: the last flush a program makes on
/// its way out is not made (a standby may already be taking over), the process exits as a lost
/// leader, and the delivered change is not in its checkpoint (the next leader sends it again:
/// a duplicate, never a write over a newer leader's state).
#[tokio::test]
async fn a_leader_that_lost_its_lease_makes_no_last_flush() {
    let (emu, dir, sink) = setup(&["nb"]).await;
    let mut src = Source::new(
        &emu,
        &dir,
        &sink.url,
        &[
            "--leader-elect",
            "--lease-namespace",
            NS,
            "--identity",
            "only",
        ],
    );
    src.ready().await;
    eventually("the first checkpoint", || async {
        checkpoint_objects(&emu).await.1
    })
    .await;
    for (verb, resource) in [
        ("patch", "configmaps"),
        ("create", "configmaps"),
        ("update", "leases"),
    ] {
        emu.inject_fault(Fault {
            verb: Some(verb.into()),
            resource: Some(resource.into()),
            count: 100_000,
            status: Some(500),
            ..Fault::default()
        })
        .await;
    }
    emu.import("ds", "nb", "candidate", &digest('b')).await;
    sink.wait_accepted(1).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    while !src
        .log()
        .contains("no renewal succeeded within the renew deadline")
    {
        assert!(Instant::now() < deadline, "{}", src.log());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The Lease stays unwritable; the ConfigMaps are writable again.
    emu.clear_faults().await;
    emu.inject_fault(Fault {
        verb: Some("update".into()),
        resource: Some("leases".into()),
        count: 100_000,
        status: Some(500),
        ..Fault::default()
    })
    .await;
    let status = src.exited().await;
    assert!(
        !status.success(),
        "a lost lease ends the process: {status:?}"
    );
    assert!(
        src.log().contains("checkpoint write not made"),
        "{}",
        src.log()
    );
    let (shards, _) = checkpoint_objects(&emu).await;
    let text = serde_json::to_string(&shards).unwrap();
    assert!(
        !text.contains(&digest('b')[7..]),
        "the deposed leader wrote its checkpoint: {text}"
    );
}
