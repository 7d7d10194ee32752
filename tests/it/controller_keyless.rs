//! Keyless publisher signatures before the served tag moves (issue 32): the real controller on the
//! emulator, the candidate in a real OCI registry (CNCF Distribution), signed there keylessly by
//! the real cosign with a private Sigstore of real services (Fulcio, Rekor v2, the timestamp
//! authority; support/sigstore.rs). The policy's trusted root is that Sigstore's, in a ConfigMap
//! of the controller's namespace: a signature by a trusted identity promotes and the identity is
//! named; another identity, another Sigstore, and a root the platform did not give are refused
//! with their reasons, the served tag keeping its image and marked for the candidate.

use crate::support::controller::{Setup, reason, result};
use crate::support::rbac;
use crate::support::registry::Registry;
use crate::support::sigstore::Sigstore;

use imagegate::api::ImageStream;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams};
use serde_json::{Value, json};

const REPO: &str = "nb/app";

/// The emulator's `ds/nb` with its candidate imported from `registry`, an ImagePromotion
/// `signed` that governs it and asks for `keyless`, and the trusted root `root` in the
/// ConfigMap `sigstore-root` of the controller's namespace.
async fn gated(registry: &Registry, keyless: Value, root: &str, candidate: &str) -> Setup {
    let s = Setup::new().await;
    let streams: Api<ImageStream> = Api::namespaced(s.client.clone(), "ds");
    let follows = Patch::Strategic(registry.candidate_follows(REPO));
    streams
        .patch("nb", &PatchParams::default(), &follows)
        .await
        .unwrap();
    s.emu.import("ds", "nb", "candidate", candidate).await;
    s.emu
        .seed(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "sigstore-root", "namespace": "imagegate-system"},
            "data": {"trusted_root.json": root}}))
        .await;
    s.emu
        .seed(json!({
            "apiVersion": "imagegate.dev/v1alpha1", "kind": "ImagePromotion",
            "metadata": {"name": "signed", "namespace": "ds"},
            "spec": {"imageStream": "nb", "signature": {"keyless": keyless}}
        }))
        .await;
    s
}

fn keyless(identities: Value) -> Value {
    json!({"trustedRoot": {"configMapKeyRef": {"name": "sigstore-root", "key": "trusted_root.json"}},
        "identities": identities})
}

fn image(registry: &Registry, digest: &str) -> String {
    format!("{}/{REPO}@{digest}", registry.host)
}

async fn run(s: &Setup, name: &str, action: &str, digest: &str) -> imagegate::api::CustomRun {
    let mut params = vec![
        ("imagestream", "nb"),
        ("digest", digest),
        ("action", action),
    ];
    if action == "promote" {
        params.push(("validation-status", "Succeeded"));
    }
    s.create_run(
        name,
        &params,
        json!({"spec": {"customRef": {"name": "signed"}}}),
    )
    .await;
    s.done(name).await
}

fn signature_check(run: &imagegate::api::CustomRun) -> (bool, String) {
    let checks: Vec<Value> = serde_json::from_str(&result(run, "checks")).unwrap();
    let c = checks.iter().find(|c| c["name"] == "signature").unwrap();
    (
        c["passed"] == true,
        c["message"].as_str().unwrap().to_string(),
    )
}

/// The served tag keeps `before`'s image and says `UpdateFailed` for `digest`.
async fn marked_failed(s: &Setup, before: &imagegate::api::TagReference, digest: &str) {
    let now = s.served_tag().await;
    assert_eq!(now.from, before.from, "the served tag keeps its image");
    let ann = now.annotations.unwrap_or_default();
    assert_eq!(ann["imagegate.dev/phase"], "UpdateFailed", "{ann:?}");
    assert_eq!(ann["imagegate.dev/candidate-digest"], digest);
}

