//! `imagegate receiver`, the real binary, with a real registry (CNCF Distribution) sending its
//! push notifications to it and the emulator's import controllers reading that registry: a push
//! moves the governed candidate tag in seconds while the scheduled import is 15 minutes away, an
//! ungoverned stream importing the same tag is left to its schedule, pushes within the minimum
//! interval become one import at its end, and a notification without the sender's secret, or
//! not a notification, imports nothing.

use std::process::Command;
use std::time::{Duration, Instant};

use imagegate_emulator::{Config, Imports};
use kube::api::{Api, DynamicObject, PostParams};
use kube::discovery::ApiResource;
use serde_json::json;

use crate::support::process::Process;
use crate::support::registry::Registry;
use crate::support::{EmulatorServer, free_port, wait_ready};

const TOKEN: &str = "a-registry-notification-token-0123";

struct World {
    emu: EmulatorServer,
    registry: Registry,
    url: String,
    admin: u16,
    _receiver: Process,
    _dir: tempfile::TempDir,
}

fn streams_resource() -> ApiResource {
    ApiResource {
        group: "image.openshift.io".into(),
        version: "v1".into(),
        api_version: "image.openshift.io/v1".into(),
        kind: "ImageStream".into(),
        plural: "imagestreams".into(),
    }
}

impl World {
    async fn start(min_interval: u64) -> World {
        Self::start_as(min_interval, "--distribution-secret-file").await
    }

