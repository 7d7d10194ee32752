//! Table tests of label selectors against kube's behaviour: parsing, matching, canonical form and
//! error messages.

use serde_json::json;

use super::*;

/// Labels of a table row.
type Pairs = &'static [(&'static str, &'static str)];

/// `metadata.labels` as an object carries them.
fn labels(pairs: &[(&str, &str)]) -> Value {
    Value::Object(
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), json!(v)))
            .collect(),
    )
}

fn matches(selector: &str, pairs: &[(&str, &str)]) -> bool {
    let parsed = LabelSelector::parse(selector).unwrap_or_else(|e| panic!("{selector:?}: {e}"));
    parsed.matches_value(Some(&labels(pairs)))
}

fn label_error(selector: &str) -> String {
    match LabelSelector::parse(selector) {
        Ok(parsed) => panic!("{selector:?} parsed as {parsed}"),
        Err(e) => e.to_string(),
    }
}

/// The objects of apiconformance.py `s3_list`, each also labelled `conformance-set=list`.
fn conformance_set() -> Vec<(&'static str, Value)> {
    let sets: &[(&str, Pairs)] = &[
        ("l0", &[("tier", "a"), ("env", "prod")]),
        ("l1", &[("tier", "b"), ("env", "dev")]),
        ("l2", &[("tier", "c")]),
        ("l3", &[("env", "prod")]),
        ("l4", &[]),
    ];
    sets.iter()
        .map(|(name, pairs)| {
            let mut l = labels(pairs);
            l["conformance-set"] = json!("list");
            (*name, l)
        })
        .collect()
}

#[test]
fn conformance_list_label_selectors_select_what_kube_selects() {
    let cases: [(&str, &str, &[&str]); 7] = [
        ("3.2", "tier=a", &["l0"]),
        ("3.2", "tier==a", &["l0"]),
        ("3.2", "tier!=a", &["l1", "l2", "l3", "l4"]),
        ("3.2", "env=prod,tier", &["l0"]),
        ("3.3", "tier in (a,c)", &["l0", "l2"]),
        ("3.4", "tier notin (a,c)", &["l1", "l3", "l4"]),
        ("3.5", "tier", &["l0", "l1", "l2"]),
    ];
    let more: [(&str, &str, &[&str]); 1] = [("3.6", "!tier", &["l3", "l4"])];
    for (id, selector, want) in cases.iter().chain(&more) {
        // The script always prefixes its own set, exactly like this.
        let query = format!("conformance-set=list,{selector}");
        let parsed = LabelSelector::parse(&query).unwrap();
        let got: Vec<&str> = conformance_set()
            .into_iter()
            .filter(|(_, l)| parsed.matches_value(Some(l)))
            .map(|(name, _)| name)
            .collect();
        assert_eq!(&got, want, "{id} {query:?}");
    }
}

#[test]
fn every_label_operator_matches_like_kube() {
    let cases: &[(&str, Pairs, bool)] = &[
        ("", &[("x", "y")], true),
        ("x=y", &[("x", "y")], true),
        ("x=y", &[("x", "z")], false),
        ("x=y", &[], false),
        ("x==y", &[("x", "y")], true),
        ("x=y,z=w", &[("x", "y"), ("z", "w")], true),
        ("x=y,z=w", &[("x", "w"), ("z", "w")], false),
        ("x!=y", &[("x", "z")], true),
        ("x!=y", &[("x", "y")], false),
        ("x!=y", &[], true),
        ("x in (a,b)", &[("x", "b")], true),
        ("x in (a,b)", &[("x", "c")], false),
        ("x in (a,b)", &[], false),
        ("x notin (a,b)", &[("x", "c")], true),
        ("x notin (a,b)", &[("x", "a")], false),
        ("x notin (a,b)", &[], true),
        ("x", &[("x", "")], true),
        ("x", &[("y", "z")], false),
        ("!x", &[("y", "z")], true),
        ("!x", &[("x", "z")], false),
        ("x=", &[("x", "")], true),
        ("x=", &[], false),
        ("notin=in", &[("notin", "in")], true),
        ("a in (x,notin,in)", &[("a", "in")], true),
        ("x in (a,),y", &[("x", ""), ("y", "1")], true),
        ("x notin (),y", &[("y", "")], true),
    ];
    for &(selector, pairs, want) in cases {
        assert_eq!(matches(selector, pairs), want, "{selector:?} on {pairs:?}");
    }
}

