//! imagegate-demo: the whole loop on one machine, with no cluster. The library is the demo
//! ([`run`]); `src/main.rs` is the thin `imagegate-demo` binary (`cargo demo`).
//!
//! The embedded API emulator holds four notebook ImageStreams (`examples/`), Tekton's CustomRun,
//! PipelineRun and TaskRun CRDs (the emulator's stand-ins) and imagegate's ImagePromotion CRD. The real source ([`imagegate::source::run`]) and the real
//! controller ([`imagegate::controller::run`]) run against it over HTTP, each as its own service
//! account. Between them sits a stand-in for Tekton: an HTTP EventListener and a pipeline runner
//! that do what the files in `tekton/` say (the private modules `tekton`, `listener` with `request`
//! and the CEL `interceptor`, `pipeline` with the `objects` it writes: PipelineRuns, TaskRuns);
//! the one thing it simulates is the container of the smoke-test Task.
//!
//! Six scenarios ([`scenarios`]) run in turn, each checked against what should happen; the demo
//! ends with a table of every stream's served digest and phase and one of what the Open Data Hub
//! dashboard shows for it ([`dashboard`]: the offered tags, the default's build, the badge of a
//! workbench started when the demo began), and fails if any scenario ended otherwise.
//! [`dashboard_model`] is the model of the dashboard those lines come from, held to the
//! dashboard's own code by the product's tests (`tests/it/odh_dashboard_check.rs`); it lives here,
//! outside the product, because only the tests and the demo use it.
//!
//! [`real`] plays the same scenarios on a real cluster with the real Tekton
//! (`scripts/realcluster demo`, the `imagegate-realdemo` binary).

mod clusterinterceptor;
mod dashboard;
pub mod dashboard_model;
mod interceptor;
mod listener;
mod objects;
mod pipeline;
pub mod ready;
pub mod real;
mod request;
mod scenarios;
mod schedule;
pub mod standin;
mod table;
mod tekton;
mod timeline;

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, anyhow, bail};
use futures::{FutureExt, StreamExt};
use kube::Api;
use kube::api::{DynamicObject, GroupVersionKind, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::{Value, json};
use tokio::sync::Notify;

use imagegate::api::ImageStream;
use imagegate_emulator::ImportRequest;
use imagegate_emulator::{Config, Emulator};

use self::dashboard::Shown;
use self::listener::Listener;
use self::pipeline::{RunRecord, Runner, TaskCall, TaskOutcome, TaskStatus, Validator};
use self::tekton::{TektonFiles, str_at};
use self::timeline::{Timeline, short_digest, short_name};

/// The namespace of the sample ImageStreams and of the Tekton objects.
pub const NAMESPACE: &str = "notebooks";
/// The namespace imagegate runs in.
const SYSTEM_NAMESPACE: &str = "imagegate-system";
const SOURCE_USER: &str = "system:serviceaccount:imagegate-system:imagegate-source";
const CONTROLLER_USER: &str = "system:serviceaccount:imagegate-system:imagegate-controller";
const INTERCEPTOR_USER: &str = "system:serviceaccount:imagegate-system:imagegate-interceptor";
const TEKTON_USER: &str = "system:serviceaccount:tekton-pipelines:tekton-pipelines-controller";

const SEED: &str = include_str!("../../../examples/notebook-imagestreams.yaml");
/// The ClusterRole that holds the permission to promote, which `tekton/` binds.
const PROMOTER_ROLE: &str = include_str!("../../../config/204-clusterrole-promoter.yaml");

/// How the demo runs.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// Leave everything running after the scenarios, until interrupted.
    pub keep_running: bool,
    /// Where `--keep-running` writes the kubeconfig.
    pub kubeconfig: PathBuf,
    /// Read `tekton/` from here instead of the copy compiled into the binary.
    pub tekton_dir: Option<PathBuf>,
}

/// One row of the final table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Row {
    /// The ImageStream.
    pub imagestream: String,
    /// The digest the served tag serves.
    pub served: String,
    /// The served tag's `imagegate.dev/phase`.
    pub phase: String,
    /// The candidate tag's digest.
    pub candidate: String,
    /// What the Open Data Hub dashboard shows for the stream.
    pub dashboard: Shown,
}

fn digest(c: char) -> String {
    format!("sha256:{}", c.to_string().repeat(64))
}

