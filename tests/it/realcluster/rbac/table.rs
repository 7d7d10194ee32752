//! The table of the RBAC test: for each verb of each rule of `config/`, the role that holds it
//! on the server and the request a program makes with it (as `tests/it/rbac.rs` shows the
//! programs make on the emulator), and the objects those requests act on.

use serde_json::{Value, json};

use super::super::cluster::{CONTROLLER_SA, ControlPlane, SOURCE_SA};
use super::super::runs::digest;

/// The namespace of the programs' own objects.
pub const SYS: &str = "imagegate-system";
/// The content type of a plain JSON body (a create, an update).
pub const JSON: &str = "application/json";
const MERGE: &str = "application/merge-patch+json";
const STRATEGIC: &str = "application/strategic-merge-patch+json";

/// How a row's request gets its body.
pub enum Body {
    /// No body.
    None,
    /// This JSON, with this content type.
    Json(&'static str, Value),
    /// The object at the same path as it is now (read as admin), written back unchanged.
    Current,
}

/// One verb of one rule, and the call that needs it.
pub struct Row {
    /// The role that holds the rule, as on the server: (kind, namespace or "", name).
    pub role: (&'static str, &'static str, &'static str),
    /// The rule: its API group, resource and resourceNames.
    pub group: &'static str,
    pub resource: &'static str,
    pub names: &'static [&'static str],
    pub verb: &'static str,
    /// The ServiceAccount user that makes the call.
    pub user: &'static str,
    pub method: &'static str,
    pub path: &'static str,
    pub body: Body,
    /// An object the admin creates before each call (the call consumes it).
    pub before: Option<Value>,
}

type Role = (&'static str, &'static str, &'static str);
type Rule = (&'static str, &'static str, &'static [&'static str]);

fn row(role: Role, rule: Rule, verb: &'static str, call: (&'static str, &'static str)) -> Row {
    let user = if role.2.starts_with("imagegate-source") {
        SOURCE_SA
    } else {
        CONTROLLER_SA
    };
    Row {
        role,
        group: rule.0,
        resource: rule.1,
        names: rule.2,
        verb,
        user,
        method: call.0,
        path: call.1,
        body: Body::None,
        before: None,
    }
}

impl Row {
    fn body(self, body: Body) -> Row {
        Row { body, ..self }
    }
}

fn configmap(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": SYS}})
}

fn lease(prefix: &str) -> Body {
    Body::Json(
        JSON,
        json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"generateName": prefix}}),
    )
}

const SOURCE_ROLE: Role = ("Role", SYS, "imagegate-source");
const SOURCE_CLUSTER: Role = ("ClusterRole", "", "imagegate-source");
const CONTROLLER_ROLE: Role = ("Role", SYS, "imagegate-controller");
const CONTROLLER_CLUSTER: Role = ("ClusterRole", "", "imagegate-controller");
const RUNS: Role = ("ClusterRole", "", "imagegate-controller-runs");
/// Bound in `ds` only, by tekton/330 (the fixtures apply it there).
const WRITER: Role = ("ClusterRole", "", "imagegate-controller-writer");

const STREAMS: Rule = ("image.openshift.io", "imagestreams", &[]);
const CONFIGMAPS: Rule = ("", "configmaps", &[]);
const LEASES: Rule = ("coordination.k8s.io", "leases", &[]);
const SOURCE_LEASE: Rule = ("coordination.k8s.io", "leases", &["imagegate-source"]);
const CONTROLLER_LEASE: Rule = ("coordination.k8s.io", "leases", &["imagegate-controller"]);
const CUSTOMRUNS: Rule = ("tekton.dev", "customruns", &[]);
const EVENTS: Rule = ("events.k8s.io", "events", &[]);

const CMS: &str = "/api/v1/namespaces/imagegate-system/configmaps";
const SHARD: &str = "/api/v1/namespaces/imagegate-system/configmaps/imagegate-source-checkpoint-h";
const OLD_SHARD: &str =
    "/api/v1/namespaces/imagegate-system/configmaps/imagegate-source-checkpoint-h0";
