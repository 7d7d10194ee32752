//! Event construction against the spec, the published schemas, the SDK's HTTP binding
//! and what Knative's ApiServerSource sends. Values come from a real ImageStream
//! (`../shared/reference/objects/ci-note_ansible-runner_imagestream_import-failed.yaml`).

use std::collections::{BTreeMap, BTreeSet};

use axum::http::{HeaderMap, HeaderValue, Request, header::CONTENT_TYPE};
use chrono::{DateTime, TimeZone, Utc};
use cloudevents::binding::http::{builder::adapter::to_response, to_event};
use cloudevents::event::{ExtensionValue, SpecVersion};
use cloudevents::{AttributesReader, Data, Event};
use serde_json::{Value, json};

use super::*;

const UID: &str = "ff02b090-c77d-441a-a60c-d5a26de66300";
const DIGEST: &str = "sha256:bd09ef403f2f90f2c6bd133d7533e939058903f69223c5f12557a49e3aed14bb";
const OLD_DIGEST: &str = "sha256:0a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f9";
const REF: &str = "docker.io/ansible/ansible-runner@sha256:bd09ef403f2f90f2c6bd133d7533e939058903f69223c5f12557a49e3aed14bb";
const MESSAGE: &str = "Internal error occurred: docker.io/ansible/ansible-runner:latest: toomanyrequests: You have reached your pull rate limit.";

const UPDATED_SCHEMA: &str = include_str!("../../../schemas/imagestreamtag-updated.json");
const DELETED_SCHEMA: &str = include_str!("../../../schemas/imagestreamtag-deleted.json");
const IMPORT_FAILED_SCHEMA: &str =
    include_str!("../../../schemas/imagestreamtag-importfailed.json");

fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 12, 1, 9, 30, 0).unwrap()
}

fn updated() -> TagChange {
    TagChange {
        kind: ChangeKind::Updated,
        namespace: "openshift".into(),
        image_stream: "ansible-runner".into(),
        image_stream_uid: UID.into(),
        tag: "latest".into(),
        digest: Some(DIGEST.into()),
        previous_digest: Some(OLD_DIGEST.into()),
        docker_image_reference: Some(REF.into()),
        generation: 3364,
        time: Some("2020-06-02T11:50:06Z".into()),
        reason: None,
        message: None,
    }
}

fn deleted() -> TagChange {
    TagChange {
        kind: ChangeKind::Deleted,
        previous_digest: None,
        time: None,
        ..updated()
    }
}

fn import_failed() -> TagChange {
    TagChange {
        kind: ChangeKind::ImportFailed,
        previous_digest: None,
        generation: 3365,
        time: Some("2021-06-03T16:24:42Z".into()),
        reason: Some("InternalError".into()),
        message: Some(MESSAGE.into()),
        ..updated()
    }
}

fn build(change: &TagChange) -> Event {
    tag_event(change, &EventSettings::default(), now())
}

fn json_data(event: &Event) -> Value {
    match event.data() {
        Some(Data::Json(value)) => value.clone(),
        other => panic!("expected JSON data, got {other:?}"),
    }
}

fn extensions(event: &Event) -> BTreeMap<String, String> {
    event
        .iter_extensions()
        .map(|(name, value)| match value {
            ExtensionValue::String(s) => (name.to_owned(), s.clone()),
            other => panic!("extension {name} is not a string: {other:?}"),
        })
        .collect()
}

