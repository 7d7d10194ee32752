//! Label selectors (`?labelSelector=`): a port of kube's `labels.Parse` lexer and parser, the
//! requirements they produce, how those match an object's labels, and kube's canonical form.

use std::collections::BTreeSet;
use std::fmt;
use std::str::FromStr;

use serde_json::Value;

use super::SelectorError;
use super::validation::{aggregate, invalid, label_value_errors, qualified_name_errors};

/// A parsed label selector: requirements that must all hold, sorted by key like kube.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector {
    requirements: Vec<Requirement>,
}

impl LabelSelector {
    /// Parses `s` like `labels.Parse`; `""` selects everything.
    pub fn parse(s: &str) -> Result<Self, SelectorError> {
        let mut parser = Parser {
            items: lex(s),
            pos: 0,
        };
        let mut requirements = parser.parse()?;
        requirements.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(Self { requirements })
    }

    /// Whether `metadata.labels` (JSON) satisfy every requirement; absent, null or non-object
    /// labels mean no labels, and a non-string value counts as absent (kube labels are strings).
    pub fn matches_value(&self, labels: Option<&Value>) -> bool {
        let labels = labels.and_then(Value::as_object);
        self.matches_with(|key| labels.and_then(|m| m.get(key)).and_then(Value::as_str))
    }

    /// Whether the selector selects everything.
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    fn matches_with<'a>(&self, get: impl Fn(&str) -> Option<&'a str>) -> bool {
        self.requirements.iter().all(|r| r.matches(get(&r.key)))
    }
}

impl FromStr for LabelSelector {
    type Err = SelectorError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

/// Kube's canonical form: requirements by key, set values sorted, no spaces but around in/notin.
impl fmt::Display for LabelSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, r) in self.requirements.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{r}")?;
        }
        Ok(())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Exists,
    DoesNotExist,
    Equals,
    DoubleEquals,
    NotEquals,
    In,
    NotIn,
    GreaterThan,
    LessThan,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Requirement {
    key: String,
    op: Op,
    /// Sorted and deduplicated, as kube's `sets.String.List()` hands them over.
    values: Vec<String>,
}

impl Requirement {
    /// `labels.NewRequirement` for what the parser can produce: the key is already validated.
    fn new(key: &str, op: Op, values: Vec<String>) -> Result<Self, String> {
        let mut errs = Vec::new();
        if matches!(op, Op::GreaterThan | Op::LessThan) {
            for (i, v) in values.iter().enumerate() {
                if v.parse::<i64>().is_err() {
                    let detail = "for 'Gt', 'Lt' operators, the value must be an integer";
                    errs.push(invalid(&format!("values[{i}]"), v, detail));
                }
            }
        }
        for (i, v) in values.iter().enumerate() {
            let problems = label_value_errors(v);
            if !problems.is_empty() {
                errs.push(invalid(
                    &format!("values[{i}][{key}]"),
                    v,
                    &problems.join("; "),
                ));
            }
        }
        if !errs.is_empty() {
            return Err(aggregate(errs));
        }
        Ok(Self {
            key: key.to_string(),
            op,
            values,
        })
    }

    fn matches(&self, value: Option<&str>) -> bool {
        let listed = |v: &str| self.values.iter().any(|x| x == v);
        match (self.op, value) {
            (Op::Exists, v) => v.is_some(),
            (Op::DoesNotExist, v) => v.is_none(),
            (Op::Equals | Op::DoubleEquals | Op::In, v) => v.is_some_and(listed),
            (Op::NotEquals | Op::NotIn, v) => !v.is_some_and(listed),
            (Op::GreaterThan | Op::LessThan, None) => false,
            (op, Some(v)) => {
                let (Ok(have), Some(Ok(want))) = (
                    v.parse::<i64>(),
                    self.values.first().map(|w| w.parse::<i64>()),
                ) else {
                    return false;
                };
                if op == Op::GreaterThan {
                    have > want
                } else {
                    have < want
                }
            }
        }
    }
}

