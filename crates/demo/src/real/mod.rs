//! The real demo (`scripts/realcluster demo`): `imagegate demo`'s scenarios on a real control plane
//! with the real Tekton Pipelines controller and Tekton Triggers, and the route through Knative
//! Eventing's Broker, which `scripts/realcluster up --tekton --knative` started (kube-apiserver,
//! etcd, the image API aggregated from `imagegate-emulator`, kube-scheduler, kwok as the kubelet of
//! one fake Node, Tekton's controller, Triggers' core interceptors and a sink per EventListener,
//! Knative's six programs behind a network proxy).
//!
//! `config/` and `tekton/` are applied as they are (`kubectl apply -k`); the real `imagegate
//! source` and `imagegate controller` binaries run as their ServiceAccounts. A scenario imports a
//! candidate into the image API (what a scheduled import does), and the rest is the loop itself:
//! the source's CloudEvent -> the shipped EventListener (its CEL filter, binding and template) ->
//! a PipelineRun -> Tekton's `begin` CustomRun -> imagegate controller -> the smoke-test TaskRun,
//! whose pod kwok ends as the scenario decided ([`stages`]) -> `finally` promote or reject -> the
//! served tag. Scenario 7 ([`knative`]) sends through `knative/`'s Broker and Trigger instead;
//! 8 ([`redrive`]) re-drives a run Triggers could not create; 9 ([`signature`]) checks a
//! publisher's cosign signatures; 10 ([`push`]) and 11 ([`scheduled`]) start from a push to a real
//! registry, announced by its notification or found by the scheduled import. [`observe`] prints the timeline from what Tekton writes; the end is the same table
//! as `imagegate demo`'s and the time each scenario took.

mod cluster;
mod knative;
mod observe;
mod programs;
mod push;
mod redrive;
mod scenarios;
mod scheduled;
mod signature;
pub mod stages;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, anyhow};
use kube::Api;
use serde_json::json;

use imagegate::api::ImageStream;

use self::cluster::Cluster;
use self::observe::Observer;
use self::programs::Program;
use crate::timeline::{Timeline, short_digest};

/// The namespace `tekton/kustomization.yaml` installs into, where the sample ImageStreams live.
const NAMESPACE: &str = crate::NAMESPACE;
const SOURCE_LATENCY: &str = "imagegate_source_delivery_latency_seconds";
const RECONCILE: &str = "imagegate_controller_reconcile_duration_seconds";

/// How the real demo runs.
#[derive(Clone, Debug)]
pub struct RealOptions {
    /// The directory of `scripts/realcluster up --tekton`.
    pub cluster: PathBuf,
    /// The `imagegate` binary to run as the source and the controller.
    pub imagegate: PathBuf,
    /// The repository (for `config/`, `tekton/`, `examples/` and `scripts/realcluster`).
    pub root: PathBuf,
}

/// The real demo's world: the cluster, the two programs, the observer.
struct World {
    cluster: Cluster,
    root: PathBuf,
    /// The `imagegate` binary (scenario 7 starts the multi-tenant source with it).
    imagegate: PathBuf,
    timeline: Arc<Timeline>,
    observer: Observer,
    admin: kube::Client,
    source: Program,
    controller: Program,
    stop: tokio::sync::watch::Sender<bool>,
    /// A workbench started from each stream's served build at the start, as in `imagegate demo`.
    workbenches: std::collections::BTreeMap<String, crate::dashboard_model::Workbench>,
}

