//! The ImageStreamSource reconciler: it computes and writes a source's status, in a fixed
//! order: validate the spec (a contradiction is `Ready=False InvalidSpec`, nothing else asked)
//! -> resolve the sink ([`super::sink`]) -> the namespaces it selects -> may its service
//! account read them ([`super::permissions`]) -> the desired status ([`status::desired`],
//! pure) -> one status write, only when it differs beyond transition times.
//!
//! [`observe`] gathers the facts and [`write()`] writes the status; [`reconcile`] is both. The
//! sink object is not watched: [`run`] re-reconciles every source every [`RESYNC`], and so
//! does the multi-tenant adapter ([`crate::adapter`], which calls [`observe`] and [`write()`] from its
//! own loop, as it also needs the facts to serve the source), so a sink that gets or changes
//! its address is seen within that period.

pub mod status;

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Namespace;
use kube::ResourceExt;
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use serde_json::{Value, json};
use tracing::{info, warn};

use self::status::Facts;
use super::crd::{ImageStreamSource, ImageStreamSourceSpec, Mode};
use super::permissions::{self, Scope};
use super::sink;
use crate::access::ServiceAccount;

/// How often every source is reconciled again, to see sink addresses change.
pub(crate) const RESYNC: Duration = Duration::from_secs(30);

/// What the reconciler runs with.
#[derive(Clone)]
pub struct Context {
    /// The API client (the adapter's own identity).
    pub client: kube::Client,
    /// The cluster domain of core Services' URLs (`cluster.local`).
    pub cluster_domain: String,
    /// The API server's URL (the `source` of the resource and reference modes' events).
    pub api_server_url: String,
    /// Whose tokens go to a sink with an audience (the adapter's own ServiceAccount).
    pub identity: Option<std::sync::Arc<crate::source::deliver::oidc::Identity>>,
    /// Where a tenant's sink may not point.
    pub guard: crate::source::deliver::guard::Guard,
}

/// A reconcile that failed (and is retried).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The source has no namespace (it is namespaced).
    #[error("the ImageStreamSource {0:?} has no namespace")]
    NoNamespace(String),
    /// Reading the sink object failed (other than absent or forbidden).
    #[error("resolving the sink of {source_name}: {error}")]
    ResolveSink {
        /// `namespace/name`.
        source_name: String,
        /// The API's error.
        error: kube::Error,
    },
    /// Listing the namespaces a selector selects failed.
    #[error("listing the namespaces {source_name} selects: {error}")]
    ListNamespaces {
        /// `namespace/name`.
        source_name: String,
        /// The API's error.
        error: kube::Error,
    },
    /// Writing the status failed.
    #[error("writing the status of {source_name}: {error}")]
    WriteStatus {
        /// `namespace/name`.
        source_name: String,
        /// The API's error.
        error: kube::Error,
    },
}

/// A contradiction in `spec` that no reconcile can fix, in words for the user.
pub(crate) fn invalid(spec: &ImageStreamSourceSpec) -> Option<String> {
    use super::crd::{MAX_EXTENSIONS, MAX_NAMES};
    for (field, n, max) in [
        ("namespaces", spec.namespaces.len(), MAX_NAMES),
        ("tags", spec.tags.len(), MAX_NAMES),
        (
            "ceOverrides.extensions",
            spec.ce_overrides.as_ref().map_or(0, |o| o.extensions.len()),
            MAX_EXTENSIONS,
        ),
    ] {
        if n > max {
            return Some(format!(
                "spec.{field} has {n} entries, more than {max}: use a namespaceSelector, or \
                 split the source"
            ));
        }
    }
    if spec.namespace_selector.is_some() && !spec.namespaces.is_empty() {
        return Some(
            "spec.namespaces and spec.namespaceSelector are both set: keep one".to_owned(),
        );
    }
    for (field, selector) in [
        ("namespaceSelector", &spec.namespace_selector),
        ("selector", &spec.selector),
    ] {
        if let Some(Err(why)) = selector.as_ref().map(|s| s.to_query()) {
            return Some(format!("spec.{field}: {why}"));
        }
    }
    None
}