fn strings(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

fn schema_for(kind: ChangeKind) -> Value {
    let text = match kind {
        ChangeKind::Updated => UPDATED_SCHEMA,
        ChangeKind::Deleted => DELETED_SCHEMA,
        ChangeKind::ImportFailed => IMPORT_FAILED_SCHEMA,
    };
    serde_json::from_str(text).unwrap()
}

/// The subset of JSON Schema 2020-12 the published schemas use, checked strictly: a keyword
/// this does not know is an error, so a schema cannot carry a constraint no test checks.
fn validate(schema: &Value, value: &Value, at: &str) -> Result<(), String> {
    const KNOWN: [&str; 9] = [
        "$schema",
        "$id",
        "title",
        "description",
        "type",
        "required",
        "properties",
        "additionalProperties",
        "format",
    ];
    let schema = schema
        .as_object()
        .ok_or(format!("{at}: schema is not an object"))?;
    if let Some(keyword) = schema.keys().find(|k| !KNOWN.contains(&k.as_str())) {
        return Err(format!("{at}: unsupported keyword {keyword}"));
    }
    let allowed: Vec<&str> = match &schema["type"] {
        Value::String(t) => vec![t.as_str()],
        Value::Array(ts) => ts.iter().filter_map(Value::as_str).collect(),
        other => return Err(format!("{at}: bad type {other}")),
    };
    let is = |t: &str| match t {
        "string" => value.is_string(),
        "integer" => value.is_i64() || value.is_u64(),
        "null" => value.is_null(),
        "object" => value.is_object(),
        _ => false,
    };
    if !allowed.iter().any(|t| is(t)) {
        return Err(format!("{at}: {value} is not of type {allowed:?}"));
    }
    if let (Some(Value::String(format)), Value::String(s)) = (schema.get("format"), value)
        && (format != "date-time" || DateTime::parse_from_rfc3339(s).is_err())
    {
        return Err(format!("{at}: {s:?} is not a {format}"));
    }
    let (Some(properties), Value::Object(object)) = (schema.get("properties"), value) else {
        return Ok(());
    };
    for required in schema["required"].as_array().into_iter().flatten() {
        let required = required.as_str().unwrap_or_default();
        if !object.contains_key(required) {
            return Err(format!("{at}: missing required property {required}"));
        }
    }
    for (name, member) in object {
        match properties.get(name) {
            Some(sub) => validate(sub, member, &format!("{at}.{name}"))?,
            None if schema.get("additionalProperties") == Some(&json!(false)) => {
                return Err(format!("{at}: additional property {name}"));
            }
            None => {}
        }
    }
    Ok(())
}

fn variants() -> Vec<TagChange> {
    vec![
        updated(),
        TagChange {
            previous_digest: None,
            ..updated()
        },
        deleted(),
        TagChange {
            digest: None,
            docker_image_reference: None,
            ..deleted()
        },
        import_failed(),
        TagChange {
            digest: None,
            docker_image_reference: None,
            ..import_failed()
        },
        TagChange {
            reason: None,
            message: None,
            time: None,
            ..import_failed()
        },
    ]
}

#[test]
fn ids_are_forty_lowercase_hex_characters() {
    for change in variants() {
        let id = event_id(&change);
        assert_eq!(id.len(), ID_LEN, "{id}");
        assert!(
            id.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)),
            "{id}"
        );
    }
}

#[test]
fn the_id_is_the_documented_sha256_of_netstrings() {
    // hashlib.sha256(b"21:imagegate-event-id-v2," b"36:dev.imagegate.imagestreamtag.updated,"
    // b"36:<uid>," b"9:openshift," b"14:ansible-runner," b"6:latest," b"71:<digest>,"
    // b"20:2020-06-02T11:50:06Z,").hexdigest()[:40], computed outside Rust.
    assert_eq!(
        event_id(&updated()),
        "0bb7eff254f4e6651b75594e596bb3798b656d66"
    );
}

#[test]
fn the_same_change_always_gets_the_same_id() {
    let change = updated();
    let restored: TagChange =
        serde_json::from_str(&serde_json::to_string(&change).unwrap()).unwrap();
    assert_eq!(event_id(&change), event_id(&restored));
    let later = now() + chrono::Duration::hours(5);
    let settings = EventSettings::default();
    assert_eq!(
        tag_event(&deleted(), &settings, now()).id(),
        tag_event(&deleted(), &settings, later).id()
    );
}

#[test]
fn every_input_of_the_id_changes_it() {
    let base = updated();
    let changes = [
        base.clone(),
        TagChange {
            kind: ChangeKind::Deleted,
            ..base.clone()
        },
        TagChange {
            kind: ChangeKind::ImportFailed,
            ..base.clone()
        },
        TagChange {
            image_stream_uid: "another-uid".into(),
            ..base.clone()
        },
        TagChange {
            namespace: "other".into(),
            ..base.clone()
        },
        TagChange {
            image_stream: "other".into(),
            ..base.clone()
        },
        TagChange {
            tag: "other".into(),
            ..base.clone()
        },
        TagChange {
            digest: Some(OLD_DIGEST.into()),
            ..base.clone()
        },
        TagChange {
            digest: None,
            ..base.clone()
        },
        TagChange {
            time: Some("2020-06-02T11:50:07Z".into()),
            ..base.clone()
        },
        TagChange {
            time: None,
            ..base.clone()
        },
        TagChange {
            kind: ChangeKind::Deleted,
            generation: 3365,
            ..base.clone()
        },
        // Field boundaries are unambiguous: moving a character between fields is another id.
        TagChange {
            namespace: "openshif".into(),
            image_stream: "tansible-runner".into(),
            ..base
        },
    ];
    let ids: BTreeSet<String> = changes.iter().map(event_id).collect();
    assert_eq!(ids.len(), changes.len());
}

