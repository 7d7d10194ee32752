//! The I/O of `imagegate adopt`: read the stream (and its gated copy), let [`super::plan`]
//! decide, make the writes it asks for, and say what happened; and `--check`, which lists the
//! adopted and governed streams ([`super::listing`]) and reports their [`super::check`] drifts.
//!
//! The write of a stream adopted in place is a `PUT` of the whole object carrying the
//! resourceVersion it was planned from: the API server refuses it (409) if anything changed in
//! between, and the stream is read and planned again. A JSON merge patch would replace
//! `spec.tags` as a whole (lists are not merged), which is exactly the wholesale edit that drops
//! tags; a strategic-merge patch could add the tags but not remove the served tag's `scheduled`
//! flag without a second form. The `PUT` carries every field as read, known to imagegate or not.

use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::Value;

use super::diff::unified;
use super::listing;
use super::plan::{self, Plan, Write, WriteKind};
use super::{Options, Summary};
use crate::api::ImageStream;
use crate::api::status_code;

/// How many times a write that conflicts with a concurrent change is planned again.
pub(crate) const ATTEMPTS: usize = 3;

/// Why `imagegate adopt` did not finish.
#[derive(Debug, thiserror::Error)]
pub(crate) enum AdoptError {
    /// The stream cannot be adopted, and why.
    #[error("cannot adopt ImageStream {stream}: {reason}")]
    Refused { stream: String, reason: String },
    /// The stream does not exist.
    #[error("ImageStream {stream} not found")]
    NotFound { stream: String },
    /// A read failed.
    #[error("cannot read ImageStream {stream}: {source}")]
    Read {
        stream: String,
        #[source]
        source: kube::Error,
    },
    /// A write failed.
    #[error("cannot write ImageStream {stream}: {source}")]
    Write {
        stream: String,
        #[source]
        source: kube::Error,
    },
    /// Every attempt met a concurrent change.
    #[error("ImageStream {stream} changed during each of {ATTEMPTS} attempts; run adopt again")]
    Conflicts { stream: String },
    /// A list the check reads failed (`ImageStreams`, `ImagePromotions`).
    #[error("cannot list {what} {scope}: {source}")]
    List {
        what: &'static str,
        scope: String,
        #[source]
        source: kube::Error,
    },
    /// `--check` found drifted streams.
    #[error("{drifted} of {checked} adopted or governed ImageStreams drifted from the gated shape")]
    Drifted { drifted: usize, checked: usize },
    /// Standard output could not be written.
    #[error("cannot write the output: {0}")]
    Output(#[from] std::io::Error),
}

/// How a successful adopt ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Done {
    /// The writes were made.
    Adopted,
    /// The stream was in the gated shape: nothing written.
    AlreadyAdopted,
    /// `--dry-run`: the diff printed, nothing written.
    DryRun,
}

/// The streams `--check` looks at.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Scope {
    /// One namespace.
    Namespace(String),
    /// Every namespace (`-A`).
    All,
}

fn streams(client: &Client, namespace: &str) -> Api<DynamicObject> {
    Api::namespaced_with(
        client.clone(),
        namespace,
        &ApiResource::erase::<ImageStream>(&()),
    )
}

async fn read(
    api: &Api<DynamicObject>,
    stream: &str,
    name: &str,
) -> Result<Option<Value>, AdoptError> {
    let found = api.get_opt(name).await.map_err(|source| AdoptError::Read {
        stream: stream.to_string(),
        source,
    })?;
    Ok(found.map(|o| serde_json::to_value(o).unwrap_or_default()))
}

