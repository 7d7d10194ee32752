//! Every parser of input from outside the process, each behind one function of raw bytes: the
//! entry points the fuzz targets in `fuzz/` run (docs/testing.md) and that a fast property test
//! (`tests/it/untrusted.rs`) runs on every test run. None may panic, whatever the bytes: bad
//! input is an error or a terminal status with a reason. Each returns whether the input was
//! taken (the two parsers of the custom task's input: or the message a run would end with),
//! which the property test uses to check that its seeds are taken and its refused cases refused
//! with the message they expect.

use std::sync::OnceLock;

use chrono::{DateTime, Utc};
use prometheus_client::registry::Registry;

use crate::api::CustomRun;
use crate::controller::crd::ImagePromotionSpec;
use crate::controller::params::{self, SpecSource};
use crate::source::metrics::Metrics;
use crate::source::watch::decode::{self, Reading, TagsAndLabels, TagsOnly, Watched, Whole};

/// A CustomRun as the watch delivers it: its spec source (an inline `customSpec` is parsed
/// here) and its params over that spec, as the controller reads them. Refused: the message the
/// run would end with (`InvalidParams`), or why it is not a CustomRun.
pub fn customrun(data: &[u8]) -> Result<(), String> {
    let run =
        serde_json::from_slice::<CustomRun>(data).map_err(|e| format!("not a CustomRun: {e}"))?;
    let spec = match params::spec_source(&run)? {
        SpecSource::Inline(spec) => *spec,
        SpecSource::Named(_) | SpecSource::Defaults => ImagePromotionSpec::default(),
    };
    params::parse(&run, &spec).map(drop)
}

/// An ImagePromotion spec as the API server stores it: its checks parsed on their own (every
/// problem listed) and a run that names it read over it. Refused: the message that run would
/// end with, or why it is not a spec.
pub fn imagepromotion_spec(data: &[u8]) -> Result<(), String> {
    let spec = serde_json::from_slice::<ImagePromotionSpec>(data)
        .map_err(|e| format!("not an ImagePromotion spec: {e}"))?;
    let checks = spec.checks.parse();
    let run: CustomRun = serde_json::from_value(serde_json::json!({
        "apiVersion": "tekton.dev/v1beta1", "kind": "CustomRun",
        "metadata": {"name": "r", "namespace": "ds"},
        "spec": {"params": [
            {"name": "imagestream", "value": "nb"},
            {"name": "digest", "value": format!("sha256:{}", "a".repeat(64))}
        ]}
    }))
    .expect("a CustomRun");
    params::parse(&run, &spec)?;
    checks.map(drop)
}

/// One object of a watch or a list, decoded as each reading of the source decodes it (the
/// lenient [`Watched`], which keeps the name of an object that does not parse), and what is
/// read of its tags: by the diff, every tag of its status; by the controller, the tags it names
/// (served, candidate, previous), which may have no status yet: a spec tag not yet imported, or
/// a tag the stream does not have. Taken: the stream parses as mode `imagestreamtag` reads it.
pub fn watch_object(data: &[u8]) -> bool {
    static METRICS: OnceLock<Metrics> = OnceLock::new();
    let metrics = METRICS.get_or_init(|| Metrics::register(&mut Registry::default()));
    let Ok(text) = std::str::from_utf8(data) else {
        return false;
    };
    let taken = watched::<TagsOnly>(text, metrics);
    watched::<TagsAndLabels>(text, metrics);
    watched::<Whole>(text, metrics);
    taken
}

/// Decodes `text` as the watch of reading `R` does and reads the stream's tags; whether it
/// parsed.
fn watched<R: Reading>(text: &str, metrics: &Metrics) -> bool {
    let Ok(object) = serde_json::from_str::<Watched<R>>(text) else {
        return false;
    };
    let _ = decode::key(&object);
    let Some(stream) = decode::typed(object, metrics) else {
        return false;
    };
    let status = stream.status.iter().flat_map(|s| &s.tags).map(|t| &t.tag);
    let spec = stream.spec.tags.iter().map(|t| &t.name);
    for tag in status.chain(spec) {
        let _ = stream.current_digest(tag);
        let _ = stream.history(tag);
    }
    let _ = stream.current_digest(params::DEFAULT_SERVED_TAG);
    true
}

