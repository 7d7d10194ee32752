//! What the PromQL of the shipped alert rules and dashboard refers to: every series selector
//! (metric name and label matchers), every grouping label (`by`, `without`, `on`, `ignoring`,
//! `group_left`, `group_right`), whether it aggregates. The expression is parsed by
//! `promql-parser` (a port of Prometheus' own grammar, function table and type checks), so an
//! expression Prometheus would refuse is refused here with the parser's reason; this module only
//! walks the tree. Grafana's `$__rate_interval` is replaced first, as Grafana does before a
//! query reaches Prometheus.

use promql_parser::label::{MatchOp, Matcher};
use promql_parser::parser::{self, Expr, LabelModifier, VectorSelector};

/// A series selector: `name{label op "value", ...}`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Selector {
    /// The metric name, unless the selector is matchers only.
    pub name: Option<String>,
    /// (label, operator, value) of each matcher: `=` for equality, `op` for any other.
    pub matchers: Vec<(String, String, String)>,
}

/// What an expression refers to.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Refs {
    /// Every series selector.
    pub selectors: Vec<Selector>,
    /// Every label named in a grouping or matching clause.
    pub grouping: Vec<String>,
    /// Whether an aggregation (`sum`, `max`, ...) is applied.
    pub aggregated: bool,
    /// The labels of its `by` clauses.
    pub by: Vec<String>,
    /// Whether a `without` clause is used (what it keeps depends on the series).
    pub without: bool,
}

impl Refs {
    /// The labels the result keeps, when that does not depend on the series: an aggregation
    /// keeps its `by` labels only.
    pub fn kept(&self) -> Option<&[String]> {
        (self.aggregated && !self.without).then_some(&self.by[..])
    }
}

/// Reads `expr`, or says what is wrong with it.
pub fn read(expr: &str) -> Result<Refs, String> {
    // Grafana's interval variable, as Grafana substitutes it (at least four scrape intervals).
    let expr = expr.replace("$__rate_interval", "1m");
    let tree = parser::parse(&expr)?;
    let mut refs = Refs::default();
    walk(&tree, &mut refs);
    if refs.selectors.is_empty() {
        return Err("selects no series".into());
    }
    Ok(refs)
}

fn walk(expr: &Expr, refs: &mut Refs) {
    match expr {
        Expr::Aggregate(a) => {
            refs.aggregated = true;
            match &a.modifier {
                Some(LabelModifier::Include(by)) => {
                    refs.grouping.extend(by.labels.iter().cloned());
                    refs.by.extend(by.labels.iter().cloned());
                }
                Some(LabelModifier::Exclude(without)) => {
                    refs.grouping.extend(without.labels.iter().cloned());
                    refs.without = true;
                }
                None => {}
            }
            if let Some(param) = &a.param {
                walk(param, refs);
            }
            walk(&a.expr, refs);
        }
        Expr::Binary(b) => {
            walk(&b.lhs, refs);
            if let Some(m) = &b.modifier {
                if let Some(matching) = &m.matching {
                    refs.grouping
                        .extend(matching.labels().labels.iter().cloned());
                }
                if let Some(group) = m.card.labels() {
                    refs.grouping.extend(group.labels.iter().cloned());
                }
            }
            walk(&b.rhs, refs);
        }
        Expr::Unary(u) => walk(&u.expr, refs),
        Expr::Paren(p) => walk(&p.expr, refs),
        Expr::Subquery(s) => walk(&s.expr, refs),
        Expr::Call(c) => c.args.args.iter().for_each(|a| walk(a, refs)),
        Expr::VectorSelector(v) => refs.selectors.push(selector(v)),
        Expr::MatrixSelector(m) => refs.selectors.push(selector(&m.vs)),
        Expr::NumberLiteral(_) | Expr::StringLiteral(_) | Expr::Extension(_) => {}
    }
}

fn selector(v: &VectorSelector) -> Selector {
    let matcher = |m: &Matcher| {
        let op = if matches!(m.op, MatchOp::Equal) {
            "="
        } else {
            "op"
        };
        (m.name.clone(), op.to_string(), m.value.clone())
    };
    Selector {
        name: v.name.clone(),
        matchers: (v.matchers.matchers.iter())
            .chain(v.matchers.or_matchers.iter().flatten())
            .filter(|m| m.name != "__name__" || v.name.is_none())
            .map(matcher)
            .collect(),
    }
}

#[test]
fn reads_selectors_grouping_and_functions() {
    let refs = read(
        "histogram_quantile(0.99, sum(rate(a_bucket{ns=\"x\", type=~'y.*'}[5m])) by (le)) > 10 \
         and on (ns) sum without (x) (b offset 1h)",
    )
    .unwrap();
    assert_eq!(
        refs.selectors,
        vec![
            Selector {
                name: Some("a_bucket".into()),
                matchers: vec![
                    ("ns".into(), "=".into(), "x".into()),
                    ("type".into(), "op".into(), "y.*".into()),
                ],
            },
            Selector {
                name: Some("b".into()),
                matchers: vec![],
            },
        ]
    );
    assert_eq!(refs.grouping, ["le", "ns", "x"]);
    assert_eq!(refs.kept(), None, "`without` keeps what the series have");
    let refs = read("max(a) and sum by (k) (rate(b[5m]))").unwrap();
    assert_eq!(refs.kept(), Some(&["k".to_string()][..]));
    assert_eq!(read("rate(b[5m])").unwrap().kept(), None);
    let refs = read("sum by (k) (rate(b[$__rate_interval])) * on (k) group_left (v) c").unwrap();
    assert_eq!(refs.grouping, ["k", "k", "v"], "Grafana's variable read");
}

#[test]
fn refuses_what_prometheus_would_refuse() {
    // Each with a word of the parser's reason, so that it is this refusal and not another.
    for (expr, says) in [
        ("sum(rate(a[5m])", "unclosed left parenthesis"),
        ("sum(a))", "unexpected right parenthesis"),
        ("a{b=\"c}", "unterminated quoted string"),
        ("summ(a)", "unknown function with name 'summ'"),
        ("summ by (x) (a)", "invalid promql query"),
        ("a{b}", "expected label matching operator after 'b'"),
        ("rate(a[])", "missing unit character in duration"),
        ("sum by (a", "unclosed left parenthesis"),
        ("sum by (a, 1) (b)", "invalid promql query"),
        (
            "rate(a)",
            "expected type matrix in call to function 'rate', got vector",
        ),
        (
            "1 > 0",
            "comparisons between scalars must use BOOL modifier",
        ),
        ("1 + 1", "selects no series"),
    ] {
        let err = read(expr).expect_err(expr);
        assert!(err.contains(says), "{expr}: {err}");
    }
    // `#` opens a comment in PromQL (the hand-written reader this replaced refused it).
    assert_eq!(read("a # b").unwrap().selectors.len(), 1);
}
