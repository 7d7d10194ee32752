//! The EventListener: the same HTTP requests to the shipped EventListener on the real Triggers
//! sink and to the demo's stand-in (`imagegate_demo::standin::eventlistener`); the same answer,
//! the same PipelineRuns created (name, labels, annotations, spec) and none where none is. Both
//! ask the real `imagegate interceptor` (`scripts/realcluster up --tekton` runs it, ClusterInterceptor
//! `imagegate` of config/triggers/), which reads stream `jupyter` of the listener's namespace
//! (its candidate at digest `a`) and its ImagePromotion: only that candidate's event creates a
//! PipelineRun, whatever the others' headers and bodies say.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use http::{HeaderMap, HeaderValue};
use imagegate::api::parse_go_duration;
use imagegate::source::change::{ChangeKind, TagChange};
use imagegate::source::deliver::{ContentMode, Encoded};
use imagegate::source::event::{self, EventSettings};
use imagegate_demo::standin;
use serde_json::{Value, json};

use super::super::cluster::{Kubectl, cluster, condition};
use super::{block_on, tekton_file};

const NS: &str = "tekton-diff-events";
/// The digest the stream's candidate tag points at.
const CANDIDATE: char = 'a';

/// One request and whether it should start a PipelineRun (pinned, so that both sides changing
/// alike fails too).
struct Case {
    name: &'static str,
    headers: HeaderMap,
    body: Vec<u8>,
    creates: bool,
}

fn change(kind: ChangeKind, namespace: &str, tag: &str, digest: char) -> TagChange {
    let digest = format!("sha256:{}", digest.to_string().repeat(64));
    TagChange {
        kind,
        namespace: namespace.into(),
        image_stream: "jupyter".into(),
        image_stream_uid: "8c1c4a4e-0000-4000-8000-000000000001".into(),
        tag: tag.into(),
        docker_image_reference: Some(format!("quay.io/modh/jupyter@{digest}")),
        digest: Some(digest),
        previous_digest: None,
        generation: 1,
        time: Some("2026-12-01T10:00:00Z".into()),
        reason: None,
        message: None,
    }
}

/// The request `imagegate source` sends for `change`: its event, encoded as it encodes it.
fn sent(change: &TagChange, mode: ContentMode) -> (HeaderMap, Vec<u8>) {
    let settings = EventSettings::new("https://imagegate.dev/schemas/").unwrap();
    let event = event::tag_event(change, &settings, chrono::Utc::now());
    let wire = Encoded::new(event, mode).unwrap();
    (wire.headers().clone(), wire.body().to_vec())
}

fn case(name: &'static str, (headers, body): (HeaderMap, Vec<u8>), creates: bool) -> Case {
    Case {
        name,
        headers,
        body,
        creates,
    }
}

/// The candidate's event with another id and `body` instead of its data.
fn with_body(id: &str, body: &[u8]) -> (HeaderMap, Vec<u8>) {
    let (mut headers, _) = sent(
        &change(ChangeKind::Updated, NS, "candidate", 'f'),
        ContentMode::Binary,
    );
    headers.insert("ce-id", HeaderValue::from_str(id).unwrap());
    (headers, body.to_vec())
}

/// The candidate's event with its data edited by `edit`, and another id.
fn with_data(id: &str, edit: impl FnOnce(&mut Value)) -> (HeaderMap, Vec<u8>) {
    let (_, body) = sent(
        &change(ChangeKind::Updated, NS, "candidate", CANDIDATE),
        ContentMode::Binary,
    );
    let mut data: Value = serde_json::from_slice(&body).unwrap();
    edit(&mut data);
    with_body(id, data.to_string().as_bytes())
}

