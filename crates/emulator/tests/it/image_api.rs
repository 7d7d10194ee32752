//! The image-API-only mode over real TLS (`imagegate-emulator --serve-image-api-only`): whom it
//! believes, what it asks the reviewer, and what it serves. Certificates are made with openssl
//! for each test; the SubjectAccessReview endpoint is a small stand-in for the API server's
//! (the real tier, `tests/it/realcluster/` of the product, runs it behind kube-apiserver).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};

use axum::Json;
use axum::extract::State;
use axum::routing::post;
use imagegate_emulator::aggregated::{self, ImageApi, Options};
use serde_json::{Value, json};

/// A CA, and certificates it signs, in a temporary directory.
struct Pki {
    dir: tempfile::TempDir,
}

impl Pki {
    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn run(&self, args: &[&str]) {
        let out = Command::new("openssl")
            .args(args)
            .current_dir(self.dir.path())
            .output()
            .expect("openssl runs (Debian: apt-get install openssl)");
        assert!(
            out.status.success(),
            "openssl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    fn ca(&self, name: &str) {
        self.run(&[
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-days",
            "1",
            "-subj",
            &format!("/CN={name}"),
            "-keyout",
            &format!("{name}.key"),
            "-out",
            &format!("{name}.crt"),
        ]);
    }

    fn cert(&self, ca: &str, name: &str, subject: &str, ext: &str) {
        std::fs::write(self.path(&format!("{name}.ext")), ext).unwrap();
        self.run(&[
            "req",
            "-new",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-subj",
            subject,
            "-keyout",
            &format!("{name}.key"),
            "-out",
            &format!("{name}.csr"),
        ]);
        self.run(&[
            "x509",
            "-req",
            "-in",
            &format!("{name}.csr"),
            "-CA",
            &format!("{ca}.crt"),
            "-CAkey",
            &format!("{ca}.key"),
            "-CAcreateserial",
            "-days",
            "1",
            "-extfile",
            &format!("{name}.ext"),
            "-out",
            &format!("{name}.crt"),
        ]);
    }

    /// The serving CA and certificate, the front proxy's CA and client certificate, a client
    /// certificate of that CA with another name, and one of a CA the server does not trust.
    fn new() -> Pki {
        let pki = Pki {
            dir: tempfile::tempdir().unwrap(),
        };
        for ca in ["ca", "front-proxy-ca", "other-ca"] {
            pki.ca(ca);
        }
        pki.cert(
            "ca",
            "serving",
            "/CN=api.openshift-apiserver.svc",
            "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n",
        );
        let client = "extendedKeyUsage=clientAuth\n";
        pki.cert("front-proxy-ca", "proxy", "/CN=front-proxy-client", client);
        pki.cert("front-proxy-ca", "intruder", "/CN=intruder", client);
        pki.cert("other-ca", "stranger", "/CN=front-proxy-client", client);
        pki
    }

    /// A client of the server, presenting the certificate `name` (None: no certificate).
    fn client(&self, name: Option<&str>) -> reqwest::Client {
        let ca = std::fs::read(self.path("ca.crt")).unwrap();
        let mut b = reqwest::Client::builder()
            .use_rustls_tls()
            .add_root_certificate(reqwest::Certificate::from_pem(&ca).unwrap());
        if let Some(n) = name {
            let mut pem = std::fs::read(self.path(&format!("{n}.crt"))).unwrap();
            pem.extend(std::fs::read(self.path(&format!("{n}.key"))).unwrap());
            b = b.identity(reqwest::Identity::from_pem(&pem).unwrap());
        }
        b.build().unwrap()
    }
}

/// The reviews the stand-in reviewer received.
type Reviews = Arc<Mutex<Vec<Value>>>;

/// The stand-in for the API server's SubjectAccessReview endpoint: it allows every request
/// except those of `denied` and of `system:anonymous`, and records each review.
async fn review(State(reviews): State<Reviews>, Json(review): Json<Value>) -> Json<Value> {
    let user = review["spec"]["user"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    reviews.lock().unwrap().push(review);
    let allowed = user != "denied" && user != "system:anonymous";
    Json(
        json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
                "status": {"allowed": allowed, "reason": if allowed { "" } else { "no RBAC policy matched" }}}),
    )
}

