//! The publisher's signature before the served tag moves (issue 32): the real controller on the
//! emulator, the candidate pushed to a real OCI registry (CNCF Distribution) and signed there by
//! the real cosign. A signature by a trusted key over exactly the candidate digest promotes;
//! another key, no signature, a signature over another digest and a tag moved after signing are
//! each refused with their reason, the served tag keeping its image, marked `UpdateFailed` for the
//! candidate (its verdict).

use crate::support::controller::{Setup, reason, result};
use crate::support::rbac;
use crate::support::registry::{Cosign, Registry};
use crate::support::token_server::TokenServer;

use imagegate::api::ImageStream;
use kube::api::{Api, Patch, PatchParams};
use serde_json::{Value, json};

const REPO: &str = "nb/app";

/// The emulator's `ds/nb` with its candidate imported from `registry` (plain HTTP, so the tag
/// says `insecure`), an ImagePromotion `signed` that governs it and trusts `keys`, and the
/// candidate digest imported.
async fn gated(registry: &Registry, keys: Value, candidate: &str) -> Setup {
    let s = Setup::new().await;
    let streams: Api<ImageStream> = Api::namespaced(s.client.clone(), "ds");
    let follows = Patch::Strategic(registry.candidate_follows(REPO));
    streams
        .patch("nb", &PatchParams::default(), &follows)
        .await
        .unwrap();
    s.emu.import("ds", "nb", "candidate", candidate).await;
    s.emu
        .seed(json!({
            "apiVersion": "imagegate.dev/v1alpha1", "kind": "ImagePromotion",
            "metadata": {"name": "signed", "namespace": "ds"},
            "spec": {"imageStream": "nb", "signature": {"keys": keys}}
        }))
        .await;
    s
}

fn image(registry: &Registry, digest: &str) -> String {
    format!("{}/{REPO}@{digest}", registry.host)
}

async fn promote(s: &Setup, name: &str, digest: &str) -> imagegate::api::CustomRun {
    s.create_run(
        name,
        &[
            ("imagestream", "nb"),
            ("digest", digest),
            ("validation-status", "Succeeded"),
        ],
        json!({"spec": {"customRef": {"name": "signed"}}}),
    )
    .await;
    s.done(name).await
}

/// The candidate's verdict: the served tag keeps `before`'s image and says `UpdateFailed` for
/// `digest`, so the ledger counts it decided, and the Pipeline needs no `reject` after a `begin`
/// refused it.
async fn marked_failed(s: &Setup, before: &imagegate::api::TagReference, digest: &str) {
    let now = s.served_tag().await;
    assert_eq!(now.from, before.from, "the served tag keeps its image");
    let ann = now.annotations.unwrap_or_default();
    assert_eq!(ann["imagegate.dev/phase"], "UpdateFailed", "{ann:?}");
    assert_eq!(ann["imagegate.dev/candidate-digest"], digest);
}

fn checks(run: &imagegate::api::CustomRun) -> Vec<Value> {
    serde_json::from_str(&result(run, "checks")).unwrap()
}

#[tokio::test]
async fn a_candidate_signed_by_a_trusted_key_is_promoted_and_the_key_is_named() {
    let registry = Registry::start().await;
    let publisher = Cosign::generate();
    let digest = registry.push(REPO, "latest", "v2").await;
    publisher.sign(&image(&registry, &digest));
    let keys = json!([{"name": "publisher-2026", "publicKey": publisher.public_key()}]);
    let s = gated(&registry, keys, &digest).await;

    // begin shows it, so a pipeline fails fast when it is not.
    s.create_run(
        "begin",
        &[
            ("imagestream", "nb"),
            ("digest", &digest),
            ("action", "begin"),
        ],
        json!({"spec": {"customRef": {"name": "signed"}}}),
    )
    .await;
    let begun = s.done("begin").await;
    assert_eq!(reason(&begun), ("True".into(), "Validating".into()));
    assert_eq!(checks(&begun)[0]["name"], "signature");
    assert_eq!(checks(&begun)[0]["passed"], true);

    let run = promote(&s, "promote", &digest).await;
    assert_eq!(
        reason(&run),
        ("True".into(), "Promoted".into()),
        "{:?}",
        run.status
    );
    assert_eq!(
        s.stream().await.current_digest("latest"),
        Some(digest.as_str())
    );
    let outcome = &checks(&run)[0];
    assert_eq!(outcome["name"], "signature");
    assert_eq!(outcome["passed"], true);
    let message = outcome["message"].as_str().unwrap();
    assert!(
        message.contains("signed by key \"publisher-2026\"")
            && message.contains("ImagePromotion \"signed\""),
        "{message}"
    );
    rbac::assert_config_allows(&s.emu, "controller").await;
}

