//! `status`: one row per gated stream, computed from what the controller records (pure, over
//! the objects [`Facts::read`] lists):
//!
//! - the served tag's `imagegate.dev/*` annotations (phase, message, previous digest),
//! - the ImagePromotions (which streams and tags are gated),
//! - the ImagePromotion CustomRuns (the last run per stream and served tag, and its outcome),
//! - the drift check's rule ([`crate::adopt::check::all_drift`]: a candidate tag the dashboard
//!   offers, one gone, a served tag no longer pinned).
//!
//! A stream is gated when its served tag carries `imagegate.dev/phase`, when an ImagePromotion
//! names it in `spec.imageStream`, when a run targeted it, or when an ImagePromotion of its
//! namespace names no stream and the stream has that ImagePromotion's candidate tag.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, ListParams};
use serde::Serialize;

use crate::adopt::check::all_drift;
use crate::api::imagestream::{KIND_DOCKER_IMAGE, digest_from_reference};
use crate::api::{CustomRun, ImageStream, status_code};
use crate::controller::crd::ImagePromotion;
use crate::controller::decide::annotation;
use crate::controller::params::{self, DEFAULT_CANDIDATE_TAG, DEFAULT_SERVED_TAG, names};
use crate::controller::policy::gates;
use crate::controller::status::{Target, phase};

use super::Verdict;

/// What `status` reads.
#[derive(Clone, Debug, Default)]
pub(crate) struct Facts {
    /// The ImageStreams.
    pub streams: Vec<ImageStream>,
    /// The ImagePromotions.
    pub promotions: Vec<ImagePromotion>,
    /// The CustomRuns (any; those of other custom tasks are ignored).
    pub runs: Vec<CustomRun>,
}

impl Facts {
    /// Lists the three in `namespace` (None: every namespace). A missing ImagePromotion or
    /// CustomRun CRD (404) reads as none of them.
    pub(crate) async fn read(
        client: &kube::Client,
        namespace: Option<&str>,
    ) -> Result<Facts, kube::Error> {
        fn api<K>(client: &kube::Client, ns: Option<&str>) -> Api<K>
        where
            K: kube::Resource<Scope = kube::core::NamespaceResourceScope>,
            K::DynamicType: Default,
        {
            match ns {
                Some(ns) => Api::namespaced(client.clone(), ns),
                None => Api::all(client.clone()),
            }
        }
        let lp = ListParams::default();
        let streams = api::<ImageStream>(client, namespace).list(&lp).await?.items;
        let promotions = match api::<ImagePromotion>(client, namespace).list(&lp).await {
            Ok(l) => l.items,
            Err(e) if status_code(&e) == Some(404) => Vec::new(),
            Err(e) => return Err(e),
        };
        let runs = match api::<CustomRun>(client, namespace).list(&lp).await {
            Ok(l) => l.items,
            Err(e) if status_code(&e) == Some(404) => Vec::new(),
            Err(e) => return Err(e),
        };
        Ok(Facts {
            streams,
            promotions,
            runs,
        })
    }
}

/// One gated stream (and served tag).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Row {
    /// The namespace.
    pub namespace: String,
    /// The ImageStream.
    pub imagestream: String,
    /// The served tag.
    pub served_tag: String,
    /// The candidate tag.
    pub candidate_tag: String,
    /// The digest the served tag serves.
    pub served_digest: Option<String>,
    /// The digest the candidate tag points at.
    pub candidate_digest: Option<String>,
    /// `imagegate.dev/previous-digest`: what a rollback returns to.
    pub previous_digest: Option<String>,
    /// `imagegate.dev/phase`: Validating, Promoted, UpdateFailed, RolledBack; None before any run.
    pub phase: Option<String>,
    /// `imagegate.dev/candidate-digest`: the digest the phase is about.
    pub phase_digest: Option<String>,
    /// `imagegate.dev/message`.
    pub message: Option<String>,
    /// The candidate tag's failed import (`reason: message`), if its last import failed.
    pub import_failure: Option<String>,
    /// The served tag's import where it does not serve what its spec pins (a `DockerImage`
    /// pin is imported after the promotion): `pending <digest>` until the import lands,
    /// `failed (<reason>: <message>)` when it failed and users still get the old image.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub served_import: Option<String>,
    /// The last run for this stream and served tag.
    pub last_run: Option<RunSummary>,
    /// How the stream drifted from the gated shape (the Event reasons of `imagegate adopt
    /// --check`, e.g. `CandidateTagOffered`: the dashboard offers the candidate); empty in shape.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub drift: Vec<String>,
}

