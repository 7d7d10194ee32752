//! Whose checkpoint it is: the single source's, or an ImageStreamSource's in the multi-tenant
//! adapter, told apart by the labels of their ConfigMaps.

use std::collections::BTreeMap;

use super::fit;

pub(super) const LABELS: [(&str, &str); 2] = [
    ("app.kubernetes.io/name", "imagegate"),
    ("app.kubernetes.io/component", "source-checkpoint"),
];

/// The ImageStreamSource a checkpoint belongs to, in the multi-tenant adapter. Its ConfigMaps
/// live in the adapter's own namespace, never the tenant's (a tenant cannot make or edit them,
/// and the adapter needs no ConfigMap right outside its namespace, F-6, F-9); they carry
/// [`MANAGED_BY`], the component `imagestreamsource-checkpoint` (so the single source's list
/// never reads them) and the source's namespace, name and uid, so that they are found per source
/// and deleted when it goes (no ownerReference: an owner must be in the dependent's namespace).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckpointOwner {
    /// The source's namespace.
    pub namespace: String,
    /// The source's name.
    pub name: String,
    /// The source's uid.
    pub uid: String,
}

/// The label naming the ImageStreamSource a checkpoint ConfigMap belongs to.
pub const OWNER_LABEL: &str = "sources.imagegate.dev/imagestreamsource";
/// The label naming that source's namespace.
pub const OWNER_NAMESPACE_LABEL: &str = "sources.imagegate.dev/namespace";
/// The label with that source's uid (a source deleted and made again has a new one).
pub const OWNER_UID_LABEL: &str = "sources.imagegate.dev/uid";
/// `app.kubernetes.io/managed-by: imagegate`, on the ConfigMaps of an owned checkpoint.
pub const MANAGED_BY: (&str, &str) = ("app.kubernetes.io/managed-by", "imagegate");
/// The component label of an owned checkpoint's ConfigMaps.
pub const OWNED_COMPONENT: &str = "imagestreamsource-checkpoint";

impl CheckpointOwner {
    /// The labels that select the ConfigMaps of a checkpoint owned by `owner` (None: the single
    /// source's).
    pub(crate) fn labels(owner: Option<&CheckpointOwner>) -> BTreeMap<String, String> {
        let mut labels: BTreeMap<String, String> = LABELS
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        if let Some(owner) = owner {
            labels.insert(LABELS[1].0.into(), OWNED_COMPONENT.into());
            labels.insert(MANAGED_BY.0.into(), MANAGED_BY.1.into());
            labels.insert(OWNER_NAMESPACE_LABEL.into(), owner.namespace.clone());
            labels.insert(OWNER_LABEL.into(), fit::owner_label(&owner.name));
        }
        labels
    }
}
