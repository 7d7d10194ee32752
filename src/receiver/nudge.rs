//! From pushes to imports, one worker: the pushes an accepted notification named wait in a
//! bounded queue ([`Queue`]; full, the notification is answered 503 and the registry sends it
//! again); the worker takes every batch waiting, reads the ImagePromotions and the streams of
//! their namespaces once, finds the governed candidate tags they concern
//! ([`super::targets`]), and imports each, as `imagegate import` does (an ImageStreamImport of
//! the tag's own `from` and policies): the API server reads the registry, and a new digest
//! becomes the candidate's, which the source reports like any import.
//!
//! Rate-limited two ways: a tag imported less than `min_interval` ago is imported once that
//! interval is over, not dropped ([`plan`]; several pushes meanwhile are one import, of what the
//! registry serves then), and imports are spaced by `spacing` across all tags. A list or an
//! import the API server fails is tried again (three times, 1 s, 2 s, 4 s apart), then logged
//! and counted `failed`: the push is then left to the scheduled import.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use kube::Api;
use kube::api::{ListParams, PostParams};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::api::{ImageStream, ImageStreamImport};
use crate::controller::crd::ImagePromotion;
use crate::ops::import;

use super::metrics::{Metrics, import as outcome};
use super::targets::{self, Target};
use super::wire::Push;

/// How many notifications' pushes may wait for the worker (each names at most
/// [`super::wire::MAX_EVENTS`]).
pub(crate) const QUEUE: usize = 256;
/// Tries of one API request before the push is left to the scheduled import.
const TRIES: u32 = 3;

/// How the worker imports.
#[derive(Clone, Debug)]
pub(crate) struct Settings {
    /// The least time between two imports of one tag.
    pub(crate) min_interval: Duration,
    /// The least time between two imports of any tags.
    pub(crate) spacing: Duration,
    /// The namespaces whose ImagePromotions are read; empty: every namespace.
    pub(crate) namespaces: Vec<String>,
}

/// When a tag last imported at `last` is imported again: now (None), or at the returned time.
pub(crate) fn plan(now: Instant, last: Option<Instant>, min_interval: Duration) -> Option<Instant> {
    let next = last? + min_interval;
    (next > now).then_some(next)
}

/// The queue's sending side, held by the HTTP handler.
#[derive(Clone)]
pub(crate) struct Queue(mpsc::Sender<Vec<Push>>);

impl Queue {
    /// A queue and the receiving side the worker takes.
    pub(crate) fn new() -> (Queue, mpsc::Receiver<Vec<Push>>) {
        let (tx, rx) = mpsc::channel(QUEUE);
        (Queue(tx), rx)
    }

    /// Queues `pushes`; false when the queue is full (or the worker has stopped).
    pub(crate) fn offer(&self, pushes: Vec<Push>) -> bool {
        self.0.try_send(pushes).is_ok()
    }
}

/// Runs the worker until `token` is cancelled.
pub(crate) async fn run(
    client: kube::Client,
    settings: Settings,
    metrics: Metrics,
    mut queue: mpsc::Receiver<Vec<Push>>,
    token: CancellationToken,
) {
    let (due_tx, mut due) = mpsc::unbounded_channel::<Target>();
    let mut w = Worker {
        client,
        settings,
        metrics,
        last: HashMap::new(),
        pending: HashSet::new(),
        last_any: None,
        due: due_tx,
    };
    loop {
        tokio::select! {
            batch = queue.recv() => {
                let Some(mut pushes) = batch else { return };
                while let Ok(more) = queue.try_recv() {
                    pushes.extend(more);
                }
                pushes.sort();
                pushes.dedup();
                w.pushed(&pushes).await;
            }
            Some(target) = due.recv() => {
                w.pending.remove(&target);
                w.import(&target).await;
            }
            _ = token.cancelled() => return,
        }
    }
}

struct Worker {
    client: kube::Client,
    settings: Settings,
    metrics: Metrics,
    last: HashMap<Target, Instant>,
    pending: HashSet<Target>,
    last_any: Option<Instant>,
    due: mpsc::UnboundedSender<Target>,
}

