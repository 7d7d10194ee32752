//! The calls the controller makes for the trust checks (the SubjectAccessReview, the PipelineRun
//! and TaskRun reads of the proof), both ways: `config/` grants each of
//! them, and without its rule the same call is refused; and the permission to promote, which the
//! controller asks about, is held by exactly the account `tekton/` binds it to.

use std::path::Path;

use crate::support::EmulatorServer;
use crate::support::rbac::{self, Policy};
use imagegate_emulator::control::RequestRecord;
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::{Api, PostParams};
use serde_json::Value;

const CONTROLLER_SA: &str = "system:serviceaccount:imagegate-system:imagegate-controller";
const ROOT: &str = env!("CARGO_MANIFEST_DIR");

fn read(path: &str) -> String {
    std::fs::read_to_string(Path::new(ROOT).join(path)).unwrap()
}

fn call(method: &str, path: &str) -> RequestRecord {
    RequestRecord {
        method: method.into(),
        path: path.into(),
        query: String::new(),
        verb: String::new(),
        group: String::new(),
        resource: String::new(),
        subresource: String::new(),
        namespace: String::new(),
        name: String::new(),
        user_agent: String::new(),
        user: CONTROLLER_SA.into(),
        code: 200,
    }
}

/// `config/` with the rule of 202-clusterrole-controller.yaml that starts with `rule_start`
/// (up to the next rule or document) taken out.
fn config_without(rule_start: &str) -> Policy {
    let mut policy = Policy::default();
    for entry in std::fs::read_dir(Path::new(ROOT).join("config")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "yaml") {
            continue;
        }
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let mut text = std::fs::read_to_string(&path).unwrap();
        if name == "202-clusterrole-controller.yaml" {
            let at = text
                .find(rule_start)
                .unwrap_or_else(|| panic!("{name} has no rule {rule_start:?}"));
            let rest = &text[at + rule_start.len()..];
            let end = ["\n- apiGroups", "\n---", "\n# "]
                .iter()
                .filter_map(|m| rest.find(m))
                .min()
                .map_or(text.len(), |e| at + rule_start.len() + e + 1);
            text.replace_range(at..end, "");
        }
        policy.add(&name, &text);
    }
    policy
}

/// The controller's calls for the trust checks, each with the rule of `config/` that grants it:
/// the review of who may promote, and the reads of the proof of validation.
fn trust_calls() -> Vec<(RequestRecord, &'static str)> {
    vec![
        (
            call("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews"),
            "- apiGroups: [\"authorization.k8s.io\"]",
        ),
        (
            call(
                "GET",
                "/apis/tekton.dev/v1/namespaces/ds/pipelineruns/run-b",
            ),
            "- apiGroups: [\"tekton.dev\"]\n  resources: [\"pipelineruns\"]",
        ),
        (
            call(
                "GET",
                "/apis/tekton.dev/v1/namespaces/ds/taskruns/run-b-validate",
            ),
            "- apiGroups: [\"tekton.dev\"]\n  resources: [\"taskruns\"]",
        ),
    ]
}

#[test]
fn config_grants_the_controllers_trust_calls_and_each_is_refused_without_its_rule() {
    let shipped = Policy::load(&Path::new(ROOT).join("config"));
    for (record, rule) in trust_calls() {
        let denied = rbac::audit(
            &shipped,
            std::slice::from_ref(&record),
            CONTROLLER_SA,
            CONTROLLER_SA,
        )
        .denied;
        assert!(denied.is_empty(), "{denied:?}");
        let without = config_without(rule);
        assert!(without.convention_problems().is_empty());
        let denied = rbac::audit(
            &without,
            std::slice::from_ref(&record),
            CONTROLLER_SA,
            CONTROLLER_SA,
        )
        .denied;
        assert_eq!(
            denied.len(),
            1,
            "{} {}: {denied:?}",
            record.method,
            record.path
        );
        assert!(denied[0].contains(&record.path), "{}", denied[0]);
    }
}

/// `tekton/310-pipeline-rbac.yaml` as `kubectl apply -k tekton/` creates it in `namespace`.
fn pipeline_rbac_in(namespace: &str) -> String {
    let mut out = String::new();
    for doc in serde_norway::Deserializer::from_str(&read("tekton/310-pipeline-rbac.yaml")) {
        let mut v: Value = serde::Deserialize::deserialize(doc).unwrap();
        v["metadata"]["namespace"] = namespace.into();
        out.push_str(&serde_json::to_string(&v).unwrap());
        out.push_str("\n---\n");
    }
    out
}

