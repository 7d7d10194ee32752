//! `status` rows from streams, ImagePromotions and runs as the controller leaves them.

use serde_json::{Value, json};

use super::*;

const A: &str = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
const B: &str = "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

fn item(digest: &str) -> Value {
    json!({"created": "2026-01-01T00:00:00Z", "dockerImageReference": format!("quay.io/org/nb@{digest}"), "image": digest, "generation": 1})
}

/// A stream with `candidate` on `candidate` and `latest` on `served`, `latest` annotated.
fn stream(ns: &str, name: &str, served: &str, candidate: &str, annotations: Value) -> ImageStream {
    serde_json::from_value(json!({
        "apiVersion": "image.openshift.io/v1", "kind": "ImageStream",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"tags": [
            {"name": "candidate", "from": {"kind": "DockerImage", "name": "quay.io/org/nb:latest"},
             "importPolicy": {"scheduled": true}},
            {"name": "latest", "annotations": annotations, "from": {"kind": "ImageStreamImage", "name": format!("{name}@{served}")}}]},
        "status": {"tags": [
            {"tag": "candidate", "items": [item(candidate)],
             "conditions": [{"type": "ImportSuccess", "status": "False", "reason": "NotFound", "message": "gone", "generation": 2}]},
            {"tag": "latest", "items": [item(served)]}]}
    }))
    .unwrap()
}

fn promotion(ns: &str, name: &str, spec: Value) -> ImagePromotion {
    serde_json::from_value(json!({
        "apiVersion": "imagegate.dev/v1alpha1", "kind": "ImagePromotion",
        "metadata": {"name": name, "namespace": ns}, "spec": spec
    }))
    .unwrap()
}

fn run(ns: &str, name: &str, created: &str, params: Value, status: Value) -> CustomRun {
    serde_json::from_value(json!({
        "apiVersion": "tekton.dev/v1beta1", "kind": "CustomRun",
        "metadata": {"name": name, "namespace": ns, "creationTimestamp": created},
        "spec": {"customRef": {"apiVersion": "imagegate.dev/v1alpha1", "kind": "ImagePromotion", "name": "notebooks"},
                 "params": params},
        "status": status
    }))
    .unwrap()
}

fn failed_reject(name: &str, created: &str) -> CustomRun {
    run(
        "ds",
        name,
        created,
        json!([{"name": "imagestream", "value": "nb"}, {"name": "action", "value": "reject"}]),
        json!({"conditions": [{"type": "Succeeded", "status": "False", "reason": "Rejected", "message": "no"}],
               "completionTime": "2026-01-02T00:00:00Z",
               "extraFields": {"target": {"action": "reject", "imagestream": "nb", "candidateTag": "candidate", "servedTag": "latest", "digest": B}}}),
    )
}

#[test]
fn an_update_failed_stream_shows_its_marks_and_last_run_and_refuses() {
    let facts = Facts {
        streams: vec![stream(
            "ds",
            "nb",
            A,
            B,
            json!({
            "imagegate.dev/phase": "UpdateFailed", "imagegate.dev/candidate-digest": B,
            "imagegate.dev/message": "validation of B failed", "imagegate.dev/previous-digest": A}),
        )],
        promotions: vec![],
        runs: vec![
            failed_reject("older", "2026-01-01T00:00:00Z"),
            failed_reject("newer", "2026-01-01T00:05:00Z"),
        ],
    };
    let rows = rows(&facts);
    assert_eq!(rows.len(), 1);
    let r = &rows[0];
    assert_eq!(
        (
            r.namespace.as_str(),
            r.imagestream.as_str(),
            r.served_tag.as_str(),
            r.candidate_tag.as_str()
        ),
        ("ds", "nb", "latest", "candidate")
    );
    assert_eq!(
        (r.served_digest.as_deref(), r.candidate_digest.as_deref()),
        (Some(A), Some(B))
    );
    assert_eq!(r.phase.as_deref(), Some("UpdateFailed"));
    assert_eq!(r.phase_digest.as_deref(), Some(B));
    assert_eq!(r.previous_digest.as_deref(), Some(A));
    assert_eq!(r.import_failure.as_deref(), Some("NotFound: gone"));
    let last = r.last_run.as_ref().unwrap();
    assert_eq!(
        (last.name.as_str(), last.outcome(), last.action.as_str()),
        ("newer", "Rejected", "reject")
    );
    assert_eq!(
        last.since,
        Some(Time("2026-01-02T00:00:00Z".parse().unwrap()))
    );
    assert_eq!(verdict(&rows), Verdict::Refused);
}

