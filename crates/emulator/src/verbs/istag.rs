//! Writes through the virtual ImageStreamTag view: a POST or PUT of an ImageStreamTag is a
//! write of its ImageStream (what `oc tag` does).

use std::sync::Arc;

use serde_json::{Value, json};

use super::{Cluster, Target, WriteOptions, md_mut, md_str, now, strategy_error, unchanged};
use crate::openshift::{self, IstagWrite};
use crate::patch;
use crate::status::ApiError;
use crate::store::{Stored, WriteOp};

const IMAGE_GROUP: &str = "image.openshift.io";

impl Cluster {
    /// POST/PUT of an ImageStreamTag: a write of its ImageStream.
    pub(super) fn istag_write(
        &self,
        t: &Target,
        mut body: Value,
        mode: IstagWrite,
        opts: &WriteOptions,
    ) -> Result<Value, ApiError> {
        let ty = t.ty.clone();
        self.check_body(t, &mut body, true)?;
        let name = md_str(&body, "name").unwrap_or_default().to_string();
        let (is, _) =
            openshift::parse_istag_name(&name).map_err(|e| strategy_error(e, &ty, &name))?;
        let is = is.to_string();
        let ns = t.ns().to_string();
        let is_type = self
            .store
            .find_type(IMAGE_GROUP, "v1", "imagestreams")
            .ok_or_else(|| ApiError::internal("imagestreams are not served"))?;
        let written = self.store.write_optimistic(
            IMAGE_GROUP,
            "imagestreams",
            &ns,
            &is,
            |reader, current| {
                if !Self::namespace_exists(reader, &ns) {
                    return Err(ApiError::not_found("", "namespaces", &ns));
                }
                let old_value = current.map(|c| c.value());
                let mut new = openshift::istag_write(old_value.as_ref(), &ns, &body, mode)
                    .map_err(|e| strategy_error(e, &ty, &name))?;
                let lookup = Self::lookup_stream(reader);
                match current.zip(old_value.as_ref()) {
                    Some((stored, old)) => {
                        {
                            let m = md_mut(&mut new)?;
                            for key in ["uid", "creationTimestamp", "generation"] {
                                if let Some(v) = old.pointer(&format!("/metadata/{key}")) {
                                    m.insert(key.into(), v.clone());
                                }
                            }
                        }
                        new["status"] = old.get("status").cloned().unwrap_or(Value::Null);
                        openshift::prepare_update(old, &mut new, &self.settings, &lookup, &now())
                            .map_err(|e| strategy_error(e, &is_type, &is))?;
                        patch::record_update(
                            Some(old),
                            &mut new,
                            opts.manager(),
                            &is_type.api_version(),
                            &now(),
                        );
                        if unchanged(&new, old) {
                            return Ok(WriteOp::Unchanged(stored.clone()));
                        }
                    }
                    None => {
                        new["apiVersion"] = json!(is_type.api_version());
                        new["kind"] = json!(is_type.kind);
                        new["metadata"]["namespace"] = json!(ns);
                        new["metadata"]["name"] = json!(is);
                        new = self.prepare_create(reader, &is_type, new, opts)?;
                    }
                }
                if opts.dry_run {
                    return Ok(WriteOp::Unchanged(Arc::new(Stored::new(&new))));
                }
                Ok(WriteOp::Put(new))
            },
        )?;
        let (_, tag) =
            openshift::parse_istag_name(&name).map_err(|e| strategy_error(e, &ty, &name))?;
        openshift::istag_write_response(&written.object.value(), tag, &self.image_lookup())
            .map_err(|e| strategy_error(e, &ty, &name))
    }
}