impl World {
    async fn start(opts: &RealOptions, timeline: Arc<Timeline>) -> anyhow::Result<World> {
        let cluster = Cluster::open(&opts.cluster)?;
        let admin = cluster.client().await?;
        components(&cluster, opts, &admin, &timeline).await?;
        let root = |p: &str| opts.root.join(p).to_string_lossy().into_owned();

        cluster
            .kubectl(&["apply", "--server-side", "-k", &root("config")])
            .await?;
        cluster
            .kubectl(&[
                "wait",
                "--for=condition=Established",
                "crd/imagepromotions.imagegate.dev",
            ])
            .await?;
        // A namespace and the ServiceAccount `default` a controller manager would make (there is
        // none here): Tekton gives it to a PipelineRun that names no account.
        cluster.kubectl(&["create", "namespace", NAMESPACE]).await?;
        cluster
            .kubectl(&["create", "serviceaccount", "-n", NAMESPACE, "default"])
            .await?;
        let seed = std::fs::read_to_string(opts.root.join("examples/notebook-imagestreams.yaml"))
            .context("examples/notebook-imagestreams.yaml")?;
        let streams = cluster.image_api("seed", image_objects(&seed)).await?;
        cluster
            .kubectl(&["apply", "--server-side", "-k", &root("tekton")])
            .await?;
        timeline.line(
            "cluster",
            format!(
                "applied config/ and tekton/ (kubectl apply -k); the image API holds {} ImageStreams \
                 from examples/notebook-imagestreams.yaml",
                streams["seeded"].as_array().map_or(0, Vec::len)
            ),
        );

        let listener = cluster::until(
            "the EventListener imagegate's address",
            Duration::from_secs(120),
            || async {
                let url = cluster
                    .kubectl(&[
                        "get",
                        "eventlistener",
                        "-n",
                        NAMESPACE,
                        "imagegate",
                        "-o",
                        "jsonpath={.status.address.url}",
                    ])
                    .await?;
                Ok((!url.trim().is_empty()).then(|| url.trim().to_string()))
            },
        )
        .await
        .map_err(|e| {
            anyhow!(
                "{e}\n--- eventlistener-launcher.log:\n{}",
                cluster.log_tail("eventlistener-launcher")
            )
        })?;
        timeline.line(
            "listener",
            format!("EventListener imagegate (tekton/430-eventlistener.yaml): Triggers' sink at {listener}"),
        );

        let controller = Program::start(
            "controller",
            &cluster,
            &opts.imagegate,
            "imagegate-controller",
            // A grace of 30 s, so that scenario 8's re-drive comes within the demo.
            &["controller", "--verdict-grace", "30"],
        )
        .await?;
        timeline.line(
            "controller",
            format!(
                "imagegate controller reconciling ImagePromotion CustomRuns, as imagegate-system/imagegate-controller (admin {})",
                controller.admin
            ),
        );
        let source = Program::start(
            "source",
            &cluster,
            &opts.imagegate,
            "imagegate-source",
            &["source", "--sink", &listener, "--namespace", NAMESPACE],
        )
        .await?;
        timeline.line(
            "source",
            format!(
                "imagegate source watching ImageStreams in {NAMESPACE}, delivering to the EventListener, \
                 as imagegate-system/imagegate-source (admin {})",
                source.admin
            ),
        );
        let seeded: Api<ImageStream> = Api::namespaced(admin.clone(), NAMESPACE);
        let workbenches =
            crate::dashboard::started(&seeded.list(&Default::default()).await?.items, "latest");
        let (stop, stop_rx) = tokio::sync::watch::channel(false);
        let observer = Observer::start(
            admin.clone(),
            NAMESPACE,
            "latest",
            timeline.clone(),
            stop_rx,
        );
        Ok(World {
            cluster,
            root: opts.root.clone(),
            imagegate: opts.imagegate.clone(),
            timeline,
            observer,
            admin,
            source,
            controller,
            stop,
            workbenches,
        })
    }

