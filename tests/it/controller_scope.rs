//! End to end: a namespace-scoped controller (`--namespace`, the install of
//! `config/namespaced/`) reconciles the runs of its namespaces and leaves every other
//! namespace's runs alone: no status, no ImageStream write, not a single request there, and
//! every request it makes is granted by the namespace-scoped install's RBAC.

use std::path::Path;
use std::process::Command;

use crate::support::controller::{A, B, Setup, VALIDATED_B, grant_promote, reason};
use crate::support::rbac::{self, Policy};
use crate::support::{free_port, promotion_run, wait_ready};

use imagegate::api::{CustomRun, ImageStream};
use kube::api::{Api, PostParams};
use serde_json::json;

/// `config/` with the component `config/namespaced/`, built by `kubectl kustomize` as a user's
/// overlay builds it, for the watched namespace `namespace` instead of `notebooks`, which
/// tekton/330 opts in.
fn namespaced_install(namespace: &str) -> Policy {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = tempfile::tempdir().unwrap();
    let overlay = dir.path().join("my-install");
    std::fs::create_dir(&overlay).unwrap();
    let config = root.join("config");
    std::fs::write(
        overlay.join("kustomization.yaml"),
        format!(
            "resources: [{}]\ncomponents: [{}]\n",
            relative_to(&overlay, &config),
            relative_to(&overlay, &config.join("namespaced"))
        ),
    )
    .unwrap();
    let out = Command::new("kubectl")
        .arg("kustomize")
        .arg(&overlay)
        .output()
        .expect("kubectl is on PATH (scripts/test puts the pinned one there)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let built = String::from_utf8(out.stdout).unwrap();
    assert!(built.contains("--namespace=notebooks"), "{built}");
    let built = built
        .replace("namespace: notebooks", &format!("namespace: {namespace}"))
        .replace("--namespace=notebooks", &format!("--namespace={namespace}"));
    let mut policy = Policy::default();
    policy.add("kubectl kustomize my-install", &built);
    // The namespace opted in, as `kubectl apply -k tekton/` there does.
    policy.add(
        "tekton/330-controller-rbac.yaml",
        &rbac::onboarding(namespace),
    );
    policy
}

/// `to` as a path relative to `from` (kustomize refuses absolute paths outside its root).
fn relative_to(from: &Path, to: &Path) -> String {
    let up = from.components().count();
    let mut rel = "../".repeat(up);
    rel.push_str(to.to_string_lossy().trim_start_matches('/'));
    rel
}

#[tokio::test]
async fn a_namespace_scoped_controller_leaves_another_namespaces_runs_alone() {
    let mut s = Setup::new().await;
    // The all-namespaces controller of the setup gives way to one scoped to `ds`.
    s.stop();
    s.emu.seed_promotion_stream("other", A, B).await;
    grant_promote(&s.emu, "other", "default").await;
    let others: Api<CustomRun> = Api::namespaced(s.client.clone(), "other");
    let in_other = json!({"metadata": {"namespace": "other"}});
    others
        .create(
            &PostParams::default(),
            &promotion_run("promote-b", VALIDATED_B, &in_other),
        )
        .await
        .unwrap();
    let from = s.emu.requests().await.len();
    let admin = free_port();
    let _scoped = s.spawn_controller(admin, &["--namespace", "ds", "--namespace", "ds"]);
    wait_ready(admin).await;

    s.create_run("promote-b", VALIDATED_B, json!({})).await;
    assert_eq!(
        reason(&s.done("promote-b").await),
        ("True".into(), "Promoted".into())
    );
    assert_eq!(s.stream().await.current_digest("latest"), Some(B));

    // The run in `other` was there first; it is not touched.
    let run = others.get("promote-b").await.unwrap();
    assert!(run.status.is_none(), "{:?}", run.status);
    let stream = Api::<ImageStream>::namespaced(s.client.clone(), "other")
        .get("nb")
        .await
        .unwrap();
    assert_eq!(stream.current_digest("latest"), Some(A));
    let requests: Vec<_> = s.emu.requests().await.split_off(from);
    let controller: Vec<_> = requests.iter().filter(|r| r.user == "controller").collect();
    assert!(!controller.is_empty());
    for r in &controller {
        // Discovery (the start check that ImagePromotions are served) is no resource request.
        let scoped = r.namespace == "ds"
            || r.namespace == "imagegate-system"
            || r.resource == "subjectaccessreviews"
            || (r.verb.is_empty() && r.path.starts_with("/apis/"));
        assert!(
            scoped,
            "a request outside ds: {} {}?{}",
            r.method, r.path, r.query
        );
    }
    rbac::assert_allowed(
        &namespaced_install("ds"),
        &requests,
        "controller",
        &rbac::service_account("controller"),
    );
}