/// What a smoke test does with a digest.
#[derive(Clone)]
enum Plan {
    Pass,
    Fail(&'static str),
    /// Pass once the gate opens (the demo holds a validation to move the candidate meanwhile).
    PassAfter(Arc<Notify>),
}

/// The smoke-test Task's stand-in: the demo runs no containers, so each digest's outcome is set
/// by the scenario that imports it.
#[derive(Default)]
struct SmokeTests(Mutex<HashMap<String, Plan>>);

impl SmokeTests {
    fn plan(&self, digest: &str, plan: Plan) {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(digest.to_string(), plan);
    }

    fn validator(self: &Arc<Self>, timeline: Arc<Timeline>) -> Validator {
        let smoke = self.clone();
        Arc::new(move |call: TaskCall| {
            let smoke = smoke.clone();
            let timeline = timeline.clone();
            async move {
                let image = call.params.get("image").cloned().unwrap_or_default();
                let digest = image.rsplit_once('@').map(|(_, d)| d.to_string());
                let command = call
                    .params
                    .get("command")
                    .cloned()
                    .unwrap_or_else(|| call.env.get("SMOKE_TEST").cloned().unwrap_or_default());
                let plan = digest
                    .as_deref()
                    .and_then(|d| {
                        smoke
                            .0
                            .lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .get(d)
                            .cloned()
                    })
                    .unwrap_or(Plan::Pass);
                timeline.line(
                    "validate",
                    format!(
                        "{} {}: running `{}` in {} (simulated: the demo runs no containers)",
                        short_name(&call.pipeline_run),
                        call.task,
                        first_line(&command),
                        short_digest(digest.as_deref().unwrap_or(&image)),
                    ),
                );
                if digest.is_none() {
                    return failed("InvalidImage", "the image is not pinned by digest");
                }
                match plan {
                    Plan::Pass => passed(),
                    Plan::Fail(output) => failed("Failed", output),
                    Plan::PassAfter(gate) => {
                        if tokio::time::timeout(Duration::from_secs(15), gate.notified())
                            .await
                            .is_err()
                        {
                            return failed("TaskRunTimeout", "the demo never released this run");
                        }
                        passed()
                    }
                }
            }
            .boxed()
        })
    }
}

fn first_line(s: &str) -> String {
    let words: Vec<&str> = s.split_whitespace().collect();
    let joined = words.join(" ");
    if joined.chars().count() > 48 {
        format!("{}…", joined.chars().take(47).collect::<String>())
    } else {
        joined
    }
}

fn passed() -> TaskOutcome {
    TaskOutcome {
        status: TaskStatus::Succeeded,
        reason: "Succeeded".into(),
        message: "exit 0".into(),
        results: BTreeMap::new(),
    }
}

fn failed(reason: &str, output: &str) -> TaskOutcome {
    TaskOutcome {
        status: TaskStatus::Failed,
        reason: reason.into(),
        message: output.into(),
        results: BTreeMap::new(),
    }
}

/// The demo's world: the emulator, the two programs, the Tekton stand-in.
struct World {
    emulator: Emulator,
    files: TektonFiles,
    timeline: Arc<Timeline>,
    listener: Arc<Listener>,
    runner: Runner,
    smoke: Arc<SmokeTests>,
    admin: kube::Client,
    served_tag: String,
    candidate_tag: String,
    /// Per stream, a workbench started from the served tag when the demo began.
    workbenches: BTreeMap<String, crate::dashboard_model::Workbench>,
    /// Per stream, the served tag's annotations when the demo began (what its builds carry).
    served_at_start: BTreeMap<String, BTreeMap<String, String>>,
    stop: tokio::sync::watch::Sender<bool>,
    tasks: Vec<tokio::task::JoinHandle<anyhow::Result<()>>>,
}

/// ClusterInterceptor `imagegate` of config/triggers/, its URL `https://localhost:<port>/`.
async fn create_cluster_interceptor(admin: &kube::Client, at: SocketAddr) -> anyhow::Result<()> {
    const FILE: &str = include_str!("../../../config/triggers/400-interceptor.yaml");
    let mut ci: serde_json::Value = serde_norway::Deserializer::from_str(FILE)
        .map(serde::Deserialize::deserialize)
        .collect::<Result<Vec<serde_json::Value>, _>>()?
        .into_iter()
        .find(|o| o["kind"] == "ClusterInterceptor")
        .ok_or_else(|| anyhow!("config/triggers/ has no ClusterInterceptor"))?;
    ci["spec"]["clientConfig"] = json!({"url": format!("https://localhost:{}/", at.port())});
    let ar = kube::api::ApiResource {
        group: "triggers.tekton.dev".into(),
        version: "v1alpha1".into(),
        api_version: "triggers.tekton.dev/v1alpha1".into(),
        kind: "ClusterInterceptor".into(),
        plural: "clusterinterceptors".into(),
    };
    let api: Api<kube::api::DynamicObject> = Api::all_with(admin.clone(), &ar);
    api.create(&Default::default(), &serde_json::from_value(ci)?)
        .await
        .context("cannot create ClusterInterceptor imagegate")?;
    Ok(())
}

fn free_addr() -> anyhow::Result<SocketAddr> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").context("cannot bind a local port")?;
    Ok(l.local_addr()?)
}

