//! The subcommands' entry points: the binary's edge, where errors become `anyhow`. Every value
//! that can be checked without the API server is checked here (or by clap, [`crate::cli::values`])
//! before anything connects, and each error is one line that names the input.

use anyhow::{anyhow, bail};

use std::sync::Arc;

use crate::cli::{ControllerArgs, LeaderArgs, SourceArgs};
use crate::runtime::leader::LeaderConfig;

/// `imagegate crds`: the CustomResourceDefinitions imagegate owns, as YAML on stdout: every one
/// (separated by `---`), or the one whose plural `args.resource` names.
pub fn crds(args: &crate::cli::CrdsArgs) -> anyhow::Result<()> {
    let all = [
        ("imagepromotions", crate::controller::crd::crd_yaml()),
        ("imagestreamsources", crate::adapter::crd::crd_yaml()),
    ];
    let chosen: Vec<&String> = all
        .iter()
        .filter(|(plural, _)| args.resource.as_deref().is_none_or(|r| r == *plural))
        .map(|(_, yaml)| yaml)
        .collect();
    if chosen.is_empty() {
        let known: Vec<&str> = all.iter().map(|(plural, _)| *plural).collect();
        bail!(
            "no CRD {:?}: imagegate owns {}",
            args.resource.as_deref().unwrap_or_default(),
            known.join(", ")
        );
    }
    let docs: Vec<&str> = chosen.iter().map(|s| s.as_str()).collect();
    print!("{}", docs.join("---\n"));
    Ok(())
}

/// The Lease settings of a program, when `--leader-elect` is on.
fn leader_config(args: &LeaderArgs, program: &str) -> Option<LeaderConfig> {
    if !args.leader_elect {
        return None;
    }
    let identity = args.identity.clone().unwrap_or_else(|| {
        let host = std::env::var("HOSTNAME").unwrap_or_else(|_| "imagegate".into());
        format!("{host}-{}", &uuid::Uuid::new_v4().simple().to_string()[..8])
    });
    Some(LeaderConfig::new(
        args.lease_name
            .clone()
            .unwrap_or_else(|| format!("imagegate-{program}")),
        args.lease_namespace.clone(),
        identity,
    ))
}

/// The Kubernetes configuration: KUBECONFIG, else `~/.kube/config`, else the in-cluster one.
/// The error is one line: kube's own repeats each cause several times in its chain.
async fn kube_config() -> anyhow::Result<kube::Config> {
    if let Some(path) = std::env::var_os("KUBECONFIG").filter(|p| !p.is_empty()) {
        let paths: Vec<_> = std::env::split_paths(&path).collect();
        if let [only] = paths.as_slice()
            && let Err(e) = std::fs::metadata(only)
        {
            bail!(
                "KUBECONFIG {:?} cannot be read: {e}",
                only.display().to_string()
            );
        }
    }
    kube::Config::infer()
        .await
        .map_err(|e| anyhow!("no Kubernetes configuration (in-cluster or KUBECONFIG): {e}"))
}

/// A client for `config`.
fn kube_client(config: kube::Config) -> anyhow::Result<kube::Client> {
    kube::Client::try_from(config).map_err(|e| anyhow!("cannot build a Kubernetes client: {e}"))
}

/// An http or https URL from `--<flag>` (`what` names it, with its env variable if any).
fn http_url(what: &str, value: &str) -> anyhow::Result<reqwest::Url> {
    let url: reqwest::Url = value
        .parse()
        .map_err(|e| anyhow!("{what} {value:?} is not a URL: {e}"))?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none_or(str::is_empty) {
        bail!(
            "{what} {value:?} is not an http or https URL with a host (the scheme is {:?})",
            url.scheme()
        );
    }
    Ok(url)
}