#[test]
fn an_updated_event_is_known_by_its_created_not_by_a_generation_openshift_rewrites() {
    // A tag added to follow this one rewrites its items[0].generation (10 -> 14 on the real
    // server), `created` kept: the image sent again after a lost checkpoint has its first id.
    let first = updated();
    let rewritten = TagChange {
        generation: first.generation + 4,
        ..first.clone()
    };
    assert_eq!(event_id(&first), event_id(&rewritten));
    // Without `created`, the generation tells them apart, as for the other kinds.
    let (a, b) = (
        TagChange {
            time: None,
            ..first
        },
        TagChange {
            time: None,
            ..rewritten
        },
    );
    assert_ne!(event_id(&a), event_id(&b));
}

#[test]
fn fields_outside_the_identity_do_not_change_the_id() {
    let base = import_failed();
    let same = TagChange {
        previous_digest: Some(OLD_DIGEST.into()),
        docker_image_reference: None,
        time: None,
        reason: Some("NotFound".into()),
        message: None,
        ..base.clone()
    };
    assert_eq!(event_id(&base), event_id(&same));
}

#[test]
fn an_updated_event_carries_every_attribute_extension_and_data_field() {
    let event = build(&updated());
    assert_eq!(event.specversion(), SpecVersion::V10);
    assert_eq!(event.id(), event_id(&updated()));
    assert_eq!(event.ty(), "dev.imagegate.imagestreamtag.updated");
    assert_eq!(
        event.source(),
        "/apis/image.openshift.io/v1/namespaces/openshift/imagestreams/ansible-runner"
    );
    assert_eq!(event.subject(), Some("ansible-runner:latest"));
    assert_eq!(
        event.time(),
        Some(&Utc.with_ymd_and_hms(2020, 6, 2, 11, 50, 6).unwrap())
    );
    assert_eq!(event.datacontenttype(), Some("application/json"));
    assert_eq!(
        event.dataschema().map(|u| u.as_str()),
        Some("https://imagegate.dev/schemas/imagestreamtag-updated.json")
    );
    let want = strings(&[
        ("namespace", "openshift"),
        ("imagestream", "ansible-runner"),
        ("imagetag", "latest"),
        ("imagedigest", DIGEST),
    ]);
    assert_eq!(extensions(&event), want);
    let data = json!({
        "namespace": "openshift", "imageStream": "ansible-runner", "tag": "latest",
        "digest": DIGEST, "previousDigest": OLD_DIGEST, "dockerImageReference": REF,
        "generation": 3364, "created": "2020-06-02T11:50:06Z", "imageStreamUID": UID,
    });
    assert_eq!(json_data(&event), data);
}

#[test]
fn a_first_import_has_a_null_previous_digest() {
    let event = build(&TagChange {
        previous_digest: None,
        ..updated()
    });
    assert_eq!(json_data(&event)["previousDigest"], Value::Null);
}

#[test]
fn a_deleted_event_without_a_time_is_stamped_now_and_keeps_the_last_digest() {
    let event = build(&deleted());
    assert_eq!(event.ty(), "dev.imagegate.imagestreamtag.deleted");
    assert_eq!(event.time(), Some(&now()));
    assert_eq!(event.subject(), Some("ansible-runner:latest"));
    assert_eq!(
        event.dataschema().map(|u| u.as_str()),
        Some("https://imagegate.dev/schemas/imagestreamtag-deleted.json")
    );
    assert_eq!(extensions(&event)["imagedigest"], DIGEST);
    let data = json_data(&event);
    assert_eq!(data["created"], Value::Null);
    assert_eq!(data["digest"], DIGEST);
    assert!(data.get("reason").is_none());
}

#[test]
fn imagedigest_is_omitted_when_there_is_no_digest() {
    let event = build(&TagChange {
        digest: None,
        docker_image_reference: None,
        ..deleted()
    });
    let want = strings(&[
        ("namespace", "openshift"),
        ("imagestream", "ansible-runner"),
        ("imagetag", "latest"),
    ]);
    assert_eq!(extensions(&event), want);
    assert_eq!(json_data(&event)["digest"], Value::Null);
}

#[test]
fn an_unparsable_change_time_falls_back_to_now_and_stays_verbatim_in_data() {
    let event = build(&TagChange {
        time: Some("yesterday".into()),
        ..updated()
    });
    assert_eq!(event.time(), Some(&now()));
    assert_eq!(json_data(&event)["created"], "yesterday");
}

