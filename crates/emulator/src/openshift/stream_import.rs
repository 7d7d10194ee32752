//! The `ImageStreamImport` request and answer, as pure functions: which tags a request imports
//! from where (openshift-apiserver `registry/imagestreamimport/rest.go`, validated as
//! `ValidateImageStreamImport` does for `spec.images`), and the per-image `status.images[]`
//! entry the importer reports (`imageImportStatus`: a `metav1.Status` of `Success` or
//! `Failure`, the tag, and the Image on success).
//!
//! What the request then writes into the stream is [`super::import`]'s.

use serde_json::{Value, json};

use super::import::ImportSpec;

/// The tags a request imports, or the validation errors (`field: why`), every one.
pub fn requested_images(body: &Value) -> Result<Vec<ImportSpec>, Vec<String>> {
    let mut errors = Vec::new();
    let spec = body.get("spec").cloned().unwrap_or(Value::Null);
    if spec
        .get("repository")
        .is_some_and(|r| !r.is_null() && r != &json!({}))
    {
        errors.push(
            "spec.repository: Forbidden: the emulator imports single images (spec.images), not whole repositories"
                .to_string(),
        );
    }
    let images = match spec.get("images") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(a)) => a.clone(),
        Some(_) => {
            errors.push("spec.images: Invalid value: must be a list".into());
            Vec::new()
        }
    };
    if images.is_empty() && errors.is_empty() {
        errors.push("spec: Invalid value: you must specify at least one image".into());
    }
    let mut out = Vec::new();
    for (i, image) in images.iter().enumerate() {
        let kind = image.pointer("/from/kind").and_then(Value::as_str);
        let from = image
            .pointer("/from/name")
            .and_then(Value::as_str)
            .unwrap_or("");
        let to = image
            .pointer("/to/name")
            .and_then(Value::as_str)
            .unwrap_or("");
        if kind != Some("DockerImage") {
            errors.push(format!(
                "spec.images[{i}].from.kind: Unsupported value: {}: supported values: \"DockerImage\"",
                kind.map_or("\"\"".to_string(), |k| format!("{k:?}"))
            ));
        }
        if from.is_empty() {
            errors.push(format!("spec.images[{i}].from.name: Required value"));
        }
        if to.is_empty() {
            errors.push(format!(
                "spec.images[{i}].to.name: Required value: the emulator imports into a tag"
            ));
        } else if !super::valid_tag(to) {
            errors.push(format!(
                "spec.images[{i}].to.name: Invalid value: {to:?}: must match \"^[\\w][\\w.-]{{0,127}}$\""
            ));
        }
        out.push(ImportSpec {
            tag: to.to_string(),
            from: from.to_string(),
            import_policy: image.get("importPolicy").cloned().unwrap_or(Value::Null),
            reference_policy: image.get("referencePolicy").cloned().unwrap_or(Value::Null),
        });
    }
    if errors.is_empty() {
        Ok(out)
    } else {
        Err(errors)
    }
}

/// The request's `spec.images[]` as the v1 API defaults them before it answers: an
/// `importPolicy.importMode` of `Legacy` and a `referencePolicy.type` of `Source` where none is
/// given (the real server's answers in `tests/real-openshift/7[3-5]-isi-*.json`).
pub fn default_images(body: &mut Value) {
    let Some(images) = body
        .pointer_mut("/spec/images")
        .and_then(Value::as_array_mut)
    else {
        return;
    };
    for image in images.iter_mut().filter(|i| i.is_object()) {
        if !image["importPolicy"].is_object() {
            image["importPolicy"] = json!({});
        }
        if image["importPolicy"]["importMode"]
            .as_str()
            .is_none_or(str::is_empty)
        {
            image["importPolicy"]["importMode"] = json!("Legacy");
        }
        if !image["referencePolicy"].is_object() {
            image["referencePolicy"] = json!({});
        }
        if image["referencePolicy"]["type"]
            .as_str()
            .is_none_or(str::is_empty)
        {
            image["referencePolicy"]["type"] = json!("Source");
        }
    }
}

/// A `status.images[]` entry of a successful import: the tag and the Image.
pub fn image_succeeded(tag: &str, image: Value) -> Value {
    json!({
        "status": {"metadata": {}, "status": "Success"},
        "tag": tag,
        "image": image,
    })
}

/// A `status.images[]` entry of a failed import: the tag and the refusal as a `metav1.Status`.
pub fn image_failed(tag: &str, pull_spec: &str, reason: &str, message: &str, code: u16) -> Value {
    json!({
        "status": {
            "metadata": {},
            "status": "Failure",
            "message": message,
            "reason": reason,
            "details": {"name": pull_spec, "group": "image.openshift.io", "kind": "dockerimage"},
            "code": code,
        },
        "tag": tag,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_import_of_the_candidate_tag_names_its_source_and_policies() {
        // Body (E) of DERIVED_request-bodies_promote-and-import.yaml, what `oc import-image` sends.
        let body = json!({
            "kind": "ImageStreamImport", "apiVersion": "image.openshift.io/v1",
            "metadata": {"name": "nb", "namespace": "ds"},
            "spec": {"import": true, "images": [{
                "from": {"kind": "DockerImage", "name": "quay.io/org/nb:latest"},
                "to": {"name": "candidate"},
                "importPolicy": {"scheduled": true, "importMode": "Legacy"},
                "referencePolicy": {"type": "Source"}}]},
            "status": {}
        });
        let images = requested_images(&body).unwrap();
        assert_eq!(
            images,
            [ImportSpec {
                tag: "candidate".into(),
                from: "quay.io/org/nb:latest".into(),
                import_policy: json!({"scheduled": true, "importMode": "Legacy"}),
                reference_policy: json!({"type": "Source"}),
            }]
        );
    }

    #[test]
    fn every_problem_of_a_request_is_reported() {
        let body = json!({"spec": {"images": [
            {"from": {"kind": "ImageStreamTag", "name": "nb:latest"}, "to": {"name": "-bad"}},
            {"from": {"kind": "DockerImage"}}]}});
        let errors = requested_images(&body).unwrap_err();
        assert_eq!(
            errors,
            [
                "spec.images[0].from.kind: Unsupported value: \"ImageStreamTag\": supported values: \"DockerImage\"",
                "spec.images[0].to.name: Invalid value: \"-bad\": must match \"^[\\w][\\w.-]{0,127}$\"",
                "spec.images[1].from.name: Required value",
                "spec.images[1].to.name: Required value: the emulator imports into a tag",
            ]
        );
        assert_eq!(
            requested_images(&json!({"spec": {"import": true}})).unwrap_err(),
            ["spec: Invalid value: you must specify at least one image"]
        );
        assert!(
            requested_images(&json!({"spec": {"repository": {"from": {"kind": "DockerImage", "name": "quay.io/org/nb"}}}}))
                .unwrap_err()[0]
                .starts_with("spec.repository: Forbidden")
        );
    }
}
