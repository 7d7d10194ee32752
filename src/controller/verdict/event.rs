//! A verdict as a CloudEvent (pure): what the gate decided about a stream's served tag, for a
//! receiver that tells users a new image is served, or restarts workbenches. One type per verdict
//! (`dev.imagegate.verdict.<kind>`), one data schema (`schemas/verdict.json`), and an id that is
//! the same on every attempt, every replica and after a restart: a hash of the type and what the
//! verdict is about (the CustomRun's uid for a run's verdict; the stream, tag, digest and reason
//! for the ledger's and the tamper check's), so receivers can drop a second delivery.

use chrono::{DateTime, Utc};
use cloudevents::{Event, EventBuilder, EventBuilderV10};
use serde_json::{Value, json};

use crate::source::event::{APPLICATION_JSON, ext, hash_id};

/// The type prefix.
pub(crate) const TYPE_PREFIX: &str = "dev.imagegate.verdict.";

/// What was decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// The served tag is marked `Validating` for a candidate (its image unchanged).
    Validating,
    /// The served tag moved to the validated digest.
    Promoted,
    /// The candidate failed (or got no verdict after its re-drives): the served tag keeps its
    /// image and is marked `UpdateFailed`.
    UpdateFailed,
    /// The served tag returned to a digest it served before.
    RolledBack,
    /// A tag the gate served was moved by someone else (reported or put back).
    Tampered,
    /// A candidate has no verdict past the grace period: its validation never began, or ended
    /// without `promote` or `reject`.
    Lost,
}

impl Kind {
    /// Every kind.
    pub const ALL: [Kind; 6] = [
        Kind::Validating,
        Kind::Promoted,
        Kind::UpdateFailed,
        Kind::RolledBack,
        Kind::Tampered,
        Kind::Lost,
    ];

    /// The last part of the type, and the metric's label.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Kind::Validating => "validating",
            Kind::Promoted => "promoted",
            Kind::UpdateFailed => "updatefailed",
            Kind::RolledBack => "rolledback",
            Kind::Tampered => "tampered",
            Kind::Lost => "lost",
        }
    }

    /// The CloudEvent type.
    pub(crate) fn event_type(self) -> String {
        format!("{TYPE_PREFIX}{}", self.name())
    }
}

/// A verdict on one stream's served tag.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    /// What was decided.
    pub kind: Kind,
    /// The stream's namespace.
    pub namespace: String,
    /// The stream.
    pub imagestream: String,
    /// The served tag.
    pub served_tag: String,
    /// The digest the verdict is about: the candidate being validated, the one promoted, the
    /// one that failed, the one rolled back to, the one the tag was moved to, the one lost.
    pub digest: String,
    /// What the served tag serves after the verdict ("" when the verdict does not say).
    pub served_digest: String,
    /// What it served before ("" when unchanged or unknown).
    pub previous_digest: String,
    /// The reason (a CustomRun condition reason, or the ledger's or tamper check's).
    pub reason: String,
    /// The message.
    pub message: String,
    /// The CustomRun that decided it, if one did.
    pub customrun: Option<String>,
    /// What makes its id: the CustomRun's uid, or the stream's uid (with the digest and reason).
    pub key: String,
    /// When it was decided (the run's completion, or when the controller saw it).
    pub time: DateTime<Utc>,
}

/// The event's id: 40 hex characters, the same for every delivery of one verdict.
pub(crate) fn id(v: &Verdict) -> String {
    hash_id(&[
        &v.kind.event_type(),
        &v.key,
        &v.namespace,
        &v.imagestream,
        &v.served_tag,
        &v.digest,
        &v.reason,
    ])
}