    /// A scheduled import of `digest` into `stream`'s candidate tag, through the image API's
    /// control endpoint, with the image metadata the checks read (non-root unless `root`).
    async fn import(&self, stream: &str, digest: &str, root: bool) -> anyhow::Result<()> {
        let user = if root { "0" } else { "1001" };
        let body = json!({
            "tag": "candidate",
            "digest": digest,
            "dockerImageMetadata": {"Config": {
                "User": user,
                "Labels": {"io.k8s.display-name": stream, "vendor": "Open Data Hub"},
            }},
        });
        self.cluster
            .image_api(
                &format!("namespaces/{NAMESPACE}/imagestreams/{stream}/import"),
                body.to_string(),
            )
            .await
            .with_context(|| format!("import into {stream}"))?;
        self.timeline.line(
            "import",
            format!(
                "scheduled import: {stream}:candidate -> {}{}",
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

    /// Creates (or replaces) a kwok Stage of a scenario.
    async fn apply_stage(&self, stage: serde_json::Value) -> anyhow::Result<()> {
        self.cluster
            .kubectl_in(&["apply", "--server-side", "-f", "-"], &stage.to_string())
            .await?;
        Ok(())
    }

    /// What the source and the controller have spent so far (seconds), from their metrics.
    async fn spent(&self) -> anyhow::Result<(f64, f64)> {
        Ok((
            self.source.histogram_sum(SOURCE_LATENCY).await?,
            self.controller.histogram_sum(RECONCILE).await?,
        ))
    }

    async fn rows(&self) -> anyhow::Result<Vec<crate::Row>> {
        let api: Api<ImageStream> = Api::namespaced(self.admin.clone(), NAMESPACE);
        crate::rows_of(&api, "latest", "candidate", &self.workbenches).await
    }
}

/// The ImageStreams of a seed file (the image API stores only its own kinds; the namespace is
/// the real server's).
fn image_objects(seed: &str) -> String {
    seed.split("\n---")
        .filter(|doc| doc.contains("apiVersion: image.openshift.io/"))
        .collect::<Vec<_>>()
        .join("\n---\n")
}

/// Prints the name and version of every real component: the pins of `scripts/realcluster
/// versions` for what `up --tekton` runs, and what the running kube-apiserver reports.
async fn components(
    cluster: &Cluster,
    opts: &RealOptions,
    admin: &kube::Client,
    timeline: &Timeline,
) -> anyhow::Result<()> {
    let out = tokio::process::Command::new(opts.root.join("scripts/realcluster"))
        .arg("versions")
        .output()
        .await
        .context("scripts/realcluster versions")?;
    let versions = String::from_utf8_lossy(&out.stdout);
    let running = [
        "etcd",
        "kube-apiserver",
        "kube-scheduler",
        "kwok",
        "tekton-pipelines-controller",
        "tekton-triggers-eventlistenersink",
        "tekton-triggers-interceptors",
        "knative-eventing-controller",
        "knative-mt-broker-controller",
        "knative-imc-controller",
        "knative-imc-dispatcher",
        "knative-mt-broker-ingress",
        "knative-mt-broker-filter",
    ];
    let mut text = String::from("Real components (built from the Go modules realcluster/ pins):\n");
    let mut listed = Vec::new();
    for line in versions.lines() {
        let cols: Vec<&str> = line.split('\t').collect();
        // The components come first; a module read for its manifests may repeat a name (kwok).
        if let [name, version, module] = cols[..]
            && running.contains(&name)
            && !listed.contains(&name)
        {
            listed.push(name);
            text.push_str(&format!("  {name:<36} {version:<10} {module}\n"));
        }
    }
    let live = admin.apiserver_version().await?;
    text.push_str(&format!(
        "  kube-apiserver answers /version: {} ({})\n",
        live.git_version, live.platform
    ));
    let imagegate = tokio::process::Command::new(&opts.imagegate)
        .arg("--version")
        .output()
        .await
        .with_context(|| format!("{} --version", opts.imagegate.display()))?;
    text.push_str(&format!(
        "  {} (source and controller); the image API: imagegate-emulator --serve-image-api-only\n  cluster: {}",
        String::from_utf8_lossy(&imagegate.stdout).trim(),
        cluster.dir.display()
    ));
    timeline.text(text);
    Ok(())
}

/// Runs the real demo on the cluster of `opts`: the scenarios, the final table, the times.
pub async fn run(opts: RealOptions) -> anyhow::Result<()> {
    let timeline = Arc::new(Timeline::default());
    timeline.text(
        "imagegate demo on real Kubernetes and Tekton: validate-then-promote for notebook ImageStreams.\n\
         The source, the controller, the API server, Tekton Pipelines and Triggers, and Knative \
         Eventing are the real ones; kwok plays the kubelet.",
    );
    timeline.heading("Starting");
    let mut world = World::start(&opts, timeline.clone()).await?;
    let outcome = scenarios::play(&mut world).await;
    let rows = world.rows().await;
    let alive = world.source.alive().and_then(|()| world.controller.alive());
    let _ = world.stop.send(true);
    match (outcome, rows) {
        (Ok((expect, timings)), Ok(rows)) => {
            crate::table::print(&timeline, &rows, "latest");
            print_timings(&timeline, &timings);
            let checked = crate::scenarios::check(&rows, &expect).and(alive);
            if checked.is_ok() {
                timeline.text(format!(
                    "\nAll {} scenarios ended as expected.",
                    timings.len()
                ));
            }
            checked
        }
        (Err(e), rows) => {
            if let Ok(rows) = rows {
                crate::table::print(&timeline, &rows, "latest");
            }
            Err(e.context(format!(
                "--- logs/controller.log:\n{}\n--- logs/source.log:\n{}\n--- logs/tekton-pipelines-controller.log:\n{}",
                world.cluster.log_tail("controller"),
                world.cluster.log_tail("source"),
                world.cluster.log_tail("tekton-pipelines-controller"),
            )))
        }
        (Ok(_), Err(e)) => Err(anyhow!("cannot list the ImageStreams: {e}")),
    }
}

fn print_timings(timeline: &Timeline, timings: &[scenarios::Timing]) {
    timeline.heading(
        "Time per scenario (imagegate: the source's delivery latency, the controller's reconciles; \
         the rest is Tekton, Triggers, kwok and the API server)",
    );
    let mut out = format!(
        "{:<9} {:>10} {:>12} {:>12} {:>10}\n",
        "SCENARIO", "END TO END", "SOURCE", "CONTROLLER", "THE REST"
    );
    for t in timings {
        let total = t.total.as_secs_f64();
        out.push_str(&format!(
            "{:<9} {:>9.2}s {:>11.2}s {:>11.2}s {:>9.2}s\n",
            t.number,
            total,
            t.source,
            t.controller,
            (total - t.source - t.controller).max(0.0)
        ));
    }
    timeline.text(out.trim_end());
}
