//! The importer's registry client: what openshift-apiserver's importer reads from a real
//! registry over the registry v2 API for one `DockerImage` pull spec, turned into the Image
//! objects an import creates (`pkg/image/apiserver/importer`, `internal/imageutil`; the shapes
//! are those recorded from the real server, `../shared/reference/objects/real-openshift/loop/`
//! `isimage-d3.json` for an image, `ml-isimage-l1.json` for an index kept whole).
//!
//! Only the registries the emulator is told about ([`crate::imports::Imports::registries`]) are
//! read over the network; every other pull spec resolves from [`crate::upstream`]'s answers.
//! HTTPS unless the tag's `importPolicy.insecure` or the registry is listed insecure (OpenShift's
//! `registrySources.insecureRegistries`): then plain HTTP too, as OpenShift falls back.
//!
//! An image manifest gives one Image: its config blob's architecture, `created` and `config`
//! (Cmd, Env, Labels, ...), its layers (`dockerImageLayers`, ascending), size (layers and
//! config) and media type. An index (a manifest list) under `importMode: Legacy` is resolved to
//! one platform's manifest (linux/amd64, else the first), whose digest is what is imported;
//! under `PreserveOriginal` the index itself is imported, an Image with `dockerImageManifests`
//! and no platform metadata (its `Created` the import time, as on the real server), and an
//! Image for each platform's manifest beside it.
//!
//! Written here rather than taken from a crate: `oci-client` fetches (it is the client), but
//! the mapping to OpenShift's Image objects exists only in openshift-apiserver's Go code.

use std::time::Duration;

use oci_client::client::{ClientConfig, ClientProtocol};
use oci_client::manifest::OciDescriptor;
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};
use serde_json::{Value, json};

use crate::upstream::{Answer, Failure};

/// How long one import may take against a registry.
const TIMEOUT: Duration = Duration::from_secs(30);
/// The largest manifest or config blob read (a real one is a few KiB).
const MAX_DOCUMENT: usize = 4 << 20;

const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";
const DOCKER_MANIFEST: &str = "application/vnd.docker.distribution.manifest.v2+json";
const DOCKER_LIST: &str = "application/vnd.docker.distribution.manifest.list.v2+json";
const ACCEPTED: [&str; 4] = [OCI_MANIFEST, OCI_INDEX, DOCKER_MANIFEST, DOCKER_LIST];

/// What the importer found for a pull spec: the digest imported, and the Image objects to
/// create (the imported one first).
#[derive(Clone, Debug, PartialEq)]
pub struct Pulled {
    /// The digest the tag gets.
    pub digest: String,
    /// The Images (`image.openshift.io/v1` Image bodies without server metadata).
    pub images: Vec<Value>,
}

/// The registry host of a pull spec (`127.0.0.1:5000/x:1` -> `127.0.0.1:5000`); Docker Hub's
/// for a spec without one.
pub fn registry_of(pull_spec: &str) -> String {
    match pull_spec.parse::<Reference>() {
        Ok(r) => r.registry().to_string(),
        Err(_) => String::new(),
    }
}

/// Reads `pull_spec` from its registry as an import in `import_mode` does. Refusals are the
/// importer's reasons: `NotFound` for an unknown repository or tag, `Unauthorized`, and
/// `InternalError` for anything else (a TLS answer refused, a registry that does not answer).
pub async fn pull(pull_spec: &str, import_mode: &str, insecure: bool, now: &str) -> Answer {
    let read = tokio::time::timeout(TIMEOUT, read(pull_spec, import_mode, insecure, now)).await;
    let failure = match read {
        Ok(Ok(pulled)) => {
            return Answer::Pulled {
                digest: pulled.digest,
                images: pulled.images,
            };
        }
        Ok(Err(failure)) => failure,
        Err(_) => Failure::new(
            "InternalError",
            pull_spec,
            Some(&format!(
                "Internal error occurred: {pull_spec}: no answer within {} s",
                TIMEOUT.as_secs()
            )),
        ),
    };
    Answer::Failure { failure }
}

