//! What one ImageStreamSource's flow runs with (pure): the single source's [`Settings`], built
//! from the source's spec instead of the command line, with its own checkpoint.

use std::time::Duration;

use kube::ResourceExt;
use serde_json::json;

use crate::adapter::crd::ImageStreamSource;
use crate::source::Settings;
use crate::source::checkpoint::fit::fit;
use crate::source::checkpoint::{Cap, CheckpointConfig, CheckpointOwner, DEFAULT_WRITE_BUDGET};
use crate::source::deliver::{DEFAULT_MAX_BACKOFF, DeliverySpec, parse_iso8601_duration};
use crate::source::event::{EventSettings, override_extensions};
use crate::source::metrics::Metrics;
use crate::source::state::TagFilter;

/// The sink in a source's [`Settings`]: never sent to. Each delivery takes the sink from the
/// source's route ([`crate::source::deliver::job::Route`]), which follows the resolution.
pub(crate) const NO_SINK: &str = "http://sink.resolved.per.delivery.invalid/";
/// Deliveries in flight per source.
pub(crate) const CONCURRENCY: usize = 8;
/// How often a source's checkpoint is flushed at most.
pub(crate) const FLUSH_INTERVAL: Duration = Duration::from_millis(500);

/// What the whole adapter shares: the events' schema base and the API server's URL.
#[derive(Clone, Debug)]
pub(crate) struct Shared {
    /// The `dataschema` of the events.
    pub events: EventSettings,
    /// The API server's URL (the `source` of resource and reference events).
    pub api_server_url: String,
    /// Where a tenant's sink may not point or connect.
    pub guard: std::sync::Arc<crate::source::deliver::guard::Guard>,
    /// The adapter's own namespace (`POD_NAMESPACE`), where every source's checkpoint lives.
    pub checkpoint_namespace: String,
    /// The Lease as the fence of every checkpoint write ([`crate::runtime::leader::Fence`]).
    pub fence: crate::runtime::leader::Fence,
    /// Each source's bound, in events not yet delivered ([`super::join::Room`]).
    pub max_queued: usize,
    /// The most each source's checkpoint may hold.
    pub checkpoint_cap: Cap,
}

/// The default cap of a source's checkpoint: 16 MiB of entries (about 100,000 streams), in at
/// most 64 ConfigMaps ([`checkpoint_cap`]).
pub(crate) const DEFAULT_CHECKPOINT_CAP: Cap = checkpoint_cap(16 * 1024 * 1024);

/// The cap of a source's checkpoint of at most `bytes` of entries: in at most one ConfigMap per
/// 256 KiB, and 8 (a shard splits past 512 KiB and merges back when small, so that is room for
/// every layout of those bytes, the marker included).
pub(crate) const fn checkpoint_cap(bytes: usize) -> Cap {
    let shards = bytes / (256 * 1024);
    Cap {
        shards: if shards < 8 { 8 } else { shards },
        bytes,
    }
}

/// The longest `<namespace>.<name>` kept whole in a checkpoint's names: 253, less the suffix
/// `-imagegate-checkpoint` (21) and the longest shard suffix, `-h` and 40 bits (42).
pub(crate) const NAME_IN_PREFIX_MAX: usize = 253 - 21 - 42;

/// The name prefix of the checkpoint ConfigMaps of the source `namespace/name`, in the
/// adapter's namespace: `<namespace>.<name>-imagegate-checkpoint` (a namespace holds no `.`,
/// so no two sources share it; a long name is cut, with a hash of the whole: [`fit`]).
pub(crate) fn checkpoint_prefix(namespace: &str, name: &str) -> String {
    format!(
        "{}-imagegate-checkpoint",
        fit(&format!("{namespace}.{name}"), NAME_IN_PREFIX_MAX)
    )
}

/// The settings of `source`'s flow; the error says which field is wrong.
pub(crate) fn of(source: &ImageStreamSource, shared: &Shared) -> Result<Settings, String> {
    let spec = &source.spec;
    let namespace = source.namespace().unwrap_or_default();
    let delivery = spec.delivery.clone().unwrap_or_default();
    let duration = |field: &str, value: &Option<String>| {
        value
            .as_deref()
            .map(parse_iso8601_duration)
            .transpose()
            .map_err(|e| format!("spec.delivery.{field}: {e}"))
    };
    let backoff_delay =
        duration("backoffDelay", &delivery.backoff_delay)?.unwrap_or(Duration::from_millis(200));
    let sink_timeout = duration("timeout", &delivery.timeout)?;
    if sink_timeout == Some(Duration::ZERO) {
        return Err("spec.delivery.timeout: must be longer than 0 (default: 30 s)".into());
    }
    let overrides = spec
        .ce_overrides
        .as_ref()
        .map(|o| json!({"extensions": o.extensions}));
    if let Some(o) = &overrides {
        override_extensions(o).map_err(|e| format!("spec.ceOverrides: {e}"))?;
    }
    Ok(Settings {
        sink: NO_SINK.parse().expect("a URL"),
        overrides,
        ca_pem: spec.sink.ca_certs.clone(),
        // Per delivery, from the route (its resolved audience).
        oidc: None,
        sink_guard: Some(shared.guard.clone()),
        sink_timeout,
        namespaces: Vec::new(),
        selector: None,
        tags: TagFilter(spec.tags.clone()),
        mode: spec.mode.unwrap_or_default(),
        content_mode: spec.content_mode.unwrap_or_default(),
        delivery: DeliverySpec {
            retry: delivery.retry.map(|r| r.max(0) as u32),
            backoff_policy: delivery.backoff_policy.unwrap_or_default(),
            backoff_delay,
            max_backoff: DEFAULT_MAX_BACKOFF,
            // The route carries it, resolved.
            dead_letter_sink: None,
        },
        emit_existing: spec.emit_existing,
        admin_addr: ([127, 0, 0, 1], 0).into(),
        checkpoint: CheckpointConfig {
            namespace: shared.checkpoint_namespace.clone(),
            prefix: checkpoint_prefix(&namespace, &source.name_any()),
            flush_interval: FLUSH_INTERVAL,
            write_budget: DEFAULT_WRITE_BUDGET,
            cap: Some(shared.checkpoint_cap),
        },
        leader: None,
        events: shared.events.clone(),
        concurrency: CONCURRENCY,
        api_server_url: shared.api_server_url.clone(),
    })
}