    /// With the sender whose secret `flag` gives (the registry's own notifications reach the
    /// receiver only when that is `--distribution-secret-file`).
    async fn start_as(min_interval: u64, flag: &str) -> World {
        let port = free_port();
        let url = format!("http://127.0.0.1:{port}/v1/distribution");
        let registry = Registry::start_with_notifications(&url, TOKEN).await;
        // The scheduled import at OpenShift's 15 minutes: only a push can move a tag in a test.
        let emu = EmulatorServer::start_with(Config {
            imports: Imports {
                registries: vec![registry.host.clone()],
                ..Imports::default()
            },
            ..Config::default()
        })
        .await;
        emu.seed_str(
            &std::fs::read_to_string(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/config/300-imagepromotion-crd.yaml"
            ))
            .unwrap(),
        )
        .await;
        emu.seed_str("apiVersion: v1\nkind: Namespace\nmetadata: {name: ds}\n---\napiVersion: v1\nkind: Namespace\nmetadata: {name: free}\n")
            .await;
        emu.seed(json!({
            "apiVersion": "imagegate.dev/v1alpha1", "kind": "ImagePromotion",
            "metadata": {"name": "gov", "namespace": "ds"}, "spec": {}
        }))
        .await;
        let dir = tempfile::tempdir().unwrap();
        let kubeconfig = dir.path().join("kubeconfig");
        // Logged in as `receiver`: its requests are checked against config/receiver's RBAC
        // (`rbac::assert_config_allows`).
        emu.write_kubeconfig(&kubeconfig, "receiver");
        let secret = dir.path().join("distribution");
        std::fs::write(&secret, format!("{TOKEN}\n")).unwrap();
        let admin = free_port();
        let mut command = Command::new(env!("CARGO_BIN_EXE_imagegate"));
        command
            .args(["--log-format", "json", "receiver"])
            .arg("--addr")
            .arg(format!("127.0.0.1:{port}"))
            .arg("--admin-addr")
            .arg(format!("127.0.0.1:{admin}"))
            .arg(flag)
            .arg(&secret)
            .arg("--min-interval-seconds")
            .arg(min_interval.to_string())
            .env("KUBECONFIG", &kubeconfig)
            .env("RUST_LOG", "info");
        let receiver = Process::start(format!("imagegate receiver (port {port})"), command);
        wait_ready(admin).await;
        World {
            emu,
            registry,
            url,
            admin,
            _receiver: receiver,
            _dir: dir,
        }
    }

    /// Creates `ns/jupyter` whose candidate imports `jupyter:<tag>` from the registry.
    async fn stream(&self, ns: &str, tag: &str) {
        let from = format!("{}/jupyter:{tag}", self.registry.host);
        let body = json!({"apiVersion": "image.openshift.io/v1", "kind": "ImageStream",
            "metadata": {"name": "jupyter"},
            "spec": {"tags": [{"name": "candidate", "from": {"kind": "DockerImage", "name": from},
                               "importPolicy": {"scheduled": true, "insecure": true}}]}});
        let api: Api<DynamicObject> =
            Api::namespaced_with(self.emu.client(), ns, &streams_resource());
        api.create(
            &PostParams::default(),
            &serde_json::from_value(body).unwrap(),
        )
        .await
        .unwrap();
    }

    async fn candidate(&self, ns: &str) -> Option<String> {
        let api: Api<DynamicObject> =
            Api::namespaced_with(self.emu.client(), ns, &streams_resource());
        let is = serde_json::to_value(api.get("jupyter").await.unwrap()).unwrap();
        is["status"]["tags"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|t| t["tag"] == "candidate")
            .and_then(|t| t["items"][0]["image"].as_str())
            .map(str::to_string)
    }

    /// Waits until `ns/jupyter:candidate` is `digest`; how long that took.
    async fn until_candidate(&self, ns: &str, digest: &str, within: Duration) -> Duration {
        let start = Instant::now();
        loop {
            let now = self.candidate(ns).await;
            if now.as_deref() == Some(digest) {
                return start.elapsed();
            }
            assert!(
                start.elapsed() < within,
                "{ns}/jupyter:candidate is {now:?}, not {digest}, after {within:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The ImageStreamImports the receiver asked for in `ns`.
    async fn imports_asked(&self, ns: &str) -> usize {
        self.emu
            .requests()
            .await
            .iter()
            .filter(|r| {
                r.verb == "create"
                    && r.resource == "imagestreamimports"
                    && r.namespace == ns
                    && r.user == "receiver"
            })
            .count()
    }

    /// Waits until the receiver has accepted notifications naming `n` pushed tags, and a
    /// moment for the worker to have read them: a notification arrives after its push.
    async fn pushes_seen(&self, n: f64) {
        let series =
            "imagegate_receiver_pushes_total{sender=\"distribution\",outcome=\"accepted\"}";
        let start = Instant::now();
        while metric(&self.metrics().await, series) < n {
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "no notification of {n} push(es)"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }

    async fn metrics(&self) -> String {
        reqwest::get(format!("http://127.0.0.1:{}/metrics", self.admin))
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    }

    async fn post(&self, authorization: Option<&str>, body: Vec<u8>) -> u16 {
        self.post_to(&self.url, authorization, body).await
    }

    async fn post_to(&self, url: &str, authorization: Option<&str>, body: Vec<u8>) -> u16 {
        let mut req = reqwest::Client::new()
            .post(url)
            .header(
                "Content-Type",
                "application/vnd.docker.distribution.events.v2+json",
            )
            .body(body);
        if let Some(a) = authorization {
            req = req.header("Authorization", a);
        }
        req.send().await.unwrap().status().as_u16()
    }
}

fn metric(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {series} in:\n{text}"))
}

#[tokio::test]
async fn a_push_moves_the_governed_candidate_in_seconds_and_leaves_ungoverned_streams_alone() {
    let w = World::start(10).await;
    let first = w.registry.push("jupyter", "2026.1", "first").await;
    w.pushes_seen(1.0).await;
    w.stream("ds", "2026.1").await;
    w.stream("free", "2026.1").await;
    // Both imported at once when created, as OpenShift imports a new tag.
    w.until_candidate("ds", &first, Duration::from_secs(10))
        .await;
    w.until_candidate("free", &first, Duration::from_secs(10))
        .await;

    let second = w.registry.push("jupyter", "2026.1", "second").await;
    let took = w
        .until_candidate("ds", &second, Duration::from_secs(20))
        .await;
    assert!(took < Duration::from_secs(20), "{took:?}");
    assert_eq!(w.imports_asked("ds").await, 1, "one import for the push");
    // The ungoverned stream imports the same tag, and is left to its scheduled import.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(w.imports_asked("free").await, 0);
    assert_eq!(w.candidate("free").await.as_deref(), Some(first.as_str()));
    let m = w.metrics().await;
    assert_eq!(
        metric(&m, "imagegate_receiver_imports_total{outcome=\"changed\"}"),
        1.0
    );
    assert!(
        metric(
            &m,
            "imagegate_receiver_notifications_total{sender=\"distribution\",outcome=\"accepted\"}"
        ) >= 1.0
    );
    crate::support::rbac::assert_config_allows(&w.emu, "receiver").await;
}

#[tokio::test]
async fn pushes_within_the_minimum_interval_become_one_import_at_its_end() {
    let w = World::start(3).await;
    let first = w.registry.push("jupyter", "2026.1", "first").await;
    w.pushes_seen(1.0).await;
    w.stream("ds", "2026.1").await;
    w.until_candidate("ds", &first, Duration::from_secs(10))
        .await;
    let second = w.registry.push("jupyter", "2026.1", "second").await;
    w.until_candidate("ds", &second, Duration::from_secs(20))
        .await;
    let _third = w.registry.push("jupyter", "2026.1", "third").await;
    let fourth = w.registry.push("jupyter", "2026.1", "fourth").await;
    w.until_candidate("ds", &fourth, Duration::from_secs(20))
        .await;
    let m = w.metrics().await;
    assert!(
        metric(&m, "imagegate_receiver_imports_total{outcome=\"deferred\"}") >= 1.0,
        "{m}"
    );
    assert!(
        w.imports_asked("ds").await <= 3,
        "third and fourth were one import (or two, if the interval ended between them)"
    );
}

#[tokio::test]
async fn a_notification_without_the_secret_or_not_a_notification_imports_nothing() {
    let w = World::start(10).await;
    let first = w.registry.push("jupyter", "2026.1", "first").await;
    w.pushes_seen(1.0).await;
    w.stream("ds", "2026.1").await;
    w.until_candidate("ds", &first, Duration::from_secs(10))
        .await;
    let host = w.registry.host.clone();
    let forged = json!({"events": [{
        "action": "push",
        "target": {"mediaType": "application/vnd.oci.image.manifest.v1+json", "repository": "jupyter", "tag": "2026.1"},
        "request": {"host": host}
    }]})
    .to_string()
    .into_bytes();
    assert_eq!(w.post(None, forged.clone()).await, 401);
    assert_eq!(
        w.post(Some("Bearer not-the-token-at-all-000"), forged.clone())
            .await,
        401
    );
    assert_eq!(w.post(Some(&format!("Basic {TOKEN}")), forged).await, 401);
    let bearer = format!("Bearer {TOKEN}");
    assert_eq!(
        w.post(Some(&bearer), b"{\"events\": 3}".to_vec()).await,
        400
    );
    assert_eq!(w.post(Some(&bearer), vec![b' '; (1 << 20) + 1]).await, 413);
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(w.imports_asked("ds").await, 0);
    // With the secret but no push behind it: a nudge, never a digest; the import reads the
    // registry, which still serves the first image.
    assert_eq!(w.post(Some(&bearer), forged_again(&host)).await, 202);
    let start = Instant::now();
    while w.imports_asked("ds").await == 0 {
        assert!(start.elapsed() < Duration::from_secs(10), "no import asked");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(w.candidate("ds").await.as_deref(), Some(first.as_str()));
    let m = w.metrics().await;
    let series = |o: &str| {
        format!("imagegate_receiver_notifications_total{{sender=\"distribution\",outcome=\"{o}\"}}")
    };
    assert_eq!(metric(&m, &series("unauthorized")), 3.0, "{m}");
    assert_eq!(metric(&m, &series("malformed")), 1.0);
    assert_eq!(
        metric(
            &m,
            "imagegate_receiver_imports_total{outcome=\"unchanged\"}"
        ),
        1.0
    );
}

fn forged_again(host: &str) -> Vec<u8> {
    json!({"events": [{
        "action": "push",
        "target": {"mediaType": "application/vnd.oci.image.manifest.v1+json", "repository": "jupyter", "tag": "2026.1",
                   "digest": "sha256:0000000000000000000000000000000000000000000000000000000000000bad"},
        "request": {"host": host}
    }]})
    .to_string()
    .into_bytes()
}

#[tokio::test]
async fn a_harbor_push_webhook_moves_the_governed_candidate() {
    let w = World::start_as(10, "--harbor-secret-file").await;
    let first = w.registry.push("jupyter", "2026.1", "first").await;
    w.stream("ds", "2026.1").await;
    w.until_candidate("ds", &first, Duration::from_secs(10))
        .await;
    let second = w.registry.push("jupyter", "2026.1", "second").await;
    let harbor = w.url.replace("/v1/distribution", "/v1/harbor");
    // The registry's own notifications find no endpoint here: only Harbor's webhook is served.
    assert_eq!(
        w.post(Some(&format!("Bearer {TOKEN}")), b"{}".to_vec())
            .await,
        404
    );
    let webhook = json!({
        "type": "PUSH_ARTIFACT", "occur_at": 1765000000, "operator": "ci",
        "event_data": {
            "resources": [{"digest": second, "tag": "2026.1",
                           "resource_url": format!("{}/jupyter:2026.1", w.registry.host)}],
            "repository": {"name": "jupyter", "namespace": "library", "repo_full_name": "library/jupyter", "repo_type": "private"}
        }
    })
    .to_string()
    .into_bytes();
    assert_eq!(w.post_to(&harbor, None, webhook.clone()).await, 401);
    assert_eq!(
        w.post_to(&harbor, Some(&format!("Bearer {TOKEN}")), webhook)
            .await,
        202
    );
    w.until_candidate("ds", &second, Duration::from_secs(20))
        .await;
    let m = w.metrics().await;
    assert_eq!(
        metric(
            &m,
            "imagegate_receiver_pushes_total{sender=\"harbor\",outcome=\"accepted\"}"
        ),
        1.0
    );
    crate::support::rbac::assert_config_allows(&w.emu, "receiver").await;
}

#[tokio::test]
async fn a_github_package_event_moves_the_candidate_only_when_signed_with_the_secret() {
    let w = World::start_as(10, "--github-secret-file").await;
    let first = w.registry.push("jupyter", "2026.1", "first").await;
    w.stream("ds", "2026.1").await;
    w.until_candidate("ds", &first, Duration::from_secs(10))
        .await;
    let second = w.registry.push("jupyter", "2026.1", "second").await;
    let github = w.url.replace("/v1/distribution", "/v1/github");
    let event = json!({
        "action": "published",
        "package": {"name": "jupyter", "package_type": "CONTAINER", "owner": {"login": "platform"},
                    "package_version": {"package_url": format!("{}/jupyter:2026.1", w.registry.host),
                                        "container_metadata": {"tag": {"name": "2026.1", "digest": second}}}}
    })
    .to_string()
    .into_bytes();
    let sign = |body: &[u8], secret: &str| {
        let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, secret.as_bytes());
        let mac = ring::hmac::sign(&key, body);
        let hex: String = mac.as_ref().iter().map(|b| format!("{b:02x}")).collect();
        format!("sha256={hex}")
    };
    let post = |signature: Option<String>, event_name: &'static str, body: Vec<u8>| {
        let github = github.clone();
        async move {
            let mut req = reqwest::Client::new()
                .post(&github)
                .header("Content-Type", "application/json")
                .header("X-GitHub-Event", event_name)
                .body(body);
            if let Some(s) = signature {
                req = req.header("X-Hub-Signature-256", s);
            }
            req.send().await.unwrap().status().as_u16()
        }
    };
    // Unsigned, signed with another secret, or the Bearer secret instead of a signature: refused.
    assert_eq!(post(None, "package", event.clone()).await, 401);
    let wrong = sign(&event, "another-secret-of-32-characters!");
    assert_eq!(post(Some(wrong), "package", event.clone()).await, 401);
    let mut tampered = event.clone();
    tampered.push(b' ');
    assert_eq!(
        post(Some(sign(&event, TOKEN)), "package", tampered).await,
        401
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(w.candidate("ds").await.as_deref(), Some(first.as_str()));
    // GitHub's ping on creation names nothing; the signed event moves the candidate.
    let ping = b"{\"zen\": \"Design for failure.\", \"hook_id\": 1}".to_vec();
    assert_eq!(post(Some(sign(&ping, TOKEN)), "ping", ping).await, 202);
    assert_eq!(post(Some(sign(&event, TOKEN)), "package", event).await, 202);
    w.until_candidate("ds", &second, Duration::from_secs(20))
        .await;
    let m = w.metrics().await;
    assert_eq!(
        metric(
            &m,
            "imagegate_receiver_notifications_total{sender=\"github\",outcome=\"unauthorized\"}"
        ),
        3.0
    );
    crate::support::rbac::assert_config_allows(&w.emu, "receiver").await;
}

/// The port is open to anyone: a client that trickles its request is cut off, not waited for.
#[tokio::test]
async fn a_client_that_trickles_its_request_is_cut_off() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let w = World::start(10).await;
    let addr = w
        .url
        .trim_start_matches("http://")
        .replace("/v1/distribution", "");
    let slow_body = async {
        let mut tcp = tokio::net::TcpStream::connect(&addr).await.unwrap();
        let head = "POST /v1/distribution HTTP/1.1\r\nHost: r\r\nContent-Length: 100\r\n\r\n{\"ev";
        tcp.write_all(head.as_bytes()).await.unwrap();
        let mut answer = Vec::new();
        let _ = tcp.read_to_end(&mut answer).await;
        String::from_utf8_lossy(&answer).into_owned()
    };
    let slow_headers = async {
        let mut tcp = tokio::net::TcpStream::connect(&addr).await.unwrap();
        tcp.write_all(b"POST /v1/distribution HTTP/1.1\r\nHost: r\r\n")
            .await
            .unwrap();
        let mut answer = Vec::new();
        let _ = tcp.read_to_end(&mut answer).await;
    };
    let started = Instant::now();
    let (body_answer, ()) = tokio::time::timeout(
        Duration::from_secs(30),
        futures::future::join(slow_body, slow_headers),
    )
    .await
    .expect("both connections were ended within 30 s");
    assert!(body_answer.starts_with("HTTP/1.1 408"), "{body_answer:?}");
    assert!(started.elapsed() < Duration::from_secs(25));
}

/// The same over HTTP/2 (prior knowledge): a client that sends the connection preface and then
/// nothing is cut off too; the receiver speaks HTTP/1.1 only, as registries send.
#[tokio::test]
async fn a_client_that_opens_http2_and_says_nothing_is_cut_off() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let w = World::start(10).await;
    let addr = w
        .url
        .trim_start_matches("http://")
        .replace("/v1/distribution", "");
    let mut tcp = tokio::net::TcpStream::connect(&addr).await.unwrap();
    tcp.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
        .await
        .unwrap();
    let mut answer = Vec::new();
    let ended = tokio::time::timeout(Duration::from_secs(30), tcp.read_to_end(&mut answer)).await;
    assert!(ended.is_ok(), "the connection was still open after 30 s");
}

/// Quay's repository notifications carry no secret and no signature: the secret is the last
/// segment of the URL the notification is configured with (`/v1/quay/<secret>`), and nothing
/// else admits a Quay notification (no path secret, a wrong one, the secret as a Bearer header).
#[tokio::test]
async fn a_quay_push_notification_moves_the_candidate_only_with_the_secret_in_its_url() {
    let w = World::start_as(10, "--quay-secret-file").await;
    let first = w.registry.push("jupyter", "2026.1", "first").await;
    w.stream("ds", "2026.1").await;
    w.until_candidate("ds", &first, Duration::from_secs(10))
        .await;
    let second = w.registry.push("jupyter", "2026.1", "second").await;
    let quay = w.url.replace("/v1/distribution", "/v1/quay");
    let notification = json!({
        "name": "jupyter", "repository": "jupyter", "namespace": "",
        "docker_url": format!("{}/jupyter", w.registry.host),
        "homepage": format!("https://{}/repository/jupyter", w.registry.host),
        "updated_tags": ["2026.1"]
    })
    .to_string()
    .into_bytes();
    let bearer = format!("Bearer {TOKEN}");
    assert_eq!(w.post_to(&quay, None, notification.clone()).await, 401);
    assert_eq!(
        w.post_to(&quay, Some(&bearer), notification.clone()).await,
        401
    );
    let wrong = format!("{quay}/a-registry-notification-token-0124");
    assert_eq!(w.post_to(&wrong, None, notification.clone()).await, 401);
    let short = format!("{quay}/a-registry-notification-token-012");
    assert_eq!(w.post_to(&short, None, notification.clone()).await, 401);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(w.candidate("ds").await.as_deref(), Some(first.as_str()));
    assert_eq!(w.imports_asked("ds").await, 0);

    let with_secret = format!("{quay}/{TOKEN}");
    assert_eq!(w.post_to(&with_secret, None, b"[]".to_vec()).await, 400);
    assert_eq!(w.post_to(&with_secret, None, notification).await, 202);
    w.until_candidate("ds", &second, Duration::from_secs(20))
        .await;
    let m = w.metrics().await;
    assert_eq!(
        metric(
            &m,
            "imagegate_receiver_notifications_total{sender=\"quay\",outcome=\"unauthorized\"}"
        ),
        4.0
    );
    assert_eq!(
        metric(
            &m,
            "imagegate_receiver_pushes_total{sender=\"quay\",outcome=\"accepted\"}"
        ),
        1.0
    );
    crate::support::rbac::assert_config_allows(&w.emu, "receiver").await;
}

/// Docker Hub's webhooks name no registry host (it is Docker Hub) and carry no secret: the
/// secret is in the URL, and a push imports the governed candidate that names the repository on
/// Docker Hub however its pull spec spells it (`docker.io/`, `index.docker.io/`).
#[tokio::test]
async fn a_docker_hub_webhook_imports_the_candidate_naming_that_docker_hub_repository() {
    let w = World::start_as(10, "--dockerhub-secret-file").await;
    let digest = |n: u8| format!("sha256:{}", format!("{n:02x}").repeat(32));
    let streams = [
        ("hub", "index.docker.io/platform/jupyter:2026.1"),
        ("other", "docker.io/platform/jupyter:2025.2"),
        ("elsewhere", "quay.io/platform/jupyter:2026.1"),
    ];
    // What Docker Hub (and Quay) serve, as recorded answers: the emulator cannot reach them.
    for (_, from) in streams {
        w.emu.upstream(from, json!({"digest": digest(1)})).await;
    }
    let api: Api<DynamicObject> = Api::namespaced_with(w.emu.client(), "ds", &streams_resource());
    for (name, from) in streams {
        let body = json!({"apiVersion": "image.openshift.io/v1", "kind": "ImageStream",
            "metadata": {"name": name},
            "spec": {"tags": [{"name": "candidate", "from": {"kind": "DockerImage", "name": from},
                               "importPolicy": {"scheduled": true}}]}});
        api.create(
            &PostParams::default(),
            &serde_json::from_value(body).unwrap(),
        )
        .await
        .unwrap();
    }
    let candidate = |name: &'static str| {
        let api = api.clone();
        async move {
            let is = serde_json::to_value(api.get(name).await.unwrap()).unwrap();
            is["status"]["tags"][0]["items"][0]["image"]
                .as_str()
                .map(str::to_string)
        }
    };
    for (name, _) in streams {
        let start = Instant::now();
        while candidate(name).await != Some(digest(1)) {
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "{name} not imported"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    // Everything upstream moves; only a push that names the tag brings its import forward.
    for (_, from) in streams {
        w.emu.upstream(from, json!({"digest": digest(2)})).await;
    }
    let hub = w.url.replace("/v1/distribution", "/v1/dockerhub");
    let webhook = json!({
        "callback_url": "https://registry.hub.docker.com/u/platform/jupyter/hook/2141b5bi5i5b02bec211i4eeih0242eg11000a/",
        "push_data": {"pushed_at": 1765000000, "pusher": "ci", "tag": "2026.1"},
        "repository": {"repo_name": "platform/jupyter", "namespace": "platform", "name": "jupyter",
                       "repo_url": "https://hub.docker.com/r/platform/jupyter", "is_private": false}
    })
    .to_string()
    .into_bytes();
    assert_eq!(w.post_to(&hub, None, webhook.clone()).await, 401);
    let wrong = format!("{hub}/a-registry-notification-token-0124");
    assert_eq!(w.post_to(&wrong, None, webhook.clone()).await, 401);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(w.imports_asked("ds").await, 0);

    let with_secret = format!("{hub}/{TOKEN}");
    assert_eq!(w.post_to(&with_secret, None, webhook).await, 202);
    let start = Instant::now();
    while candidate("hub").await != Some(digest(2)) {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "ds/hub:candidate was not imported on the push"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        w.imports_asked("ds").await,
        1,
        "one import, for ds/hub only"
    );
    assert_eq!(candidate("other").await, Some(digest(1)), "another tag");
    assert_eq!(
        candidate("elsewhere").await,
        Some(digest(1)),
        "another registry"
    );
    crate::support::rbac::assert_config_allows(&w.emu, "receiver").await;
}