/// A run, as `status` shows it.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RunSummary {
    /// The CustomRun's name.
    pub name: String,
    /// begin, promote, reject or rollback.
    pub action: String,
    /// `Succeeded`: True, False or Unknown; None before the controller reported.
    pub succeeded: Option<String>,
    /// The condition's reason (e.g. Promoted, Forbidden); None before the controller reported.
    pub reason: Option<String>,
    /// The condition's message.
    pub message: Option<String>,
    /// When it finished, else started, else was created.
    pub since: Option<Time>,
}

impl RunSummary {
    /// The outcome shown: the reason, `Pending` before the controller reported.
    pub(crate) fn outcome(&self) -> &str {
        self.reason.as_deref().unwrap_or("Pending")
    }
}

/// What a run targets: (stream, served tag, candidate tag, action).
fn run_target(
    run: &CustomRun,
    promotions: &[ImagePromotion],
) -> Option<(String, String, String, String)> {
    if let Some(t) = Target::recorded(run) {
        return Some((
            t.imagestream,
            t.served_tag,
            t.candidate_tag,
            t.action.as_str().to_string(),
        ));
    }
    let ns = run.metadata.namespace.as_deref().unwrap_or_default();
    let named = run.spec.custom_ref.as_ref().and_then(|r| r.name.as_deref());
    let spec = named.and_then(|n| {
        promotions
            .iter()
            .find(|p| {
                p.metadata.name.as_deref() == Some(n) && p.metadata.namespace.as_deref() == Some(ns)
            })
            .map(|p| &p.spec)
    });
    let param = |n: &str| run.param_str(n).map(str::trim).filter(|v| !v.is_empty());
    let stream = param(names::IMAGESTREAM)
        .map(|s| s.rsplit('/').next().unwrap_or(s).to_string())
        .or_else(|| spec.and_then(|s| s.image_stream.clone()))?;
    let served = param(names::SERVED_TAG)
        .map(str::to_string)
        .or_else(|| spec.and_then(|s| s.served_tag.clone()))
        .unwrap_or_else(|| DEFAULT_SERVED_TAG.into());
    let candidate = param(names::CANDIDATE_TAG)
        .map(str::to_string)
        .or_else(|| spec.and_then(|s| s.candidate_tag.clone()))
        .unwrap_or_else(|| DEFAULT_CANDIDATE_TAG.into());
    let action = param(names::ACTION).unwrap_or("promote").to_string();
    Some((stream, served, candidate, action))
}

fn summary(run: &CustomRun, action: String) -> RunSummary {
    let c = run.succeeded_condition();
    let status = run.status.as_ref();
    let since = status
        .and_then(|s| s.completion_time.as_ref().or(s.start_time.as_ref()))
        .or(run.metadata.creation_timestamp.as_ref())
        .cloned();
    RunSummary {
        name: run.metadata.name.clone().unwrap_or_default(),
        action,
        succeeded: c.map(|c| c.status.clone()),
        reason: c.and_then(|c| c.reason.clone()),
        message: c.and_then(|c| c.message.clone()),
        since,
    }
}

type Key = (String, String, String);

