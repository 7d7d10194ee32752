//! The watch of RBAC: Roles, RoleBindings, ClusterRoles and ClusterRoleBindings, cluster-wide,
//! reporting where a change could alter what a source's service account may read
//! ([`Changed`]). The supervisor asks the SubjectAccessReviews again for exactly the sources
//! that could be affected ([`crate::adapter::permissions::affected_by`]), two seconds after the
//! first change of a burst, instead of asking every source's reviews on a short timer: idle, a source
//! costs the API server nothing, and a grant or a revocation is still seen within seconds.
//!
//! Why a watch and not a cache of verdicts with a time to live: a TTL short enough to notice a
//! revocation within a minute asks every source's reviews every minute (Knative's
//! ApiServerSource flood, knative/eventing#8613); the watch asks only when RBAC changed, and only
//! for the sources it could concern. The authorizer may be more than RBAC (a webhook): the
//! supervisor's safety-net resync asks again every hour, and every 30 s while this watch does not
//! work (not granted, or failing).
//!
//! Of the objects only their names and resourceVersions are kept ([`Known`]). The first list of
//! each kind is what the sources' first observations read; a re-list (the watch was lost, or its
//! resourceVersion expired) reports where the objects it finds differ from those known
//! ([`relisted`]): a re-list of an unchanged RBAC asks nothing, where reporting it as a change
//! of everything would ask every source's reviews again.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use futures::StreamExt;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use kube::Resource;
use kube::api::Api;
use kube::runtime::{WatchStreamExt, watcher};
use serde::de::DeserializeOwned;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tracing::{info, warn};

use crate::runtime::watch_errors::refusal;

/// Where an RBAC change was.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Changed {
    /// A Role or RoleBinding of this namespace.
    Namespace(String),
    /// A ClusterRole or ClusterRoleBinding, or a re-list: anything may have changed.
    Cluster,
}

/// The kinds watched.
const KINDS: usize = 4;

/// The running watches; dropping it stops them.
pub(crate) struct RbacWatch {
    tasks: Vec<JoinHandle<()>>,
    /// The kinds whose watch has listed and is not refused.
    working: Arc<AtomicUsize>,
}

impl Drop for RbacWatch {
    fn drop(&mut self) {
        self.tasks.iter().for_each(JoinHandle::abort);
    }
}

impl RbacWatch {
    /// Whether every kind is watched: permission changes are then seen as they happen.
    pub(crate) fn working(&self) -> bool {
        self.working.load(Ordering::Acquire) == KINDS
    }
}

/// Starts the four watches, each change reported to `tx`.
pub(crate) fn start(client: &kube::Client, tx: mpsc::UnboundedSender<Changed>) -> RbacWatch {
    let working = Arc::new(AtomicUsize::new(0));
    let w = |k| (client.clone(), tx.clone(), working.clone(), k);
    let tasks = vec![
        tokio::spawn(follow::<Role>(w("Roles"))),
        tokio::spawn(follow::<RoleBinding>(w("RoleBindings"))),
        tokio::spawn(follow::<ClusterRole>(w("ClusterRoles"))),
        tokio::spawn(follow::<ClusterRoleBinding>(w("ClusterRoleBindings"))),
    ];
    info!("RBAC watch started (permission changes re-check the sources they concern)");
    RbacWatch { tasks, working }
}

/// An object as known: its namespace (None: cluster-scoped) and name, and its resourceVersion.
pub(crate) type Known = BTreeMap<(Option<String>, String), String>;

/// Where the objects of a re-list (`now`) differ from those `known` before (pure): the
/// namespace of each one added, removed or changed, or the cluster for a cluster-scoped one.
pub(crate) fn relisted(known: &Known, now: &Known) -> BTreeSet<Changed> {
    let at = |(ns, _): &(Option<String>, String)| match ns {
        Some(ns) => Changed::Namespace(ns.clone()),
        None => Changed::Cluster,
    };
    let changed = now.iter().filter(|(k, v)| known.get(*k) != Some(*v));
    let gone = known.keys().filter(|k| !now.contains_key(*k));
    changed.map(|(k, _)| at(k)).chain(gone.map(at)).collect()
}

/// How `object` is known.
fn key_of<K: Resource>(object: &K) -> ((Option<String>, String), String) {
    let meta = object.meta();
    let ns = meta.namespace.clone().filter(|n| !n.is_empty());
    let name = meta.name.clone().unwrap_or_default();
    (
        (ns, name),
        meta.resource_version.clone().unwrap_or_default(),
    )
}

