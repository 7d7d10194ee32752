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
use crate::openshift;
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
    pub(super) fn stream_import(&self, t: &Target, mut body: Value) -> Result<Value, ApiError> {
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
        let mut statuses = Vec::new();
        let mut resolved = Vec::new();
        for spec in &images {
            let r = match self.upstream.resolve(&spec.from) {
                Answer::Image { digest, metadata } => {
                    let pull_spec =
                        format!("{}@{digest}", crate::simulate::repository_of(&spec.from));
                    self.ensure_image(&digest, &pull_spec, &at, metadata.as_ref())?;
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
        let mut status = json!({ "images": statuses });
        if import {
            let w = self.internal_write(IMAGE_GROUP, "imagestreams", &ns, &name, |cur| {
                let cur =
                    cur.ok_or_else(|| ApiError::not_found(IMAGE_GROUP, "imagestreams", &name))?;
                let mut stream = cur.value();
                let mut changed = false;
                for (spec, r) in images.iter().zip(&resolved) {
                    let next = match r {
                        Resolved::Image { digest, pull_spec } => {
                            openshift::import_spec_succeeded(&stream, spec, digest, pull_spec, &at)
                        }
                        Resolved::Refused { reason, message } => {
                            openshift::import_spec_failed(&stream, spec, reason, message, &at)
                        }
                    };
                    if let Some(next) = next {
                        stream = next;
                        changed = true;
                    }
                }
                Ok(changed.then_some(stream))
            })?;
            status["import"] = w.object.value();
        }
        openshift::default_images(&mut body);
        let m = super::md_mut(&mut body)?;
        m.insert("creationTimestamp".into(), json!(at));
        m.remove("resourceVersion");
        body["status"] = status;
        Ok(body)
    }
}
