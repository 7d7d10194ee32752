//! A request as Tekton Triggers hands it to a TriggerBinding and to the CEL interceptor: the
//! headers under Go's canonical names (`ce-type` arrives as `Ce-Type`), each with the list of
//! its values, the JSON body, and the URL as Go's HTTP server reads it (path and query).

use std::borrow::Cow;
use std::collections::BTreeMap;

use http::HeaderMap;
use serde_json::Value;

/// One request to the EventListener.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Request {
    /// Every header's values in arrival order, by canonical name ([`canonical_header_key`]):
    /// Go's `http.Header`, which is what Triggers passes on.
    pub headers: BTreeMap<String, Vec<String>>,
    /// The JSON body.
    pub body: Value,
    /// The request target: path and query (Go's `Request.URL.String()` on a server request).
    pub url: String,
}

impl Request {
    /// The request as Go's HTTP server would hand it to Triggers: header names canonicalised,
    /// the values of a repeated header kept in order.
    pub fn from_http(url: impl Into<String>, headers: &HeaderMap, body: Value) -> Request {
        let mut by_name: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (name, value) in headers {
            by_name
                .entry(canonical_header_key(name.as_str()).into_owned())
                .or_default()
                .push(String::from_utf8_lossy(value.as_bytes()).into_owned());
        }
        Request {
            headers: by_name,
            body,
            url: url.into(),
        }
    }

    /// The values of header `name`, whatever its case (empty when absent).
    pub fn header_values(&self, name: &str) -> &[String] {
        self.headers
            .get(canonical_header_key(name).as_ref())
            .map_or(&[], Vec::as_slice)
    }

    /// `$(header.<name>)` as a TriggerBinding renders it: the values joined with `,`.
    pub fn header(&self, name: &str) -> Option<String> {
        let values = self.header_values(name);
        (!values.is_empty()).then(|| values.join(","))
    }

    /// `body.a.b` as a TriggerBinding renders it: strings as they are, anything else as JSON.
    pub fn body_path(&self, path: &str) -> Option<Value> {
        let mut cur = &self.body;
        for part in path.split('.') {
            cur = cur.get(part)?;
        }
        Some(cur.clone())
    }

    /// Evaluates one TriggerBinding expression (`header.X`, `body.a.b`).
    pub fn binding(&self, expr: &str) -> Option<String> {
        if let Some(h) = expr.strip_prefix("header.") {
            return self.header(h);
        }
        let path = expr.strip_prefix("body.")?;
        Some(match self.body_path(path)? {
            Value::String(s) => s,
            other => other.to_string(),
        })
    }
}

/// Go's `textproto.CanonicalMIMEHeaderKey`, the name under which Go's server, and so Triggers,
/// files a header: the first letter and every letter after a `-` upper case, the rest lower
/// case (`ce-imagetag` is `Ce-Imagetag`). A name with a byte that may not appear in a header
/// name is left as it is, as Go leaves it. Written here because the `http` crate lower-cases
/// names instead, and Triggers' `header` map and `header.match` depend on Go's form.
pub fn canonical_header_key(name: &str) -> Cow<'_, str> {
    if !name.bytes().all(is_token_byte) {
        return Cow::Borrowed(name);
    }
    let mut upper = true;
    let canonical: String = name
        .bytes()
        .map(|b| {
            let c = if upper {
                b.to_ascii_uppercase()
            } else {
                b.to_ascii_lowercase()
            };
            upper = c == b'-';
            char::from(c)
        })
        .collect();
    if canonical == name {
        Cow::Borrowed(name)
    } else {
        Cow::Owned(canonical)
    }
}

/// RFC 7230's `tchar`: the bytes of a header name.
fn is_token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn header_names_take_go_canonical_form() {
        for (name, canonical) in [
            ("ce-type", "Ce-Type"),
            ("CE-SPECVERSION", "Ce-Specversion"),
            ("x-github-event", "X-Github-Event"),
            ("X-GitHub-Event", "X-Github-Event"),
            ("content-type", "Content-Type"),
            ("Ce-Id", "Ce-Id"),
            ("x-1st--thing", "X-1st--Thing"),
            // Not a header name: Go leaves it alone.
            ("with space", "with space"),
            ("ünicode", "ünicode"),
        ] {
            assert_eq!(canonical_header_key(name), canonical, "{name}");
        }
    }

    #[test]
    fn requests_keep_every_value_of_a_header_under_its_canonical_name() {
        let mut headers = HeaderMap::new();
        headers.append("ce-id", "abc".parse().unwrap());
        headers.append("x-tag", "one".parse().unwrap());
        headers.append("X-TAG", "two".parse().unwrap());
        let r = Request::from_http("/hook?x=1", &headers, json!({"a": {"b": 1}}));
        assert_eq!(
            r.headers,
            BTreeMap::from([
                ("Ce-Id".to_string(), vec!["abc".to_string()]),
                (
                    "X-Tag".to_string(),
                    vec!["one".to_string(), "two".to_string()]
                ),
            ])
        );
        assert_eq!(r.url, "/hook?x=1");
        assert_eq!(r.header_values("x-tag"), ["one", "two"]);
        assert!(r.header_values("x-none").is_empty());
    }

    #[test]
    fn bindings_read_headers_case_insensitively_and_render_non_strings_as_json() {
        let mut headers = HeaderMap::new();
        headers.append("ce-id", "abc".parse().unwrap());
        headers.append("x-tag", "one".parse().unwrap());
        headers.append("x-tag", "two".parse().unwrap());
        let r = Request::from_http(
            "/",
            &headers,
            json!({"imageStream": "nb", "generation": 3, "previousDigest": null}),
        );
        assert_eq!(r.binding("header.Ce-Id").as_deref(), Some("abc"));
        assert_eq!(r.binding("header.ce-id").as_deref(), Some("abc"));
        assert_eq!(
            r.binding("header.X-Tag").as_deref(),
            Some("one,two"),
            "Triggers joins a repeated header's values with a comma"
        );
        assert_eq!(r.binding("header.X-None"), None);
        assert_eq!(r.binding("body.imageStream").as_deref(), Some("nb"));
        assert_eq!(r.binding("body.generation").as_deref(), Some("3"));
        assert_eq!(r.binding("body.previousDigest").as_deref(), Some("null"));
        assert_eq!(r.binding("body.nope"), None);
    }
}
