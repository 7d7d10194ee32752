//! A watch the API server starts refusing in the middle of a run (RBAC revoked: a 403; a
//! request it no longer accepts: a 400), for both programs as real binaries against the
//! emulator: the watch is retried with backoff (a handful of requests, not a spin), each
//! attempt counted in the watch-restarts metric, and `/readyz` unready with the reason while
//! it lasts; the program keeps running, and once the API server allows the watch again it
//! works (a run is promoted, an import is delivered) and is ready again.

use std::time::Duration;

use imagegate_emulator::control::Fault;
use serde_json::json;

use crate::support::controller::{B, Setup, VALIDATED_B, reason};
use crate::support::sink::Sink;
use crate::support::source::Source;
use crate::support::{EmulatorServer, eventually};

/// How long the tests count the retries of a refused watch.
const WINDOW: Duration = Duration::from_secs(6);

/// More requests than the watch backoff (0.8 s, 1.6 s, 3.2 s, ...) makes in [`WINDOW`] (4),
/// fewer than kube's own backoff makes for a refused re-list (every 0.8 s: 7), far fewer than a
/// watch retried at once would.
const AT_MOST: usize = 5;

/// How the programs come to ask again.
#[derive(Clone, Copy, Debug)]
enum Again {
    /// Their watches end, and starting a new one is refused.
    Watch,
    /// Their watches end and their resourceVersion has expired (410), and the re-list is refused.
    Relist,
}

/// Every list (and, for [`Again::Watch`], watch) of `resource` answers `status` until the
/// faults are cleared; the open watches end, so the programs ask again.
async fn refuse_watches(emu: &EmulatorServer, resource: &str, status: u16, again: Again) {
    let verbs: &[&str] = match again {
        Again::Watch => &["list", "watch"],
        Again::Relist => &["list"],
    };
    for verb in verbs {
        emu.inject_fault(Fault {
            verb: Some(verb.to_string()),
            resource: Some(resource.into()),
            count: 1_000_000,
            status: Some(status),
            message: Some(format!("{resource} refused for this test")),
            ..Fault::default()
        })
        .await;
    }
    if matches!(again, Again::Relist) {
        emu.compact().await;
    }
    emu.drop_watches().await;
}

/// The lists and watches of `resource` that `user` asked for so far.
async fn watch_requests(emu: &EmulatorServer, user: &str, resource: &str) -> usize {
    emu.requests()
        .await
        .iter()
        .filter(|r| {
            r.user == user && r.resource == resource && (r.verb == "list" || r.verb == "watch")
        })
        .count()
}

/// Waits (up to 20 s) until `/readyz` answers 503; its reason.
async fn unready(admin: u16) -> String {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let (code, body) = readyz(admin).await;
        if code == 503 {
            return body;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "still ready: {body}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn alive(admin: u16) -> bool {
    reqwest::get(format!("http://127.0.0.1:{admin}/livez"))
        .await
        .is_ok_and(|r| r.status().is_success())
}

async fn readyz(admin: u16) -> (u16, String) {
    let r = reqwest::get(format!("http://127.0.0.1:{admin}/readyz"))
        .await
        .unwrap();
    (r.status().as_u16(), r.text().await.unwrap())
}

async fn metric(admin: u16, name: &str) -> u64 {
    let text = reqwest::get(format!("http://127.0.0.1:{admin}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{name} ")))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {name} in {text}"))
}

/// The requests of a refused watch over [`WINDOW`], asserting that they are few.
async fn assert_backed_off(emu: &EmulatorServer, user: &str, resource: &str) {
    // Only the retries after the first refusal.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let before = watch_requests(emu, user, resource).await;
    tokio::time::sleep(WINDOW).await;
    let during = watch_requests(emu, user, resource).await - before;
    assert!(
        during <= AT_MOST,
        "{during} lists and watches of {resource} in {WINDOW:?}: retried with backoff, not at once"
    );
}

#[tokio::test]
async fn the_controller_retries_a_customrun_watch_refused_mid_run_with_backoff_and_reports_it() {
    let mut s = Setup::new().await;
    crate::support::wait_ready(s.admin).await;

    refuse_watches(&s.emu, "customruns", 403, Again::Watch).await;
    assert_eq!(
        unready(s.admin).await,
        "the API server refuses the CustomRun watch (403); retrying with backoff"
    );
    assert_backed_off(&s.emu, "controller", "customruns").await;
    assert!(metric(s.admin, "imagegate_controller_watch_restarts_total").await >= 2);
    assert!(
        alive(s.admin).await,
        "a refused watch does not end the controller"
    );

    // RBAC is back: the next retry lists, and a run is reconciled.
    s.emu.clear_faults().await;
    s.create_run("promote-b", VALIDATED_B, json!({})).await;
    let run = s.done("promote-b").await;
    assert_eq!(reason(&run), ("True".into(), "Promoted".into()));
    assert_eq!(s.stream().await.current_digest("latest"), Some(B));
    assert_eq!(readyz(s.admin).await, (200, "ok".into()));
    s.stop();
}

#[tokio::test]
async fn the_source_retries_an_imagestream_watch_refused_mid_run_with_backoff_and_reports_it() {
    let emu = EmulatorServer::start().await;
    emu.seed_str("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: imagegate-system\n")
        .await;
    emu.seed(json!({
        "apiVersion": "image.openshift.io/v1", "kind": "ImageStream",
        "metadata": {"name": "nb", "namespace": "ds"},
        "spec": {"tags": [{"name": "candidate", "from": {"kind": "DockerImage", "name": "quay.io/org/nb:latest"}, "importPolicy": {"scheduled": true}}]}
    }))
    .await;
    let dir = tempfile::tempdir().unwrap();
    let sink = Sink::start().await;
    let mut src = Source::new(&emu, &dir, &sink.url, &[]);
    src.ready().await;

    for (status, again) in [(400, Again::Relist), (403, Again::Watch)] {
        refuse_watches(&emu, "imagestreams", status, again).await;
        assert_eq!(
            unready(src.admin).await,
            format!(
                "the API server refuses the ImageStream watch ({status}); retrying with backoff"
            )
        );
        assert_backed_off(&emu, "source", "imagestreams").await;
        assert!(
            alive(src.admin).await,
            "a refused watch does not end the source"
        );
        emu.clear_faults().await;
        // Allowed again: the next retry lists (the readiness comes back with it), and a change
        // made while it was refused is delivered.
        let digest = format!(
            "sha256:{}",
            if status == 400 { "4" } else { "3" }.repeat(64)
        );
        emu.import("ds", "nb", "candidate", &digest).await;
        let events = sink.wait_accepted(if status == 400 { 1 } else { 2 }).await;
        assert_eq!(
            events
                .last()
                .unwrap()
                .extension("imagedigest")
                .map(|v| v.to_string()),
            Some(digest)
        );
        eventually("ready again", || async { readyz(src.admin).await.0 == 200 }).await;
    }
    assert!(
        metric(src.admin, "imagegate_source_watch_restarts_total").await >= 4,
        "every refused attempt is counted"
    );
    src.stop().await;
}
