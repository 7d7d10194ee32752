//! `import`: import the candidate tag now, as `oc import-image` does, instead of waiting up to
//! 15 minutes for the scheduled import: `POST imagestreamimports` with `spec.import: true` and
//! one image, the tag's own `from`, `importPolicy` and `referencePolicy`. The API server
//! resolves the tag at the registry and writes the result into the stream exactly as a scheduled
//! import does (a new digest is prepended to the tag's history; a failure becomes the tag's
//! `ImportSuccess=False` condition, the history kept). The source then reports a new candidate
//! digest, and the pipeline validates it, as for any scheduled import.

use anyhow::{Context, anyhow, bail};
use k8s_openapi::api::core::v1::{LocalObjectReference, ObjectReference};
use kube::api::{Api, PostParams};

use crate::api::imagestream::KIND_DOCKER_IMAGE;
use crate::api::{
    ImageImportSpec, ImageStream, ImageStreamImport, ImageStreamImportSpec, status_code,
};
use crate::cli::ops::ImportArgs;
use crate::controller::crd::ImagePromotion;
use crate::controller::params::DEFAULT_CANDIDATE_TAG;

use super::Verdict;
use super::runs::choose_promotion;

/// The ImageStreamImport that imports `tag` of `stream` from where the tag imports from; an
/// error when the tag does not exist or imports nothing (`from` is not a `DockerImage`).
pub(crate) fn request(stream: &ImageStream, tag: &str) -> Result<ImageStreamImport, String> {
    let name = stream.metadata.name.clone().unwrap_or_default();
    let spec_tag = stream
        .spec_tag(tag)
        .ok_or_else(|| format!("ImageStream {name:?} has no tag {tag:?}"))?;
    let from = spec_tag
        .from
        .as_ref()
        .filter(|f| f.kind.as_deref() == Some(KIND_DOCKER_IMAGE))
        .and_then(|f| f.name.clone())
        .ok_or_else(|| {
            let kind = spec_tag
                .from
                .as_ref()
                .and_then(|f| f.kind.clone())
                .unwrap_or_default();
            format!(
                "{name}:{tag} imports nothing: its from is {kind:?}, not a DockerImage pull spec"
            )
        })?;
    Ok(ImageStreamImport {
        metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            name: Some(name),
            namespace: stream.metadata.namespace.clone(),
            ..Default::default()
        },
        spec: ImageStreamImportSpec {
            import: true,
            images: vec![ImageImportSpec {
                from: ObjectReference {
                    kind: Some(KIND_DOCKER_IMAGE.into()),
                    name: Some(from),
                    ..Default::default()
                },
                to: Some(LocalObjectReference { name: tag.into() }),
                import_policy: spec_tag.import_policy.clone(),
                reference_policy: spec_tag.reference_policy.clone(),
            }],
        },
        status: None,
    })
}

/// What the answer says: the line to print and the verdict.
pub(crate) fn outcome(
    answer: &ImageStreamImport,
    tag: &str,
    before: Option<&str>,
) -> (String, Verdict) {
    let status = answer.status.as_ref();
    let image = status.and_then(|s| s.images.first());
    match image {
        Some(i) if i.succeeded() => {
            let after = status
                .and_then(|s| s.import.as_ref())
                .and_then(|is| is.current_digest(tag))
                .or_else(|| i.digest())
                .unwrap_or_default();
            let line = match before {
                Some(b) if b == after => format!("{tag}: {after} (unchanged)"),
                Some(b) => format!("{tag}: imported {after} (was {b})"),
                None => format!("{tag}: imported {after}"),
            };
            (line, Verdict::Done)
        }
        Some(i) => (
            format!(
                "{tag}: import failed: {}: {}",
                i.status.reason.as_deref().unwrap_or("Failure"),
                i.status.message.as_deref().unwrap_or_default()
            ),
            Verdict::Refused,
        ),
        None => (
            format!("{tag}: the API server reported no image"),
            Verdict::Refused,
        ),
    }
}

/// `import`.
pub(crate) async fn run(args: ImportArgs) -> anyhow::Result<Verdict> {
    let (client, default_ns) = super::connect::client(&args.kube).await?;
    let (ns, name) = super::connect::split_target(
        &args.imagestream,
        args.kube.namespace.as_deref(),
        &default_ns,
    )?;
    let stream = Api::<ImageStream>::namespaced(client.clone(), &ns)
        .get_opt(&name)
        .await
        .with_context(|| format!("cannot read ImageStream {ns}/{name}"))?
        .ok_or_else(|| anyhow!("ImageStream {name:?} does not exist in namespace {ns:?}"))?;
    let tag = match args.tag {
        Some(t) => t,
        None => candidate_tag(&client, &ns, &name).await?,
    };
    let req = request(&stream, &tag).map_err(|e| anyhow!(e))?;
    let answer = Api::<ImageStreamImport>::namespaced(client, &ns)
        .create(&PostParams::default(), &req)
        .await
        .with_context(|| format!("cannot import {ns}/{name}:{tag}"))?;
    let (line, verdict) = outcome(&answer, &tag, stream.current_digest(&tag));
    match verdict {
        Verdict::Done => println!("{ns}/{name}:{line}"),
        Verdict::Refused => eprintln!("error: {ns}/{name}:{line}"),
    }
    Ok(verdict)
}

