//! Writes to `imagestreams` and `imagestreams/status`: what openshift-apiserver's
//! `pkg/image/apiserver/registry/imagestream/strategy.go` does before an ImageStream is stored.
//!
//! Order per write, as in the generic registry: prepare (status reset, generations), then
//! validate, where `tagsChanged` ([`tagevents`](super::tagevents)) also resolves tags that
//! point inside the cluster (ImageStreamImage / ImageStreamTag / `reference: true`) into
//! TagEvents synchronously.

use serde_json::{Value, json};

use super::tagevents::{tag_ref_changed, tags_changed, wrap_tag_errors};
use super::{
    DockerRef, Settings, StrategyError, Stream, StreamLookup, TagReference, field, invalid,
    semantic_eq, valid_tag,
};

/// POST imagestreams (`Strategy.PrepareForCreate` + `Validate`): defaults, generation 1 and every
/// spec tag generation 1, status reset to `{dockerImageRepository}`, tags sorted by name
/// (duplicates: last wins), validation, then resolution of spec tags that point inside the
/// cluster (`lookup` finds other streams; 422 "error generating tag event" if unresolvable).
pub fn prepare_create(
    obj: &mut Value,
    settings: &Settings,
    lookup: StreamLookup,
    now: &str,
) -> Result<(), StrategyError> {
    let mut stream = Stream::parse(obj)?;
    stream.apply_defaults();
    stream.set_generation(1);
    stream.obj.insert("status".into(), json!({}));
    stream.status_tags.clear();
    for t in stream.spec_tags.values_mut() {
        t.generation = Some(1);
    }
    let tag_errs = tags_changed(None, &mut stream, settings, lookup, now);
    let mut errs: Vec<String> = wrap_tag_errors(stream.name(), tag_errs)
        .into_iter()
        .collect();
    errs.extend(validate_stream(&stream));
    if !errs.is_empty() {
        return Err(invalid(&errs));
    }
    *obj = stream.into_value();
    decorate(obj, settings);
    Ok(())
}

/// PUT/PATCH imagestreams (`Strategy.PrepareForUpdate` + `ValidateUpdate`): status comes from
/// `old`, `metadata.generation` +1 iff the spec changed, spec tag generations as
/// `updateSpecTagGenerationsForUpdate` / `ensureSpecTagGenerationsAreSet` set them, changed
/// tags resolved (`tagsChanged`), tags sorted, decorated.
pub fn prepare_update(
    old: &Value,
    new: &mut Value,
    settings: &Settings,
    lookup: StreamLookup,
    now: &str,
) -> Result<(), StrategyError> {
    let mut old = Stream::parse(old)?;
    old.apply_defaults();
    let mut stream = Stream::parse(new)?;
    stream.apply_defaults();
    update_stream(&old, &mut stream, true, settings, lookup, now)?;
    *new = stream.into_value();
    decorate(new, settings);
    Ok(())
}

/// `prepareForUpdate` followed by `ValidateUpdate` on parsed streams.
pub(crate) fn update_stream(
    old: &Stream,
    stream: &mut Stream,
    reset_status: bool,
    settings: &Settings,
    lookup: StreamLookup,
    now: &str,
) -> Result<(), StrategyError> {
    stream.collapse_empty_status_tags();
    stream.set_generation(old.generation());
    if reset_status {
        match old.obj.get("status") {
            Some(s) => stream.obj.insert("status".into(), s.clone()),
            None => stream.obj.remove("status"),
        };
        stream.status_tags = old.status_tags.clone();
    }
    // Users cannot change a spec tag generation except to 0 ("import now").
    for (tag, r) in stream.spec_tags.iter_mut() {
        if let (Some(o), false) = (old.spec_tags.get(tag), r.generation == Some(0)) {
            r.generation = o.generation;
        }
    }
    if !semantic_eq(&old.spec_value(), &stream.spec_value()) || stream.generation() == 0 {
        stream.set_generation(old.generation().saturating_add(1));
    }
    ensure_spec_tag_generations_are_set(stream, Some(old));
    let tag_errs = tags_changed(Some(old), stream, settings, lookup, now);
    let mut errs: Vec<String> = wrap_tag_errors(stream.name(), tag_errs)
        .into_iter()
        .collect();
    errs.extend(validate_stream(stream));
    if errs.is_empty() {
        Ok(())
    } else {
        Err(invalid(&errs))
    }
}