impl fmt::Display for Requirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let op = match self.op {
            Op::Exists => return f.write_str(&self.key),
            Op::DoesNotExist => return write!(f, "!{}", self.key),
            Op::Equals => "=",
            Op::DoubleEquals => "==",
            Op::NotEquals => "!=",
            Op::GreaterThan => ">",
            Op::LessThan => "<",
            Op::In => " in ",
            Op::NotIn => " notin ",
        };
        let values = self.values.join(",");
        match self.op {
            Op::In | Op::NotIn => write!(f, "{}{op}({values})", self.key),
            _ => write!(f, "{}{op}{values}", self.key),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Token {
    End,
    ClosedPar,
    Comma,
    Not,
    DoubleEquals,
    Equals,
    GreaterThan,
    Identifier,
    In,
    LessThan,
    NotEquals,
    NotIn,
    OpenPar,
}

fn keyword(s: &str) -> Option<Token> {
    Some(match s {
        ")" => Token::ClosedPar,
        "," => Token::Comma,
        "!" => Token::Not,
        "==" => Token::DoubleEquals,
        "=" => Token::Equals,
        ">" => Token::GreaterThan,
        "in" => Token::In,
        "<" => Token::LessThan,
        "!=" => Token::NotEquals,
        "notin" => Token::NotIn,
        "(" => Token::OpenPar,
        _ => return None,
    })
}

fn is_whitespace(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r' | b'\n')
}

fn is_special(b: u8) -> bool {
    matches!(b, b'=' | b'!' | b'(' | b')' | b',' | b'>' | b'<')
}

/// Kube's lexer, ending with one `End` item. Like kube (whose reader returns 0 at the end), a NUL
/// byte where a token starts ends the input, and one that ends a token is swallowed.
fn lex(s: &str) -> Vec<(Token, &str)> {
    let b = s.as_bytes();
    let mut items = Vec::new();
    let mut pos = 0;
    loop {
        while pos < b.len() && is_whitespace(b[pos]) {
            pos += 1;
        }
        if pos >= b.len() || b[pos] == 0 {
            items.push((Token::End, ""));
            return items;
        }
        let start = pos;
        let mut end = pos + 1;
        if is_special(b[start]) {
            // The longest operator: grow while the text is still a known symbol.
            while end < b.len() && is_special(b[end]) && keyword(&s[start..=end]).is_some() {
                end += 1;
            }
        } else {
            while end < b.len() && !is_special(b[end]) && !is_whitespace(b[end]) && b[end] != 0 {
                end += 1;
            }
        }
        let lit = &s[start..end];
        items.push((keyword(lit).unwrap_or(Token::Identifier), lit));
        pos = if end < b.len() && b[end] == 0 {
            end + 1
        } else {
            end
        };
    }
}

/// Where the parser is: `in` and `notin` are operators after a key but plain values elsewhere.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Context {
    KeyAndOperator,
    Values,
}

struct Parser<'a> {
    items: Vec<(Token, &'a str)>,
    pos: usize,
}

const BINARY_OPERATORS: &str = "in, notin, =, ==, !=, gt, lt";

impl<'a> Parser<'a> {
    fn lookahead(&self, context: Context) -> (Token, &'a str) {
        // Never past the `End` item, which the parser stops at anyway.
        let (token, lit) = self.items[self.pos.min(self.items.len() - 1)];
        match token {
            Token::In | Token::NotIn if context == Context::Values => (Token::Identifier, lit),
            _ => (token, lit),
        }
    }

    fn consume(&mut self, context: Context) -> (Token, &'a str) {
        let item = self.lookahead(context);
        self.pos += 1;
        item
    }

    fn parse(&mut self) -> Result<Vec<Requirement>, SelectorError> {
        let mut requirements = Vec::new();
        loop {
            let (token, lit) = self.lookahead(Context::Values);
            match token {
                Token::Identifier | Token::Not => {
                    let requirement = self.requirement().map_err(|e| {
                        SelectorError::new(format!("unable to parse requirement: {e}"))
                    })?;
                    requirements.push(requirement);
                    match self.consume(Context::Values) {
                        (Token::End, _) => return Ok(requirements),
                        (Token::Comma, _) => match self.lookahead(Context::Values) {
                            (Token::Identifier | Token::Not, _) => {}
                            (_, lit) => {
                                let msg = format!("found '{lit}', expected: identifier after ','");
                                return Err(SelectorError::new(msg));
                            }
                        },
                        (_, lit) => {
                            let msg = format!("found '{lit}', expected: ',' or 'end of string'");
                            return Err(SelectorError::new(msg));
                        }
                    }
                }
                Token::End => return Ok(requirements),
                _ => {
                    let msg = format!("found '{lit}', expected: !, identifier, or 'end of string'");
                    return Err(SelectorError::new(msg));
                }
            }
        }
    }