async fn read(
    pull_spec: &str,
    import_mode: &str,
    insecure: bool,
    now: &str,
) -> Result<Pulled, Failure> {
    let reference: Reference = pull_spec.parse().map_err(|e| {
        Failure::new(
            "InternalError",
            pull_spec,
            Some(&format!("Internal error occurred: {pull_spec}: {e}")),
        )
    })?;
    let protocol = if insecure {
        ClientProtocol::HttpsExcept(vec![reference.registry().to_string()])
    } else {
        ClientProtocol::Https
    };
    let client = Client::new(ClientConfig {
        protocol,
        ..ClientConfig::default()
    });
    let fail = |e: oci_client::errors::OciDistributionError| refusal(pull_spec, &e);
    let (body, digest) = client
        .pull_manifest_raw(&reference, &RegistryAuth::Anonymous, &ACCEPTED)
        .await
        .map_err(fail)?;
    let manifest = document(pull_spec, &body)?;
    let repository = format!("{}/{}", reference.registry(), reference.repository());
    if manifest.get("manifests").is_none() {
        let image = image_of(&client, &reference, &repository, &digest, &manifest).await?;
        return Ok(Pulled {
            digest,
            images: vec![image],
        });
    }
    let entries: Vec<Value> = manifest["manifests"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let mut children = Vec::new();
    for entry in &entries {
        let Some(child) = entry["digest"].as_str() else {
            continue;
        };
        let by_digest = reference.clone_with_digest(child.to_string());
        let (body, child_digest) = client
            .pull_manifest_raw(&by_digest, &RegistryAuth::Anonymous, &ACCEPTED)
            .await
            .map_err(fail)?;
        let m = document(pull_spec, &body)?;
        children.push(image_of(&client, &by_digest, &repository, &child_digest, &m).await?);
    }
    if import_mode == "PreserveOriginal" {
        let mut images = vec![index_image(&repository, &digest, &manifest, &entries, now)];
        images.extend(children);
        return Ok(Pulled { digest, images });
    }
    let chosen = legacy_choice(&entries).ok_or_else(|| {
        Failure::new(
            "InternalError",
            pull_spec,
            Some(&format!(
                "Internal error occurred: {pull_spec}: the manifest list has no manifests"
            )),
        )
    })?;
    let image = children
        .into_iter()
        .find(|i| i["metadata"]["name"] == chosen)
        .ok_or_else(|| Failure::new("NotFound", pull_spec, None))?;
    Ok(Pulled {
        digest: chosen,
        images: vec![image],
    })
}

/// The platform `Legacy` imports of a list: linux/amd64 (OpenShift's default when no
/// `importer.image.openshift.io/prefer-arch` says otherwise), else the first entry.
fn legacy_choice(entries: &[Value]) -> Option<String> {
    let is = |e: &&Value, arch: &str| {
        e["platform"]["architecture"] == arch && e["platform"]["os"] == "linux"
    };
    entries
        .iter()
        .find(|e| is(e, "amd64"))
        .or_else(|| entries.first())
        .and_then(|e| e["digest"].as_str())
        .map(str::to_string)
}

fn document(pull_spec: &str, body: &[u8]) -> Result<Value, Failure> {
    if body.len() > MAX_DOCUMENT {
        return Err(Failure::new(
            "InternalError",
            pull_spec,
            Some(&format!(
                "Internal error occurred: {pull_spec}: a document of {} bytes",
                body.len()
            )),
        ));
    }
    serde_json::from_slice(body).map_err(|e| {
        Failure::new(
            "InternalError",
            pull_spec,
            Some(&format!("Internal error occurred: {pull_spec}: {e}")),
        )
    })
}

/// The Image of one image manifest, with its config blob read.
async fn image_of(
    client: &Client,
    reference: &Reference,
    repository: &str,
    digest: &str,
    manifest: &Value,
) -> Result<Value, Failure> {
    let pull_spec = reference.whole();
    let config = &manifest["config"];
    let descriptor = OciDescriptor {
        media_type: config["mediaType"].as_str().unwrap_or_default().to_string(),
        digest: config["digest"].as_str().unwrap_or_default().to_string(),
        size: config["size"].as_i64().unwrap_or(0),
        ..OciDescriptor::default()
    };
    if descriptor.size < 0 || descriptor.size as usize > MAX_DOCUMENT {
        return Err(Failure::new("InternalError", &pull_spec, None));
    }
    let mut blob = Vec::new();
    client
        .pull_blob(reference, &descriptor, &mut blob)
        .await
        .map_err(|e| refusal(&pull_spec, &e))?;
    let config_file = document(&pull_spec, &blob)?;
    let layers: Vec<Value> = manifest["layers"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|l| json!({"name": l["digest"], "size": l["size"], "mediaType": l["mediaType"]}))
        .collect();
    let size: i64 = layers
        .iter()
        .filter_map(|l| l["size"].as_i64())
        .sum::<i64>()
        + descriptor.size;
    let media_type = manifest["mediaType"]
        .as_str()
        .unwrap_or(OCI_MANIFEST)
        .to_string();
    let mut metadata = json!({
        "kind": "DockerImage",
        "apiVersion": "image.openshift.io/1.0",
        "Id": descriptor.digest,
        "Created": config_file["created"],
        "Architecture": config_file["architecture"],
        "Config": docker_config(&config_file["config"]),
        "ContainerConfig": {},
        "Size": size,
    });
    if config_file["created"].is_null() {
        metadata.as_object_mut().map(|m| m.remove("Created"));
    }
    Ok(json!({
        "apiVersion": "image.openshift.io/v1",
        "kind": "Image",
        "metadata": {
            "name": digest,
            "annotations": {"image.openshift.io/dockerLayersOrder": "ascending"},
        },
        "dockerImageReference": format!("{repository}@{digest}"),
        "dockerImageMetadata": metadata,
        "dockerImageMetadataVersion": "1.0",
        "dockerImageLayers": layers,
        "dockerImageManifestMediaType": media_type,
    }))
}

/// The image config's `config` as OpenShift's `DockerConfig` keeps it (Go field names, empty
/// fields left out).
fn docker_config(config: &Value) -> Value {
    let mut out = serde_json::Map::new();
    for key in [
        "User",
        "ExposedPorts",
        "Env",
        "Cmd",
        "Volumes",
        "WorkingDir",
        "Entrypoint",
        "Labels",
        "StopSignal",
    ] {
        match config.get(key) {
            None | Some(Value::Null) => {}
            Some(Value::String(s)) if s.is_empty() => {}
            Some(v) => {
                out.insert(key.to_string(), v.clone());
            }
        }
    }
    Value::Object(out)
}

/// The Image of an index kept whole (`PreserveOriginal`): no platform metadata, its manifests
/// listed, `Created` the import time.
fn index_image(
    repository: &str,
    digest: &str,
    manifest: &Value,
    entries: &[Value],
    now: &str,
) -> Value {
    let manifests: Vec<Value> = entries
        .iter()
        .map(|e| {
            let mut m = json!({
                "digest": e["digest"],
                "mediaType": e["mediaType"],
                "manifestSize": e["size"],
                "architecture": e["platform"]["architecture"],
                "os": e["platform"]["os"],
            });
            if let Some(variant) = e["platform"]["variant"].as_str() {
                m["variant"] = json!(variant);
            }
            m
        })
        .collect();
    json!({
        "apiVersion": "image.openshift.io/v1",
        "kind": "Image",
        "metadata": {"name": digest},
        "dockerImageReference": format!("{repository}@{digest}"),
        "dockerImageMetadata": {
            "kind": "DockerImage",
            "apiVersion": "image.openshift.io/1.0",
            "Id": digest,
            "Created": now,
            "ContainerConfig": {},
        },
        "dockerImageMetadataVersion": "1.0",
        "dockerImageManifests": manifests,
        "dockerImageManifestMediaType": manifest["mediaType"].as_str().unwrap_or(OCI_INDEX),
    })
}

/// A registry error as the importer classifies it (`formatRepositoryError`).
fn refusal(pull_spec: &str, e: &oci_client::errors::OciDistributionError) -> Failure {
    use oci_client::errors::{OciDistributionError as E, OciErrorCode};
    match e {
        E::ImageManifestNotFoundError(_) => Failure::new("NotFound", pull_spec, None),
        E::RegistryError { envelope, .. }
            if envelope.errors.iter().any(|e| {
                matches!(
                    e.code,
                    OciErrorCode::ManifestUnknown
                        | OciErrorCode::NameUnknown
                        | OciErrorCode::BlobUnknown
                )
            }) =>
        {
            Failure::new("NotFound", pull_spec, None)
        }
        E::UnauthorizedError { .. } | E::AuthenticationFailure(_) => {
            Failure::new("Unauthorized", pull_spec, None)
        }
        other => Failure::new(
            "InternalError",
            pull_spec,
            Some(&format!("Internal error occurred: {pull_spec}: {other}")),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn legacy_takes_linux_amd64_else_the_first() {
        let entries = vec![
            json!({"digest": "sha256:arm", "platform": {"architecture": "arm64", "os": "linux"}}),
            json!({"digest": "sha256:amd", "platform": {"architecture": "amd64", "os": "linux"}}),
        ];
        assert_eq!(legacy_choice(&entries).as_deref(), Some("sha256:amd"));
        assert_eq!(legacy_choice(&entries[..1]).as_deref(), Some("sha256:arm"));
        assert_eq!(legacy_choice(&[]), None);
    }

    #[test]
    fn the_config_keeps_what_openshift_keeps_and_drops_empty_fields() {
        let config = json!({"Cmd": ["/hello"], "Env": ["PATH=/usr/bin"], "Labels": {"demo": "yes"},
                            "WorkingDir": "", "Entrypoint": null, "ArgsEscaped": true});
        assert_eq!(
            docker_config(&config),
            json!({"Cmd": ["/hello"], "Env": ["PATH=/usr/bin"], "Labels": {"demo": "yes"}})
        );
    }

    #[test]
    fn the_registry_of_a_pull_spec() {
        assert_eq!(registry_of("127.0.0.1:5000/x:1"), "127.0.0.1:5000");
        assert_eq!(
            registry_of(
                "quay.io/org/nb@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
            ),
            "quay.io"
        );
    }
}
