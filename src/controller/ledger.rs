//! The ledger: every candidate of a governed stream reaches a verdict, or someone is paged.
//!
//! It lives in the controller, beside the tamper check, because the controller is the one
//! program that knows what a verdict is (the served tag's marks it writes) and which streams a
//! policy governs; the source only knows that a change was delivered, not what became of it.
//! It costs O(changes): one watch of the ImageStreams and one of the ImagePromotions, a pure
//! judgement of each stream as it changes ([`judge`]), and a tick that looks only at the
//! streams with something pending. A stream's candidate that no validation began within
//! `--verdict-grace` of its import, or whose validation ended without a verdict (its `begin`
//! run or its PipelineRun gone, or the PipelineRun finished with the served tag still
//! `Validating`), is a Warning Event on the ImageStream (`CandidateWithoutVerdict`,
//! `ValidationLost`) and counted in `imagegate_controller_candidates_without_verdict`, which
//! the `ImagegateCandidateWithoutVerdict` alert watches; a failing import of a candidate tag
//! (`ImportFailing`) and a served tag `UpdateFailed` are gauges of their own. It writes nothing
//! to the streams. Its memory is lost on a restart: a candidate already waiting is paged one
//! grace period after the restart at the latest.

pub mod judge;
mod metrics;
mod page;
pub mod redrive;
mod redrive_io;

use std::collections::BTreeMap;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::jiff::Timestamp;
use kube::api::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::events::Recorder;
use kube::runtime::watcher;
use kube::{Client, Resource, ResourceExt};
use tokio_util::sync::CancellationToken;
use tracing::warn;

use self::judge::{Judged, Standing, Tags};
pub use self::metrics::LedgerMetrics;
use super::crd::ImagePromotion;
use super::params::{DEFAULT_CANDIDATE_TAG, DEFAULT_SERVED_TAG};
use super::policy::governs;
use crate::api::{ImageStream, status_code};
use crate::runkey::RunKey;

use super::verdict::Verdicts;
use super::verdict::event::Kind;

/// The Event reason of a candidate no validation began for within the grace period.
pub(crate) const WITHOUT_VERDICT: &str = "CandidateWithoutVerdict";
/// The Event reason of a validation that ended without a verdict.
pub(crate) const LOST: &str = "ValidationLost";

/// How often the pending streams are looked at again.
const TICK: Duration = Duration::from_secs(10);

/// A stream, by namespace and name.
type Key = (String, String);

