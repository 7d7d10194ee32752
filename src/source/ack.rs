//! The acknowledgement step: a change the sink took (or the dead-letter sink took, or that was
//! refused for good and logged) moves its stream's delivered state in the checkpoint to the
//! state its delivery brings the tag to; a stopped delivery moves nothing, so the next start
//! sends the change again, with the same id.

use std::sync::Arc;

use super::checkpoint::{Checkpoint, StreamKey};
use super::deliver::job::Outcome;
use super::metrics::Metrics;
use super::pending::Pending;
use super::queue::{Finish, Job};
use super::state::StreamState;

/// What the checkpoint records once `pending` is delivered, given the state `recorded` for
/// its stream: the stream and its new state (None: nothing is left of it). None when nothing
/// is recorded: the ApiServerSource modes keep no checkpoint.
pub(crate) fn acknowledged(
    recorded: impl FnOnce(&StreamKey) -> Option<StreamState>,
    pending: Pending,
) -> Option<(StreamKey, Option<StreamState>)> {
    let Pending::Tag { change, after, .. } = pending else {
        return None;
    };
    let stream = (change.namespace, change.image_stream);
    let state =
        recorded(&stream)
            .unwrap_or_default()
            .told(&change.image_stream_uid, &change.tag, after);
    let state = Some(state).filter(|s| !s.tags.is_empty());
    Some((stream, state))
}

/// The queue's [`Finish`]: records each finished delivery into the checkpoint (a stopped one
/// records nothing; the ApiServerSource modes record nothing) and keeps the queue-depth gauge.
pub(crate) struct Recorder {
    /// Where the delivered state is recorded.
    pub checkpoint: Arc<Checkpoint>,
    /// The queue-depth gauge's.
    pub metrics: Metrics,
}

impl Finish<Pending, Outcome> for Recorder {
    fn finished(&mut self, job: Job<Pending>, outcome: Outcome, left: usize) {
        self.metrics.queue_depth.set(left as i64);
        if outcome.is_err() {
            return;
        }
        let checkpoint = &self.checkpoint;
        if let Some((stream, state)) = acknowledged(|key| checkpoint.get(key), job.item) {
            checkpoint.record(stream, state);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::change::{ChangeKind, TagChange};
    use crate::source::state::TagState;

    fn pending(kind: ChangeKind, tag: &str, after: Option<TagState>) -> Pending {
        Pending::Tag {
            change: TagChange {
                kind,
                namespace: "ds".into(),
                image_stream: "nb".into(),
                image_stream_uid: "u1".into(),
                tag: tag.into(),
                digest: Some("sha256:b".into()),
                previous_digest: None,
                docker_image_reference: None,
                generation: 3,
                time: None,
                reason: None,
                message: None,
            },
            found: chrono::Utc::now(),
            after,
        }
    }

    fn at(generation: i64) -> TagState {
        TagState {
            digest: Some(format!("sha256:{generation}").into()),
            generation,
            failure_generation: None,
        }
    }

    #[test]
    fn a_delivered_change_moves_its_tag_and_keeps_the_others() {
        let recorded = StreamState {
            uid: "u1".into(),
            tags: [("latest", at(1)), ("candidate", at(2))].into(),
        };
        let (key, state) = acknowledged(
            |_| Some(recorded.clone()),
            pending(ChangeKind::Updated, "candidate", Some(at(3))),
        )
        .unwrap();
        assert_eq!(key, ("ds".to_string(), "nb".to_string()));
        let state = state.unwrap();
        assert_eq!(state.tags["candidate"], at(3));
        assert_eq!(state.tags["latest"], at(1));
    }

    #[test]
    fn the_last_tags_deletion_forgets_the_stream() {
        let recorded = StreamState {
            uid: "u1".into(),
            tags: [("latest", at(1))].into(),
        };
        let acked = acknowledged(
            |_| Some(recorded.clone()),
            pending(ChangeKind::Deleted, "latest", None),
        );
        assert_eq!(acked, Some((("ds".into(), "nb".into()), None)));
        // Nothing recorded yet (a first delivery): the stream gets its first state.
        let acked = acknowledged(
            |_| None,
            pending(ChangeKind::Updated, "latest", Some(at(2))),
        );
        assert_eq!(acked.unwrap().1.unwrap().tags["latest"], at(2));
    }

    #[test]
    fn an_object_event_records_nothing() {
        use cloudevents::EventBuilder;
        let event = cloudevents::EventBuilderV10::new()
            .id("x")
            .ty("t")
            .source("/s")
            .build()
            .unwrap();
        assert_eq!(
            acknowledged(|_| unreachable!(), Pending::Object(Box::new(event))),
            None
        );
    }
}
