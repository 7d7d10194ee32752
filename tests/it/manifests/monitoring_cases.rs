//! Broken monitoring manifests, one way per case, each with the problem [`super::monitoring`]
//! must report; [`super::cases`] runs them with its own.

use serde_json::{Value, json};

use super::cases::{By, Case};
use super::model::Manifests;

fn rule(m: &mut Manifests, i: usize) -> &mut Value {
    &mut m.first_mut("PrometheusRule", "config/monitoring")["spec"]["groups"][0]["rules"][i]
}

fn dashboard_target(m: &mut Manifests, panel: usize) -> &mut Value {
    &mut m.first_mut("", "config/monitoring/dashboard")["panels"][panel]["targets"][0]
}

fn edit(v: &mut Value, from: &str, to: &str) {
    let text = v.as_str().expect("a string to edit");
    assert!(text.contains(from), "{from:?} is not in {text:?}");
    *v = json!(text.replace(from, to));
}

pub const CASES: &[Case] = &[
    Case {
        name: "an alert on a metric the programs do not export",
        by: By::Check,
        breaks: |m| edit(&mut rule(m, 0)["expr"], "queue_depth", "queue_size"),
        expect: &[
            "PrometheusRule/imagegate",
            "`imagegate_source_queue_size` is neither exported",
        ],
    },
    Case {
        name: "an alert that groups by a label its series lack",
        by: By::Check,
        breaks: |m| edit(&mut rule(m, 9)["expr"], "by (kind)", "by (reason)"),
        expect: &["rules[9].expr", "groups by `reason`"],
    },
    Case {
        name: "an alert annotation naming a label the expression drops",
        by: By::Check,
        breaks: |m| {
            *rule(m, 0).pointer_mut("/annotations/summary").unwrap() = json!("{{ $labels.kind }}")
        },
        expect: &["annotations.summary", "`$labels.kind`"],
    },
    Case {
        name: "a PromQL expression with an unclosed bracket",
        by: By::Check,
        breaks: |m| edit(&mut rule(m, 3)["expr"], "[30m]))", "[30m])"),
        expect: &["rules[3].expr", "unclosed left parenthesis"],
    },
    Case {
        name: "a dashboard query on a label the metric does not have",
        by: By::Check,
        breaks: |m| edit(&mut dashboard_target(m, 0)["expr"], "type=", "kind="),
        expect: &["dashboard.json", "has no label `kind`"],
    },
    Case {
        name: "a dashboard query on an event type the source never sends",
        by: By::Check,
        breaks: |m| {
            edit(
                &mut dashboard_target(m, 0)["expr"],
                "importfailed",
                "importfail",
            )
        },
        expect: &["dashboard.json", "the code never sets that value"],
    },
    Case {
        name: "a dashboard legend naming a label the query drops",
        by: By::Check,
        breaks: |m| dashboard_target(m, 1)["legendFormat"] = json!("{{type}}"),
        expect: &["panels[1].targets[0].legendFormat", "`{{type}}`"],
    },
    Case {
        name: "a metrics Service whose targetPort is not the container's metrics port",
        by: By::Check,
        breaks: |m| {
            m.first_mut("Service", "config")["spec"]["ports"][0]["targetPort"] = json!(9090)
        },
        expect: &[
            "Service/imagegate-source-metrics",
            "not the container's `metrics` port",
        ],
    },
    Case {
        name: "a metrics Service that selects no Deployment",
        by: By::Check,
        breaks: |m| {
            m.first_mut("Service", "config")["spec"]["selector"]["app.kubernetes.io/component"] =
                json!("sauce")
        },
        expect: &["Deployment/imagegate-source", "0 Services select"],
    },
    Case {
        name: "a ServiceMonitor that does not select the controller's Service",
        by: By::Check,
        breaks: |m| {
            m.first_mut("ServiceMonitor", "config")["spec"]["selector"]["matchExpressions"][0]["values"] =
                json!(["source"])
        },
        expect: &[
            "ServiceMonitor/imagegate",
            "does not select Service/imagegate-controller-metrics",
        ],
    },
    Case {
        name: "a ServiceMonitor endpoint on a port the Services lack",
        by: By::Check,
        breaks: |m| {
            m.first_mut("ServiceMonitor", "config")["spec"]["endpoints"][0]["port"] = json!("http")
        },
        expect: &["spec.endpoints[0].port", "is not a port of Service/"],
    },
    Case {
        name: "a ServiceMonitor field prometheus-operator's CRD would prune",
        by: By::Schema,
        breaks: |m| {
            m.first_mut("ServiceMonitor", "config")["spec"]["endpoints"][0]["intervall"] =
                json!("30s")
        },
        expect: &["ServiceMonitor/imagegate", "intervall: unknown field"],
    },
    Case {
        name: "a PrometheusRule `for` that is not a duration",
        by: By::Schema,
        breaks: |m| rule(m, 0)["for"] = json!("15 minutes"),
        expect: &["PrometheusRule/imagegate", "'15 minutes' does not match"],
    },
];
