//! Sink resolution over the shapes real objects have: a Knative Broker's status (both
//! `address` and `addresses`, as eventing's Broker reconciler writes them), a Tekton
//! EventListener's (`status.address.url` only, with the listener's port 8080, as triggers'
//! `EventListenerStatus.SetAddress` writes it), a Knative Service's, and a core Service, which
//! has no address and is special-cased.

use serde_json::{Value, json};

use super::resolve::*;
use crate::adapter::crd::status::reason;
use crate::adapter::crd::{Destination, KReference};

const BROKER_URL: &str = "http://broker-ingress.knative-eventing.svc.cluster.local/ds/default";

fn broker() -> Value {
    json!({
        "apiVersion": "eventing.knative.dev/v1", "kind": "Broker",
        "metadata": {"name": "default", "namespace": "ds"},
        "spec": {"config": {"apiVersion": "v1", "kind": "ConfigMap", "name": "config-br-default-channel", "namespace": "knative-eventing"}},
        "status": {
            "address": {"name": "http", "url": BROKER_URL},
            "addresses": [{"name": "http", "url": BROKER_URL}],
            "annotations": {"knative.dev/channelAPIVersion": "messaging.knative.dev/v1", "knative.dev/channelKind": "InMemoryChannel"},
            "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2026-12-01T10:00:00Z"}],
            "observedGeneration": 1
        }
    })
}

fn event_listener() -> Value {
    json!({
        "apiVersion": "triggers.tekton.dev/v1beta1", "kind": "EventListener",
        "metadata": {"name": "imagegate", "namespace": "ds"},
        "spec": {"serviceAccountName": "imagegate-triggers", "triggers": [{"triggerRef": "promote"}]},
        "status": {
            "address": {"url": "http://el-imagegate.ds.svc.cluster.local:8080"},
            "configuration": {"generatedName": "el-imagegate"},
            "conditions": [{"type": "Ready", "status": "True"}]
        }
    })
}

fn reference(api_version: &str, kind: &str, name: &str) -> KReference {
    KReference {
        api_version: api_version.into(),
        kind: kind.into(),
        name: name.into(),
        namespace: None,
    }
}

fn to(r: KReference) -> Destination {
    Destination {
        r#ref: Some(r),
        ..Destination::default()
    }
}

/// Plans `dest` for a source in `ds`, then resolves it over `object`.
fn resolve_over(dest: &Destination, object: Option<&Value>) -> Result<Resolved, Unresolved> {
    match plan(dest, "ds")? {
        Plan::Uri(resolved) => Ok(resolved),
        Plan::Read(target) => resolve(dest, &target, object, DEFAULT_CLUSTER_DOMAIN),
    }
}

fn url_of(dest: &Destination, object: Option<&Value>) -> String {
    resolve_over(dest, object).unwrap().url
}

#[test]
fn a_broker_resolves_to_its_first_address_in_the_sources_namespace() {
    let dest = to(reference("eventing.knative.dev/v1", "Broker", "default"));
    let Plan::Read(target) = plan(&dest, "ds").unwrap() else {
        panic!("a ref is read")
    };
    let gvk = target.gvk();
    assert_eq!(
        (
            gvk.group.as_str(),
            gvk.version.as_str(),
            target.plural.as_str(),
            target.namespace.as_str()
        ),
        ("eventing.knative.dev", "v1", "brokers", "ds")
    );
    assert_eq!(url_of(&dest, Some(&broker())), BROKER_URL);
}

#[test]
fn addresses_come_before_address() {
    let mut tls = broker();
    tls["status"]["addresses"] = json!([
        {"name": "https", "url": "https://broker-ingress.knative-eventing.svc.cluster.local/ds/default", "CACerts": "PEM", "audience": "broker-aud"},
        {"name": "http", "url": BROKER_URL}
    ]);
    let dest = to(reference("eventing.knative.dev/v1", "Broker", "default"));
    let resolved = resolve_over(&dest, Some(&tls)).unwrap();
    assert_eq!(
        resolved,
        Resolved {
            url: "https://broker-ingress.knative-eventing.svc.cluster.local/ds/default".into(),
            ca_certs: Some("PEM".into()),
            audience: Some("broker-aud".into()),
        }
    );
    let mut overridden = dest.clone();
    overridden.ca_certs = Some("MINE".into());
    overridden.audience = Some("my-aud".into());
    let resolved = resolve_over(&overridden, Some(&tls)).unwrap();
    assert_eq!(
        (resolved.ca_certs.as_deref(), resolved.audience.as_deref()),
        (Some("MINE"), Some("my-aud")),
        "the destination's CACerts and audience take precedence"
    );
}

