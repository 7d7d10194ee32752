//! Least privilege of the default install (F-6), on the real authorizer:
//! - what each ServiceAccount `kubectl apply -k config/` makes (and the multi-tenant overlay's,
//!   once opted into) may write, asked of the server
//!   itself (a SelfSubjectRulesReview with the account's own TokenRequest token, what
//!   `kubectl auth can-i --list` shows): in a namespace that did not opt in, and in its own
//!   namespace, exactly the writes docs/security.md's table names, and nothing else;
//! - the controller, as its ServiceAccount, with a run in a namespace that did not opt in
//!   (tekton/330 not applied there): the run is never started, the stream never written, and
//!   the controller says which namespace to onboard; a run in an opted-in namespace is promoted.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::cluster::ControlPlane;
use super::runs::{Cluster, digest};
use crate::support::controller::reason;

/// A namespace with a stream and runs, but not opted in.
const BYSTANDER: &str = "bystander";
/// A namespace opted in (tekton/330).
const GATED: &str = "ds";
const SYS: &str = "imagegate-system";

/// The verbs that only read.
const READS: [&str; 3] = ["get", "list", "watch"];

/// What every authenticated user may create (the default ClusterRole `system:basic-user`):
/// questions about itself, no object.
const SELF_REVIEWS: [&str; 3] = [
    "selfsubjectaccessreviews.authorization.k8s.io",
    "selfsubjectrulesreviews.authorization.k8s.io",
    "selfsubjectreviews.authentication.k8s.io",
];

/// Every write the account `sa` may make in `ns`, as `verb resource.group [names]`, from a
/// SelfSubjectRulesReview made with its own token.
async fn writes(cp: &ControlPlane, http: &reqwest::Client, sa: &str, ns: &str) -> BTreeSet<String> {
    let token = cp.token(SYS, sa);
    let review = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectRulesReview",
        "spec": {"namespace": ns}});
    let answer: Value = http
        .post(format!(
            "{}/apis/authorization.k8s.io/v1/selfsubjectrulesreviews",
            cp.server()
        ))
        .bearer_auth(token)
        .json(&review)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let status = &answer["status"];
    assert_eq!(status["incomplete"], false, "{answer}");
    let strings = |v: &Value| -> Vec<String> {
        v.as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|s| s.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut out = BTreeSet::new();
    for rule in status["resourceRules"].as_array().unwrap() {
        let names = strings(&rule["resourceNames"]);
        for verb in strings(&rule["verbs"]) {
            if READS.contains(&verb.as_str()) {
                continue;
            }
            for group in strings(&rule["apiGroups"]) {
                for resource in strings(&rule["resources"]) {
                    let qualified = if group.is_empty() {
                        resource.clone()
                    } else {
                        format!("{resource}.{group}")
                    };
                    if SELF_REVIEWS.contains(&qualified.as_str()) {
                        continue;
                    }
                    out.insert(format!("{verb} {qualified} {names:?}").replace(" []", ""));
                }
            }
        }
    }
    out
}

fn set(items: &[&str]) -> BTreeSet<String> {
    items.iter().map(|s| s.to_string()).collect()
}

