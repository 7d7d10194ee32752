//! Every rule of `config/`'s Roles and ClusterRoles, one verb at a time, against the real
//! authorizer: the call a program makes with that verb succeeds as its ServiceAccount (a
//! TokenRequest token), and fails with kube-apiserver's 403 `Forbidden`, naming that verb and
//! resource, once that verb alone is taken out of the role on the server; then the role is put
//! back and the call succeeds again. So each verb is sufficient and needed. The table
//! ([`table`]) names each rule and its call; a verb of `config/` with no row, or a row with no
//! verb in `config/`, fails the test, so a new rule cannot go untested. (`tests/it/rbac.rs`
//! shows, on the emulator, that the programs make these calls.)

mod table;

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::cluster::{CONTROLLER_SA, ControlPlane, SOURCE_SA};
use crate::support::rbac::Policy;
use table::{Body, JSON, Row, SYS, fixtures, rows};

/// What the server answered a call: its status code and body.
struct Answer {
    code: u16,
    body: String,
}

impl Answer {
    fn ok(&self) -> bool {
        (200..300).contains(&self.code)
    }

    /// Whether this is the authorizer's refusal of exactly this row's verb on its resource:
    /// a 403 `Status` with reason `Forbidden` whose message names the user, the verb, the
    /// resource (with its subresource) and the group, as kube-apiserver words it.
    fn refuses(&self, r: &Row) -> bool {
        let status: Value = serde_json::from_str(&self.body).unwrap_or_default();
        let message = status["message"].as_str().unwrap_or_default();
        let wanted = format!(
            "User \"{}\" cannot {} resource \"{}\" in API group \"{}\"",
            r.user, r.verb, r.resource, r.group
        );
        self.code == 403
            && status["kind"] == "Status"
            && status["reason"] == "Forbidden"
            && message.contains(&wanted)
    }

    /// The code and the Status message, for a failure.
    fn show(&self) -> String {
        let status: Value = serde_json::from_str(&self.body).unwrap_or_default();
        match status["message"].as_str() {
            Some(m) => format!("{} {m}", self.code),
            None => format!(
                "{} {}",
                self.code,
                self.body.chars().take(300).collect::<String>()
            ),
        }
    }
}

/// Makes the row's call as its user.
async fn call(cp: &ControlPlane, http: &reqwest::Client, token: &str, r: &Row) -> Answer {
    if let Some(obj) = &r.before {
        // Already there from an earlier attempt is as good.
        let _ = cp.pipe(&["create", "-f", "-"], &obj.to_string());
    }
    let url = format!("{}{}", cp.server(), r.path);
    let method = reqwest::Method::from_bytes(r.method.as_bytes()).unwrap();
    let mut req = http.request(method, url).bearer_auth(token);
    match &r.body {
        Body::None => {}
        Body::Json(ct, v) => req = req.header("Content-Type", *ct).body(v.to_string()),
        Body::Current => {
            let current = cp.ok(&["get", "--raw", r.path]);
            req = req.header("Content-Type", JSON).body(current);
        }
    }
    let resp = req.send().await.unwrap();
    let code = resp.status().as_u16();
    Answer {
        code,
        body: resp.text().await.unwrap_or_default(),
    }
}

/// A role as read from the server, ready to be written back with `kubectl replace`.
fn writable(role: &Value) -> Value {
    let mut role = role.clone();
    for k in [
        "resourceVersion",
        "uid",
        "managedFields",
        "creationTimestamp",
    ] {
        role["metadata"].as_object_mut().unwrap().remove(k);
    }
    role
}

