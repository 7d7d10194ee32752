//! What Tekton Triggers sends an interceptor and what it reads back (Triggers v0.37
//! `pkg/apis/triggers/v1beta1` InterceptorRequest and InterceptorResponse; written here because
//! no Rust crate has Triggers' types), and the CloudEvent read out of a request (pure).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::source::event::types;

/// An InterceptorRequest. Unknown fields are ignored, as Go's decoder ignores them.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
pub(crate) struct InterceptorRequest {
    /// The event's body, as it came.
    #[serde(default)]
    pub(crate) body: String,
    /// Its headers, canonical names (Go's `http.Header`).
    #[serde(default)]
    pub(crate) header: BTreeMap<String, Vec<String>>,
    /// What interceptors before this one added.
    #[serde(default)]
    pub(crate) extensions: Map<String, Value>,
    /// The params the Trigger gives this interceptor.
    #[serde(default)]
    pub(crate) interceptor_params: Map<String, Value>,
    /// Where the event is processed.
    #[serde(default)]
    pub(crate) context: Option<TriggerContext>,
}

/// The InterceptorRequest's context.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
pub(crate) struct TriggerContext {
    /// The URL the event was posted to.
    #[serde(default)]
    pub(crate) event_url: String,
    /// Triggers' id of the event.
    #[serde(default)]
    pub(crate) event_id: String,
    /// `namespaces/<ns>/triggers/<name>`: the Trigger (and so the namespace its resources are
    /// created in).
    #[serde(default)]
    pub(crate) trigger_id: String,
}

impl TriggerContext {
    /// The namespace of the Trigger, from `trigger_id`.
    pub(crate) fn namespace(&self) -> Option<&str> {
        match self.trigger_id.split('/').collect::<Vec<_>>().as_slice() {
            ["namespaces", ns, _, _] if !ns.is_empty() => Some(ns),
            _ => None,
        }
    }
}

/// An InterceptorResponse.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
pub(crate) struct InterceptorResponse {
    /// Added to the Trigger's `extensions` (the binding reads `$(extensions.imagegate.*)`).
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub(crate) extensions: Map<String, Value>,
    /// Whether the Trigger goes on.
    #[serde(rename = "continue")]
    pub(crate) continue_: bool,
    /// Why not.
    #[serde(default)]
    pub(crate) status: Status,
}

/// An InterceptorResponse's status: a gRPC code and a message.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
pub(crate) struct Status {
    /// The gRPC status code (0: OK, 3: InvalidArgument, 9: FailedPrecondition, 14:
    /// Unavailable); absent when 0.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub(crate) code: u32,
    /// What happened.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub(crate) message: String,
}

fn is_zero(c: &u32) -> bool {
    *c == 0
}

/// The gRPC codes this interceptor answers with.
pub(crate) mod code {
    /// The event is not one the interceptor passes (malformed, not a candidate update).
    pub(crate) const INVALID_ARGUMENT: u32 = 3;
    /// The event is well-formed but does not name the stream's current candidate.
    pub(crate) const FAILED_PRECONDITION: u32 = 9;
    /// The API could not be read: refused, and the controller's ledger re-drives the candidate.
    pub(crate) const UNAVAILABLE: u32 = 14;
}

/// What an `updated` event claims.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Claimed {
    /// The CloudEvent id.
    pub(crate) id: String,
    /// The stream's namespace.
    pub(crate) namespace: String,
    /// The stream.
    pub(crate) imagestream: String,
    /// The tag.
    pub(crate) tag: String,
    /// The digest.
    pub(crate) digest: String,
}

/// The id the request's event claims (its `Ce-Id` header, or a structured event's `id`), for
/// the log.
pub(crate) fn event_id(r: &InterceptorRequest) -> Option<String> {
    let header = r
        .header
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("ce-id"))
        .and_then(|(_, v)| v.first().cloned());
    header.or_else(|| {
        let body: Value = serde_json::from_str(&r.body).ok()?;
        body.get("id")?.as_str().map(str::to_string)
    })
}