#[test]
fn streams_are_gated_by_marks_promotions_and_runs_only() {
    let facts = Facts {
        streams: vec![
            stream(
                "ds",
                "marked",
                A,
                A,
                json!({"imagegate.dev/phase": "Promoted"}),
            ),
            stream("ds", "named", A, B, Value::Null),
            stream("team", "by-general", A, B, Value::Null),
            stream("other", "plain", A, B, Value::Null),
            stream("run", "by-run", A, B, Value::Null),
        ],
        promotions: vec![
            promotion(
                "ds",
                "own",
                json!({"imageStream": "named", "servedTag": "latest"}),
            ),
            promotion("team", "notebooks", json!({})),
        ],
        runs: vec![run(
            "run",
            "pending",
            "2026-01-01T00:00:00Z",
            json!([{"name": "imagestream", "value": "run/by-run"}, {"name": "action", "value": "rollback"}]),
            Value::Null,
        )],
    };
    let rows = rows(&facts);
    let names: Vec<(&str, &str)> = rows
        .iter()
        .map(|r| (r.namespace.as_str(), r.imagestream.as_str()))
        .collect();
    assert_eq!(
        names,
        [
            ("ds", "marked"),
            ("ds", "named"),
            ("run", "by-run"),
            ("team", "by-general")
        ]
    );
    assert_eq!(rows[1].phase, None);
    let pending = rows[2].last_run.as_ref().unwrap();
    assert_eq!(
        (pending.outcome(), pending.action.as_str()),
        ("Pending", "rollback")
    );
    assert_eq!(verdict(&rows), Verdict::Done);
}

#[test]
fn runs_of_other_custom_tasks_are_ignored() {
    let mut other = failed_reject("foreign", "2026-01-01T00:00:00Z");
    other.spec.custom_ref.as_mut().unwrap().kind = Some("Wait".into());
    let facts = Facts {
        streams: vec![stream("ds", "nb", A, B, Value::Null)],
        promotions: vec![],
        runs: vec![other],
    };
    assert!(rows(&facts).is_empty());
}

