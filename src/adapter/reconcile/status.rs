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
pub(crate) struct Facts {
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
pub(crate) fn ce_attributes(mode: Mode, api_server_url: &str) -> Vec<CeAttributes> {
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
pub(crate) fn desired(
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
pub(crate) fn same_ignoring_timestamps(
    a: &ImageStreamSourceStatus,
    b: &ImageStreamSourceStatus,
) -> bool {
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
mod tests {
    //! The desired status of an ImageStreamSource, per fact: each condition, Ready's reason, the
    //! sink fields, the ceAttributes per mode, and transition times kept across reconciles.

    use chrono::TimeZone;

    use super::*;

    fn at(minute: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 12, 1, 10, minute, 0).unwrap()
    }

    fn resolved() -> Resolved {
        Resolved {
            url: "http://el-imagegate.ds.svc.cluster.local:8080".into(),
            ca_certs: None,
            audience: None,
        }
    }

    fn permitted() -> Verdict {
        Verdict {
            sufficient: true,
            reason: reason::PERMITTED,
            message: String::new(),
        }
    }

    fn facts() -> Facts {
        Facts {
            generation: Some(3),
            invalid: None,
            sink: Some(Ok(resolved())),
            permissions: Some(permitted()),
            mode: Mode::ImageStreamTag,
            api_server_url: "https://172.30.0.1:443".into(),
            listed: None,
            checkpoint: None,
        }
    }

    #[test]
    fn a_checkpoint_past_its_cap_is_not_ready_whatever_else_holds() {
        let too_large = Facts {
            checkpoint: Some("the checkpoint holds more than its cap".into()),
            listed: Some(true),
            ..facts()
        };
        let s = desired(None, &too_large, at(0));
        assert_eq!(
            cond(&s, condition::READY),
            (
                "False",
                reason::CHECKPOINT_TOO_LARGE,
                "the checkpoint holds more than its cap"
            )
        );
        assert_eq!(
            cond(&s, condition::SINK_PROVIDED).0,
            "True",
            "the sink still resolved"
        );
        let invalid = Facts {
            invalid: Some("spec.namespaces has 101 entries".into()),
            ..too_large
        };
        assert_eq!(
            cond(&desired(None, &invalid, at(0)), condition::READY).1,
            reason::INVALID_SPEC,
            "an invalid spec says so first"
        );
    }

    fn cond<'a>(s: &'a ImageStreamSourceStatus, ty: &str) -> (&'a str, &'a str, &'a str) {
        let c = s.conditions.iter().find(|c| c.r#type == ty).unwrap();
        (
            c.status.as_str(),
            c.reason.as_deref().unwrap_or(""),
            c.message.as_deref().unwrap_or(""),
        )
    }

    #[test]
    fn it_is_ready_only_once_its_first_list_is_recorded() {
        let listing = Facts {
            listed: Some(false),
            ..facts()
        };
        let s = desired(None, &listing, at(0));
        let (status, why, message) = cond(&s, condition::READY);
        assert_eq!((status, why), ("Unknown", reason::LISTING));
        assert!(
            message.starts_with("listing the namespaces it selects"),
            "{message}"
        );
        assert_eq!(cond(&s, condition::SINK_PROVIDED).0, "True");
        let listed = Facts {
            listed: Some(true),
            ..facts()
        };
        assert_eq!(
            cond(&desired(None, &listed, at(0)), condition::READY).0,
            "True"
        );
        // A reason not to be ready comes first: listing is not what is wrong.
        let mut refused = listing.clone();
        refused.permissions = None;
        assert_eq!(
            cond(&desired(None, &refused, at(0)), condition::READY).1,
            reason::PERMISSIONS_UNCHECKED
        );
    }

    #[test]
    fn a_resolved_sink_and_sufficient_permissions_make_it_ready() {
        let s = desired(None, &facts(), at(0));
        assert_eq!(cond(&s, condition::READY), ("True", reason::READY, ""));
        assert_eq!(cond(&s, condition::SINK_PROVIDED).0, "True");
        assert_eq!(
            cond(&s, condition::SUFFICIENT_PERMISSIONS),
            ("True", reason::PERMITTED, "")
        );
        assert_eq!(
            s.sink_uri.as_deref(),
            Some("http://el-imagegate.ds.svc.cluster.local:8080")
        );
        assert_eq!(s.observed_generation, Some(3));
        assert!(
            s.conditions
                .iter()
                .all(|c| c.last_transition_time.as_deref() == Some("2026-12-01T10:00:00Z"))
        );
    }

    #[test]
    fn an_unresolved_sink_is_not_ready_with_its_reason_and_no_sink_uri() {
        let mut f = facts();
        f.sink = Some(Err(Unresolved {
            reason: reason::SINK_NOT_FOUND,
            message: "no Broker ds/default".into(),
        }));
        let s = desired(None, &f, at(0));
        assert_eq!(
            cond(&s, condition::SINK_PROVIDED),
            ("False", reason::SINK_NOT_FOUND, "no Broker ds/default")
        );
        assert_eq!(
            cond(&s, condition::READY),
            ("False", reason::SINK_NOT_FOUND, "no Broker ds/default")
        );
        assert_eq!(s.sink_uri, None);
    }

    #[test]
    fn insufficient_permissions_are_not_ready_with_the_message() {
        let mut f = facts();
        f.permissions = Some(Verdict {
            sufficient: false,
            reason: reason::INSUFFICIENT_PERMISSIONS,
            message: "lacks list in \"ml\"".into(),
        });
        let s = desired(None, &f, at(0));
        assert_eq!(
            cond(&s, condition::READY),
            (
                "False",
                reason::INSUFFICIENT_PERMISSIONS,
                "lacks list in \"ml\""
            )
        );
        assert_eq!(
            cond(&s, condition::SINK_PROVIDED).0,
            "True",
            "the sink still resolved"
        );
        f.permissions = None;
        let s = desired(None, &f, at(0));
        assert_eq!(cond(&s, condition::READY).0, "Unknown");
        assert_eq!(
            cond(&s, condition::SUFFICIENT_PERMISSIONS).1,
            reason::PERMISSIONS_UNCHECKED
        );
    }

    #[test]
    fn an_invalid_spec_is_not_ready_and_nothing_else_is_claimed() {
        let mut f = facts();
        f.invalid = Some("set namespaces or namespaceSelector, not both".into());
        let s = desired(None, &f, at(0));
        assert_eq!(
            cond(&s, condition::READY),
            (
                "False",
                reason::INVALID_SPEC,
                "set namespaces or namespaceSelector, not both"
            )
        );
        assert_eq!(cond(&s, condition::SINK_PROVIDED).0, "Unknown");
        assert_eq!(s.sink_uri, None);
    }

    #[test]
    fn transition_times_move_only_with_the_status() {
        let first = desired(None, &facts(), at(0));
        let again = desired(Some(&first), &facts(), at(5));
        assert_eq!(
            again, first,
            "nothing changed: the same status, nothing to write"
        );
        let mut f = facts();
        f.sink = Some(Err(Unresolved {
            reason: reason::SINK_NOT_ADDRESSABLE,
            message: "no address".into(),
        }));
        let broken = desired(Some(&first), &f, at(9));
        let time = |s: &ImageStreamSourceStatus, ty: &str| {
            s.conditions
                .iter()
                .find(|c| c.r#type == ty)
                .unwrap()
                .last_transition_time
                .clone()
                .unwrap()
        };
        assert_eq!(
            time(&broken, condition::SINK_PROVIDED),
            "2026-12-01T10:09:00Z"
        );
        assert_eq!(
            time(&broken, condition::SUFFICIENT_PERMISSIONS),
            "2026-12-01T10:00:00Z"
        );
        assert!(!same_ignoring_timestamps(&first, &broken));
        let mut later = first.clone();
        later.conditions[0].last_transition_time = Some("2030-01-01T00:00:00Z".into());
        assert!(same_ignoring_timestamps(&first, &later));
    }

    #[test]
    fn ce_attributes_are_the_modes_types_with_the_api_server_as_source_where_fixed() {
        let url = "https://172.30.0.1:443";
        let tag = ce_attributes(Mode::ImageStreamTag, url);
        assert_eq!(
            tag.iter().map(|a| a.r#type.as_str()).collect::<Vec<_>>(),
            [types::UPDATED, types::DELETED, types::IMPORT_FAILED]
        );
        assert!(
            tag.iter().all(|a| a.source.is_none()),
            "per ImageStream: not one source"
        );
        let reference = ce_attributes(Mode::Reference, url);
        assert_eq!(
            reference[0],
            CeAttributes {
                r#type: types::REF_ADD.into(),
                source: Some(url.into())
            }
        );
        assert_eq!(
            ce_attributes(Mode::Resource, url)[2].r#type,
            types::RESOURCE_DELETE
        );
    }

    #[test]
    fn the_delivery_counters_are_kept() {
        let mut before = desired(None, &facts(), at(0));
        before.deliveries = Some(crate::adapter::crd::status::Deliveries {
            delivered: 7,
            ..Default::default()
        });
        let after = desired(Some(&before), &facts(), at(1));
        assert_eq!(after.deliveries.unwrap().delivered, 7);
    }
}
