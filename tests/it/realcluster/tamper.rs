//! Only the gate moves a served tag, on the real API server: a served tag moved with `kubectl`
//! (as a namespace editor's `oc tag` would) is reported `Tampered` within 10 s by the controller
//! running as its ServiceAccount with the RBAC of `config/`, and, once the ImagePromotion says
//! `onTamper: Revert`, the next such move is put back.

use serde_json::json;

use super::runs::{Cluster, digest};
use crate::support::controller::{reason, served};

/// Waits up to 10 s (the bound on noticing) for `check`.
async fn within_10s<F, Fut>(what: &str, check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    crate::support::within(what, std::time::Duration::from_secs(10), check).await;
}

/// `kubectl patch`: the served tag pinned to `digest`, as an editor's `oc tag` pins it.
fn move_by_hand(c: &Cluster, ns: &str, digest: &str) {
    let tag = json!({"spec": {"tags": [{"name": "latest", "from": {"kind": "ImageStreamImage", "name": format!("nb@{digest}")}}]}});
    c.cp.ok(&[
        "patch",
        "imagestream",
        "nb",
        "-n",
        ns,
        "--type=strategic",
        "-p",
        &tag.to_string(),
    ]);
}

#[tokio::test]
async fn a_served_tag_moved_with_kubectl_is_reported_within_10s_and_put_back_where_the_policy_says_so()
 {
    let c = Cluster::start().await;
    let (ns, a, b, cc) = ("tamper", digest('a'), digest('b'), digest('c'));
    c.promotion_namespace(ns, &a, &b).await;
    let (_controller, admin) = c.controller(&[]);
    crate::support::wait_ready(admin).await;
    let params = [
        ("imagestream", "nb"),
        ("digest", b.as_str()),
        ("validation-status", "Succeeded"),
    ];
    c.create_run(ns, "promote-b", &params, json!({})).await;
    assert_eq!(reason(&c.done(ns, "promote-b").await).1, "Promoted");

    c.emu.import(ns, "nb", "candidate", &cc).await;
    move_by_hand(&c, ns, &cc);
    within_10s("Tampered on the served tag", || async {
        let (_, ann) = served(&c.stream(ns).await);
        ann.get("imagegate.dev/phase").map(String::as_str) == Some("Tampered")
    })
    .await;
    assert_eq!(served(&c.stream(ns).await).0, format!("nb@{cc}"));

    c.cp.apply_text(&format!(
        "apiVersion: imagegate.dev/v1alpha1\nkind: ImagePromotion\nmetadata: {{name: gov, namespace: {ns}}}\nspec: {{imageStream: nb, onTamper: Revert}}\n"
    ));
    move_by_hand(&c, ns, &a);
    within_10s("the served tag put back to B", || async {
        served(&c.stream(ns).await).0 == format!("nb@{b}")
    })
    .await;
    assert_eq!(
        c.stream(ns).await.current_digest("latest"),
        Some(b.as_str())
    );
}