async fn wait_ready(name: &str, addr: SocketAddr) -> anyhow::Result<()> {
    ready::admin_ready(addr, Duration::from_secs(10))
        .await
        .map_err(|e| anyhow!("{name} did not become ready: {e}"))
}

impl World {
    async fn start(opts: &Options, timeline: Arc<Timeline>) -> anyhow::Result<World> {
        let files = match &opts.tekton_dir {
            Some(dir) => TektonFiles::from_dir(dir)?,
            None => TektonFiles::embedded()?,
        };
        let promotion = files.single("ImagePromotion")?.clone();
        let served_tag = str_at(&promotion, "/spec/servedTag")
            .unwrap_or("latest")
            .to_string();
        let candidate_tag = str_at(&promotion, "/spec/candidateTag")
            .unwrap_or("candidate")
            .to_string();

        let emulator = Emulator::start(Config::default())
            .await
            .context("cannot start the API emulator")?;
        let seed = |text: &str, what: &str| {
            emulator
                .seed_str(text)
                .map_err(|e| anyhow!("cannot seed {what}: {}", e.message))
        };
        seed(
            &format!("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {SYSTEM_NAMESPACE}\n"),
            "the imagegate-system namespace",
        )?;
        seed(
            &imagegate::controller::crd::crd_yaml(),
            "the ImagePromotion CRD",
        )?;
        seed(PROMOTER_ROLE, "config/204-clusterrole-promoter.yaml")?;
        for crd in [
            imagegate_emulator::tekton::pipelinerun_crd(),
            imagegate_emulator::tekton::taskrun_crd(),
            imagegate_emulator::tekton::clusterinterceptor_crd(),
        ] {
            emulator
                .seed(crd)
                .map_err(|e| anyhow!("cannot seed a Tekton CRD: {}", e.message))?;
        }
        let streams = seed(SEED, "examples/notebook-imagestreams.yaml")?;
        let admin = emulator.client()?;
        let seeded = Api::<ImageStream>::namespaced(admin.clone(), NAMESPACE)
            .list(&Default::default())
            .await?
            .items;
        // The seeded builds carry the commits the examples' served tags name, as shipped images
        // carry the commit their manifests name; a workbench is started from each.
        let mut served_at_start = BTreeMap::new();
        for is in &seeded {
            let name = is.metadata.name.clone().unwrap_or_default();
            let served = is.spec_tag(&served_tag).and_then(|t| t.annotations.clone());
            if let Some(d) = is.current_digest(&served_tag) {
                let labels = dashboard::labels(d, served.as_ref());
                emulator
                    .set_image_metadata(d, json!({"Config": {"Labels": labels}}))
                    .map_err(|e| anyhow!("cannot label {name}'s image: {}", e.message))?;
            }
            served_at_start.insert(name, served.unwrap_or_default());
        }
        let workbenches = dashboard::started(&seeded, &served_tag);
        create_namespaced(&admin, promotion).await?;
        // The pipeline's identity and its permission to promote, as `kubectl apply -k tekton/`.
        for kind in ["ServiceAccount", "Role", "RoleBinding"] {
            for obj in files.all(kind) {
                create_namespaced(&admin, obj.clone()).await?;
            }
        }
        timeline.line(
            "cluster",
            format!(
                "API emulator at {} with {} objects from examples/notebook-imagestreams.yaml, \
                 the CustomRun, PipelineRun, TaskRun and ImagePromotion CRDs, the ClusterRole imagegate-promoter from \
                 config/, and from tekton/ ImagePromotion notebooks and the pipeline's service \
                 account, with the Role imagegate-promoter (promote on notebooks only)",
                emulator.url(),
                streams.len()
            ),
        );

        let smoke = Arc::new(SmokeTests::default());
        let runner = Runner::new(
            files.clone(),
            emulator.client_as(TEKTON_USER)?,
            NAMESPACE,
            smoke.validator(timeline.clone()),
            timeline.clone(),
        );
        let (stop, stop_rx) = tokio::sync::watch::channel(false);
        let stopped = move || {
            let mut rx = stop_rx.clone();
            async move {
                let _ = rx.wait_for(|s| *s).await;
            }
        };
        let mut tasks = Vec::new();
        // The imagegate interceptor, as config/triggers/ installs it: ClusterInterceptor `imagegate`
        // (its URL on this machine instead of the Service), the real program behind it.
        let interceptor_addr = free_addr()?;
        create_cluster_interceptor(&admin, interceptor_addr).await?;
        let interceptor_admin = free_addr()?;
        tasks.push(tokio::spawn(imagegate::interceptor::run(
            emulator.client_as(INTERCEPTOR_USER)?,
            imagegate::interceptor::Settings {
                admin_addr: interceptor_admin,
                addr: interceptor_addr,
                namespace: SYSTEM_NAMESPACE.into(),
                names: vec!["localhost".into()],
                tls_secret: "imagegate-interceptor-tls".into(),
                run_key_secret: imagegate::runkey::DEFAULT_SECRET.into(),
                cluster_interceptor: "imagegate".into(),
            },
            stopped(),
        )));
        wait_ready("imagegate interceptor", interceptor_admin).await?;
        timeline.line(
            "interceptor",
            format!(
                "imagegate interceptor at https://localhost:{} (ClusterInterceptor imagegate): \
                 passes on only a governed stream's current candidate",
                interceptor_addr.port()
            ),
        );
        let listener = Listener::new(
            files.clone(),
            clusterinterceptor::ClusterInterceptors::new(admin.clone()),
            NAMESPACE,
            runner.clone(),
            timeline.clone(),
        )?;
        let el_socket = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let el_url = format!("http://{}/", el_socket.local_addr()?);
        tasks.push(tokio::spawn({
            let listener = listener.clone();
            let stopped = stopped();
            async move { listener.serve(el_socket, stopped).await.map_err(Into::into) }
        }));
        timeline.line(
            "listener",
            format!("EventListener stand-in at {el_url} running tekton/430-eventlistener.yaml"),
        );

        let controller_addr = free_addr()?;
        tasks.push(tokio::spawn(imagegate::controller::run(
            emulator.client_as(CONTROLLER_USER)?,
            imagegate::controller::Settings {
                admin_addr: controller_addr,
                concurrency: 8,
                namespaces: Vec::new(),
                leader: None,
                // The demo's streams are gated by hand (examples/), not adopted.
                drift_interval: None,
                verdict_grace: std::time::Duration::from_secs(600),
                run_key: (
                    "imagegate-system".into(),
                    imagegate::runkey::DEFAULT_SECRET.into(),
                ),
                verdicts: None,
            },
            Arc::new(k8s_openapi::jiff::Timestamp::now),
            stopped(),
        )));
        let source_addr = free_addr()?;
        let (listed, mut watching) = tokio::sync::watch::channel(false);
        tasks.push(tokio::spawn(imagegate::source::run_with_listed(
            emulator.client_as(SOURCE_USER)?,
            source_settings(&el_url, source_addr, &emulator.url())?,
            stopped(),
            listed,
        )));
        wait_ready("imagegate controller", controller_addr).await?;
        timeline.line(
            "controller",
            format!("imagegate controller reconciling ImagePromotion CustomRuns (admin {controller_addr})"),
        );
        // The source says when its first list is recorded: from then on every import is seen.
        tokio::time::timeout(Duration::from_secs(10), watching.wait_for(|listed| *listed))
            .await
            .map_err(|_| anyhow!("imagegate source did not list the ImageStreams within 10 s"))?
            .map_err(|_| anyhow!("imagegate source stopped before it listed the ImageStreams"))?;
        timeline.line(
            "source",
            format!(
                "imagegate source watching ImageStreams, delivering to the EventListener (admin {source_addr})"
            ),
        );

        let world = World {
            emulator,
            files,
            timeline,
            listener,
            runner,
            smoke,
            admin,
            served_tag,
            candidate_tag,
            workbenches,
            served_at_start,
            stop,
            tasks,
        };
        world.watch_served_tags();
        Ok(world)
    }

