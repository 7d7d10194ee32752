//! What happens on a real cluster without an API request from the product: objects that were
//! already there (seeding), and the OpenShift import controller's writes (a scheduled import
//! that finds a new digest, an import that fails).

use chrono::{SecondsFormat, Utc};
use serde::Deserialize;
use serde_json::{Value, json};

use super::openshift;
use super::registry::Behavior;
use super::status::ApiError;
use super::store::{Stored, WriteOp};
use super::upstream::{Answer, Failure, is_digest};
use super::verbs::{Cluster, Target, WriteOptions};

const IMAGE_GROUP: &str = "image.openshift.io";

/// A simulated scheduled import.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ImportRequest {
    /// The tag imported into (must have a `DockerImage` source, or be created with `from`).
    pub tag: String,
    /// The digest the registry now serves for the tag; a new random digest when absent.
    pub digest: Option<String>,
    /// The `DockerImage` pull spec to import from when the tag does not exist yet.
    pub from: Option<String>,
    /// `dockerImageMetadata` of the new Image (merged over defaults: linux/amd64, created now).
    pub docker_image_metadata: Option<Value>,
}

/// The result of an import that changed the stream.
#[derive(Clone, Debug)]
pub struct Imported {
    /// The digest imported.
    pub digest: String,
    /// The ImageStream after the import.
    pub stream: Value,
}

