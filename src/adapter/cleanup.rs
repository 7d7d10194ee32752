//! The checkpoints of sources that are gone: deleted when the adapter sees a source deleted
//! (after its pipeline stopped, so that its last flush cannot re-create them), and swept at
//! start for the sources deleted while no adapter ran, or deleted and created again under the
//! same name (their uid label names the old uid). Every checkpoint is in the adapter's own
//! namespace ([`crate::source::checkpoint::CheckpointOwner`]), so both look only there.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams};
use tracing::info;

use super::index::SourceId;
use crate::source::checkpoint::fit::owner_label;
use crate::source::checkpoint::{MANAGED_BY, OWNER_LABEL, OWNER_NAMESPACE_LABEL, OWNER_UID_LABEL};

/// Whether a checkpoint ConfigMap labelled for the source `owner` (its name, fit to a label
/// value) of `namespace`, with the uid `owner_uid` (None: unlabelled), belongs to no source of
/// `sources` (namespace and name to uid).
pub(crate) fn orphaned(
    namespace: &str,
    owner: &str,
    owner_uid: Option<&str>,
    sources: &BTreeMap<SourceId, String>,
) -> bool {
    let mut same = sources
        .iter()
        .filter(|((ns, name), _)| ns == namespace && owner_label(name) == owner)
        .peekable();
    if same.peek().is_none() {
        return true;
    }
    owner_uid.is_some_and(|uid| !same.any(|(_, u)| u == uid))
}

fn selector(source: Option<&SourceId>) -> String {
    let owner = match source {
        Some((ns, name)) => format!(
            "{OWNER_NAMESPACE_LABEL}={ns},{OWNER_LABEL}={}",
            owner_label(name)
        ),
        None => OWNER_LABEL.to_owned(),
    };
    format!("{}={},{owner}", MANAGED_BY.0, MANAGED_BY.1)
}

/// Deletes the checkpoint ConfigMaps, in `namespace` (the adapter's), of the source `id`.
pub(crate) async fn delete(
    client: &kube::Client,
    namespace: &str,
    id: &SourceId,
) -> Result<usize, kube::Error> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let found = api
        .list(&ListParams::default().labels(&selector(Some(id))))
        .await?;
    let mut deleted = 0;
    for cm in found.items {
        gone_ok(api.delete(&cm.name_any(), &DeleteParams::default()).await)?;
        deleted += 1;
    }
    if deleted > 0 {
        info!(namespace = %id.0, source = %id.1, configmaps = deleted, "the deleted source's checkpoint was deleted");
    }
    Ok(deleted)
}

/// Deletes every checkpoint ConfigMap in `namespace` (the adapter's) of a source not in
/// `sources`.
pub(crate) async fn sweep(
    client: &kube::Client,
    namespace: &str,
    sources: &BTreeMap<SourceId, String>,
) -> Result<usize, kube::Error> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let found = api
        .list(&ListParams::default().labels(&selector(None)))
        .await?;
    let mut deleted = 0;
    for cm in found.items {
        let label = |k: &str| cm.labels().get(k).cloned();
        let source_ns = label(OWNER_NAMESPACE_LABEL).unwrap_or_default();
        let owner = label(OWNER_LABEL).unwrap_or_default();
        let uid = label(OWNER_UID_LABEL);
        if orphaned(&source_ns, &owner, uid.as_deref(), sources) {
            gone_ok(api.delete(&cm.name_any(), &DeleteParams::default()).await)?;
            info!(namespace = %source_ns, source = %owner, configmap = %cm.name_any(), "orphaned checkpoint ConfigMap deleted");
            deleted += 1;
        }
    }
    Ok(deleted)
}

fn gone_ok<T>(result: Result<T, kube::Error>) -> Result<(), kube::Error> {
    match result {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_checkpoint_is_orphaned_when_its_source_is_gone_or_was_created_again() {
        let sources: BTreeMap<SourceId, String> =
            [(("ds".to_string(), "team-a".to_string()), "u2".to_string())].into();
        assert!(!orphaned("ds", "team-a", Some("u2"), &sources));
        assert!(
            !orphaned("ds", "team-a", None, &sources),
            "no uid to compare"
        );
        assert!(
            orphaned("ds", "team-a", Some("u1"), &sources),
            "an older source's"
        );
        assert!(orphaned("ml", "team-a", Some("u2"), &sources));
        assert!(orphaned("ds", "team-b", None, &sources));
        let long = "t".repeat(200);
        let sources: BTreeMap<SourceId, String> =
            [(("ds".to_string(), long.clone()), "u3".to_string())].into();
        assert!(!orphaned("ds", &owner_label(&long), Some("u3"), &sources));
        let id = ("ds".to_string(), long.clone());
        assert!(selector(Some(&id)).ends_with(&owner_label(&long)));
        assert_eq!(
            selector(Some(&("ds".into(), "team-a".into()))),
            "app.kubernetes.io/managed-by=imagegate,sources.imagegate.dev/namespace=ds,\
             sources.imagegate.dev/imagestreamsource=team-a"
        );
    }
}
