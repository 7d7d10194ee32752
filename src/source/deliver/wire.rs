//! The CloudEvents HTTP binding of an event: its headers and body, written once by the SDK's
//! binary or structured serialization, so that every attempt sends the same bytes.

use std::collections::HashMap;

use cloudevents::Event;
use cloudevents::event::SpecVersion;
use cloudevents::message::{
    BinaryDeserializer, BinarySerializer, MessageAttributeValue, StructuredDeserializer,
    StructuredSerializer,
};
use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};

use super::error::SendError;

// One enum for `--content-mode`, the ImageStreamSource's `spec.contentMode` (its doc is the
// CRD's description) and the delivery.
/// How events are written on the wire.
#[derive(serde::Serialize, serde::Deserialize, schemars::JsonSchema, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum ContentMode {
    /// Attributes in `ce-` headers, the data as the body (what Knative and Tekton expect).
    #[default]
    Binary,
    /// The whole event as `application/cloudevents+json`.
    Structured,
}

/// An event as it goes on the wire: its headers and body, written once by the CloudEvents SDK's
/// binary or structured serialization (the SDK walks the event and names the headers; this only
/// collects what it writes), so that every attempt sends the same bytes without encoding the
/// event again.
#[derive(Clone, Debug)]
pub struct Encoded {
    pub(super) headers: HeaderMap,
    pub(super) body: bytes::Bytes,
}

impl Encoded {
    /// `event` in `mode`: binary, each attribute and extension a header named as the SDK's
    /// HTTP binding names it (`ce-<name>`; `datacontenttype` is `Content-Type`) and the data
    /// the body; structured, the event as `application/cloudevents+json`.
    pub fn new(event: Event, mode: ContentMode) -> Result<Encoded, SendError> {
        let wire = Wire::default();
        match mode {
            ContentMode::Binary => event.deserialize_binary(wire),
            ContentMode::Structured => event.deserialize_structured(wire),
        }
        .map_err(|e| SendError::Encode(e.to_string()))
    }

    /// The headers.
    pub fn headers(&self) -> &HeaderMap {
        &self.headers
    }

    /// The body.
    pub fn body(&self) -> &[u8] {
        &self.body
    }
}

/// What the SDK's serialization writes into an [`Encoded`].
struct Wire {
    headers: HeaderMap,
}

impl Default for Wire {
    fn default() -> Self {
        // An event has about a dozen attributes and extensions: room for them at once.
        Wire {
            headers: HeaderMap::with_capacity(16),
        }
    }
}

thread_local! {
    /// The header name of each attribute seen, as the SDK's rule names it: the rule runs once
    /// per attribute name, not once per event. Attribute names are few (the context
    /// attributes, the source's extensions, `K_CE_OVERRIDES`'s, Knative's error extensions).
    static HEADER_NAMES: std::cell::RefCell<HashMap<Box<str>, HeaderName>> =
        std::cell::RefCell::new(HashMap::new());
}

impl Wire {
    /// The header of `attribute`, named by the SDK's HTTP binding rule (`ce-<name>`;
    /// `datacontenttype` is `Content-Type`).
    fn put(mut self, attribute: &str, value: String) -> cloudevents::message::Result<Self> {
        let name = header_name(attribute).map_err(other_error)?;
        let value = HeaderValue::try_from(value).map_err(other_error)?;
        self.headers.insert(name, value);
        Ok(self)
    }
}

/// `attribute`'s header name by the SDK's rule, from the cache once named.
fn header_name(attribute: &str) -> Result<HeaderName, http::header::InvalidHeaderName> {
    HEADER_NAMES.with_borrow_mut(|names| {
        if let Some(name) = names.get(attribute) {
            return Ok(name.clone());
        }
        let name = HeaderName::try_from(cloudevents::binding::http::header_prefix(attribute))?;
        names.insert(attribute.into(), name.clone());
        Ok(name)
    })
}

fn other_error(e: impl std::error::Error + Send + Sync + 'static) -> cloudevents::message::Error {
    cloudevents::message::Error::Other {
        source: Box::new(e),
    }
}

impl BinarySerializer<Encoded> for Wire {
    fn set_spec_version(self, version: SpecVersion) -> cloudevents::message::Result<Self> {
        self.put("specversion", version.to_string())
    }

    fn set_attribute(
        self,
        name: &str,
        value: MessageAttributeValue,
    ) -> cloudevents::message::Result<Self> {
        self.put(name, value.to_string())
    }

    fn set_extension(
        self,
        name: &str,
        value: MessageAttributeValue,
    ) -> cloudevents::message::Result<Self> {
        self.put(name, value.to_string())
    }

    fn end_with_data(self, bytes: Vec<u8>) -> cloudevents::message::Result<Encoded> {
        Ok(Encoded {
            headers: self.headers,
            body: bytes.into(),
        })
    }

    fn end(self) -> cloudevents::message::Result<Encoded> {
        Ok(Encoded {
            headers: self.headers,
            body: bytes::Bytes::new(),
        })
    }
}

impl StructuredSerializer<Encoded> for Wire {
    fn set_structured_event(mut self, bytes: Vec<u8>) -> cloudevents::message::Result<Encoded> {
        self.headers.insert(
            CONTENT_TYPE,
            HeaderValue::from_static("application/cloudevents+json"),
        );
        Ok(Encoded {
            headers: self.headers,
            body: bytes.into(),
        })
    }
}
