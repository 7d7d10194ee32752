//! `imagegate source --multi-tenant` end to end: the real binary against the emulator (which
//! serves the ImageStreamSource CRD and answers SubjectAccessReviews), real HTTP sinks.
//!
//! - [`core`]: shared watches fanned out to overlapping sources, sources added and deleted
//!   while it runs, a restart with changes made meanwhile.

mod core;