    fn requirement(&mut self) -> Result<Requirement, String> {
        let (mut token, mut key) = self.consume(Context::Values);
        let negated = token == Token::Not;
        if negated {
            (token, key) = self.consume(Context::Values);
        }
        if token != Token::Identifier {
            return Err(format!("found '{key}', expected: identifier"));
        }
        let problems = qualified_name_errors(key);
        if !problems.is_empty() {
            return Err(invalid("<nil>", key, &problems.join("; ")));
        }
        if negated {
            return Requirement::new(key, Op::DoesNotExist, Vec::new());
        }
        if let (Token::End | Token::Comma, _) = self.lookahead(Context::Values) {
            return Requirement::new(key, Op::Exists, Vec::new());
        }
        let op = match self.consume(Context::KeyAndOperator) {
            (Token::In, _) => Op::In,
            (Token::NotIn, _) => Op::NotIn,
            (Token::Equals, _) => Op::Equals,
            (Token::DoubleEquals, _) => Op::DoubleEquals,
            (Token::NotEquals, _) => Op::NotEquals,
            (Token::GreaterThan, _) => Op::GreaterThan,
            (Token::LessThan, _) => Op::LessThan,
            (_, lit) => return Err(format!("found '{lit}', expected: {BINARY_OPERATORS}")),
        };
        let values = match op {
            Op::In | Op::NotIn => self.value_set()?,
            _ => self.exact_value()?,
        };
        Requirement::new(key, op, values)
    }

    /// `(a,b)`; empty entries (`()`, `(a,)`, `(,a)`, `(a,,b)`) are the empty value, like kube.
    fn value_set(&mut self) -> Result<Vec<String>, String> {
        let (token, lit) = self.consume(Context::Values);
        if token != Token::OpenPar {
            return Err(format!("found '{lit}' expected: '('"));
        }
        match self.lookahead(Context::Values) {
            (Token::Identifier | Token::Comma, _) => {
                let values = self.identifiers()?;
                self.consume(Context::Values); // the ')' that ended the list
                Ok(values)
            }
            (Token::ClosedPar, _) => {
                self.consume(Context::Values);
                Ok(vec![String::new()])
            }
            (_, lit) => Err(format!("found '{lit}', expected: ',', ')' or identifier")),
        }
    }

    fn identifiers(&mut self) -> Result<Vec<String>, String> {
        let mut set = BTreeSet::new();
        loop {
            match self.consume(Context::Values) {
                (Token::Identifier, lit) => {
                    set.insert(lit);
                    match self.lookahead(Context::Values) {
                        (Token::Comma, _) => {}
                        (Token::ClosedPar, _) => break,
                        (_, lit) => return Err(format!("found '{lit}', expected: ',' or ')'")),
                    }
                }
                (Token::Comma, _) => {
                    if set.is_empty() {
                        set.insert("");
                    }
                    match self.lookahead(Context::Values) {
                        (Token::ClosedPar, _) => {
                            set.insert("");
                            break;
                        }
                        (Token::Comma, _) => {
                            self.consume(Context::Values);
                            set.insert("");
                        }
                        _ => {}
                    }
                }
                (_, lit) => return Err(format!("found '{lit}', expected: ',', or identifier")),
            }
        }
        Ok(set.into_iter().map(str::to_string).collect())
    }

    fn exact_value(&mut self) -> Result<Vec<String>, String> {
        if let (Token::End | Token::Comma, _) = self.lookahead(Context::Values) {
            return Ok(vec![String::new()]);
        }
        match self.consume(Context::Values) {
            (Token::Identifier, lit) => Ok(vec![lit.to_string()]),
            (_, lit) => Err(format!("found '{lit}', expected: identifier")),
        }
    }
}

#[cfg(test)]
mod tests;
