//! The signature policy (issue 32) on the real API server: the ImagePromotion, its ConfigMap of
//! trusted keys (in `imagegate-system`) and its pull secret (in the run's namespace) are the real
//! server's, read by the controller as its ServiceAccount through the RBAC of `config/`; the
//! candidates are in a real registry, signed by the real cosign.

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

use super::cluster::CONTROLLER_SA;
use super::runs::{Cluster, digest};
use crate::support::controller::{reason, result};
use crate::support::registry::{Cosign, Registry};

const REPO: &str = "nb/app";

#[tokio::test]
async fn a_signed_candidate_is_promoted_and_an_unsigned_one_refused_on_the_real_api_server() {
    let c = Cluster::start().await;
    let (_controller, _) = c.controller(&[]);
    let registry = Registry::start().await;
    let publisher = Cosign::generate();
    let signed = registry.push(REPO, "latest", "v1").await;
    publisher.sign_bundle(&format!("{}/{REPO}@{signed}", registry.host));
    let ns = "signed";
    c.promotion_namespace(ns, &digest('a'), &digest('b')).await;
    // The candidate now follows the registry (plain HTTP: insecure) and imported the signed build.
    let streams: Api<imagegate::api::ImageStream> = Api::namespaced(c.client.clone(), ns);
    let candidate = registry.candidate_follows(REPO);
    streams
        .patch("nb", &PatchParams::default(), &Patch::Strategic(candidate))
        .await
        .unwrap();
    c.emu.import(ns, "nb", "candidate", &signed).await;
    // The trusted key in the platform's namespace, where the controller reads it.
    let maps: Api<ConfigMap> = Api::namespaced(c.client.clone(), "imagegate-system");
    let keys = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "publisher-keys", "namespace": "imagegate-system"},
        "data": {"cosign.pub": publisher.public_key()}});
    maps.create(
        &PostParams::default(),
        &serde_json::from_value(keys).unwrap(),
    )
    .await
    .unwrap();
    // A pull secret with no entry for this registry: read, and nothing of it sent.
    let secrets: Api<Secret> = Api::namespaced(c.client.clone(), ns);
    let pull = json!({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/dockerconfigjson",
        "metadata": {"name": "quay-pull", "namespace": ns},
        "stringData": {".dockerconfigjson": "{\"auths\": {\"quay.io\": {\"auth\": \"dTpw\"}}}"}});
    secrets
        .create(
            &PostParams::default(),
            &serde_json::from_value(pull).unwrap(),
        )
        .await
        .unwrap();
    let (applied, out) = c.cp.pipe(
        &["apply", "-f", "-"],
        &json!({"apiVersion": "imagegate.dev/v1alpha1", "kind": "ImagePromotion",
            "metadata": {"name": "notebooks", "namespace": ns},
            "spec": {"imageStream": "nb", "signature": {
                "keys": [{"name": "publisher", "configMapKeyRef": {"name": "publisher-keys", "key": "cosign.pub"}}],
                "pullSecrets": ["quay-pull"]}}})
        .to_string(),
    );
    assert!(applied, "{out}");
    let validated = |d: &str| {
        [
            ("imagestream", "nb".to_string()),
            ("digest", d.to_string()),
            ("validation-status", "Succeeded".to_string()),
        ]
    };
    let params = validated(&signed);
    let params: Vec<(&str, &str)> = params.iter().map(|(k, v)| (*k, v.as_str())).collect();
    c.create_run(ns, "promote-signed", &params, json!({})).await;
    let run = c.done(ns, "promote-signed").await;
    assert_eq!(
        reason(&run),
        ("True".into(), "Promoted".into()),
        "{:?}",
        run.status
    );
    assert!(
        result(&run, "checks").contains("signed by key \\\"publisher\\\""),
        "{}",
        result(&run, "checks")
    );
    assert_eq!(
        c.stream(ns).await.current_digest("latest"),
        Some(signed.as_str())
    );

    // The next build is pushed and imported, never signed: refused, its image not served, the
    // served tag marked UpdateFailed for it (one write, the mark).
    let unsigned = registry.push(REPO, "latest", "v2").await;
    c.emu.import(ns, "nb", "candidate", &unsigned).await;
    let writes = c.stream_writes(ns).await;
    let params = validated(&unsigned);
    let params: Vec<(&str, &str)> = params.iter().map(|(k, v)| (*k, v.as_str())).collect();
    c.create_run(ns, "promote-unsigned", &params, json!({}))
        .await;
    let run = c.done(ns, "promote-unsigned").await;
    assert_eq!(
        reason(&run),
        ("False".into(), "SignatureMissing".into()),
        "{:?}",
        run.status
    );
    assert_eq!(
        c.stream(ns).await.current_digest("latest"),
        Some(signed.as_str())
    );
    assert_eq!(c.stream_writes(ns).await, writes + 1, "one write: the mark");
    let (_, ann) = crate::support::controller::served(&c.stream(ns).await);
    assert_eq!(ann["imagegate.dev/phase"], "UpdateFailed");
    assert_eq!(ann["imagegate.dev/candidate-digest"], unsigned);
    c.cp.assert_never_forbidden(CONTROLLER_SA);
}