async fn may_promote(emu: &EmulatorServer, user: &str, ns: &str, name: Option<&str>) -> bool {
    let (sa_ns, _) = user
        .strip_prefix("system:serviceaccount:")
        .and_then(|r| r.split_once(':'))
        .unwrap();
    let review = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(user.into()),
            groups: Some(vec![
                "system:serviceaccounts".into(),
                format!("system:serviceaccounts:{sa_ns}"),
            ]),
            resource_attributes: Some(ResourceAttributes {
                namespace: Some(ns.into()),
                verb: Some("promote".into()),
                group: Some("imagegate.dev".into()),
                resource: Some("imagepromotions".into()),
                name: name.map(str::to_string),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    let reviews: Api<SubjectAccessReview> = Api::all(emu.client());
    let answered = reviews
        .create(&PostParams::default(), &review)
        .await
        .unwrap();
    answered.status.unwrap().allowed
}

#[tokio::test]
async fn the_shipped_promoter_role_lets_the_pipelines_account_promote_and_no_other() {
    let emu = EmulatorServer::start().await;
    emu.seed_str(&read("config/204-clusterrole-promoter.yaml"))
        .await;
    emu.seed_str(&read("config/203-bindings.yaml")).await;
    emu.seed_str(&pipeline_rbac_in("notebooks")).await;
    let pipeline = "system:serviceaccount:notebooks:imagegate-pipeline";
    assert!(may_promote(&emu, pipeline, "notebooks", Some("notebooks")).await);
    assert!(
        !may_promote(&emu, pipeline, "notebooks", None).await,
        "not every ImagePromotion of its namespace: one someone adds is not covered"
    );
    assert!(!may_promote(&emu, pipeline, "notebooks", Some("added-later")).await);
    assert!(!may_promote(&emu, pipeline, "other", Some("notebooks")).await);
    for other in [
        "system:serviceaccount:notebooks:default",
        "system:serviceaccount:other:imagegate-pipeline",
        CONTROLLER_SA,
        "system:serviceaccount:imagegate-system:imagegate-source",
    ] {
        assert!(
            !may_promote(&emu, other, "notebooks", Some("notebooks")).await,
            "{other} may not promote"
        );
    }
}

/// F-6: `config/` alone lets the controller write in no namespace; `tekton/330` opts one in, and
/// only that one. Each write the controller makes for a run (its status, the served tag, an
/// Event) is denied in `openshift` (whose builder images it must never touch) and in a
/// namespace before it is onboarded, and allowed in it after. Its reads stay cluster-wide.
#[test]
fn the_controller_writes_only_in_namespaces_that_opted_in() {
    let writes = |ns: &str| {
        [
            (
                "PUT",
                format!("/apis/tekton.dev/v1beta1/namespaces/{ns}/customruns/r/status"),
            ),
            (
                "PATCH",
                format!("/apis/image.openshift.io/v1/namespaces/{ns}/imagestreams/nb"),
            ),
            (
                "POST",
                format!("/apis/events.k8s.io/v1/namespaces/{ns}/events"),
            ),
            (
                "PATCH",
                format!("/apis/events.k8s.io/v1/namespaces/{ns}/events/r.1"),
            ),
        ]
        .map(|(method, path)| call(method, &path))
    };
    let denied = |policy: &Policy, records: &[RequestRecord]| {
        rbac::audit(policy, records, CONTROLLER_SA, CONTROLLER_SA)
            .denied
            .len()
    };
    let shipped = Policy::installed(&[]);
    let onboarded = Policy::installed(&["ds"]);
    for ns in ["ds", "openshift"] {
        assert_eq!(
            denied(&shipped, &writes(ns)),
            4,
            "config/ alone writes in {ns}"
        );
    }
    assert_eq!(
        denied(&onboarded, &writes("ds")),
        0,
        "tekton/330 opts ds in"
    );
    assert_eq!(
        denied(&onboarded, &writes("openshift")),
        4,
        "and no other namespace"
    );
    let reads = [
        call(
            "GET",
            "/apis/image.openshift.io/v1/namespaces/openshift/imagestreams/python",
        ),
        call(
            "GET",
            "/apis/imagegate.dev/v1alpha1/namespaces/openshift/imagepromotions",
        ),
    ];
    assert_eq!(denied(&shipped, &reads), 0, "reads stay cluster-wide");
}
