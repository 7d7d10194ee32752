//! `POST serviceaccounts/{name}/token`: a TokenRequest, as kube-apiserver answers it (the
//! ServiceAccount must exist; `spec.audiences` and `spec.expirationSeconds` are kept, the
//! default audience is the API server's). The token is a JWT whose claims are what a real one
//! carries (`iss`, `sub` `system:serviceaccount:<ns>:<name>`, `aud`, `exp`, `iat`, `nbf`,
//! `kubernetes.io`), signed by nobody (`alg: none`): the emulator stands in for the issuer in
//! tests that check what a program sends, never for a verifier.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::{Value, json};

use super::{Cluster, Target};
use crate::status::ApiError;

/// The issuer the emulator's tokens name.
pub const ISSUER: &str = "https://emulator.imagegate.invalid";

impl Cluster {
    /// Answers a TokenRequest for the ServiceAccount `t` names.
    pub fn token_request(&self, t: &Target, body: &Value) -> Result<Value, ApiError> {
        let (ns, name) = (
            t.namespace.as_deref().unwrap_or(""),
            t.name.as_deref().unwrap_or(""),
        );
        let sa = self
            .store
            .get("", "serviceaccounts", ns, name)
            .ok_or_else(|| ApiError::not_found("", "serviceaccounts", name))?;
        let uid = sa.value()["metadata"]["uid"].clone();
        let audiences = match body["spec"]["audiences"].as_array() {
            Some(a) if !a.is_empty() => Value::Array(a.clone()),
            _ => json!(["https://kubernetes.default.svc"]),
        };
        let seconds = body["spec"]["expirationSeconds"].as_i64().unwrap_or(3600);
        if seconds < 600 {
            return Err(ApiError::new(
                422,
                "Invalid",
                format!(
                    "TokenRequest.authentication.k8s.io \"{name}\" is invalid: spec.expirationSeconds: Invalid value: {seconds}: may not specify a duration less than 10 minutes"
                ),
            ));
        }
        let now = chrono::Utc::now();
        let exp = now + chrono::Duration::seconds(seconds);
        let claims = json!({
            "iss": ISSUER,
            "sub": format!("system:serviceaccount:{ns}:{name}"),
            "aud": audiences,
            "iat": now.timestamp(),
            "nbf": now.timestamp(),
            "exp": exp.timestamp(),
            "kubernetes.io": {"namespace": ns, "serviceaccount": {"name": name, "uid": uid}},
        });
        let part = |v: &Value| URL_SAFE_NO_PAD.encode(v.to_string());
        let token = format!(
            "{}.{}.",
            part(&json!({"alg": "none", "typ": "JWT"})),
            part(&claims)
        );
        Ok(json!({
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "metadata": {"name": name, "namespace": ns, "creationTimestamp": now.format("%Y-%m-%dT%H:%M:%SZ").to_string()},
            "spec": {"audiences": audiences, "expirationSeconds": seconds},
            "status": {"token": token, "expirationTimestamp": exp.format("%Y-%m-%dT%H:%M:%SZ").to_string()},
        }))
    }
}

/// The claims of a token the emulator made (None: not one of its shape).
pub fn claims(token: &str) -> Option<Value> {
    let payload = token.split('.').nth(1)?;
    serde_json::from_slice(&URL_SAFE_NO_PAD.decode(payload).ok()?).ok()
}