#[test]
fn an_importfailed_event_adds_reason_and_message_at_the_condition_time() {
    let event = build(&import_failed());
    assert_eq!(event.ty(), "dev.imagegate.imagestreamtag.importfailed");
    assert_eq!(
        event.time(),
        Some(&Utc.with_ymd_and_hms(2021, 6, 3, 16, 24, 42).unwrap())
    );
    assert_eq!(
        event.dataschema().map(|u| u.as_str()),
        Some("https://imagegate.dev/schemas/imagestreamtag-importfailed.json")
    );
    assert_eq!(extensions(&event)["imagedigest"], DIGEST);
    let data = json!({
        "namespace": "openshift", "imageStream": "ansible-runner", "tag": "latest",
        "digest": DIGEST, "previousDigest": null, "dockerImageReference": REF,
        "generation": 3365, "created": "2021-06-03T16:24:42Z", "imageStreamUID": UID,
        "reason": "InternalError", "message": MESSAGE,
    });
    assert_eq!(json_data(&event), data);
}

#[test]
fn event_data_validates_against_the_published_schemas() {
    for change in variants() {
        let data = json_data(&build(&change));
        validate(&schema_for(change.kind), &data, "data")
            .unwrap_or_else(|e| panic!("{:?}: {e}", change.kind));
    }
}

#[test]
fn the_schema_check_rejects_missing_extra_and_mistyped_properties() {
    let schema = schema_for(ChangeKind::Updated);
    let good = json_data(&build(&updated()));
    assert_eq!(validate(&schema, &good, "data"), Ok(()));
    let mut missing = good.clone();
    missing.as_object_mut().unwrap().remove("imageStreamUID");
    let mut extra = good.clone();
    extra["reason"] = json!("x");
    let mut mistyped = good.clone();
    mistyped["generation"] = json!("3364");
    let mut null_digest = good.clone();
    null_digest["digest"] = Value::Null;
    let mut bad_time = good;
    bad_time["created"] = json!("yesterday");
    for bad in [missing, extra, mistyped, null_digest, bad_time] {
        assert!(validate(&schema, &bad, "data").is_err(), "{bad}");
    }
}