impl Worker {
    async fn pushed(&mut self, pushes: &[Push]) {
        let found = match retried(|| self.read(pushes)).await {
            Ok(found) => found,
            Err(e) => {
                warn!(error = %format!("{e:#}"), pushes = pushes.len(), "cannot read the governed streams; the pushes are left to the scheduled import");
                self.metrics.import(outcome::FAILED);
                return;
            }
        };
        // Spelled out only when debug is on: this runs for every batch of notifications.
        if tracing::enabled!(tracing::Level::DEBUG) {
            let named: Vec<String> = (pushes.iter())
                .map(|p| format!("{}/{}:{}", p.registry, p.repository, p.tag))
                .collect();
            let governed: Vec<String> = (found.iter())
                .map(|t| format!("{}/{}:{}", t.namespace, t.stream, t.tag))
                .collect();
            debug!(pushes = ?named, tags = ?governed, "pushes read: the governed candidate tags they name");
        }
        for target in found {
            if self.pending.contains(&target) {
                self.metrics.import(outcome::DEFERRED);
                continue;
            }
            match plan(
                Instant::now(),
                self.last.get(&target).copied(),
                self.settings.min_interval,
            ) {
                None => self.import(&target).await,
                Some(at) => {
                    self.metrics.import(outcome::DEFERRED);
                    self.pending.insert(target.clone());
                    let due = self.due.clone();
                    tokio::spawn(async move {
                        tokio::time::sleep_until(at).await;
                        let _ = due.send(target);
                    });
                }
            }
        }
    }

    /// The governed candidate tags `pushes` concern.
    async fn read(&self, pushes: &[Push]) -> anyhow::Result<Vec<Target>> {
        let mut promotions = Vec::new();
        if self.settings.namespaces.is_empty() {
            let all = Api::<ImagePromotion>::all(self.client.clone());
            promotions = all.list(&ListParams::default()).await?.items;
        } else {
            for ns in &self.settings.namespaces {
                let api = Api::<ImagePromotion>::namespaced(self.client.clone(), ns);
                promotions.extend(api.list(&ListParams::default()).await?.items);
            }
        }
        let namespaces: HashSet<&str> = promotions
            .iter()
            .filter_map(|p| p.metadata.namespace.as_deref())
            .collect();
        let mut streams = Vec::new();
        for ns in namespaces {
            let api = Api::<ImageStream>::namespaced(self.client.clone(), ns);
            streams.extend(api.list(&ListParams::default()).await?.items);
        }
        Ok(targets::of(pushes, &promotions, &streams))
    }

    async fn import(&mut self, t: &Target) {
        if let Some(last) = self.last_any {
            tokio::time::sleep_until(last + self.settings.spacing).await;
        }
        let now = Instant::now();
        self.last_any = Some(now);
        self.last.insert(t.clone(), now);
        let result = retried(|| import_one(&self.client, t)).await;
        let what = match result {
            Ok(o) => o,
            Err(e) => {
                warn!(namespace = %t.namespace, imagestream = %t.stream, tag = %t.tag, error = %format!("{e:#}"), "cannot import on a push; left to the scheduled import");
                outcome::FAILED
            }
        };
        info!(namespace = %t.namespace, imagestream = %t.stream, tag = %t.tag, outcome = what, "imported on a push");
        self.metrics.import(what);
    }
}

/// Imports `t` now; how it ended (changed, unchanged, refused).
async fn import_one(client: &kube::Client, t: &Target) -> anyhow::Result<&'static str> {
    let Some(stream) = Api::<ImageStream>::namespaced(client.clone(), &t.namespace)
        .get_opt(&t.stream)
        .await?
    else {
        return Ok(outcome::REFUSED);
    };
    let Ok(req) = import::request(&stream, &t.tag) else {
        return Ok(outcome::REFUSED);
    };
    let answer = Api::<ImageStreamImport>::namespaced(client.clone(), &t.namespace)
        .create(&PostParams::default(), &req)
        .await?;
    let before = stream.current_digest(&t.tag);
    let (_, verdict) = import::outcome(&answer, &t.tag, before);
    let after = answer
        .status
        .as_ref()
        .and_then(|s| s.import.as_ref())
        .and_then(|is| is.current_digest(&t.tag));
    Ok(match verdict {
        crate::ops::Verdict::Refused => outcome::REFUSED,
        crate::ops::Verdict::Done if after != before => outcome::CHANGED,
        crate::ops::Verdict::Done => outcome::UNCHANGED,
    })
}

async fn retried<T, F, Fut>(mut f: F) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<T>>,
{
    let mut wait = Duration::from_secs(1);
    let mut tries = 1;
    loop {
        match f().await {
            Ok(v) => return Ok(v),
            Err(e) if tries >= TRIES => return Err(e),
            Err(e) => {
                debug!(error = %format!("{e:#}"), "trying again in {wait:?}");
                tokio::time::sleep(wait).await;
                wait *= 2;
                tries += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tag_imported_within_the_interval_waits_for_its_end_and_any_other_goes_now() {
        let now = Instant::now();
        let ten = Duration::from_secs(10);
        assert_eq!(plan(now, None, ten), None);
        assert_eq!(plan(now, Some(now - ten), ten), None);
        assert_eq!(plan(now, Some(now - ten * 2), ten), None);
        let recent = now - Duration::from_secs(3);
        assert_eq!(plan(now, Some(recent), ten), Some(recent + ten));
    }
}
