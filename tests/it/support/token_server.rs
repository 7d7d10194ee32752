//! The token server of a registry that uses the Docker registry token flow (Bearer challenges),
//! as Quay, Docker Hub, GitLab and Harbor do: the real distribution registry answers an
//! unauthenticated request with `401 WWW-Authenticate: Bearer realm=...,service=...,scope=...`,
//! the client asks this server for a token with its Basic credentials, and the registry checks
//! the token's ES256 signature against the key set this server published (`auth.token.jwks`).
//!
//! A test stand-in for the auth service, written here: the registry that verifies the tokens
//! is the real one. It grants exactly the scopes asked for, to `user`:`password` only, and
//! records who asked for what.

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use base64::Engine as _;
use ring::rand::SystemRandom;
use ring::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair};
use serde_json::{Value, json};

/// The issuer and the service (audience) the registry is configured with.
pub const ISSUER: &str = "imagegate-test-token-server";
pub const SERVICE: &str = "imagegate-test-registry";
const KEY_ID: &str = "imagegate-test";

/// A request for a token: who (None: anonymous) and the scopes asked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Asked {
    pub user: Option<String>,
    pub scopes: Vec<String>,
}

struct Inner {
    key: EcdsaKeyPair,
    user: String,
    password: String,
    asked: Mutex<Vec<Asked>>,
}

/// A running token server on 127.0.0.1.
pub struct TokenServer {
    /// `http://localhost:<port>/token`.
    pub realm: String,
    inner: Arc<Inner>,
    /// Dropped with the server: its thread ends.
    _stop: tokio::sync::oneshot::Sender<()>,
}

fn b64url(data: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(data)
}

impl TokenServer {
    /// Starts a server that gives tokens to `user` with `password`.
    pub fn start(user: &str, password: &str) -> TokenServer {
        let rng = SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
        let key = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng)
            .unwrap();
        let inner = Arc::new(Inner {
            key,
            user: user.into(),
            password: password.into(),
            asked: Mutex::new(Vec::new()),
        });
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        // By name: cosign (go-containerregistry 0.21) refuses a realm at a loopback or private IP
        // literal other than the registry's own host, against SSRF; a name it follows.
        let port = listener.local_addr().unwrap().port();
        let realm = format!("http://localhost:{port}/token");
        let app = Router::new()
            .route("/token", get(token))
            .with_state(inner.clone());
        // A runtime of its own: the test's may be blocked in `cosign`, which asks this server.
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
        TokenServer {
            realm,
            inner,
            _stop: stop,
        }
    }

    /// The JSON Web Key Set the registry trusts (`auth.token.jwks`).
    pub fn jwks(&self) -> Value {
        // An uncompressed P-256 point: 0x04, then x and y, 32 bytes each.
        let point = self.inner.key.public_key().as_ref();
        json!({"keys": [{"kty": "EC", "crv": "P-256", "kid": KEY_ID, "use": "sig", "alg": "ES256",
            "x": b64url(&point[1..33]), "y": b64url(&point[33..65])}]})
    }

    /// Every request for a token so far.
    pub fn asked(&self) -> Vec<Asked> {
        self.inner.asked.lock().unwrap().clone()
    }
}

/// The Basic credentials of a request, if any.
fn basic(headers: &HeaderMap) -> Option<(String, String)> {
    let value = headers.get("authorization")?.to_str().ok()?;
    let encoded = value.strip_prefix("Basic ")?;
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .ok()?;
    let text = String::from_utf8(decoded).ok()?;
    let (user, password) = text.split_once(':')?;
    Some((user.to_string(), password.to_string()))
}

async fn token(
    State(inner): State<Arc<Inner>>,
    Query(query): Query<Vec<(String, String)>>,
    headers: HeaderMap,
) -> Response {
    let scopes: Vec<String> = (query.iter())
        .filter(|(k, _)| k == "scope")
        .map(|(_, v)| v.clone())
        .collect();
    let who = basic(&headers);
    inner.asked.lock().unwrap().push(Asked {
        user: who.as_ref().map(|(u, _)| u.clone()),
        scopes: scopes.clone(),
    });
    match who {
        Some((user, password)) if user == inner.user && password == inner.password => {}
        _ => return (StatusCode::UNAUTHORIZED, "credentials required").into_response(),
    }
    // `repository:<name>:<action>[,<action>]`: granted as asked.
    let access: Vec<Value> = (scopes.iter())
        .filter_map(|s| {
            let mut parts = s.splitn(3, ':');
            let (kind, rest) = (parts.next()?, parts.collect::<Vec<_>>());
            let [name, actions] = rest.as_slice() else {
                return None;
            };
            Some(json!({"type": kind, "name": name, "actions": actions.split(',').collect::<Vec<_>>()}))
        })
        .collect();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let header = json!({"alg": "ES256", "typ": "JWT", "kid": KEY_ID});
    let claims = json!({"iss": ISSUER, "sub": inner.user, "aud": SERVICE, "exp": now + 300,
        "nbf": now - 10, "iat": now, "jti": format!("{now}-{}", access.len()), "access": access});
    let signing_input = format!(
        "{}.{}",
        b64url(header.to_string().as_bytes()),
        b64url(claims.to_string().as_bytes())
    );
    let signature = inner
        .key
        .sign(&SystemRandom::new(), signing_input.as_bytes())
        .unwrap();
    let token = format!("{signing_input}.{}", b64url(signature.as_ref()));
    axum::Json(json!({"token": token, "access_token": token, "expires_in": 300})).into_response()
}
