//! GET and LIST: one object, or a collection filtered by label and field selectors and cut
//! into pages that all come from the first page's snapshot.

use std::sync::Arc;

use serde_json::value::RawValue;
use serde_json::{Value, json};

use super::{Cluster, ListOptions, Target, strategy_error};
use crate::openshift;
use crate::registry::{Behavior, ResourceType};
use crate::selector::{FieldSelector, LabelSelector, field_value};
use crate::status::ApiError;
use crate::store::{Obj, Stored};

const IMAGE_GROUP: &str = "image.openshift.io";

impl Cluster {
    /// GET one object.
    pub fn get(&self, t: &Target) -> Result<Value, ApiError> {
        let ty = &t.ty;
        match ty.behavior {
            Behavior::ImageStreamTag => {
                let (is, tag) = openshift::parse_istag_name(t.name())
                    .map_err(|e| strategy_error(e, ty, t.name()))?;
                let stream = self
                    .store
                    .get(IMAGE_GROUP, "imagestreams", t.ns(), is)
                    .ok_or_else(|| ApiError::not_found(&ty.group, &ty.plural, t.name()))?;
                openshift::istag_view(&stream.value(), tag, &self.image_lookup())
                    .map_err(|e| strategy_error(e, ty, t.name()))
            }
            Behavior::ImageStreamImage => {
                let is = t.name().split('@').next().unwrap_or_default();
                if !t.name().contains('@') {
                    return Err(ApiError::bad_request(
                        "ImageStreamImages must be retrieved with <name>@<id>",
                    ));
                }
                let stream = self
                    .store
                    .get(IMAGE_GROUP, "imagestreams", t.ns(), is)
                    .ok_or_else(|| ApiError::not_found(&ty.group, &ty.plural, t.name()))?;
                openshift::isimage_view(&stream.value(), t.name(), &self.image_lookup())
                    .map_err(|e| strategy_error(e, ty, t.name()))
            }
            _ => self
                .store
                .get(&ty.group, &ty.plural, t.ns(), t.name())
                .map(|o| o.value())
                .ok_or_else(|| ApiError::not_found(&ty.group, &ty.plural, t.name())),
        }
    }

    /// Checks a field selector against the fields the type supports, like kube's conversion
    /// functions do (`field label not supported`), or openshift-apiserver for its image API.
    pub fn field_selector(
        &self,
        ty: &ResourceType,
        s: Option<&str>,
    ) -> Result<FieldSelector, ApiError> {
        let fs = FieldSelector::parse(s.unwrap_or(""))
            .map_err(|e| ApiError::bad_request(e.to_string()))?;
        for f in fs.fields() {
            if supported_field(ty, f) {
                continue;
            }
            // openshift-apiserver's own message (recorded: `69-list-is-bad-fieldselector`).
            if ty.group == IMAGE_GROUP {
                let only = if ty.namespaced {
                    r#""metadata.name", "metadata.namespace""#
                } else {
                    r#""metadata.name""#
                };
                return Err(ApiError::bad_request(format!(
                    "\"{f}\" is not a known field selector: only {only}"
                )));
            }
            return Err(ApiError::bad_request(format!(
                "field label not supported: {f}"
            )));
        }
        Ok(fs)
    }

    /// Whether an object passes the selectors of a list or watch. Decodes only what the
    /// selectors read: nothing without selectors, the labels alone without a field selector.
    pub fn selected(obj: &Stored, ls: &LabelSelector, fs: &FieldSelector) -> bool {
        if fs.is_empty() {
            return ls.is_empty() || ls.matches_value(obj.labels().as_ref());
        }
        let v = obj.value();
        ls.matches_value(v.pointer("/metadata/labels"))
            && fs.matches(&|path: &str| field_value(&v, path))
    }