#[test]
fn an_event_listener_resolves_to_its_address_with_its_port() {
    let dest = to(reference(
        "triggers.tekton.dev/v1beta1",
        "EventListener",
        "imagegate",
    ));
    assert_eq!(
        url_of(&dest, Some(&event_listener())),
        "http://el-imagegate.ds.svc.cluster.local:8080"
    );
}

#[test]
fn a_knative_service_is_an_addressable_not_a_core_service() {
    let ksvc = json!({
        "apiVersion": "serving.knative.dev/v1", "kind": "Service",
        "metadata": {"name": "display", "namespace": "ds"},
        "status": {"address": {"url": "http://display.ds.svc.cluster.local"}, "url": "https://display.ds.example.com"}
    });
    let dest = to(reference("serving.knative.dev/v1", "Service", "display"));
    assert_eq!(
        url_of(&dest, Some(&ksvc)),
        "http://display.ds.svc.cluster.local"
    );
}

#[test]
fn a_core_service_is_its_cluster_local_name_without_a_port() {
    let service = json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "display", "namespace": "apps"},
        "spec": {"ports": [{"name": "http", "port": 8080, "targetPort": 8080}]}
    });
    let mut r = reference("v1", "Service", "display");
    r.namespace = Some("apps".into());
    let dest = to(r);
    // As Knative: the Service's ports are not read; the URL has none, so port 80.
    assert_eq!(
        url_of(&dest, Some(&service)),
        "http://display.apps.svc.cluster.local"
    );
    let Plan::Read(target) = plan(&dest, "ds").unwrap() else {
        panic!("a Service is read: it must exist")
    };
    assert_eq!(
        resolve(&dest, &target, Some(&service), "corp.internal")
            .unwrap()
            .url,
        "http://display.apps.svc.corp.internal"
    );
    let mut tls = dest.clone();
    tls.ca_certs = Some("PEM".into());
    let resolved = resolve_over(&tls, Some(&service)).unwrap();
    assert_eq!(resolved.url, "https://display.apps.svc.cluster.local");
    assert_eq!(resolved.ca_certs.as_deref(), Some("PEM"));
}

#[test]
fn a_relative_uri_is_resolved_against_the_objects_address() {
    let mut dest = to(reference(
        "triggers.tekton.dev/v1beta1",
        "EventListener",
        "imagegate",
    ));
    dest.uri = Some("/images".into());
    assert_eq!(
        url_of(&dest, Some(&event_listener())),
        "http://el-imagegate.ds.svc.cluster.local:8080/images"
    );
    let mut dest = to(reference("v1", "Service", "display"));
    dest.uri = Some("hooks/x?team=a".into());
    assert_eq!(
        url_of(&dest, Some(&json!({"kind": "Service"}))),
        "http://display.ds.svc.cluster.local/hooks/x?team=a"
    );
}

#[test]
fn a_uri_alone_is_the_sink_with_the_destinations_ca_certs() {
    let dest = Destination {
        uri: Some("https://hooks.example.com:8443/in".into()),
        ca_certs: Some("PEM".into()),
        ..Destination::default()
    };
    assert_eq!(
        plan(&dest, "ds").unwrap(),
        Plan::Uri(Resolved {
            url: "https://hooks.example.com:8443/in".into(),
            ca_certs: Some("PEM".into()),
            audience: None,
        })
    );
}

fn reason_of(dest: &Destination, object: Option<&Value>) -> (&'static str, String) {
    let e = resolve_over(dest, object).unwrap_err();
    (e.reason, e.message)
}

