//! The watch window held to the real servers' (`imagegate_emulator::window`): a watch from
//! before the server started is `410 Expired` at once, as the real openshift-apiserver answered
//! (`tests/real-openshift/86-watch-from-old-resourceversion.json`, kept beside the replayed
//! operations), and bookmarks come about once a minute and 2 s before the watch's timeout, not
//! every second (the real kube-apiserver sent none within ten seconds). `lenient_watch` keeps
//! the old leniency, and only when asked.

use std::time::{Duration, Instant};

use imagegate_emulator::{Config, Emulator};
use serde_json::{Value, json};

use crate::emulator_http::read_watch;

async fn start(lenient_watch: bool) -> (Emulator, reqwest::Client) {
    crate::install_crypto_provider();
    let emu = Emulator::start(Config {
        lenient_watch,
        ..Config::default()
    })
    .await
    .unwrap();
    emu.seed_str("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: notebooks\n")
        .unwrap();
    for name in ["plain", "nb", "broken"] {
        emu.seed_str(
            &json!({"apiVersion": "image.openshift.io/v1", "kind": "ImageStream",
                    "metadata": {"name": name, "namespace": "notebooks"}})
            .to_string(),
        )
        .unwrap();
    }
    (emu, reqwest::Client::new())
}

async fn watch(
    emu: &Emulator,
    http: &reqwest::Client,
    query: &str,
    within: Duration,
) -> Vec<Value> {
    let url = format!(
        "{}/apis/image.openshift.io/v1/namespaces/notebooks/imagestreams?watch=true&{query}",
        emu.url()
    );
    let resp = http.get(url).send().await.unwrap();
    assert_eq!(
        resp.status(),
        200,
        "a watch's errors come inside its stream"
    );
    read_watch(resp, within, |_| false).await.0
}

/// `[type, name or reason, message]` of each event, as `86-...json` records them.
fn recorded(events: &[Value]) -> Vec<(String, String, String)> {
    events
        .iter()
        .map(|e| {
            let o = &e["object"];
            let what = o["metadata"]["name"].as_str().or(o["reason"].as_str());
            let message = o["message"].as_str().unwrap_or_default();
            // The resourceVersion the window starts at is the server's own.
            let message = message.split(" (").next().unwrap_or_default();
            (
                e["type"].as_str().unwrap().to_string(),
                what.unwrap_or_default().to_string(),
                message.to_string(),
            )
        })
        .collect()
}

#[tokio::test]
async fn a_watch_from_before_the_server_started_is_expired_at_once_as_on_openshift() {
    let file = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/real-openshift/watches/86-watch-from-old-resourceversion.json"
    );
    let real: Value = serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
    let real = |watch: &str| -> Vec<(String, String, String)> {
        let mut v: Vec<_> = real["real"][watch]["events"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                let message = e[2].as_str().unwrap_or_default();
                (
                    e[0].as_str().unwrap().to_string(),
                    e[1].as_str().unwrap().to_string(),
                    message.split(" (").next().unwrap().to_string(),
                )
            })
            .collect();
        v.sort();
        v
    };
    let (emu, http) = start(false).await;
    let started = Instant::now();
    let events = watch(
        &emu,
        &http,
        "resourceVersion=1&timeoutSeconds=2",
        Duration::from_secs(5),
    )
    .await;
    assert_eq!(
        recorded(&events),
        real("watch rv=1"),
        "one ERROR, 410 Expired"
    );
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "at once, not at the timeout"
    );
    assert_eq!(events[0]["object"]["code"], 410);
    // From 0: the current streams as ADDED.
    let events = watch(
        &emu,
        &http,
        "resourceVersion=0&timeoutSeconds=2",
        Duration::from_secs(5),
    )
    .await;
    let mut added = recorded(&events);
    added.sort();
    assert_eq!(added, real("watch rv=0"));
    emu.shutdown().await;
}

#[tokio::test]
async fn only_a_lenient_watch_replays_events_from_before_the_start() {
    let (emu, http) = start(true).await;
    let events = watch(
        &emu,
        &http,
        "resourceVersion=1&timeoutSeconds=2",
        Duration::from_secs(5),
    )
    .await;
    let names: Vec<(String, String, String)> = ["plain", "nb", "broken"]
        .map(|n| ("ADDED".to_string(), n.to_string(), String::new()))
        .into();
    assert_eq!(recorded(&events), names);
    emu.shutdown().await;
}

async fn watch_after_a_write(
    lenient: bool,
    timeout: u64,
    within: Duration,
) -> (Vec<Value>, Vec<Duration>) {
    let (emu, http) = start(lenient).await;
    let list: Value = http
        .get(format!(
            "{}/apis/image.openshift.io/v1/namespaces/notebooks/imagestreams",
            emu.url()
        ))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let rv = list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    let url = format!(
        "{}/apis/image.openshift.io/v1/namespaces/notebooks/imagestreams?watch=true&resourceVersion={rv}&allowWatchBookmarks=true&timeoutSeconds={timeout}",
        emu.url()
    );
    let mut resp = http.get(url).send().await.unwrap();
    let opened = Instant::now();
    emu.seed_str(
        &json!({"apiVersion": "image.openshift.io/v1", "kind": "ImageStream",
                "metadata": {"name": "new", "namespace": "notebooks"}})
        .to_string(),
    )
    .unwrap();
    let (mut events, mut at, mut buf) = (Vec::new(), Vec::new(), Vec::new());
    while let Ok(Ok(Some(chunk))) =
        tokio::time::timeout(within.saturating_sub(opened.elapsed()), resp.chunk()).await
    {
        buf.extend_from_slice(&chunk);
        while let Some(i) = buf.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = buf.drain(..=i).collect();
            events.push(serde_json::from_slice::<Value>(&line).unwrap());
            at.push(opened.elapsed());
        }
    }
    emu.shutdown().await;
    (events, at)
}

#[tokio::test]
async fn a_bookmark_comes_before_the_timeout_not_every_second() {
    // A watch of 8 s: the change at once, then nothing for about 6 s, then a bookmark 2 s before
    // the end, as kube-apiserver sends it.
    let (events, at) = watch_after_a_write(false, 8, Duration::from_secs(12)).await;
    let types: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(types, ["ADDED", "BOOKMARK"], "at {at:?}");
    assert!(
        at[1] >= Duration::from_millis(5500) && at[1] < Duration::from_millis(7900),
        "the bookmark came at {:?}, not 2 s before the timeout",
        at[1]
    );
    // Lenient: a bookmark within about a second of the change.
    let (events, at) = watch_after_a_write(true, 4, Duration::from_secs(3)).await;
    let first = events
        .iter()
        .position(|e| e["type"] == "BOOKMARK")
        .expect("a lenient watch sends a bookmark every second");
    assert!(at[first] < Duration::from_millis(1800), "{:?}", at[first]);
}