const LEASES_PATH: &str = "/apis/coordination.k8s.io/v1/namespaces/imagegate-system/leases";
const SOURCE_LEASE_PATH: &str =
    "/apis/coordination.k8s.io/v1/namespaces/imagegate-system/leases/imagegate-source";
const CONTROLLER_LEASE_PATH: &str =
    "/apis/coordination.k8s.io/v1/namespaces/imagegate-system/leases/imagegate-controller";
const STREAM: &str = "/apis/image.openshift.io/v1/namespaces/ds/imagestreams/nb";
/// The candidate's ImageStreamImage in `ds` (the digest [`digest`]`('b')`).
const IMAGE: &str = "/apis/image.openshift.io/v1/namespaces/ds/imagestreamimages/nb@sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
const RUN_STATUS: &str = "/apis/tekton.dev/v1beta1/namespaces/ds/customruns/promote/status";
const PROMOTIONS: &str = "/apis/imagegate.dev/v1alpha1/namespaces/ds/imagepromotions";
const EVENTS_PATH: &str = "/apis/events.k8s.io/v1/namespaces/ds/events";
const EVENT: &str = "/apis/events.k8s.io/v1/namespaces/ds/events/promote.1";
const REVIEWS: &str = "/apis/authorization.k8s.io/v1/subjectaccessreviews";
const PIPELINERUN: &str = "/apis/tekton.dev/v1/namespaces/ds/pipelineruns/validate";
const TASKRUN: &str = "/apis/tekton.dev/v1/namespaces/ds/taskruns/validate-smoke";