/// The role `r` names, as the server holds it, without its verb (and without the rule, when
/// that was its only verb).
fn without_verb(role: &Value, r: &Row) -> Value {
    let mut role = writable(role);
    let names: Vec<Value> = r.names.iter().map(|n| json!(n)).collect();
    let rules = role["rules"].as_array_mut().unwrap();
    let i = rules
        .iter()
        .position(|rule| {
            rule["apiGroups"] == json!([r.group])
                && rule["resources"] == json!([r.resource])
                && rule["resourceNames"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default()
                    == names
                && rule["verbs"].as_array().unwrap().contains(&json!(r.verb))
        })
        .unwrap_or_else(|| panic!("{:?}: no rule for {} {}", r.role, r.verb, r.resource));
    let verbs = rules[i]["verbs"].as_array_mut().unwrap();
    verbs.retain(|v| v != r.verb);
    if verbs.is_empty() {
        rules.remove(i);
    }
    role
}

/// Repeats the row's call until the answer satisfies `want` (RBAC changes reach the
/// authorizer through its informers, a moment after the write) or 20 s passed; the last answer.
async fn until(
    cp: &ControlPlane,
    http: &reqwest::Client,
    token: &str,
    r: &Row,
    want: impl Fn(&Answer) -> bool,
) -> Answer {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let answer = call(cp, http, token, r).await;
        if want(&answer) || Instant::now() > deadline {
            return answer;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Fails unless the rows are exactly the verbs `config/` grants the two ServiceAccounts, with
/// `ds` opted in by tekton/330.
fn assert_table_is_config(rows: &[Row]) {
    let policy = Policy::installed(&["ds"]);
    let mut granted: Vec<String> = Vec::new();
    for sa in [SOURCE_SA, CONTROLLER_SA] {
        for g in policy.grants(sa) {
            for v in &g.rule.verbs {
                let (groups, resources) = (g.rule.api_groups.join(","), g.rule.resources.join(","));
                let names = &g.rule.resource_names;
                granted.push(format!("{sa} {groups} {resources} {names:?} {}", v.name));
            }
        }
    }
    let mut tabled: Vec<String> = rows
        .iter()
        .map(|r| {
            format!(
                "{} {} {} {:?} {}",
                r.user, r.group, r.resource, r.names, r.verb
            )
        })
        .collect();
    granted.sort();
    tabled.sort();
    assert_eq!(tabled, granted, "the table and the verbs of config/ differ");
}

/// Takes the row's verb out of its role, calls, puts the role back, calls again; what was
/// wrong, if anything.
async fn remove_and_restore(
    cp: &ControlPlane,
    http: &reqwest::Client,
    token: &str,
    r: &Row,
) -> Vec<String> {
    let what = format!(
        "{} {}/{} {} {}: {} {}",
        r.role.0, r.role.1, r.role.2, r.verb, r.resource, r.method, r.path
    );
    let granted = call(cp, http, token, r).await;
    if !granted.ok() {
        return vec![format!("{what}: {} with the shipped roles", granted.show())];
    }
    let (kind, ns, name) = r.role;
    let mut get = vec!["get", kind, name, "-o", "json"];
    if !ns.is_empty() {
        get.extend(["-n", ns]);
    }
    let role: Value = serde_json::from_str(&cp.ok(&get)).unwrap();
    let (ok, out) = cp.pipe(&["replace", "-f", "-"], &without_verb(&role, r).to_string());
    assert!(ok, "{out}");
    let refused = until(cp, http, token, r, |a| a.refuses(r)).await;
    let (ok, out) = cp.pipe(&["replace", "-f", "-"], &writable(&role).to_string());
    assert!(ok, "{out}");
    let restored = until(cp, http, token, r, Answer::ok).await;
    let mut problems = Vec::new();
    if !refused.refuses(r) {
        problems.push(format!("{what}: without the verb, {}", refused.show()));
    }
    if !restored.ok() {
        problems.push(format!(
            "{what}: after the role was put back, {}",
            restored.show()
        ));
    }
    // The refusals, for docs/testing.md (`--no-capture` shows them).
    println!("{what}: {}", refused.show());
    problems
}

#[tokio::test]
async fn every_verb_of_config_is_sufficient_and_needed_on_the_real_authorizer() {
    let rows = rows();
    assert_table_is_config(&rows);
    let cp = ControlPlane::up();
    cp.install();
    fixtures(&cp).await;

    imagegate::runtime::tls::install_crypto_provider();
    let ca = std::fs::read(cp.ca_file()).unwrap();
    let http = reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(&ca).unwrap())
        .build()
        .unwrap();
    let source = cp.token(SYS, "imagegate-source");
    let controller = cp.token(SYS, "imagegate-controller");
    let mut problems = Vec::new();
    for r in &rows {
        let token = if r.user == SOURCE_SA {
            &source
        } else {
            &controller
        };
        problems.extend(remove_and_restore(&cp, &http, token, r).await);
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
