//! The checkpoints of sources that are gone: deleted when the adapter sees a source deleted
//! (after its pipeline stopped, so that its last flush cannot re-create them), and swept at
//! start for the sources deleted while no adapter ran, or deleted and created again under the
//! same name (their ownerReference names the old uid). On a cluster the garbage collector
//! deletes them too, through their ownerReference; the adapter does not rely on it.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams};
use tracing::info;

use super::index::SourceId;
use crate::source::checkpoint::fit::owner_label;
use crate::source::checkpoint::{MANAGED_BY, OWNER_LABEL};

/// Whether a checkpoint ConfigMap in `namespace`, labelled for the source `owner` (its name,
/// fit to a label value) and owned by `owner_uids`, belongs to no source of `sources`
/// (namespace and name to uid).
pub fn orphaned(
    namespace: &str,
    owner: &str,
    owner_uids: &[String],
    sources: &BTreeMap<SourceId, String>,
) -> bool {
    let mut same = sources
        .iter()
        .filter(|((ns, name), _)| ns == namespace && owner_label(name) == owner)
        .peekable();
    if same.peek().is_none() {
        return true;
    }
    !owner_uids.is_empty() && !same.any(|(_, uid)| owner_uids.contains(uid))
}

fn selector(source: Option<&str>) -> String {
    let owner = match source {
        Some(name) => format!("{OWNER_LABEL}={}", owner_label(name)),
        None => OWNER_LABEL.to_owned(),
    };
    format!("{}={},{owner}", MANAGED_BY.0, MANAGED_BY.1)
}

/// Deletes the checkpoint ConfigMaps of the source `id`.
pub async fn delete(client: &kube::Client, id: &SourceId) -> Result<usize, kube::Error> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), &id.0);
    let found = api
        .list(&ListParams::default().labels(&selector(Some(&id.1))))
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

/// Deletes every checkpoint ConfigMap, cluster-wide, of a source not in `sources`.
pub async fn sweep(
    client: &kube::Client,
    sources: &BTreeMap<SourceId, String>,
) -> Result<usize, kube::Error> {
    let all: Api<ConfigMap> = Api::all(client.clone());
    let found = all
        .list(&ListParams::default().labels(&selector(None)))
        .await?;
    let mut deleted = 0;
    for cm in found.items {
        let namespace = cm.namespace().unwrap_or_default();
        let owner = cm.labels().get(OWNER_LABEL).cloned().unwrap_or_default();
        let uids: Vec<String> = cm
            .owner_references()
            .iter()
            .map(|o| o.uid.clone())
            .collect();
        if orphaned(&namespace, &owner, &uids, sources) {
            let api: Api<ConfigMap> = Api::namespaced(client.clone(), &namespace);
            gone_ok(api.delete(&cm.name_any(), &DeleteParams::default()).await)?;
            info!(namespace = %namespace, source = %owner, configmap = %cm.name_any(), "orphaned checkpoint ConfigMap deleted");
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
        assert!(!orphaned("ds", "team-a", &["u2".into()], &sources));
        assert!(
            !orphaned("ds", "team-a", &[], &sources),
            "no owner to compare"
        );
        assert!(
            orphaned("ds", "team-a", &["u1".into()], &sources),
            "an older source's"
        );
        assert!(orphaned("ml", "team-a", &["u2".into()], &sources));
        assert!(orphaned("ds", "team-b", &[], &sources));
        let long = "t".repeat(200);
        let sources: BTreeMap<SourceId, String> =
            [(("ds".to_string(), long.clone()), "u3".to_string())].into();
        assert!(!orphaned(
            "ds",
            &owner_label(&long),
            &["u3".into()],
            &sources
        ));
        assert!(selector(Some(&long)).ends_with(&owner_label(&long)));
        assert_eq!(
            selector(Some("team-a")),
            "app.kubernetes.io/managed-by=imagegate,sources.imagegate.dev/imagestreamsource=team-a"
        );
    }
}
