//! The source's start-up check of what only the API server can say: that it serves ImageStreams,
//! takes the label selector and lets the source list them in every watched scope. A refusal is
//! permanent (no OpenShift image API, a selector the server refuses, RBAC) and ends the source
//! with one line that says what to fix, instead of a watch that retries a 400 or a 403 forever
//! as if it were transient; an API server in trouble is left to the watch, which retries.

use kube::api::{Api, ListParams};

use crate::api::{ImageStream, status_code};

/// A permanent refusal found at start.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(crate) struct PreflightError(String);

/// Lists one ImageStream of each scope, with the selector.
pub(crate) async fn check(
    client: &kube::Client,
    scopes: &[Option<String>],
    selector: Option<&str>,
) -> Result<(), PreflightError> {
    let mut params = ListParams::default().limit(1);
    if let Some(selector) = selector {
        params = params.labels(selector);
    }
    for namespace in scopes {
        let api: Api<ImageStream> = match namespace {
            None => Api::all(client.clone()),
            Some(ns) => Api::namespaced(client.clone(), ns),
        };
        let Err(e) = api.list_metadata(&params).await else {
            continue;
        };
        let said = match &e {
            kube::Error::Api(s) => s.message.clone(),
            other => other.to_string(),
        };
        let whereabouts = match namespace {
            Some(ns) => format!(" in namespace {ns:?}"),
            None => String::new(),
        };
        let why = match status_code(&e) {
            Some(400) => format!(
                "the API server refuses to list ImageStreams with --selector {:?}",
                selector.unwrap_or_default()
            ),
            Some(403) => format!(
                "the source may not list ImageStreams{whereabouts}: grant it list and watch on \
                 imagestreams (config/201-clusterrole-source.yaml; with --namespace, \
                 config/namespaced/)"
            ),
            Some(404) => "the API server does not serve image.openshift.io/v1 ImageStreams: \
                          imagegate needs OpenShift or OKD"
                .to_string(),
            _ => continue,
        };
        return Err(PreflightError(format!(
            "{why} (the API server says: {said})"
        )));
    }
    Ok(())
}
