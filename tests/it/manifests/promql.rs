//! A reader of the PromQL the shipped alert rules and dashboard use: enough of the language to
//! find every series selector (metric name and label matchers), every grouping label (`by`,
//! `without`, `on`, `ignoring`, `group_left`, `group_right`) and every function, and to refuse
//! unbalanced brackets, unterminated strings, unknown functions and stray characters. It is not
//! Prometheus' parser: types and operator precedence are left to Prometheus.

/// A series selector: `name{label op "value", ...}`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Selector {
    /// The metric name, unless the selector is matchers only.
    pub name: Option<String>,
    /// (label, operator, value) of each matcher.
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

/// The aggregation operators.
const AGGREGATIONS: &[&str] = &[
    "sum",
    "min",
    "max",
    "avg",
    "count",
    "topk",
    "bottomk",
    "quantile",
    "stddev",
    "stdvar",
    "group",
    "count_values",
];

/// The functions and aggregations the reader accepts (the ones of PromQL a rule or dashboard of
/// counters, gauges and histograms uses).
const FUNCTIONS: &[&str] = &[
    "sum",
    "min",
    "max",
    "avg",
    "count",
    "topk",
    "bottomk",
    "quantile",
    "stddev",
    "stdvar",
    "group",
    "count_values",
    "rate",
    "irate",
    "increase",
    "delta",
    "idelta",
    "deriv",
    "histogram_quantile",
    "abs",
    "absent",
    "absent_over_time",
    "clamp_min",
    "clamp_max",
    "ceil",
    "floor",
    "round",
    "time",
    "timestamp",
    "vector",
    "scalar",
    "label_replace",
    "label_join",
    "resets",
    "changes",
    "avg_over_time",
    "max_over_time",
    "min_over_time",
    "sum_over_time",
    "count_over_time",
    "last_over_time",
    "present_over_time",
    "quantile_over_time",
    "sort",
    "sort_desc",
];

/// Words that are operators or modifiers, never metric names.
const KEYWORDS: &[&str] = &["and", "or", "unless", "bool", "offset"];

/// Clauses followed by a list of label names.
const GROUPING: &[&str] = &[
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
];

#[derive(Clone, Debug, PartialEq)]
enum Token {
    Ident(String),
    Str(String),
    Number,
    /// A range or subquery's contents, `[...]` (durations, Grafana's `$__rate_interval`).
    Range,
    Punct(char),
    Op,
}