    /// Prints each change of a served tag's digest or phase: what users of the spawner see.
    fn watch_served_tags(&self) {
        let api: Api<ImageStream> = Api::namespaced(self.admin.clone(), NAMESPACE);
        let timeline = self.timeline.clone();
        let served = self.served_tag.clone();
        let workbenches = self.workbenches.clone();
        let mut stop = self.stop.subscribe();
        tokio::spawn(async move {
            let mut seen: HashMap<String, (String, String, String)> = HashMap::new();
            let mut events = watcher::watcher(api, watcher::Config::default())
                .default_backoff()
                .boxed();
            let mut listed = false;
            loop {
                let ev = tokio::select! {
                    ev = events.next() => ev,
                    _ = imagegate::runtime::leader::until(&mut stop, true) => return,
                };
                let stream = match ev {
                    Some(Ok(watcher::Event::Apply(s) | watcher::Event::InitApply(s))) => s,
                    Some(Ok(watcher::Event::InitDone)) => {
                        listed = true;
                        continue;
                    }
                    Some(_) => continue,
                    None => return,
                };
                let Some(name) = stream.metadata.name.clone() else {
                    continue;
                };
                let shown = dashboard::shown(&stream, workbenches.get(&name)).summary();
                let now = (
                    served_digest(&stream, &served),
                    phase(&stream, &served),
                    shown,
                );
                if seen.get(&name) != Some(&now) {
                    if listed {
                        timeline.line(
                            "users see",
                            format!(
                                "{name}:{served} -> {}  phase {}; {}",
                                short_digest(&now.0),
                                if now.1.is_empty() { "-" } else { &now.1 },
                                now.2
                            ),
                        );
                    }
                    seen.insert(name, now);
                }
            }
        });
    }

