//! The CEL interceptor over the source's real events (made by `imagegate::source::event` and put
//! on the wire by its delivery encoding) and over Triggers' documented examples.

use chrono::{DateTime, Utc};
use http::HeaderMap;
use imagegate::source::change::{ChangeKind, TagChange};
use imagegate::source::deliver::{ContentMode, Encoded};
use imagegate::source::event::{EventSettings, tag_event};
use serde_json::{Value, json};

use super::*;
use crate::tekton::{TektonFiles, list_at};

const DIGEST: &str = "sha256:1111111111111111111111111111111111111111111111111111111111111111";

/// The request the source's event for `kind` of `namespace/nb:tag` makes, sent in `mode`.
fn event(kind: ChangeKind, namespace: &str, tag: &str, mode: ContentMode) -> Request {
    let failed = kind == ChangeKind::ImportFailed;
    let change = TagChange {
        kind,
        namespace: namespace.to_string(),
        image_stream: "nb".to_string(),
        image_stream_uid: "5f0c1a2e-0000-4000-8000-000000000001".to_string(),
        tag: tag.to_string(),
        digest: Some(DIGEST.to_string()),
        previous_digest: None,
        docker_image_reference: Some(format!("quay.io/team/nb@{DIGEST}")),
        generation: 3,
        time: Some("2026-05-01T10:00:00Z".to_string()),
        reason: failed.then(|| "NotFound".to_string()),
        message: failed.then(|| "manifest unknown".to_string()),
    };
    let now: DateTime<Utc> = "2026-05-01T10:00:01Z".parse().unwrap();
    let wire = Encoded::new(tag_event(&change, &EventSettings::default(), now), mode).unwrap();
    let body: Value = serde_json::from_slice(wire.body()).unwrap();
    Request::from_http("/", wire.headers(), body)
}

fn binary(kind: ChangeKind, tag: &str) -> Request {
    event(kind, "notebooks", tag, ContentMode::Binary)
}

/// A request with these headers and body.
fn request(headers: &[(&str, &str)], body: Value) -> Request {
    let mut map = HeaderMap::new();
    for (name, value) in headers {
        map.append(
            http::HeaderName::try_from(*name).unwrap(),
            value.parse().unwrap(),
        );
    }
    Request::from_http("/", &map, body)
}

/// Every `filter` of a `cel` interceptor in the shipped EventListener.
fn shipped_filters() -> Vec<String> {
    let files = TektonFiles::embedded().unwrap();
    let el = files.single("EventListener").unwrap();
    let filters: Vec<String> = list_at(el, "/spec/triggers")
        .iter()
        .flat_map(|t| list_at(t, "/interceptors"))
        .filter(|i| i.pointer("/ref/name") == Some(&json!("cel")))
        .flat_map(|i| list_at(i, "/params"))
        .filter(|p| p["name"] == "filter")
        .map(|p| p["value"].as_str().unwrap().to_string())
        .collect();
    assert!(!filters.is_empty(), "the EventListener has a CEL filter");
    filters
}

fn eval(expr: &str, r: &Request) -> CelValue {
    Interceptor::new().unwrap().evaluate(expr, r).unwrap()
}

fn passes(expr: &str, r: &Request) -> bool {
    Interceptor::new().unwrap().filter(expr, r).unwrap()
}

#[test]
fn the_shipped_filter_passes_only_updates_sent_in_binary_mode_for_the_imagegate_interceptor_to_judge()
 {
    let cel = Interceptor::new().unwrap();
    for filter in shipped_filters() {
        let run = |r: &Request| cel.filter(&filter, r).unwrap();
        assert!(run(&binary(ChangeKind::Updated, "candidate")));
        // Which tag and which namespace is the imagegate interceptor's to judge, from the API
        // (tests/it/interceptor.rs): the filter only spares it the events that start nothing.
        assert!(run(&binary(ChangeKind::Updated, "latest")));
        assert!(!run(&binary(ChangeKind::Deleted, "candidate")));
        assert!(!run(&binary(ChangeKind::ImportFailed, "candidate")));
        assert!(
            !run(&event(
                ChangeKind::Updated,
                "notebooks",
                "candidate",
                ContentMode::Structured
            )),
            "a structured event has no ce- headers"
        );
    }
}