#[tokio::test]
async fn cosign_3_s_default_bundle_by_a_trusted_key_promotes_and_by_another_key_does_not() {
    let registry = Registry::start().await;
    let (publisher, stranger) = (Cosign::generate(), Cosign::generate());
    let signed = registry.push(REPO, "latest", "v2").await;
    publisher.sign_bundle(&image(&registry, &signed));
    let sig_tag = format!("{}.sig", signed.replace(':', "-"));
    let referrers_tag = signed.replace(':', "-");
    let tags = registry.tags(REPO).await;
    assert!(
        tags.contains(&referrers_tag) && !tags.contains(&sig_tag),
        "{tags:?}"
    );
    let keys = json!([{"name": "publisher", "publicKey": publisher.public_key()}]);
    let s = gated(&registry, keys, &signed).await;
    let run = promote(&s, "promote", &signed).await;
    assert_eq!(
        reason(&run),
        ("True".into(), "Promoted".into()),
        "{:?}",
        run.status
    );
    assert!(
        checks(&run)[0]["message"]
            .as_str()
            .unwrap()
            .contains("signed by key \"publisher\""),
        "{:?}",
        checks(&run)
    );

    // Another publisher's bundle on the next candidate is found and not trusted.
    let next = registry.push(REPO, "latest", "v3").await;
    stranger.sign_bundle(&image(&registry, &next));
    s.emu.import("ds", "nb", "candidate", &next).await;
    let before = s.served_tag().await;
    let writes = s.writes("imagestreams").await.len();
    let run = promote(&s, "promote-next", &next).await;
    assert_eq!(
        reason(&run),
        ("False".into(), "SignatureUntrusted".into()),
        "{:?}",
        run.status
    );
    marked_failed(&s, &before, &next).await;
    assert_eq!(
        s.writes("imagestreams").await.len(),
        writes + 1,
        "one write: the mark, not a move"
    );
}

#[tokio::test]
async fn a_candidate_signed_only_by_another_key_is_refused_and_the_served_image_kept() {
    let registry = Registry::start().await;
    let (publisher, stranger) = (Cosign::generate(), Cosign::generate());
    let digest = registry.push(REPO, "latest", "v2").await;
    stranger.sign(&image(&registry, &digest));
    let keys = json!([{"name": "publisher", "publicKey": publisher.public_key()}]);
    let s = gated(&registry, keys, &digest).await;
    let before = s.served_tag().await;

    let run = promote(&s, "promote", &digest).await;
    assert_eq!(
        reason(&run),
        ("False".into(), "SignatureUntrusted".into()),
        "{:?}",
        run.status
    );
    let message = s.message("promote").await;
    assert!(
        message.contains("1 signature(s) over") && message.contains("\"publisher\""),
        "{message}"
    );
    assert_eq!(checks(&run)[0]["passed"], false);
    marked_failed(&s, &before, &digest).await;

    // begin refuses it too, before any validation runs.
    s.create_run(
        "begin",
        &[
            ("imagestream", "nb"),
            ("digest", &digest),
            ("action", "begin"),
        ],
        json!({"spec": {"customRef": {"name": "signed"}}}),
    )
    .await;
    assert_eq!(
        reason(&s.done("begin").await),
        ("False".into(), "SignatureUntrusted".into())
    );
    marked_failed(&s, &before, &digest).await;
}

#[tokio::test]
async fn an_unsigned_candidate_is_refused_as_missing_its_signature() {
    let registry = Registry::start().await;
    let publisher = Cosign::generate();
    let digest = registry.push(REPO, "latest", "v2").await;
    let keys = json!([{"name": "publisher", "publicKey": publisher.public_key()}]);
    let s = gated(&registry, keys, &digest).await;
    let before = s.served_tag().await;

    // At begin, which the Pipeline follows with no reject (it skips validate): the refusal is
    // the candidate's verdict, on the served tag and in the run's phase (its verdict event).
    s.create_run(
        "begin",
        &[
            ("imagestream", "nb"),
            ("digest", &digest),
            ("action", "begin"),
        ],
        json!({"spec": {"customRef": {"name": "signed"}}}),
    )
    .await;
    let begun = s.done("begin").await;
    assert_eq!(reason(&begun), ("False".into(), "SignatureMissing".into()));
    assert_eq!(result(&begun, "phase"), "UpdateFailed");
    marked_failed(&s, &before, &digest).await;

    let run = promote(&s, "promote", &digest).await;
    assert_eq!(
        reason(&run),
        ("False".into(), "SignatureMissing".into()),
        "{:?}",
        run.status
    );
    let message = s.message("promote").await;
    assert!(
        message.contains(&format!("no signature over {digest}")),
        "{message}"
    );
    marked_failed(&s, &before, &digest).await;
}