/// PUT/PATCH imagestreams/status (`StatusStrategy`): `spec.tags` and `spec.dockerImageRepository`
/// stay as in `old` (metadata changes are applied, as openshift-apiserver does), generation
/// unchanged, a status item with generation 0 gets one (`updateObservedGenerationForStatusUpdate`),
/// new `dockerImageReference`s must be non-empty and parse.
pub fn prepare_status_update(
    old: &Value,
    new: &mut Value,
    settings: &Settings,
) -> Result<(), StrategyError> {
    let mut old = Stream::parse(old)?;
    old.apply_defaults();
    let mut stream = Stream::parse(new)?;
    stream.apply_defaults();
    stream.spec_tags = old.spec_tags.clone();
    let old_repo = old
        .obj
        .get("spec")
        .and_then(|s| s.get("dockerImageRepository"))
        .cloned();
    let spec = super::section(&mut stream.obj, "spec");
    match old_repo {
        Some(r) => spec.insert("dockerImageRepository".into(), r),
        None => spec.remove("dockerImageRepository"),
    };
    stream.set_generation(old.generation());

    let generation = stream.generation();
    for (tag, list) in stream.status_tags.iter_mut() {
        let Some(first) = list
            .items
            .as_mut()
            .and_then(|i| i.first_mut())
            .filter(|e| e.generation == 0)
        else {
            continue;
        };
        let changed = old.latest(tag).is_some_and(|o| {
            o.image != first.image
                || o.docker_image_reference != first.docker_image_reference
                || o.generation > first.generation
        });
        first.generation = match stream.spec_tags.get(tag).and_then(|r| r.generation) {
            Some(g) if changed => g,
            _ => generation,
        };
    }

    let known: Vec<&str> = old
        .status_tags
        .values()
        .flat_map(|t| t.items.iter().flatten())
        .map(|e| e.docker_image_reference.as_str())
        .collect();
    let mut errs = Vec::new();
    for (tag, list) in &stream.status_tags {
        for (i, e) in list.items.iter().flatten().enumerate() {
            if !known.contains(&e.docker_image_reference.as_str()) {
                errs.extend(reference_error(
                    &format!("status.tags[{tag}].items[{i}].dockerImageReference"),
                    &e.docker_image_reference,
                ));
            }
        }
    }
    if !errs.is_empty() {
        return Err(invalid(&errs));
    }
    *new = stream.into_value();
    decorate(new, settings);
    Ok(())
}

