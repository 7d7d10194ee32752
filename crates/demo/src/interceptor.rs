//! The CEL interceptor of Tekton Triggers, for the demo's EventListener: real CEL (the `cel`
//! crate) in the environment Triggers builds (`pkg/interceptors/cel`), so that a filter in
//! `tekton/` means here what it means on a cluster.
//!
//! - Variables: `body` (the JSON body; every number a double, as Go's `encoding/json` decodes
//!   it), `header` (canonical header name to the list of its values: Go's `http.Header`),
//!   `requestURL` (path and query) and `extensions` (empty: the demo runs no interceptor before
//!   this one, and none that adds extensions).
//! - Functions: CEL's standard library and the strings, encoders, lists and math extensions,
//!   as in Triggers (cel-go's `sets` extension has no counterpart in the crate: a filter that
//!   calls it fails to evaluate, it is never passed by mistake); of Triggers' own functions,
//!   `header.match(name, value)` and `header.canonical(name)`, the ones the EventListener's
//!   filters use. Any other Triggers function (`parseJSON`, `compareSecret`, ...) is an unknown
//!   function here, an error.

use std::collections::HashMap;
use std::sync::Arc;

use cel::common::types::{CelBool, CelString, MAP_TYPE, STRING_TYPE};
use cel::common::value::{CowVal, Val};
use cel::{Context, DeclarationError, Env, ExecutionError, ParseErrors, Value as CelValue};
use serde_json::Value;

use super::request::{Request, canonical_header_key};

/// Why an expression gave no answer.
#[derive(Debug, thiserror::Error)]
pub enum CelError {
    /// The environment could not be set up (a function declared twice).
    #[error("cannot set up the CEL environment: {0}")]
    Environment(#[from] DeclarationError),
    /// The expression is not CEL.
    #[error("CEL expression {expr:?} does not parse: {source}")]
    Parse {
        /// The expression.
        expr: String,
        /// What the parser found.
        source: ParseErrors,
    },
    /// Evaluating the expression failed (a missing key, no such function or overload).
    #[error("CEL expression {expr:?} failed to evaluate: {source}")]
    Evaluate {
        /// The expression.
        expr: String,
        /// What failed.
        source: ExecutionError,
    },
    /// A filter gave something else than a bool.
    #[error("CEL filter {expr:?} evaluates to {value:?}, not a bool")]
    NotBool {
        /// The filter.
        expr: String,
        /// What it gave.
        value: CelValue,
    },
}

/// The CEL environment of Triggers' CEL interceptor.
pub struct Interceptor {
    env: Arc<Env>,
}

impl Interceptor {
    /// The environment with the extensions listed in the module doc.
    pub fn new() -> Result<Interceptor, CelError> {
        let mut env = Env::stdlib();
        env.add_extension(cel::extensions::strings)?;
        env.add_extension(cel::extensions::encoders)?;
        env.add_extension(cel::extensions::lists)?;
        env.add_extension(cel::extensions::math)?;
        env.add_extension(triggers)?;
        Ok(Interceptor { env: Arc::new(env) })
    }

    /// Evaluates `expr` over `request`.
    pub fn evaluate(&self, expr: &str, request: &Request) -> Result<CelValue, CelError> {
        let program = self.env.compile(expr).map_err(|source| CelError::Parse {
            expr: expr.to_string(),
            source,
        })?;
        let mut context = Context::with_env(Arc::clone(&self.env));
        context.add_variable_from_value("body", json_to_cel(&request.body));
        let header: HashMap<String, CelValue> = request
            .headers
            .iter()
            .map(|(name, values)| (name.clone(), CelValue::from(values.clone())))
            .collect();
        context.add_variable_from_value("header", header);
        context.add_variable_from_value("requestURL", request.url.as_str());
        context.add_variable_from_value("extensions", HashMap::<String, CelValue>::new());
        program
            .execute(&context)
            .map_err(|source| CelError::Evaluate {
                expr: expr.to_string(),
                source,
            })
    }

