//! The shipped ValidatingAdmissionPolicies on a real kube-apiserver's admission.
//!
//! `config/triggers/210-admissionpolicy-clusterinterceptor.yaml`: the interceptor's own token
//! may change only the caBundle of its ClusterInterceptor (Triggers' released CRD), never where
//! Triggers sends events, nor its `server/type: https` label.
//!
//! `config/210-admissionpolicy-served-tags.yaml`: the
//! ValidatingAdmissionPolicy refuses an editor's move of a tag the gate served and lets the
//! controller's own write, and a tag the gate never served, through. openshift-apiserver runs the
//! same admission plugin for `image.openshift.io`; here the image API is the emulator's,
//! aggregated (no admission of its own), so the policy is held, unchanged but for its API group,
//! to an ImageStream-shaped CRD of a test group that kube-apiserver serves and admits itself.

use super::cluster::ControlPlane;

const GROUP: &str = "policytest.imagegate.dev";
const D1: &str = "sha256:1111111111111111111111111111111111111111111111111111111111111111";
const D2: &str = "sha256:2222222222222222222222222222222222222222222222222222222222222222";
const CONTROLLER: &str = "system:serviceaccount:imagegate-system:imagegate-controller";

/// The CRD of ImageStreams in [`GROUP`] (any fields), and a ClusterRole that may write them,
/// bound to the user `editor` and to the controller's ServiceAccount.
fn install(cp: &ControlPlane) {
    let crd = format!(
        r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {{name: imagestreams.{GROUP}}}
spec:
  group: {GROUP}
  names: {{kind: ImageStream, listKind: ImageStreamList, plural: imagestreams, singular: imagestream}}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema: {{type: object, x-kubernetes-preserve-unknown-fields: true}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {{name: policytest-writer}}
rules:
- apiGroups: ["{GROUP}"]
  resources: [imagestreams]
  verbs: [get, list, patch, update]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {{name: policytest-writer}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: policytest-writer}}
subjects:
- {{kind: User, name: editor}}
- {{kind: ServiceAccount, name: imagegate-controller, namespace: imagegate-system}}
"#
    );
    let (ok, out) = cp.apply_text(&crd);
    assert!(ok, "{out}");
    cp.established(&format!("imagestreams.{GROUP}"));
    let shipped = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/config/210-admissionpolicy-served-tags.yaml"
    ))
    .unwrap();
    let policy = shipped.replace(r#"["image.openshift.io"]"#, &format!(r#"["{GROUP}"]"#));
    assert_ne!(policy, shipped, "the policy names the image API's group");
    let (ok, out) = cp.apply_text(&policy);
    assert!(ok, "{out}");
}

/// A strategic-merge-less patch (a merge patch of the whole tag list, as `oc tag` replaces a tag)
/// of `nb`'s tags as `user`: whether the API server took it, and what it said.
fn set_tags(cp: &ControlPlane, user: &str, tags: serde_json::Value) -> (bool, String) {
    let patch = serde_json::json!({"spec": {"tags": tags}}).to_string();
    let out = cp.kubectl(&[
        "patch",
        &format!("imagestreams.{GROUP}"),
        "nb",
        "-n",
        "ds",
        "--type=merge",
        "-p",
        &patch,
        "--as",
        user,
    ]);
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
    )
}

fn served(digest: &str) -> serde_json::Value {
    serde_json::json!({"name": "latest", "annotations": {"imagegate.dev/served-digest": digest},
                       "from": {"kind": "ImageStreamImage", "name": format!("nb@{digest}")}})
}

#[test]
fn the_shipped_admission_policy_refuses_a_served_tag_moved_by_anyone_but_the_gate() {
    let cp = ControlPlane::up();
    install(&cp);
    cp.ok(&["create", "namespace", "ds"]);
    let stream = format!(
        "apiVersion: {GROUP}/v1\nkind: ImageStream\nmetadata: {{name: nb, namespace: ds}}\nspec:\n  tags:\n  - {}\n",
        served(D1)
    );
    let (ok, out) = cp.apply_text(&stream);
    assert!(ok, "{out}");
    // The policy takes effect once kube-apiserver has loaded it (its informer, in about a second).
    let moved = serde_json::json!([{"name": "latest", "annotations": {"imagegate.dev/served-digest": D1},
                                    "from": {"kind": "ImageStreamImage", "name": format!("nb@{D2}")}}]);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let refusal = loop {
        let (ok, out) = set_tags(&cp, "editor", moved.clone());
        if !ok {
            break out;
        }
        assert!(std::time::Instant::now() < deadline, "never refused: {out}");
        // Taken before the policy loaded: put the tag back as it was, and try again.
        let (ok, out) = set_tags(&cp, CONTROLLER, serde_json::json!([served(D1)]));
        assert!(ok, "{out}");
        std::thread::sleep(std::time::Duration::from_millis(300));
    };
    assert!(
        refusal.contains("a tag imagegate serves moves only through the gate"),
        "{refusal}"
    );
    // Dropping the tag, or its served-digest, is a move too.
    let (ok, out) = set_tags(&cp, "editor", serde_json::json!([]));
    assert!(!ok, "{out}");
    let (ok, out) = set_tags(
        &cp,
        "editor",
        serde_json::json!([{"name": "latest", "from": {"kind": "ImageStreamImage", "name": format!("nb@{D1}")}}]),
    );
    assert!(!ok, "{out}");
    // The editor may still add a tag of its own, beside the gated one, unchanged.
    let (ok, out) = set_tags(
        &cp,
        "editor",
        serde_json::json!([served(D1), {"name": "dev", "from": {"kind": "DockerImage", "name": "quay.io/org/nb:dev"}}]),
    );
    assert!(ok, "{out}");
    // The gate's own write (a promotion to D2) goes through.
    let (ok, out) = set_tags(&cp, CONTROLLER, serde_json::json!([served(D2)]));
    assert!(ok, "{out}");
}

