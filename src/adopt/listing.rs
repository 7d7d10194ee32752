//! The drift check's reads (the I/O of [`super::check`], shared by `imagegate adopt --check` and
//! the controller's drift watch): the adopted streams (labelled [`names::MANAGED_LABEL`]), and
//! the streams an ImagePromotion gates ([`gates`]), by hand or adopted. Lists are read a page
//! at a time and each stream is judged as it is read; only the drifted ones are kept, as names,
//! a reference and what was found, so a namespace of many streams costs one page of memory.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::ObjectReference;
use kube::api::{Api, ListParams};
use kube::{Client, Resource, ResourceExt};

use super::check::{Found, all_drift, remedies};
use super::names;
use super::shape::is_managed;
use crate::api::{ImageStream, status_code};
use crate::controller::crd::ImagePromotion;
use crate::controller::policy::gates;

/// Streams asked for per page.
const PAGE: u32 = 500;

/// A stream that drifted.
#[derive(Clone, Debug)]
pub(crate) struct Drifted {
    /// Its namespace.
    pub(crate) namespace: String,
    /// Its name.
    pub(crate) name: String,
    /// The reference an Event names.
    pub(crate) reference: ObjectReference,
    /// What was found, in the order reported.
    pub(crate) found: Vec<Found>,
    /// The lines that say how to repair it ([`remedies`]).
    pub(crate) remedies: Vec<String>,
}

/// What a drift check found.
#[derive(Clone, Debug, Default)]
pub(crate) struct Checked {
    /// How many streams were checked (adopted or gated), each once.
    pub(crate) checked: usize,
    /// The drifted ones, by namespace and name.
    pub(crate) drifted: Vec<Drifted>,
}

/// A list that failed: what was listed, and why.
#[derive(Debug, thiserror::Error)]
#[error("cannot list {what}: {source}")]
pub(crate) struct ListError {
    /// `ImagePromotions` or `ImageStreams`.
    pub(crate) what: &'static str,
    /// The API's answer.
    #[source]
    pub(crate) source: kube::Error,
}

fn apis<K>(client: &Client, namespaces: &[String]) -> Vec<Api<K>>
where
    K: kube::Resource<Scope = kube::core::NamespaceResourceScope>,
    K::DynamicType: Default,
{
    if namespaces.is_empty() {
        return vec![Api::all(client.clone())];
    }
    namespaces
        .iter()
        .map(|ns| Api::namespaced(client.clone(), ns))
        .collect()
}

/// Every page of `api` under `params`, each handed to `each` as it comes.
async fn pages(
    api: &Api<ImageStream>,
    params: ListParams,
    mut each: impl FnMut(ImageStream),
) -> Result<(), ListError> {
    let mut params = params.limit(PAGE);
    loop {
        let page = api.list(&params).await.map_err(|source| ListError {
            what: "ImageStreams",
            source,
        })?;
        let next = page.metadata.continue_.clone().filter(|c| !c.is_empty());
        page.items.into_iter().for_each(&mut each);
        match next {
            Some(token) => params = params.continue_token(&token),
            None => return Ok(()),
        }
    }
}

/// Checks `namespaces` (every namespace when empty): the ImagePromotions (a missing CRD, 404,
/// reads as none), then every stream of a namespace that has one (judged if adopted or gated),
/// then the adopted streams of the other namespaces.
pub(crate) async fn check(client: &Client, namespaces: &[String]) -> Result<Checked, ListError> {
    let mut promotions: Vec<ImagePromotion> = Vec::new();
    for api in apis::<ImagePromotion>(client, namespaces) {
        match api.list(&ListParams::default()).await {
            Ok(list) => promotions.extend(list.items),
            Err(e) if status_code(&e) == Some(404) => {}
            Err(source) => {
                return Err(ListError {
                    what: "ImagePromotions",
                    source,
                });
            }
        }
    }
    let mut out = Checked::default();
    let mut judge = |is: ImageStream| {
        out.checked += 1;
        let found = all_drift(&is, &promotions);
        if found.is_empty() {
            return;
        }
        out.drifted.push(Drifted {
            namespace: is.namespace().unwrap_or_default(),
            name: is.name_any(),
            reference: is.object_ref(&()),
            remedies: remedies(&is, &found),
            found,
        });
    };
    let governed: BTreeSet<String> = promotions.iter().filter_map(|p| p.namespace()).collect();
    for ns in &governed {
        let api: Api<ImageStream> = Api::namespaced(client.clone(), ns);
        let gated = |is: &ImageStream| {
            is_managed(is)
                || promotions
                    .iter()
                    .filter(|p| p.namespace().as_deref() == Some(ns.as_str()))
                    .any(|p| gates(&p.spec, ns, is))
        };
        pages(&api, ListParams::default(), |is| {
            if gated(&is) {
                judge(is);
            }
        })
        .await?;
    }
    let managed = ListParams::default().labels(&format!("{}=true", names::MANAGED_LABEL));
    for api in apis::<ImageStream>(client, namespaces) {
        pages(&api, managed.clone(), |is| {
            // Those of a governed namespace were judged above.
            if !is.namespace().is_some_and(|ns| governed.contains(&ns)) {
                judge(is);
            }
        })
        .await?;
    }
    out.drifted
        .sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    Ok(out)
}
