//! Calling a ClusterInterceptor as the Triggers sink does (v0.37 `pkg/sink/sink.go`
//! `ExecuteInterceptors`): the ClusterInterceptor object read from the API server, its URL
//! (`spec.clientConfig.url`: the demo and the real tier run the interceptor on this machine,
//! not behind a Service), its `caBundle` the only CA trusted, an InterceptorRequest POSTed and
//! its InterceptorResponse read. The demo runs the real `imagegate interceptor` behind it.

use anyhow::{Context, anyhow, bail};
use base64::Engine;
use kube::Api;
use kube::api::{ApiResource, DynamicObject};
use serde_json::{Value, json};

use super::request::Request;

/// Resolves and calls ClusterInterceptors through an API server.
#[derive(Clone)]
pub struct ClusterInterceptors {
    client: kube::Client,
}

/// What an interceptor answered.
#[derive(Clone, Debug, PartialEq)]
pub struct Answer {
    /// Whether the trigger goes on.
    pub continue_: bool,
    /// The extensions it added.
    pub extensions: serde_json::Map<String, Value>,
    /// Its status message (why not).
    pub message: String,
}

impl ClusterInterceptors {
    /// Reads ClusterInterceptors with `client`.
    pub fn new(client: kube::Client) -> ClusterInterceptors {
        ClusterInterceptors { client }
    }

    /// Calls ClusterInterceptor `name` about `request`, for the trigger `trigger` of an
    /// EventListener of `namespace`, with the `extensions` earlier interceptors added.
    pub async fn call(
        &self,
        name: &str,
        namespace: &str,
        trigger: &str,
        request: &Request,
        extensions: &serde_json::Map<String, Value>,
    ) -> anyhow::Result<Answer> {
        let ar = ApiResource {
            group: "triggers.tekton.dev".into(),
            version: "v1alpha1".into(),
            api_version: "triggers.tekton.dev/v1alpha1".into(),
            kind: "ClusterInterceptor".into(),
            plural: "clusterinterceptors".into(),
        };
        let api: Api<DynamicObject> = Api::all_with(self.client.clone(), &ar);
        let ci = api
            .get(name)
            .await
            .with_context(|| format!("url resolution failed for interceptor {name}"))?;
        let config = &ci.data["spec"]["clientConfig"];
        let url = config["url"]
            .as_str()
            .ok_or_else(|| anyhow!("ClusterInterceptor {name} has no spec.clientConfig.url"))?;
        let mut http = reqwest::Client::builder()
            .timeout(std::time::Duration::from_secs(10))
            .tls_built_in_root_certs(false);
        if let Some(b64) = config["caBundle"].as_str().filter(|b| !b.is_empty()) {
            let pem = base64::engine::general_purpose::STANDARD
                .decode(b64)
                .with_context(|| format!("ClusterInterceptor {name}'s caBundle is not base64"))?;
            for cert in reqwest::Certificate::from_pem_bundle(&pem)? {
                http = http.add_root_certificate(cert);
            }
        } else if url.starts_with("https:") {
            bail!("ClusterInterceptor {name} has no caBundle to trust its https URL with");
        }
        let body = json!({
            "body": request.body.to_string(),
            "header": request.headers,
            "extensions": extensions,
            "interceptor_params": {},
            "context": {
                "event_url": request.url,
                "event_id": uuid::Uuid::new_v4().to_string(),
                "trigger_id": format!("namespaces/{namespace}/triggers/{trigger}"),
            },
        });
        let answer: Value = http
            .build()?
            .post(url)
            .json(&body)
            .send()
            .await
            .with_context(|| format!("interceptor {name} at {url}"))?
            .error_for_status()?
            .json()
            .await?;
        Ok(Answer {
            continue_: answer["continue"].as_bool().unwrap_or(false),
            extensions: answer["extensions"]
                .as_object()
                .cloned()
                .unwrap_or_default(),
            message: answer["status"]["message"]
                .as_str()
                .unwrap_or("")
                .to_string(),
        })
    }
}