/// What a reconcile observed of a source: the facts its status is computed from, and the
/// namespaces it selects and those its service account may not read (the multi-tenant
/// adapter serves the difference).
#[derive(Clone, Debug)]
pub(crate) struct Observed {
    /// The facts of the status.
    pub facts: Facts,
    /// The namespaces selected (None: the spec is invalid).
    pub scope: Option<Scope>,
    /// The namespaces where a review refused a verb (`""`: cluster-wide); None when the
    /// reviews could not be asked (or the spec is invalid).
    pub denied: Option<Vec<String>>,
}

/// Reconciles `source`: its status, written when it changed. Returns whether it was written.
pub async fn reconcile(source: &ImageStreamSource, ctx: &Context) -> Result<bool, Error> {
    let observed = observe(source, ctx).await?;
    write(source, &observed.facts, ctx).await
}

/// Observes `source`: validates its spec, resolves its sink, lists the namespaces it selects
/// and asks whether its service account may read them.
pub(crate) async fn observe(source: &ImageStreamSource, ctx: &Context) -> Result<Observed, Error> {
    let name = source.name_any();
    let namespace = source
        .namespace()
        .ok_or_else(|| Error::NoNamespace(name.clone()))?;
    let source_name = format!("{namespace}/{name}");
    let spec = &source.spec;
    let mut facts = Facts {
        generation: source.metadata.generation,
        invalid: invalid(spec),
        sink: None,
        permissions: None,
        mode: spec.mode.unwrap_or(Mode::ImageStreamTag),
        api_server_url: ctx.api_server_url.clone(),
        listed: None,
        checkpoint: None,
    };
    if facts.invalid.is_some() {
        return Ok(Observed {
            facts,
            scope: None,
            denied: None,
        });
    }
    let account = ServiceAccount::or_default(&namespace, spec.service_account_name.as_deref());
    let resolution = sink::resolve_sink(
        &ctx.client,
        &spec.sink,
        &namespace,
        &account,
        &ctx.guard,
        &ctx.cluster_domain,
    )
    .await
    .map_err(|error| Error::ResolveSink {
        source_name: source_name.clone(),
        error,
    })?;
    facts.sink = Some(sink::guarded(resolution, &ctx.guard));
    let scope = scope(&ctx.client, spec, &namespace)
        .await
        .map_err(|error| Error::ListNamespaces {
            source_name: source_name.clone(),
            error,
        })?;
    let mut denied = None;
    // The namespaces the tenant may be told about: those it named, and its own.
    let mut named = spec.namespaces.clone();
    named.push(namespace.clone());
    facts.permissions = match permissions::check_each(&ctx.client, &account, &scope, &named).await {
        Ok((verdict, refused)) => {
            let unnamed: Vec<&String> = refused
                .iter()
                .filter(|n| !n.is_empty() && !named.contains(n))
                .collect();
            if !unnamed.is_empty() {
                info!(namespace = %namespace, source = %name, namespaces = ?unnamed, "the source's service account may not read these namespaces its namespaceSelector selects (the status counts them without names)");
            }
            denied = Some(refused);
            Some(verdict)
        }
        Err(e) => {
            warn!(namespace = %namespace, error = %e, "the SubjectAccessReviews failed");
            None
        }
    };
    Ok(Observed {
        facts,
        scope: Some(scope),
        denied,
    })
}

/// Writes the status `facts` give `source`, when it differs beyond transition times. Returns
/// whether it was written.
pub(crate) async fn write(
    source: &ImageStreamSource,
    facts: &Facts,
    ctx: &Context,
) -> Result<bool, Error> {
    let name = source.name_any();
    let namespace = source
        .namespace()
        .ok_or_else(|| Error::NoNamespace(name.clone()))?;
    let source_name = format!("{namespace}/{name}");
    let before = source.status.as_ref();
    let desired = status::desired(before, facts, chrono::Utc::now());
    if before.is_some_and(|b| status::same_ignoring_timestamps(b, &desired)) {
        return Ok(false);
    }
    let api: Api<ImageStreamSource> = Api::namespaced(ctx.client.clone(), &namespace);
    api.patch_status(
        &name,
        &PatchParams::default(),
        &Patch::Merge(&patch(&desired)),
    )
    .await
    .map_err(|error| Error::WriteStatus {
        source_name: source_name.clone(),
        error,
    })?;
    let ready = desired.conditions.first();
    info!(
        namespace = %namespace,
        source = %name,
        ready = ready.map_or("", |c| c.status.as_str()),
        reason = ready.and_then(|c| c.reason.as_deref()).unwrap_or(""),
        "ImageStreamSource status written"
    );
    Ok(true)
}