    /// LIST a collection.
    pub fn list(&self, t: &Target, opts: &ListOptions) -> Result<ListPage, ApiError> {
        let ty = &t.ty;
        if !ty.allows("list") {
            return Err(ApiError::method_not_allowed("list", &ty.group, &ty.plural));
        }
        let ls = LabelSelector::parse(opts.label_selector.as_deref().unwrap_or(""))
            .map_err(|e| ApiError::bad_request(e.to_string()))?;
        let fs = self.field_selector(ty, opts.field_selector.as_deref())?;
        let (items, rv, start) = match &opts.continue_token {
            Some(token) => {
                let (id, start) = decode_continue(token)?;
                let (rv, items) = self.store.snapshot(id).ok_or_else(|| {
                    ApiError::expired(
                        "The provided continue parameter is too old to display a consistent list result. \
                         You can start a new list without the continue parameter.",
                    )
                })?;
                (items, rv, start)
            }
            None => {
                let (all, rv) = if ty.behavior == Behavior::ImageStreamTag {
                    let (streams, rv) =
                        self.store
                            .list(IMAGE_GROUP, "imagestreams", t.namespace.as_deref());
                    let streams: Vec<Value> = streams
                        .iter()
                        .filter(|s| ls.is_empty() || ls.matches_value(s.labels().as_ref()))
                        .map(|s| s.value())
                        .collect();
                    let views = openshift::istag_list(&streams)
                        .into_iter()
                        .filter(|v| fs.matches(&|p: &str| field_value(v, p)))
                        .map(|v| Arc::new(Stored::new(&v)))
                        .collect::<Vec<_>>();
                    (views, rv)
                } else {
                    let (all, rv) = self
                        .store
                        .list(&ty.group, &ty.plural, t.namespace.as_deref());
                    let all = all
                        .into_iter()
                        .filter(|o| Self::selected(o, &ls, &fs))
                        .collect::<Vec<_>>();
                    (all, rv)
                };
                (Arc::from(all), rv, 0)
            }
        };
        let mut metadata = json!({ "resourceVersion": rv.to_string() });
        let page: Vec<Obj> = if opts.limit > 0 && items.len() > start + opts.limit {
            let end = start + opts.limit;
            let id = match &opts.continue_token {
                Some(token) => decode_continue(token)?.0,
                None => self.store.save_snapshot(rv, items.clone()),
            };
            metadata["continue"] = json!(encode_continue(id, end));
            metadata["remainingItemCount"] = json!(items.len() - end);
            items[start..end].to_vec()
        } else {
            items.get(start..).unwrap_or_default().to_vec()
        };
        Ok(ListPage {
            api_version: ty.api_version(),
            kind: ty.list_kind(),
            metadata,
            items: page,
        })
    }
}

/// One page of a list: the items as stored, written into the response without being decoded.
#[derive(Debug)]
pub struct ListPage {
    /// The list's `apiVersion`.
    pub api_version: String,
    /// The list's kind (`ImageStreamList`).
    pub kind: String,
    /// `resourceVersion`, and `continue` and `remainingItemCount` for a page that is not the last.
    pub metadata: Value,
    /// The objects.
    pub items: Vec<Obj>,
}

impl ListPage {
    /// The response body, in the field order of Go's list types.
    pub fn to_json(&self) -> Vec<u8> {
        #[derive(serde::Serialize)]
        #[serde(rename_all = "camelCase")]
        struct Wire<'a> {
            kind: &'a str,
            api_version: &'a str,
            metadata: &'a Value,
            items: Vec<&'a RawValue>,
        }
        let wire = Wire {
            kind: &self.kind,
            api_version: &self.api_version,
            metadata: &self.metadata,
            items: self.items.iter().map(|o| o.raw()).collect(),
        };
        serde_json::to_vec(&wire).unwrap_or_default()
    }

    /// The list, decoded.
    pub fn to_value(&self) -> Value {
        json!({
            "apiVersion": self.api_version,
            "kind": self.kind,
            "metadata": self.metadata,
            "items": self.items.iter().map(|o| o.value()).collect::<Vec<_>>(),
        })
    }
}

fn supported_field(ty: &ResourceType, field: &str) -> bool {
    if field == "metadata.name" || (field == "metadata.namespace" && ty.namespaced) {
        return true;
    }
    // openshift-apiserver takes no other field of its image API (recorded:
    // `69-list-is-bad-fieldselector`), kube-apiserver these of its core kinds.
    match (ty.group.as_str(), ty.plural.as_str()) {
        ("", "events") => matches!(
            field,
            "involvedObject.kind"
                | "involvedObject.namespace"
                | "involvedObject.name"
                | "involvedObject.uid"
                | "involvedObject.apiVersion"
                | "involvedObject.resourceVersion"
                | "involvedObject.fieldPath"
                | "reason"
                | "reportingComponent"
                | "source"
                | "type"
        ),
        ("", "namespaces") => field == "status.phase",
        _ => false,
    }
}

fn encode_continue(id: u64, start: usize) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(format!("{{\"s\":{id},\"o\":{start}}}"))
}

fn decode_continue(token: &str) -> Result<(u64, usize), ApiError> {
    use base64::Engine;
    let bad = || ApiError::bad_request("continue key is not valid: invalid continue token");
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(token)
        .map_err(|_| bad())?;
    let v: Value = serde_json::from_slice(&raw).map_err(|_| bad())?;
    let id = v.get("s").and_then(Value::as_u64).ok_or_else(bad)?;
    let start = v.get("o").and_then(Value::as_u64).ok_or_else(bad)? as usize;
    Ok((id, start))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn continue_tokens_round_trip() {
        let t = encode_continue(12, 500);
        assert_eq!(decode_continue(&t).unwrap(), (12, 500));
        assert!(decode_continue("not a token!").is_err());
    }
}
