//! The emulated cluster of the multi-tenant benchmark and what runs against it: `n` team
//! namespaces `t-NNNN`, each with `STREAMS_PER_NS` ImageStreams x 3 tags and a RoleBinding that
//! lets its `default` ServiceAccount read them (what each source's SubjectAccessReviews ask);
//! the ImageStreamSource `t-NNNN/s-NNNN` of each, selecting its own namespace and posting to its
//! own sink path; one sink server for all of them; and the two programs under measurement, each
//! its own user in the emulator's request log.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use axum::Router;
use axum::extract::{Path as UrlPath, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use imagegate_emulator::Emulator;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, PostParams};

use crate::common::{Killed, streams_yaml_in};

/// ImageStreams in each team namespace.
pub const STREAMS_PER_NS: usize = 10;
/// The sender id of the single-source process in the sink's records.
pub const SINGLE: u32 = u32::MAX;
/// The request-log users of the two programs.
pub const MT_USER: &str = "imagegate-source-multi-tenant";
pub const SINGLE_USER: &str = "imagegate-source";

/// Team namespace `k`.
pub fn ns(k: usize) -> String {
    format!("t-{k:04}")
}

/// The source of team `k` (in its namespace).
pub fn source_name(k: usize) -> String {
    format!("s-{k:04}")
}

/// What the sink took: the first arrival of each change (digest) at each sender's path, and
/// each sender's first arrival of anything.
#[derive(Default)]
pub struct Arrivals {
    pub first: HashMap<(u32, String), Instant>,
    pub any: HashMap<u32, Instant>,
    pub events: usize,
    pub duplicates: usize,
    /// Events the noisy tenant's dead sink refused.
    pub refused: usize,
}

pub type Sink = Arc<Mutex<Arrivals>>;

fn record(sink: &Sink, sender: u32, headers: &HeaderMap) -> StatusCode {
    let at = Instant::now();
    let digest = headers
        .get("ce-imagedigest")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let mut a = sink.lock().unwrap();
    a.events += 1;
    a.any.entry(sender).or_insert(at);
    if a.first.insert((sender, digest), at).is_some() {
        a.duplicates += 1;
    }
    StatusCode::ACCEPTED
}

/// Starts the sink: `POST /s/{k}` is source `k`'s, `POST /single` the single source's. Its
/// base URL and its records.
pub async fn start_sink() -> (String, Sink) {
    let sink: Sink = Arc::default();
    let app = Router::new()
        .route(
            "/s/{k}",
            post(
                |State(s): State<Sink>, UrlPath(k): UrlPath<u32>, h: HeaderMap| async move {
                    record(&s, k, &h)
                },
            ),
        )
        .route(
            "/dead",
            post(|State(s): State<Sink>| async move {
                s.lock().unwrap().refused += 1;
                StatusCode::SERVICE_UNAVAILABLE
            }),
        )
        .route(
            "/single",
            post(|State(s): State<Sink>, h: HeaderMap| async move { record(&s, SINGLE, &h) }),
        )
        .with_state(sink.clone());
    let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0)))
        .await
        .unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (url, sink)
}

/// The ImageStreamSource of team `k`: its own namespace, its own sink path, the default mode.
pub fn source_yaml(k: usize, sink: &str, emit_existing: bool) -> String {
    source_to(k, &format!("{sink}/s/{k}"), emit_existing)
}

/// The ImageStreamSource of team `k`, posting to `uri`.
fn source_to(k: usize, uri: &str, emit_existing: bool) -> String {
    format!(
        "---\napiVersion: sources.imagegate.dev/v1alpha1\nkind: ImageStreamSource\n\
         metadata: {{name: {name}, namespace: {ns}}}\n\
         spec: {{sink: {{uri: \"{uri}\"}}, emitExisting: {emit_existing}}}\n",
        name = source_name(k),
        ns = ns(k),
    )
}

/// Seeds `teams` team namespaces (streams and RBAC) and the sources of the first `sources` of
/// them, and with `noisy` one more team (index `teams`) whose source posts to the sink's `/dead`
/// (503 to everything); the ImageStreamSource CRD is created first, through the API, as
/// `imagegate crds` generates it.
pub async fn seed(emu: &Emulator, teams: usize, sources: usize, sink: &str, noisy: bool) {
    let crds = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("apiextensions.k8s.io", "v1", "CustomResourceDefinition"),
        "customresourcedefinitions",
    );
    let crd: DynamicObject =
        serde_json::from_value(serde_json::to_value(imagegate::adapter::crd::crd()).unwrap())
            .unwrap();
    Api::<DynamicObject>::all_with(emu.client().unwrap(), &crds)
        .create(&PostParams::default(), &crd)
        .await
        .unwrap();
    // The adapter's own namespace: every source's checkpoint is there.
    let mut text = String::from(
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: imagegate-system}\n---\n\
         apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\n\
         metadata: {name: read-streams}\n\
         rules:\n- {apiGroups: [image.openshift.io], resources: [imagestreams], verbs: [get, list, watch]}\n",
    );
    for k in 0..teams + usize::from(noisy) {
        let ns = ns(k);
        text.push_str(&format!(
            "---\napiVersion: v1\nkind: Namespace\nmetadata: {{name: {ns}}}\n\
             ---\napiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\n\
             metadata: {{name: default-reads-streams, namespace: {ns}}}\n\
             roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: read-streams}}\n\
             subjects:\n- {{kind: ServiceAccount, name: default, namespace: {ns}}}\n"
        ));
        text.push_str(&streams_yaml_in(&ns, STREAMS_PER_NS));
        if k == teams {
            text.push_str(&source_to(k, &format!("{sink}/dead"), false));
        } else if k < sources {
            text.push_str(&source_yaml(k, sink, false));
        }
    }
    emu.seed_str(&text).unwrap();
}