/// A merge patch that sets the status to `desired`: the fields it leaves out are nulled, so
/// that a sink URI that no longer resolves is removed rather than kept. The delivery counters
/// are left out: the adapter that delivers owns them, and a stale copy must not overwrite them.
pub(crate) fn patch(desired: &super::crd::ImageStreamSourceStatus) -> Value {
    let mut status = serde_json::to_value(desired).unwrap_or_else(|_| json!({}));
    if let Value::Object(map) = &mut status {
        for field in ["sinkUri", "sinkCACerts", "observedGeneration"] {
            map.entry(field).or_insert(Value::Null);
        }
        map.remove("deliveries");
    }
    json!({ "status": status })
}

/// The namespaces `spec` selects, for a source in `namespace`: `namespaces`, else those
/// `namespaceSelector` matches (every one, cluster-wide, when it is empty), else the source's
/// own.
pub(crate) async fn scope(
    client: &kube::Client,
    spec: &ImageStreamSourceSpec,
    namespace: &str,
) -> Result<Scope, kube::Error> {
    if !spec.namespaces.is_empty() {
        let mut names = spec.namespaces.clone();
        names.sort();
        names.dedup();
        return Ok(Scope::Namespaces(names));
    }
    let Some(selector) = &spec.namespace_selector else {
        return Ok(Scope::Namespaces(vec![namespace.to_owned()]));
    };
    if selector.is_empty() {
        return Ok(Scope::All);
    }
    // invalid() refused a selector without a query before this is reached.
    let query = selector.to_query().unwrap_or_default();
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let listed = namespaces
        .list(&ListParams::default().labels(&query))
        .await?;
    let mut names: Vec<String> = listed.items.iter().map(|n| n.name_any()).collect();
    names.sort();
    Ok(Scope::Namespaces(names))
}

/// Reconciles every ImageStreamSource of the cluster until `shutdown` resolves: on each change
/// of one, and every [`RESYNC`].
pub async fn run(
    ctx: Context,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) {
    let api: Api<ImageStreamSource> = Api::all(ctx.client.clone());
    Controller::new(api, watcher::Config::default())
        .graceful_shutdown_on(shutdown)
        .run(
            |source: Arc<ImageStreamSource>, ctx: Arc<Context>| async move {
                reconcile(&source, &ctx).await?;
                Ok::<_, Error>(Action::requeue(RESYNC))
            },
            |_source, error: &Error, _ctx| {
                warn!(error = %error, "ImageStreamSource reconcile failed; retrying");
                Action::requeue(Duration::from_secs(5))
            },
            Arc::new(ctx),
        )
        .for_each(|_| async {})
        .await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adapter::crd::ImageStreamSourceStatus;
    use crate::adapter::crd::status::Deliveries;

    #[test]
    fn lists_past_their_bound_make_the_spec_invalid_with_what_to_do() {
        let names = |n: usize| (0..n).map(|i| format!("n{i}")).collect::<Vec<_>>();
        let spec = |namespaces, tags| ImageStreamSourceSpec {
            namespaces,
            tags,
            ..Default::default()
        };
        assert_eq!(invalid(&spec(names(100), names(100))), None);
        let why = invalid(&spec(names(101), vec![])).unwrap();
        assert!(
            why.starts_with("spec.namespaces has 101 entries, more than 100"),
            "{why}"
        );
        let why = invalid(&spec(vec![], names(5000))).unwrap();
        assert!(why.starts_with("spec.tags has 5000 entries"), "{why}");
        let overrides = ImageStreamSourceSpec {
            ce_overrides: Some(crate::adapter::crd::CloudEventOverrides {
                extensions: names(21).into_iter().map(|n| (n, "v".into())).collect(),
            }),
            ..Default::default()
        };
        assert!(
            invalid(&overrides)
                .unwrap()
                .starts_with("spec.ceOverrides.extensions")
        );
    }

    #[test]
    fn the_patch_removes_a_sink_gone_and_leaves_the_counters_alone() {
        let desired = ImageStreamSourceStatus {
            deliveries: Some(Deliveries {
                delivered: 9,
                ..Default::default()
            }),
            ..Default::default()
        };
        assert_eq!(
            patch(&desired),
            json!({"status": {"sinkUri": null, "sinkCACerts": null, "observedGeneration": null}})
        );
    }
}
