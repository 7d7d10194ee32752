//! The alerts of the PrometheusRule that ships (`config/monitoring/200-prometheusrule.yaml`) and
//! the table of docs/operations.md that explains them agree: the same alerts, each with the same
//! severity, `for` and expression. The table is what operators read; the rule is what fires.

use std::collections::BTreeMap;
use std::path::Path;

use super::{ROOT, shipped};

/// (severity, for, expression) of each alert; `for` is "—" when the alert has none.
type Alerts = BTreeMap<String, (String, String, String)>;

fn from_rule() -> Alerts {
    let m = shipped();
    let rule = m
        .docs
        .iter()
        .find(|d| d.kind() == "PrometheusRule" && d.file.starts_with("config/monitoring/"))
        .expect("a PrometheusRule in config/monitoring/");
    let mut out = Alerts::new();
    for group in rule.spec()["groups"].as_array().into_iter().flatten() {
        for r in group["rules"].as_array().into_iter().flatten() {
            let text = |v: &serde_json::Value| v.as_str().unwrap_or_default().to_string();
            let alert = text(&r["alert"]);
            let r#for = r["for"].as_str().unwrap_or("—").to_string();
            out.insert(
                alert,
                (text(&r["labels"]["severity"]), r#for, text(&r["expr"])),
            );
        }
    }
    out
}

/// The rows of the table under `### Alerts`: `| `Name` | severity | for | `expr` | ... |`.
fn from_docs() -> Alerts {
    let text = std::fs::read_to_string(Path::new(ROOT).join("docs/operations.md")).unwrap();
    let section = text
        .split_once("### Alerts\n")
        .expect("docs/operations.md has a section `### Alerts`")
        .1;
    let section = section.split("\n#").next().unwrap_or_default();
    let mut out = Alerts::new();
    for line in section.lines().filter(|l| l.starts_with("| `")) {
        let cells: Vec<&str> = line.split(" | ").map(str::trim).collect();
        let [name, severity, r#for, expr, ..] = cells[..] else {
            panic!("a row of the alerts table with fewer than 5 cells: {line}");
        };
        // A `|` in a cell is written `\|` (Markdown tables split on bare ones).
        let unquote = |s: &str| s.trim_matches(['|', ' ', '`']).replace("\\|", "|");
        out.insert(
            unquote(name),
            (severity.to_string(), r#for.to_string(), unquote(expr)),
        );
    }
    out
}

#[test]
fn the_alerts_table_of_operations_md_is_the_shipped_prometheusrule() {
    let (rule, docs) = (from_rule(), from_docs());
    assert!(!rule.is_empty(), "the PrometheusRule has no alerts");
    for (alert, in_rule) in &rule {
        assert_eq!(
            docs.get(alert),
            Some(in_rule),
            "docs/operations.md's table and config/monitoring/200-prometheusrule.yaml differ on {alert} \
             (severity, for, expression)"
        );
    }
    for alert in docs.keys() {
        assert!(
            rule.contains_key(alert),
            "docs/operations.md lists {alert}, which the PrometheusRule does not have"
        );
    }
}
