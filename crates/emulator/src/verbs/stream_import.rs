//! `POST imagestreamimports`: what `oc import-image` sends to import a tag now instead of at
//! the next scheduled import. Each requested image is resolved against the upstream registries
//! ([`crate::upstream`]); with `spec.import: true` the results are written into the stream in one
//! write, exactly as a scheduled import writes them ([`openshift::import_spec_succeeded`],
//! [`openshift::import_spec_failed`]). Nothing is stored under `imagestreamimports`: the answer is
//! the request with its `status` (`images[]`, and `import`, the stream after the write), as
//! openshift-apiserver answers it.
//!
//! Not emulated, refused with a 422 that says so: `spec.repository` (whole-repository imports).
//! An import into a stream that does not exist is a 404 here (the real server creates the
//! stream); imagegate's CLI imports only into streams it manages.

use serde_json::{Value, json};

use super::{Cluster, Target, md_str, now};
use crate::openshift::{self, ImportSpec};
use crate::status::ApiError;
use crate::upstream::Answer;

const IMAGE_GROUP: &str = "image.openshift.io";

/// A resolved image of the request: the digest and its Image, or the refusal.
enum Resolved {
    Image { digest: String, pull_spec: String },
    Refused { reason: String, message: String },
}

impl Cluster {
    /// POST of an ImageStreamImport (see the module doc).
    /// `answers`: what each requested image resolved to ([`crate::imports::resolve_all`], which
    /// may read a registry, so the HTTP handler runs it first); None resolves them from the
    /// recorded answers only.
    pub(crate) fn stream_import(
        &self,
        t: &Target,
        mut body: Value,
        answers: Option<Vec<Answer>>,
    ) -> Result<Value, ApiError> {
        let ty = t.ty.clone();
        self.check_body(t, &mut body, true)?;
        let name = md_str(&body, "name").unwrap_or_default().to_string();
        let ns = t.ns().to_string();
        let images = openshift::requested_images(&body).map_err(|errors| {
            ApiError::invalid(&ty.group, &ty.kind, &name, errors.join(", "))
                .with_field_causes(&errors)
        })?;
        let import = body.pointer("/spec/import").and_then(Value::as_bool) == Some(true);
        if import
            && self
                .store
                .get(IMAGE_GROUP, "imagestreams", &ns, &name)
                .is_none()
        {
            return Err(ApiError::not_found(IMAGE_GROUP, "imagestreams", &name));
        }
        let at = now();
        let answers = answers
            .filter(|a| a.len() == images.len())
            .unwrap_or_else(|| {
                images
                    .iter()
                    .map(|i| self.upstream.resolve(&i.from))
                    .collect()
            });
        let (statuses, stream) =
            self.import_images(&ns, &name, &images, answers, import, &at, None)?;
        let mut status = json!({ "images": statuses });
        if let Some(stream) = stream {
            status["import"] = stream;
        }
        openshift::default_images(&mut body);
        let m = super::md_mut(&mut body)?;
        m.insert("creationTimestamp".into(), json!(at));
        m.remove("resourceVersion");
        body["status"] = status;
        Ok(body)
    }

    /// Resolves each image against the upstream registries (creating their Images) and, when
    /// `write`, writes the results into stream `ns/name` in one write, as openshift-apiserver's
    /// ImageStreamImport does: the per-image `status.images[]` entries, and the stream after the
    /// write (the stored one when nothing changed). What both `POST imagestreamimports` and the
    /// import controllers (`crate::imports`) run. `seen`, the resourceVersion of the stream the
    /// import was decided on (the import controller's ImageStreamImport carries it): a stream
    /// written since is a 409 and nothing is written, so a slow import cannot overwrite a newer
    /// one.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn import_images(
        &self,
        ns: &str,
        name: &str,
        images: &[ImportSpec],
        answers: Vec<Answer>,
        write: bool,
        at: &str,
        seen: Option<&str>,
    ) -> Result<(Vec<Value>, Option<Value>), ApiError> {
        let mut statuses = Vec::new();
        let mut resolved = Vec::new();
        for (spec, answer) in images.iter().zip(answers) {
            let r = match answer {
                Answer::Pulled { digest, images } => {
                    for image in images {
                        self.create_image(image)?;
                    }
                    let image = self
                        .store
                        .get(IMAGE_GROUP, "images", "", &digest)
                        .map(|o| o.value())
                        .unwrap_or(Value::Null);
                    let pull_spec = image["dockerImageReference"]
                        .as_str()
                        .map(str::to_string)
                        .unwrap_or_else(|| {
                            format!("{}@{digest}", crate::simulate::repository_of(&spec.from))
                        });
                    statuses.push(openshift::image_succeeded(&spec.tag, image));
                    Resolved::Image { digest, pull_spec }
                }
                Answer::Image { digest, metadata } => {
                    let pull_spec =
                        format!("{}@{digest}", crate::simulate::repository_of(&spec.from));
                    self.ensure_image(&digest, &pull_spec, at, metadata.as_ref())?;
                    let image = self
                        .store
                        .get(IMAGE_GROUP, "images", "", &digest)
                        .map(|o| o.value())
                        .unwrap_or(Value::Null);
                    statuses.push(openshift::image_succeeded(&spec.tag, image));
                    Resolved::Image { digest, pull_spec }
                }
                Answer::Failure { failure } => {
                    statuses.push(openshift::image_failed(
                        &spec.tag,
                        &spec.from,
                        &failure.reason,
                        &failure.message,
                        failure.code(),
                    ));
                    Resolved::Refused {
                        reason: failure.reason,
                        message: failure.message,
                    }
                }
            };
            resolved.push(r);
        }
        if !write {
            return Ok((statuses, None));
        }
        let w = self.internal_write(IMAGE_GROUP, "imagestreams", ns, name, |cur| {
            let cur = cur.ok_or_else(|| ApiError::not_found(IMAGE_GROUP, "imagestreams", name))?;
            let mut stream = cur.value();
            let now = stream
                .pointer("/metadata/resourceVersion")
                .and_then(Value::as_str);
            if seen.is_some_and(|seen| Some(seen) != now) {
                return Err(ApiError::conflict(IMAGE_GROUP, "imagestreams", name));
            }
            let mut changed = false;
            for (spec, r) in images.iter().zip(&resolved) {
                let next = match r {
                    Resolved::Image { digest, pull_spec } => {
                        openshift::import_spec_succeeded(&stream, spec, digest, pull_spec, at)
                    }
                    Resolved::Refused { reason, message } => {
                        openshift::import_spec_failed(&stream, spec, reason, message, at)
                    }
                };
                if let Some(next) = next {
                    stream = next;
                    changed = true;
                }
            }
            Ok(changed.then_some(stream))
        })?;
        Ok((statuses, Some(w.object.value())))
    }
}
