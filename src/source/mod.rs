//! `imagegate source`: ImageStream tag changes as CloudEvents, delivered without loss.
//!
//! The data flows one way: watch ImageStreams -> [`diff`] (pure: state against state, per tag)
//! -> [`event`] (pure: one CloudEvent per [`change::TagChange`]) -> delivery with retries and a
//! dead-letter sink, with the delivered state checkpointed in the cluster. This session lands
//! the pure core; the adapter loop, delivery and checkpointing follow (issue 3).

pub mod change;
pub mod diff;
pub mod event;
