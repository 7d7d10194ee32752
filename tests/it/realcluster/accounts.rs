//! The accounts `tekton/310-pipeline-rbac.yaml` ships, asked of a real kube-apiserver's
//! authorizer as `kubectl auth can-i` asks it (impersonating the ServiceAccount, with its groups):
//! the validation account, which runs the candidate, may do nothing an account bound to nothing
//! may not; the pipeline account may `promote` the ImagePromotion `notebooks` of its namespace
//! and nothing else (no other ImagePromotion, none unnamed, none elsewhere, no ImageStream or
//! Tekton write); the controller may re-drive there (`tekton/320`: read the one TriggerTemplate,
//! create PipelineRuns) and nowhere else. `config/`'s accounts are held verb by verb in
//! [`super::rbac`].

use super::cluster::ControlPlane;

const NS: &str = "notebooks";

fn sa(name: &str) -> String {
    format!("system:serviceaccount:{NS}:{name}")
}

/// What `user` may do in `ns`, as `kubectl auth can-i --list` prints it (its lines, sorted).
fn rules(cp: &ControlPlane, user: &str, ns: &str) -> Vec<String> {
    let out = cp.ok(&["auth", "can-i", "--list", "-n", ns, "--as", user]);
    let mut lines: Vec<String> = out.lines().skip(1).map(str::to_string).collect();
    lines.sort();
    lines
}

/// Whether the ServiceAccount `user` (with the groups the API server gives it) may `verb`
/// `group/resource` `name` (empty: unnamed) in `ns`: a SubjectAccessReview, as the controller
/// and `kubectl auth can-i` ask.
fn can(cp: &ControlPlane, user: &str, verb: &str, resource: &str, name: &str, ns: &str) -> bool {
    let (group, resource) = resource.split_once('/').unwrap_or(("", resource));
    let (resource, subresource) = resource.split_once('/').unwrap_or((resource, ""));
    let review = serde_json::json!({
        "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
        "spec": {
            "user": user,
            "groups": ["system:serviceaccounts", format!("system:serviceaccounts:{}", user.split(':').nth(2).unwrap_or_default()), "system:authenticated"],
            "resourceAttributes": {
                "verb": verb, "group": group, "resource": resource, "subresource": subresource,
                "namespace": ns, "name": name,
            },
        },
    });
    let (ok, out) = cp.pipe(
        &["create", "-f", "-", "-o", "jsonpath={.status.allowed}"],
        &review.to_string(),
    );
    assert!(ok, "the SubjectAccessReview failed: {out}");
    out.trim() == "true"
}

#[test]
fn the_shipped_pipeline_accounts_hold_only_what_their_manifests_say() {
    let cp = ControlPlane::up();
    for ns in [NS, "elsewhere"] {
        cp.ok(&["create", "namespace", ns]);
    }
    let shipped = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tekton/310-pipeline-rbac.yaml"
    ))
    .unwrap();
    let (ok, out) = cp.pipe(&["apply", "-n", NS, "-f", "-"], &shipped);
    assert!(ok, "{out}");
    let redrive = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tekton/320-redrive-rbac.yaml"
    ))
    .unwrap();
    let (ok, out) = cp.pipe(&["apply", "-n", NS, "-f", "-"], &redrive);
    assert!(ok, "{out}");
    cp.ok(&["create", "serviceaccount", "nobody", "-n", NS]);
    let nothing = rules(&cp, &sa("nobody"), NS);
    assert!(
        !nothing.is_empty(),
        "every account may at least review itself"
    );

    // The account that runs the candidate holds nothing more than an account bound to nothing.
    assert_eq!(rules(&cp, &sa("imagegate-validation"), NS), nothing);

    // The pipeline's account: one more rule, `promote` on `notebooks` here.
    let pipeline = sa("imagegate-pipeline");
    let extra: Vec<String> = rules(&cp, &pipeline, NS)
        .into_iter()
        .filter(|r| !nothing.contains(r))
        .collect();
    assert_eq!(extra.len(), 1, "{extra:#?}");
    let words: Vec<&str> = extra[0].split_whitespace().collect();
    assert_eq!(
        words,
        [
            "imagepromotions.imagegate.dev",
            "[]",
            "[notebooks]",
            "[promote]"
        ],
        "{extra:#?}"
    );
    const PROMOTIONS: &str = "imagegate.dev/imagepromotions";
    assert!(can(&cp, &pipeline, "promote", PROMOTIONS, "notebooks", NS));
    for (verb, what, name, ns) in [
        // Another ImagePromotion, one unnamed (a review for "every ImagePromotion"), another
        // namespace's `notebooks`.
        ("promote", PROMOTIONS, "sandbox", NS),
        ("promote", PROMOTIONS, "", NS),
        ("promote", PROMOTIONS, "notebooks", "elsewhere"),
        // Writes that would walk around the gate.
        ("update", PROMOTIONS, "notebooks", NS),
        ("patch", "image.openshift.io/imagestreams", "nb", NS),
        ("create", "image.openshift.io/imagestreamimports", "", NS),
        ("update", "tekton.dev/tasks", "imagegate-smoke-test", NS),
        ("create", "tekton.dev/taskruns", "", NS),
        ("update", "tekton.dev/customruns/status", "x", NS),
        ("get", "/secrets", "", NS),
    ] {
        assert!(
            !can(&cp, &pipeline, verb, what, name, ns),
            "{verb} {what} {name} -n {ns}"
        );
    }
    // The controller may re-drive here, and only that: read the one TriggerTemplate, create
    // PipelineRuns; nowhere else.
    let controller = "system:serviceaccount:imagegate-system:imagegate-controller";
    const TEMPLATES: &str = "triggers.tekton.dev/triggertemplates";
    assert!(can(
        &cp,
        controller,
        "get",
        TEMPLATES,
        "imagegate-promote",
        NS
    ));
    assert!(can(
        &cp,
        controller,
        "create",
        "tekton.dev/pipelineruns",
        "",
        NS
    ));
    for (verb, what, name, ns) in [
        ("get", TEMPLATES, "other", NS),
        ("update", TEMPLATES, "imagegate-promote", NS),
        ("create", "tekton.dev/pipelineruns", "", "elsewhere"),
        ("delete", "tekton.dev/pipelineruns", "x", NS),
        ("create", "tekton.dev/taskruns", "", NS),
    ] {
        assert!(
            !can(&cp, controller, verb, what, name, ns),
            "controller: {verb} {what} {name} -n {ns}"
        );
    }
    // The validation account may not even that.
    let validation = sa("imagegate-validation");
    assert!(!can(
        &cp,
        &validation,
        "promote",
        PROMOTIONS,
        "notebooks",
        NS
    ));
}
