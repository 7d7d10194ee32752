//! The resource types the emulator serves, and the discovery documents built from them.
//!
//! One table drives everything: routing, verbs in discovery, which strategy a write goes
//! through, and the OpenAPI documents. Built-in kinds are listed here; custom resources join
//! the table when a CustomResourceDefinition is created, exactly as on a real server.

use serde_json::{Value, json};

/// How objects of a type are stored and which server-side rules apply to them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Behavior {
    /// A built-in kind with no special rules (configmaps, leases, events, images).
    Builtin,
    /// `namespaces`: cluster-scoped, deleting one deletes its content.
    Namespace,
    /// `customresourcedefinitions`: creating one registers a new resource type.
    Crd,
    /// A custom resource served from a CRD (strategic merge patch is refused, DELETE returns the object).
    Custom,
    /// `image.openshift.io/v1` imagestreams: openshift-apiserver's strategy.
    ImageStream,
    /// Virtual `imagestreamtags`, computed from imagestreams.
    ImageStreamTag,
    /// Virtual `imagestreamimages`, computed from imagestreams and images.
    ImageStreamImage,
    /// `subjectaccessreviews`: create only, answered from the stored RBAC objects, not stored.
    SubjectAccessReview,
    /// `imagestreamimports`: create only, an import now, written into the stream, not stored.
    ImageStreamImport,
}

/// One resource the server serves, as discovery describes it.
#[derive(Clone, Debug)]
pub struct ResourceType {
    /// API group, `""` for the core group.
    pub group: String,
    /// API version.
    pub version: String,
    /// Plural resource name used in URLs.
    pub plural: String,
    /// Singular name.
    pub singular: String,
    /// Kind of the objects.
    pub kind: String,
    /// Whether objects live in namespaces.
    pub namespaced: bool,
    /// Verbs advertised in discovery and accepted by the router.
    pub verbs: Vec<&'static str>,
    /// Short names (`is`, `istag`).
    pub short_names: Vec<String>,
    /// Categories (`all`).
    pub categories: Vec<String>,
    /// Whether a `/status` subresource exists (main writes then keep status, and vice versa).
    pub status_subresource: bool,
    /// Whether `metadata.generation` is maintained.
    pub has_generation: bool,
    /// Storage and strategy.
    pub behavior: Behavior,
    /// The OpenAPI v3 schema of the kind, when known (CRDs bring theirs).
    pub schema: Option<Value>,
}

const ALL_VERBS: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

impl ResourceType {
    fn builtin(group: &str, version: &str, plural: &str, kind: &str, namespaced: bool) -> Self {
        ResourceType {
            group: group.into(),
            version: version.into(),
            plural: plural.into(),
            singular: kind.to_lowercase(),
            kind: kind.into(),
            namespaced,
            verbs: ALL_VERBS.to_vec(),
            short_names: vec![],
            categories: vec![],
            status_subresource: false,
            has_generation: false,
            behavior: Behavior::Builtin,
            schema: None,
        }
    }

    /// `group/version`, or `version` for the core group.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// The kind of the list (`ImageStreamList`).
    pub fn list_kind(&self) -> String {
        format!("{}List", self.kind)
    }

    /// Whether the verb is served.
    pub fn allows(&self, verb: &str) -> bool {
        self.verbs.contains(&verb)
    }

    /// Whether the resource is computed from others rather than stored.
    pub fn is_virtual(&self) -> bool {
        matches!(
            self.behavior,
            Behavior::ImageStreamTag | Behavior::ImageStreamImage
        )
    }
}

