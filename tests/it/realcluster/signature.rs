//! The signature policy (issue 32) on the real API server: the ImagePromotion, its ConfigMap of
//! trusted keys (in `imagegate-system`) and its pull secret (in the run's namespace) are the real
//! server's, read by the controller as its ServiceAccount through the RBAC of `config/`; the
//! candidates are in a real registry, signed by the real cosign.

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use super::cluster::CONTROLLER_SA;
use super::runs::{Cluster, digest};
use crate::support::controller::{reason, result};
use crate::support::registry::{Cosign, Registry};

const REPO: &str = "nb/app";

/// Namespace `ns` of the real server with its `nb` stream following `registry` (plain HTTP:
/// insecure), `first` imported as its candidate, and the ImagePromotion `notebooks` asking for
/// `signature`, applied with kubectl.
async fn gated(c: &Cluster, registry: &Registry, ns: &str, first: &str, signature: Value) {
    c.promotion_namespace(ns, &digest('a'), &digest('b')).await;
    let streams: Api<imagegate::api::ImageStream> = Api::namespaced(c.client.clone(), ns);
    let follows = Patch::Strategic(registry.candidate_follows(REPO));
    streams
        .patch("nb", &PatchParams::default(), &follows)
        .await
        .unwrap();
    c.emu.import(ns, "nb", "candidate", first).await;
    let (applied, out) = c.cp.pipe(
        &["apply", "-f", "-"],
        &json!({"apiVersion": "imagegate.dev/v1alpha1", "kind": "ImagePromotion",
            "metadata": {"name": "notebooks", "namespace": ns},
            "spec": {"imageStream": "nb", "signature": signature}})
        .to_string(),
    );
    assert!(applied, "{out}");
}

/// A ConfigMap of the platform's namespace, created on the real server.
async fn platform_config_map(c: &Cluster, name: &str, data: Value) {
    let maps: Api<ConfigMap> = Api::namespaced(c.client.clone(), "imagegate-system");
    let map = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "imagegate-system"}, "data": data});
    maps.create(
        &PostParams::default(),
        &serde_json::from_value(map).unwrap(),
    )
    .await
    .unwrap();
}

/// A validated promote run `name` for `digest` in `ns`, to its end.
async fn promote(c: &Cluster, ns: &str, name: &str, digest: &str) -> imagegate::api::CustomRun {
    let params = [
        ("imagestream", "nb"),
        ("digest", digest),
        ("validation-status", "Succeeded"),
    ];
    c.create_run(ns, name, &params, json!({})).await;
    c.done(ns, name).await
}

#[tokio::test]
async fn a_signed_candidate_is_promoted_and_unsigned_foreign_copied_or_moved_ones_refused_on_the_real_api_server()
 {
    let c = Cluster::start().await;
    let (_controller, _) = c.controller(&[]);
    let registry = Registry::start().await;
    let publisher = Cosign::generate();
    let signed = registry.push(REPO, "latest", "v1").await;
    publisher.sign_bundle(&format!("{}/{REPO}@{signed}", registry.host));
    let ns = "signed";
    // The trusted key in the platform's namespace, where the controller reads it.
    platform_config_map(
        &c,
        "publisher-keys",
        json!({"cosign.pub": publisher.public_key()}),
    )
    .await;
    // A pull secret with no entry for this registry: read, and nothing of it sent.
    let secrets: Api<Secret> = Api::namespaced(c.client.clone(), ns);
    let signature = json!({
        "keys": [{"name": "publisher", "configMapKeyRef": {"name": "publisher-keys", "key": "cosign.pub"}}],
        "pullSecrets": ["quay-pull"]});
    gated(&c, &registry, ns, &signed, signature).await;
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
    let run = promote(&c, ns, "promote-signed", &signed).await;
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

    // Each of these is refused, its image not served, the served tag marked UpdateFailed for it
    // (one write, the mark): a build never signed; one signed by another key; one under whose
    // signature tag someone copied the signed build's signature; and the tag moved upstream after
    // the signed build, bringing a rebuilt, unsigned digest.
    let unsigned = registry.push(REPO, "latest", "v2").await;
    let stranger = Cosign::generate();
    let theirs = registry.push(REPO, "latest", "theirs").await;
    stranger.sign_bundle(&format!("{}/{REPO}@{theirs}", registry.host));
    let copied = registry.push(REPO, "latest", "copied").await;
    let sig_tag = |d: &str| format!("{}.sig", d.replace(':', "-"));
    let older = registry.push(REPO, "older", "older").await;
    publisher.sign(&format!("{}/{REPO}@{older}", registry.host));
    let (body, media) = registry.manifest(REPO, &sig_tag(&older)).await;
    registry
        .put_manifest(REPO, &sig_tag(&copied), body, &media)
        .await;
    let tagged = registry.push(REPO, "latest", "v3").await;
    publisher.sign_bundle(&format!("{}/{REPO}@{tagged}", registry.host));
    let moved = registry.push(REPO, "latest", "v3-rebuilt").await;
    for (name, candidate, why) in [
        ("promote-unsigned", &unsigned, "SignatureMissing"),
        ("promote-theirs", &theirs, "SignatureUntrusted"),
        ("promote-copied", &copied, "SignatureMissing"),
        ("promote-moved", &moved, "SignatureMissing"),
    ] {
        c.emu.import(ns, "nb", "candidate", candidate).await;
        let writes = c.stream_writes(ns).await;
        let run = promote(&c, ns, name, candidate).await;
        assert_eq!(
            reason(&run),
            ("False".into(), why.into()),
            "{name}: {:?}",
            run.status
        );
        assert_eq!(
            c.stream(ns).await.current_digest("latest"),
            Some(signed.as_str()),
            "{name}"
        );
        assert_eq!(
            c.stream_writes(ns).await,
            writes + 1,
            "{name}: one write, the mark"
        );
        let (_, ann) = crate::support::controller::served(&c.stream(ns).await);
        assert_eq!(ann["imagegate.dev/phase"], "UpdateFailed", "{name}");
        assert_eq!(&ann["imagegate.dev/candidate-digest"], candidate, "{name}");
    }
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
    platform_config_map(
        &c,
        "sigstore-root",
        json!({"trusted_root.json": sigstore.trusted_root}),
    )
    .await;
    let signature = json!({"keyless": {
        "trustedRoot": {"configMapKeyRef": {"name": "sigstore-root", "key": "trusted_root.json"}},
        "identities": [{"name": "release", "issuer": sigstore.issuer, "subject": "release@example.com"}]}});
    gated(&c, &registry, ns, &signed, signature).await;
    let run = promote(&c, ns, "promote-signed", &signed).await;
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
    let run = promote(&c, ns, "promote-other", &other).await;
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
