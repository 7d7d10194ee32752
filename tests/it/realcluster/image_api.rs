//! The OpenShift image API aggregated into the real API server: `scripts/realcluster up`
//! registers it (APIService `v1.image.openshift.io`, served by `imagegate-emulator
//! --serve-image-api-only`), kube-apiserver discovers and proxies it, and both the real
//! authorizer and the image API's own SubjectAccessReviews refuse what RBAC does not grant.

use serde_json::Value;

use super::cluster::{ControlPlane, SOURCE_SA};

/// A client of the image API's own port, presenting the certificate `name` of the control
/// plane's pki/ (None: no certificate).
fn direct(cp: &ControlPlane, name: Option<&str>) -> reqwest::Client {
    imagegate::runtime::tls::install_crypto_provider();
    let pki = cp.dir().join("pki");
    let ca = std::fs::read(pki.join("ca.crt")).unwrap();
    let mut b = reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(&ca).unwrap());
    if let Some(n) = name {
        let mut pem = std::fs::read(pki.join(format!("{n}.crt"))).unwrap();
        pem.extend(std::fs::read(pki.join(format!("{n}.key"))).unwrap());
        b = b.identity(reqwest::Identity::from_pem(&pem).unwrap());
    }
    b.build().unwrap()
}

#[tokio::test]
async fn the_image_api_is_aggregated_and_refuses_what_rbac_does_not_grant() {
    let cp = ControlPlane::up();
    cp.install();
    let available = cp.ok(&[
        "get",
        "apiservice",
        "v1.image.openshift.io",
        "-o",
        "jsonpath={.status.conditions[?(@.type=='Available')].status}",
    ]);
    assert_eq!(available, "True");
    let resources = cp.ok(&[
        "api-resources",
        "--api-group=image.openshift.io",
        "-o",
        "name",
    ]);
    for r in [
        "imagestreams",
        "imagestreamtags",
        "imagestreamimages",
        "images",
    ] {
        assert!(
            resources.contains(&format!("{r}.image.openshift.io")),
            "{resources}"
        );
    }
    // kubectl, through the real server, creates and reads an ImageStream the image API stores.
    cp.ok(&["create", "namespace", "notebooks"]);
    let (ok, out) = cp.apply_text(
        "apiVersion: image.openshift.io/v1\nkind: ImageStream\nmetadata: {name: nb, namespace: notebooks}\n\
         spec:\n  tags:\n  - name: candidate\n    from: {kind: DockerImage, name: quay.io/org/nb:latest}\n",
    );
    assert!(ok, "{out}");
    let is: Value =
        serde_json::from_str(&cp.ok(&["get", "is", "nb", "-n", "notebooks", "-o", "json"]))
            .unwrap();
    assert_eq!(
        is["status"]["dockerImageRepository"],
        "image-registry.openshift-image-registry.svc:5000/notebooks/nb"
    );

    // The source's ServiceAccount, with a TokenRequest token: its grant works, the rest is 403.
    let token = cp.token("imagegate-system", "imagegate-source");
    let listed = cp.get_raw_as(&token, "/apis/image.openshift.io/v1/imagestreams");
    assert!(
        listed.status.success(),
        "{}",
        String::from_utf8_lossy(&listed.stderr)
    );
    let refused = cp.get_raw_as(
        &token,
        "/apis/image.openshift.io/v1/namespaces/notebooks/imagestreams/nb",
    );
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("forbidden"));

    // The image API itself: the proxy's certificate makes its headers count, and its own
    // review refuses what RBAC refuses (a request that did not come through the aggregator).
    let url = format!("https://127.0.0.1:{}", cp.env("IMAGE_API_PORT"));
    let stream = format!("{url}/apis/image.openshift.io/v1/namespaces/notebooks/imagestreams/nb");
    let proxy = direct(&cp, Some("front-proxy-client"));
    let as_source = |r: reqwest::RequestBuilder| {
        r.header("X-Remote-User", SOURCE_SA)
            .header("X-Remote-Group", "system:serviceaccounts")
            .header("X-Remote-Group", "system:serviceaccounts:imagegate-system")
            .send()
    };
    let list = as_source(proxy.get(format!("{url}/apis/image.openshift.io/v1/imagestreams")))
        .await
        .unwrap();
    assert_eq!(list.status(), 200);
    let delete = as_source(proxy.delete(&stream)).await.unwrap();
    assert_eq!(delete.status(), 403);
    let status: Value = delete.json().await.unwrap();
    assert!(
        status["message"].as_str().unwrap().starts_with(&format!(
            "imagestreams.image.openshift.io \"nb\" is forbidden: User \"{SOURCE_SA}\" cannot delete resource \"imagestreams\""
        )),
        "{status}"
    );
    // The same headers without the proxy's certificate are nobody's: anonymous, refused.
    let anonymous = as_source(direct(&cp, None).get(&stream)).await.unwrap();
    assert_eq!(anonymous.status(), 403);
    // A client certificate of the cluster's CA is not the front proxy's: the handshake fails.
    assert!(
        as_source(direct(&cp, Some("admin")).get(&stream))
            .await
            .is_err()
    );
}
