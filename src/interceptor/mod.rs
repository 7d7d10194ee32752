//! `imagegate interceptor`: a Tekton Triggers ClusterInterceptor that believes nothing an event
//! says. The EventListener asks it about every event before its TriggerBinding runs; it passes
//! an event on only when it names the current candidate of a governed stream of the Trigger's
//! own namespace, and then hands the binding what the API says (`extensions.imagegate`:
//! namespace, stream, the policy's candidate tag, the digest the tag points at, and the
//! PipelineRun's keyed id), never what the body says. Anything else is refused, logged and
//! counted. The data flows one way:
//!
//! request -> [`wire`] (what the event claims) -> [`serve`] (reads the stream and its
//! ImagePromotions) -> [`judge`] (pure: passed with extensions, or refused with a reason) ->
//! answer, counted by [`metrics`]. [`certs`] keeps the TLS certificate Triggers requires and
//! writes its CA into the ClusterInterceptor; [`crate::runkey`] the key the run ids are made with.
//!
//! Every replica serves (no leader election): it holds no state but the Secrets it shares.

pub(crate) mod certs;
pub(crate) mod judge;
pub mod metrics;
pub(crate) mod serve;
pub(crate) mod wire;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use prometheus_client::registry::Registry;
use tracing::{info, warn};

use crate::runtime::admin::Health;
use crate::runtime::{self, Runtime};

/// How the interceptor runs.
#[derive(Clone, Debug)]
pub struct Settings {
    /// Where `/livez`, `/readyz` and `/metrics` are served (plain http).
    pub admin_addr: SocketAddr,
    /// Where Triggers' requests are served (https).
    pub addr: SocketAddr,
    /// The interceptor's namespace: its Secrets are there.
    pub namespace: String,
    /// The DNS names of the serving certificate (the Service's, and any the ClusterInterceptor's
    /// URL uses).
    pub names: Vec<String>,
    /// The Secret of the serving certificate.
    pub tls_secret: String,
    /// The Secret of the run key.
    pub run_key_secret: String,
    /// The ClusterInterceptor whose `caBundle` is kept.
    pub cluster_interceptor: String,
}

/// The certificate's names for Service `service` of `namespace`: its short and full DNS names.
pub(crate) fn service_names(service: &str, namespace: &str, cluster_domain: &str) -> Vec<String> {
    vec![
        service.to_string(),
        format!("{service}.{namespace}"),
        format!("{service}.{namespace}.svc"),
        format!("{service}.{namespace}.svc.{cluster_domain}"),
    ]
}

/// How often the certificate is checked for renewal.
const RENEW_CHECK: Duration = Duration::from_secs(3600);

/// Runs the interceptor until `shutdown` resolves. Errors at start (the Secrets or the
/// ClusterInterceptor cannot be read or written, the port cannot be bound) are one line.
pub async fn run(
    client: kube::Client,
    settings: Settings,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    crate::runtime::tls::install_crypto_provider();
    let mut registry = Registry::default();
    let metrics = metrics::Metrics::register(&mut registry);
    let health = Health::new();
    let rt = Runtime::start(
        client.clone(),
        runtime::Settings {
            admin_addr: settings.admin_addr,
            leader: None,
            until_ready: "making the serving certificate and the run key",
        },
        registry,
        health.clone(),
        shutdown,
    )
    .await
    .with_context(|| format!("cannot serve the admin routes on {}", settings.admin_addr))?;
    rt.run(|token| async move {
        let s = &settings;
        let key =
            crate::runkey::ensure(client.clone(), &s.namespace, &s.run_key_secret).await?;
        let material = certs::ensure(client.clone(), &s.namespace, &s.tls_secret, &s.names).await?;
        certs::publish_ca(client.clone(), &s.cluster_interceptor, &material.ca).await?;
        let resolver = Arc::new(certs::Resolver::new(&material)?);
        let mut tls = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_cert_resolver(resolver.clone());
        tls.alpn_protocols = vec![b"http/1.1".to_vec()];
        let listener = tokio::net::TcpListener::bind(s.addr)
            .await
            .with_context(|| format!("cannot listen on {}", s.addr))?;
        info!(addr = %listener.local_addr()?, names = ?s.names, "serving Tekton Triggers over https");
        let ctx = Arc::new(serve::Context {
            client: client.clone(),
            key,
            metrics,
        });
        let renew = tokio::spawn(renew(client, s.clone(), resolver, material));
        health.set_ready(true);
        serve::serve(
            listener,
            Arc::new(tls),
            serve::router(ctx),
            token.cancelled_owned(),
        )
        .await;
        renew.abort();
        Ok(())
    })
    .await
}

/// Checks the certificate hourly; serves (and publishes) the one a replica renewed.
async fn renew(
    client: kube::Client,
    s: Settings,
    resolver: Arc<certs::Resolver>,
    mut served: certs::Material,
) {
    loop {
        tokio::time::sleep(RENEW_CHECK).await;
        let renewed = async {
            let m = certs::ensure(client.clone(), &s.namespace, &s.tls_secret, &s.names).await?;
            if m != served {
                certs::publish_ca(client.clone(), &s.cluster_interceptor, &m.ca).await?;
                resolver.set(&m)?;
                info!(not_after = %m.not_after, "serving a renewed certificate");
                served = m;
            }
            anyhow::Ok(())
        };
        if let Err(e) = renewed.await {
            warn!(error = %format!("{e:#}"), "cannot renew the serving certificate; trying again in an hour");
        }
    }
}