/// `imagegate controller`: reconcile ImagePromotion CustomRuns until SIGTERM.
pub async fn controller(args: ControllerArgs) -> anyhow::Result<()> {
    let oidc_of = oidc_identity(
        "--verdict-sink-audience (K_AUDIENCE)",
        args.verdict_sink_audience.as_deref(),
        args.oidc_service_account.as_deref(),
    )?;
    let mut config = kube_config().await?;
    // kube's own retry layer would repeat a 429, 503 or 504 inside one request for minutes (15
    // tries, doubling from 5 ms), holding the reconcile past the run's timeout and its
    // cancellation; the error policy retries instead, never later than the run's deadline.
    config.default_retry = false;
    let client = kube_client(config)?;
    let oidc = oidc_of.map(|(audience, sa)| {
        crate::source::deliver::oidc::Identity::new(
            client.clone(),
            &args.leader.lease_namespace,
            sa,
        )
        .for_audience(audience)
    });
    let verdicts = match args.verdict_sink.as_deref() {
        None => None,
        Some(sink) => Some(crate::controller::verdict::Settings {
            sink: http_url("--verdict-sink/K_SINK", sink)?,
            delivery: crate::source::deliver::DeliverySpec {
                dead_letter_sink: match &args.verdict_dead_letter_sink {
                    Some(u) => Some(http_url("--verdict-dead-letter-sink", u)?),
                    None => None,
                },
                ..crate::controller::verdict::default_delivery()
            },
            mode: crate::source::deliver::ContentMode::Binary,
            schema_base: Some(
                crate::source::event::DEFAULT_DATASCHEMA_BASE
                    .parse()
                    .map_err(|e| anyhow!("the schema base: {e}"))?,
            ),
            timeout: args
                .verdict_sink_timeout
                .map(std::time::Duration::from_secs),
            ca_pem: args.verdict_ca_certs.clone(),
            oidc,
        }),
    };
    let settings = crate::controller::Settings {
        admin_addr: args.admin_addr,
        concurrency: args.concurrency,
        namespaces: dedup(&args.namespaces),
        leader: leader_config(&args.leader, "controller"),
        drift_interval: (args.drift_check_interval > 0)
            .then(|| std::time::Duration::from_secs(args.drift_check_interval)),
        verdict_grace: std::time::Duration::from_secs(args.verdict_grace),
        run_key: (
            args.leader.lease_namespace.clone(),
            args.run_key_secret.clone(),
        ),
        verdicts,
    };
    let clock = Arc::new(k8s_openapi::jiff::Timestamp::now);
    crate::controller::run(client, settings, clock, shutdown_signal()).await
}

/// The audience and the ServiceAccount of a sink's OIDC tokens (None: no audience); an
/// audience without a ServiceAccount is refused (`what` names the audience's flag).
fn oidc_identity<'a>(
    what: &str,
    audience: Option<&'a str>,
    service_account: Option<&'a str>,
) -> anyhow::Result<Option<(&'a str, &'a str)>> {
    match (
        audience.filter(|a| !a.is_empty()),
        service_account.filter(|s| !s.is_empty()),
    ) {
        (None, _) => Ok(None),
        (Some(_), None) => bail!(
            "{what} needs --oidc-service-account (K_OIDC_SERVICE_ACCOUNT): the ServiceAccount whose token is sent"
        ),
        (Some(a), Some(sa)) => Ok(Some((a, sa))),
    }
}

/// `imagegate interceptor`: serve Tekton Triggers until SIGTERM.
pub async fn interceptor(args: crate::cli::InterceptorArgs) -> anyhow::Result<()> {
    let client = kube_client(kube_config().await?)?;
    let mut names =
        crate::interceptor::service_names(&args.service, &args.namespace, &args.cluster_domain);
    for n in args.tls_names {
        if !names.contains(&n) {
            names.push(n);
        }
    }
    let settings = crate::interceptor::Settings {
        admin_addr: args.admin_addr,
        addr: args.addr,
        namespace: args.namespace,
        names,
        tls_secret: args.tls_secret,
        run_key_secret: args.run_key_secret,
        cluster_interceptor: args.cluster_interceptor,
    };
    crate::interceptor::run(client, settings, shutdown_signal()).await
}