const INTERCEPTOR: &str = "system:serviceaccount:imagegate-system:imagegate-interceptor";
const ADMIN: &str = "admin";

/// A merge patch of ClusterInterceptor `imagegate` as `user`: whether it was taken, and what the
/// API server said.
/// (`ADMIN`: the admin kubeconfig itself, who applies config/triggers/.)
fn patch_interceptor(cp: &ControlPlane, user: &str, patch: serde_json::Value) -> (bool, String) {
    let patch = patch.to_string();
    let mut args = vec![
        "patch",
        "clusterinterceptors.triggers.tekton.dev",
        "imagegate",
        "--type=merge",
        "-p",
        &patch,
    ];
    if user != ADMIN {
        args.extend(["--as", user]);
    }
    let out = cp.kubectl(&args);
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
    )
}

#[test]
fn the_interceptor_may_change_only_the_ca_bundle_of_its_clusterinterceptor() {
    let cp = ControlPlane::up();
    // Triggers' released ClusterInterceptor CRD; config/ (the namespace); config/triggers' RBAC
    // (the interceptor may get and patch ClusterInterceptor imagegate), its ClusterInterceptor
    // and the shipped policy.
    let triggers = crate::support::upstream::TEKTON_TRIGGERS.dir();
    let crd = std::fs::read_to_string(triggers.join("config/300-clusterinterceptor.yaml")).unwrap();
    let (ok, out) = cp.apply_text(&crd);
    assert!(ok, "{out}");
    cp.established("clusterinterceptors.triggers.tekton.dev");
    cp.install();
    let file = |name: &str| {
        std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("config/triggers")
                .join(name),
        )
        .unwrap()
    };
    let (ok, out) = cp.apply_text(&file("200-rbac.yaml"));
    assert!(ok, "{out}");
    let shipped = file("400-interceptor.yaml");
    let interceptor = shipped
        .split("\n---\n")
        .find(|doc| doc.contains("kind: ClusterInterceptor"))
        .unwrap();
    let (ok, out) = cp.apply_text(interceptor);
    assert!(ok, "{out}");
    let (ok, out) = cp.apply_text(&file("210-admissionpolicy-clusterinterceptor.yaml"));
    assert!(ok, "{out}");

    // Pointing Triggers' calls elsewhere: refused once kube-apiserver has loaded the policy.
    let elsewhere =
        serde_json::json!({"spec": {"clientConfig": {"service": {"name": "attacker"}}}});
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let refusal = loop {
        let (ok, out) = patch_interceptor(&cp, INTERCEPTOR, elsewhere.clone());
        if !ok {
            break out;
        }
        assert!(std::time::Instant::now() < deadline, "never refused: {out}");
        // Taken before the policy loaded: put it back, and try again.
        let back = serde_json::json!({"spec": {"clientConfig": {"service": {"name": "imagegate-interceptor"}}}});
        let (ok, out) = patch_interceptor(&cp, ADMIN, back);
        assert!(ok, "{out}");
        std::thread::sleep(std::time::Duration::from_millis(300));
    };
    assert!(
        refusal.contains("the interceptor may change only spec.clientConfig.caBundle"),
        "{refusal}"
    );
    // A URL beside the service, a new spec field, plain http: refused too.
    for attack in [
        serde_json::json!({"spec": {"clientConfig": {"url": "http://attacker.example/"}}}),
        serde_json::json!({"spec": {"clientConfig": {"service": {"port": 80}}}}),
        serde_json::json!({"spec": {"extra": true}}),
        serde_json::json!({"metadata": {"labels": {"server/type": null}}}),
    ] {
        let (ok, out) = patch_interceptor(&cp, INTERCEPTOR, attack.clone());
        assert!(!ok, "{attack} was taken: {out}");
    }
    // What the interceptor does (src/interceptor/certs.rs): its CA into the caBundle.
    let ca = serde_json::json!({"spec": {"clientConfig": {"caBundle": "Y2EK"}}});
    let (ok, out) = patch_interceptor(&cp, INTERCEPTOR, ca);
    assert!(ok, "the interceptor's own write is refused: {out}");
    // Whoever applies config/triggers/ is not held to it.
    let (ok, out) = patch_interceptor(
        &cp,
        ADMIN,
        serde_json::json!({"spec": {"clientConfig": {"service": {"port": 9443}}}}),
    );
    assert!(ok, "{out}");
    let now: serde_json::Value = serde_json::from_str(&cp.ok(&[
        "get",
        "clusterinterceptors.triggers.tekton.dev",
        "imagegate",
        "-o",
        "json",
    ]))
    .unwrap();
    assert_eq!(
        (
            &now["spec"]["clientConfig"]["service"]["name"],
            &now["spec"]["clientConfig"]["caBundle"],
            &now["metadata"]["labels"]["server/type"]
        ),
        (
            &serde_json::json!("imagegate-interceptor"),
            &serde_json::json!("Y2EK"),
            &serde_json::json!("https")
        )
    );
}