/// Starts the reviewer; writes a kubeconfig for it into `dir`.
async fn reviewer(dir: &Path) -> (PathBuf, Reviews) {
    let reviews: Reviews = Arc::default();
    let app = axum::Router::new()
        .route(
            "/apis/authorization.k8s.io/v1/subjectaccessreviews",
            post(review),
        )
        .with_state(reviews.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let kubeconfig = dir.join("reviewer.kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!("apiVersion: v1\nkind: Config\nclusters:\n- name: r\n  cluster: {{server: 'http://{addr}'}}\nusers:\n- name: r\n  user: {{token: t}}\ncontexts:\n- name: r\n  context: {{cluster: r, user: r}}\ncurrent-context: r\n"),
    )
    .unwrap();
    (kubeconfig, reviews)
}

async fn start(pki: &Pki) -> (ImageApi, Reviews, String) {
    crate::install_crypto_provider();
    let (kubeconfig, reviews) = reviewer(pki.dir.path()).await;
    let options = Options {
        serve_image_api_only: true,
        secure_port: 0,
        bind_address: [127, 0, 0, 1].into(),
        tls_cert_file: Some(pki.path("serving.crt")),
        tls_private_key_file: Some(pki.path("serving.key")),
        requestheader_client_ca_file: Some(pki.path("front-proxy-ca.crt")),
        requestheader_allowed_names: vec!["front-proxy-client".into()],
        requestheader_username_headers: vec!["X-Remote-User".into()],
        requestheader_group_headers: vec!["X-Remote-Group".into()],
        requestheader_extra_headers_prefix: vec!["X-Remote-Extra-".into()],
        authorization_kubeconfig: Some(kubeconfig),
        authorization_always_allow_paths: vec!["/healthz".into()],
    };
    let api = aggregated::start(
        &options,
        "registry.test:5000".into(),
        imagegate_emulator::window::Window::real(1000),
        &Default::default(),
    )
    .await
    .unwrap();
    let url = format!("https://localhost:{}", api.addr().port());
    (api, reviews, url)
}

const STREAMS: &str = "/apis/image.openshift.io/v1/namespaces/ds/imagestreams";

#[tokio::test]
async fn the_proxys_headers_count_only_from_its_certificate_and_the_reviewer_decides() {
    let pki = Pki::new();
    let (api, reviews, url) = start(&pki).await;
    let proxy = pki.client(Some("proxy"));
    let get = |client: &reqwest::Client, user: Option<&str>| {
        let mut r = client.get(format!("{url}{STREAMS}"));
        if let Some(u) = user {
            r = r
                .header("X-Remote-User", u)
                .header("X-Remote-Group", "team");
        }
        r.send()
    };
    assert_eq!(get(&proxy, Some("alice")).await.unwrap().status(), 200);
    let review = reviews.lock().unwrap().last().cloned().unwrap();
    assert_eq!(review["spec"]["user"], "alice");
    assert_eq!(
        review["spec"]["groups"],
        json!(["team", "system:authenticated"])
    );
    assert_eq!(review["spec"]["resourceAttributes"]["verb"], "list");
    assert_eq!(review["spec"]["resourceAttributes"]["namespace"], "ds");

    let refused = get(&proxy, Some("denied")).await.unwrap();
    assert_eq!(refused.status(), 403);
    let status: Value = refused.json().await.unwrap();
    assert_eq!(status["reason"], "Forbidden");
    assert_eq!(
        status["message"],
        "imagestreams.image.openshift.io is forbidden: User \"denied\" cannot list resource \"imagestreams\" in API group \"image.openshift.io\" in the namespace \"ds\": no RBAC policy matched"
    );
    // Without the proxy's certificate, the same headers make nobody: anonymous, refused.
    let anonymous = pki.client(None);
    assert_eq!(get(&anonymous, Some("alice")).await.unwrap().status(), 403);
    let last = reviews.lock().unwrap().last().cloned().unwrap();
    assert_eq!(last["spec"]["user"], "system:anonymous");
    // A certificate of the CA with a name not allowed, or a token: 401.
    assert_eq!(
        get(&pki.client(Some("intruder")), Some("alice"))
            .await
            .unwrap()
            .status(),
        401
    );
    let token = anonymous
        .get(format!("{url}{STREAMS}"))
        .bearer_auth("x")
        .send()
        .await
        .unwrap();
    assert_eq!(token.status(), 401);
    // A certificate of another CA does not get through the handshake.
    assert!(
        get(&pki.client(Some("stranger")), Some("alice"))
            .await
            .is_err()
    );
    // The always-allowed paths need nobody.
    assert_eq!(
        anonymous
            .get(format!("{url}/healthz"))
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    // The request log names the user the proxy named, refusals included.
    let log: Value = anonymous
        .get(format!("{url}/_emulator/v1/requests"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let seen: Vec<(String, u64)> = log["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["user"].as_str().unwrap().to_string(),
                r["code"].as_u64().unwrap(),
            )
        })
        .collect();
    assert!(seen.contains(&("alice".into(), 200)), "{seen:?}");
    assert!(seen.contains(&("denied".into(), 403)), "{seen:?}");
    api.shutdown().await;
}

#[tokio::test]
async fn only_the_image_group_is_served() {
    let pki = Pki::new();
    let (api, _, url) = start(&pki).await;
    let proxy = pki.client(Some("proxy"));
    let get = |path: &str| {
        proxy
            .get(format!("{url}{path}"))
            .header("X-Remote-User", "admin")
            .header("X-Remote-Group", "system:masters")
            .send()
    };
    let groups: Value = get("/apis").await.unwrap().json().await.unwrap();
    let names: Vec<&str> = groups["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["image.openshift.io"]);
    for path in [
        "/api",
        "/api/v1/namespaces",
        "/apis/tekton.dev/v1beta1",
        "/apis/coordination.k8s.io/v1/leases",
        "/openapi/v2",
    ] {
        assert_eq!(get(path).await.unwrap().status(), 404, "{path}");
    }
    let index: Value = get("/openapi/v3").await.unwrap().json().await.unwrap();
    let paths: Vec<&String> = index["paths"].as_object().unwrap().keys().collect();
    assert_eq!(paths, ["apis/image.openshift.io/v1"]);
    assert_eq!(
        get("/openapi/v3/apis/image.openshift.io/v1")
            .await
            .unwrap()
            .status(),
        200
    );
    // A create in a namespace the image API has not seen: the API server has it.
    let created = proxy
        .post(format!("{url}{STREAMS}"))
        .header("X-Remote-User", "admin")
        .json(&json!({"apiVersion": "image.openshift.io/v1", "kind": "ImageStream", "metadata": {"name": "nb"}}))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201);
    assert_eq!(get(&format!("{STREAMS}/nb")).await.unwrap().status(), 200);
    // So does a server-side apply (a PATCH that creates), as `kubectl apply --server-side` sends.
    let applied = proxy
        .patch(format!("{url}/apis/image.openshift.io/v1/namespaces/other/imagestreams/nb?fieldManager=kubectl"))
        .header("X-Remote-User", "admin")
        .header("Content-Type", "application/apply-patch+yaml")
        .body("apiVersion: image.openshift.io/v1\nkind: ImageStream\nmetadata: {name: nb, namespace: other}\n")
        .send()
        .await
        .unwrap();
    assert_eq!(applied.status(), 201);
    api.shutdown().await;
}
