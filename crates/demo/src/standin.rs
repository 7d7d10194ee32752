//! The demo's Tekton stand-ins without the demo around them, for the differential test against
//! real Triggers and Pipelines (`tests/it/realcluster_tekton/differential.rs`): what the
//! EventListener stand-in ([`super::listener`]) does with one HTTP request, and how the pipeline
//! stand-in ([`super::pipeline`] with [`super::schedule`]) runs a PipelineRun of `tekton/` when
//! each task it starts ends as the caller says. The same functions the demo runs, over the
//! `tekton/` files compiled into it; only the I/O (the API server, the CustomRuns, the
//! container tasks) is left out.

use std::collections::BTreeMap;

use futures::FutureExt;
use http::HeaderMap;
use serde_json::Value;

use super::interceptor::Interceptor;
use super::listener::{Interceptors, Triggered, body_of, triggers};
use super::pipeline::{Prepared, as_tekton_stores, check_name, prepare};
use super::request::Request;
use super::schedule::{self, RunContext};
use super::tekton::{TektonFiles, str_at};

pub use super::clusterinterceptor::ClusterInterceptors;
pub use super::pipeline::{TaskOutcome, TaskStatus};
pub use super::schedule::{Ended, RunCondition};

/// What the EventListener stand-in does with one request.
#[derive(Clone, Debug)]
pub struct ListenerAnswer {
    /// The HTTP status it answers (as the Triggers sink: 400 for a body that is not a JSON
    /// object, else 202).
    pub status: u16,
    /// The PipelineRuns it creates, as rendered and as Tekton then stores them.
    pub created: Vec<Value>,
    /// Why a trigger created nothing: dropped by an interceptor, failed, or a rendered
    /// PipelineRun the API server would refuse.
    pub not_created: Vec<String>,
}

/// The EventListener stand-in of namespace `namespace` over one request (`headers`, `body`) to
/// the path `/`, calling ClusterInterceptors other than `cel` through `interceptors`.
pub async fn eventlistener(
    interceptors: &ClusterInterceptors,
    namespace: &str,
    headers: &HeaderMap,
    body: &[u8],
) -> anyhow::Result<ListenerAnswer> {
    let files = TektonFiles::embedded()?;
    let cel = Interceptor::new()?;
    let Some(json) = body_of(body) else {
        return Ok(ListenerAnswer {
            status: 400,
            created: Vec::new(),
            not_created: vec!["400: the body is not a JSON object".into()],
        });
    };
    let request = Request::from_http("/", headers, json);
    let mut answer = ListenerAnswer {
        status: 202,
        created: Vec::new(),
        not_created: Vec::new(),
    };
    let on = Interceptors {
        cel: &cel,
        others: interceptors,
        namespace,
    };
    match triggers(&files, &on, &request).await {
        Ok(all) => {
            for triggered in all {
                match triggered {
                    Triggered::Dropped { why } => answer.not_created.push(why),
                    Triggered::Rendered { resources, .. } => {
                        for mut r in resources {
                            as_tekton_stores(&mut r);
                            match check_name(str_at(&r, "/metadata/name").unwrap_or("")) {
                                Ok(()) => answer.created.push(r),
                                Err(e) => answer.not_created.push(format!("{e:#}")),
                            }
                        }
                    }
                }
            }
        }
        Err(e) => answer.not_created.push(format!("trigger failed: {e:#}")),
    }
    Ok(answer)
}

/// The pipeline stand-in over `pipeline_run` (in `namespace`): each task it starts ends as
/// `outcome` says, given the task's name and its resolved params.
pub async fn pipeline_run(
    pipeline_run: Value,
    namespace: &str,
    mut outcome: impl FnMut(&str, &BTreeMap<String, String>) -> TaskOutcome,
) -> anyhow::Result<Ended> {
    let files = TektonFiles::embedded()?;
    let Prepared {
        name, spec, params, ..
    } = prepare(&files, pipeline_run)?;
    let ctx = RunContext {
        run: &name,
        namespace,
        params: &params,
    };
    schedule::execute(
        &ctx,
        &spec,
        |task, resolved| {
            let ended = str_at(task, "/name").map(|t| outcome(t, &resolved));
            async move { ended }.boxed()
        },
        |_, _| {},
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(id: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in [
            ("ce-specversion", "1.0"),
            ("ce-id", id),
            ("ce-type", "dev.imagegate.imagestreamtag.updated"),
            ("ce-imagetag", "candidate"),
            ("ce-namespace", "notebooks"),
        ] {
            h.insert(k, v.parse().unwrap());
        }
        h
    }

    const BODY: &[u8] = br#"{"namespace": "notebooks", "imageStream": "nb", "tag": "candidate", "digest": "sha256:1"}"#;

    /// ClusterInterceptors behind an API server nobody listens at.
    fn unreachable() -> ClusterInterceptors {
        imagegate::runtime::tls::install_crypto_provider();
        let config = kube::Config::new("http://127.0.0.1:9".parse().unwrap());
        ClusterInterceptors::new(kube::Client::try_from(config).unwrap())
    }

    #[tokio::test]
    async fn the_listener_refuses_a_body_that_is_no_json_object_and_fails_a_trigger_whose_interceptor_cannot_be_reached()
     {
        let ci = unreachable();
        for body in [&b"{not json"[..], b"[1, 2]"] {
            let dropped = eventlistener(&ci, "notebooks", &headers("0a1c"), body)
                .await
                .unwrap();
            assert_eq!(dropped.status, 400);
            assert!(dropped.created.is_empty(), "{dropped:?}");
        }
        let failed = eventlistener(&ci, "notebooks", &headers("0a1b"), BODY)
            .await
            .unwrap();
        assert_eq!(
            failed.status, 202,
            "Triggers answers 202 whatever its triggers do"
        );
        assert!(failed.created.is_empty(), "{failed:?}");
        assert!(
            failed.not_created[0].contains("url resolution failed for interceptor imagegate"),
            "{failed:?}"
        );
    }
}