#[tokio::test]
async fn a_signature_over_another_digest_proves_nothing_even_under_the_candidate_s_tag() {
    let registry = Registry::start().await;
    let publisher = Cosign::generate();
    let signed = registry.push(REPO, "v1", "v1").await;
    let candidate = registry.push(REPO, "latest", "v2").await;
    publisher.sign(&image(&registry, &signed));
    // Someone who may push to the repository copies the signature of the signed digest to the
    // candidate's signature tag: its payload still names the signed digest.
    let sig_tag = |d: &str| format!("{}.sig", d.replace(':', "-"));
    let (body, media) = registry.manifest(REPO, &sig_tag(&signed)).await;
    registry
        .put_manifest(REPO, &sig_tag(&candidate), body, &media)
        .await;
    assert!(registry.tags(REPO).await.contains(&sig_tag(&candidate)));
    let keys = json!([{"name": "publisher", "publicKey": publisher.public_key()}]);
    let s = gated(&registry, keys, &candidate).await;
    let before = s.served_tag().await;

    let run = promote(&s, "promote", &candidate).await;
    assert_eq!(
        reason(&run),
        ("False".into(), "SignatureMissing".into()),
        "{:?}",
        run.status
    );
    marked_failed(&s, &before, &candidate).await;
}

#[tokio::test]
async fn a_tag_moved_after_signing_brings_an_unsigned_digest_which_is_refused() {
    let registry = Registry::start().await;
    let publisher = Cosign::generate();
    let first = registry.push(REPO, "latest", "v1").await;
    publisher.sign(&image(&registry, &first));
    // The tag moves on upstream; the scheduled import brings the new digest, never signed.
    let moved = registry.push(REPO, "latest", "v1-rebuilt").await;
    assert_ne!(first, moved);
    let keys = json!([{"name": "publisher", "publicKey": publisher.public_key()}]);
    let s = gated(&registry, keys, &moved).await;
    let before = s.served_tag().await;

    let run = promote(&s, "promote", &moved).await;
    assert_eq!(
        reason(&run),
        ("False".into(), "SignatureMissing".into()),
        "{:?}",
        run.status
    );
    marked_failed(&s, &before, &moved).await;

    // The signed digest itself is still promotable: the signature binds the digest, not the tag.
    s.emu.import("ds", "nb", "candidate", &first).await;
    let run = promote(&s, "promote-first", &first).await;
    assert_eq!(
        reason(&run),
        ("True".into(), "Promoted".into()),
        "{:?}",
        run.status
    );
}

