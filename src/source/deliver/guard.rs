//! Where a tenant's sink may not point (pure). The multi-tenant adapter sends from inside the
//! cluster for every tenant; a sink of a tenant's choosing at loopback (the adapter's own admin
//! port), a link-local address (the cloud's metadata service at 169.254.169.254) or the API
//! server (which would take the adapter's requests as the adapter's) would lend the tenant the
//! adapter's network position (security review F-7). Such a sink is refused, by its host as
//! written and, at connect time, by every address its name resolves to ([`address_allowed`]),
//! unless the operator allows the host (`--allow-sink-host`).

use std::net::IpAddr;

/// Names that are the API server inside a cluster (with or without the cluster domain).
const API_SERVER_NAMES: [&str; 4] = [
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
    "kubernetes.default.svc.",
];

/// What the guard knows: the API server's host as the adapter reaches it, and the hosts the
/// operator allows.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Guard {
    /// The API server's host (from the adapter's kube config), lower case.
    pub api_server_host: Option<String>,
    /// Hosts allowed whatever they are (exact, lower case).
    pub allowed: Vec<String>,
    /// The cluster domain (`cluster.local`).
    pub cluster_domain: String,
    /// Whether a sink ref may name an object in another namespace than the source's
    /// (`--allow-cross-namespace-sinks`; then only one the source's service account may
    /// `knsubscribe`, as Knative's `cross-namespace-event-links` asks).
    pub cross_namespace: bool,
}

/// Whether an address may be sent to: not loopback, link-local, unspecified or multicast.
pub(crate) fn address_allowed(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            !(v4.is_loopback()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_multicast()
                || v4.is_broadcast())
        }
        IpAddr::V6(v6) => {
            let link_local = (v6.segments()[0] & 0xffc0) == 0xfe80;
            let mapped = v6
                .to_ipv4_mapped()
                .is_some_and(|v4| !address_allowed(IpAddr::V4(v4)));
            !(v6.is_loopback() || v6.is_unspecified() || v6.is_multicast() || link_local || mapped)
        }
    }
}

impl Guard {
    /// Whether `host` is allowed by the operator.
    pub(crate) fn allows(&self, host: &str) -> bool {
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        self.allowed.iter().any(|a| a.trim_end_matches('.') == host)
    }

    /// Why `url` may not be a tenant's sink; None when it may.
    pub(crate) fn refused(&self, url: &url::Url) -> Option<String> {
        let host = url
            .host_str()?
            .trim_start_matches('[')
            .trim_end_matches(']');
        let lower = host.trim_end_matches('.').to_ascii_lowercase();
        if self.allows(&lower) {
            return None;
        }
        let why = if let Ok(ip) = lower.parse::<IpAddr>() {
            (!address_allowed(ip)).then(|| {
                format!("{ip} is a loopback, link-local, unspecified or multicast address")
            })
        } else if lower == "localhost" || lower.ends_with(".localhost") {
            Some(format!("{lower} is this host"))
        } else {
            let with_domain = format!("kubernetes.default.svc.{}", self.cluster_domain);
            (API_SERVER_NAMES.contains(&lower.as_str()) || lower == with_domain)
                .then(|| format!("{lower} is the API server"))
        };
        let why = why.or_else(|| {
            (self.api_server_host.as_deref() == Some(lower.as_str()))
                .then(|| format!("{lower} is the API server the adapter uses"))
        })?;
        Some(format!(
            "the sink {url} may not be used: {why}, where the adapter would send as itself; the \
             operator can allow the host with --allow-sink-host"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guard() -> Guard {
        Guard {
            api_server_host: Some("10.96.0.1".into()),
            allowed: vec!["127.0.0.1".into()],
            cluster_domain: "cluster.local".into(),
            cross_namespace: false,
        }
    }

    fn refused(url: &str) -> bool {
        guard().refused(&url.parse().unwrap()).is_some()
    }

    #[test]
    fn loopback_link_local_metadata_and_the_api_server_are_refused() {
        for url in [
            "http://169.254.169.254/latest/meta-data/",
            "http://[fe80::1]/",
            "http://[::1]:8080/",
            "http://127.0.0.2:8080/",
            "http://0.0.0.0/",
            "http://localhost:8080/",
            "http://admin.localhost/",
            "https://kubernetes.default.svc/api",
            "https://kubernetes.default.svc.cluster.local./api",
            "https://KUBERNETES/",
            "https://10.96.0.1/",
            "http://[::ffff:169.254.169.254]/",
        ] {
            assert!(refused(url), "{url}");
        }
        let why = guard()
            .refused(&"http://169.254.169.254/".parse().unwrap())
            .unwrap();
        assert!(why.contains("--allow-sink-host"), "{why}");
    }

    #[test]
    fn cluster_services_brokers_and_outside_hosts_pass_and_the_operator_allows_a_host() {
        for url in [
            "http://broker-ingress.knative-eventing.svc.cluster.local/ns/default",
            "http://el-imagegate.notebooks.svc.cluster.local:8080",
            "http://10.0.0.7/",
            "https://hooks.example.com/x",
            // Allowed by the operator (the tests' sinks listen there).
            "http://127.0.0.1:4000/",
        ] {
            assert!(!refused(url), "{url}");
        }
    }

    #[test]
    fn addresses_a_name_resolves_to_are_judged_the_same() {
        assert!(!address_allowed("169.254.169.254".parse().unwrap()));
        assert!(!address_allowed("127.0.0.1".parse().unwrap()));
        assert!(!address_allowed("::1".parse().unwrap()));
        assert!(address_allowed("10.96.0.10".parse().unwrap()));
        assert!(address_allowed("2001:db8::1".parse().unwrap()));
    }
}