fn cases() -> Vec<Case> {
    use ChangeKind::*;
    let binary = |c: TagChange| sent(&c, ContentMode::Binary);
    // Headers a sender other than the source wrote by hand: the filter checks no signature
    // (tekton/440's NetworkPolicy decides who may send at all), so they pass like the source's.
    let mut forged = HeaderMap::new();
    for (k, v) in [
        ("ce-specversion", "1.0"),
        ("ce-id", "0000000000000000000000000000000000000f0f"),
        ("ce-type", "dev.imagegate.imagestreamtag.updated"),
        ("ce-source", "/somebody/else"),
        ("ce-imagetag", "candidate"),
        ("ce-namespace", NS),
        ("content-type", "application/json"),
    ] {
        forged.insert(k, HeaderValue::from_static(v));
    }
    // A digest of the forger's choice, for the stream's candidate tag.
    let forged_body = json!({"namespace": NS, "imageStream": "jupyter", "tag": "candidate",
        "digest": format!("sha256:{}", "0".repeat(64))});
    // The candidate's own data, under an id of the sender's choice.
    let (_, genuine) = sent(
        &change(Updated, NS, "candidate", CANDIDATE),
        ContentMode::Binary,
    );
    vec![
        case(
            "the candidate tag updated",
            binary(change(Updated, NS, "candidate", CANDIDATE)),
            true,
        ),
        case(
            "the served tag updated",
            binary(change(Updated, NS, "latest", 'b')),
            false,
        ),
        case(
            "another namespace's candidate",
            binary(change(Updated, "team-b", "candidate", 'c')),
            false,
        ),
        case(
            "the candidate tag deleted",
            binary(change(Deleted, NS, "candidate", 'd')),
            false,
        ),
        case(
            "an import failed",
            binary(change(ImportFailed, NS, "candidate", '1')),
            false,
        ),
        case(
            "the candidate in structured mode",
            sent(
                &change(Updated, NS, "candidate", CANDIDATE),
                ContentMode::Structured,
            ),
            false,
        ),
        case(
            "a body that is not JSON",
            with_body("0000000000000000000000000000000000000003", b"{not json"),
            false,
        ),
        case(
            "a body that is a JSON list",
            with_body("0000000000000000000000000000000000000004", b"[1, 2]"),
            false,
        ),
        // The interceptor reads the body and the API; the binding reads what it passed on.
        case(
            "data without the tag",
            with_data("0000000000000000000000000000000000000005", |d| {
                d.as_object_mut().unwrap().remove("tag");
            }),
            false,
        ),
        case(
            "data without the digest (no default)",
            with_data("0000000000000000000000000000000000000006", |d| {
                d.as_object_mut().unwrap().remove("digest");
            }),
            false,
        ),
        case(
            "data with a number for the digest",
            with_data("0000000000000000000000000000000000000007", |d| {
                d["digest"] = json!(7)
            }),
            false,
        ),
        case(
            "headers of the candidate, a body of another tag",
            with_data("0000000000000000000000000000000000000008", |d| {
                d["tag"] = json!("latest")
            }),
            false,
        ),
        // The run's name is keyed by the interceptor, not the sender's id: a copy of the
        // candidate's event under another id names the same PipelineRun (one run, not two).
        case(
            "the candidate's data under an id of the sender's choice",
            with_body("Not-A-Source-Id", &genuine),
            true,
        ),
        case(
            "a forged event, hand-written, for a digest of its choice",
            (forged, forged_body.to_string().into_bytes()),
            false,
        ),
    ]
}

/// What the comparison looks at: the name, what the template set (labels and annotations that
/// Triggers and Tekton do not add), and the spec.
fn rendered(run: &Value) -> Value {
    let ours = |m: &Value| -> Value {
        m.as_object()
            .map(|m| {
                m.iter()
                    .filter(|(k, _)| !k.contains("tekton.dev/"))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect()
            })
            .unwrap_or_default()
    };
    // A controller that updates the run writes its timeouts back as Go prints them (`1h` ->
    // `1h0m0s`; seen once Tekton Chains handles the runs): the same duration, compared as one.
    let mut spec = run["spec"].clone();
    if let Some(timeouts) = spec["timeouts"].as_object_mut() {
        for value in timeouts.values_mut() {
            if let Some(d) = value.as_str().and_then(|t| parse_go_duration(t).ok()) {
                *value = json!(format!("{}s", d.as_secs_f64()));
            }
        }
    }
    json!({
        "name": run["metadata"]["name"],
        "labels": ours(&run["metadata"]["labels"]),
        "annotations": ours(&run["metadata"]["annotations"]),
        "spec": spec,
    })
}