    /// Whether the filter `expr` passes `request`. Triggers passes an event only on `true`;
    /// a result that is no bool is an error here, where Triggers drops the event as for
    /// `false`, so that a filter that can never pass is reported rather than silently
    /// dropping every event.
    pub fn filter(&self, expr: &str, request: &Request) -> Result<bool, CelError> {
        match self.evaluate(expr, request)? {
            CelValue::Bool(b) => Ok(b),
            value => Err(CelError::NotBool {
                expr: expr.to_string(),
                value,
            }),
        }
    }
}

/// The JSON body as Triggers gives it to CEL: decoded as Go's `encoding/json` decodes into an
/// `interface{}`, so every number is a double (`body.generation == 3.0`, `int(body.generation)`),
/// as Triggers' documentation says. The crate's serde conversion would make integers ints.
fn json_to_cel(v: &Value) -> CelValue {
    match v {
        Value::Null => CelValue::Null,
        Value::Bool(b) => CelValue::Bool(*b),
        Value::Number(n) => CelValue::Float(n.as_f64().unwrap_or(f64::NAN)),
        Value::String(s) => CelValue::from(s.as_str()),
        Value::Array(items) => CelValue::List(Arc::new(items.iter().map(json_to_cel).collect())),
        Value::Object(map) => CelValue::from(
            map.iter()
                .map(|(k, v)| (k.clone(), json_to_cel(v)))
                .collect::<HashMap<_, _>>(),
        ),
    }
}

/// Triggers' own functions (`triggers.go`), as member overloads on a map, as Triggers declares
/// them (`match_map_string_string`, `canonical_map_string`).
fn triggers(env: &mut Env) -> Result<(), DeclarationError> {
    env.add_member_overload(
        "match",
        "match_map_string_string",
        MAP_TYPE,
        vec![STRING_TYPE, STRING_TYPE],
        header_match,
    )?;
    env.add_member_overload(
        "canonical",
        "canonical_map_string",
        MAP_TYPE,
        vec![STRING_TYPE],
        header_canonical,
    )
}

/// `header.match(name, value)`: whether the first value of header `name` (any case) is
/// `value`; an absent header has the value `""` (Go's `http.Header.Get`).
fn header_match<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [header, name, value] = take_args(args)?;
    let first = first_header_value("match", header.as_ref(), string_arg("match", &name)?)?;
    let value = string_arg("match", &value)?;
    Ok(CowVal::owned(CelBool::from(first == value)))
}

/// `header.canonical(name)`: the first value of header `name` (any case), `""` when absent.
fn header_canonical<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [header, name] = take_args(args)?;
    let first = first_header_value(
        "canonical",
        header.as_ref(),
        string_arg("canonical", &name)?,
    )?;
    Ok(CowVal::owned(CelString::from(first)))
}

/// The first value of header `name` in the map `header`, as Go's `http.Header.Get` finds it.
/// Like Triggers, which converts the map to an `http.Header` first, it fails unless every entry
/// is a list of strings (`body.match(...)` is an error, not `false`).
fn first_header_value(
    function: &str,
    header: &dyn Val,
    name: &str,
) -> Result<String, ExecutionError> {
    let not_header = || {
        ExecutionError::function_error(
            function,
            "the receiver is not a header map (name to list of strings)",
        )
    };
    let CelValue::Map(map) = CelValue::try_from(header)? else {
        return Err(not_header());
    };
    let name = canonical_header_key(name);
    let mut first = None;
    for (key, values) in map.map.iter() {
        let CelValue::List(values) = values else {
            return Err(not_header());
        };
        if values.iter().any(|v| !matches!(v, CelValue::String(_))) {
            return Err(not_header());
        }
        if matches!(key, cel::objects::Key::String(k) if k.as_str() == name) {
            first = values.first();
        }
    }
    Ok(match first {
        Some(CelValue::String(s)) => s.to_string(),
        _ => String::new(),
    })
}

/// The receiver and the arguments of an overload declared with `N - 1` arguments.
fn take_args<'b, 'v, const N: usize>(
    args: Vec<CowVal<'b, 'v>>,
) -> Result<[CowVal<'b, 'v>; N], ExecutionError> {
    args.try_into()
        .map_err(|args: Vec<_>| ExecutionError::invalid_argument_count(N, args.len()))
}

fn string_arg<'a>(function: &str, arg: &'a CowVal<'_, '_>) -> Result<&'a str, ExecutionError> {
    <&str>::try_from(arg.as_ref())
        .map_err(|_| ExecutionError::function_error(function, "takes string arguments"))
}

#[cfg(test)]
mod tests;