/// The candidate tag of the ImagePromotion that applies to the stream, else `candidate`.
async fn candidate_tag(client: &kube::Client, ns: &str, name: &str) -> anyhow::Result<String> {
    let promotions = match Api::<ImagePromotion>::namespaced(client.clone(), ns)
        .list(&Default::default())
        .await
    {
        Ok(l) => l.items,
        Err(e) if status_code(&e) == Some(404) => Vec::new(),
        Err(e) => return Err(e).context(format!("cannot list ImagePromotions in {ns}")),
    };
    let chosen = match choose_promotion(None, &promotions, name) {
        Ok(c) => c,
        Err(e) => bail!("{e} (or give the tag with --tag)"),
    };
    Ok(chosen
        .and_then(|n| {
            promotions
                .into_iter()
                .find(|p| p.metadata.name.as_deref() == Some(&n))
        })
        .and_then(|p| p.spec.candidate_tag)
        .unwrap_or_else(|| DEFAULT_CANDIDATE_TAG.into()))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const A: &str = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    const B: &str = "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

    fn stream() -> ImageStream {
        serde_json::from_value(json!({
            "apiVersion": "image.openshift.io/v1", "kind": "ImageStream",
            "metadata": {"name": "nb", "namespace": "ds"},
            "spec": {"tags": [
                {"name": "candidate", "from": {"kind": "DockerImage", "name": "quay.io/org/nb:latest"},
                 "importPolicy": {"scheduled": true, "importMode": "Legacy"}, "referencePolicy": {"type": "Source"}},
                {"name": "latest", "from": {"kind": "ImageStreamImage", "name": format!("nb@{A}")}}]}
        }))
        .unwrap()
    }

    #[test]
    fn the_import_is_what_oc_import_image_sends_for_the_candidate() {
        // Body (E) of DERIVED_request-bodies_promote-and-import.yaml.
        assert_eq!(
            serde_json::to_value(request(&stream(), "candidate").unwrap()).unwrap(),
            json!({
                "apiVersion": "image.openshift.io/v1", "kind": "ImageStreamImport",
                "metadata": {"name": "nb", "namespace": "ds"},
                "spec": {"import": true, "images": [{
                    "from": {"kind": "DockerImage", "name": "quay.io/org/nb:latest"},
                    "to": {"name": "candidate"},
                    "importPolicy": {"scheduled": true, "importMode": "Legacy"},
                    "referencePolicy": {"type": "Source"}}]}
            })
        );
    }

    #[test]
    fn a_tag_that_imports_nothing_is_refused_with_the_reason() {
        assert_eq!(
            request(&stream(), "latest").unwrap_err(),
            "nb:latest imports nothing: its from is \"ImageStreamImage\", not a DockerImage pull spec"
        );
        assert_eq!(
            request(&stream(), "nope").unwrap_err(),
            "ImageStream \"nb\" has no tag \"nope\""
        );
    }

    #[test]
    fn the_answer_says_new_unchanged_or_failed() {
        let answer = |images: serde_json::Value| -> ImageStreamImport {
            serde_json::from_value(
                json!({"metadata": {"name": "nb"}, "spec": {}, "status": {"images": images}}),
            )
            .unwrap()
        };
        let ok = answer(
            json!([{"status": {"status": "Success"}, "tag": "candidate", "image": {"metadata": {"name": B}}}]),
        );
        assert_eq!(
            outcome(&ok, "candidate", Some(A)),
            (format!("candidate: imported {B} (was {A})"), Verdict::Done)
        );
        assert_eq!(
            outcome(&ok, "candidate", Some(B)),
            (format!("candidate: {B} (unchanged)"), Verdict::Done)
        );
        let failed = answer(
            json!([{"status": {"status": "Failure", "reason": "NotFound", "code": 404,
            "message": "dockerimage.image.openshift.io \"quay.io/org/nb:latest\" not found"}, "tag": "candidate"}]),
        );
        assert_eq!(
            outcome(&failed, "candidate", Some(A)),
            (
                "candidate: import failed: NotFound: dockerimage.image.openshift.io \"quay.io/org/nb:latest\" not found".into(),
                Verdict::Refused
            )
        );
    }
}