/// Where a change of `object` was: its namespace, or the cluster.
pub(crate) fn changed_at<K: Resource>(object: &K) -> Changed {
    match object.meta().namespace.as_deref() {
        Some(ns) if !ns.is_empty() => Changed::Namespace(ns.to_owned()),
        _ => Changed::Cluster,
    }
}

async fn follow<K>(
    (client, tx, working, kind): (
        kube::Client,
        mpsc::UnboundedSender<Changed>,
        Arc<AtomicUsize>,
        &'static str,
    ),
) where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    let api: Api<K> = Api::all(client);
    let mut events = watcher(api, watcher::Config::default())
        .default_backoff()
        .boxed();
    // Whether this kind counts in `working` (listed, no error since); whether it was listed.
    let (mut working_now, mut listed) = (false, false);
    let set = |on: bool, was: &mut bool| {
        match (on, *was) {
            (true, false) => working.fetch_add(1, Ordering::AcqRel),
            (false, true) => working.fetch_sub(1, Ordering::AcqRel),
            _ => 0,
        };
        *was = on;
    };
    // Whether the failure now going on was logged.
    let mut logged = false;
    let (mut known, mut listing) = (Known::new(), Known::new());
    while let Some(event) = events.next().await {
        let changes: BTreeSet<Changed> = match event {
            Ok(watcher::Event::Init) => {
                listing.clear();
                BTreeSet::new()
            }
            Ok(watcher::Event::InitApply(o)) => {
                let (k, v) = key_of(&o);
                listing.insert(k, v);
                BTreeSet::new()
            }
            Ok(watcher::Event::InitDone) => {
                if std::mem::take(&mut logged) || !listed {
                    info!(kind, "RBAC watch works");
                }
                set(true, &mut working_now);
                let list = std::mem::take(&mut listing);
                let changes = if std::mem::replace(&mut listed, true) {
                    relisted(&known, &list)
                } else {
                    BTreeSet::new()
                };
                known = list;
                changes
            }
            Ok(watcher::Event::Apply(o)) => {
                let (k, v) = key_of(&o);
                let moved = known.insert(k, v.clone()).as_ref() != Some(&v);
                moved.then(|| changed_at(&o)).into_iter().collect()
            }
            Ok(watcher::Event::Delete(o)) => {
                let (k, _) = key_of(&o);
                known.remove(&k);
                [changed_at(&o)].into_iter().collect()
            }
            Err(e) => {
                if !std::mem::replace(&mut logged, true) {
                    match refusal(&e) {
                        Some(r) => warn!(kind, code = r.code, reason = %r.message,
                            "cannot watch RBAC (not granted?): every source's permissions are asked again every 30 s until it works"),
                        None => warn!(kind, error = %e,
                            "RBAC watch failed: every source's permissions are asked again every 30 s until it works again"),
                    }
                }
                set(false, &mut working_now);
                BTreeSet::new()
            }
        };
        for change in changes {
            let _ = tx.send(change);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_relist_reports_only_where_objects_were_added_removed_or_changed() {
        let known: Known = [
            ((Some("ds".into()), "a".into()), "1".into()),
            ((Some("ml".into()), "b".into()), "2".into()),
            ((Some("ops".into()), "c".into()), "3".into()),
            ((None, "view".into()), "4".into()),
        ]
        .into();
        assert!(
            relisted(&known, &known).is_empty(),
            "nothing changed: nothing asked"
        );
        let mut now = known.clone();
        now.insert((Some("ds".into()), "a".into()), "9".into());
        now.remove(&(Some("ml".into()), "b".into()));
        now.insert((Some("new".into()), "d".into()), "5".into());
        assert_eq!(
            relisted(&known, &now),
            [
                Changed::Namespace("ds".into()),
                Changed::Namespace("ml".into()),
                Changed::Namespace("new".into())
            ]
            .into()
        );
        now.insert((None, "view".into()), "8".into());
        assert!(relisted(&known, &now).contains(&Changed::Cluster));
    }

    #[test]
    fn a_namespaced_object_changes_its_namespace_and_a_cluster_object_the_cluster() {
        let mut binding = RoleBinding::default();
        binding.metadata.namespace = Some("ds".into());
        assert_eq!(changed_at(&binding), Changed::Namespace("ds".into()));
        assert_eq!(changed_at(&ClusterRole::default()), Changed::Cluster);
        assert_eq!(changed_at(&RoleBinding::default()), Changed::Cluster);
    }
}
