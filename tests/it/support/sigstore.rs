//! A private Sigstore for keyless signing, on 127.0.0.1: the real Fulcio 1.8.8 (a file CA made
//! here, no certificate-transparency log), Rekor v2 (rekor-tiles 2.3.0, a tile log on disk), the
//! real timestamp authority 2.1.3, each built from its Go module (`scripts/realcluster bin fulcio
//! rekor-server timestamp-server`), and the real cosign 3.1.3 signing with them exactly as a
//! publisher's CI does (`cosign sign --signing-config --trusted-root --identity-token`).
//!
//! The OIDC issuer Fulcio trusts is a stand-in written here (an `email` issuer: discovery, a key
//! set, ES256 ID tokens for any address it is asked for), as the registry's token server is:
//! Fulcio, which verifies its tokens, is the real one.
//!
//! The timestamp authority always serves its metrics on port 2112 (hard-coded upstream), so two
//! cannot run at once on one machine: the tests that start one are a nextest group of one
//! (.config/nextest.toml).

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::extract::State;
use axum::routing::get;
use base64::Engine as _;
use ring::rand::SystemRandom;
use ring::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair};
use serde_json::{Value, json};

use super::free_port;
use super::process::Process;
use super::registry::on_path;

/// A running private Sigstore.
pub struct Sigstore {
    /// The OIDC issuer's URL, as Fulcio writes it into certificates.
    pub issuer: String,
    /// `trusted_root.json` for this Sigstore (Fulcio, Rekor, the timestamp authority), as
    /// `cosign trusted-root create` writes it.
    pub trusted_root: String,
    oidc: Arc<Oidc>,
    dir: tempfile::TempDir,
    _stop: tokio::sync::oneshot::Sender<()>,
    _services: Vec<Process>,
}

struct Oidc {
    key: EcdsaKeyPair,
    issuer: String,
}

fn b64url(data: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(data)
}