    /// A scheduled import of `digest` into the candidate tag, with the image metadata the checks
    /// read (a non-root user unless `root`).
    fn import(&self, imagestream: &str, digest: &str, root: bool) -> anyhow::Result<()> {
        let user = if root { "0" } else { "1001" };
        self.emulator
            .import_with(
                NAMESPACE,
                imagestream,
                &ImportRequest {
                    tag: self.candidate_tag.clone(),
                    digest: Some(digest.to_string()),
                    docker_image_metadata: Some(json!({
                        "Config": {"User": user, "Labels": self.labels(imagestream, digest)}
                    })),
                    ..ImportRequest::default()
                },
            )
            .map_err(|e| anyhow!("import into {imagestream}: {}", e.message))?;
        self.timeline.line(
            "import",
            format!(
                "scheduled import: {imagestream}:{} -> {}{}",
                self.candidate_tag,
                short_digest(digest),
                if root {
                    " (this build runs as root)"
                } else {
                    ""
                }
            ),
        );
        Ok(())
    }

    /// The image labels of a demo build of `imagestream`: what the checks read, and what the
    /// promotion describes the build with on the served tag (its commit, the software lists).
    fn labels(&self, imagestream: &str, digest: &str) -> Value {
        let mut labels = dashboard::labels(digest, self.served_at_start.get(imagestream));
        labels["io.k8s.display-name"] = json!(imagestream);
        labels["vendor"] = json!("Open Data Hub");
        labels
    }

    /// A scheduled import of `digest`, then the PipelineRun it starts, to its end.
    async fn promote_through_the_pipeline(
        &self,
        imagestream: &str,
        digest: &str,
        root: bool,
    ) -> anyhow::Result<()> {
        self.import(imagestream, digest, root)?;
        let run = self.wait_run(imagestream, digest).await?;
        outcome_line(self, &run);
        Ok(())
    }

    async fn wait_run(&self, imagestream: &str, digest: &str) -> anyhow::Result<RunRecord> {
        let what = format!("{imagestream}@{}", short_digest(digest));
        let want = format!("{NAMESPACE}/{imagestream}");
        let done = self.runner.wait_done(&what, Duration::from_secs(20), |r| {
            r.params.get("imagestream") == Some(&want)
                && r.params.get("digest").map(String::as_str) == Some(digest)
        });
        tokio::select! {
            run = done => run,
            e = self.listener.failure() => bail!("the EventListener stand-in could not run its trigger for {what}: {e}"),
        }
    }