/// `imagegate receiver`: refused at start, in one line, without a sender or with a secret that
/// cannot be read or is too short.
pub async fn receiver(args: crate::cli::ReceiverArgs) -> anyhow::Result<()> {
    use crate::receiver::serve::{DISTRIBUTION, DOCKERHUB, GITHUB, HARBOR, QUAY, secret_in_path};
    let mut senders = Vec::new();
    for (sender, flag, file) in [
        (
            DISTRIBUTION,
            "--distribution-secret-file",
            &args.distribution_secret_file,
        ),
        (HARBOR, "--harbor-secret-file", &args.harbor_secret_file),
        (GITHUB, "--github-secret-file", &args.github_secret_file),
        (QUAY, "--quay-secret-file", &args.quay_secret_file),
        (
            DOCKERHUB,
            "--dockerhub-secret-file",
            &args.dockerhub_secret_file,
        ),
    ] {
        let Some(path) = file else { continue };
        let text = anyhow::Context::with_context(std::fs::read_to_string(path), || {
            format!("cannot read {flag} {}", path.display())
        })?;
        let secret = crate::receiver::auth::Secret::new(&text)
            .map_err(|e| anyhow!("{flag} {}: {e}", path.display()))?;
        if secret_in_path(sender) && !crate::receiver::auth::url_safe(&text) {
            bail!(
                "{flag} {}: the secret goes in the URL: use only letters, digits, '-', '.', '_' and '~'",
                path.display()
            );
        }
        senders.push((sender, secret));
    }
    if senders.is_empty() {
        bail!(
            "no sender configured: give --distribution-secret-file, --harbor-secret-file, --github-secret-file, --quay-secret-file or --dockerhub-secret-file"
        );
    }
    let client = kube_client(kube_config().await?)?;
    let settings = crate::receiver::Settings {
        admin_addr: args.admin_addr,
        addr: args.addr,
        senders,
        nudge: crate::receiver::nudge::Settings {
            min_interval: std::time::Duration::from_secs(args.min_interval_seconds),
            spacing: std::time::Duration::from_secs(60) / args.max_imports_per_minute,
            namespaces: dedup(&args.namespaces),
        },
    };
    crate::receiver::run(client, settings, shutdown_signal()).await
}

/// The namespaces given, each once, in the order first given.
fn dedup(namespaces: &[String]) -> Vec<String> {
    let mut seen = std::collections::BTreeSet::new();
    namespaces
        .iter()
        .filter(|ns| seen.insert(ns.as_str()))
        .cloned()
        .collect()
}

/// Resolves on SIGINT or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = term => {},
    }
}

/// `imagegate source`: watch ImageStreams and deliver their tag changes until SIGTERM.
pub async fn source(args: SourceArgs) -> anyhow::Result<()> {
    use crate::source::deliver::{DeliverySpec, parse_iso8601_duration};
    if args.multi_tenant {
        return source_multi_tenant(args).await;
    }
    if args.cluster_domain.is_some() {
        bail!("--cluster-domain is for --multi-tenant: a single source's --sink is a URL");
    }
    let Some(sink) = args.sink.as_deref() else {
        bail!(
            "--sink (or K_SINK) is required: the URL the events go to (or --multi-tenant, to serve every ImageStreamSource)"
        );
    };
    let sink = http_url("--sink/K_SINK", sink)?;
    let dead_letter_sink = match &args.dead_letter_sink {
        Some(u) => Some(http_url("--dead-letter-sink", u)?),
        None => None,
    };
    let overrides = match &args.ce_overrides {
        Some(text) if !text.trim().is_empty() => {
            let v: serde_json::Value = serde_json::from_str(text)
                .map_err(|e| anyhow!("K_CE_OVERRIDES {text:?} is not JSON: {e}"))?;
            // The error names K_CE_OVERRIDES itself.
            crate::source::event::override_extensions(&v).map_err(|e| anyhow!("{e}"))?;
            Some(v)
        }
        _ => None,
    };
    let backoff_delay = parse_iso8601_duration(&args.backoff_delay)
        .map_err(|e| anyhow::anyhow!("--backoff-delay {:?}: {e}", args.backoff_delay))?;
    let oidc_of = oidc_identity(
        "--sink-audience (K_AUDIENCE)",
        args.sink_audience.as_deref(),
        args.oidc_service_account.as_deref(),
    )?;
    let config = kube_config().await?;
    let api_server_url = config.cluster_url.to_string();
    let client = kube_client(config)?;
    let oidc = oidc_of.map(|(audience, sa)| {
        crate::source::deliver::oidc::Identity::new(
            client.clone(),
            &args.leader.lease_namespace,
            sa,
        )
        .for_audience(audience)
    });
    let settings = crate::source::Settings {
        sink,
        overrides,
        ca_pem: args.ca_certs.clone(),
        oidc,
        sink_guard: None,
        sink_timeout: args.sink_timeout.map(std::time::Duration::from_secs),
        namespaces: dedup(&args.namespaces),
        selector: args.selector.clone(),
        tags: crate::source::state::TagFilter(args.tags.clone()),
        mode: args.mode,
        content_mode: args.content_mode,
        delivery: DeliverySpec {
            retry: args.retry,
            backoff_policy: args.backoff_policy,
            backoff_delay,
            max_backoff: std::time::Duration::from_secs(300),
            dead_letter_sink,
        },
        emit_existing: args.emit_existing,
        admin_addr: args.admin_addr,
        checkpoint: crate::source::checkpoint::CheckpointConfig {
            namespace: args.checkpoint_namespace.clone(),
            prefix: args.checkpoint_prefix.clone(),
            flush_interval: std::time::Duration::from_millis(500),
            write_budget: crate::source::checkpoint::DEFAULT_WRITE_BUDGET,
            cap: None,
        },
        leader: leader_config(&args.leader, "source"),
        events: crate::source::event::EventSettings::new(args.dataschema_base.clone())
            .map_err(|e| anyhow::anyhow!("--dataschema-base: {e}"))?,
        concurrency: 64,
        api_server_url,
    };
    crate::source::run(client, settings, shutdown_signal()).await
}