/// Creates the source of team `k` through the API, as a user would.
pub async fn create_source(emu: &Emulator, k: usize, sink: &str, emit_existing: bool) {
    let obj: DynamicObject = serde_norway::from_str(&source_yaml(k, sink, emit_existing)).unwrap();
    let gvk = GroupVersionKind::gvk("sources.imagegate.dev", "v1alpha1", "ImageStreamSource");
    let ar = ApiResource::from_gvk_with_plural(&gvk, "imagestreamsources");
    Api::<DynamicObject>::namespaced_with(emu.client().unwrap(), &ns(k), &ar)
        .create(&PostParams::default(), &obj)
        .await
        .unwrap();
}

/// Appends to `$SOURCE_LOG` when set, else nothing.
fn log() -> Stdio {
    std::env::var_os("SOURCE_LOG").map_or_else(Stdio::null, |path| {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path);
        Stdio::from(file.expect("SOURCE_LOG can be opened"))
    })
}

/// `imagegate source --multi-tenant` (release), as [`MT_USER`], with `$MT_ENV` (space-separated
/// `KEY=VALUE` pairs) added to its environment: a heap profiler's preload, for instance
/// (`LD_PRELOAD=.../libheaptrack_preload.so DUMP_HEAPTRACK_OUTPUT=/tmp/mt.raw`, on a build with
/// the `system-alloc` feature).
pub fn start_mt(emu: &Emulator, dir: &Path, admin: u16) -> Killed {
    let env = std::env::var("MT_ENV").unwrap_or_default();
    let env: Vec<(&str, &str)> = env
        .split_whitespace()
        .filter_map(|kv| kv.split_once('='))
        .collect();
    start_source(
        emu,
        dir,
        MT_USER,
        admin,
        &["--multi-tenant", "--allow-sink-host", "127.0.0.1"],
        &env,
    )
}

/// `imagegate source` (release, single-source mode) watching team 0's namespace, posting to
/// `/single`, its checkpoint in `default`, as [`SINGLE_USER`].
pub fn start_single(emu: &Emulator, dir: &Path, sink: &str, admin: u16) -> Killed {
    let sink = format!("{sink}/single");
    let ns0 = ns(0);
    let args = ["--sink", &sink, "--namespace", &ns0];
    start_source(
        emu,
        dir,
        SINGLE_USER,
        admin,
        &[&args[..], &["--checkpoint-namespace", "default"]].concat(),
        &[],
    )
}

/// `imagegate source <args>` as `user` (its kubeconfig in `dir`), serving `/readyz` on `admin`,
/// with `env` added to its environment. `BENCH_SOURCE_BIN` names another build to run (one with
/// the `system-alloc` feature, for a heap profiler's preload in `MT_ENV`).
fn start_source(
    emu: &Emulator,
    dir: &Path,
    user: &str,
    admin: u16,
    args: &[&str],
    env: &[(&str, &str)],
) -> Killed {
    let kubeconfig = dir.join(format!("{user}.kubeconfig"));
    emu.write_kubeconfig(&kubeconfig, user).unwrap();
    let child = Command::new(
        std::env::var("BENCH_SOURCE_BIN")
            .unwrap_or_else(|_| env!("CARGO_BIN_EXE_imagegate").to_string()),
    )
    .arg("source")
    .args(args)
    .args(["--admin-addr", &format!("127.0.0.1:{admin}")])
    .env("KUBECONFIG", &kubeconfig)
    .env("RUST_LOG", "warn")
    .envs(env.iter().copied())
    .stdout(Stdio::null())
    .stderr(log())
    .spawn()
    .unwrap();
    Killed::new(child)
}

/// A gauge's value in a program's `/metrics` (the line that starts with `name`), 0 if absent.
pub async fn gauge(admin: u16, name: &str) -> f64 {
    let Ok(resp) = reqwest::get(format!("http://127.0.0.1:{admin}/metrics")).await else {
        return 0.0;
    };
    let text = resp.text().await.unwrap_or_default();
    text.lines()
        .find(|l| l.starts_with(name))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0)
}