/// Reads the `dev.imagegate.imagestreamtag.updated` CloudEvent `r` carries, in binary content
/// mode (attributes in `Ce-*` headers, the data the body) or structured (the body a
/// `application/cloudevents+json` object); Err says why it is not one.
pub(crate) fn claimed(r: &InterceptorRequest) -> Result<Claimed, String> {
    let header = |name: &str| {
        r.header
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .and_then(|(_, v)| v.first())
            .map(String::as_str)
    };
    let body: Value =
        serde_json::from_str(&r.body).map_err(|e| format!("the body is not JSON ({e})"))?;
    let structured = header("content-type")
        .is_some_and(|t| t.trim_start().starts_with("application/cloudevents+json"));
    let (specversion, ty, id, data) = if structured {
        let attr = |k: &str| body.get(k).and_then(Value::as_str).map(str::to_string);
        (
            attr("specversion"),
            attr("type"),
            attr("id"),
            body.get("data").cloned().unwrap_or(Value::Null),
        )
    } else {
        let h = |k: &str| header(k).map(str::to_string);
        (h("ce-specversion"), h("ce-type"), h("ce-id"), body)
    };
    if specversion.as_deref() != Some("1.0") {
        return Err(format!(
            "not a CloudEvent 1.0 (specversion {:?})",
            specversion.unwrap_or_default()
        ));
    }
    if ty.as_deref() != Some(types::UPDATED) {
        return Err(format!(
            "type {:?} is not {:?}: only a candidate's update starts a validation",
            ty.unwrap_or_default(),
            types::UPDATED
        ));
    }
    let id = id.filter(|i| !i.is_empty()).ok_or("the event has no id")?;
    let field = |k: &str| -> Result<String, String> {
        match data.get(k) {
            Some(Value::String(s)) if !s.is_empty() => Ok(s.clone()),
            _ => Err(format!("the event's data has no {k:?} string")),
        }
    };
    Ok(Claimed {
        id,
        namespace: field("namespace")?,
        imagestream: field("imageStream")?,
        tag: field("tag")?,
        digest: field("digest")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn binary(body: Value) -> InterceptorRequest {
        InterceptorRequest {
            body: body.to_string(),
            header: [
                ("Ce-Specversion", "1.0"),
                ("Ce-Type", types::UPDATED),
                ("Ce-Id", "abc"),
                ("Content-Type", "application/json"),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), vec![v.to_string()]))
            .collect(),
            ..Default::default()
        }
    }

    fn data() -> Value {
        json!({"namespace": "nb", "imageStream": "jupyter", "tag": "candidate", "digest": "sha256:aa"})
    }

    #[test]
    fn reads_a_binary_and_a_structured_event() {
        let want = Claimed {
            id: "abc".into(),
            namespace: "nb".into(),
            imagestream: "jupyter".into(),
            tag: "candidate".into(),
            digest: "sha256:aa".into(),
        };
        assert_eq!(claimed(&binary(data())).unwrap(), want);
        let structured = InterceptorRequest {
            body:
                json!({"specversion": "1.0", "type": types::UPDATED, "id": "abc", "data": data()})
                    .to_string(),
            header: [(
                "Content-Type".to_string(),
                vec!["application/cloudevents+json; charset=utf-8".to_string()],
            )]
            .into(),
            ..Default::default()
        };
        assert_eq!(claimed(&structured).unwrap(), want);
    }

    #[test]
    fn refuses_what_is_not_an_update_with_every_field() {
        let mut r = binary(data());
        r.header
            .insert("Ce-Type".into(), vec![types::DELETED.into()]);
        assert!(
            claimed(&r)
                .unwrap_err()
                .contains("only a candidate's update")
        );
        let mut r = binary(data());
        r.header.remove("Ce-Specversion");
        assert!(claimed(&r).unwrap_err().contains("not a CloudEvent"));
        let mut d = data();
        d["digest"] = json!(7);
        assert!(claimed(&binary(d)).unwrap_err().contains("\"digest\""));
        let mut r = binary(data());
        r.body = "not json".into();
        assert!(claimed(&r).unwrap_err().contains("not JSON"));
    }

    #[test]
    fn the_trigger_namespace_comes_from_the_trigger_id() {
        let c = |id: &str| TriggerContext {
            trigger_id: id.into(),
            ..Default::default()
        };
        assert_eq!(c("namespaces/nb/triggers/t").namespace(), Some("nb"));
        assert_eq!(c("namespaces//triggers/t").namespace(), None);
        assert_eq!(c("nb/t").namespace(), None);
    }

    #[test]
    fn a_response_says_continue_even_when_false() {
        let r = InterceptorResponse::default();
        assert_eq!(
            serde_json::to_value(&r).unwrap(),
            json!({"continue": false, "status": {}})
        );
    }
}