#[test]
fn the_filter_sees_the_headers_the_source_sends_under_canonical_names() {
    let r = binary(ChangeKind::Updated, "candidate");
    for name in [
        "Ce-Specversion",
        "Ce-Type",
        "Ce-Imagetag",
        "Ce-Id",
        "Ce-Namespace",
    ] {
        assert_eq!(
            eval(&format!("size(header['{name}'])"), &r),
            CelValue::Int(1),
            "{name}"
        );
    }
    assert_eq!(
        eval("header['Ce-Type'][0]", &r),
        CelValue::from("dev.imagegate.imagestreamtag.updated")
    );
    assert!(
        Interceptor::new()
            .unwrap()
            .evaluate("header['ce-type']", &r)
            .is_err(),
        "the map holds canonical names only, as Go's http.Header does"
    );
}

#[test]
fn header_match_and_canonical_follow_triggers_examples() {
    let r = request(
        &[
            ("x-test", "test-value"),
            ("X-GitHub-Event", "push"),
            ("x-tag", "one"),
            ("x-tag", "two"),
        ],
        json!({"value": "test"}),
    );
    assert!(passes("header.match('x-test', 'test-value')", &r));
    assert!(!passes("header.match('x-test', 'no-match')", &r));
    assert!(passes(
        "header.match('x-test', 'test-value') && body.value == 'test'",
        &r
    ));
    assert!(passes(
        "header.canonical('x-test') == 'test-value' && body.value == 'test'",
        &r
    ));
    assert!(passes("header.match('X-GitHub-Event', 'push')", &r));
    assert_eq!(
        eval("header.canonical('X-Github-Event')", &r),
        CelValue::from("push")
    );
    // Go's http.Header.Get: the first value, and "" for a header that is absent.
    assert!(passes("header.match('x-tag', 'one')", &r));
    assert!(!passes("header.match('x-tag', 'two')", &r));
    assert_eq!(eval("header.canonical('x-tag')", &r), CelValue::from("one"));
    assert_eq!(eval("header.canonical('x-absent')", &r), CelValue::from(""));
    assert!(passes("header.match('x-absent', '')", &r));

    let cel = Interceptor::new().unwrap();
    for wrong in [
        "body.match('testing', 'test')",
        "body.canonical('testing')",
        "header.match('x-test')",
        "header.match('x-test', 1)",
        "'x'.canonical('x-test') == ''",
    ] {
        let err = cel.evaluate(wrong, &r).unwrap_err();
        assert!(matches!(err, CelError::Evaluate { .. }), "{wrong}: {err}");
    }
}

#[test]
fn expressions_outside_the_old_subset_are_evaluated_as_cel() {
    let r = binary(ChangeKind::Updated, "candidate");
    for expr in [
        r#"body.digest.startsWith("sha256:") && size(header["Ce-Id"]) == 1"#,
        "body.tag.size() > 3",
        "body.dockerImageReference.endsWith(body.digest)",
        "body.imageStream in ['nb', 'other'] && !(body.tag in ['latest'])",
        "header.exists(h, h.startsWith('Ce-') && header[h][0] == 'candidate')",
        "body.created.matches('^2026-')",
        // JSON numbers are doubles, as in Triggers ("Notes on numbers" in its CEL docs).
        "type(body.generation) == double && int(body.generation) + 2 == 5",
        "requestURL == '/' && size(extensions) == 0",
        // The strings extension, as Triggers' docs show it.
        "'refs/heads/main'.split('/') == ['refs', 'heads', 'main']",
        "['refs', 'heads', 'main'].join('/') == 'refs/heads/main'",
    ] {
        assert!(passes(expr, &r), "{expr}");
    }
    assert!(!passes(r#"body.digest.startsWith("sha512:")"#, &r));
}

#[test]
fn operators_errors_and_results_that_are_no_bool() {
    let r = request(
        &[("ce-id", "abc")],
        json!({"imageStream": "nb", "tag": "candidate", "previousDigest": null}),
    );
    assert!(passes(
        "body.tag == 'candidate' && !(body.imageStream != \"nb\")",
        &r
    ));
    assert!(
        passes(
            "body.missing == 'x' || header.canonical('Ce-Id') == 'abc'",
            &r
        ),
        "an error on one side of || gives way to true on the other, as CEL says"
    );
    assert!(passes("body.previousDigest == null", &r));

    let cel = Interceptor::new().unwrap();
    let err = cel.filter("body.tag", &r).unwrap_err();
    assert!(
        matches!(err, CelError::NotBool { .. }),
        "a string is not a filter: {err}"
    );
    assert!(matches!(
        cel.filter("body.tag ==", &r).unwrap_err(),
        CelError::Parse { .. }
    ));
    for failing in [
        "body.missing == 'x'",
        "body.tag.nope()",
        "parseJSON(body.tag)",
    ] {
        let err = cel.filter(failing, &r).unwrap_err();
        assert!(matches!(err, CelError::Evaluate { .. }), "{failing}: {err}");
    }
}