/// One entry of a checkpoint ConfigMap (the value of a data key).
pub fn checkpoint_entry(data: &[u8]) -> bool {
    std::str::from_utf8(data)
        .is_ok_and(|text| crate::source::checkpoint::decode_state(text).is_some())
}

/// `K_CE_OVERRIDES`, as the source reads it at start.
pub fn ce_overrides(data: &[u8]) -> bool {
    serde_json::from_slice::<serde_json::Value>(data)
        .is_ok_and(|v| crate::source::event::override_extensions(&v).is_ok())
}

/// The durations of outside input: a CustomRun's `spec.timeout` and `checks.maxAge` (Go
/// durations) and `--backoff-delay` (ISO 8601).
pub fn durations(data: &[u8]) -> bool {
    let Ok(text) = std::str::from_utf8(data) else {
        return false;
    };
    let go = crate::api::customrun::parse_go_duration(text).is_ok();
    let iso = crate::source::deliver::parse_iso8601_duration(text).is_ok();
    go | iso
}

/// A sink's `Retry-After` header, at a fixed now.
pub fn retry_after(data: &[u8]) -> bool {
    let Ok(text) = std::str::from_utf8(data) else {
        return false;
    };
    let now: DateTime<Utc> = DateTime::from_timestamp(1_800_000_000, 0).expect("a time");
    crate::source::deliver::parse_retry_after(text, now).is_some()
}

/// A `--selector` label selector.
pub fn label_selector(data: &[u8]) -> bool {
    std::str::from_utf8(data).is_ok_and(|text| crate::api::selector::check(text).is_ok())
}

/// An ImageStreamSource as a tenant writes it, with the object its sink ref would read
/// (`{"source": <ImageStreamSource>, "sinkObject": <object or absent>}`): its spec checked as the
/// reconciler checks it, its settings made as the multi-tenant adapter makes them, its sink
/// planned and resolved. Taken: the spec is valid and the sink resolves.
pub fn imagestreamsource(data: &[u8]) -> bool {
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Input {
        source: crate::adapter::crd::ImageStreamSource,
        #[serde(default)]
        sink_object: Option<serde_json::Value>,
    }
    use crate::adapter::sink::resolve::{DEFAULT_CLUSTER_DOMAIN, Plan, plan, resolve};
    let Ok(input) = serde_json::from_slice::<Input>(data) else {
        return false;
    };
    let source = &input.source;
    if crate::adapter::reconcile::invalid(&source.spec).is_some() {
        return false;
    }
    let shared = crate::adapter::settings::Shared {
        events: crate::source::event::EventSettings::new("https://imagegate.dev/schemas/")
            .expect("the default schema base"),
        api_server_url: "https://api.example:6443".into(),
        guard: Default::default(),
        checkpoint_namespace: "imagegate-system".into(),
        max_queued: crate::adapter::join::DEFAULT_BOUND,
        checkpoint_cap: crate::adapter::settings::DEFAULT_CHECKPOINT_CAP,
        fence: Default::default(),
    };
    let settings = crate::adapter::settings::of(source, &shared).is_ok();
    let namespace = source.metadata.namespace.as_deref().unwrap_or("ns");
    let sink = match plan(&source.spec.sink, namespace) {
        Ok(Plan::Uri(_)) => true,
        Ok(Plan::Read(target)) => resolve(
            &source.spec.sink,
            &target,
            input.sink_object.as_ref(),
            DEFAULT_CLUSTER_DOMAIN,
        )
        .is_ok(),
        Err(_) => false,
    };
    settings && sink
}

