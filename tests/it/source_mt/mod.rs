//! `imagegate source --multi-tenant` end to end: the real binary against the emulator (which
//! serves the ImageStreamSource CRD and answers SubjectAccessReviews), real HTTP sinks.
//!
//! - [`core`]: one watch fanned out to overlapping sources, sources added and deleted while it
//!   runs, a restart with changes made meanwhile.
//! - [`join`]: a source joining while its namespace changes sees each state once, in order; after
//!   the feed starts over (410), it lists again and gets what changed meanwhile.
//! - [`routing`]: events wait for a sink that does not resolve; a namespace the source's
//!   service account may not read sends it nothing.
//! - [`harness`]: the emulated cluster of the other modules (our CRD, Knative's released Broker CRD,
//!   Triggers' released EventListener CRD, the team namespaces), sinks behind Brokers,
//!   EventListeners and Services, and the adapter as `config/multi-tenant/400` runs it.
//! - [`sinks`]: each kind of sink, each reason a source is not Ready, a sink that moves or goes
//!   away, the delivery counters.
//! - [`tenants`]: permissions per namespace, overlapping sources, a source deleted mid-stream,
//!   the one watch of every namespace and each source's own lists.
//! - [`restart`]: changes made while the adapter was down, and a re-list, delivered once.
//! - [`modes`]: resource and reference modes send nothing on start or re-list; emitExisting.
//! - [`rbac`]: the adapter's requests against the RBAC of `config/`, both ways.
//! - [`backlog`]: the backlog gauges rise while a tenant's sink refuses and fall when it
//!   recovers.
//! - [`bound`]: a tenant whose sink refuses while its streams change stays at its bound, and
//!   catches up with every change once the sink recovers.
//! - [`permissions`]: reviews asked when RBAC changes where a source reads, not on a timer (a
//!   tenant churning RBAC holds none up); a
//!   grant or a revocation served within seconds.
//! - [`caps`]: a source whose checkpoint is past the cap (at start, or grown while served) is
//!   read no further, not served, and says why; the other source is served.
//! - [`leader`]: two replicas on one Lease: only the leader serves; the standby takes over
//!   when the leader is killed or stops, and delivers what changed meanwhile once.

mod backlog;
mod bound;
mod caps;
mod core;
mod harness;
mod join;
mod leader;
mod modes;
mod permissions;
mod rbac;
mod ready;
mod restart;
mod routing;
mod sinks;
mod tenants;