fn now() -> String {
    Utc::now().to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// A random image digest (`sha256:` and 64 hex digits).
pub fn random_digest() -> String {
    format!(
        "sha256:{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    )
}

/// `quay.io/org/nb:latest` -> `quay.io/org/nb` (the repository a digest reference uses).
pub(crate) fn repository_of(pull_spec: &str) -> &str {
    let no_digest = pull_spec.split('@').next().unwrap_or(pull_spec);
    match no_digest.rfind(':') {
        Some(i) if !no_digest[i..].contains('/') => &no_digest[..i],
        _ => no_digest,
    }
}

impl Cluster {
    /// Stores the objects of a YAML or JSON text (several documents, or `kind: List`) as if
    /// they had been on the cluster already: status and generations are kept as given, the
    /// namespaces they need are created, and every image digest in an ImageStream's history
    /// gets its cluster-scoped Image object. Returns `namespace/name` of each object.
    pub fn seed_str(&self, text: &str) -> Result<Vec<String>, ApiError> {
        // Every document is read before any is stored, so that a YAML error seeds nothing;
        // they wait frozen (as JSON), which takes a tenth of the memory of decoded values.
        let mut objects = Vec::new();
        for doc in serde_norway::Deserializer::from_str(text) {
            let v = Value::deserialize(doc)
                .map_err(|e| ApiError::bad_request(format!("invalid YAML: {e}")))?;
            if v.is_null() {
                continue;
            }
            if v.get("kind")
                .and_then(Value::as_str)
                .is_some_and(|k| k.ends_with("List"))
                && let Some(items) = v.get("items").and_then(Value::as_array)
            {
                objects.extend(items.iter().map(Stored::new));
            } else {
                objects.push(Stored::new(&v));
            }
        }
        objects.iter().map(|o| self.seed(o.value())).collect()
    }

    /// Stores one object as if it had been on the cluster already (see [`Cluster::seed_str`]).
    pub fn seed(&self, obj: Value) -> Result<String, ApiError> {
        let api_version = obj
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let kind = obj.get("kind").and_then(Value::as_str).unwrap_or_default();
        let (group, version) = match api_version.split_once('/') {
            Some((g, v)) => (g, v),
            // Old OpenShift objects say `apiVersion: v1` for image kinds.
            None if kind.starts_with("Image") => ("image.openshift.io", "v1"),
            None => ("", api_version),
        };
        let ty = self
            .store
            .find_type_of_kind(group, version, kind)
            .ok_or_else(|| {
                ApiError::bad_request(format!("no resource serves {api_version} {kind}"))
            })?;
        let name = obj
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        if name.is_empty() {
            return Err(ApiError::bad_request(format!(
                "a seeded {kind} needs metadata.name"
            )));
        }
        let ns = if ty.namespaced {
            let ns = obj
                .pointer("/metadata/namespace")
                .and_then(Value::as_str)
                .unwrap_or("default")
                .to_string();
            self.ensure_namespace(&ns)?;
            Some(ns)
        } else {
            None
        };
        let mut body = obj.clone();
        if let Some(m) = body.get_mut("metadata").and_then(Value::as_object_mut) {
            for key in [
                "resourceVersion",
                "uid",
                "creationTimestamp",
                "managedFields",
                "selfLink",
                "selflink",
            ] {
                m.remove(key);
            }
        }
        if matches!(ty.behavior, Behavior::Namespace | Behavior::Crd) {
            // These register state beyond the object (a namespace to create in, a new type).
            let target = Target {
                ty: ty.clone(),
                namespace: ns.clone(),
                name: None,
                subresource: None,
            };
            let opts = WriteOptions {
                default_manager: "emulator-seed".into(),
                ..Default::default()
            };
            self.create(&target, body, &opts)?;
        } else {
            // Everything else is stored as it is: a seeded object is a snapshot of an object
            // with a past (status, history, generations), not a new request to validate.
            let ns_str = ns.clone().unwrap_or_default();
            let settings = &self.settings;
            let is_stream = ty.behavior == Behavior::ImageStream;
            let seeding = format!("{ns_str}/{name}@");
            if is_stream {
                self.seeded
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(seeding.clone());
            }
            let written = self
                .store
                .write(&ty.group, &ty.plural, &ns_str, &name, |_, cur| {
                    if cur.is_some() {
                        return Err(ApiError::already_exists(&ty.group, &ty.plural, &name));
                    }
                    let mut o = body;
                    o["apiVersion"] = json!(ty.api_version());
                    o["kind"] = json!(ty.kind);
                    let m = o
                        .get_mut("metadata")
                        .and_then(Value::as_object_mut)
                        .ok_or_else(|| ApiError::bad_request("metadata must be an object"))?;
                    m.insert("uid".into(), json!(uuid::Uuid::new_v4().to_string()));
                    m.insert("creationTimestamp".into(), json!(now()));
                    if ty.namespaced {
                        m.insert("namespace".into(), json!(ns_str));
                    }
                    if ty.has_generation && !m.contains_key("generation") {
                        m.insert("generation".into(), json!(1));
                    }
                    if ty.behavior == Behavior::ImageStream {
                        seed_defaults(&mut o, settings);
                    }
                    Ok(WriteOp::Put(o))
                });
            if is_stream {
                let mut seeded = self.seeded.lock().unwrap_or_else(|p| p.into_inner());
                seeded.remove(&seeding);
                if let Ok(w) = &written {
                    let (name, version) = super::verbs::seeded_key(&w.object.value());
                    seeded.insert(format!("{name}@{version}"));
                }
            }
            written?;
        }
        if ty.behavior == Behavior::ImageStream {
            self.ensure_images_for(&obj)?;
            self.remember_upstream(&obj);
        }
        Ok(match ns {
            Some(ns) => format!("{ns}/{name}"),
            None => name,
        })
    }

    fn ensure_namespace(&self, ns: &str) -> Result<(), ApiError> {
        if self.store.get("", "namespaces", "", ns).is_some() {
            return Ok(());
        }
        let ty = self
            .store
            .find_type("", "v1", "namespaces")
            .ok_or_else(|| ApiError::internal("namespaces are not served"))?;
        let target = Target {
            ty,
            namespace: None,
            name: None,
            subresource: None,
        };
        let opts = WriteOptions {
            default_manager: "emulator-seed".into(),
            ..Default::default()
        };
        match self.create(
            &target,
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
            &opts,
        ) {
            Ok(_) => Ok(()),
            Err(e) if e.code == 409 => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Creates the Image objects for every digest in a stream's history that has none, as the
    /// import that wrote the history would have.
    fn ensure_images_for(&self, stream: &Value) -> Result<(), ApiError> {
        let tags = stream
            .pointer("/status/tags")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        for t in tags {
            for item in t
                .get("items")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default()
            {
                let (Some(digest), Some(reference)) = (
                    item.get("image")
                        .and_then(Value::as_str)
                        .filter(|d| !d.is_empty()),
                    item.get("dockerImageReference").and_then(Value::as_str),
                ) else {
                    continue;
                };
                let created = item.get("created").and_then(Value::as_str).unwrap_or("");
                self.ensure_image(digest, reference, created, None)?;
            }
        }
        Ok(())
    }

    /// Records, for every `DockerImage` spec tag of a seeded stream with a history, that its
    /// registry still serves the digest last imported (unless an answer is already recorded).
    fn remember_upstream(&self, stream: &Value) {
        for (from, digest) in super::upstream::last_imported(stream) {
            self.upstream.set_if_unknown(
                &from,
                Answer::Image {
                    digest,
                    metadata: None,
                },
            );
        }
    }

    /// Creates an Image read from a registry ([`crate::pull`]) unless one of its name exists
    /// (an image's content never changes under its digest).
    pub(crate) fn create_image(&self, image: Value) -> Result<(), ApiError> {
        let ty = self
            .store
            .find_type(IMAGE_GROUP, "v1", "images")
            .ok_or_else(|| ApiError::internal("images are not served"))?;
        let target = Target {
            ty,
            namespace: None,
            name: None,
            subresource: None,
        };
        let opts = WriteOptions {
            default_manager: "openshift-apiserver".into(),
            ..Default::default()
        };
        match self.create(&target, image, &opts) {
            Ok(_) => Ok(()),
            Err(e) if e.code == 409 => Ok(()),
            Err(e) => Err(e),
        }
    }

    pub(crate) fn ensure_image(
        &self,
        digest: &str,
        reference: &str,
        created: &str,
        metadata: Option<&Value>,
    ) -> Result<(), ApiError> {
        if self.store.get(IMAGE_GROUP, "images", "", digest).is_some() {
            if let Some(m) = metadata {
                self.set_image_metadata(digest, m.clone())?;
            }
            return Ok(());
        }
        let mut meta = json!({
            "kind": "DockerImage",
            "apiVersion": "image.openshift.io/1.0",
            "Created": if created.is_empty() { now() } else { created.to_string() },
            "Architecture": "amd64",
            "Config": {},
        });
        if let Some(m) = metadata {
            meta = super::patch::merge_patch(&meta, m);
        }
        let image = json!({
            "apiVersion": "image.openshift.io/v1",
            "kind": "Image",
            "metadata": {"name": digest},
            "dockerImageReference": reference,
            "dockerImageMetadata": meta,
            "dockerImageMetadataVersion": "1.0",
            "dockerImageManifestMediaType": "application/vnd.oci.image.manifest.v1+json",
        });
        let ty = self
            .store
            .find_type(IMAGE_GROUP, "v1", "images")
            .ok_or_else(|| ApiError::internal("images are not served"))?;
        let target = Target {
            ty,
            namespace: None,
            name: None,
            subresource: None,
        };
        let opts = WriteOptions {
            default_manager: "openshift-apiserver".into(),
            ..Default::default()
        };
        match self.create(&target, image, &opts) {
            Ok(_) => Ok(()),
            Err(e) if e.code == 409 => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Merges `metadata` into an Image's `dockerImageMetadata` (RFC 7386).
    pub fn set_image_metadata(&self, digest: &str, metadata: Value) -> Result<Value, ApiError> {
        let w = self
            .store
            .write(IMAGE_GROUP, "images", "", digest, |_, cur| {
                let mut o = cur
                    .ok_or_else(|| ApiError::not_found(IMAGE_GROUP, "images", digest))?
                    .value();
                let merged = super::patch::merge_patch(
                    o.get("dockerImageMetadata").unwrap_or(&Value::Null),
                    &metadata,
                );
                o["dockerImageMetadata"] = merged;
                Ok(WriteOp::Put(o))
            })?;
        Ok(w.object.value())
    }

    /// A scheduled import that finds `req.digest` (or a new digest) behind the tag's source:
    /// creates the Image and writes the TagEvent exactly as openshift-apiserver's import does.
    /// None when the digest is the one already current (the real server then writes nothing).
    pub fn import(
        &self,
        ns: &str,
        is: &str,
        req: &ImportRequest,
    ) -> Result<Option<Imported>, ApiError> {
        if req.tag.is_empty() {
            return Err(ApiError::bad_request("tag is required"));
        }
        let stream = self
            .store
            .get(IMAGE_GROUP, "imagestreams", ns, is)
            .ok_or_else(|| ApiError::not_found(IMAGE_GROUP, "imagestreams", is))?
            .value();
        let source = stream
            .pointer("/spec/tags")
            .and_then(Value::as_array)
            .and_then(|tags| tags.iter().find(|t| t.get("name").and_then(Value::as_str) == Some(req.tag.as_str())))
            .and_then(|t| t.pointer("/from"))
            .filter(|f| f.get("kind").and_then(Value::as_str) == Some("DockerImage"))
            .and_then(|f| f.get("name").and_then(Value::as_str))
            .map(str::to_string)
            .or_else(|| req.from.clone())
            .ok_or_else(|| {
                ApiError::bad_request(format!(
                    "tag {:?} of imagestream {ns}/{is} has no DockerImage source to import from (give \"from\")",
                    req.tag
                ))
            })?;
        let digest = req.digest.clone().unwrap_or_else(random_digest);
        if !is_digest(&digest) {
            return Err(ApiError::bad_request(format!(
                "{digest:?} is not a sha256 digest"
            )));
        }
        let pull_spec = format!("{}@{digest}", repository_of(&source));
        let at = now();
        self.ensure_image(&digest, &pull_spec, &at, req.docker_image_metadata.as_ref())?;
        // The registry serves this digest for the tag's source from now on.
        self.upstream.set(
            &source,
            Answer::Image {
                digest: digest.clone(),
                metadata: req.docker_image_metadata.clone(),
            },
        );
        let w = self.internal_write(IMAGE_GROUP, "imagestreams", ns, is, |cur| {
            let cur = cur.ok_or_else(|| ApiError::not_found(IMAGE_GROUP, "imagestreams", is))?;
            Ok(openshift::import_succeeded(
                &cur.value(),
                &req.tag,
                &digest,
                &pull_spec,
                &at,
            ))
        })?;
        Ok(w.event.map(|_| Imported {
            digest,
            stream: w.object.value(),
        }))
    }

    /// A scheduled import that fails (`reason` as the importer reports it: `NotFound`,
    /// `Unauthorized`, `InternalError`). None when the same failure is already recorded.
    pub fn import_failure(
        &self,
        ns: &str,
        is: &str,
        tag: &str,
        reason: &str,
        message: Option<&str>,
    ) -> Result<Option<Value>, ApiError> {
        let stream = self
            .store
            .get(IMAGE_GROUP, "imagestreams", ns, is)
            .ok_or_else(|| ApiError::not_found(IMAGE_GROUP, "imagestreams", is))?
            .value();
        let source = stream
            .pointer("/spec/tags")
            .and_then(Value::as_array)
            .and_then(|tags| {
                tags.iter()
                    .find(|t| t.get("name").and_then(Value::as_str) == Some(tag))
            })
            .and_then(|t| t.get("from"));
        let from = source
            .and_then(|f| f.get("name"))
            .and_then(Value::as_str)
            .unwrap_or(tag)
            .to_string();
        let failure = Failure::new(reason, &from, message);
        let message = failure.message.clone();
        // The registry refuses the tag's source from now on (until it serves a digest again).
        if source.and_then(|f| f.get("kind")).and_then(Value::as_str) == Some("DockerImage") {
            self.upstream.set(&from, Answer::Failure { failure });
        }
        let at = now();
        let w = self.internal_write(IMAGE_GROUP, "imagestreams", ns, is, |cur| {
            let cur = cur.ok_or_else(|| ApiError::not_found(IMAGE_GROUP, "imagestreams", is))?;
            Ok(openshift::import_failed(
                &cur.value(),
                tag,
                reason,
                &message,
                &at,
            ))
        })?;
        Ok(w.event.map(|_| w.object.value()))
    }
}

/// The defaults and ordering openshift-apiserver gives every stored ImageStream (tags sorted
/// by name, `referencePolicy.type: Source`, `importMode: Legacy`, the decorated repository),
/// applied to a seeded one without touching its history.
fn seed_defaults(o: &mut Value, settings: &openshift::Settings) {
    let generation = o
        .pointer("/metadata/generation")
        .cloned()
        .unwrap_or(json!(1));
    if let Some(tags) = o.pointer_mut("/spec/tags").and_then(Value::as_array_mut) {
        for t in tags.iter_mut().filter(|t| t.is_object()) {
            if t.get("generation").is_none_or(Value::is_null) {
                t["generation"] = generation.clone();
            }
            if t.pointer("/referencePolicy/type").is_none() {
                t["referencePolicy"] = json!({"type": "Source"});
            }
            if t.pointer("/importPolicy/importMode").is_none() {
                if !t.get("importPolicy").is_some_and(Value::is_object) {
                    t["importPolicy"] = json!({});
                }
                t["importPolicy"]["importMode"] = json!("Legacy");
            }
            if t.get("annotations").is_none() {
                t["annotations"] = Value::Null;
            }
        }
        tags.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
    }
    if let Some(tags) = o.pointer_mut("/status/tags").and_then(Value::as_array_mut) {
        tags.sort_by(|a, b| a["tag"].as_str().cmp(&b["tag"].as_str()));
    }
    openshift::decorate(o, settings);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repository_drops_tag_and_digest_but_keeps_registry_ports() {
        assert_eq!(repository_of("quay.io/org/nb:latest"), "quay.io/org/nb");
        assert_eq!(repository_of("localhost:5000/nb"), "localhost:5000/nb");
        assert_eq!(repository_of("localhost:5000/nb:1.0"), "localhost:5000/nb");
        assert_eq!(repository_of("quay.io/org/nb@sha256:abc"), "quay.io/org/nb");
    }

    #[test]
    fn random_digests_look_like_sha256() {
        let d = random_digest();
        assert!(d.starts_with("sha256:"));
        assert_eq!(d.len(), 71);
        assert!(d[7..].chars().all(|c| c.is_ascii_hexdigit()));
    }
}