impl Sigstore {
    /// Starts the issuer, Fulcio, Rekor and the timestamp authority, and writes the trusted root
    /// and the signing config.
    pub async fn start() -> Sigstore {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let (oidc, stop) = serve_oidc();
        let issuer = oidc.issuer.clone();
        let (root_pem, intermediate_pem, intermediate_key, rekor_key, rekor_pub) = pki();
        write(
            d,
            "fulcio-chain.pem",
            &format!("{intermediate_pem}{root_pem}"),
        );
        write(d, "fulcio-intermediate.key", &intermediate_key);
        write(d, "rekor.key", &rekor_key);
        write(d, "rekor.pub", &rekor_pub);
        let config = json!({"OIDCIssuers": {issuer.clone(): {
            "IssuerURL": issuer, "ClientID": "sigstore", "Type": "email"}}});
        write(d, "fulcio-config.json", &config.to_string());
        std::fs::create_dir_all(d.join("rekor-storage")).unwrap();
        let path = |f: &str| d.join(f).display().to_string();
        let (fulcio_port, rekor_port, tsa_port) = (free_port(), free_port(), free_port());

        // Not duplex (equal HTTP and gRPC ports): Fulcio 1.8.8 registers a gRPC metric twice in
        // that mode and exits. Its legacy gRPC socket goes to a file of this test, not to the
        // abstract socket every Fulcio of the machine would share.
        let mut fulcio = Command::new(on_path("fulcio"));
        fulcio.args([
            "serve",
            "--ca=fileca",
            &format!("--fileca-cert={}", path("fulcio-chain.pem")),
            &format!("--fileca-key={}", path("fulcio-intermediate.key")),
            "--fileca-key-passwd=unused",
            "--fileca-watch=false",
            // No certificate-transparency log (its default is a local URL).
            "--ct-log-url=",
            &format!("--config-path={}", path("fulcio-config.json")),
            "--host=127.0.0.1",
            &format!("--port={fulcio_port}"),
            "--grpc-host=127.0.0.1",
            &format!("--grpc-port={}", free_port()),
            &format!("--legacy-unix-domain-socket={}", path("fulcio-legacy.sock")),
            &format!("--metrics-port={}", free_port()),
            "--log_type=dev",
        ]);
        let fulcio = Process::start("fulcio", fulcio);
        let mut rekor = Command::new(on_path("rekor-server"));
        rekor.args([
            "serve",
            &format!("--storage-dir={}", path("rekor-storage")),
            &format!("--signer-filepath={}", path("rekor.key")),
            // The checkpoints' origin: the host of the log's URL in the trusted root.
            "--hostname=127.0.0.1",
            "--http-address=127.0.0.1",
            &format!("--http-port={rekor_port}"),
            "--grpc-address=127.0.0.1",
            &format!("--grpc-port={}", free_port()),
            &format!("--http-metrics-port={}", free_port()),
            // Every entry waits for a checkpoint that covers it (default 10 s).
            "--checkpoint-interval=1s",
        ]);
        let rekor = Process::start("rekor-server", rekor);
        let mut tsa = Command::new(on_path("timestamp-server"));
        tsa.args([
            "serve",
            "--host=127.0.0.1",
            &format!("--port={tsa_port}"),
            "--scheme=http",
            // It would ask public NTP servers.
            "--disable-ntp-monitoring",
            "--timestamp-signer=memory",
        ]);
        let tsa = Process::start("timestamp-server", tsa);
        let fulcio_url = format!("http://127.0.0.1:{fulcio_port}");
        let rekor_url = format!("http://127.0.0.1:{rekor_port}");
        let tsa_url = format!("http://127.0.0.1:{tsa_port}/api/v1/timestamp");
        up(&format!("{fulcio_url}/healthz")).await;
        up(&format!("{rekor_url}/healthz")).await;
        let chain = up(&format!("{tsa_url}/certchain")).await;
        write(d, "tsa-chain.pem", &chain);
        let since = "start-time=2020-01-01T00:00:00Z";
        cosign(
            d,
            &[
                "trusted-root",
                "create",
                "--fulcio",
                &format!(
                    "url={fulcio_url},certificate-chain={}",
                    path("fulcio-chain.pem")
                ),
                "--rekor",
                &format!(
                    "url={rekor_url},public-key={},{since},origin=127.0.0.1",
                    path("rekor.pub")
                ),
                "--tsa",
                &format!("url={tsa_url},certificate-chain={}", path("tsa-chain.pem")),
                "--out",
                "trusted_root.json",
            ],
        );
        let service = |url: &str, version: u32| {
            format!("url={url},api-version={version},{since},operator=imagegate-test")
        };
        cosign(
            d,
            &[
                "signing-config",
                "create",
                "--fulcio",
                &service(&fulcio_url, 1),
                "--rekor",
                &service(&rekor_url, 2),
                "--rekor-config",
                "ANY",
                "--tsa",
                &service(&tsa_url, 1),
                "--tsa-config",
                "ANY",
                "--out",
                "signing_config.json",
            ],
        );
        let trusted_root = std::fs::read_to_string(d.join("trusted_root.json")).unwrap();
        Sigstore {
            issuer,
            trusted_root,
            oidc,
            dir,
            _stop: stop,
            _services: vec![fulcio, rekor, tsa],
        }
    }

    /// Signs `image` (`host/repo@sha256:...`, on a plain-HTTP registry) keylessly as `email`:
    /// an ID token from the issuer, a Fulcio certificate for it, a Rekor v2 entry and a
    /// timestamp, stored by cosign as a Sigstore bundle referring to the digest.
    pub fn sign(&self, image: &str, email: &str) {
        let d = self.dir.path();
        // A path: cosign reads `--identity-token` as the token itself only if it parses as an
        // RS256 JWT. No trailing newline: it would be sent in the Authorization header.
        let token = d.join(format!("token-{email}"));
        std::fs::write(&token, self.oidc.mint(email)).unwrap();
        cosign(
            d,
            &[
                "sign",
                "--signing-config",
                "signing_config.json",
                "--trusted-root",
                "trusted_root.json",
                "--identity-token",
                &token.display().to_string(),
                "--allow-http-registry",
                "--yes",
                image,
            ],
        );
    }
}

impl Oidc {
    /// An ES256 ID token for `email`, valid ten minutes, for Fulcio (audience `sigstore`).
    fn mint(&self, email: &str) -> String {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs();
        let header = json!({"alg": "ES256", "typ": "JWT", "kid": "imagegate-test-oidc"});
        let claims = json!({"iss": self.issuer, "aud": "sigstore", "sub": email, "email": email,
            "email_verified": true, "iat": now, "nbf": now, "exp": now + 600});
        let input = format!(
            "{}.{}",
            b64url(header.to_string().as_bytes()),
            b64url(claims.to_string().as_bytes())
        );
        let signature = self
            .key
            .sign(&SystemRandom::new(), input.as_bytes())
            .unwrap();
        format!("{input}.{}", b64url(signature.as_ref()))
    }