/// Adopts `namespace/name` (or, with `dry_run`, prints what it would write), telling `out` what
/// it did.
pub(crate) async fn adopt(
    client: &Client,
    namespace: &str,
    name: &str,
    options: &Options,
    dry_run: bool,
    out: &mut dyn std::io::Write,
) -> Result<Done, AdoptError> {
    let api = streams(client, namespace);
    let stream = format!("{namespace}/{name}");
    for _ in 0..ATTEMPTS {
        let Some(current) = read(&api, &stream, name).await? else {
            return Err(AdoptError::NotFound { stream });
        };
        let copy = match plan::copy_name(&current, options) {
            Some(copy_name) => read(&api, &format!("{namespace}/{copy_name}"), &copy_name).await?,
            None => None,
        };
        let planned =
            plan::plan(&current, copy.as_ref(), options).map_err(|reason| AdoptError::Refused {
                stream: stream.clone(),
                reason,
            })?;
        let (writes, summary) = match planned {
            Plan::Adopted(summary) => {
                writeln!(
                    out,
                    "{}: already adopted (served tag {:?}, candidate tag {:?}); nothing written",
                    summary.gated, summary.served, summary.candidate
                )?;
                return Ok(Done::AlreadyAdopted);
            }
            Plan::Write(writes, summary) => (writes, summary),
        };
        if dry_run {
            for w in &writes {
                write!(out, "{}", unified(&w.target(), w.before.as_ref(), &w.after))?;
            }
            print_summary(out, &summary, "would adopt")?;
            writeln!(out, "dry run: nothing written")?;
            return Ok(Done::DryRun);
        }
        if write_all(&api, &writes).await? {
            print_summary(out, &summary, "adopted")?;
            return Ok(Done::Adopted);
        }
    }
    Err(AdoptError::Conflicts { stream })
}

/// Makes the writes in order; `false` when one met a concurrent change (plan again).
async fn write_all(api: &Api<DynamicObject>, writes: &[Write]) -> Result<bool, AdoptError> {
    for w in writes {
        let target = w.target();
        let name = w.after["metadata"]["name"].as_str().unwrap_or_default();
        let object = || -> DynamicObject {
            serde_json::from_value(w.after.clone()).expect("a planned stream is an object")
        };
        let written = match w.kind {
            WriteKind::Replace => api.replace(name, &PostParams::default(), &object()).await,
            WriteKind::Create => api.create(&PostParams::default(), &object()).await,
            WriteKind::HideOriginal => {
                api.patch(name, &PatchParams::default(), &Patch::Merge(w.hide_patch()))
                    .await
            }
        };
        match written {
            Ok(_) => tracing::info!(imagestream = %target, "adopt wrote the ImageStream"),
            Err(e) if status_code(&e) == Some(409) => return Ok(false),
            Err(source) => {
                return Err(AdoptError::Write {
                    stream: target,
                    source,
                });
            }
        }
    }
    Ok(true)
}

fn print_summary(out: &mut dyn std::io::Write, s: &Summary, verb: &str) -> Result<(), AdoptError> {
    writeln!(
        out,
        "{verb} {}: served tag {:?} pinned to {}; candidate tag {:?} (hidden) imports {} on a \
         schedule",
        s.gated, s.served, s.served_digest, s.candidate, s.candidate_from
    )?;
    if let Some((tag, digest)) = &s.previous {
        writeln!(out, "  previous tag {tag:?} keeps {digest} for a rollback")?;
    }
    for note in &s.notes {
        writeln!(out, "  note: {note}")?;
    }
    writeln!(
        out,
        "  pipeline: candidate-tag={} served-tag={} (the ImagePromotion's candidateTag/servedTag, \
         and the EventListener's ce-imagetag filter)",
        s.candidate, s.served
    )?;
    Ok(())
}

/// `--check`: every adopted or governed stream in `scope` in the gated shape, else each drift
/// reported and [`AdoptError::Drifted`].
pub(crate) async fn check(
    client: &Client,
    scope: &Scope,
    out: &mut dyn std::io::Write,
) -> Result<(), AdoptError> {
    let (namespaces, where_) = match scope {
        Scope::Namespace(ns) => (vec![ns.clone()], format!("in namespace {ns}")),
        Scope::All => (Vec::new(), "in all namespaces".to_string()),
    };
    let list = listing::check(client, &namespaces)
        .await
        .map_err(|e| AdoptError::List {
            what: e.what,
            scope: where_.clone(),
            source: e.source,
        })?;
    for d in &list.drifted {
        let stream = format!("{}/{}", d.namespace, d.name);
        for f in &d.found {
            writeln!(out, "{stream}: {}: {}", f.drift.reason(), f.message)?;
        }
        for line in &d.remedies {
            writeln!(out, "{stream}: {line}")?;
        }
    }
    let (drifted, checked) = (list.drifted.len(), list.checked);
    if drifted > 0 {
        return Err(AdoptError::Drifted { drifted, checked });
    }
    writeln!(
        out,
        "no drift: {checked} adopted or governed ImageStream(s) {where_} in the gated shape"
    )?;
    Ok(())
}
