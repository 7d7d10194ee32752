//! The streams a drift check looks at (the I/O of [`super::check`], shared by `imagegate adopt
//! --check` and the controller's drift watch): the adopted ones (labelled
//! [`names::MANAGED_LABEL`]), and the streams an ImagePromotion governs, gated by hand or not,
//! with the ImagePromotions of their namespaces.

use std::collections::{BTreeMap, BTreeSet};

use kube::api::{Api, ListParams};
use kube::{Client, ResourceExt};

use super::check::{Found, all_drift};
use super::names;
use crate::api::{ImageStream, status_code};
use crate::controller::crd::ImagePromotion;
use crate::controller::params::DEFAULT_CANDIDATE_TAG;
use crate::controller::policy::governs;

/// What a drift check reads.
#[derive(Clone, Debug, Default)]
pub struct Checked {
    /// The adopted streams and the governed ones, each once, sorted by namespace and name.
    pub streams: Vec<ImageStream>,
    /// The ImagePromotions of the namespaces read.
    pub promotions: Vec<ImagePromotion>,
}

impl Checked {
    /// Each stream with its drifts (empty when it is in shape).
    pub fn drifts(&self) -> impl Iterator<Item = (&ImageStream, Vec<Found>)> {
        self.streams
            .iter()
            .map(|is| (is, all_drift(is, &self.promotions)))
    }
}

/// Lists what a check of `namespaces` (every namespace when empty) reads: the ImagePromotions (a
/// missing CRD, 404, reads as none), the adopted streams, and every stream of a namespace that
/// has an ImagePromotion, kept where one governs it.
pub async fn list(client: &Client, namespaces: &[String]) -> Result<Checked, kube::Error> {
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
    let mut promotions = Vec::new();
    for api in apis::<ImagePromotion>(client, namespaces) {
        match api.list(&ListParams::default()).await {
            Ok(list) => promotions.extend(list.items),
            Err(e) if status_code(&e) == Some(404) => {}
            Err(e) => return Err(e),
        }
    }
    let mut streams: BTreeMap<(String, String), ImageStream> = BTreeMap::new();
    let mut keep = |is: ImageStream| {
        streams.insert((is.namespace().unwrap_or_default(), is.name_any()), is);
    };
    let managed = ListParams::default().labels(&format!("{}=true", names::MANAGED_LABEL));
    for api in apis::<ImageStream>(client, namespaces) {
        api.list(&managed)
            .await?
            .items
            .into_iter()
            .for_each(&mut keep);
    }
    let governed: BTreeSet<String> = promotions.iter().filter_map(|p| p.namespace()).collect();
    for ns in governed {
        let api: Api<ImageStream> = Api::namespaced(client.clone(), &ns);
        for is in api.list(&ListParams::default()).await?.items {
            let name = is.name_any();
            let of_ns = |p: &&ImagePromotion| p.namespace().as_deref() == Some(ns.as_str());
            // A namespace-wide ImagePromotion gates the streams that have its candidate tag.
            let gates = |p: &ImagePromotion| {
                let named = p
                    .spec
                    .image_stream
                    .as_deref()
                    .is_some_and(|n| !n.is_empty());
                let candidate = p
                    .spec
                    .candidate_tag
                    .as_deref()
                    .filter(|c| !c.is_empty())
                    .unwrap_or(DEFAULT_CANDIDATE_TAG);
                governs(&p.spec, &ns, &name) && (named || is.spec_tag(candidate).is_some())
            };
            if promotions.iter().filter(of_ns).any(gates) {
                keep(is);
            }
        }
    }
    Ok(Checked {
        streams: streams.into_values().collect(),
        promotions,
    })
}