/// The rows, sorted by namespace, stream and served tag.
pub(crate) fn rows(facts: &Facts) -> Vec<Row> {
    // (ns, stream, served) -> candidate tag, first by precedence: a run's target, an
    // ImagePromotion naming the stream, the default.
    let mut gated: BTreeMap<Key, Option<String>> = BTreeMap::new();
    let mut last: BTreeMap<Key, (&CustomRun, RunSummary)> = BTreeMap::new();
    for run in facts.runs.iter().filter(|r| params::is_ours(r)) {
        let Some((stream, served, candidate, action)) = run_target(run, &facts.promotions) else {
            continue;
        };
        let ns = run.metadata.namespace.clone().unwrap_or_default();
        let key = (ns, stream, served);
        let newer = last.get(&key).is_none_or(|(prev, _)| {
            (
                prev.metadata.creation_timestamp.as_ref().map(|t| t.0),
                &prev.metadata.name,
            ) < (
                run.metadata.creation_timestamp.as_ref().map(|t| t.0),
                &run.metadata.name,
            )
        });
        if newer {
            gated.insert(key.clone(), Some(candidate));
            last.insert(key, (run, summary(run, action)));
        }
    }
    for stream in &facts.streams {
        let ns = stream.metadata.namespace.clone().unwrap_or_default();
        let name = stream.metadata.name.clone().unwrap_or_default();
        for p in facts
            .promotions
            .iter()
            .filter(|p| p.metadata.namespace.as_deref() == Some(ns.as_str()))
        {
            let served = p.spec.served_tag_or_default().to_string();
            let candidate = p.spec.candidate_tag_or_default().to_string();
            if gates(&p.spec, &ns, stream) {
                gated
                    .entry((ns.clone(), name.clone(), served))
                    .or_insert(Some(candidate));
            }
        }
        for tag in &stream.spec.tags {
            let marked = tag
                .annotations
                .as_ref()
                .is_some_and(|a| a.contains_key(annotation::PHASE));
            if marked {
                gated
                    .entry((ns.clone(), name.clone(), tag.name.clone()))
                    .or_insert(None);
            }
        }
    }
    let streams: BTreeMap<(String, String), &ImageStream> = facts
        .streams
        .iter()
        .map(|s| {
            (
                (
                    s.metadata.namespace.clone().unwrap_or_default(),
                    s.metadata.name.clone().unwrap_or_default(),
                ),
                s,
            )
        })
        .collect();
    gated
        .into_iter()
        .filter_map(|((ns, name, served), candidate)| {
            let stream = streams.get(&(ns.clone(), name.clone()))?;
            let candidate = candidate.unwrap_or_else(|| DEFAULT_CANDIDATE_TAG.into());
            let last_run = last
                .remove(&(ns.clone(), name.clone(), served.clone()))
                .map(|(_, s)| s);
            let mut row = row(stream, ns, name, served, candidate, last_run);
            row.drift = all_drift(stream, &facts.promotions)
                .iter()
                .map(|f| f.drift.reason().to_string())
                .collect();
            Some(row)
        })
        .collect()
}

fn row(
    stream: &ImageStream,
    namespace: String,
    imagestream: String,
    served_tag: String,
    candidate_tag: String,
    last_run: Option<RunSummary>,
) -> Row {
    let annotations = stream
        .spec_tag(&served_tag)
        .and_then(|t| t.annotations.clone())
        .unwrap_or_default();
    let get = |k: &str| annotations.get(k).filter(|v| !v.is_empty()).cloned();
    Row {
        served_digest: stream.current_digest(&served_tag).map(str::to_string),
        candidate_digest: stream.current_digest(&candidate_tag).map(str::to_string),
        previous_digest: get(annotation::PREVIOUS_DIGEST),
        phase: get(annotation::PHASE),
        phase_digest: get(annotation::CANDIDATE_DIGEST),
        message: get(annotation::MESSAGE),
        import_failure: stream.import_failure(&candidate_tag).map(|c| {
            format!(
                "{}: {}",
                c.reason.clone().unwrap_or_default(),
                c.message.clone().unwrap_or_default()
            )
        }),
        served_import: served_import(stream, &served_tag),
        namespace,
        imagestream,
        served_tag,
        candidate_tag,
        last_run,
        drift: Vec::new(),
    }
}

/// The served tag's import, where it does not serve what its spec pins (see [`Row`]).
fn served_import(stream: &ImageStream, served: &str) -> Option<String> {
    if let Some(c) = stream.import_failure(served) {
        return Some(format!(
            "failed ({}: {})",
            c.reason.clone().unwrap_or_default(),
            c.message.clone().unwrap_or_default()
        ));
    }
    let from = stream.spec_tag(served)?.from.as_ref()?;
    if from.kind.as_deref() != Some(KIND_DOCKER_IMAGE) {
        return None;
    }
    let pinned = digest_from_reference(from.name.as_deref()?)?;
    (stream.current_digest(served) != Some(pinned)).then(|| format!("pending {pinned}"))
}

/// Refused (exit 3) when any row is UpdateFailed, drifted (a candidate the dashboard offers, a
/// candidate tag gone, a served tag no longer pinned), or its served tag's import failed.
pub(crate) fn verdict(rows: &[Row]) -> Verdict {
    if rows.iter().any(|r| {
        r.phase.as_deref() == Some(phase::UPDATE_FAILED)
            || !r.drift.is_empty()
            || r.served_import
                .as_deref()
                .is_some_and(|i| i.starts_with("failed"))
    }) {
        Verdict::Refused
    } else {
        Verdict::Done
    }
}

#[cfg(test)]
mod tests;