/// Every verb `config/` grants the two ServiceAccounts (with `ds` opted in by tekton/330), with
/// its call.
pub fn rows() -> Vec<Row> {
    let all_streams = "/apis/image.openshift.io/v1/imagestreams";
    let all_runs = "/apis/tekton.dev/v1beta1/customruns";
    let checkpoints = "/api/v1/namespaces/imagegate-system/configmaps?labelSelector=app.kubernetes.io%2Fcomponent%3Dsource-checkpoint";
    let new_shard = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"generateName": "imagegate-source-checkpoint-"}});
    let watch_streams = "/apis/image.openshift.io/v1/imagestreams?watch=true&timeoutSeconds=1";
    let watch_runs = "/apis/tekton.dev/v1beta1/customruns?watch=true&timeoutSeconds=1";
    let series = json!({"series": {"count": 2, "lastObservedTime": "2026-01-01T00:00:01.000000Z"}});
    let touch = json!({"metadata": {"annotations": {"imagegate.test/touched": "yes"}}});
    let token_request = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
        "spec": {"audiences": ["eventing.knative.dev/broker/imagegate-system/imagegate"]}});
    // What the controller asks before a promotion: may the run's account promote.
    let review = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
        "spec": {"user": "system:serviceaccount:ds:default", "resourceAttributes": {
            "namespace": "ds", "verb": "promote", "group": "imagegate.dev", "resource": "imagepromotions"}}});
    vec![
        row(SOURCE_CLUSTER, STREAMS, "list", ("GET", all_streams)),
        row(SOURCE_CLUSTER, STREAMS, "watch", ("GET", watch_streams)),
        row(SOURCE_ROLE, CONFIGMAPS, "list", ("GET", checkpoints)),
        row(SOURCE_ROLE, CONFIGMAPS, "create", ("POST", CMS)).body(Body::Json(JSON, new_shard)),
        row(SOURCE_ROLE, CONFIGMAPS, "patch", ("PATCH", SHARD))
            .body(Body::Json(MERGE, json!({"data": {"ds_nb": "{}"}}))),
        Row {
            before: Some(configmap("imagegate-source-checkpoint-h0")),
            ..row(SOURCE_ROLE, CONFIGMAPS, "delete", ("DELETE", OLD_SHARD))
        },
        row(SOURCE_ROLE, LEASES, "create", ("POST", LEASES_PATH)).body(lease("imagegate-source-")),
        row(SOURCE_ROLE, SOURCE_LEASE, "get", ("GET", SOURCE_LEASE_PATH)),
        row(
            SOURCE_ROLE,
            SOURCE_LEASE,
            "update",
            ("PUT", SOURCE_LEASE_PATH),
        )
        .body(Body::Current),
        // An OIDC token of its own ServiceAccount, for a sink with an audience.
        row(
            SOURCE_ROLE,
            ("", "serviceaccounts/token", &["imagegate-source"]),
            "create",
            (
                "POST",
                "/api/v1/namespaces/imagegate-system/serviceaccounts/imagegate-source/token",
            ),
        )
        .body(Body::Json(JSON, token_request.clone())),
        row(
            CONTROLLER_ROLE,
            ("", "serviceaccounts/token", &["imagegate-controller"]),
            "create",
            (
                "POST",
                "/api/v1/namespaces/imagegate-system/serviceaccounts/imagegate-controller/token",
            ),
        )
        .body(Body::Json(JSON, token_request)),
        // The run key a re-drive names its PipelineRun with (src/runkey.rs).
        row(
            CONTROLLER_ROLE,
            ("", "secrets", &["imagegate-run-key"]),
            "get",
            (
                "GET",
                "/api/v1/namespaces/imagegate-system/secrets/imagegate-run-key",
            ),
        ),
        row(CONTROLLER_CLUSTER, CUSTOMRUNS, "list", ("GET", all_runs)),
        row(CONTROLLER_CLUSTER, CUSTOMRUNS, "watch", ("GET", watch_runs)),
        row(
            CONTROLLER_CLUSTER,
            ("authorization.k8s.io", "subjectaccessreviews", &[]),
            "create",
            ("POST", REVIEWS),
        )
        .body(Body::Json(JSON, review)),
        row(
            RUNS,
            ("tekton.dev", "pipelineruns", &[]),
            "get",
            ("GET", PIPELINERUN),
        ),
        row(
            RUNS,
            ("tekton.dev", "taskruns", &[]),
            "get",
            ("GET", TASKRUN),
        ),
        row(
            WRITER,
            ("tekton.dev", "customruns/status", &[]),
            "update",
            ("PUT", RUN_STATUS),
        )
        .body(Body::Current),
        row(
            RUNS,
            ("imagegate.dev", "imagepromotions", &[]),
            "list",
            ("GET", PROMOTIONS),
        ),
        row(
            RUNS,
            ("imagegate.dev", "imagepromotions", &[]),
            "watch",
            (
                "GET",
                "/apis/imagegate.dev/v1alpha1/imagepromotions?watch=true&timeoutSeconds=1",
            ),
        ),
        row(RUNS, STREAMS, "get", ("GET", STREAM)),
        row(RUNS, STREAMS, "list", ("GET", all_streams)),
        row(RUNS, STREAMS, "watch", ("GET", watch_streams)),
        row(WRITER, STREAMS, "patch", ("PATCH", STREAM)).body(Body::Json(STRATEGIC, touch)),
        row(
            RUNS,
            ("image.openshift.io", "imagestreamimages", &[]),
            "get",
            ("GET", IMAGE),
        ),
        // What a signature policy names: a trusted key (the platform's, in imagegate-system)
        // and the registry's pull secret (the run's namespace).
        row(
            CONTROLLER_ROLE,
            CONFIGMAPS,
            "get",
            (
                "GET",
                "/api/v1/namespaces/imagegate-system/configmaps/publisher-keys",
            ),
        ),
        row(
            WRITER,
            ("", "secrets", &[]),
            "get",
            ("GET", "/api/v1/namespaces/ds/secrets/quay-pull"),
        ),
        row(WRITER, EVENTS, "create", ("POST", EVENTS_PATH)).body(Body::Json(JSON, event(None))),
        row(WRITER, EVENTS, "patch", ("PATCH", EVENT)).body(Body::Json(MERGE, series)),
        row(CONTROLLER_ROLE, LEASES, "create", ("POST", LEASES_PATH))
            .body(lease("imagegate-controller-")),
        row(
            CONTROLLER_ROLE,
            CONTROLLER_LEASE,
            "get",
            ("GET", CONTROLLER_LEASE_PATH),
        ),
        row(
            CONTROLLER_ROLE,
            CONTROLLER_LEASE,
            "update",
            ("PUT", CONTROLLER_LEASE_PATH),
        )
        .body(Body::Current),
    ]
}

