//! The status an ImageStreamSource should have, as pure functions of what the reconciler found
//! ([`Facts`]) and the clock: `SinkProvided` from the sink resolution, `SufficientPermissions`
//! from the reviews, `Ready` from both (its reason and message those of the first one not
//! True, as Knative's condition sets do), `sinkUri`/`sinkCACerts`, and the `ceAttributes` of the
//! mode. A condition keeps its `lastTransitionTime` while its status does not change, so an
//! unchanged source gives an identical status and nothing is written
//! ([`same_ignoring_timestamps`]).

use chrono::{DateTime, SecondsFormat, Utc};

use crate::adapter::crd::status::{CeAttributes, Condition, condition, reason};
use crate::adapter::crd::{ImageStreamSourceStatus, Mode};
use crate::adapter::permissions::Verdict;
use crate::adapter::sink::resolve::{Resolved, Unresolved};
use crate::source::event::types;

/// What the reconciler found out about a source.
#[derive(Clone, Debug, PartialEq)]
pub struct Facts {
    /// The `metadata.generation` the facts are about.
    pub generation: Option<i64>,
    /// A contradiction in the spec (for `Ready=False InvalidSpec`); the rest is then not asked.
    pub invalid: Option<String>,
    /// How the sink resolved.
    pub sink: Option<Result<Resolved, Unresolved>>,
    /// What the permission reviews said; None: they could not be asked.
    pub permissions: Option<Verdict>,
    /// The mode.
    pub mode: Mode,
    /// The API server's URL (the `source` of the resource and reference modes' events).
    pub api_server_url: String,
    /// Whether the first list of the namespaces it selects is recorded (what the source's
    /// pipeline said when it was observed); None: not known here, and not held against it.
    /// `Ready` waits for it: a change made after `Ready=True` is then a change, sent, never
    /// part of the state a first start records silently.
    pub listed: Option<bool>,
    /// Why the source's checkpoint cannot be served (the multi-tenant adapter: past its cap);
    /// `Ready` is then False, whatever else holds.
    pub checkpoint: Option<String>,
}

/// The `type` and `source` of the events of `mode` (no source in mode imagestreamtag, where it
/// is per ImageStream).
pub fn ce_attributes(mode: Mode, api_server_url: &str) -> Vec<CeAttributes> {
    let (list, source): (&[&str], Option<&str>) = match mode {
        Mode::ImageStreamTag => (
            &[types::UPDATED, types::DELETED, types::IMPORT_FAILED],
            None,
        ),
        Mode::Resource => (
            &[
                types::RESOURCE_ADD,
                types::RESOURCE_UPDATE,
                types::RESOURCE_DELETE,
            ],
            Some(api_server_url),
        ),
        Mode::Reference => (
            &[types::REF_ADD, types::REF_UPDATE, types::REF_DELETE],
            Some(api_server_url),
        ),
    };
    list.iter()
        .map(|ty| CeAttributes {
            r#type: (*ty).to_owned(),
            source: source.filter(|s| !s.is_empty()).map(str::to_owned),
        })
        .collect()
}

/// The status `facts` give, keeping `before`'s transition times and delivery counters.
pub fn desired(
    before: Option<&ImageStreamSourceStatus>,
    facts: &Facts,
    now: DateTime<Utc>,
) -> ImageStreamSourceStatus {
    let (sink, permitted) = if let Some(why) = &facts.invalid {
        let unknown = |what: &str| {
            (
                "Unknown",
                reason::INVALID_SPEC,
                format!("not checked: {what} waits for a valid spec ({why})"),
            )
        };
        (unknown("the sink"), unknown("the permissions"))
    } else {
        (
            sink_condition(&facts.sink),
            permissions_condition(&facts.permissions),
        )
    };
    let ready = if let Some(why) = &facts.invalid {
        ("False", reason::INVALID_SPEC, why.clone())
    } else {
        [&sink, &permitted]
            .into_iter()
            .find(|c| c.0 != "True")
            .map(|c| {
                (
                    if c.0 == "False" { "False" } else { "Unknown" },
                    c.1,
                    c.2.clone(),
                )
            })
            .unwrap_or(("True", reason::READY, String::new()))
    };
    let ready = match (&facts.checkpoint, &facts.invalid) {
        (Some(why), None) => ("False", reason::CHECKPOINT_TOO_LARGE, why.clone()),
        _ => ready,
    };
    let ready = match (ready.0, facts.listed) {
        ("True", Some(false)) => (
            "Unknown",
            reason::LISTING,
            "listing the namespaces it selects; changes made from then on are sent once that \
             list is recorded"
                .to_string(),
        ),
        _ => ready,
    };
    let resolved = match &facts.sink {
        Some(Ok(resolved)) if facts.invalid.is_none() => Some(resolved),
        _ => None,
    };
    let old = |ty: &str| before.and_then(|b| b.conditions.iter().find(|c| c.r#type == ty));
    let make = |ty: &str, (status, why, message): (&str, &str, String)| {
        let kept = old(ty)
            .filter(|c| c.status == status)
            .and_then(|c| c.last_transition_time.clone());
        Condition {
            r#type: ty.to_owned(),
            status: status.to_owned(),
            reason: Some(why.to_owned()),
            message: Some(message).filter(|m| !m.is_empty()),
            last_transition_time: Some(
                kept.unwrap_or_else(|| now.to_rfc3339_opts(SecondsFormat::Secs, true)),
            ),
            severity: None,
        }
    };
    ImageStreamSourceStatus {
        observed_generation: facts.generation,
        conditions: vec![
            make(condition::READY, ready),
            make(condition::SINK_PROVIDED, sink),
            make(condition::SUFFICIENT_PERMISSIONS, permitted),
        ],
        sink_uri: resolved.map(|r| r.url.clone()),
        sink_ca_certs: resolved.and_then(|r| r.ca_certs.clone()),
        ce_attributes: ce_attributes(facts.mode, &facts.api_server_url),
        deliveries: before.and_then(|b| b.deliveries.clone()),
    }
}

fn sink_condition(
    sink: &Option<Result<Resolved, Unresolved>>,
) -> (&'static str, &'static str, String) {
    match sink {
        Some(Ok(resolved)) => (
            "True",
            reason::SINK_RESOLVED,
            format!("events go to {}", resolved.url),
        ),
        Some(Err(unresolved)) => ("False", unresolved.reason, unresolved.message.clone()),
        None => (
            "Unknown",
            reason::SINK_NOT_FOUND,
            "the sink has not been resolved yet".into(),
        ),
    }
}

fn permissions_condition(verdict: &Option<Verdict>) -> (&'static str, &'static str, String) {
    match verdict {
        Some(v) if v.sufficient => ("True", v.reason, String::new()),
        Some(v) => ("False", v.reason, v.message.clone()),
        None => (
            "Unknown",
            reason::PERMISSIONS_UNCHECKED,
            "the SubjectAccessReviews could not be asked; retrying".into(),
        ),
    }
}

/// Whether two statuses differ only in condition transition times.
pub fn same_ignoring_timestamps(a: &ImageStreamSourceStatus, b: &ImageStreamSourceStatus) -> bool {
    fn strip(s: &ImageStreamSourceStatus) -> ImageStreamSourceStatus {
        let mut s = s.clone();
        for c in &mut s.conditions {
            c.last_transition_time = None;
        }
        s
    }
    strip(a) == strip(b)
}

#[cfg(test)]
mod tests;