#[tokio::test]
async fn keyless_by_a_trusted_identity_promotes_and_by_another_identity_does_not() {
    let sigstore = Sigstore::start().await;
    let registry = Registry::start().await;
    let digest = registry.push(REPO, "latest", "v2").await;
    sigstore.sign(&image(&registry, &digest), "release@example.com");
    let identities = json!([
        {"name": "release", "issuer": sigstore.issuer, "subject": "release@example.com"},
        {"name": "team", "issuer": sigstore.issuer, "subjectRegExp": "[a-z]+@team\\.example\\.com"}
    ]);
    let policy = keyless(identities);
    let s = gated(&registry, policy, &sigstore.trusted_root, &digest).await;

    // begin shows it, so a pipeline fails fast when it is not.
    let begun = run(&s, "begin", "begin", &digest).await;
    assert_eq!(
        reason(&begun),
        ("True".into(), "Validating".into()),
        "{:?}",
        begun.status
    );
    assert!(signature_check(&begun).0);

    let promoted = run(&s, "promote", "promote", &digest).await;
    assert_eq!(
        reason(&promoted),
        ("True".into(), "Promoted".into()),
        "{:?}",
        promoted.status
    );
    assert_eq!(
        s.stream().await.current_digest("latest"),
        Some(digest.as_str())
    );
    let (passed, message) = signature_check(&promoted);
    assert!(passed, "{message}");
    assert!(
        message.contains(&format!(
            "is signed by identity \"release\" (release@example.com from {})",
            sigstore.issuer
        )),
        "{message}"
    );

    // The next candidate is signed by someone the policy does not trust, through the same
    // Fulcio: found, verified, refused for who signed it.
    let next = registry.push(REPO, "latest", "v3").await;
    sigstore.sign(
        &image(&registry, &next),
        "mallory@team.example.com.evil.example",
    );
    s.emu.import("ds", "nb", "candidate", &next).await;
    let before = s.served_tag().await;
    let writes = s.writes("imagestreams").await.len();
    let refused = run(&s, "promote-next", "promote", &next).await;
    assert_eq!(
        reason(&refused),
        ("False".into(), "SignatureUntrusted".into()),
        "{:?}",
        refused.status
    );
    let (passed, message) = signature_check(&refused);
    assert!(!passed);
    assert!(
        message.contains("signed by mallory@team.example.com.evil.example")
            && message.contains("an identity the policy does not trust"),
        "{message}"
    );
    marked_failed(&s, &before, &next).await;
    assert_eq!(
        s.writes("imagestreams").await.len(),
        writes + 1,
        "one write: the mark"
    );
    rbac::assert_config_allows(&s.emu, "controller").await;
}

#[tokio::test]
async fn keyless_from_another_sigstore_or_without_the_platform_s_root_is_refused() {
    // Two Sigstores, one after the other (each runs a timestamp authority on port 2112): the
    // platform trusts the first; the publisher signs with the second, whose Fulcio issues the
    // same identity from the same kind of issuer.
    let trusted = Sigstore::start().await;
    let trusted_root = trusted.trusted_root.clone();
    let trusted_issuer = trusted.issuer.clone();
    drop(trusted);
    let registry = Registry::start().await;
    let digest = registry.push(REPO, "latest", "v2").await;
    let other = Sigstore::start().await;
    other.sign(&image(&registry, &digest), "release@example.com");
    let identities = json!([
        {"name": "release", "issuer": trusted_issuer, "subject": "release@example.com"},
        {"name": "release-other-issuer", "issuer": other.issuer, "subject": "release@example.com"}
    ]);
    let s = gated(&registry, keyless(identities), &trusted_root, &digest).await;
    let before = s.served_tag().await;
    let refused = run(&s, "promote", "promote", &digest).await;
    assert_eq!(
        reason(&refused),
        ("False".into(), "SignatureUntrusted".into()),
        "{:?}",
        refused.status
    );
    let (_, message) = signature_check(&refused);
    // Its timestamp authority is not the trusted one: nothing after that step can count.
    assert!(
        message.contains("keyless signature 1: the timestamp is not signed by"),
        "{message}"
    );
    marked_failed(&s, &before, &digest).await;

    // The namespace editor puts the other Sigstore's root in a ConfigMap of the gated namespace
    // under the same name: not read. And the platform's ConfigMap gone: the root is unusable,
    // said so, and nothing is promoted.
    s.emu
        .seed(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "sigstore-root", "namespace": "ds"},
            "data": {"trusted_root.json": other.trusted_root}}))
        .await;
    let platform: Api<ConfigMap> = Api::namespaced(s.client.clone(), "imagegate-system");
    platform
        .delete("sigstore-root", &Default::default())
        .await
        .unwrap();
    let refused = run(&s, "promote-again", "promote", &digest).await;
    assert_eq!(
        reason(&refused),
        ("False".into(), "SignatureUntrusted".into()),
        "{:?}",
        refused.status
    );
    let (_, message) = signature_check(&refused);
    assert!(
        message.contains(
            "unusable: trusted root: ConfigMap sigstore-root does not exist in namespace imagegate-system"
        ),
        "{message}"
    );
    assert_eq!(s.served_tag().await.from, before.from);
}