/// An Event about the CustomRun `ds/promote`, as kube-runtime's Recorder writes one (named
/// `promote.<hex>`; a new one by `generateName`, since the table's create is made again and again).
fn event(name: Option<&str>) -> Value {
    let mut e = json!({
        "apiVersion": "events.k8s.io/v1", "kind": "Event",
        "metadata": {"generateName": "promote.e"},
        "eventTime": "2026-01-01T00:00:00.000000Z", "reportingController": "imagegate.dev/controller",
        "reportingInstance": "imagegate-controller-0", "action": "Promote", "reason": "Promoted", "type": "Normal",
        "regarding": {"apiVersion": "tekton.dev/v1beta1", "kind": "CustomRun", "namespace": "ds", "name": "promote"},
    });
    if let Some(n) = name {
        e["metadata"] = json!({"name": n, "namespace": "ds"});
    }
    e
}

/// The objects the calls act on: the Leases, the checkpoint shard, a run, its ImagePromotion, an
/// Event, the PipelineRun and TaskRun a proof of validation reads (Tekton's released CRDs), and
/// `ds/nb` in the image API.
pub async fn fixtures(cp: &ControlPlane) {
    cp.ok(&["create", "namespace", "ds"]);
    cp.onboard("ds");
    use crate::support::upstream::TEKTON_PIPELINE;
    for crd in ["pipelinerun", "taskrun"] {
        let path = TEKTON_PIPELINE
            .dir()
            .join(format!("config/300-crds/300-{crd}.yaml"));
        cp.ok(&["apply", "--server-side", "-f", &path.to_string_lossy()]);
    }
    for crd in ["pipelineruns.tekton.dev", "taskruns.tekton.dev"] {
        cp.established(crd);
    }
    let run = crate::support::promotion_run("promote", &[("imagestream", "nb")], &json!({}));
    let objects = [
        json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "imagegate-source", "namespace": SYS}}),
        json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "imagegate-controller", "namespace": SYS}}),
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "imagegate-run-key", "namespace": SYS}, "data": {"key": "AAAA"}}),
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "publisher-keys", "namespace": SYS}, "data": {"cosign.pub": "PEM"}}),
        json!({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/dockerconfigjson", "metadata": {"name": "quay-pull", "namespace": "ds"},
            "data": {".dockerconfigjson": "eyJhdXRocyI6e319"}}),
        configmap("imagegate-source-checkpoint-h"),
        serde_json::to_value(run).unwrap(),
        json!({"apiVersion": "imagegate.dev/v1alpha1", "kind": "ImagePromotion", "metadata": {"name": "notebooks", "namespace": "ds"}, "spec": {}}),
        event(Some("promote.1")),
        json!({"apiVersion": "tekton.dev/v1", "kind": "PipelineRun", "metadata": {"name": "validate", "namespace": "ds"},
            "spec": {"pipelineRef": {"name": "imagegate-validate"}}}),
        json!({"apiVersion": "tekton.dev/v1", "kind": "TaskRun", "metadata": {"name": "validate-smoke", "namespace": "ds"},
            "spec": {"taskRef": {"name": "smoke"}}}),
    ];
    for o in objects {
        let (ok, out) = cp.pipe(&["create", "-f", "-"], &o.to_string());
        assert!(ok, "{out}");
    }
    cp.image_api()
        .await
        .seed_promotion_stream("ds", &digest('a'), &digest('b'))
        .await;
}