#[tokio::test]
async fn the_default_install_writes_nowhere_a_namespace_did_not_opt_in_to() {
    let c = Cluster::start().await;
    let (a, b) = (digest('a'), digest('b'));
    c.promotion_namespace(GATED, &a, &b).await;
    c.promotion_namespace(BYSTANDER, &a, &b).await;
    // BYSTANDER did not apply tekton/: its 330 is not there.
    c.cp.ok(&[
        "delete",
        "rolebinding",
        "imagegate-controller-writer",
        "-n",
        BYSTANDER,
    ]);

    // What the server says each account of config/ may write (kubectl auth can-i --list).
    imagegate::runtime::tls::install_crypto_provider();
    let ca = std::fs::read(c.cp.ca_file()).unwrap();
    let http = reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(&ca).unwrap())
        .build()
        .unwrap();
    let accounts: Vec<String> =
        c.cp.ok(&["get", "serviceaccounts", "-n", SYS, "-o", "name"])
            .lines()
            .map(|l| l.trim_start_matches("serviceaccount/").to_string())
            .filter(|n| n != "default")
            .collect();
    assert_eq!(
        accounts,
        ["imagegate-controller", "imagegate-source"],
        "config/'s accounts"
    );
    let sar = "create subjectaccessreviews.authorization.k8s.io";
    for (sa, cluster_wide, own) in [
        (
            "imagegate-source",
            set(&[]),
            set(&[
                "create configmaps",
                "patch configmaps",
                "delete configmaps",
                "create leases.coordination.k8s.io",
                "update leases.coordination.k8s.io [\"imagegate-source\"]",
                "create serviceaccounts/token [\"imagegate-source\"]",
            ]),
        ),
        (
            "imagegate-controller",
            set(&[sar]),
            set(&[
                sar,
                "create leases.coordination.k8s.io",
                "update leases.coordination.k8s.io [\"imagegate-controller\"]",
                "create serviceaccounts/token [\"imagegate-controller\"]",
            ]),
        ),
    ] {
        for ns in [BYSTANDER, "openshift", "kube-system"] {
            assert_eq!(
                writes(&c.cp, &http, sa, ns).await,
                cluster_wide,
                "{sa} in {ns}"
            );
        }
        assert_eq!(writes(&c.cp, &http, sa, SYS).await, own, "{sa} in {SYS}");
    }
    // Opted in: the controller's writes for runs, there only.
    let gated = set(&[
        sar,
        "update customruns/status.tekton.dev",
        "patch imagestreams.image.openshift.io",
        "create events.events.k8s.io",
        "patch events.events.k8s.io",
    ]);
    assert_eq!(
        writes(&c.cp, &http, "imagegate-controller", GATED).await,
        gated
    );

    // The multi-tenant adapter's overlay, opted into: cluster-wide, only the sources' status and
    // its reviews; its checkpoints and Lease in its own namespace. No ConfigMap right elsewhere
    // (F-6: the single source's checkpoint, kube-system/coredns).
    c.cp.ok(&["apply", "--server-side", "-k", "config/multi-tenant/"]);
    let adapter = "imagegate-source-multi-tenant";
    let statuses = "patch imagestreamsources/status.sources.imagegate.dev";
    for ns in [BYSTANDER, "kube-system"] {
        assert_eq!(
            writes(&c.cp, &http, adapter, ns).await,
            set(&[sar, statuses]),
            "{ns}"
        );
    }
    assert_eq!(
        writes(&c.cp, &http, adapter, SYS).await,
        set(&[
            sar,
            statuses,
            "create configmaps",
            "patch configmaps",
            "delete configmaps",
            "create leases.coordination.k8s.io",
            "update leases.coordination.k8s.io [\"imagegate-source-multi-tenant\"]",
            "create serviceaccounts/token [\"imagegate-source-multi-tenant\"]",
        ])
    );

    // The controller, as its ServiceAccount: the bystander's run is refused by the server, and
    // the controller says where to opt in; the gated namespace's run is promoted.
    let (controller, _admin) = c.controller(&[]);
    let validated = [
        ("imagestream", "nb"),
        ("digest", b.as_str()),
        ("validation-status", "Succeeded"),
    ];
    c.create_run(BYSTANDER, "promote-b", &validated, json!({}))
        .await;
    c.create_run(GATED, "promote-b", &validated, json!({}))
        .await;
    let run = c.done(GATED, "promote-b").await;
    assert_eq!(
        reason(&run),
        ("True".into(), "Promoted".into()),
        "{:?}",
        run.status
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    let hint = "this namespace has not opted in to imagegate";
    while !controller
        .log()
        .lines()
        .any(|l| l.contains(hint) && l.contains(BYSTANDER))
    {
        assert!(Instant::now() < deadline, "no hint:\n{}", controller.log());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let untouched = c.runs(BYSTANDER).get("promote-b").await.unwrap();
    assert!(!untouched.has_started(), "{:?}", untouched.status);
    assert_eq!(
        c.stream(BYSTANDER).await.current_digest("latest"),
        Some(a.as_str())
    );
    assert_eq!(c.stream_writes(BYSTANDER).await, 0);
}