#[test]
fn not_equal_matches_objects_without_the_key() {
    assert!(matches("tier!=a", &[("env", "prod")]));
    assert!(matches("tier notin (a,c)", &[]));
}

#[test]
fn greater_and_less_than_compare_integers() {
    let cases: &[(&str, Pairs, bool)] = &[
        ("x>1", &[("x", "2")], true),
        ("x>1", &[("x", "1")], false),
        ("x<1", &[("x", "0")], true),
        ("x<1", &[("x", "2")], false),
        ("x>1", &[("x", "v2")], false),
        ("x>1", &[], false),
        ("x<10", &[("x", "9")], true),
    ];
    for &(selector, pairs, want) in cases {
        assert_eq!(matches(selector, pairs), want, "{selector:?} on {pairs:?}");
    }
}

#[test]
fn whitespace_is_tolerated_and_the_canonical_form_is_kubes() {
    let cases = [
        ("", ""),
        ("  tier = a ", "tier=a"),
        ("x= ,z= ", "x=,z="),
        ("\rx", "x"),
        ("a ", "a"),
        ("foo  in\t (abc)", "foo in (abc)"),
        ("x notin\n (abc)", "x notin (abc)"),
        ("x in ( b , a , b )", "x in (a,b)"),
        ("x notin ( )", "x notin ()"),
        ("x notin (, a)", "x notin (,a)"),
        ("x=a,a=x", "a=x,x=a"),
        ("x==a , ! y ,z!=b", "x==a,!y,z!=b"),
        ("x > 1,z<5", "x>1,z<5"),
        (
            "x notin (abc,,def),bar,z in (),w",
            "bar,w,x notin (,abc,def),z in ()",
        ),
        ("a in (x,y,notin, z,in)", "a in (in,notin,x,y,z)"),
    ];
    for (selector, canonical) in cases {
        let parsed: LabelSelector = selector.parse().unwrap();
        assert_eq!(parsed.to_string(), canonical, "{selector:?}");
        assert_eq!(
            LabelSelector::parse(canonical).unwrap(),
            parsed,
            "{canonical:?}"
        );
    }
}

#[test]
fn in_with_empty_parentheses_selects_the_empty_value_like_kube() {
    // kube's parser reads `()` as the set {""}, not as an error (TestSetSelectorParser).
    assert!(matches("x in ()", &[("x", "")]));
    assert!(!matches("x in ()", &[("x", "a")]));
    assert!(!matches("x in ()", &[]));
}

#[test]
fn prefixed_keys_are_accepted() {
    let cases: &[(&str, Pairs)] = &[
        (
            "app.kubernetes.io/name=notebook",
            &[("app.kubernetes.io/name", "notebook")],
        ),
        (
            "opendatahub.io/notebook-image",
            &[("opendatahub.io/notebook-image", "true")],
        ),
        (
            "this-is-a-dns.domain.com/key-with-dash",
            &[("this-is-a-dns.domain.com/key-with-dash", "")],
        ),
        ("0.1.2.domain/99 notin (10.10.100.1, tick.tack.clock)", &[]),
        ("!example.com/MyName", &[]),
    ];
    for &(selector, pairs) in cases {
        assert!(matches(selector, pairs), "{selector:?}");
    }
}

