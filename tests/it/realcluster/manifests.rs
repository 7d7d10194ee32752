//! `config/` and `tekton/` against the real API server: server-side validation, the CRDs
//! registered and served, and the shipped RBAC by SubjectAccessReview and a real token.

use super::cluster::ControlPlane;
use crate::support::upstream::{CUSTOMRUN_CRD, TEKTON_PIPELINE, TEKTON_TRIGGERS};

#[test]
fn config_tekton_and_their_crds_apply_to_a_real_api_server() {
    let cp = ControlPlane::up();
    assert!(
        cp.ok(&["version", "-o", "json"])
            .contains("\"gitVersion\": \"v1.35.4\"")
    );
    cp.ok(&["apply", "--server-side", "-k", "config/"]);
    cp.established("imagepromotions.imagegate.dev");
    let deployments = || cp.ok(&["get", "deployments", "-n", "imagegate-system", "-o", "name"]);
    assert_eq!(
        deployments(),
        "deployment.apps/imagegate-controller\ndeployment.apps/imagegate-source\n",
        "config/ alone: no multi-tenant adapter"
    );
    // The multi-tenant adapter is an overlay a platform opts into.
    cp.ok(&["apply", "--server-side", "-k", "config/multi-tenant/"]);
    assert!(deployments().contains("imagegate-source-multi-tenant"));

    // Tekton's and Triggers' released CRDs (from Go's module cache), then tekton/ itself,
    // validated by the server against them (strict field validation: an unknown field is an error).
    for (module, crd) in [
        (TEKTON_PIPELINE, CUSTOMRUN_CRD),
        (TEKTON_PIPELINE, "config/300-crds/300-pipeline.yaml"),
        (TEKTON_PIPELINE, "config/300-crds/300-task.yaml"),
        (TEKTON_TRIGGERS, "config/300-eventlistener.yaml"),
        (TEKTON_TRIGGERS, "config/300-trigger.yaml"),
        (TEKTON_TRIGGERS, "config/300-triggerbinding.yaml"),
        (TEKTON_TRIGGERS, "config/300-triggertemplate.yaml"),
    ] {
        let path = module.dir().join(crd);
        cp.ok(&["apply", "--server-side", "-f", &path.to_string_lossy()]);
    }
    for crd in [
        "customruns.tekton.dev",
        "pipelines.tekton.dev",
        "tasks.tekton.dev",
        "eventlisteners.triggers.tekton.dev",
    ] {
        cp.established(crd);
    }
    cp.ok(&["create", "namespace", "notebooks"]);
    cp.ok(&["apply", "--server-side", "-k", "tekton/"]);
    let promotions = cp.ok(&["get", "imagepromotions", "-n", "notebooks", "-o", "name"]);
    assert!(
        promotions.starts_with("imagepromotion.imagegate.dev/"),
        "{promotions}"
    );
    assert!(
        cp.ok(&[
            "get",
            "pipelines.tekton.dev",
            "-n",
            "notebooks",
            "-o",
            "name"
        ])
        .contains("pipeline.tekton.dev/")
    );

    // The server holds the CRD's schema: a wrong type and an unknown field are refused.
    let (ok, out) = cp.apply_text(
        "apiVersion: imagegate.dev/v1alpha1\nkind: ImagePromotion\nmetadata: {name: bad, namespace: notebooks}\nspec: {candidateTag: [1, 2]}\n",
    );
    assert!(!ok && out.contains("candidateTag"), "{out}");
    let (ok, out) = cp.apply_text(
        "apiVersion: imagegate.dev/v1alpha1\nkind: ImagePromotion\nmetadata: {name: bad, namespace: notebooks}\nspec: {noSuchField: x}\n",
    );
    assert!(!ok && out.contains("noSuchField"), "{out}");
    // A CustomRun of the ImagePromotion kind, as Tekton would create it, is accepted.
    let (ok, out) = cp.apply_text(
        "apiVersion: tekton.dev/v1beta1\nkind: CustomRun\nmetadata: {name: promote, namespace: notebooks}\nspec:\n  customRef: {apiVersion: imagegate.dev/v1alpha1, kind: ImagePromotion}\n  params:\n  - {name: imagestream, value: nb}\n",
    );
    assert!(ok, "{out}");

    // The ImageStreamSource CRD (config/multi-tenant/300): served, its schema held, its status a subresource.
    cp.established("imagestreamsources.sources.imagegate.dev");
    let source = "apiVersion: sources.imagegate.dev/v1alpha1\nkind: ImageStreamSource\nmetadata: {name: team-a, namespace: notebooks}\nspec:\n  sink:\n    ref: {apiVersion: eventing.knative.dev/v1, kind: Broker, name: default}\n  namespaceSelector: {matchLabels: {team: a}}\n  mode: reference\n  delivery: {retry: 3, backoffPolicy: exponential, backoffDelay: PT0.5S}\n";
    let (ok, out) = cp.apply_text(source);
    assert!(ok, "{out}");
    let (ok, out) = cp.apply_text(&source.replace("mode: reference", "mode: Reference"));
    assert!(!ok && out.contains("spec.mode"), "{out}");
    let (ok, out) = cp.apply_text(&format!("{source}  emitExsting: true\n"));
    assert!(!ok && out.contains("emitExsting"), "{out}");
    // F-9: the lists a tenant writes are bounded by the schema, at the API server.
    let names: Vec<String> = (0..101).map(|i| format!("ns-{i}")).collect();
    let many = source.replace("team-a", "team-many").replace(
        "  namespaceSelector: {matchLabels: {team: a}}\n",
        &format!("  namespaces: [{}]\n", names.join(", ")),
    );
    let (ok, out) = cp.apply_text(&many);
    assert!(
        !ok && out.contains("spec.namespaces") && out.contains("100"),
        "{out}"
    );
    let sources = cp.ok(&["get", "sources", "-n", "notebooks", "-o", "name"]);
    assert!(
        sources.contains("imagestreamsource.sources.imagegate.dev/team-a"),
        "{sources}"
    );
    let observer = cp.ok(&[
        "get",
        "clusterrole",
        "imagegate-imagestreamsources-observer",
        "-o",
        "jsonpath={.metadata.labels}",
    ]);
    assert!(
        observer.contains("\"duck.knative.dev/source\":\"true\""),
        "{observer}"
    );
}

