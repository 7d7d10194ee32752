//! Resolving an ImageStreamSource's `spec.sink` to a URL: [`resolve::plan`] and
//! [`resolve::resolve`] decide (pure), [`resolve_sink`] does the one read between them, of the
//! object `spec.sink.ref` names, through the dynamic API (any kind: a Broker, a Knative
//! Service, a Tekton EventListener, a core Service).

pub mod resolve;

use kube::api::{Api, ApiResource, DynamicObject};
use serde_json::Value;

use k8s_openapi::api::authorization::v1::ResourceAttributes;

use self::resolve::{Plan, Resolved, Target, Unresolved};
use crate::access::{self, ServiceAccount};
use crate::adapter::crd::Destination;
use crate::adapter::crd::status::reason;
use crate::source::deliver::guard;

/// What resolving a sink ended in: a URL, or why not (for `SinkProvided=False`). A read that
/// failed for another reason than the object's absence or a refusal is an `Err`, retried.
pub(crate) type Resolution = Result<Resolved, Unresolved>;

/// `resolution` unless its URL is one a tenant may not send to ([`guard::Guard::refused`]):
/// then `SinkNotAllowed` with why.
pub(crate) fn guarded(resolution: Resolution, guard: &guard::Guard) -> Resolution {
    let resolved = resolution?;
    match resolved
        .url
        .parse::<url::Url>()
        .ok()
        .and_then(|u| guard.refused(&u))
    {
        Some(why) => Err(Unresolved {
            reason: reason::SINK_NOT_ALLOWED,
            message: why,
        }),
        None => Ok(resolved),
    }
}

/// Resolves `dest` of a source in `source_namespace` whose service account is `account`,
/// reading the object its `ref` names. A ref to another namespace is refused before anything is
/// read, unless `guard` allows refs across namespaces and `account` may
/// [`resolve::CROSS_NAMESPACE_VERB`] the object (F-7: a tenant learns nothing of another
/// namespace, and sends nowhere its account was not let).
pub(crate) async fn resolve_sink(
    client: &kube::Client,
    dest: &Destination,
    source_namespace: &str,
    account: &ServiceAccount,
    guard: &guard::Guard,
    cluster_domain: &str,
) -> Result<Resolution, kube::Error> {
    let target = match resolve::plan(dest, source_namespace) {
        Ok(Plan::Uri(resolved)) => return Ok(Ok(resolved)),
        Ok(Plan::Read(target)) => target,
        Err(unresolved) => return Ok(Err(unresolved)),
    };
    if let Some(refused) =
        resolve::other_namespace(&target, source_namespace, guard.cross_namespace)
    {
        return Ok(Err(refused));
    }
    if target.namespace != source_namespace {
        let review = account.review(ResourceAttributes {
            namespace: Some(target.namespace.clone()),
            verb: Some(resolve::CROSS_NAMESPACE_VERB.to_owned()),
            group: Some(target.gvk().group),
            resource: Some(target.plural.clone()),
            name: Some(target.name.clone()),
            ..Default::default()
        });
        if !access::allowed(&access::ask(client, &review).await?) {
            return Ok(Err(Unresolved {
                reason: reason::SINK_NOT_ALLOWED,
                message: format!(
                    "service account {:?} may not {} {}: grant it that verb on the object \
                     (a Role in namespace {:?}) to send there",
                    account.describe(),
                    resolve::CROSS_NAMESPACE_VERB,
                    target.describe(),
                    target.namespace
                ),
            }));
        }
    }
    let object = match read(client, &target).await {
        Ok(object) => object,
        Err(kube::Error::Api(status)) if status.code == 403 => {
            return Ok(Err(Unresolved {
                reason: reason::SINK_NOT_FOUND,
                message: format!(
                    "the adapter may not read {}: grant it get on {} (Knative's \
                     addressable-resolver ClusterRole aggregates such grants): {}",
                    target.describe(),
                    resource_name(&target),
                    status.message
                ),
            }));
        }
        Err(e) => return Err(e),
    };
    Ok(resolve::resolve(
        dest,
        &target,
        object.as_ref(),
        cluster_domain,
    ))
}

/// The object `target` names as JSON; None when it (or its kind) does not exist.
async fn read(client: &kube::Client, target: &Target) -> Result<Option<Value>, kube::Error> {
    let gvk = target.gvk();
    let resource = ApiResource::from_gvk_with_plural(&gvk, &target.plural);
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), &target.namespace, &resource);
    match api.get_opt(&target.name).await {
        Ok(Some(object)) => Ok(Some(serde_json::to_value(object).unwrap_or(Value::Null))),
        Ok(None) => Ok(None),
        // The kind itself is not served (its CRD is not installed).
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(None),
        Err(e) => Err(e),
    }
}

fn resource_name(target: &Target) -> String {
    match target.gvk().group.as_str() {
        "" => target.plural.clone(),
        group => format!("{}.{group}", target.plural),
    }
}

#[cfg(test)]
mod tests;
