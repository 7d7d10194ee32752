//! The cluster an operator command talks to, chosen as kubectl chooses it: `--kubeconfig` (else
//! `KUBECONFIG`, else `~/.kube/config`, else the in-cluster service account), `--context` (else
//! the current context), and the namespace from `-n`, else the context's, else `default`.

use anyhow::{anyhow, bail};
use kube::config::{KubeConfigOptions, Kubeconfig};

use crate::cli::ops::KubeArgs;

/// A client, and the namespace commands act in when `-n` and the target do not name one.
pub(crate) async fn client(args: &KubeArgs) -> anyhow::Result<(kube::Client, String)> {
    let options = KubeConfigOptions {
        context: args.context.clone(),
        cluster: None,
        user: None,
    };
    let config = match (&args.kubeconfig, &args.context) {
        (Some(path), _) => {
            let kubeconfig = Kubeconfig::read_from(path).map_err(|e| {
                anyhow!(
                    "--kubeconfig {:?} cannot be read: {e}",
                    path.display().to_string()
                )
            })?;
            kube::Config::from_custom_kubeconfig(kubeconfig, &options)
                .await
                .map_err(|e| anyhow!("--kubeconfig {:?}: {e}", path.display().to_string()))?
        }
        (None, Some(context)) => kube::Config::from_kubeconfig(&options)
            .await
            .map_err(|e| anyhow!("--context {context:?}: {e}"))?,
        (None, None) => kube::Config::infer().await.map_err(|e| {
            anyhow!("no Kubernetes configuration (KUBECONFIG, ~/.kube/config or in-cluster): {e}")
        })?,
    };
    let namespace = args
        .namespace
        .clone()
        .unwrap_or_else(|| config.default_namespace.clone());
    let client = kube::Client::try_from(config)
        .map_err(|e| anyhow!("cannot build a Kubernetes client: {e}"))?;
    Ok((client, namespace))
}

/// `NAME` or `NAMESPACE/NAME` -> (namespace, name). A namespace in the target must agree with
/// `-n` when both are given.
pub(crate) fn split_target(
    target: &str,
    flag_ns: Option<&str>,
    default_ns: &str,
) -> anyhow::Result<(String, String)> {
    let (ns, name) = match target.split_once('/') {
        Some((ns, name)) => {
            if let Some(flag) = flag_ns.filter(|f| *f != ns) {
                bail!("{target:?} names namespace {ns:?}, but -n says {flag:?}");
            }
            (ns.to_string(), name.to_string())
        }
        None => (default_ns.to_string(), target.to_string()),
    };
    if crate::cli::values::namespace(&ns).is_err() {
        bail!("{target:?}: {ns:?} is not a namespace name");
    }
    if !is_dns_subdomain(&name) {
        bail!("{target:?}: {name:?} is not an ImageStream name");
    }
    Ok((ns, name))
}

fn is_dns_subdomain(s: &str) -> bool {
    !s.is_empty() && s.len() <= 253 && s.split('.').all(crate::cli::values::is_dns_label)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_target_is_a_name_or_namespace_slash_name() {
        let ok = |t: &str, flag: Option<&str>| split_target(t, flag, "home").unwrap();
        assert_eq!(ok("nb", None), ("home".into(), "nb".into()));
        assert_eq!(ok("ds/nb", None), ("ds".into(), "nb".into()));
        assert_eq!(ok("ds/nb", Some("ds")), ("ds".into(), "nb".into()));
        let err =
            |t: &str, flag: Option<&str>| split_target(t, flag, "home").unwrap_err().to_string();
        assert_eq!(
            err("ds/nb", Some("other")),
            "\"ds/nb\" names namespace \"ds\", but -n says \"other\""
        );
        assert_eq!(
            err("Bad/nb", None),
            "\"Bad/nb\": \"Bad\" is not a namespace name"
        );
        assert_eq!(
            err("ds/NB", None),
            "\"ds/NB\": \"NB\" is not an ImageStream name"
        );
        assert_eq!(
            err("ds/a/b", None),
            "\"ds/a/b\": \"a/b\" is not an ImageStream name"
        );
    }
}