/// What the ledger keeps of a stream with something to watch.
#[derive(Debug)]
struct Entry {
    judged: Judged,
    /// When the ledger first saw the current `Validating` (it checks its run a grace later).
    validating_since: Option<Timestamp>,
    /// The standing it paged for (once per standing), and why.
    paged: Option<(Standing, &'static str)>,
    /// The candidate re-driven, how many times, and when last.
    redriven: Option<(String, u32, Timestamp)>,
    /// The import failure it reported (once per message).
    import_reported: Option<String>,
}

impl Entry {
    /// When the current standing is due to be paged: a grace after its import (or its last
    /// re-drive) while waiting, a grace after the ledger first saw it while validating.
    fn since(&self) -> Option<Timestamp> {
        let redriven = |digest: &str| {
            (self.redriven.as_ref())
                .filter(|(d, _, _)| d == digest)
                .map(|r| r.2)
        };
        match &self.judged.standing {
            Standing::Waiting { digest, since } => match (since, redriven(digest)) {
                (Some(s), Some(r)) => Some((*s).max(r)),
                (s, r) => s.or(r),
            },
            Standing::Validating { digest, .. } => {
                match (self.validating_since, redriven(digest)) {
                    (Some(s), Some(r)) => Some(s.max(r)),
                    (s, r) => s.or(r),
                }
            }
            Standing::Settled => None,
        }
    }
}

/// The ledger of the streams the controller watches.
pub(crate) struct Ledger {
    client: Client,
    grace: Duration,
    /// Where the run key is (namespace, Secret), and the key once read.
    run_key_at: (String, String),
    run_key: Option<RunKey>,
    /// Where its verdicts (`lost`, `updatefailed` after the re-drives) go as CloudEvents.
    verdicts: Option<Verdicts>,
    metrics: LedgerMetrics,
    recorder: Recorder,
    policies: BTreeMap<Key, ImagePromotion>,
    entries: BTreeMap<Key, Entry>,
    /// Of each stream with an entry, what its Events and its conditional write need: its
    /// reference and the resourceVersion last seen (not the whole object: an `UpdateFailed`
    /// stream keeps its entry for as long as it stays failed).
    streams: BTreeMap<Key, (ObjectReference, Option<String>)>,
}

/// What the ledger reports through.
pub(crate) struct Outputs {
    /// Its gauges.
    pub metrics: LedgerMetrics,
    /// Its Kubernetes Events.
    pub recorder: Recorder,
    /// Its verdicts as CloudEvents (None: none sent).
    pub verdicts: Option<Verdicts>,
}

/// Runs the ledger on the ImageStreams and ImagePromotions of `namespaces` (all when empty)
/// until `stop` is cancelled: `grace` before a candidate is paged, re-drives named with the
/// run key of Secret `run_key_at` (namespace, name).
pub(crate) async fn watch(
    client: Client,
    namespaces: Vec<String>,
    grace: Duration,
    run_key_at: (String, String),
    outputs: Outputs,
    stop: CancellationToken,
) {
    let Outputs {
        metrics,
        recorder,
        verdicts,
    } = outputs;
    let mut ledger = Ledger {
        client: client.clone(),
        grace,
        run_key_at,
        run_key: None,
        verdicts,
        metrics,
        recorder,
        policies: BTreeMap::new(),
        entries: BTreeMap::new(),
        streams: BTreeMap::new(),
    };
    let streams = super::drift::stream_apis(&client, &namespaces);
    let mut streams = futures::stream::select_all(streams.into_iter().map(|api| {
        watcher(api, watcher::Config::default())
            .default_backoff()
            .boxed()
    }));
    // Each watch with its scope (a namespace, None: every one), so that a re-list replaces what
    // is known of its scope only.
    let scopes: Vec<Option<String>> = if namespaces.is_empty() {
        vec![None]
    } else {
        namespaces.iter().cloned().map(Some).collect()
    };
    let mut promotions = futures::stream::select_all(scopes.into_iter().map(|scope| {
        let api: Api<ImagePromotion> = match &scope {
            None => Api::all(client.clone()),
            Some(ns) => Api::namespaced(client.clone(), ns),
        };
        watcher(api, watcher::Config::default())
            .default_backoff()
            .map(move |e| (scope.clone(), e))
            .boxed()
    }));
    let mut tick = tokio::time::interval(TICK);
    // While a scope's ImagePromotions are (re-)listed, what the list holds; once it is done it
    // replaces what was known of that scope (one deleted meanwhile is gone), and each namespace
    // whose policies changed is judged again once (one list of its streams, however many).
    let mut listing: BTreeMap<Option<String>, BTreeMap<Key, ImagePromotion>> = BTreeMap::new();
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            Some((scope, event)) = promotions.next() => match event {
                Ok(watcher::Event::Init) => {
                    listing.insert(scope, BTreeMap::new());
                }
                Ok(watcher::Event::InitApply(p)) => {
                    listing.entry(scope).or_default().insert(key_of(&p), p);
                }
                Ok(watcher::Event::InitDone) => {
                    let listed = listing.remove(&scope).unwrap_or_default();
                    let in_scope = |key: &Key| scope.as_ref().is_none_or(|ns| *ns == key.0);
                    let known: Vec<Key> =
                        ledger.policies.keys().filter(|k| in_scope(k)).cloned().collect();
                    let old: BTreeMap<Key, ImagePromotion> = known
                        .into_iter()
                        .filter_map(|k| ledger.policies.remove_entry(&k))
                        .collect();
                    let mut changed = std::collections::BTreeSet::new();
                    for (key, p) in &old {
                        if listed.get(key).map(|n| &n.spec) != Some(&p.spec) {
                            changed.insert(key.0.clone());
                        }
                    }
                    for (key, p) in &listed {
                        if old.get(key).map(|o| &o.spec) != Some(&p.spec) {
                            changed.insert(key.0.clone());
                        }
                    }
                    ledger.policies.extend(listed);
                    for ns in changed {
                        ledger.rejudge(&ns).await;
                    }
                }
                Ok(watcher::Event::Apply(p)) => {
                    let key = key_of(&p);
                    let changed = ledger.policies.get(&key).map(|old| &old.spec) != Some(&p.spec);
                    ledger.policies.insert(key.clone(), p);
                    if changed {
                        ledger.rejudge(&key.0).await;
                    }
                }
                Ok(watcher::Event::Delete(p)) => {
                    let key = key_of(&p);
                    ledger.policies.remove(&key);
                    ledger.rejudge(&key.0).await;
                }
                Err(e) => warn!(error = %e, "the ImagePromotion watch of the ledger failed; retrying"),
            },
            Some(event) = streams.next() => match event {
                Ok(watcher::Event::Apply(is) | watcher::Event::InitApply(is)) => {
                    ledger.seen(is).await;
                }
                Ok(watcher::Event::Delete(is)) => ledger.gone(&key_of(&is)),
                Ok(_) => {}
                Err(e) => warn!(error = %e, "the ImageStream watch of the ledger failed; retrying"),
            },
            _ = tick.tick() => ledger.tick(Timestamp::now()).await,
        }
    }
}