/// Reads `expr`, or says what is wrong with it.
pub fn read(expr: &str) -> Result<Refs, String> {
    let tokens = tokenize(expr)?;
    balanced(&tokens)?;
    let mut refs = Refs::default();
    let mut i = 0;
    while i < tokens.len() {
        match &tokens[i] {
            Token::Ident(word) => {
                // `sum by (l) (...)`: an aggregation whose grouping comes first.
                let grouped = matches!(tokens.get(i + 1),
                    Some(Token::Ident(next)) if next == "by" || next == "without");
                let open = grouped || tokens.get(i + 1) == Some(&Token::Punct('('));
                if GROUPING.contains(&word.as_str()) {
                    if open {
                        let first = refs.grouping.len();
                        i = label_list(&tokens, i + 2, &mut refs.grouping)?;
                        match word.as_str() {
                            "by" => refs.by.extend_from_slice(&refs.grouping[first..]),
                            "without" => refs.without = true,
                            _ => {}
                        }
                        continue;
                    }
                    if word != "group_left" && word != "group_right" {
                        return Err(format!("`{word}` without a label list"));
                    }
                } else if open {
                    if !FUNCTIONS.contains(&word.as_str()) {
                        return Err(format!("unknown function `{word}`"));
                    }
                    refs.aggregated |= AGGREGATIONS.contains(&word.as_str());
                } else if word == "offset" {
                    i += 2;
                    continue;
                } else if !KEYWORDS.contains(&word.as_str()) {
                    i = selector(&tokens, i + 1, Some(word.clone()), &mut refs)?;
                    continue;
                }
            }
            Token::Punct('{') => {
                i = selector(&tokens, i, None, &mut refs)?;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    if refs.selectors.is_empty() {
        return Err("selects no series".into());
    }
    Ok(refs)
}

/// Reads `{matchers}` at `i`, if there, for a selector of `name`; returns the index after it.
fn selector(
    tokens: &[Token],
    mut i: usize,
    name: Option<String>,
    refs: &mut Refs,
) -> Result<usize, String> {
    let mut matchers = Vec::new();
    if tokens.get(i) == Some(&Token::Punct('{')) {
        i += 1;
        loop {
            match tokens.get(i..i + 3) {
                Some([Token::Ident(label), op, Token::Str(value)]) => {
                    let op = match op {
                        Token::Punct('=') => "=",
                        Token::Op => "op",
                        _ => return Err(format!("matcher on `{label}` has no operator")),
                    };
                    matchers.push((label.clone(), op.to_string(), value.clone()));
                    i += 3;
                }
                _ => return Err("a label matcher is not `label op \"value\"`".into()),
            }
            match tokens.get(i) {
                Some(Token::Punct(',')) if tokens.get(i + 1) == Some(&Token::Punct('}')) => {
                    i += 2;
                    break;
                }
                Some(Token::Punct(',')) => i += 1,
                Some(Token::Punct('}')) => {
                    i += 1;
                    break;
                }
                _ => return Err("label matchers not closed by `}`".into()),
            }
        }
    }
    if name.is_none() && matchers.is_empty() {
        return Err("an empty selector `{}`".into());
    }
    refs.selectors.push(Selector { name, matchers });
    Ok(i)
}

/// Reads `a, b)` from `i` into `out`; returns the index after `)`.
fn label_list(tokens: &[Token], mut i: usize, out: &mut Vec<String>) -> Result<usize, String> {
    loop {
        match tokens.get(i) {
            Some(Token::Punct(')')) => return Ok(i + 1),
            Some(Token::Ident(label)) => out.push(label.clone()),
            Some(Token::Punct(',')) => {}
            _ => return Err("a grouping clause lists something other than labels".into()),
        }
        i += 1;
    }
}

fn balanced(tokens: &[Token]) -> Result<(), String> {
    let mut stack = Vec::new();
    for t in tokens {
        match t {
            Token::Punct(c @ ('(' | '{')) => stack.push(*c),
            Token::Punct(c @ (')' | '}')) => {
                let want = if *c == ')' { '(' } else { '{' };
                if stack.pop() != Some(want) {
                    return Err(format!("unbalanced `{c}`"));
                }
            }
            _ => {}
        }
    }
    match stack.last() {
        Some(c) => Err(format!("`{c}` never closed")),
        None => Ok(()),
    }
}

fn tokenize(expr: &str) -> Result<Vec<Token>, String> {
    let chars: Vec<char> = expr.chars().collect();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
        } else if c.is_ascii_alphabetic() || c == '_' || c == ':' {
            let start = i;
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || "_:".contains(chars[i])) {
                i += 1;
            }
            tokens.push(Token::Ident(chars[start..i].iter().collect()));
        } else if c.is_ascii_digit() || c == '.' {
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '.') {
                i += 1;
            }
            tokens.push(Token::Number);
        } else if c == '"' || c == '\'' || c == '`' {
            let (value, next) = string(&chars, i)?;
            tokens.push(Token::Str(value));
            i = next;
        } else if c == '[' {
            let close = chars[i..]
                .iter()
                .position(|&c| c == ']')
                .ok_or("`[` never closed")?;
            let inner: String = chars[i + 1..i + close].iter().collect();
            if inner.trim().is_empty() || inner.contains(['[', '(', '{']) {
                return Err(format!("`[{inner}]` is not a range"));
            }
            tokens.push(Token::Range);
            i += close + 1;
        } else if c == ']' {
            return Err("unbalanced `]`".into());
        } else if "(){},".contains(c) {
            tokens.push(Token::Punct(c));
            i += 1;
        } else if c == '=' && chars.get(i + 1) != Some(&'=') && chars.get(i + 1) != Some(&'~') {
            tokens.push(Token::Punct('='));
            i += 1;
        } else if "=!<>+-*/%^~".contains(c) {
            while i < chars.len() && "=!<>~".contains(chars[i]) {
                i += 1;
            }
            if "+-*/%^".contains(c) {
                i += 1;
            }
            tokens.push(Token::Op);
        } else {
            return Err(format!("unexpected `{c}`"));
        }
    }
    Ok(tokens)
}

/// The string starting at `chars[start]` (its quote) and the index after it.
fn string(chars: &[char], start: usize) -> Result<(String, usize), String> {
    let quote = chars[start];
    let mut value = String::new();
    let mut i = start + 1;
    while i < chars.len() {
        match chars[i] {
            '\\' if quote != '`' => {
                value.extend(chars.get(i + 1));
                i += 2;
            }
            c if c == quote => return Ok((value, i + 1)),
            c => {
                value.push(c);
                i += 1;
            }
        }
    }
    Err("a string never closed".into())
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
}

#[test]
fn refuses_what_prometheus_would_refuse() {
    for (expr, says) in [
        ("sum(rate(a[5m])", "never closed"),
        ("sum(a))", "unbalanced `)`"),
        ("a{b=\"c}", "never closed"),
        ("summ(a)", "unknown function `summ`"),
        ("summ by (x) (a)", "unknown function `summ`"),
        ("a{b}", "matcher"),
        ("rate(a[])", "not a range"),
        ("sum by (a", "never closed"),
        ("sum by (a, 1) (b)", "grouping clause"),
        ("a # b", "unexpected `#`"),
        ("1 > 0", "selects no series"),
    ] {
        let err = read(expr).expect_err(expr);
        assert!(err.contains(says), "{expr}: {err}");
    }
}
