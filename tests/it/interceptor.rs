//! `imagegate interceptor`, the real binary against the emulator: the TLS it serves is the one
//! it published in its ClusterInterceptor's caBundle; a governed stream's current candidate is
//! passed with the API's values and a keyed run id; every forged or stale event is refused and
//! counted; and through the EventListener stand-in (the demo's, which runs tekton/430 as
//! Triggers does), a forged event creates no PipelineRun while the genuine one does.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use base64::Engine;
use http::{HeaderMap, HeaderValue};
use imagegate_demo::standin::{self, ClusterInterceptors};
use kube::Api;
use kube::api::{ApiResource, DynamicObject};
use serde_json::{Value, json};

use crate::support::controller::{A, B, C};
use crate::support::process::Process;
use crate::support::{EmulatorServer, free_port, wait_ready, within};

struct Running {
    emu: EmulatorServer,
    url: String,
    http: reqwest::Client,
    admin: u16,
    _process: Process,
    _dir: tempfile::TempDir,
}

fn cluster_interceptors() -> ApiResource {
    ApiResource {
        group: "triggers.tekton.dev".into(),
        version: "v1alpha1".into(),
        api_version: "triggers.tekton.dev/v1alpha1".into(),
        kind: "ClusterInterceptor".into(),
        plural: "clusterinterceptors".into(),
    }
}

/// The emulator with stream `ds/nb` (served A, candidate B), ImagePromotion `gov` governing it,
/// ClusterInterceptor `imagegate` (config/triggers/, its URL on this machine) and the interceptor.
async fn start() -> Running {
    let emu = EmulatorServer::start().await;
    emu.seed_str("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: imagegate-system\n")
        .await;
    emu.seed_str(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/config/300-imagepromotion-crd.yaml"
        ))
        .unwrap(),
    )
    .await;
    emu.seed(imagegate_emulator::tekton::clusterinterceptor_crd())
        .await;
    emu.seed(imagegate_emulator::tekton::pipelinerun_crd())
        .await;
    emu.seed_promotion_stream("ds", A, B).await;
    emu.seed(json!({
        "apiVersion": "imagegate.dev/v1alpha1", "kind": "ImagePromotion",
        "metadata": {"name": "gov", "namespace": "ds"}, "spec": {"imageStream": "nb"}
    }))
    .await;
    let port = free_port();
    let file = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/config/triggers/400-interceptor.yaml"
    ))
    .unwrap();
    let mut ci: Value = serde_norway::Deserializer::from_str(&file)
        .map(|d| serde::Deserialize::deserialize(d).unwrap())
        .find(|o: &Value| o["kind"] == "ClusterInterceptor")
        .unwrap();
    ci["spec"]["clientConfig"] = json!({"url": format!("https://localhost:{port}/")});
    emu.seed(ci).await;

    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    emu.write_kubeconfig(
        &kubeconfig,
        "system:serviceaccount:imagegate-system:imagegate-interceptor",
    );
    let admin = free_port();
    let mut command = Command::new(env!("CARGO_BIN_EXE_imagegate"));
    command
        .args([
            "--log-format",
            "json",
            "interceptor",
            "--tls-name",
            "localhost",
        ])
        .arg("--addr")
        .arg(format!("127.0.0.1:{port}"))
        .arg("--admin-addr")
        .arg(format!("127.0.0.1:{admin}"))
        .env("KUBECONFIG", &kubeconfig)
        .env("POD_NAMESPACE", "imagegate-system")
        .env("RUST_LOG", "info");
    let process = Process::start(format!("imagegate interceptor (port {port})"), command);
    wait_ready(admin).await;

    // Trust only what the ClusterInterceptor's caBundle says, as the EventListener does.
    let api: Api<DynamicObject> = Api::all_with(emu.client(), &cluster_interceptors());
    let ci = api.get("imagegate").await.unwrap();
    let bundle = ci.data["spec"]["clientConfig"]["caBundle"]
        .as_str()
        .expect("the interceptor wrote its CA into the caBundle");
    let pem = base64::engine::general_purpose::STANDARD
        .decode(bundle)
        .unwrap();
    let mut http = reqwest::Client::builder().tls_built_in_root_certs(false);
    for cert in reqwest::Certificate::from_pem_bundle(&pem).unwrap() {
        http = http.add_root_certificate(cert);
    }
    Running {
        emu,
        url: format!("https://localhost:{port}/"),
        http: http.build().unwrap(),
        admin,
        _process: process,
        _dir: dir,
    }
}

