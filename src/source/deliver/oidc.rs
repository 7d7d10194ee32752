//! OIDC tokens for a sink that has an audience (a Knative Broker, Channel or Service with
//! `authentication-oidc` on answers 401 to a sender without one): a TokenRequest for the
//! sender's own ServiceAccount with the sink's audience, sent as `Authorization: Bearer`, and
//! requested again before it expires (at 80 % of its life), as Knative's own senders do
//! (`pkg/auth/token_provider.go`). The token never leaves the process but to that sink.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::Api;
use kube::api::PostParams;

/// How long a requested token lives.
pub(crate) const TOKEN_LIFETIME: Duration = Duration::from_secs(3600);

/// The ServiceAccount whose tokens a process sends, and the tokens it holds, one per audience.
pub struct Identity {
    client: kube::Client,
    namespace: String,
    name: String,
    by_audience: Mutex<HashMap<String, Arc<Oidc>>>,
}

impl std::fmt::Debug for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Identity({}/{})", self.namespace, self.name)
    }
}

impl Identity {
    /// ServiceAccount `namespace/name`, its tokens requested with `client`.
    pub(crate) fn new(client: kube::Client, namespace: &str, name: &str) -> Arc<Identity> {
        Arc::new(Identity {
            client,
            namespace: namespace.to_string(),
            name: name.to_string(),
            by_audience: Mutex::new(HashMap::new()),
        })
    }

    /// The tokens for `audience` (one holder per audience, shared by every flow that sends there).
    pub(crate) fn for_audience(self: &Arc<Self>, audience: &str) -> Arc<Oidc> {
        let mut map = self.by_audience.lock().unwrap_or_else(|p| p.into_inner());
        map.entry(audience.to_string())
            .or_insert_with(|| {
                Arc::new(Oidc {
                    identity: self.clone(),
                    audience: audience.to_string(),
                    current: tokio::sync::Mutex::new(None),
                })
            })
            .clone()
    }
}

/// Tokens of one identity for one audience.
pub struct Oidc {
    identity: Arc<Identity>,
    audience: String,
    /// The token and when to request the next.
    current: tokio::sync::Mutex<Option<(String, Instant)>>,
}

impl std::fmt::Debug for Oidc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Oidc({:?}, audience {:?})", self.identity, self.audience)
    }
}

impl PartialEq for Oidc {
    fn eq(&self, other: &Self) -> bool {
        self.audience == other.audience
            && self.identity.namespace == other.identity.namespace
            && self.identity.name == other.identity.name
    }
}

impl Eq for Oidc {}

impl Oidc {
    /// A token for the audience, requested when there is none or it is past 80 % of its life.
    pub(crate) async fn token(&self) -> Result<String, String> {
        let mut current = self.current.lock().await;
        if let Some((token, renew_at)) = current.as_ref()
            && Instant::now() < *renew_at
        {
            return Ok(token.clone());
        }
        let id = &self.identity;
        let api: Api<ServiceAccount> = Api::namespaced(id.client.clone(), &id.namespace);
        let request = TokenRequest {
            spec: Some(TokenRequestSpec {
                audiences: Some(vec![self.audience.clone()]),
                expiration_seconds: Some(TOKEN_LIFETIME.as_secs() as i64),
                ..Default::default()
            }),
            ..Default::default()
        };
        let asked = Instant::now();
        let answer = api
            .create_token_request(&id.name, &PostParams::default(), &request)
            .await
            .map_err(|e| {
                format!(
                    "cannot request a token of ServiceAccount {}/{} for audience {:?}: {e}",
                    id.namespace, id.name, self.audience
                )
            })?;
        let status = answer
            .status
            .ok_or_else(|| "the TokenRequest came back without a status".to_string())?;
        let token = status
            .token
            .filter(|t| !t.is_empty())
            .ok_or_else(|| "the TokenRequest came back without a token".to_string())?;
        // The server may shorten the lifetime; renew at 80 % of what it granted.
        let granted = match status.expiration_timestamp {
            Some(exp) => {
                let left = exp.0.duration_since(k8s_openapi::jiff::Timestamp::now());
                if left.is_negative() {
                    Duration::ZERO
                } else {
                    left.unsigned_abs().min(TOKEN_LIFETIME)
                }
            }
            None => TOKEN_LIFETIME,
        };
        let renew_at = asked + granted.mul_f64(0.8);
        *current = Some((token.clone(), renew_at));
        Ok(token)
    }
}