#[test]
fn invalid_label_selectors_fail_with_kubes_messages() {
    let name_rule = "must consist of alphanumeric characters, '-', '_' or '.', and must \
        start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or \
        '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
    let long = "a".repeat(64);
    let long_value = "z".repeat(64);
    let cases = [
        (
            "a in (b",
            "unable to parse requirement: found '', expected: ',' or ')'".to_string(),
        ),
        (
            "=x",
            "found '=', expected: !, identifier, or 'end of string'".into(),
        ),
        (
            "a=b=c",
            "found '=', expected: ',' or 'end of string'".into(),
        ),
        (
            "x==a==b",
            "found '==', expected: ',' or 'end of string'".into(),
        ),
        ("!x=a", "found '=', expected: ',' or 'end of string'".into()),
        ("x,,y", "found ',', expected: identifier after ','".into()),
        (
            ",x,y",
            "found ',', expected: !, identifier, or 'end of string'".into(),
        ),
        (
            "a in (xyz),",
            "found '', expected: identifier after ','".into(),
        ),
        (
            "a in (xyz)b notin ()",
            "found 'b', expected: ',' or 'end of string'".into(),
        ),
        (
            "(",
            "found '(', expected: !, identifier, or 'end of string'".into(),
        ),
        (
            "!",
            "unable to parse requirement: found '', expected: identifier".into(),
        ),
        (
            "a (",
            "unable to parse requirement: found '(', expected: in, notin, =, ==, !=, gt, lt".into(),
        ),
        (
            "x nott in (y)",
            "unable to parse requirement: found 'nott', expected: in, notin, =, ==, !=, gt, lt"
                .into(),
        ),
        (
            "a in (xyz abc)",
            "unable to parse requirement: found 'abc', expected: ',' or ')'".into(),
        ),
        (
            "a notin(",
            "unable to parse requirement: found '', expected: ',', ')' or identifier".into(),
        ),
        (
            "a in b",
            "unable to parse requirement: found 'b' expected: '('".into(),
        ),
        (
            "x=(",
            "unable to parse requirement: found '(', expected: identifier".into(),
        ),
        (
            "x<a",
            "unable to parse requirement: values[0]: Invalid value: \"a\": for 'Gt', 'Lt' \
             operators, the value must be an integer"
                .into(),
        ),
        (
            &long,
            format!(
                "unable to parse requirement: <nil>: Invalid value: \"{long}\": name part \
                 must be no more than 63 characters"
            ),
        ),
        (
            "app:monolith",
            format!(
                "unable to parse requirement: <nil>: Invalid value: \"app:monolith\": name \
                 part {name_rule}"
            ),
        ),
        (
            "a/b/c ?=? def",
            format!(
                "unable to parse requirement: <nil>: Invalid value: \"a/b/c\": a qualified \
                 name {name_rule} with an optional DNS subdomain prefix and '/' (e.g. \
                 'example.com/MyName')"
            ),
        ),
        (
            "app.kubernetes_io/name=x",
            "unable to parse requirement: <nil>: Invalid value: \"app.kubernetes_io/name\": \
             prefix part a lowercase RFC 1123 subdomain must consist of lower case \
             alphanumeric characters, '-' or '.', and must start and end with an alphanumeric \
             character (e.g. 'example.com', regex used for validation is \
             '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
                .into(),
        ),
        (
            "/x",
            "unable to parse requirement: <nil>: Invalid value: \"/x\": prefix part must be \
             non-empty"
                .into(),
        ),
        (
            "x/",
            format!(
                "unable to parse requirement: <nil>: Invalid value: \"x/\": name part must be \
                 non-empty; name part {name_rule}"
            ),
        ),
        (
            &format!("k={long_value}"),
            format!(
                "unable to parse requirement: values[0][k]: Invalid value: \"{long_value}\": \
                 must be no more than 63 characters"
            ),
        ),
    ];
    for (selector, want) in cases {
        assert_eq!(label_error(selector), want, "{selector:?}");
    }
}

#[test]
fn several_bad_values_are_reported_together_like_kube() {
    let err = label_error("k in (-a,b-)");
    assert!(
        err.starts_with("unable to parse requirement: [values[0][k]: Invalid value: \"-a\""),
        "{err}"
    );
    assert!(
        err.contains(", values[1][k]: Invalid value: \"b-\""),
        "{err}"
    );
}

#[test]
fn keys_and_values_at_the_length_limits_are_accepted() {
    let name = "n".repeat(63);
    let prefix = format!("{}.example.com", "p".repeat(200));
    let value = "v".repeat(63);
    let selector = format!("{prefix}/{name}={value}");
    assert!(matches(&selector, &[(&format!("{prefix}/{name}"), &value)]));
    assert!(LabelSelector::parse(&format!("{}/x", "p".repeat(254))).is_err());
}

#[test]
fn labels_are_read_from_json_metadata() {
    let selector = LabelSelector::parse("!tier,env notin (dev)").unwrap();
    let cases = [
        (None, true),
        (Some(json!(null)), true),
        (Some(json!({})), true),
        (Some(json!({"env": "prod"})), true),
        (Some(json!({"env": "dev"})), false),
        (Some(json!({"tier": "a"})), false),
        (Some(json!({"tier": 1})), true),
    ];
    for (value, want) in cases {
        assert_eq!(selector.matches_value(value.as_ref()), want, "{value:?}");
    }
}