/// An InterceptorRequest as Triggers sends it for a binary-mode `updated` event of `data`, for
/// a Trigger of namespace `trigger_ns`.
fn request(id: &str, data: Value, trigger_ns: &str) -> Value {
    json!({
        "body": data.to_string(),
        "header": {
            "Ce-Specversion": ["1.0"],
            "Ce-Type": ["dev.imagegate.imagestreamtag.updated"],
            "Ce-Id": [id],
            "Content-Type": ["application/json"],
        },
        "context": {"event_url": "/", "event_id": "e1", "trigger_id": format!("namespaces/{trigger_ns}/triggers/candidate-updated")}
    })
}

fn data(ns: &str, tag: &str, digest: &str) -> Value {
    json!({"namespace": ns, "imageStream": "nb", "tag": tag, "digest": digest})
}

async fn ask(r: &Running, body: &Value) -> Value {
    r.http
        .post(&r.url)
        .json(body)
        .send()
        .await
        .unwrap()
        .error_for_status()
        .unwrap()
        .json()
        .await
        .unwrap()
}

async fn counter(admin: u16, series: &str) -> f64 {
    let text = reqwest::get(format!("http://127.0.0.1:{admin}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {series} in\n{text}"))
}

#[tokio::test]
async fn only_the_current_candidate_of_a_governed_stream_passes_with_the_apis_values() {
    let r = start().await;
    let passed = ask(&r, &request("id-1", data("ds", "candidate", B), "ds")).await;
    assert_eq!(passed["continue"], true, "{passed}");
    let ext = &passed["extensions"]["imagegate"];
    assert_eq!(ext["namespace"], "ds");
    assert_eq!(ext["imageStream"], "nb");
    assert_eq!(ext["tag"], "candidate");
    assert_eq!(ext["digest"], B);
    let run_id = ext["runId"].as_str().unwrap().to_string();
    assert_eq!(run_id.len(), 40);
    // Another delivery of the change, with another id (a forged copy): the same run id, so the
    // API server refuses the second PipelineRun.
    let again = ask(&r, &request("id-2", data("ds", "candidate", B), "ds")).await;
    assert_eq!(again["extensions"]["imagegate"]["runId"], run_id.as_str());

    let refused = [
        // The served tag's digest, under the served tag: promote what is served (F-4).
        (data("ds", "latest", A), "ds", "not_candidate_tag"),
        // A digest the candidate tag does not point at.
        (data("ds", "candidate", C), "ds", "not_current"),
        (data("ds", "candidate", A), "ds", "not_current"),
        // The stream of another namespace than the listener's.
        (data("ds", "candidate", B), "team-b", "other_namespace"),
        // A stream that does not exist, and one nothing governs.
        (
            json!({"namespace": "ds", "imageStream": "gone", "tag": "candidate", "digest": B}),
            "ds",
            "no_stream",
        ),
    ];
    for (d, ns, reason) in &refused {
        let answer = ask(&r, &request("forged", d.clone(), ns)).await;
        assert_eq!(answer["continue"], false, "{d} via {ns}: {answer}");
        assert!(answer.get("extensions").is_none(), "{answer}");
        assert!(
            answer["status"]["message"]
                .as_str()
                .is_some_and(|m| !m.is_empty()),
            "{answer}"
        );
        let _ = reason;
    }
    // Not even a CloudEvent.
    let junk = ask(
        &r,
        &json!({"body": "{}", "header": {}, "context": {"trigger_id": "namespaces/ds/triggers/t"}}),
    )
    .await;
    assert_eq!(junk["continue"], false);

    let admin = r.admin;
    let series = |v: &str, reason: &str| {
        format!("imagegate_interceptor_events_total{{verdict=\"{v}\",reason=\"{reason}\"}}")
    };
    assert_eq!(counter(admin, &series("passed", "")).await, 2.0);
    assert_eq!(
        counter(admin, &series("refused", "not_candidate_tag")).await,
        1.0
    );
    assert_eq!(counter(admin, &series("refused", "not_current")).await, 2.0);
    assert_eq!(
        counter(admin, &series("refused", "other_namespace")).await,
        1.0
    );
    assert_eq!(counter(admin, &series("refused", "no_stream")).await, 1.0);
    assert_eq!(counter(admin, &series("refused", "malformed")).await, 1.0);

    // The candidate moves on: the event of the old one is stale now.
    r.emu.import("ds", "nb", "candidate", C).await;
    within("B is no longer passed", Duration::from_secs(5), || async {
        ask(&r, &request("id-1", data("ds", "candidate", B), "ds")).await["continue"] == false
    })
    .await;
    let c = ask(&r, &request("id-3", data("ds", "candidate", C), "ds")).await;
    assert_eq!(c["continue"], true);
    assert_ne!(c["extensions"]["imagegate"]["runId"], run_id.as_str());
    // The candidate imports what is served already (what `imagegate adopt`'s new candidate tag
    // does at once on OpenShift): current, but nothing to validate.
    r.emu.import("ds", "nb", "candidate", A).await;
    within("A is the candidate", Duration::from_secs(5), || async {
        let answer = ask(&r, &request("id-4", data("ds", "candidate", A), "ds")).await;
        answer["status"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("already serves"))
    })
    .await;
    let served = ask(&r, &request("id-5", data("ds", "candidate", A), "ds")).await;
    assert_eq!(served["continue"], false, "{served}");
    assert!(counter(admin, &series("refused", "already_served")).await >= 2.0);
    // config/triggers/'s RBAC against what it did, both ways: every request allowed, every
    // grant used (or marked unused-in-tests with why).
    let mut policy = crate::support::rbac::Policy::default();
    let file = concat!(env!("CARGO_MANIFEST_DIR"), "/config/triggers/200-rbac.yaml");
    policy.add(
        "triggers/200-rbac.yaml",
        &std::fs::read_to_string(file).unwrap(),
    );
    assert!(
        policy.convention_problems().is_empty(),
        "{:?}",
        policy.convention_problems()
    );
    let user = "system:serviceaccount:imagegate-system:imagegate-interceptor";
    let audit = crate::support::rbac::audit(&policy, &r.emu.requests().await, user, user);
    assert!(audit.requests > 0);
    let problems = [audit.denied, audit.unused, audit.stale_markers].concat();
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The candidate's event as `imagegate source` sends it, with `edit` applied to its data.
fn event(id: &str, data: Value) -> (HeaderMap, Vec<u8>) {
    let mut h = HeaderMap::new();
    for (k, v) in [
        ("ce-specversion", "1.0"),
        ("ce-type", "dev.imagegate.imagestreamtag.updated"),
        (
            "ce-source",
            "/apis/image.openshift.io/v1/namespaces/ds/imagestreams/nb",
        ),
        ("content-type", "application/json"),
    ] {
        h.insert(k, HeaderValue::from_static(v));
    }
    h.insert("ce-id", HeaderValue::from_str(id).unwrap());
    (h, data.to_string().into_bytes())
}

#[tokio::test]
async fn a_forged_event_through_the_eventlistener_creates_no_pipelinerun_and_the_genuine_one_does()
{
    let r = start().await;
    let interceptors = ClusterInterceptors::new(r.emu.client());
    for (what, d) in [
        ("the served tag", data("ds", "latest", A)),
        (
            "a digest of the forger's choice",
            data("ds", "candidate", C),
        ),
        ("another namespace's stream", data("team-b", "candidate", B)),
    ] {
        let (h, body) = event("0000000000000000000000000000000000000f0f", d);
        let answer = standin::eventlistener(&interceptors, "ds", &h, &body)
            .await
            .unwrap();
        assert_eq!(
            answer.status, 202,
            "{what}: Triggers answers 202 all the same"
        );
        assert!(answer.created.is_empty(), "{what}: {answer:#?}");
        assert!(
            answer
                .not_created
                .iter()
                .any(|w| w.contains("refused by interceptor imagegate")),
            "{what}: {answer:#?}"
        );
    }
    let (h, body) = event(
        "1111111111111111111111111111111111111111",
        data("ds", "candidate", B),
    );
    let answer = standin::eventlistener(&interceptors, "ds", &h, &body)
        .await
        .unwrap();
    assert_eq!(answer.created.len(), 1, "{answer:#?}");
    let run = &answer.created[0];
    let name = run["metadata"]["name"].as_str().unwrap();
    assert!(
        name.starts_with("imagegate-") && !name.contains("1111"),
        "{name}: keyed, not the event's id"
    );
    let params = run["spec"]["params"].as_array().unwrap();
    let param = |n: &str| params.iter().find(|p| p["name"] == n).unwrap()["value"].clone();
    assert_eq!(param("imagestream"), "ds/nb");
    assert_eq!(param("digest"), B);
    let _ = Path::new("");
}