#[tokio::test]
async fn keys_come_from_the_platform_s_config_map_never_from_the_gated_namespace() {
    let registry = Registry::start().await;
    let (old, new, editor) = (Cosign::generate(), Cosign::generate(), Cosign::generate());
    let digest = registry.push(REPO, "latest", "v2").await;
    new.sign(&image(&registry, &digest));
    // A key rotation: the old and the new key in the platform's ConfigMap (the controller's
    // namespace), and a name that is missing.
    let keys = json!([
        {"name": "gone", "configMapKeyRef": {"name": "no-such-keys", "key": "cosign.pub"}},
        {"name": "old", "configMapKeyRef": {"name": "publisher-keys", "key": "old.pub"}},
        {"name": "new", "configMapKeyRef": {"name": "publisher-keys", "key": "new.pub"}}
    ]);
    let s = gated(&registry, keys, &digest).await;
    s.emu
        .seed(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "publisher-keys", "namespace": "imagegate-system"},
            "data": {"old.pub": old.public_key(), "new.pub": new.public_key()}}))
        .await;
    // The namespace editor writes a ConfigMap of the same name in the gated namespace with
    // their own key, and signs their own build with it: not read, so not trusted.
    s.emu
        .seed(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "publisher-keys", "namespace": "ds"},
            "data": {"old.pub": editor.public_key(), "new.pub": editor.public_key()}}))
        .await;
    let theirs = registry.push(REPO, "latest", "editors-build").await;
    editor.sign(&image(&registry, &theirs));
    s.emu.import("ds", "nb", "candidate", &theirs).await;
    let before = s.served_tag().await;
    let run = promote(&s, "promote-theirs", &theirs).await;
    assert_eq!(
        reason(&run),
        ("False".into(), "SignatureUntrusted".into()),
        "{:?}",
        run.status
    );
    marked_failed(&s, &before, &theirs).await;

    // The publisher's build, signed with the new key, is promoted; the missing name is said.
    s.emu.import("ds", "nb", "candidate", &digest).await;
    let run = promote(&s, "promote", &digest).await;
    assert_eq!(
        reason(&run),
        ("True".into(), "Promoted".into()),
        "{:?}",
        run.status
    );
    let message = checks(&run)[0]["message"].as_str().unwrap().to_string();
    assert!(message.contains("signed by key \"new\""), "{message}");
    assert!(
        message.contains(
            "\"gone\": ConfigMap no-such-keys does not exist in namespace imagegate-system"
        ),
        "{message}"
    );
    rbac::assert_config_allows(&s.emu, "controller").await;
}

#[tokio::test]
async fn a_private_registry_is_read_with_the_named_pull_secret_and_never_anonymously_promoted() {
    let registry = Registry::start_with_basic_auth("publisher", "s3cret").await;
    let publisher = Cosign::generate();
    let digest = registry.push(REPO, "latest", "v2").await;
    publisher.sign_as(&image(&registry, &digest), "publisher", "s3cret");
    let keys = json!([{"name": "publisher", "publicKey": publisher.public_key()}]);
    let s = gated(&registry, keys, &digest).await;
    let promotions: Api<imagegate::controller::crd::ImagePromotion> =
        Api::namespaced(s.client.clone(), "ds");
    promotions
        .patch(
            "signed",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"signature": {"pullSecrets": ["registry-creds"]}}})),
        )
        .await
        .unwrap();
    let before = s.served_tag().await;

    // The Secret names only another registry: its credentials are not sent here, the registry
    // refuses the lookup, and the run never promotes (it times out, the served tag untouched).
    let config = |host: &str| {
        use base64::Engine as _;
        let b64 = base64::engine::general_purpose::STANDARD;
        let entry = json!({"auths": {host: {"auth": b64.encode("publisher:s3cret")}}});
        b64.encode(entry.to_string())
    };
    s.emu
        .seed(
            json!({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/dockerconfigjson",
            "metadata": {"name": "registry-creds", "namespace": "ds"},
            "data": {".dockerconfigjson": config("quay.io")}}),
        )
        .await;
    s.create_run(
        "anonymous",
        &[
            ("imagestream", "nb"),
            ("digest", &digest),
            ("validation-status", "Succeeded"),
        ],
        json!({"spec": {"customRef": {"name": "signed"}, "timeout": "4s"}}),
    )
    .await;
    let run = s.done("anonymous").await;
    assert_eq!(
        reason(&run),
        ("False".into(), "CustomRunTimedOut".into()),
        "{:?}",
        run.status
    );
    s.assert_served_untouched(&before).await;

    // With the registry's own entry, the signature is read and verified.
    let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(s.client.clone(), "ds");
    secrets
        .patch(
            "registry-creds",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {".dockerconfigjson": config(&registry.host)}})),
        )
        .await
        .unwrap();
    let run = promote(&s, "with-credentials", &digest).await;
    assert_eq!(
        reason(&run),
        ("True".into(), "Promoted".into()),
        "{:?}",
        run.status
    );
}