#[test]
fn the_shipped_roles_grant_what_the_programs_need_and_nothing_more_on_a_real_api_server() {
    let cp = ControlPlane::up();
    cp.ok(&["apply", "--server-side", "-k", "config/"]);
    // The pipeline's identity, as `kubectl apply -k tekton/` creates it in notebooks.
    cp.ok(&["create", "namespace", "notebooks"]);
    cp.ok(&[
        "apply",
        "--server-side",
        "-n",
        "notebooks",
        "-f",
        "tekton/310-pipeline-rbac.yaml",
    ]);
    // notebooks opted in (tekton/330); `openshift` (its builder images) is not.
    cp.onboard("notebooks");
    let source = "system:serviceaccount:imagegate-system:imagegate-source";
    let controller = "system:serviceaccount:imagegate-system:imagegate-controller";
    let pipeline = "system:serviceaccount:notebooks:imagegate-pipeline";
    let default = "system:serviceaccount:notebooks:default";
    let promotions = "imagegate.dev/imagepromotions";
    // What each program's code calls (tests/it/rbac.rs proves each is used, on the emulator), and
    // what it must not do.
    let (sys, nb) = ("imagegate-system", "notebooks");
    let (yes, no) = (true, false);
    let checkpoint = "imagegate-source-checkpoint-h";
    for (user, verb, resource, ns, name, allowed) in [
        (
            source,
            "list",
            "image.openshift.io/imagestreams",
            "",
            "",
            yes,
        ),
        (
            source,
            "watch",
            "image.openshift.io/imagestreams",
            "",
            "",
            yes,
        ),
        (source, "list", "configmaps", sys, "", yes),
        (source, "create", "configmaps", sys, "", yes),
        (source, "patch", "configmaps", sys, checkpoint, yes),
        (source, "delete", "configmaps", sys, checkpoint, yes),
        (source, "create", "coordination.k8s.io/leases", sys, "", yes),
        (
            source,
            "update",
            "coordination.k8s.io/leases",
            sys,
            "imagegate-source",
            yes,
        ),
        (source, "create", "configmaps", "default", "", no),
        (source, "get", "secrets", sys, "", no),
        (
            source,
            "patch",
            "image.openshift.io/imagestreams",
            nb,
            "nb",
            no,
        ),
        (
            source,
            "update",
            "coordination.k8s.io/leases",
            sys,
            "imagegate-controller",
            no,
        ),
        (source, "list", "tekton.dev/customruns", "", "", no),
        (controller, "watch", "tekton.dev/customruns", "", "", yes),
        (
            controller,
            "update",
            "tekton.dev/customruns/status",
            nb,
            "promote",
            yes,
        ),
        (
            controller,
            "get",
            "image.openshift.io/imagestreams",
            nb,
            "nb",
            yes,
        ),
        (
            controller,
            "patch",
            "image.openshift.io/imagestreams",
            nb,
            "nb",
            yes,
        ),
        (
            controller,
            "get",
            "image.openshift.io/imagestreamimages",
            nb,
            "",
            yes,
        ),
        (
            controller,
            "list",
            "imagegate.dev/imagepromotions",
            nb,
            "",
            yes,
        ),
        (
            controller,
            "get",
            "imagegate.dev/imagepromotions",
            nb,
            "notebooks",
            no,
        ),
        (controller, "create", "events.k8s.io/events", nb, "", yes),
        (
            controller,
            "update",
            "coordination.k8s.io/leases",
            sys,
            "imagegate-controller",
            yes,
        ),
        (
            controller,
            "create",
            "authorization.k8s.io/subjectaccessreviews",
            "",
            "",
            yes,
        ),
        (
            controller,
            "get",
            "tekton.dev/pipelineruns",
            nb,
            "run-b",
            yes,
        ),
        (
            controller,
            "get",
            "tekton.dev/taskruns",
            nb,
            "run-b-validate",
            yes,
        ),
        (
            controller,
            "update",
            "tekton.dev/pipelineruns",
            nb,
            "run-b",
            no,
        ),
        (controller, "list", "tekton.dev/taskruns", nb, "", no),
        // F-6: no write in a namespace that did not opt in; reads stay cluster-wide.
        (
            controller,
            "patch",
            "image.openshift.io/imagestreams",
            "openshift",
            "python",
            no,
        ),
        (
            controller,
            "update",
            "tekton.dev/customruns/status",
            "openshift",
            "r",
            no,
        ),
        (
            controller,
            "create",
            "events.k8s.io/events",
            "openshift",
            "",
            no,
        ),
        (
            controller,
            "get",
            "image.openshift.io/imagestreams",
            "openshift",
            "python",
            yes,
        ),
        (pipeline, "promote", promotions, nb, "notebooks", yes),
        (pipeline, "promote", promotions, nb, "", no),
        (pipeline, "promote", promotions, nb, "added-later", no),
        (pipeline, "promote", promotions, "other", "notebooks", no),
        (pipeline, "get", promotions, nb, "notebooks", no),
        (default, "promote", promotions, nb, "notebooks", no),
        (controller, "promote", promotions, nb, "notebooks", no),
        (
            controller,
            "update",
            "tekton.dev/customruns",
            nb,
            "promote",
            no,
        ),
        (
            controller,
            "delete",
            "image.openshift.io/imagestreams",
            nb,
            "nb",
            no,
        ),
        (controller, "list", "configmaps", sys, "", no),
        (
            controller,
            "update",
            "coordination.k8s.io/leases",
            sys,
            "imagegate-source",
            no,
        ),
    ] {
        assert_eq!(
            cp.can(user, verb, resource, ns, name),
            allowed,
            "{user}: {verb} {resource} in {ns:?} {name:?}"
        );
    }
    // A real token from the TokenRequest API, used for real: the grant works, the rest is a 403.
    let token = cp.ok(&[
        "create",
        "token",
        "imagegate-source",
        "-n",
        "imagegate-system",
    ]);
    let token = token.trim();
    let as_source = |path: &str| cp.get_raw_as(token, path);
    let listed = as_source("/api/v1/namespaces/imagegate-system/configmaps");
    assert!(
        listed.status.success(),
        "{}",
        String::from_utf8_lossy(&listed.stderr)
    );
    let refused = as_source("/api/v1/namespaces/imagegate-system/secrets");
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("forbidden"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
}
