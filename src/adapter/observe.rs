//! One observation of a source, off the supervisor's loop: the status reconcile
//! ([`reconcile::observe`], then the status written when it changed), its dead-letter sink
//! resolved, and what the supervisor needs of it: the route, the readiness, the namespaces.

use std::sync::Arc;

use kube::ResourceExt;
use tracing::warn;

use super::index::SourceId;
use crate::adapter::crd::ImageStreamSource;
use crate::adapter::permissions::Scope;
use crate::adapter::reconcile::{self, Context, status::Facts};
use crate::adapter::sink;
use crate::source::deliver::job::Route;

/// What an observation found.
#[derive(Debug)]
pub(crate) struct Observation {
    /// The source.
    pub id: SourceId,
    /// Its uid and generation, when observed.
    pub uid: String,
    /// Its generation.
    pub generation: Option<i64>,
    /// `True`, `False` or `Unknown`.
    pub ready: &'static str,
    /// Where its events go (None: they wait).
    pub route: Option<Route>,
    /// The namespaces it selects (None: invalid spec).
    pub scope: Option<Scope>,
    /// Those its service account may not read (None: the reviews could not be asked, or the
    /// spec is invalid).
    pub denied: Option<Vec<String>>,
    /// What was asked of the API server for it, for the next observation to reuse.
    pub asked: Arc<Asked>,
    /// Whether its pipeline had listed when it was observed (then nothing is left to reuse it
    /// for until its next pipeline).
    pub listed: bool,
}

/// The `Ready` status the facts give.
pub(crate) fn ready(facts: &Facts) -> &'static str {
    if facts.checkpoint.is_some() {
        return "False";
    }
    match (&facts.invalid, &facts.sink, &facts.permissions) {
        (Some(_), _, _) | (_, Some(Err(_)), _) => "False",
        (_, _, Some(v)) if !v.sufficient => "False",
        (None, Some(Ok(_)), Some(_)) if facts.listed != Some(false) => "True",
        _ => "Unknown",
    }
}

/// The route of a sink resolved to `sink` and a dead-letter sink to `dead_letter` (None: there
/// is none). None when either did not resolve to a URL: the events wait.
pub(crate) fn route(
    sink: Option<&str>,
    dead_letter: Option<Result<String, String>>,
    auth: Option<std::sync::Arc<crate::source::deliver::oidc::Oidc>>,
    raw_uri: bool,
) -> Option<Route> {
    let sink = sink?.parse().ok()?;
    let dead_letter_sink = match dead_letter {
        None => None,
        Some(Ok(url)) => Some(url.parse().ok()?),
        Some(Err(_)) => return None,
    };
    Some(Route {
        sink,
        dead_letter_sink,
        auth,
        error_bodies: !raw_uri,
    })
}

/// What one full observation found that the next may reuse when only the pipeline's listing
/// changed (the source's `Ready` waits for it): the facts asked of the API server, and the route.
#[derive(Debug)]
pub(crate) struct Asked {
    /// The generation they are about.
    pub generation: Option<i64>,
    /// The facts (sink, scope, permissions).
    pub observed: reconcile::Observed,
    /// The route they gave (None: events wait).
    pub route: Option<Route>,
}

/// Observes `source`, writes its status, and returns what was found; `listed` is whether its
/// pipeline (of this generation) has recorded the first list of its namespaces, `checkpoint`
/// why its checkpoint cannot be served, if it cannot. With `reuse` of this generation, nothing
/// is asked again (the sink, the namespaces, the reviews): only the status is written anew (its
/// pipeline has listed). A failure is logged and is None: the supervisor keeps what it had, and
/// the next resync tries again.
pub(crate) async fn run(
    ctx: Context,
    source: Arc<ImageStreamSource>,
    listed: bool,
    checkpoint: Option<String>,
    reuse: Option<Arc<Asked>>,
) -> Option<Observation> {
    let id = (source.namespace().unwrap_or_default(), source.name_any());
    let asked = match reuse.filter(|a| a.generation == source.metadata.generation) {
        Some(asked) => asked,
        None => Arc::new(ask(&ctx, &source, &id).await?),
    };
    let mut facts = asked.observed.facts.clone();
    facts.listed = Some(listed);
    facts.checkpoint = checkpoint;
    if let Err(e) = reconcile::write(&source, &facts, &ctx).await {
        warn!(namespace = %id.0, source = %id.1, error = %e, "writing the ImageStreamSource status failed");
    }
    Some(Observation {
        id: id.clone(),
        uid: source.uid().unwrap_or_default(),
        generation: source.metadata.generation,
        ready: ready(&facts),
        route: asked.route.clone(),
        scope: asked.observed.scope.clone(),
        denied: asked.observed.denied.clone(),
        asked: asked.clone(),
        listed,
    })
}