/// The owner of `source`'s checkpoint.
pub(crate) fn owner(source: &ImageStreamSource) -> CheckpointOwner {
    CheckpointOwner {
        namespace: source.namespace().unwrap_or_default(),
        name: source.name_any(),
        uid: source.uid().unwrap_or_default(),
    }
}

/// The process metrics as one source's flow reports them: counters add up across sources;
/// gauges of one source's queue and checkpoint are its own, not registered (a process gauge
/// set by each source in turn would show whichever wrote last); [`super::backlog`] adds them up
/// into the process's.
pub(crate) fn metrics(process: &Metrics) -> Metrics {
    process.with_own_gauges()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_checkpoint_cap_has_room_for_every_layout_of_its_bytes() {
        assert_eq!(DEFAULT_CHECKPOINT_CAP.shards, 64);
        assert_eq!(checkpoint_cap(65_536).shards, 8, "never fewer than 8");
        let cap = checkpoint_cap(1 << 20);
        assert!(cap.holds(8, 1 << 20));
        assert!(!cap.holds(9, 10), "one ConfigMap too many");
        assert!(!cap.holds(1, (1 << 20) + 1), "one byte too many");
    }
    use crate::adapter::crd::{
        BackoffPolicy, CloudEventOverrides, Delivery, Destination, ImageStreamSourceSpec,
    };

    fn source(spec: ImageStreamSourceSpec) -> ImageStreamSource {
        let mut s = ImageStreamSource::new("team-a", spec);
        s.metadata.namespace = Some("ds".into());
        s.metadata.uid = Some("u1".into());
        s
    }

    fn shared() -> Shared {
        Shared {
            events: EventSettings::new("https://imagegate.dev/schemas/").unwrap(),
            api_server_url: "https://172.30.0.1:443".into(),
            guard: Default::default(),
            checkpoint_namespace: "imagegate-system".into(),
            max_queued: crate::adapter::join::DEFAULT_BOUND,
            checkpoint_cap: DEFAULT_CHECKPOINT_CAP,
            fence: Default::default(),
        }
    }

    #[test]
    fn a_source_gets_its_own_checkpoint_delivery_and_overrides() {
        let spec = ImageStreamSourceSpec {
            sink: Destination {
                uri: Some("http://x".into()),
                ..Default::default()
            },
            delivery: Some(Delivery {
                retry: Some(2),
                backoff_policy: Some(BackoffPolicy::Linear),
                backoff_delay: Some("PT1S".into()),
                timeout: Some("PT3S".into()),
                ..Default::default()
            }),
            ce_overrides: Some(CloudEventOverrides {
                extensions: [("team".to_string(), "a".to_string())].into(),
            }),
            tags: vec!["candidate".into()],
            emit_existing: true,
            ..Default::default()
        };
        let s = of(&source(spec), &shared()).unwrap();
        assert_eq!(
            s.checkpoint.namespace, "imagegate-system",
            "the adapter's, not the tenant's"
        );
        assert_eq!(s.checkpoint.prefix, "ds.team-a-imagegate-checkpoint");
        assert_eq!(s.delivery.retry, Some(2));
        assert_eq!(s.delivery.backoff_policy, BackoffPolicy::Linear);
        assert_eq!(s.delivery.backoff_delay, Duration::from_secs(1));
        assert_eq!(s.sink_timeout, Some(Duration::from_secs(3)));
        assert_eq!(s.overrides, Some(json!({"extensions": {"team": "a"}})));
        assert!(s.emit_existing && s.tags.allows("candidate") && !s.tags.allows("latest"));
        assert_eq!(owner(&source(Default::default())).uid, "u1");
    }

    #[test]
    fn a_long_name_gives_checkpoint_names_within_the_limit() {
        assert_eq!(
            checkpoint_prefix("ds", "team-a"),
            "ds.team-a-imagegate-checkpoint"
        );
        let (ns, long) = ("n".repeat(63), "t".repeat(253));
        let shard = format!("{}-h{}", checkpoint_prefix(&ns, &long), "0".repeat(40));
        assert_eq!(shard.len(), 253);
        assert_ne!(
            checkpoint_prefix(&ns, &long),
            checkpoint_prefix(&ns, &"t".repeat(252))
        );
    }

    #[test]
    fn a_bad_duration_or_extension_names_its_field() {
        let spec = ImageStreamSourceSpec {
            delivery: Some(Delivery {
                backoff_delay: Some("soon".into()),
                ..Default::default()
            }),
            ..Default::default()
        };
        let err = of(&source(spec), &shared()).unwrap_err();
        assert!(err.starts_with("spec.delivery.backoffDelay"), "{err}");
        let spec = ImageStreamSourceSpec {
            ce_overrides: Some(CloudEventOverrides {
                extensions: [("Bad-Name".to_string(), "a".to_string())].into(),
            }),
            ..Default::default()
        };
        let err = of(&source(spec), &shared()).unwrap_err();
        assert!(err.starts_with("spec.ceOverrides"), "{err}");
    }
}
