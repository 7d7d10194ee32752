//! Request attributes as kube-apiserver reads them, and its refusal messages.

use super::*;

fn attrs(method: Method, path: &str, query: &str) -> Attributes {
    Attributes::of(&method, path, &Query::parse(query))
}

fn res(verb: &str, resource: &str, sub: &str, ns: &str, name: &str) -> Attributes {
    Attributes::Resource {
        verb: verb.into(),
        group: "image.openshift.io".into(),
        version: "v1".into(),
        resource: resource.into(),
        subresource: sub.into(),
        namespace: ns.into(),
        name: name.into(),
    }
}

#[test]
fn image_api_requests_have_the_attributes_rbac_sees() {
    let base = "/apis/image.openshift.io/v1";
    let cases = [
        (
            Method::GET,
            format!("{base}/imagestreams"),
            "limit=500",
            res("list", "imagestreams", "", "", ""),
        ),
        (
            Method::GET,
            format!("{base}/imagestreams"),
            "watch=true&resourceVersion=5",
            res("watch", "imagestreams", "", "", ""),
        ),
        (
            Method::GET,
            format!("{base}/watch/namespaces/ds/imagestreams"),
            "",
            res("watch", "imagestreams", "", "ds", ""),
        ),
        (
            Method::GET,
            format!("{base}/namespaces/ds/imagestreams"),
            "fieldSelector=metadata.name%3Dnb",
            res("list", "imagestreams", "", "ds", "nb"),
        ),
        (
            Method::GET,
            format!("{base}/namespaces/ds/imagestreams/nb"),
            "",
            res("get", "imagestreams", "", "ds", "nb"),
        ),
        (
            Method::PATCH,
            format!("{base}/namespaces/ds/imagestreams/nb"),
            "",
            res("patch", "imagestreams", "", "ds", "nb"),
        ),
        (
            Method::PUT,
            format!("{base}/namespaces/ds/imagestreams/nb/status"),
            "",
            res("update", "imagestreams", "status", "ds", "nb"),
        ),
        (
            Method::GET,
            format!("{base}/namespaces/ds/imagestreamimages/nb%40sha256:ab"),
            "",
            res("get", "imagestreamimages", "", "ds", "nb@sha256:ab"),
        ),
        (
            Method::POST,
            format!("{base}/namespaces/ds/imagestreams"),
            "",
            res("create", "imagestreams", "", "ds", ""),
        ),
        (
            Method::DELETE,
            format!("{base}/namespaces/ds/imagestreams"),
            "",
            res("deletecollection", "imagestreams", "", "ds", ""),
        ),
        (
            Method::DELETE,
            format!("{base}/images/sha256:ab"),
            "",
            res("delete", "images", "", "", "sha256:ab"),
        ),
    ];
    for (method, path, query, want) in cases {
        assert_eq!(
            attrs(method.clone(), &path, query),
            want,
            "{method} {path}?{query}"
        );
    }
    for path in [
        "/apis",
        "/apis/image.openshift.io",
        "/apis/image.openshift.io/v1",
        "/openapi/v3",
        "/version",
    ] {
        assert_eq!(
            attrs(Method::GET, path, ""),
            Attributes::NonResource {
                verb: "get".into(),
                path: path.into()
            }
        );
    }
}

#[test]
fn refusals_are_worded_as_kube_apiserver_words_them() {
    let user = "system:serviceaccount:imagegate-system:imagegate-source";
    assert_eq!(
        res("patch", "imagestreams", "", "ds", "nb").forbidden_message(user, ""),
        "imagestreams.image.openshift.io \"nb\" is forbidden: User \"system:serviceaccount:imagegate-system:imagegate-source\" cannot patch resource \"imagestreams\" in API group \"image.openshift.io\" in the namespace \"ds\""
    );
    assert_eq!(
        res("list", "imagestreams", "", "", "").forbidden_message(user, "no RBAC policy matched"),
        "imagestreams.image.openshift.io is forbidden: User \"system:serviceaccount:imagegate-system:imagegate-source\" cannot list resource \"imagestreams\" in API group \"image.openshift.io\" at the cluster scope: no RBAC policy matched"
    );
    assert_eq!(
        Attributes::NonResource {
            verb: "get".into(),
            path: "/metrics".into()
        }
        .forbidden_message("system:anonymous", ""),
        "forbidden: User \"system:anonymous\" cannot get path \"/metrics\""
    );
}

#[test]
fn a_review_names_the_user_and_the_attributes() {
    let user = User {
        name: "u".into(),
        groups: vec!["g".into()],
        extra: Default::default(),
    };
    let spec = res("get", "imagestreams", "", "ds", "nb").review_spec(&user);
    assert_eq!(spec["user"], "u");
    assert_eq!(spec["groups"], json!(["g"]));
    assert_eq!(
        spec["resourceAttributes"],
        json!({"verb": "get", "group": "image.openshift.io", "version": "v1", "resource": "imagestreams", "subresource": "", "namespace": "ds", "name": "nb"})
    );
    let spec = Attributes::NonResource {
        verb: "get".into(),
        path: "/apis".into(),
    }
    .review_spec(&user);
    assert_eq!(
        spec["nonResourceAttributes"],
        json!({"verb": "get", "path": "/apis"})
    );
}
