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