/// The CloudEvent of `v`; `dataschema` is `<schema_base>verdict.json` when a base is given.
pub fn event(v: &Verdict, schema_base: Option<&url::Url>) -> Event {
    let source = format!(
        "/apis/image.openshift.io/v1/namespaces/{}/imagestreams/{}",
        v.namespace, v.imagestream
    );
    let builder = EventBuilderV10::new()
        .id(id(v))
        .ty(v.kind.event_type())
        .source(source)
        .subject(format!("{}:{}", v.imagestream, v.served_tag))
        .time(v.time)
        .extension(ext::NAMESPACE, v.namespace.as_str())
        .extension(ext::IMAGESTREAM, v.imagestream.as_str())
        .extension(ext::IMAGETAG, v.served_tag.as_str())
        .extension(ext::IMAGEDIGEST, v.digest.as_str());
    let data = data(v);
    let schema = schema_base.and_then(|b| b.join("verdict.json").ok());
    let builder = match schema {
        Some(s) => builder.data_with_schema(APPLICATION_JSON, s, data),
        None => builder.data(APPLICATION_JSON, data),
    };
    builder
        .build()
        .unwrap_or_else(|e| panic!("a verdict event has every required attribute: {e}"))
}

/// The data (`schemas/verdict.json`); absent values are `null`.
pub(crate) fn data(v: &Verdict) -> Value {
    let or_null = |s: &str| {
        if s.is_empty() {
            Value::Null
        } else {
            Value::String(s.to_string())
        }
    };
    json!({
        "verdict": v.kind.name(),
        "namespace": v.namespace,
        "imageStream": v.imagestream,
        "servedTag": v.served_tag,
        "digest": v.digest,
        "servedDigest": or_null(&v.served_digest),
        "previousDigest": or_null(&v.previous_digest),
        "reason": v.reason,
        "message": v.message,
        "customRun": v.customrun,
    })
}

#[cfg(test)]
mod tests {
    use cloudevents::AttributesReader;

    use super::*;

    fn verdict(kind: Kind) -> Verdict {
        Verdict {
            kind,
            namespace: "notebooks".into(),
            imagestream: "jupyter".into(),
            served_tag: "latest".into(),
            digest: "sha256:bb".into(),
            served_digest: "sha256:bb".into(),
            previous_digest: "sha256:aa".into(),
            reason: "Promoted".into(),
            message: "latest promoted".into(),
            customrun: Some("pr-promote".into()),
            key: "uid-1".into(),
            time: "2026-12-06T01:02:03Z".parse().unwrap(),
        }
    }

    #[test]
    fn the_event_carries_the_verdict_and_the_same_id_every_time() {
        let v = verdict(Kind::Promoted);
        let base: url::Url = "https://imagegate.dev/schemas/".parse().unwrap();
        let e = event(&v, Some(&base));
        assert_eq!(e.ty(), "dev.imagegate.verdict.promoted");
        assert_eq!(e.id(), id(&v));
        assert_eq!(e.id().len(), 40);
        assert_eq!(event(&v, None).id(), e.id());
        assert_eq!(e.subject(), Some("jupyter:latest"));
        assert_eq!(
            e.dataschema().map(|u| u.as_str()),
            Some("https://imagegate.dev/schemas/verdict.json")
        );
        let data = data(&v);
        assert_eq!(data["verdict"], "promoted");
        assert_eq!(data["previousDigest"], "sha256:aa");
        assert_eq!(data["customRun"], "pr-promote");
    }

    #[test]
    fn another_kind_key_or_digest_is_another_id() {
        let v = verdict(Kind::Promoted);
        assert_ne!(id(&verdict(Kind::UpdateFailed)), id(&v));
        let mut other = v.clone();
        other.key = "uid-2".into();
        assert_ne!(id(&other), id(&v));
        let mut other = v.clone();
        other.digest = "sha256:cc".into();
        assert_ne!(id(&other), id(&v));
        // The message and the time are not part of what was decided.
        let mut same = v.clone();
        same.message = "reworded".into();
        same.time = Utc::now();
        assert_eq!(id(&same), id(&v));
    }

    #[test]
    fn absent_digests_are_null() {
        let mut v = verdict(Kind::Lost);
        v.served_digest.clear();
        v.previous_digest.clear();
        v.customrun = None;
        let d = data(&v);
        assert!(
            d["servedDigest"].is_null()
                && d["previousDigest"].is_null()
                && d["customRun"].is_null()
        );
    }
}
