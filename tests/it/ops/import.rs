//! `import`: the candidate tag imported now through the real ImageStreamImport API, instead of
//! at the next scheduled import; the new digest reported, or the import's failure.

use serde_json::json;

use super::Ops;
use crate::support::controller::{B, C};

/// Tells the emulated upstream registry what `quay.io/org/nb:latest` serves now.
async fn upstream(o: &Ops, answer: serde_json::Value) {
    o.emu().upstream("quay.io/org/nb:latest", answer).await;
}

#[tokio::test]
async fn import_moves_the_candidate_to_what_the_registry_serves_now() {
    let o = Ops::new().await;
    // The last scheduled import found B; upstream has moved on to C since.
    upstream(&o, json!({"digest": C})).await;
    let out = o.run(&["import", "ds/nb"]).await;
    assert_eq!(out.code, Some(0), "{out}");
    assert_eq!(
        out.stdout,
        format!("ds/nb:candidate: imported {C} (was {B})\n")
    );
    let is = o.stream("ds", "nb").await;
    assert_eq!(is.current_digest("candidate"), Some(C));
    assert_eq!(is.history("candidate").len(), 3, "the history is kept");
    o.assert_operator_only_created("imagestreamimports").await;

    let again = o.run(&["import", "nb", "-n", "ds"]).await;
    assert_eq!(again.code, Some(0), "{again}");
    assert_eq!(again.stdout, format!("ds/nb:candidate: {C} (unchanged)\n"));
}

#[tokio::test]
async fn a_failed_import_is_reported_with_the_registrys_reason_and_exits_3() {
    let o = Ops::new().await;
    upstream(&o, json!({"failure": {"reason": "NotFound"}})).await;
    let out = o.run(&["import", "ds/nb"]).await;
    assert_eq!(out.code, Some(3), "{out}");
    assert_eq!(
        out.stderr,
        "error: ds/nb:candidate: import failed: NotFound: dockerimage.image.openshift.io \"quay.io/org/nb:latest\" not found\n"
    );
    let is = o.stream("ds", "nb").await;
    assert_eq!(
        is.current_digest("candidate"),
        Some(B),
        "the last good digest stays"
    );
    assert_eq!(
        is.import_failure("candidate")
            .and_then(|c| c.reason.as_deref()),
        Some("NotFound")
    );
    // `status -o wide` shows the failed import.
    o.emu()
        .seed(
            json!({"apiVersion": "imagegate.dev/v1alpha1", "kind": "ImagePromotion",
                     "metadata": {"name": "notebooks", "namespace": "ds"}, "spec": {}}),
        )
        .await;
    let status = o.run(&["status", "-n", "ds", "-o", "wide"]).await;
    assert!(
        status
            .stdout
            .contains("failed (NotFound: dockerimage.image.openshift.io"),
        "{status}"
    );
}

#[tokio::test]
async fn a_tag_that_imports_nothing_is_refused_before_any_request() {
    let o = Ops::new().await;
    let out = o.run(&["import", "ds/nb", "--tag", "latest"]).await;
    assert_eq!(out.code, Some(1), "{out}");
    assert_eq!(
        out.stderr,
        "imagegate: nb:latest imports nothing: its from is \"ImageStreamImage\", not a DockerImage pull spec\n"
    );
    assert!(o.operator_writes().await.is_empty());
}