/// `imagegate source --multi-tenant`: serve every ImageStreamSource until SIGTERM.
async fn source_multi_tenant(args: SourceArgs) -> anyhow::Result<()> {
    let events = crate::source::event::EventSettings::new(args.dataschema_base.clone())
        .map_err(|e| anyhow::anyhow!("--dataschema-base: {e}"))?;
    let config = kube_config().await?;
    let api_server_url = config.cluster_url.to_string();
    let api_server_host = config.cluster_url.host().map(|h| h.to_ascii_lowercase());
    let client = kube_client(config)?;
    let settings = crate::adapter::MtSettings {
        admin_addr: args.admin_addr,
        leader: leader_config(&args.leader, "source-multi-tenant"),
        cluster_domain: args
            .cluster_domain
            .clone()
            .unwrap_or_else(|| crate::adapter::sink::resolve::DEFAULT_CLUSTER_DOMAIN.to_owned()),
        shared: crate::adapter::settings::Shared {
            events,
            api_server_url,
            guard: std::sync::Arc::new(crate::source::deliver::guard::Guard {
                api_server_host: api_server_host.clone(),
                allowed: args
                    .allow_sink_hosts
                    .iter()
                    .map(|h| h.trim_end_matches('.').to_ascii_lowercase())
                    .collect(),
                cluster_domain: args.cluster_domain.clone().unwrap_or_else(|| {
                    crate::adapter::sink::resolve::DEFAULT_CLUSTER_DOMAIN.to_owned()
                }),
                cross_namespace: args.allow_cross_namespace_sinks,
            }),
            checkpoint_namespace: args.checkpoint_namespace.clone(),
            max_queued: args.max_queued_per_source,
            checkpoint_cap: crate::adapter::settings::checkpoint_cap(
                args.max_checkpoint_bytes_per_source,
            ),
            // Set by the runtime, which follows the Lease.
            fence: Default::default(),
        },
        identity: args.oidc_service_account.as_deref().map(|sa| {
            crate::source::deliver::oidc::Identity::new(
                client.clone(),
                &args.leader.lease_namespace,
                sa,
            )
        }),
    };
    crate::adapter::run(client, settings, shutdown_signal()).await
}

/// `imagegate adopt`: adopt one stream (or print the diff), or `--check` the adopted streams.
/// A refusal and a drift found are errors (one line, non-zero exit) after the report on stdout.
pub async fn adopt(args: crate::cli::adopt::AdoptArgs) -> anyhow::Result<()> {
    use crate::adopt::apply::{self, Scope};
    let client = kube_client(kube_config().await?)?;
    let mut out = std::io::stdout().lock();
    if args.check {
        let scope = match (args.all_namespaces, args.namespace) {
            (true, _) => Scope::All,
            (false, Some(ns)) => Scope::Namespace(ns),
            (false, None) => Scope::Namespace(client.default_namespace().to_string()),
        };
        return Ok(apply::check(&client, &scope, &mut out).await?);
    }
    let Some((namespace, name)) = args.stream else {
        bail!("name the ImageStream to adopt as NAMESPACE/NAME, or give --check");
    };
    let options = crate::adopt::Options {
        served_tag: args.served_tag,
        candidate_tag: args.candidate_tag,
        candidate_from: args.candidate_from,
        reference_policy: args.reference_policy.map(|p| p.as_str().to_string()),
        copy_name: args.copy_name,
    };
    apply::adopt(&client, &namespace, &name, &options, args.dry_run, &mut out).await?;
    Ok(())
}
