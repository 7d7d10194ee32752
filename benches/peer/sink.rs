//! The one sink both programs post to. Each event is told apart by the `bench` extension each
//! program adds through its own CloudEvents overrides (`K_CE_OVERRIDES` for the adapter,
//! `--ce-overrides` for imagegate), and identified by the change it carries: the bench gives
//! every import a round number inside its digest ([`round_of`]), so the ImageStream in an
//! event's data names the newest change it includes.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use serde_json::Value;

/// One event the sink took.
#[derive(Clone, Debug)]
pub struct Received {
    /// The `bench` extension: `adapter` or `imagegate`.
    pub sender: String,
    /// `ce-type`.
    pub kind: String,
    /// The newest import round the ImageStream in the data holds (0: only seeded digests).
    pub round: u64,
    pub at: Instant,
}

/// Every event taken so far, in order of receipt.
pub type Log = Arc<Mutex<Vec<Received>>>;

/// The round a bench digest carries (`shared::digest`: `sha256:{round:08x}...`), 0 otherwise.
pub fn round_of(digest: &str) -> u64 {
    digest
        .strip_prefix("sha256:")
        .and_then(|hex| hex.get(..8))
        .and_then(|r| u64::from_str_radix(r, 16).ok())
        .unwrap_or(0)
}

/// The newest round among the tags' current images (`status.tags[].items[0].image`) of an
/// ImageStream.
pub fn newest_round(stream: &Value) -> u64 {
    stream["status"]["tags"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["items"][0]["image"].as_str())
        .map(round_of)
        .max()
        .unwrap_or(0)
}

async fn receive(State(log): State<Log>, headers: HeaderMap, body: Bytes) -> StatusCode {
    let at = Instant::now();
    let header = |k: &str| {
        headers
            .get(k)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string()
    };
    let data: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    // A tag event (imagegate's default mode) names its digest; the other modes send the stream.
    let round = match data["digest"].as_str() {
        Some(d) => round_of(d),
        None => newest_round(&data),
    };
    log.lock().unwrap().push(Received {
        sender: header("ce-bench"),
        kind: header("ce-type"),
        round,
        at,
    });
    StatusCode::ACCEPTED
}

/// Starts the sink on a free loopback port; its URL and its log.
pub async fn start() -> (String, Log) {
    let log: Log = Arc::default();
    let app = Router::new()
        .route("/", post(receive))
        .with_state(log.clone());
    let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0)))
        .await
        .unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (url, log)
}

/// How one sender's `update` events cover a set of changes (import rounds).
#[derive(Debug, Default)]
pub struct Coverage {
    pub delivered: usize,
    pub lost: usize,
    /// Events beyond the first for a change.
    pub duplicated: usize,
}

/// Counts `sender`'s update events (`...resource.update`, `...imagestreamtag.updated`) for each
/// of `rounds`.
pub fn coverage(log: &[Received], sender: &str, rounds: &[u64]) -> Coverage {
    let mut c = Coverage::default();
    for r in rounds {
        let n = log
            .iter()
            .filter(|e| e.sender == sender && is_update(&e.kind) && e.round == *r)
            .count();
        match n {
            0 => c.lost += 1,
            n => {
                c.delivered += 1;
                c.duplicated += n - 1;
            }
        }
    }
    c
}

/// An update event of any of the modes.
pub fn is_update(kind: &str) -> bool {
    kind.ends_with(".update") || kind.ends_with(".updated")
}

/// `sender`'s events of a kind ending in `suffix` (`.add`, `.update`, `.delete`).
pub fn count_kind(log: &[Received], sender: &str, suffix: &str) -> usize {
    log.iter()
        .filter(|e| e.sender == sender && e.kind.ends_with(suffix))
        .count()
}