/// The checkpoint's ConfigMaps as listed (a JSON list of ConfigMaps, any names, annotations and
/// data: a tenant writes them in their own namespace), read back as a start reads them: each
/// shard recognised by its name, the layout restored, the next flush planned. Taken: some
/// shard was recognised.
pub fn checkpoint_shards(data: &[u8]) -> bool {
    use k8s_openapi::api::core::v1::ConfigMap;
    let Ok(maps) = serde_json::from_slice::<Vec<ConfigMap>>(data) else {
        return false;
    };
    let found: Vec<_> = maps
        .into_iter()
        .filter_map(|cm| crate::source::checkpoint::found_shard("imagegate-source-checkpoint", cm))
        .collect();
    let taken = !found.is_empty();
    let restored = crate::source::checkpoint::layout::restore(found, true);
    let _ = restored.layout.plan();
    taken
}

/// One decision of the controller over objects anyone who may create CustomRuns, write
/// ImageStreams or run pipelines can shape:
/// `{"run", "promotions": [...], "stream", "image", "pipelineRun", "taskRuns": [...]}`: the run
/// judged by the ImagePromotions ([`crate::controller::policy::judge`]), its recorded target read
/// back, each action decided over the stream with the image and the evidence given, as often as
/// the decision asks for more. Taken: the run was judged and decided.
pub fn controller_decision(data: &[u8]) -> bool {
    use crate::api::{Image, ImageStream, PipelineRun, TaskRun};
    use crate::controller::checks::ImageFacts;
    use crate::controller::crd::ImagePromotion;
    use crate::controller::decide::{self, Ask, Decision, Fetched};
    use crate::controller::policy::{self, Own};
    use crate::controller::proof::Evidence;
    use crate::controller::status::Target;

    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Input {
        run: CustomRun,
        #[serde(default)]
        promotions: Vec<ImagePromotion>,
        stream: ImageStream,
        #[serde(default)]
        image: Option<Image>,
        #[serde(default)]
        pipeline_run: Option<PipelineRun>,
        #[serde(default)]
        task_runs: Vec<TaskRun>,
    }
    let Ok(input) = serde_json::from_slice::<Input>(data) else {
        return false;
    };
    let own = match params::spec_source(&input.run) {
        Ok(SpecSource::Defaults) => Own::Defaults,
        Ok(SpecSource::Inline(spec)) => Own::Inline(*spec),
        Ok(SpecSource::Named(name)) => {
            match input
                .promotions
                .iter()
                .find(|p| p.metadata.name.as_deref() == Some(&*name))
            {
                Some(p) => Own::Named(name, p.spec.clone()),
                None => return false,
            }
        }
        Err(_) => return false,
    };
    let Ok(judged) = policy::judge(&input.run, &own, &input.promotions) else {
        return false;
    };
    let request = &judged.request;
    let target = Target::recorded(&input.run).unwrap_or_else(|| Target::of(request));
    let ask = Ask::of(
        request,
        &target,
        input.run.metadata.name.as_deref().unwrap_or("r"),
    );
    let evidence = match input.pipeline_run {
        None => Evidence::NoPipelineRun,
        Some(pr) => Evidence::Found {
            pipeline_run: Box::new(pr),
            task_runs: input
                .task_runs
                .into_iter()
                .map(|t| (t.metadata.name.clone().unwrap_or_default(), Some(t)))
                .collect(),
            chains_keys: Vec::new(),
        },
    };
    let now: chrono::DateTime<Utc> = DateTime::from_timestamp(1_800_000_000, 0).expect("a time");
    let mut fetched = Fetched::default();
    let _ = decide::landed(&ask, &input.stream);
    for _ in 0..4 {
        match decide::decide(&ask, &input.stream, &fetched, now) {
            Decision::NeedImage { reference, .. } if fetched.image.is_none() => {
                let image = input.image.clone().unwrap_or_default();
                fetched.image = Some(ImageFacts::from_image(&reference, &image));
            }
            Decision::NeedEvidence if fetched.evidence.is_none() => {
                fetched.evidence = Some(evidence.clone());
            }
            _ => break,
        }
    }
    true
}

/// The target a restarted controller reads back from a run's status
/// (`status.extraFields.target`, which anyone with `customruns/status` write shapes): taken when
/// it reads as one.
pub fn recorded_target(data: &[u8]) -> bool {
    serde_json::from_slice::<CustomRun>(data)
        .ok()
        .and_then(|run| crate::controller::status::Target::recorded(&run))
        .is_some()
}