/// The built-in resource types: Kubernetes core kinds the product touches (RBAC's objects
/// among them, which SubjectAccessReviews are answered from) plus the OpenShift image API. CustomRuns are not here: they come from Tekton's CRD, loaded at start.
pub fn builtin_types() -> Vec<ResourceType> {
    let mut namespaces = ResourceType::builtin("", "v1", "namespaces", "Namespace", false);
    namespaces.behavior = Behavior::Namespace;
    namespaces.verbs = vec![
        "create", "delete", "get", "list", "patch", "update", "watch",
    ];
    namespaces.short_names = vec!["ns".into()];
    let mut configmaps = ResourceType::builtin("", "v1", "configmaps", "ConfigMap", true);
    configmaps.short_names = vec!["cm".into()];
    // The interceptor's certificate and the run key (`data` is base64, as the API server keeps it).
    let secrets = ResourceType::builtin("", "v1", "secrets", "Secret", true);
    let mut events = ResourceType::builtin("", "v1", "events", "Event", true);
    events.short_names = vec!["ev".into()];
    let mut events_v1 = ResourceType::builtin("events.k8s.io", "v1", "events", "Event", true);
    events_v1.short_names = vec!["ev".into()];
    let leases = ResourceType::builtin("coordination.k8s.io", "v1", "leases", "Lease", true);
    let mut crds = ResourceType::builtin(
        "apiextensions.k8s.io",
        "v1",
        "customresourcedefinitions",
        "CustomResourceDefinition",
        false,
    );
    crds.behavior = Behavior::Crd;
    crds.short_names = vec!["crd".into(), "crds".into()];
    crds.has_generation = true;
    crds.status_subresource = true;

    let img = "image.openshift.io";
    let mut imagestreams = ResourceType::builtin(img, "v1", "imagestreams", "ImageStream", true);
    imagestreams.behavior = Behavior::ImageStream;
    imagestreams.short_names = vec!["is".into()];
    imagestreams.categories = vec!["all".into()];
    imagestreams.status_subresource = true;
    imagestreams.has_generation = true;
    let mut istags = ResourceType::builtin(img, "v1", "imagestreamtags", "ImageStreamTag", true);
    istags.behavior = Behavior::ImageStreamTag;
    istags.short_names = vec!["istag".into()];
    // openshift-apiserver's istag storage is a Getter, Lister, CreaterUpdater and
    // GracefulDeleter, and not a Watcher: no watch, no deletecollection.
    istags.verbs = vec!["create", "delete", "get", "list", "patch", "update"];
    let mut isimages =
        ResourceType::builtin(img, "v1", "imagestreamimages", "ImageStreamImage", true);
    isimages.behavior = Behavior::ImageStreamImage;
    isimages.short_names = vec!["isimage".into()];
    isimages.verbs = vec!["get"];
    // openshift-apiserver's imagestreamimport storage is a Creater only.
    let mut isimports =
        ResourceType::builtin(img, "v1", "imagestreamimports", "ImageStreamImport", true);
    isimports.behavior = Behavior::ImageStreamImport;
    isimports.verbs = vec!["create"];
    let images = ResourceType::builtin(img, "v1", "images", "Image", false);
    let mut serviceaccounts =
        ResourceType::builtin("", "v1", "serviceaccounts", "ServiceAccount", true);
    serviceaccounts.short_names = vec!["sa".into()];
    // A Knative sink by ref may be a core Service (an ImageStreamSource reads it to resolve it).
    let mut services = ResourceType::builtin("", "v1", "services", "Service", true);
    services.short_names = vec!["svc".into()];
    services.status_subresource = true;
    let rbac = crate::rbac::GROUP;
    let mut reviews = ResourceType::builtin(
        crate::rbac::review::AUTHORIZATION_GROUP,
        "v1",
        "subjectaccessreviews",
        "SubjectAccessReview",
        false,
    );
    reviews.behavior = Behavior::SubjectAccessReview;
    reviews.verbs = vec!["create"];

    vec![
        namespaces,
        configmaps,
        secrets,
        events,
        events_v1,
        leases,
        crds,
        imagestreams,
        istags,
        isimages,
        isimports,
        images,
        serviceaccounts,
        services,
        ResourceType::builtin(rbac, "v1", "roles", "Role", true),
        ResourceType::builtin(rbac, "v1", "clusterroles", "ClusterRole", false),
        ResourceType::builtin(rbac, "v1", "rolebindings", "RoleBinding", true),
        ResourceType::builtin(
            rbac,
            "v1",
            "clusterrolebindings",
            "ClusterRoleBinding",
            false,
        ),
        reviews,
    ]
}

/// Turns a CustomResourceDefinition into the resource types it serves (one per served version).
pub fn types_from_crd(crd: &Value) -> Result<Vec<ResourceType>, String> {
    let spec = crd.get("spec").ok_or("spec is required")?;
    let group = spec
        .get("group")
        .and_then(Value::as_str)
        .ok_or("spec.group is required")?;
    let names = spec.get("names").ok_or("spec.names is required")?;
    let plural = names
        .get("plural")
        .and_then(Value::as_str)
        .ok_or("spec.names.plural is required")?;
    let kind = names
        .get("kind")
        .and_then(Value::as_str)
        .ok_or("spec.names.kind is required")?;
    let expected = format!("{plural}.{group}");
    let name = crd
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if name != expected {
        return Err(format!(
            "metadata.name: Invalid value: \"{name}\": must be spec.names.plural+\".\"+spec.group"
        ));
    }
    let singular = names
        .get("singular")
        .and_then(Value::as_str)
        .map(str::to_string)
        .unwrap_or_else(|| kind.to_lowercase());
    let namespaced = match spec.get("scope").and_then(Value::as_str) {
        Some("Namespaced") => true,
        Some("Cluster") => false,
        other => return Err(format!("spec.scope: Unsupported value: {other:?}")),
    };
    let strings = |v: Option<&Value>| -> Vec<String> {
        v.and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default()
    };
    let versions = spec
        .get("versions")
        .and_then(Value::as_array)
        .ok_or("spec.versions is required")?;
    let mut out = Vec::new();
    for v in versions {
        let vname = v
            .get("name")
            .and_then(Value::as_str)
            .ok_or("spec.versions[].name is required")?;
        if v.get("served").and_then(Value::as_bool) != Some(true) {
            continue;
        }
        out.push(ResourceType {
            group: group.into(),
            version: vname.into(),
            plural: plural.into(),
            singular: singular.clone(),
            kind: kind.into(),
            namespaced,
            verbs: ALL_VERBS.to_vec(),
            short_names: strings(names.get("shortNames")),
            categories: strings(names.get("categories")),
            status_subresource: v.pointer("/subresources/status").is_some(),
            has_generation: true,
            behavior: Behavior::Custom,
            schema: v.pointer("/schema/openAPIV3Schema").cloned(),
        });
    }
    if out.is_empty() {
        return Err("spec.versions: at least one version must be served".into());
    }
    Ok(out)
}