    /// Waits until the run for `digest` has finished its `task`.
    async fn wait_task(&self, digest: &str, task: &str) -> anyhow::Result<()> {
        for _ in 0..800 {
            if self.runner.runs().iter().any(|r| {
                r.params.get("digest").map(String::as_str) == Some(digest)
                    && r.tasks.iter().any(|(t, _)| t == task)
            }) {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        bail!(
            "no run for {} finished {task} within 20 s",
            short_digest(digest)
        )
    }

    async fn rows(&self) -> anyhow::Result<Vec<Row>> {
        let api: Api<ImageStream> = Api::namespaced(self.admin.clone(), NAMESPACE);
        rows_of(
            &api,
            &self.served_tag,
            &self.candidate_tag,
            &self.workbenches,
        )
        .await
    }

    async fn shutdown(self) {
        let _ = self.stop.send(true);
        for t in self.tasks {
            match tokio::time::timeout(Duration::from_secs(10), t).await {
                Ok(Ok(Err(e))) => tracing::warn!(error = format!("{e:#}"), "demo part failed"),
                Ok(Err(e)) => tracing::warn!(error = %e, "demo part panicked"),
                Err(_) => tracing::warn!("a demo part did not stop within 10 s"),
                Ok(Ok(Ok(()))) => {}
            }
        }
        self.emulator.shutdown().await;
    }
}

fn source_settings(
    sink: &str,
    admin_addr: SocketAddr,
    api_server_url: &str,
) -> anyhow::Result<imagegate::source::Settings> {
    use imagegate::source::deliver::{BackoffPolicy, ContentMode, DeliverySpec};
    Ok(imagegate::source::Settings {
        sink: sink.parse().context("the listener URL")?,
        overrides: None,
        ca_pem: None,
        oidc: None,
        sink_guard: None,
        sink_timeout: None,
        namespaces: vec![NAMESPACE.to_string()],
        selector: None,
        tags: imagegate::source::state::TagFilter::default(),
        mode: imagegate::source::Mode::ImageStreamTag,
        content_mode: ContentMode::Binary,
        delivery: DeliverySpec {
            retry: None,
            backoff_policy: BackoffPolicy::Exponential,
            backoff_delay: Duration::from_millis(200),
            max_backoff: Duration::from_secs(5),
            dead_letter_sink: None,
        },
        emit_existing: false,
        admin_addr,
        checkpoint: imagegate::source::checkpoint::CheckpointConfig {
            namespace: SYSTEM_NAMESPACE.to_string(),
            prefix: "imagegate-source-checkpoint".to_string(),
            flush_interval: Duration::from_millis(500),
            write_budget: imagegate::source::checkpoint::DEFAULT_WRITE_BUDGET,
            cap: None,
        },
        leader: None,
        events: imagegate::source::event::EventSettings::new("https://imagegate.dev/schemas/")
            .map_err(|e| anyhow!("{e}"))?,
        concurrency: 64,
        api_server_url: api_server_url.to_string(),
    })
}

/// Creates a namespaced object of a kind the API serves (the ImagePromotion from `tekton/`), as
/// `kubectl create -n notebooks` would: the CRD's schema validates it.
async fn create_namespaced(client: &kube::Client, mut obj: Value) -> anyhow::Result<()> {
    let api_version = str_at(&obj, "/apiVersion")?.to_string();
    let kind = str_at(&obj, "/kind")?.to_string();
    let (group, version) = api_version.split_once('/').unwrap_or(("", &api_version));
    let gvk = GroupVersionKind::gvk(group, version, &kind);
    // The plural comes from discovery, as kubectl finds it.
    let (resource, _) = kube::discovery::pinned_kind(client, &gvk)
        .await
        .with_context(|| format!("the API does not serve {api_version} {kind}"))?;
    obj["metadata"]["namespace"] = Value::String(NAMESPACE.to_string());
    let object: DynamicObject = serde_json::from_value(obj)?;
    Api::<DynamicObject>::namespaced_with(client.clone(), NAMESPACE, &resource)
        .create(&PostParams::default(), &object)
        .await
        .with_context(|| format!("cannot create {kind} from tekton/"))?;
    Ok(())
}

/// The final table's rows: every ImageStream of `api`, by name.
async fn rows_of(
    api: &Api<ImageStream>,
    served_tag: &str,
    candidate_tag: &str,
    workbenches: &BTreeMap<String, crate::dashboard_model::Workbench>,
) -> anyhow::Result<Vec<Row>> {
    let mut rows: Vec<Row> = api
        .list(&Default::default())
        .await?
        .items
        .iter()
        .map(|s| Row {
            imagestream: s.metadata.name.clone().unwrap_or_default(),
            served: served_digest(s, served_tag),
            phase: phase(s, served_tag),
            candidate: served_digest(s, candidate_tag),
            dashboard: dashboard::shown(
                s,
                workbenches.get(s.metadata.name.as_deref().unwrap_or_default()),
            ),
        })
        .collect();
    rows.sort_by(|a, b| a.imagestream.cmp(&b.imagestream));
    Ok(rows)
}

fn served_digest(stream: &ImageStream, tag: &str) -> String {
    stream.current_digest(tag).unwrap_or_default().to_string()
}

fn phase(stream: &ImageStream, tag: &str) -> String {
    stream
        .spec_tag(tag)
        .and_then(|t| t.annotations.as_ref())
        .and_then(|a| a.get(imagegate::controller::decide::annotation::PHASE))
        .cloned()
        .unwrap_or_default()
}

/// Runs the demo: the scenarios, the final table, and with `keep_running` the wait for Ctrl-C.
pub async fn run(opts: Options) -> anyhow::Result<()> {
    let timeline = Arc::new(Timeline::default());
    timeline.text(
        "imagegate demo: validate-then-promote for notebook ImageStreams, on the embedded API emulator.\n\
         The source and the controller are the real ones; Tekton is a stand-in that runs tekton/*.yaml.",
    );
    timeline.heading("Starting");
    let world = World::start(&opts, timeline.clone()).await?;
    let outcome = scenarios::play(&world).await;
    let rows = world.rows().await;
    let result = match (outcome, rows) {
        (Ok((expect, played)), Ok(rows)) => {
            table::print(&timeline, &rows, &world.served_tag);
            let checked = scenarios::check(&rows, &expect);
            if checked.is_ok() {
                timeline.text(format!("\nAll {played} scenarios ended as expected."));
            }
            checked
        }
        (Err(e), rows) => {
            if let Ok(rows) = rows {
                table::print(&timeline, &rows, &world.served_tag);
            }
            Err(e)
        }
        (Ok(_), Err(e)) => Err(anyhow!("cannot list the ImageStreams: {e}")),
    };
    if opts.keep_running {
        world
            .emulator
            .write_kubeconfig(&opts.kubeconfig, "admin")
            .with_context(|| format!("cannot write {}", opts.kubeconfig.display()))?;
        timeline.text(format!(
            "\nStill running (Ctrl-C to stop). Look around with kubectl:\n\
             \x20 export KUBECONFIG={kc}\n\
             \x20 kubectl get imagestreams,customruns,imagepromotions -n {NAMESPACE}\n\
             \x20 kubectl get istag -n {NAMESPACE}\n\
             Import a new candidate and watch it go through the loop again:\n\
             \x20 curl -X POST -H 'Content-Type: application/json' -d '{{\"tag\":\"candidate\"}}' \\\n\
             \x20   {url}{prefix}/namespaces/{NAMESPACE}/imagestreams/jupyter-minimal-notebook/import",
            kc = opts.kubeconfig.display(),
            url = world.emulator.url(),
            prefix = imagegate_emulator::control::PREFIX,
        ));
        imagegate::run::shutdown_signal().await;
    }
    world.shutdown().await;
    result
}

/// The timeline line of a finished PipelineRun: its verdict and results.
fn outcome_line(w: &World, run: &RunRecord) {
    // As the real demo prints it (`real::observe::outcome_line`).
    let verdict = if run.succeeded {
        "Succeeded".to_string()
    } else {
        format!("Failed ({})", run.reason)
    };
    let mut text = format!("{} {verdict}", short_name(&run.name));
    for (k, v) in &run.results {
        if !v.is_empty() {
            text.push_str(&format!("  {k}={}", short_digest(v)));
        }
    }
    w.timeline.line("pipeline", text);
}