/// `Strategy.Decorate`, on every read: `status.dockerImageRepository` =
/// `<internal registry>/<namespace>/<name>` (`spec.dockerImageRepository` without a registry).
pub fn decorate(obj: &mut Value, settings: &Settings) {
    let Value::Object(m) = obj else { return };
    let meta = |k: &str| {
        m.get("metadata")
            .and_then(|md| md.get(k))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let (ns, name) = (meta("namespace"), meta("name"));
    let repo = if settings.internal_registry.is_empty() {
        m.get("spec")
            .and_then(|s| s.get("dockerImageRepository"))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    } else {
        let ns = if ns.is_empty() {
            "default"
        } else {
            ns.as_str()
        };
        format!("{}/{ns}/{name}", settings.internal_registry)
    };
    super::section(m, "status").insert("dockerImageRepository".into(), json!(repo));
}

/// `ensureSpecTagGenerationsAreSet`: new or changed tags, and tags at generation nil/0, get the
/// stream's generation.
pub(crate) fn ensure_spec_tag_generations_are_set(stream: &mut Stream, old: Option<&Stream>) {
    let (generation, ns) = (stream.generation(), stream.namespace().to_string());
    for (tag, r) in stream.spec_tags.iter_mut() {
        match old.and_then(|o| o.spec_tags.get(tag)) {
            Some(o) if !tag_ref_changed(o, r, &ns) => {}
            _ => r.generation = None,
        }
        if !matches!(r.generation, Some(g) if g != 0) {
            r.generation = Some(generation);
        }
    }
}

/// `ValidateImageStream` (pkg/image/apis/image/validation), plus tag names and import modes.
pub(crate) fn validate_stream(stream: &Stream) -> Vec<String> {
    let mut errs = Vec::new();
    let name = stream.name();
    if !name.is_empty() && !valid_stream_name(name) {
        errs.push(field::invalid(
            "metadata.name",
            name,
            "must match \"[a-z0-9]+(?:[._-][a-z0-9]+)*\"",
        ));
    }
    if stream.namespace().len() + 1 + name.len() > 255 {
        errs.push(field::invalid(
            "metadata.name",
            name,
            "'namespace/name' cannot be longer than 255 characters",
        ));
    }
    let spec = stream.obj.get("spec");
    match spec.and_then(|s| s.get("dockerImageRepository")) {
        None | Some(Value::Null) => {}
        Some(Value::String(repo)) if repo.is_empty() => {}
        Some(Value::String(repo)) => match DockerRef::parse(repo) {
            Err(e) => errs.push(field::invalid("spec.dockerImageRepository", repo, &e)),
            Ok(r) if !r.tag.is_empty() => errs.push(field::invalid(
                "spec.dockerImageRepository",
                repo,
                "the repository name may not contain a tag",
            )),
            Ok(r) if !r.id.is_empty() => errs.push(field::invalid(
                "spec.dockerImageRepository",
                repo,
                "the repository name may not contain an ID",
            )),
            Ok(_) => {}
        },
        Some(other) => errs.push(field::invalid(
            "spec.dockerImageRepository",
            &other.to_string(),
            "must be a string",
        )),
    }
    if let Some(lp) = spec.and_then(|s| s.get("lookupPolicy"))
        && !(lp.is_object() && lp.get("local").is_none_or(Value::is_boolean))
    {
        errs.push(field::invalid(
            "spec.lookupPolicy",
            &lp.to_string(),
            "must be an object with a boolean \"local\"",
        ));
    }
    for (tag, r) in &stream.spec_tags {
        let path = format!("spec.tags[{tag}]");
        if !valid_tag(tag) {
            errs.push(field::invalid(
                &format!("{path}.name"),
                tag,
                "must match \"[\\w][\\w.-]{0,127}\"",
            ));
        }
        errs.extend(validate_tag_reference(&path, r));
    }
    for (tag, list) in &stream.status_tags {
        for (i, e) in list.items.iter().flatten().enumerate() {
            let path = format!("status.tags[{tag}].items[{i}].dockerImageReference");
            errs.extend(reference_error(&path, &e.docker_image_reference));
        }
    }
    errs
}

/// `ValidateImageStreamTagReference`.
pub(crate) fn validate_tag_reference(path: &str, r: &TagReference) -> Vec<String> {
    let mut errs = Vec::new();
    if let Some(from) = &r.from {
        if from.name.is_empty() {
            errs.push(field::required(&format!("{path}.from.name"), ""));
        }
        match from.kind.as_str() {
            "DockerImage" => {
                if let (false, Err(e)) = (from.name.is_empty(), DockerRef::parse(&from.name)) {
                    errs.push(field::invalid(&format!("{path}.from.name"), &from.name, &e));
                }
            }
            "ImageStreamImage" | "ImageStreamTag" if r.import_policy.scheduled => errs.push(format!(
                "{path}.importPolicy.scheduled: Invalid value: true: only tags pointing to Docker repositories may be scheduled for background import"
            )),
            "ImageStreamImage" | "ImageStreamTag" => {}
            _ => errs.push(field::required(&format!("{path}.from.kind"), "valid values are 'DockerImage', 'ImageStreamImage', 'ImageStreamTag'")),
        }
    }
    if !matches!(r.reference_policy.kind.as_str(), "Source" | "Local") {
        errs.push(field::invalid(
            &format!("{path}.referencePolicy.type"),
            &r.reference_policy.kind,
            "valid values are \"Source\", \"Local\"",
        ));
    }
    if !matches!(
        r.import_policy.import_mode.as_str(),
        "" | "Legacy" | "PreserveOriginal"
    ) {
        errs.push(field::unsupported(
            &format!("{path}.importPolicy.importMode"),
            &r.import_policy.import_mode,
            &["Legacy", "PreserveOriginal"],
        ));
    }
    errs
}

fn reference_error(path: &str, reference: &str) -> Option<String> {
    if reference.is_empty() {
        return Some(field::required(path, ""));
    }
    DockerRef::parse(reference)
        .err()
        .map(|e| field::invalid(path, reference, &e))
}

/// `ValidateImageStreamName`: `[a-z0-9]+(?:[._-][a-z0-9]+)*`.
fn valid_stream_name(name: &str) -> bool {
    name.split(['.', '_', '-']).all(|p| {
        !p.is_empty()
            && p.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use serde_json::{Value, json};

    use super::*;

    pub(crate) const REPO: &str = "quay.io/conformance";
    const DEFAULT_REG: &str = super::super::DEFAULT_INTERNAL_REGISTRY;

    pub(crate) fn digest(c: char) -> String {
        format!("sha256:{}", c.to_string().repeat(64))
    }

    pub(crate) fn none(_: &str, _: &str) -> Option<Value> {
        None
    }

    pub(crate) fn created(body: Value) -> Value {
        let mut obj = body;
        prepare_create(
            &mut obj,
            &Settings::default(),
            &none,
            "2024-01-01T00:00:00Z",
        )
        .unwrap();
        obj["metadata"]["resourceVersion"] = json!("1");
        obj
    }

    fn app() -> Value {
        created(json!({
            "apiVersion": "image.openshift.io/v1", "kind": "ImageStream",
            "metadata": {"name": "app", "namespace": "ns", "labels": {"conformance": "imagestream"}},
            "spec": {"tags": [{"name": "zeta", "from": {"kind": "DockerImage", "name": format!("{REPO}/app:zeta")}},
                              {"name": "candidate", "from": {"kind": "DockerImage", "name": format!("{REPO}/app:candidate")}}]}
        }))
    }

    /// `app` after PUT imagestreams/status put a candidate history [bbb, aaa] (conformance 7.4).
    pub(crate) fn app_with_history() -> Value {
        let old = app();
        let mut new = old.clone();
        let hist = json!([
            {"created": "2024-01-01T00:01:00Z", "dockerImageReference": format!("{REPO}/app@{}", digest('b')), "image": digest('b'), "generation": 1},
            {"created": "2024-01-01T00:00:30Z", "dockerImageReference": format!("{REPO}/app@{}", digest('a')), "image": digest('a'), "generation": 1}]);
        new["status"]["tags"] = json!([{"tag": "candidate", "items": hist}]);
        prepare_status_update(&old, &mut new, &Settings::default()).unwrap();
        new
    }

    pub(crate) fn updated(
        old: &Value,
        edit: impl FnOnce(&mut Value),
    ) -> Result<Value, StrategyError> {
        let mut new = old.clone();
        edit(&mut new);
        prepare_update(
            old,
            &mut new,
            &Settings::default(),
            &none,
            "2024-01-01T00:10:00Z",
        )
        .map(|_| new)
    }

    pub(crate) fn images(v: &Value, tag: &str) -> Vec<String> {
        let tags = v["status"]["tags"].as_array().cloned().unwrap_or_default();
        let t = tags
            .iter()
            .find(|t| t["tag"] == tag)
            .cloned()
            .unwrap_or(Value::Null);
        t["items"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|i| i["image"].as_str().unwrap_or_default().to_string())
            .collect()
    }

    #[test]
    fn create_sorts_tags_defaults_policies_and_starts_every_generation_at_one() {
        let is = app();
        assert_eq!(is["metadata"]["generation"], 1);
        let tags = is["spec"]["tags"].as_array().unwrap();
        assert_eq!(
            tags.iter()
                .map(|t| t["name"].as_str().unwrap())
                .collect::<Vec<_>>(),
            ["candidate", "zeta"]
        );
        for t in tags {
            assert_eq!(
                (&t["generation"], &t["referencePolicy"], &t["importPolicy"]),
                (
                    &json!(1),
                    &json!({"type": "Source"}),
                    &json!({"importMode": "Legacy"})
                )
            );
            assert_eq!(t["annotations"], Value::Null);
        }
        assert_eq!(
            is["status"],
            json!({"dockerImageRepository": "image-registry.openshift-image-registry.svc:5000/ns/app"})
        );
        assert_eq!(is["spec"]["lookupPolicy"], json!({"local": false}));
    }

    #[test]
    fn create_ignores_user_status_generations_and_keeps_the_last_duplicate_tag() {
        let is = created(json!({
            "metadata": {"name": "d", "namespace": "ns", "generation": 9},
            "spec": {"tags": [{"name": "t", "from": {"kind": "DockerImage", "name": "a:1"}, "generation": 0},
                              {"name": "t", "from": {"kind": "DockerImage", "name": "b:2"}}]},
            "status": {"tags": [{"tag": "t", "items": [{"dockerImageReference": "x@sha256:1", "image": "sha256:1"}]}]}
        }));
        assert_eq!(is["metadata"]["generation"], 1);
        assert_eq!(
            is["spec"]["tags"],
            json!([{"name": "t", "annotations": null, "from": {"kind": "DockerImage", "name": "b:2"},
            "generation": 1, "importPolicy": {"importMode": "Legacy"}, "referencePolicy": {"type": "Source"}}])
        );
        assert_eq!(is["status"].get("tags"), None);
    }

    #[test]
    fn create_rejects_invalid_tags_with_the_servers_messages() {
        let cases = [
            (
                json!({"name": "t", "from": {"kind": "ImageStreamTag", "name": "x:y"}, "importPolicy": {"scheduled": true}}),
                "only tags pointing to Docker repositories may be scheduled",
            ),
            (
                json!({"name": "t", "from": {"kind": "Foo", "name": "x"}}),
                "valid values are 'DockerImage', 'ImageStreamImage', 'ImageStreamTag'",
            ),
            (
                json!({"name": "t", "from": {"kind": "DockerImage", "name": "x"}, "referencePolicy": {"type": "Remote"}}),
                "spec.tags[t].referencePolicy.type: Invalid value: \"Remote\"",
            ),
            (
                json!({"name": "bad:tag", "from": {"kind": "DockerImage", "name": "x"}}),
                "spec.tags[bad:tag].name",
            ),
            (
                json!({"name": "t", "from": {"kind": "DockerImage", "name": "UPPER/case"}}),
                "repository name must be lowercase",
            ),
            (
                json!({"name": "t", "from": {"kind": "DockerImage", "name": "x"}, "importPolicy": {"importMode": "All"}}),
                "Unsupported value: \"All\"",
            ),
        ];
        for (tag, want) in cases {
            let mut obj =
                json!({"metadata": {"name": "v", "namespace": "ns"}, "spec": {"tags": [tag]}});
            let err = prepare_create(&mut obj, &Settings::default(), &none, "now").unwrap_err();
            assert!(
                matches!(&err, StrategyError::Invalid(m) if m.contains(want)),
                "{err} / {want}"
            );
        }
    }

    #[test]
    fn a_label_only_change_keeps_the_generation_and_a_spec_change_bumps_it() {
        let is = created(
            json!({"metadata": {"name": "gen", "namespace": "ns"}, "spec": {"lookupPolicy": {"local": false}}}),
        );
        let labelled =
            updated(&is, |o| o["metadata"]["labels"] = json!({"touched": "yes"})).unwrap();
        assert_eq!(
            (
                labelled["metadata"]["generation"].as_i64(),
                &labelled["metadata"]["labels"]["touched"]
            ),
            (Some(1), &json!("yes"))
        );
        let local = updated(&labelled, |o| {
            o["spec"]["lookupPolicy"]["local"] = json!(true)
        })
        .unwrap();
        assert_eq!(local["metadata"]["generation"], 2);
    }

    #[test]
    fn a_put_on_the_main_resource_cannot_change_status() {
        let old = app_with_history();
        let new = updated(&old, |o| {
            o["status"]["tags"] = json!([{"tag": "injected", "items": [{"dockerImageReference": "x@sha256:1", "image": "sha256:1", "generation": 1}]}]);
            o["metadata"]["labels"]["put"] = json!("main");
        })
        .unwrap();
        assert_eq!(
            (
                &new["status"],
                &new["metadata"]["labels"]["put"],
                &new["metadata"]["generation"]
            ),
            (&old["status"], &json!("main"), &json!(1))
        );
    }

    #[test]
    fn a_status_update_keeps_spec_tags_and_generation_and_applies_metadata() {
        let old = app();
        let mut new = old.clone();
        new["status"]["tags"] = json!([{"tag": "pushed", "items": [{"created": "t", "dockerImageReference": format!("{REPO}/app@{}", digest('d')), "image": digest('d'), "generation": 0}]}]);
        new["spec"]["tags"] =
            json!([{"name": "sneaky", "from": {"kind": "DockerImage", "name": "x:y"}}]);
        new["metadata"]["generation"] = json!(7);
        new["metadata"]["labels"]["put"] = json!("status");
        prepare_status_update(&old, &mut new, &Settings::default()).unwrap();
        assert_eq!(
            (&new["spec"]["tags"], &new["metadata"]["generation"]),
            (&old["spec"]["tags"], &json!(1))
        );
        assert_eq!(
            (images(&new, "pushed"), &new["metadata"]["labels"]["put"]),
            (vec![digest('d')], &json!("status"))
        );
        assert_eq!(
            new["status"]["tags"][0]["items"][0]["generation"], 1,
            "a generation 0 item gets the stream's"
        );

        let mut bad = old.clone();
        bad["status"]["tags"] =
            json!([{"tag": "x", "items": [{"dockerImageReference": "", "image": "sha256:1"}]}]);
        let err = prepare_status_update(&old, &mut bad, &Settings::default())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("status.tags[x].items[0].dockerImageReference: Required value"),
            "{err}"
        );
    }

    #[test]
    fn a_status_history_is_stored_newest_first_as_given() {
        let is = app_with_history();
        assert_eq!(images(&is, "candidate"), [digest('b'), digest('a')]);
        assert_eq!(is["metadata"]["generation"], 1);
    }

    #[test]
    fn user_tag_generations_are_ignored_except_zero_which_asks_for_an_import() {
        let old = app();
        let ignored = updated(&old, |o| o["spec"]["tags"][0]["generation"] = json!(42)).unwrap();
        assert_eq!(
            (
                &ignored["spec"]["tags"][0]["generation"],
                &ignored["metadata"]["generation"]
            ),
            (&json!(1), &json!(1))
        );
        let reimport = updated(&old, |o| o["spec"]["tags"][0]["generation"] = json!(0)).unwrap();
        assert_eq!(
            (
                &reimport["spec"]["tags"][0]["generation"],
                &reimport["metadata"]["generation"]
            ),
            (&json!(2), &json!(2))
        );
        assert_eq!(reimport["spec"]["tags"][1]["generation"], 1);
    }

    #[test]
    fn an_import_mode_change_gives_the_tag_the_new_generation() {
        let new = updated(&app(), |o| {
            o["spec"]["tags"][1]["importPolicy"] = json!({"importMode": "PreserveOriginal"})
        })
        .unwrap();
        assert_eq!(
            (
                &new["spec"]["tags"][1]["generation"],
                &new["spec"]["tags"][0]["generation"]
            ),
            (&json!(2), &json!(1))
        );
    }

    #[test]
    fn malformed_updates_are_invalid_and_null_lists_are_empty() {
        let old = app();
        for edit in [
            json!(1),
            json!({"spec": []}),
            json!({"spec": {"tags": [{"name": "a", "annotations": {"k": 1}}]}}),
            json!({"spec": {"lookupPolicy": {"local": "yes"}}}),
        ] {
            let mut new = old.clone();
            if let (Some(n), Value::Object(e)) = (new.as_object_mut(), &edit) {
                n.extend(e.clone());
            } else {
                new = edit.clone();
            }
            assert!(
                matches!(
                    prepare_update(&old, &mut new, &Settings::default(), &none, "now"),
                    Err(StrategyError::Invalid(_))
                ),
                "{edit}"
            );
        }
        let cleared = updated(&old, |o| o["spec"]["tags"] = Value::Null).unwrap();
        assert_eq!(
            (
                cleared["spec"].get("tags"),
                &cleared["metadata"]["generation"]
            ),
            (None, &json!(2))
        );
        assert!(matches!(
            prepare_status_update(&old, &mut json!("x"), &Settings::default()),
            Err(StrategyError::Invalid(_))
        ));
    }

    #[test]
    fn decorate_points_status_at_the_integrated_registry() {
        let mut v = json!({"metadata": {"name": "n"}, "status": 3});
        decorate(&mut v, &Settings::default());
        assert_eq!(
            v["status"]["dockerImageRepository"],
            format!("{DEFAULT_REG}/default/n")
        );
        let mut v = json!({"metadata": {"name": "n", "namespace": "x"}, "spec": {"dockerImageRepository": "quay.io/a/b"}});
        decorate(
            &mut v,
            &Settings {
                internal_registry: String::new(),
            },
        );
        assert_eq!(v["status"]["dockerImageRepository"], "quay.io/a/b");
        decorate(&mut json!([1]), &Settings::default());
    }
}