#[test]
fn an_unresolvable_sink_says_why_and_what_to_change() {
    let broker_ref = || to(reference("eventing.knative.dev/v1", "Broker", "default"));
    let cases: Vec<(Destination, Option<Value>, &str, &str)> = vec![
        (
            Destination::default(),
            None,
            reason::SINK_INVALID,
            "neither ref nor uri",
        ),
        (
            Destination {
                uri: Some("/relative".into()),
                ..Destination::default()
            },
            None,
            reason::SINK_INVALID,
            "not an absolute URL with a host",
        ),
        (
            Destination {
                uri: Some("http://x/".into()),
                ..broker_ref()
            },
            Some(broker()),
            reason::SINK_INVALID,
            "only a URI relative to the object's address",
        ),
        (
            to(reference("eventing.knative.dev/v1", "Broker", "")),
            None,
            reason::SINK_INVALID,
            "spec.sink.ref.name is empty",
        ),
        (
            broker_ref(),
            None,
            reason::SINK_NOT_FOUND,
            "names Broker ds/default (eventing.knative.dev/v1), which does not exist",
        ),
        (
            broker_ref(),
            Some(
                json!({"kind": "Broker", "status": {"conditions": [{"type": "Ready", "status": "Unknown"}]}}),
            ),
            reason::SINK_NOT_ADDRESSABLE,
            "has no address",
        ),
        (
            broker_ref(),
            Some(json!({"status": {"address": {"name": "http"}}})),
            reason::SINK_NOT_ADDRESSABLE,
            "has an address without a url",
        ),
        (
            broker_ref(),
            Some(json!({"status": {"addresses": [], "address": {"url": "/no-host"}}})),
            reason::SINK_NOT_ADDRESSABLE,
            "which has no host",
        ),
    ];
    for (dest, object, want_reason, want_message) in cases {
        let (reason, message) = reason_of(&dest, object.as_ref());
        assert_eq!(reason, want_reason, "{message}");
        assert!(
            message.contains(want_message),
            "{message:?} lacks {want_message:?}"
        );
    }
}

#[test]
fn plurals_are_guessed_as_knative_guesses_them() {
    for (kind, plural) in [
        ("Broker", "brokers"),
        ("EventListener", "eventlisteners"),
        ("Service", "services"),
        ("Ingress", "ingresses"),
        ("Gateway", "gatewaies"),
        ("Endpoints", "endpoints"),
        ("", ""),
    ] {
        assert_eq!(guess_plural(kind), plural, "{kind}");
    }
}

#[test]
fn a_ref_to_another_namespace_is_refused_before_any_read_unless_the_platform_allows_it() {
    let dest = Destination {
        r#ref: Some(KReference {
            api_version: "eventing.knative.dev/v1".into(),
            kind: "Broker".into(),
            name: "default".into(),
            namespace: Some("ml".into()),
        }),
        ..Default::default()
    };
    let Plan::Read(target) = plan(&dest, "ds").unwrap() else {
        panic!("a ref is read");
    };
    let refused = other_namespace(&target, "ds", false).unwrap();
    assert_eq!(refused.reason, reason::SINK_NOT_ALLOWED);
    assert!(
        refused.message.contains("--allow-cross-namespace-sinks"),
        "{}",
        refused.message
    );
    assert_eq!(
        other_namespace(&target, "ds", true),
        None,
        "then the review decides"
    );
    assert_eq!(
        other_namespace(&target, "ml", false),
        None,
        "its own namespace"
    );
    let Plan::Read(own) = plan(
        &Destination {
            r#ref: Some(KReference {
                namespace: None,
                ..dest.r#ref.clone().unwrap()
            }),
            ..Default::default()
        },
        "ds",
    )
    .unwrap() else {
        panic!("a ref is read");
    };
    assert_eq!(
        other_namespace(&own, "ds", false),
        None,
        "defaulted to the source's"
    );
}

#[test]
fn a_ref_whose_api_version_is_not_group_slash_version_is_refused_before_anything_is_read() {
    // A tenant's apiVersion goes into the path the adapter reads with its own identity and into
    // the group its cross-namespace review asks about: dot segments or extra slashes would read
    // another path than the one reviewed.
    for bad in [
        "eventing.knative.dev/v1/../../../api/v1",
        "eventing.knative.dev/../v1",
        "a/b/c",
        "/v1",
        "eventing.knative.dev/",
        "Eventing.knative.dev/v1",
        "eventing..knative.dev/v1",
        "",
    ] {
        let dest = to(reference(bad, "Broker", "default"));
        match plan(&dest, "ds") {
            Err(e) => assert_eq!(e.reason, reason::SINK_INVALID, "{bad:?}: {}", e.message),
            Ok(_) => panic!("{bad:?} was planned to be read"),
        }
    }
    for good in [
        "v1",
        "eventing.knative.dev/v1",
        "serving.knative.dev/v1beta1",
    ] {
        assert!(
            plan(&to(reference(good, "Broker", "default")), "ds").is_ok(),
            "{good:?}"
        );
    }
}
