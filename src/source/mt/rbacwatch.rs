//! The watch of RBAC: Roles, RoleBindings, ClusterRoles and ClusterRoleBindings, cluster-wide,
//! reporting where a change could alter what a source's service account may read
//! ([`Changed`]). The supervisor asks the SubjectAccessReviews again for exactly the sources
//! that could be affected ([`crate::source::permissions::affected_by`]), a moment after a burst
//! of changes settles, instead of asking every source's reviews on a short timer: idle, a source
//! costs the API server nothing, and a grant or a revocation is still seen within seconds.
//!
//! Why a watch and not a cache of verdicts with a time to live: a TTL short enough to notice a
//! revocation within a minute asks every source's reviews every minute (Knative's
//! ApiServerSource flood, knative/eventing#8613); the watch asks only when RBAC changed, and only
//! for the sources it could concern. The authorizer may be more than RBAC (a webhook): the
//! supervisor's safety-net resync asks again every hour, and every 30 s while this watch does not
//! work (not granted, or failing).
//!
//! Nothing is kept of the objects: only where each change was. The first list of each kind is
//! what the sources' first observations read; a re-list (the watch was lost) may hide any
//! change, so it reports [`Changed::Cluster`].

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

use crate::watch_errors::refusal;

/// Where an RBAC change was.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Changed {
    /// A Role or RoleBinding of this namespace.
    Namespace(String),
    /// A ClusterRole or ClusterRoleBinding, or a re-list: anything may have changed.
    Cluster,
}

/// The kinds watched.
const KINDS: usize = 4;

/// The running watches; dropping it stops them.
pub struct RbacWatch {
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
    pub fn working(&self) -> bool {
        self.working.load(Ordering::Acquire) == KINDS
    }
}

/// Starts the four watches, each change reported to `tx`.
pub fn start(client: &kube::Client, tx: mpsc::UnboundedSender<Changed>) -> RbacWatch {
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

/// Where a change of `object` was: its namespace, or the cluster.
pub fn changed_at<K: Resource>(object: &K) -> Changed {
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
    while let Some(event) = events.next().await {
        let change = match event {
            Ok(watcher::Event::Init | watcher::Event::InitApply(_)) => None,
            Ok(watcher::Event::InitDone) => {
                if std::mem::take(&mut logged) || !listed {
                    info!(kind, "RBAC watch works");
                }
                set(true, &mut working_now);
                std::mem::replace(&mut listed, true).then_some(Changed::Cluster)
            }
            Ok(watcher::Event::Apply(o) | watcher::Event::Delete(o)) => Some(changed_at(&o)),
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
                None
            }
        };
        if let Some(change) = change {
            let _ = tx.send(change);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_namespaced_object_changes_its_namespace_and_a_cluster_object_the_cluster() {
        let mut binding = RoleBinding::default();
        binding.metadata.namespace = Some("ds".into());
        assert_eq!(changed_at(&binding), Changed::Namespace("ds".into()));
        assert_eq!(changed_at(&ClusterRole::default()), Changed::Cluster);
        assert_eq!(changed_at(&RoleBinding::default()), Changed::Cluster);
    }
}
