//! What waits in the delivery queue: a change as what its CloudEvent is built from (mode
//! `imagestreamtag`), or a built event (the ApiServerSource modes, whose event carries the
//! whole object, which is not kept otherwise).

use chrono::{DateTime, Utc};
use cloudevents::{AttributesReader, Event};
use serde_json::Value;
use tracing::warn;

use super::change::TagChange;
use super::event::{self, EventSettings};
use super::state::TagState;

/// A queued event, as what it is built from. The CloudEvent is built when its delivery
/// starts, once (every attempt sends it as built): a built event (attributes, an extension
/// map, the data as a JSON value) is several times the size of its change, and in a burst or a
/// catch-up tens of thousands wait in the queue.
// Nearly every job is a `Tag`: boxing the change would add an allocation to each.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub(crate) enum Pending {
    /// Mode imagestreamtag.
    Tag {
        /// The change.
        change: TagChange,
        /// When it was found: the event's time when the change has none (a deletion).
        found: DateTime<Utc>,
        /// The tag's delivered state once it is delivered (None: the tag is gone), what the
        /// checkpoint records for it.
        after: Option<TagState>,
    },
    /// Modes resource and reference: the event, built from the object (which is not kept);
    /// these modes keep no checkpoint.
    Object(Box<Event>),
}

impl Pending {
    /// The CloudEvent to deliver, `K_CE_OVERRIDES` applied. The same for every call: the id
    /// and the time come from the change and when it was found, never from the clock now.
    pub(crate) fn event(&self, settings: &EventSettings, overrides: Option<&Value>) -> Event {
        let mut ev = match self {
            Pending::Tag { change, found, .. } => event::tag_event(change, settings, *found),
            Pending::Object(ev) => (**ev).clone(),
        };
        if let Some(o) = overrides
            && let Err(e) = event::apply_overrides(&mut ev, o)
        {
            warn!(error = %e, "K_CE_OVERRIDES not applied");
        }
        ev
    }

    /// The event's type (the overrides never change it).
    pub(crate) fn ty(&self) -> &str {
        match self {
            Pending::Tag { change, .. } => event::tag_type(change.kind),
            Pending::Object(ev) => ev.ty(),
        }
    }

    /// The event's id.
    pub(crate) fn id(&self) -> String {
        match self {
            Pending::Tag { change, .. } => event::event_id(change),
            Pending::Object(ev) => ev.id().to_owned(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::change::ChangeKind;

    fn change(kind: ChangeKind, tag: &str, digest: Option<&str>, generation: i64) -> TagChange {
        TagChange {
            kind,
            namespace: "ds".into(),
            image_stream: "nb".into(),
            image_stream_uid: "u1".into(),
            tag: tag.into(),
            digest: digest.map(str::to_string),
            previous_digest: None,
            docker_image_reference: None,
            generation,
            time: None,
            reason: None,
            message: None,
        }
    }

    #[test]
    fn a_queued_change_builds_the_same_event_each_time_with_the_overrides() {
        let found = chrono::DateTime::parse_from_rfc3339("2026-12-01T10:00:00Z")
            .unwrap()
            .with_timezone(&Utc);
        let pending = Pending::Tag {
            change: change(ChangeKind::Deleted, "latest", Some("sha256:a"), 2),
            found,
            after: None,
        };
        let overrides = serde_json::json!({"extensions": {"team": "ml"}});
        let settings = EventSettings::default();
        let first = pending.event(&settings, Some(&overrides));
        let again = pending.event(&settings, Some(&overrides));
        assert_eq!(first, again);
        let change = change(ChangeKind::Deleted, "latest", Some("sha256:a"), 2);
        assert_eq!(first.id(), event::event_id(&change));
        assert_eq!(
            first.time(),
            Some(&found),
            "a deletion's time is when it was found"
        );
        assert_eq!(
            first.extension("team").map(ToString::to_string).as_deref(),
            Some("ml")
        );
    }

    #[test]
    fn the_type_and_id_are_the_built_events() {
        let pending = Pending::Tag {
            change: change(ChangeKind::Updated, "latest", Some("sha256:a"), 2),
            found: Utc::now(),
            after: None,
        };
        let overrides = serde_json::json!({"extensions": {"team": "ml"}});
        let built = pending.event(&EventSettings::default(), Some(&overrides));
        assert_eq!(pending.ty(), built.ty());
        assert_eq!(pending.id(), built.id());
        let object = Pending::Object(Box::new(built.clone()));
        assert_eq!(object.ty(), built.ty());
        assert_eq!(object.id(), built.id());
    }
}