/// Keyless (issue 32) on the real API server: the trusted root is a ConfigMap of the real
/// server's `imagegate-system`, read by the controller as its ServiceAccount; the candidates are
/// signed keylessly by the real cosign with a private Sigstore of the real services.
#[tokio::test]
async fn keyless_by_a_trusted_identity_promotes_and_another_identity_is_refused_on_the_real_api_server()
 {
    let sigstore = crate::support::sigstore::Sigstore::start().await;
    let c = Cluster::start().await;
    let (_controller, _) = c.controller(&[]);
    let registry = Registry::start().await;
    let signed = registry.push(REPO, "latest", "v1").await;
    sigstore.sign(
        &format!("{}/{REPO}@{signed}", registry.host),
        "release@example.com",
    );
    let ns = "keyless";
    c.promotion_namespace(ns, &digest('a'), &digest('b')).await;
    let streams: Api<imagegate::api::ImageStream> = Api::namespaced(c.client.clone(), ns);
    let candidate = registry.candidate_follows(REPO);
    streams
        .patch("nb", &PatchParams::default(), &Patch::Strategic(candidate))
        .await
        .unwrap();
    c.emu.import(ns, "nb", "candidate", &signed).await;
    let maps: Api<ConfigMap> = Api::namespaced(c.client.clone(), "imagegate-system");
    let root = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "sigstore-root", "namespace": "imagegate-system"},
        "data": {"trusted_root.json": sigstore.trusted_root}});
    maps.create(
        &PostParams::default(),
        &serde_json::from_value(root).unwrap(),
    )
    .await
    .unwrap();
    let (applied, out) = c.cp.pipe(
        &["apply", "-f", "-"],
        &json!({"apiVersion": "imagegate.dev/v1alpha1", "kind": "ImagePromotion",
            "metadata": {"name": "notebooks", "namespace": ns},
            "spec": {"imageStream": "nb", "signature": {"keyless": {
                "trustedRoot": {"configMapKeyRef": {"name": "sigstore-root", "key": "trusted_root.json"}},
                "identities": [{"name": "release", "issuer": sigstore.issuer,
                    "subject": "release@example.com"}]}}}})
        .to_string(),
    );
    assert!(applied, "{out}");
    let promote = |name: &'static str, d: String| {
        let c = &c;
        async move {
            let params = [
                ("imagestream", "nb"),
                ("digest", d.as_str()),
                ("validation-status", "Succeeded"),
            ];
            c.create_run(ns, name, &params, json!({})).await;
            c.done(ns, name).await
        }
    };
    let run = promote("promote-signed", signed.clone()).await;
    assert_eq!(
        reason(&run),
        ("True".into(), "Promoted".into()),
        "{:?}",
        run.status
    );
    assert!(
        result(&run, "checks").contains("signed by identity \\\"release\\\" (release@example.com"),
        "{}",
        result(&run, "checks")
    );

    // The next build is signed through the same Fulcio by someone else: refused, not served.
    let other = registry.push(REPO, "latest", "v2").await;
    sigstore.sign(
        &format!("{}/{REPO}@{other}", registry.host),
        "intruder@example.com",
    );
    c.emu.import(ns, "nb", "candidate", &other).await;
    let run = promote("promote-other", other.clone()).await;
    assert_eq!(
        reason(&run),
        ("False".into(), "SignatureUntrusted".into()),
        "{:?}",
        run.status
    );
    assert!(result(&run, "checks").contains("signed by intruder@example.com"));
    assert_eq!(
        c.stream(ns).await.current_digest("latest"),
        Some(signed.as_str())
    );
    let (_, ann) = crate::support::controller::served(&c.stream(ns).await);
    assert_eq!(ann["imagegate.dev/candidate-digest"], other);
    c.cp.assert_never_forbidden(CONTROLLER_SA);
}