fn install(k: &Kubectl) {
    k.namespace(NS);
    // Stream jupyter, its candidate at CANDIDATE, governed by an ImagePromotion.
    let emu = super::super::contract::image_api();
    super::super::contract::block_on(async {
        emu.seed(json!({
            "apiVersion": "image.openshift.io/v1", "kind": "ImageStream",
            "metadata": {"name": "jupyter", "namespace": NS},
            "spec": {"tags": [{"name": "candidate", "from": {"kind": "DockerImage", "name": "quay.io/modh/jupyter:latest"}}]}
        }))
        .await;
        emu.import(
            NS,
            "jupyter",
            "candidate",
            &format!("sha256:{}", CANDIDATE.to_string().repeat(64)),
        )
        .await;
    });
    k.create(
        NS,
        &json!({"apiVersion": "imagegate.dev/v1alpha1", "kind": "ImagePromotion",
            "metadata": {"name": "jupyter"}, "spec": {"imageStream": "jupyter"}})
        .to_string(),
    );
    for doc in serde_norway::Deserializer::from_str(&tekton_file("400-eventlistener-rbac.yaml")) {
        let mut object: Value = serde::Deserialize::deserialize(doc).unwrap();
        if object["kind"] == "ClusterRoleBinding" {
            // One per namespace that runs the listener, as the file says.
            object["metadata"]["name"] = json!(format!("imagegate-eventlistener-{NS}"));
            object["subjects"][0]["namespace"] = json!(NS);
        }
        k.create(NS, &object.to_string());
    }
    for file in [
        "410-triggerbinding.yaml",
        "420-triggertemplate.yaml",
        "430-eventlistener.yaml",
    ] {
        k.create(NS, &tekton_file(file));
    }
}

/// A client of the shared cluster, as admin.
async fn admin_client() -> kube::Client {
    imagegate::runtime::tls::install_crypto_provider();
    let config = kube::config::Kubeconfig::read_from(&cluster().kubeconfig).unwrap();
    let config = kube::Config::from_custom_kubeconfig(config, &Default::default())
        .await
        .unwrap();
    kube::Client::try_from(config).unwrap()
}

fn post(url: &str, headers: &HeaderMap, body: &[u8]) -> u16 {
    block_on(async {
        reqwest::Client::new()
            .post(url)
            .headers(headers.clone())
            .body(body.to_vec())
            .send()
            .await
            .unwrap_or_else(|e| panic!("POST {url}: {e}"))
            .status()
            .as_u16()
    })
}

fn pipelineruns(k: &Kubectl) -> BTreeSet<String> {
    k.ok(&[
        "get",
        "pipelineruns",
        "-n",
        NS,
        "-o",
        "jsonpath={.items[*].metadata.name}",
    ])
    .split_whitespace()
    .map(str::to_string)
    .collect()
}

#[test]
fn the_eventlistener_stand_in_creates_the_pipelineruns_real_triggers_creates_from_the_same_requests()
 {
    let c = cluster();
    let k = c.kubectl();
    install(&k);
    let listener = k.wait(NS, "eventlistener/imagegate", 60, |el| {
        condition(el, "Ready").is_some_and(|r| r["status"] == "True")
    });
    let url = listener["status"]["address"]["url"]
        .as_str()
        .unwrap()
        .to_string();

    let interceptors = standin::ClusterInterceptors::new(block_on(admin_client()));
    let mut expected = Vec::new();
    for case in cases() {
        let standin = block_on(standin::eventlistener(
            &interceptors,
            NS,
            &case.headers,
            &case.body,
        ))
        .unwrap();
        assert_eq!(
            standin.created.len(),
            usize::from(case.creates),
            "{}: the stand-in: {standin:#?}",
            case.name
        );
        let status = post(&url, &case.headers, &case.body);
        assert_eq!(
            status, standin.status,
            "{}: the real sink answered {status}",
            case.name
        );
        // A copy of an event names the PipelineRun its first delivery made: that one stands.
        for r in standin.created {
            if !expected
                .iter()
                .any(|(_, e): &(&str, Value)| e["metadata"]["name"] == r["metadata"]["name"])
            {
                expected.push((case.name, r));
            }
        }
    }

    // Every run the stand-in created appears; then, a little later, nothing else has.
    let names: BTreeSet<String> = expected
        .iter()
        .map(|(_, r)| r["metadata"]["name"].as_str().unwrap().to_string())
        .collect();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !pipelineruns(&k).is_superset(&names) {
        assert!(
            Instant::now() < deadline,
            "real Triggers created {:?}, the stand-in {names:?}\n--- sink log:\n{}",
            pipelineruns(&k),
            c.log_tail(&format!("eventlistener-{NS}-imagegate"))
        );
        std::thread::sleep(Duration::from_millis(300));
    }
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(
        pipelineruns(&k),
        names,
        "--- sink log:\n{}",
        c.log_tail(&format!("eventlistener-{NS}-imagegate"))
    );
    for (case, standin) in expected {
        let name = standin["metadata"]["name"].as_str().unwrap();
        let real = k.get(NS, &format!("pipelinerun/{name}")).unwrap();
        assert_eq!(rendered(&real), rendered(&standin), "{case}");
    }
}