#[tokio::test]
async fn a_registry_that_asks_for_a_bearer_token_is_read_with_a_token_the_pull_secret_gets() {
    // The Docker registry token flow (Quay, Docker Hub, Harbor): the real registry refuses
    // every request without a token its token server signed, and that server gives one only
    // for the pull secret's credentials.
    let tokens = TokenServer::start("publisher", "s3cret");
    let registry = Registry::start_with_token_auth(&tokens, "publisher", "s3cret").await;
    let challenge = reqwest::get(format!("http://{}/v2/", registry.host))
        .await
        .unwrap();
    assert_eq!(challenge.status(), 401);
    let asks = challenge.headers()["www-authenticate"].to_str().unwrap();
    assert!(
        asks.starts_with(&format!("Bearer realm=\"{}\"", tokens.realm)),
        "{asks}"
    );
    let publisher = Cosign::generate();
    let digest = registry.push(REPO, "latest", "v2").await;
    publisher.sign_as(&image(&registry, &digest), "publisher", "s3cret");
    let keys = json!([{"name": "publisher", "publicKey": publisher.public_key()}]);
    let s = gated(&registry, keys, &digest).await;
    let promotions: Api<imagegate::controller::crd::ImagePromotion> =
        Api::namespaced(s.client.clone(), "ds");
    promotions
        .patch(
            "signed",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"signature": {"pullSecrets": ["registry-creds"]}}})),
        )
        .await
        .unwrap();
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::STANDARD;
    let entry = json!({"auths": {&registry.host: {"auth": b64.encode("publisher:s3cret")}}});
    s.emu
        .seed(
            json!({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/dockerconfigjson",
            "metadata": {"name": "registry-creds", "namespace": "ds"},
            "data": {".dockerconfigjson": b64.encode(entry.to_string())}}),
        )
        .await;
    let before = tokens.asked().len();
    let run = promote(&s, "with-a-token", &digest).await;
    assert_eq!(
        reason(&run),
        ("True".into(), "Promoted".into()),
        "{:?}",
        run.status
    );
    // The controller asked the token server, as the pull secret's user, to pull the repository.
    let pull = format!("repository:{REPO}:pull");
    let asked: Vec<_> = tokens.asked().split_off(before);
    assert!(
        asked
            .iter()
            .any(|a| a.user.as_deref() == Some("publisher") && a.scopes.contains(&pull)),
        "{asked:?}"
    );
}

#[tokio::test]
async fn an_oversized_bundle_among_the_referrers_is_not_read_even_when_it_would_verify() {
    // Whoever may push to the candidate's repository (or chose it: the namespace editor) makes
    // the publisher's own bundle 2 MiB, padding its JSON with spaces: it would still verify, but
    // the controller, shared by every namespace, does not take in more than its bound.
    let registry = Registry::start().await;
    let publisher = Cosign::generate();
    let digest = registry.push(REPO, "latest", "v2").await;
    publisher.sign_bundle(&image(&registry, &digest));
    let media = "application/vnd.dev.sigstore.bundle.v0.3+json";
    let oci_manifest = "application/vnd.oci.image.manifest.v1+json";
    let oci_index = "application/vnd.oci.image.index.v1+json";
    let referrers_tag = digest.replace(':', "-");
    let (index, _) = registry.manifest(REPO, &referrers_tag).await;
    let mut index: Value = serde_json::from_slice(&index).unwrap();
    let referrer = index["manifests"][0]["digest"]
        .as_str()
        .unwrap()
        .to_string();
    let (manifest, _) = registry.manifest(REPO, &referrer).await;
    let mut manifest: Value = serde_json::from_slice(&manifest).unwrap();
    let layer = manifest["layers"][0]["digest"]
        .as_str()
        .unwrap()
        .to_string();
    let mut bundle = registry.blob(REPO, &layer).await;
    bundle.resize(2 << 20, b' ');
    let size = bundle.len();
    manifest["layers"][0]["digest"] = json!(registry.put_blob(REPO, bundle).await);
    manifest["layers"][0]["size"] = json!(size);
    let body = serde_json::to_vec(&manifest).unwrap();
    use sha2::Digest as _;
    let padded = format!("sha256:{:x}", sha2::Sha256::digest(&body));
    registry
        .put_manifest(REPO, &padded, body.clone(), oci_manifest)
        .await;
    index["manifests"] = json!([{"mediaType": oci_manifest, "digest": padded, "size": body.len(), "artifactType": media}]);
    let index = serde_json::to_vec(&index).unwrap();
    registry
        .put_manifest(REPO, &referrers_tag, index, oci_index)
        .await;
    let keys = json!([{"name": "publisher", "publicKey": publisher.public_key()}]);
    let s = gated(&registry, keys, &digest).await;
    let before = s.served_tag().await;

    let run = promote(&s, "promote", &digest).await;
    assert_eq!(
        reason(&run),
        ("False".into(), "SignatureMissing".into()),
        "{:?}",
        run.status
    );
    marked_failed(&s, &before, &digest).await;
}