/// `GET /api/v1`, `GET /apis/{group}/{version}`: an APIResourceList.
pub fn resource_list(types: &[ResourceType], group: &str, version: &str) -> Value {
    let mut resources = Vec::new();
    for t in types
        .iter()
        .filter(|t| t.group == group && t.version == version)
    {
        let mut r = json!({
            "name": t.plural,
            "singularName": t.singular,
            "namespaced": t.namespaced,
            "kind": t.kind,
            "verbs": t.verbs,
        });
        if !t.short_names.is_empty() {
            r["shortNames"] = json!(t.short_names);
        }
        if !t.categories.is_empty() {
            r["categories"] = json!(t.categories);
        }
        resources.push(r);
        if t.status_subresource {
            resources.push(json!({
                "name": format!("{}/status", t.plural),
                "singularName": "",
                "namespaced": t.namespaced,
                "kind": t.kind,
                "verbs": ["get", "patch", "update"],
            }));
        }
    }
    json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": if group.is_empty() { version.to_string() } else { format!("{group}/{version}") },
        "resources": resources,
    })
}

/// `GET /apis`: an APIGroupList of every group with at least one type.
pub fn group_list(types: &[ResourceType]) -> Value {
    let mut groups: Vec<(String, Vec<String>)> = Vec::new();
    for t in types.iter().filter(|t| !t.group.is_empty()) {
        match groups.iter_mut().find(|(g, _)| *g == t.group) {
            Some((_, vs)) if !vs.contains(&t.version) => vs.push(t.version.clone()),
            Some(_) => {}
            None => groups.push((t.group.clone(), vec![t.version.clone()])),
        }
    }
    json!({
        "kind": "APIGroupList",
        "apiVersion": "v1",
        "groups": groups.iter().map(|(g, vs)| group_json(g, vs)).collect::<Vec<_>>(),
    })
}

/// `GET /apis/{group}`: an APIGroup, or None when the group is not served.
pub fn group(types: &[ResourceType], group: &str) -> Option<Value> {
    let mut versions: Vec<String> = Vec::new();
    for t in types.iter().filter(|t| t.group == group) {
        if !versions.contains(&t.version) {
            versions.push(t.version.clone());
        }
    }
    if versions.is_empty() {
        return None;
    }
    let mut g = group_json(group, &versions);
    g["apiVersion"] = json!("v1");
    g["kind"] = json!("APIGroup");
    Some(g)
}

fn group_json(group: &str, versions: &[String]) -> Value {
    let vs: Vec<Value> = versions
        .iter()
        .map(|v| json!({ "groupVersion": format!("{group}/{v}"), "version": v }))
        .collect();
    json!({
        "name": group,
        "versions": vs,
        "preferredVersion": vs[0],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn imagestreamtags_are_served_without_watch() {
        let types = builtin_types();
        let doc = resource_list(&types, "image.openshift.io", "v1");
        let istag = doc["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == "imagestreamtags")
            .unwrap();
        let verbs: Vec<&str> = istag["verbs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        assert!(!verbs.contains(&"watch"));
        assert!(verbs.contains(&"update"));
        assert_eq!(istag["kind"], "ImageStreamTag");
    }

    #[test]
    fn status_subresources_appear_in_discovery() {
        let types = builtin_types();
        let doc = resource_list(&types, "image.openshift.io", "v1");
        assert!(
            doc["resources"]
                .as_array()
                .unwrap()
                .iter()
                .any(|r| r["name"] == "imagestreams/status")
        );
    }

    #[test]
    fn crd_with_wrong_name_is_refused() {
        let crd = json!({
            "metadata": {"name": "wrong"},
            "spec": {"group": "x.dev", "scope": "Namespaced",
                     "names": {"plural": "things", "kind": "Thing"},
                     "versions": [{"name": "v1", "served": true, "storage": true}]}
        });
        assert!(types_from_crd(&crd).is_err());
    }

    #[test]
    fn crd_serves_each_served_version_with_its_status_subresource() {
        let crd = json!({
            "metadata": {"name": "things.x.dev"},
            "spec": {"group": "x.dev", "scope": "Namespaced",
                     "names": {"plural": "things", "kind": "Thing", "shortNames": ["th"]},
                     "versions": [
                        {"name": "v1", "served": true, "storage": true, "subresources": {"status": {}}},
                        {"name": "v0", "served": false, "storage": false}]}
        });
        let types = types_from_crd(&crd).unwrap();
        assert_eq!(types.len(), 1);
        assert!(types[0].status_subresource);
        assert_eq!(types[0].short_names, vec!["th".to_string()]);
        assert_eq!(types[0].behavior, Behavior::Custom);
    }
}