fn key_of<K: Resource>(o: &K) -> Key {
    (o.namespace().unwrap_or_default(), o.name_any())
}

impl Ledger {
    /// The candidate and served tags of the stream `key`, if an ImagePromotion governs it (the
    /// first, by name, of those that do: two that disagree refuse every run anyway).
    fn tags(&self, (ns, name): &Key) -> Option<Tags> {
        let p = self
            .in_namespace(ns)
            .find(|(_, p)| governs(&p.spec, ns, name))?
            .1;
        Some(Tags {
            candidate: (p.spec.candidate_tag.clone())
                .unwrap_or_else(|| DEFAULT_CANDIDATE_TAG.into()),
            served: (p.spec.served_tag.clone()).unwrap_or_else(|| DEFAULT_SERVED_TAG.into()),
        })
    }

    /// The ImagePromotions of namespace `ns`, by name (a range of the map: judging a stream
    /// costs the policies of its namespace, not every one of the cluster).
    fn in_namespace<'a>(
        &'a self,
        ns: &'a str,
    ) -> impl Iterator<Item = (&'a Key, &'a ImagePromotion)> + 'a {
        self.policies
            .range((ns.to_string(), String::new())..)
            .take_while(move |((pns, _), _)| pns == ns)
    }

    /// A stream changed: judged again; what is settled is forgotten.
    async fn seen(&mut self, is: ImageStream) {
        let key = key_of(&is);
        let Some(tags) = self.tags(&key) else {
            self.gone(&key);
            return;
        };
        let judged = judge::judge(&is, &tags);
        let quiet = judged.standing == Standing::Settled
            && judged.import_failing.is_none()
            && !judged.update_failed;
        if quiet {
            self.gone(&key);
            return;
        }
        let entry = self.entries.entry(key.clone()).or_insert_with(|| Entry {
            judged: judged.clone(),
            validating_since: None,
            paged: None,
            redriven: None,
            import_reported: None,
        });
        // A page stands while its candidate stands as it was paged for; a re-drive counts for
        // its candidate until another comes.
        if entry.paged.as_ref().map(|p| &p.0) != Some(&judged.standing) {
            entry.paged = None;
        }
        let digest = match &judged.standing {
            Standing::Waiting { digest, .. } | Standing::Validating { digest, .. } => {
                Some(digest.as_str())
            }
            Standing::Settled => None,
        };
        if entry.redriven.as_ref().map(|r| r.0.as_str()) != digest {
            entry.redriven = None;
        }
        entry.validating_since = match (&entry.judged.standing, &judged.standing) {
            (before @ Standing::Validating { .. }, now @ Standing::Validating { .. })
                if before == now =>
            {
                entry.validating_since.or(Some(Timestamp::now()))
            }
            (_, Standing::Validating { .. }) => Some(Timestamp::now()),
            _ => None,
        };
        entry.judged = judged;
        let failing = entry.judged.import_failing.clone();
        let report = failing.is_some() && failing != entry.import_reported;
        entry.import_reported = failing.clone();
        let seen = (is.object_ref(&()), is.metadata.resource_version.clone());
        self.streams.insert(key.clone(), seen);
        if let (true, Some(why)) = (report, failing) {
            let note = format!(
                "the last import of {}:{} failed: {why}; its candidate cannot change until an \
                 import succeeds",
                key.1, tags.candidate
            );
            warn!(namespace = %key.0, imagestream = %key.1, "{note}");
            self.publish(&key, "ImportFailing", note).await;
        }
        self.gauges();
    }

    /// A policy of `namespace` changed: which of its streams are governed, and how, may have
    /// too; its streams are listed and judged again (one list per policy change).
    async fn rejudge(&mut self, namespace: &str) {
        let api: Api<ImageStream> = Api::namespaced(self.client.clone(), namespace);
        match api.list(&Default::default()).await {
            Ok(list) => {
                for is in list.items {
                    self.seen(is).await;
                }
            }
            Err(e) => {
                warn!(namespace, error = %e, "cannot list the ImageStreams of a changed policy; they are judged at their next change")
            }
        }
    }

    /// A stream deleted, or nothing pending on it any more.
    fn gone(&mut self, key: &Key) {
        if self.entries.remove(key).is_some() {
            self.streams.remove(key);
            self.gauges();
        }
    }

    /// Pages every candidate that waited past the grace period for its validation to begin,
    /// and every validation that ended without a verdict (checked a grace after it began); each
    /// is re-driven where a governing ImagePromotion says so.
    async fn tick(&mut self, now: Timestamp) {
        let grace = k8s_openapi::jiff::SignedDuration::try_from(self.grace).unwrap_or_default();
        let due = |e: &Entry| e.since().is_some_and(|s| now.duration_since(s) > grace);
        let mut pages = Vec::new();
        let mut recheck = Vec::new();
        for (key, entry) in &self.entries {
            // Paged once; where it is re-driven, again at each attempt a grace apart.
            if !due(entry) || (entry.paged.is_some() && entry.redriven.is_none()) {
                continue;
            }
            match &entry.judged.standing {
                Standing::Waiting { digest, .. } => {
                    let note = format!(
                        "{}'s candidate {digest} has had no validation begin for it within {}s \
                         of its import{}: its change was not delivered, or its PipelineRun was \
                         never created (the listener's log, a ResourceQuota, admission)",
                        key.1,
                        self.grace.as_secs(),
                        if entry.redriven.is_some() {
                            " or its last re-drive"
                        } else {
                            ""
                        }
                    );
                    pages.push((
                        key.clone(),
                        entry.judged.standing.clone(),
                        WITHOUT_VERDICT,
                        note,
                    ));
                }
                Standing::Validating { digest, run } => {
                    recheck.push((
                        key.clone(),
                        entry.judged.standing.clone(),
                        digest.clone(),
                        run.clone(),
                    ));
                }
                Standing::Settled => {}
            }
        }
        for (key, standing, digest, run) in recheck {
            match self.lost(&key.0, &run).await {
                Ok(Some(why)) => {
                    let note = format!(
                        "{}'s candidate {digest} is marked Validating, but its validation ended \
                         without a verdict: {why}",
                        key.1
                    );
                    pages.push((key, standing, LOST, note));
                }
                // Still running: looked at again one grace period later.
                Ok(None) => {
                    if let Some(e) = self.entries.get_mut(&key) {
                        e.validating_since = Some(now);
                    }
                }
                Err(e) => {
                    warn!(namespace = %key.0, run = %run, error = %e, "cannot read the run of a validation; retrying")
                }
            }
        }
        for (key, standing, reason, note) in pages {
            let digest = match &standing {
                Standing::Waiting { digest, .. } | Standing::Validating { digest, .. } => {
                    digest.clone()
                }
                Standing::Settled => continue,
            };
            let note = match self.redrive(&key, &digest, now).await {
                Some(done) => format!("{note}; {done}"),
                None => format!("{note}; re-run its validation"),
            };
            warn!(namespace = %key.0, imagestream = %key.1, digest = %digest, reason, "{note}");
            if let Some(e) = self.entries.get_mut(&key) {
                e.paged = Some((standing, reason));
            }
            self.verdict(&key, Kind::Lost, &digest, reason, &note);
            self.publish(&key, reason, note).await;
        }
        self.gauges();
    }
}

/// A get where 404 is None.
pub(super) async fn get<K>(api: &Api<K>, name: &str) -> Result<Option<K>, kube::Error>
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    match api.get_opt(name).await {
        Err(e) if status_code(&e) == Some(404) => Ok(None),
        other => other,
    }
}
