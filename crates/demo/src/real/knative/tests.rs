use serde_json::json;

use super::route::*;

const BROKER: &str = include_str!("../../../../../knative/200-broker.yaml");
const TRIGGER: &str = include_str!("../../../../../knative/210-trigger.yaml");

fn yaml(text: &str) -> serde_json::Value {
    serde_norway::from_str(text).unwrap()
}

#[test]
fn the_shipped_broker_gets_the_default_channel_config_and_its_dead_letter_namespace() {
    let mut broker = yaml(BROKER);
    let before = broker.clone();
    webhook_defaults(&mut broker);
    assert_eq!(
        broker["spec"]["config"],
        json!({"apiVersion": "v1", "kind": "ConfigMap", "name": "config-br-default-channel",
               "namespace": "knative-eventing"})
    );
    assert_eq!(
        broker["spec"]["delivery"]["deadLetterSink"]["ref"]["namespace"],
        "imagegate-system"
    );
    // Nothing else moves.
    let mut back = broker.clone();
    back["spec"].as_object_mut().unwrap().remove("config");
    back["spec"]["delivery"]["deadLetterSink"]["ref"]
        .as_object_mut()
        .unwrap()
        .remove("namespace");
    assert_eq!(back, before);
}

#[test]
fn the_shipped_trigger_gets_its_broker_label_and_keeps_its_uri_subscriber() {
    let mut trigger = yaml(TRIGGER);
    webhook_defaults(&mut trigger);
    assert_eq!(
        trigger["metadata"]["labels"]["eventing.knative.dev/broker"],
        "imagegate"
    );
    assert_eq!(
        trigger["metadata"]["labels"]["app.kubernetes.io/name"],
        "imagegate"
    );
    assert_eq!(
        trigger["spec"]["subscriber"],
        json!({"uri": "http://el-imagegate.notebooks.svc.cluster.local:8080"})
    );
    assert_eq!(
        trigger["spec"]["delivery"]["deadLetterSink"]["ref"]["namespace"],
        "imagegate-system"
    );
}

#[test]
fn what_is_set_stays_and_other_kinds_are_left_alone() {
    let mut broker = json!({
        "apiVersion": "eventing.knative.dev/v1", "kind": "Broker",
        "metadata": {"name": "b", "namespace": "n"},
        "spec": {"config": {"kind": "ConfigMap", "name": "mine", "namespace": "x"},
                 "delivery": {"deadLetterSink": {"ref": {"kind": "Service", "name": "d", "namespace": "o"}}}},
    });
    let before = broker.clone();
    webhook_defaults(&mut broker);
    assert_eq!(broker, before);
    let mut service = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}});
    let before = service.clone();
    webhook_defaults(&mut service);
    assert_eq!(service, before);
}

fn line(host: &str, path: &str, status: u16, id: &str, received: f64) -> String {
    json!({"method": "POST", "host": host, "path": path, "status": status, "ce_id": id,
           "ce_type": "dev.imagegate.imagestreamtag.updated", "received": received,
           "answered": received + 0.5, "upstream": "unix:/x"})
    .to_string()
}

fn route() -> [Expected; 4] {
    expected_route(
        ("imagegate-system", "imagegate"),
        "imagegate-notebooks",
        "el-imagegate.notebooks.svc.cluster.local:8080",
    )
}

/// The four hops of event `e1` as the proxy logs them: each answered after the next one, so the
/// file holds them in reverse; and the reply the EventListener sent (another id) going round.
fn log() -> String {
    [
        line(
            "el-imagegate.notebooks.svc.cluster.local:8080",
            "/",
            202,
            "e1",
            4.0,
        ),
        line(
            "broker-filter.knative-eventing.svc.cluster.local",
            "/triggers/imagegate-system/imagegate-notebooks/u1",
            202,
            "e1",
            3.0,
        ),
        line(
            "imagegate-kne-trigger-kn-channel.imagegate-system.svc.cluster.local",
            "/",
            202,
            "e1",
            2.0,
        ),
        line(
            "broker-ingress.knative-eventing.svc.cluster.local",
            "/imagegate-system/imagegate",
            202,
            "e1",
            1.0,
        ),
        line(
            "broker-ingress.knative-eventing.svc.cluster.local",
            "/imagegate-system/imagegate",
            202,
            "reply",
            4.1,
        ),
    ]
    .join("\n")
}