#[test]
fn a_candidate_the_dashboard_would_offer_shows_as_drift_and_refuses() {
    // Issue 34: a stream gated by hand, listed by the dashboard, its candidate tag not hidden.
    let mut is = stream("ds", "nb", A, B, json!(null));
    is.metadata.labels = Some(
        [(
            "opendatahub.io/notebook-image".to_string(),
            "true".to_string(),
        )]
        .into(),
    );
    let facts = Facts {
        streams: vec![is.clone()],
        promotions: vec![promotion("ds", "notebooks", json!({"imageStream": "nb"}))],
        runs: vec![],
    };
    let rows = rows(&facts);
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].drift, ["CandidateTagOffered"]);
    assert_eq!(verdict(&rows), Verdict::Refused);
    let table = crate::ops::render::render(
        &rows,
        crate::cli::ops::OutputFormat::Table,
        false,
        k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
    )
    .unwrap();
    assert!(table.contains("[CandidateTagOffered]"), "{table}");
    let json = crate::ops::render::render(
        &rows,
        crate::cli::ops::OutputFormat::Json,
        false,
        k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
    )
    .unwrap();
    assert!(json.contains(r#""drift": ["#), "{json}");

    // Hidden: in shape, nothing shown, nothing refused.
    is.spec.tags[0].annotations = Some(
        [(
            "opendatahub.io/image-tag-outdated".to_string(),
            "true".to_string(),
        )]
        .into(),
    );
    let rows = super::rows(&Facts {
        streams: vec![is],
        ..facts
    });
    assert!(rows[0].drift.is_empty());
    assert_eq!(verdict(&rows), Verdict::Done);
}

#[test]
fn a_served_tag_whose_import_did_not_land_says_so() {
    // Issue 33: with `promoteAs: DockerImage` the import controller imports the pin after the
    // promotion; on the real server a served tag that could not import kept serving the old
    // image while `status` said nothing of it.
    let mut is = stream("ds", "nb", A, B, json!({"imagegate.dev/phase": "Promoted"}));
    let pin = json!({"kind": "DockerImage", "name": format!("quay.io/org/nb@{B}")});
    is.spec.tags[1].from = Some(serde_json::from_value(pin).unwrap());
    let facts = |is: ImageStream| Facts {
        streams: vec![is],
        promotions: vec![promotion("ds", "notebooks", json!({"imageStream": "nb"}))],
        runs: vec![],
    };
    let got = rows(&facts(is.clone()));
    assert_eq!(got[0].served_import, Some(format!("pending {B}")));
    assert_eq!(
        verdict(&got),
        Verdict::Done,
        "an import under way is not a failure"
    );

    let mut failed = serde_json::to_value(&is).unwrap();
    failed["status"]["tags"][1]["conditions"] = json!([{"type": "ImportSuccess", "status": "False",
        "reason": "InternalError", "message": "http: server gave HTTP response to HTTPS client", "generation": 9}]);
    failed["spec"]["tags"][1]["generation"] = json!(9);
    let got = rows(&facts(serde_json::from_value(failed).unwrap()));
    assert_eq!(
        got[0].served_import.as_deref(),
        Some("failed (InternalError: http: server gave HTTP response to HTTPS client)")
    );
    assert_eq!(verdict(&got), Verdict::Refused);
    let table = crate::ops::render::render(
        &got,
        crate::cli::ops::OutputFormat::Table,
        false,
        k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
    )
    .unwrap();
    assert!(table.contains("[served import failed]"), "{table}");

    // The stream form is resolved in the write: nothing to say.
    let got = rows(&facts(stream("ds", "nb", A, B, json!(null))));
    assert_eq!(got[0].served_import, None);
}

fn real(name: &str) -> ImageStream {
    let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    let v: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    serde_json::from_value(v["object"].clone()).unwrap()
}

#[test]
fn the_real_servers_failed_served_import_is_shown_and_refuses() {
    // The real openshift-apiserver and import controller, recorded: the run said Promoted.
    let facts = |is| Facts {
        streams: vec![is],
        promotions: vec![promotion("notebooks", "nb", json!({"imageStream": "nb"}))],
        runs: vec![],
    };
    let got = rows(&facts(real(
        "real-openshift_nb_after-promote-as-dockerimage-insecure.json",
    )));
    let row = got.iter().find(|r| r.served_tag == "latest").unwrap();
    assert_eq!(row.phase.as_deref(), Some("Promoted"));
    let import = row.served_import.as_deref().unwrap_or_default();
    assert!(
        import.starts_with("failed (InternalError: ")
            && import.contains("server gave HTTP response to HTTPS client"),
        "{import}"
    );
    assert_eq!(verdict(&got), Verdict::Refused);
    // The same promotion to a registry it can read: imported at once, nothing to say.
    let got = rows(&facts(real(
        "real-openshift_nb_after-promote-as-dockerimage.json",
    )));
    let row = got.iter().find(|r| r.served_tag == "latest").unwrap();
    assert_eq!(row.served_import, None, "{row:?}");
}
