//! Adoption by copy (`--copy`): a gated copy of an operator-shipped stream is created (or brought
//! back to the gated shape), then the original hidden from the spawners. Pure, as [`super`].

use serde_json::{Value, json};

use super::{Pin, Plan, Write, WriteKind, copy_name, gate, parse};
use crate::adopt::names;
use crate::adopt::shape::{annotation, is_managed, object, previous_tag, put_tag, tag_value};
use crate::adopt::{Options, Summary};
use crate::api::ImageStream;

/// The copy of an operator-shipped stream: created (or brought back to the gated shape), then
/// the original hidden from the spawners. The copy comes first, so the image is never offered
/// by neither.
pub(super) fn plan_copy(
    original: &Value,
    is: &ImageStream,
    copy: Option<&Value>,
    options: &Options,
) -> Result<Plan, String> {
    let name = is.metadata.name.clone().unwrap_or_default();
    let namespace = is.metadata.namespace.clone().unwrap_or_default();
    let copy_name = copy_name(original, options).unwrap_or_default();
    let mut writes = Vec::new();
    let summary = match copy {
        Some(existing) => {
            let cis = parse(existing)?;
            if !is_managed(&cis) || annotation(&cis, names::COPY_OF) != Some(name.as_str()) {
                return Err(format!(
                    "it is shipped by the Open Data Hub operator, and its gated copy would be \
                     {namespace}/{copy_name}, but that ImageStream exists and is not imagegate's \
                     copy of {name}; name another with --copy-name"
                ));
            }
            let (after, summary) = gate(existing, &cis, options, Pin::Registry)?;
            if &after != existing {
                writes.push(Write {
                    kind: WriteKind::Replace,
                    before: Some(existing.clone()),
                    after,
                });
            }
            summary
        }
        None => {
            let source = copy_source(original, &copy_name);
            let cis = parse(&source)?;
            let (mut after, summary) = gate(&source, &cis, options, Pin::Registry)?;
            pin_other_tags(&mut after, &cis, &summary);
            if let Some(obj) = after.as_object_mut() {
                obj.remove("status");
            }
            writes.push(Write {
                kind: WriteKind::Create,
                before: None,
                after,
            });
            summary
        }
    };
    let mut hidden = original.clone();
    let meta = object(&mut hidden, "metadata");
    let meta = meta.entry("annotations").or_insert_with(|| json!({}));
    set_map(meta, names::ODH_IMAGE_HIDDEN, "true");
    set_map(meta, names::GATED_COPY, &copy_name);
    if &hidden != original {
        writes.push(Write {
            kind: WriteKind::HideOriginal,
            before: Some(original.clone()),
            after: hidden,
        });
    }
    let mut summary = summary;
    summary.notes.push(format!(
        "{namespace}/{name} is shipped by the Open Data Hub operator, which re-applies its tags: \
         the gate is on the copy {namespace}/{copy_name}, and {name} is hidden from the spawners \
         ({}) but kept for the workbenches that use it",
        names::ODH_IMAGE_HIDDEN
    ));
    if writes.is_empty() {
        Ok(Plan::Adopted(summary))
    } else {
        Ok(Plan::Write(writes, summary))
    }
}

fn set_map(map: &mut Value, key: &str, value: &str) {
    if !map.is_object() {
        *map = json!({});
    }
    if let Some(m) = map.as_object_mut() {
        m.insert(key.into(), Value::String(value.into()));
    }
}

/// The original as the starting point of its copy: its spec and status (the digests to pin),
/// its labels and annotations without the operator's ownership, and nothing the server set.
fn copy_source(original: &Value, copy_name: &str) -> Value {
    let meta = &original["metadata"];
    let mut labels = meta["labels"].as_object().cloned().unwrap_or_default();
    for (k, v) in names::OPERATOR_LABELS {
        if labels.get(*k).and_then(Value::as_str) == Some(v) {
            labels.remove(*k);
        }
    }
    labels.remove(names::ODH_MANAGED);
    let mut annotations = meta["annotations"].as_object().cloned().unwrap_or_default();
    for k in [
        names::ODH_IMAGE_HIDDEN,
        names::GATED_COPY,
        "kubectl.kubernetes.io/last-applied-configuration",
    ] {
        annotations.remove(k);
    }
    annotations.insert(
        names::COPY_OF.into(),
        meta["name"].as_str().unwrap_or_default().into(),
    );
    json!({
        "apiVersion": "image.openshift.io/v1",
        "kind": "ImageStream",
        "metadata": {"name": copy_name, "namespace": meta["namespace"],
                     "labels": labels, "annotations": annotations},
        "spec": original["spec"],
        "status": original["status"],
    })
}

/// In a new copy, the tags besides the gated ones (a shipped stream's older versions) are pinned
/// to what the original serves, so the copy offers exactly the images the original offered.
fn pin_other_tags(copy: &mut Value, is: &ImageStream, summary: &Summary) {
    let ours = [
        summary.served.clone(),
        summary.candidate.clone(),
        previous_tag(&summary.served),
    ];
    for tag in &is.spec.tags {
        if ours.contains(&tag.name) {
            continue;
        }
        let (Some(mut value), Some(event)) = (
            tag_value(copy, &tag.name).cloned(),
            is.status_tag(&tag.name).and_then(|s| s.current()),
        ) else {
            continue;
        };
        let Some(digest) = event.digest() else {
            continue;
        };
        let copy_name = is.metadata.name.as_deref().unwrap_or_default();
        if !Pin::Registry.holds(copy_name, value.get("from")) {
            value["from"] = Pin::Registry.to(copy_name, event, digest);
            put_tag(copy, value);
        }
    }
}