#[test]
fn each_schema_is_draft_2020_12_with_the_default_dataschema_as_id() {
    let settings = EventSettings::default();
    for kind in KINDS {
        let schema = schema_for(kind);
        assert_eq!(
            schema["$schema"],
            "https://json-schema.org/draft/2020-12/schema"
        );
        assert_eq!(schema["$id"], settings.dataschema(kind));
        assert_eq!(schema["additionalProperties"], false);
        let properties: BTreeSet<&str> = schema["properties"]
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        let required: BTreeSet<&str> = schema["required"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(Value::as_str)
            .collect();
        assert_eq!(
            properties, required,
            "{kind:?}: every property is always present"
        );
    }
}

#[test]
fn the_dataschema_base_is_configurable_and_joined_with_one_slash() {
    let with = EventSettings::new("https://example.com/s/").unwrap();
    let without = EventSettings::new("https://example.com/s").unwrap();
    let want = "https://example.com/s/imagestreamtag-deleted.json";
    assert_eq!(with.dataschema(ChangeKind::Deleted), want);
    assert_eq!(without.dataschema(ChangeKind::Deleted), want);
    let event = tag_event(&deleted(), &without, now());
    assert_eq!(event.dataschema().map(|u| u.as_str()), Some(want));
}

#[test]
fn an_invalid_dataschema_base_is_rejected_and_never_breaks_an_event() {
    assert!(matches!(
        EventSettings::new("schemas/"),
        Err(EventConfigError::DataschemaBase { .. })
    ));
    let settings = EventSettings::unchecked("not a url");
    let event = tag_event(&updated(), &settings, now());
    assert_eq!(event.dataschema(), None);
    assert_eq!(event.id(), event_id(&updated()));
}

fn structured(event: &Event) -> (HeaderMap, Vec<u8>) {
    let mut headers = HeaderMap::new();
    headers.insert(
        CONTENT_TYPE,
        HeaderValue::from_static("application/cloudevents+json"),
    );
    (headers, serde_json::to_vec(event).unwrap())
}

/// Binary mode hands the data back as bytes; put it back as JSON to compare whole events.
fn with_json_data(mut event: Event) -> Event {
    let bytes = match event.data() {
        Some(Data::Binary(bytes)) => bytes.clone(),
        other => panic!("binary mode gives binary data, got {other:?}"),
    };
    event.set_data_unchecked(serde_json::from_slice::<Value>(&bytes).unwrap());
    event
}

#[test]
fn structured_mode_round_trips_through_the_sdk() {
    for change in variants() {
        let event = build(&change);
        let (headers, body) = structured(&event);
        let body_json: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(
            body_json["data"],
            json_data(&event),
            "data is JSON, not data_base64"
        );
        assert_eq!(to_event(&headers, body).unwrap(), event);
    }
}

#[test]
fn binary_mode_round_trips_through_the_sdk_request_binding() {
    for change in variants() {
        let event = build(&change);
        let request = Request::<Option<Vec<u8>>>::try_from(event.clone()).unwrap();
        let body = request.body().clone().unwrap();
        let back = to_event(request.headers(), body).unwrap();
        assert_eq!(with_json_data(back), event);
    }
}

#[tokio::test]
async fn binary_mode_round_trips_through_the_sdk_response_adapter() {
    let event = build(&import_failed());
    let response = to_response(event.clone()).unwrap();
    let headers = response.headers().clone();
    let body = axum::body::Body::new(response.into_body());
    let bytes = axum::body::to_bytes(body, usize::MAX).await.unwrap();
    let back = to_event(&headers, bytes.to_vec()).unwrap();
    assert_eq!(with_json_data(back), event);
}

#[test]
fn binary_mode_headers_are_what_eventlistener_bindings_read() {
    let request = Request::<Option<Vec<u8>>>::try_from(build(&updated())).unwrap();
    let header = |name: &str| request.headers()[name].to_str().unwrap().to_owned();
    assert_eq!(header("ce-specversion"), "1.0");
    assert_eq!(header("ce-type"), types::UPDATED);
    assert_eq!(header("ce-id"), "0bb7eff254f4e6651b75594e596bb3798b656d66");
    assert_eq!(header("ce-subject"), "ansible-runner:latest");
    assert_eq!(header("ce-namespace"), "openshift");
    assert_eq!(header("ce-imagestream"), "ansible-runner");
    assert_eq!(header("ce-imagetag"), "latest");
    assert_eq!(header("ce-imagedigest"), DIGEST);
    assert_eq!(header("content-type"), "application/json");
    // The SDK writes chrono's to_rfc3339(): "+00:00", where sdk-go writes "Z".
    assert_eq!(header("ce-time"), "2020-06-02T11:50:06+00:00");
    assert!(request.headers().get("ce-datacontenttype").is_none());
}

#[test]
fn overrides_add_and_replace_extensions_last() {
    let mut event = build(&updated());
    let overrides = json!({"extensions": {"cluster": "prod", "namespace": "overridden"}});
    apply_overrides(&mut event, &overrides).unwrap();
    let ext = extensions(&event);
    assert_eq!(ext["cluster"], "prod");
    assert_eq!(ext["namespace"], "overridden");
    assert_eq!(ext["imagetag"], "latest");
    let (headers, body) = structured(&event);
    assert_eq!(to_event(&headers, body).unwrap(), event);
}

#[test]
fn empty_overrides_change_nothing() {
    for overrides in [
        Value::Null,
        json!({}),
        json!({"extensions": {}}),
        json!({"extensions": null}),
    ] {
        let mut event = build(&updated());
        apply_overrides(&mut event, &overrides).unwrap();
        assert_eq!(event, build(&updated()), "{overrides}");
    }
}

#[test]
fn invalid_overrides_are_rejected_and_leave_the_event_untouched() {
    let cases = [
        json!("extensions"),
        json!({"extension": {"a": "b"}}),
        json!({"extensions": ["a"]}),
        json!({"extensions": {"ok": "fine", "Cluster": "prod"}}),
        json!({"extensions": {"my-ext": "x"}}),
        json!({"extensions": {"": "x"}}),
        json!({"extensions": {"type": "x"}}),
        json!({"extensions": {"id": "x"}}),
        json!({"extensions": {"data": "x"}}),
        json!({"extensions": {"count": 3}}),
        json!({"extensions": {"note": "line\nbreak"}}),
        json!({"extensions": {"note": "caf\u{e9}"}}),
    ];
    for overrides in cases {
        let mut event = build(&updated());
        let err = apply_overrides(&mut event, &overrides).unwrap_err();
        assert!(matches!(err, EventConfigError::Overrides(_)), "{overrides}");
        assert_eq!(event, build(&updated()), "{overrides}");
    }
}

#[test]
fn lengths_are_written_in_plain_decimal() {
    for n in [0, 7, 10, 71, 100, 1234, usize::MAX] {
        let mut out = Vec::new();
        push_decimal(&mut out, n);
        assert_eq!(String::from_utf8(out).unwrap(), n.to_string());
    }
}