/// Asks the API server what a source's status and route need: its sink and dead-letter sink,
/// the namespaces it selects, its service account's permissions.
async fn ask(ctx: &Context, source: &ImageStreamSource, id: &SourceId) -> Option<Asked> {
    let observed = match reconcile::observe(source, ctx).await {
        Ok(o) => o,
        Err(e) => {
            warn!(namespace = %id.0, source = %id.1, error = %e, "observing the ImageStreamSource failed; retrying at the next resync");
            return None;
        }
    };
    let account = crate::access::ServiceAccount::or_default(
        &id.0,
        source.spec.service_account_name.as_deref(),
    );
    let dead_letter = match source
        .spec
        .delivery
        .as_ref()
        .and_then(|d| d.dead_letter_sink.as_ref())
    {
        None => None,
        Some(dest) => Some(
            match sink::resolve_sink(
                &ctx.client,
                dest,
                &id.0,
                &account,
                &ctx.guard,
                &ctx.cluster_domain,
            )
            .await
            {
                Ok(resolution) => match sink::guarded(resolution, &ctx.guard) {
                    Ok(resolved) => Ok(resolved.url),
                    Err(unresolved) => Err(unresolved.message),
                },
                Err(e) => Err(e.to_string()),
            },
        ),
    };
    if let Some(Err(why)) = &dead_letter {
        warn!(namespace = %id.0, source = %id.1, reason = %why, "the dead-letter sink does not resolve; events wait");
    }
    let sink_url = match &observed.facts.sink {
        Some(Ok(resolved)) => Some(resolved.url.as_str()),
        _ => None,
    };
    // A sink with an audience gets the adapter's token for it (Knative's authentication-oidc).
    let audience = match &observed.facts.sink {
        Some(Ok(resolved)) => resolved.audience.as_deref(),
        _ => None,
    };
    let auth = match (audience, &ctx.identity) {
        (Some(a), Some(identity)) => Some(identity.for_audience(a)),
        (Some(a), None) => {
            warn!(namespace = %id.0, source = %id.1, audience = a, "the sink has an OIDC audience but the adapter has no --oidc-service-account: it sends no token, and a sink that wants one refuses the events (held)");
            None
        }
        (None, _) => None,
    };
    // A tenant's raw URI may point anywhere the adapter reaches: its answers do not go back to
    // the tenant through the dead-letter sink.
    let route = route(
        sink_url,
        dead_letter,
        auth,
        source.spec.sink.r#ref.is_none(),
    );
    Some(Asked {
        generation: source.metadata.generation,
        observed,
        route,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_wait_while_the_sink_or_the_dead_letter_sink_does_not_resolve() {
        let ok = route(Some("http://a.ds.svc/"), None, None, false).unwrap();
        assert_eq!(ok.sink.as_str(), "http://a.ds.svc/");
        assert_eq!(ok.dead_letter_sink, None);
        assert_eq!(route(None, None, None, false), None);
        assert_eq!(
            route(Some("http://a/"), Some(Err("gone".into())), None, false),
            None
        );
        let dl = route(
            Some("http://a/"),
            Some(Ok("http://dl/".into())),
            None,
            false,
        )
        .unwrap();
        assert_eq!(dl.dead_letter_sink.unwrap().as_str(), "http://dl/");
    }
}