#[test]
fn the_four_hops_of_an_event_are_found_in_order_and_pass() {
    let parsed = parse_log(&log()).unwrap();
    assert_eq!(parsed.len(), 5);
    let hops = hops_of(&parsed, "e1");
    let hosts: Vec<&str> = hops.iter().map(|h| h.host.as_str()).collect();
    assert_eq!(
        hosts,
        [
            "broker-ingress.knative-eventing.svc.cluster.local",
            "imagegate-kne-trigger-kn-channel.imagegate-system.svc.cluster.local",
            "broker-filter.knative-eventing.svc.cluster.local",
            "el-imagegate.notebooks.svc.cluster.local:8080",
        ]
    );
    assert_eq!(check_route("e1", &hops, &route()), Ok(()));
}

#[test]
fn a_missing_extra_refused_or_misrouted_hop_fails() {
    let parsed = parse_log(&log()).unwrap();
    let hops = hops_of(&parsed, "e1");
    // The EventListener never reached.
    assert!(matches!(
        check_route("e1", &hops[..3], &route()),
        Err(RouteError::Count {
            got: 3,
            want: 4,
            ..
        })
    ));
    // Delivered twice.
    let mut twice = hops.clone();
    twice.push(hops[3].clone());
    assert!(matches!(
        check_route("e1", &twice, &route()),
        Err(RouteError::Count { got: 5, .. })
    ));
    // The filter refused it.
    let mut refused = hops.clone();
    refused[2].status = 500;
    assert!(matches!(
        check_route("e1", &refused, &route()),
        Err(RouteError::Hop { number: 3, .. })
    ));
    // Straight to the EventListener, past the Broker: the first hop is wrong.
    let mut straight = hops.clone();
    straight.swap(0, 3);
    assert!(matches!(
        check_route("e1", &straight, &route()),
        Err(RouteError::Hop { number: 1, .. })
    ));
    assert!(hops_of(&parsed, "nope").is_empty());
}

#[test]
fn a_line_that_is_not_a_request_is_an_error_naming_it() {
    let text = format!("{}\nnot json\n", line("h", "/", 202, "e", 1.0));
    let e = parse_log(&text).unwrap_err();
    assert!(
        e.to_string().starts_with("line 2 of the network log"),
        "{e}"
    );
    assert_eq!(parse_log("\n").unwrap(), Vec::new());
}

#[test]
fn the_event_id_is_read_from_the_name_the_trigger_template_gives_the_run() {
    let run = |id: &str| serde_json::json!({"metadata": {"name": "imagegate-77", "annotations": {"imagegate.dev/event-id": id}}});
    assert_eq!(event_id_of_run(&run("4f2a")), Some("4f2a"));
    assert_eq!(event_id_of_run(&run("")), None, "a re-drive's");
    assert_eq!(
        event_id_of_run(&serde_json::json!({"metadata": {"name": "by-hand-x"}})),
        None
    );
}

#[test]
fn another_triggers_filter_hop_is_not_part_of_the_route() {
    let hop = |path: &str| Hop {
        method: "POST".into(),
        host: "broker-filter.knative-eventing.svc.cluster.local".into(),
        path: path.into(),
        status: 200,
        ce_id: "x".into(),
        ce_type: "t".into(),
        received: 0.0,
    };
    let kept = for_trigger(
        vec![
            hop("/triggers/imagegate-system/imagegate-notebooks/u1"),
            hop("/triggers/imagegate-system/imagegate-verdicts-promoted/u2"),
            hop("/imagegate-system/imagegate"),
        ],
        "imagegate-system",
        "imagegate-notebooks",
    );
    let paths: Vec<&str> = kept.iter().map(|h| h.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "/triggers/imagegate-system/imagegate-notebooks/u1",
            "/imagegate-system/imagegate"
        ]
    );
}