    fn discovery(&self) -> Value {
        json!({"issuer": self.issuer, "jwks_uri": format!("{}/jwks", self.issuer),
            "id_token_signing_alg_values_supported": ["ES256"],
            "response_types_supported": ["id_token"], "subject_types_supported": ["public"]})
    }

    fn jwks(&self) -> Value {
        let point = self.key.public_key().as_ref();
        json!({"keys": [{"kty": "EC", "crv": "P-256", "kid": "imagegate-test-oidc", "use": "sig",
            "alg": "ES256", "x": b64url(&point[1..33]), "y": b64url(&point[33..65])}]})
    }
}

/// The issuer on a thread of its own (the test's runtime may be blocked in `cosign`, whose
/// Fulcio asks it for its keys).
fn serve_oidc() -> (Arc<Oidc>, tokio::sync::oneshot::Sender<()>) {
    let rng = SystemRandom::new();
    let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
    let key =
        EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng).unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let issuer = format!("http://127.0.0.1:{}", listener.local_addr().unwrap().port());
    let oidc = Arc::new(Oidc { key, issuer });
    let app = Router::new()
        .route(
            "/.well-known/openid-configuration",
            get(|State(o): State<Arc<Oidc>>| async move { axum::Json(o.discovery()) }),
        )
        .route(
            "/jwks",
            get(|State(o): State<Arc<Oidc>>| async move { axum::Json(o.jwks()) }),
        )
        .with_state(oidc.clone());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            axum::serve(listener, app)
                .with_graceful_shutdown(async {
                    let _ = stopped.await;
                })
                .await
                .unwrap();
        });
    });
    (oidc, stop)
}

/// Fulcio's root and intermediate (the intermediate signs the certificates, with the
/// code-signing usage Fulcio requires of it), PEM, the intermediate's key, and Rekor's P-256 key
/// pair (PKCS#8 and public PEM).
fn pki() -> (String, String, String, String, String) {
    use rcgen::{
        BasicConstraints, CertificateParams, CertifiedIssuer, DistinguishedName, DnType,
        ExtendedKeyUsagePurpose, IsCa, KeyPair, KeyUsagePurpose,
    };
    let ca = |name: &str, path: BasicConstraints| {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(path);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let mut dn = DistinguishedName::new();
        dn.push(DnType::OrganizationName, "imagegate-test");
        dn.push(DnType::CommonName, name);
        params.distinguished_name = dn;
        params.not_before = rcgen::date_time_ymd(2020, 1, 1);
        params.not_after = rcgen::date_time_ymd(2040, 1, 1);
        params
    };
    let root = CertifiedIssuer::self_signed(
        ca("fulcio-root", BasicConstraints::Unconstrained),
        KeyPair::generate().unwrap(),
    )
    .unwrap();
    let mut intermediate = ca("fulcio-intermediate", BasicConstraints::Constrained(0));
    intermediate.extended_key_usages = vec![ExtendedKeyUsagePurpose::CodeSigning];
    let intermediate_key = KeyPair::generate().unwrap();
    let intermediate_cert = intermediate.signed_by(&intermediate_key, &root).unwrap();
    let rekor = KeyPair::generate().unwrap();
    (
        root.pem(),
        intermediate_cert.pem(),
        intermediate_key.serialize_pem(),
        rekor.serialize_pem(),
        rekor.public_key_pem(),
    )
}

fn write(dir: &Path, name: &str, content: &str) {
    std::fs::write(dir.join(name), content).unwrap();
}

/// Runs cosign in `dir`, offline (its TUF cache and home there), and fails the test with its
/// output if it fails.
fn cosign(dir: &Path, args: &[&str]) {
    let out = Command::new(on_path("cosign"))
        .current_dir(dir)
        .env("TUF_ROOT", dir.join("tuf"))
        .env("HOME", dir)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "cosign {}: {}{}",
        args[..2].join(" "),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Polls `url` until it answers 200; its body. Fails after 30 s.
async fn up(url: &str) -> String {
    let client = reqwest::Client::new();
    let start = Instant::now();
    loop {
        if let Ok(r) = client.get(url).send().await
            && r.status().is_success()
        {
            return r.text().await.unwrap();
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "{url} did not come up in 30 s"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
