//! What a registry's push notification claims: the pushes it names, as [`Push`]es, one parser per
//! sender ([`distribution()`], [`harbor()`], [`github()`], [`quay()`], [`dockerhub()`]). Pure, and
//! never trusted for a digest: a push only says which repository and tag to import again now;
//! the import reads the registry itself.

mod distribution;
mod github;
mod harbor;
mod hub;

pub(crate) use distribution::distribution;
pub(crate) use github::github;
pub(crate) use harbor::harbor;
pub(crate) use hub::{dockerhub, quay};

/// One pushed tag: `registry/repository:tag`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Push {
    /// The registry host as clients name it (`quay.io`, `registry.example.com:5000`).
    pub(crate) registry: String,
    /// The repository path (`org/notebook`).
    pub(crate) repository: String,
    /// The tag pushed.
    pub(crate) tag: String,
}

/// Why an event of a notification named no push.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Ignored {
    /// Not a push (a pull, a mount, a delete).
    NotAPush,
    /// A blob, not a manifest.
    NotAManifest,
    /// A manifest pushed by digest only: no tag moved.
    NoTag,
}

/// What a notification body said: the pushes, and how many events named none.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Parsed {
    /// Each tag pushed, once, in order.
    pub(crate) pushes: Vec<Push>,
    /// Events that moved no tag.
    pub(crate) ignored: usize,
}

/// The most events one notification may carry (the registry sends them in small batches).
pub(crate) const MAX_EVENTS: usize = 1024;

/// Docker Hub's registry as pushes and pull specs are compared.
pub(crate) const DOCKER_HUB: &str = "docker.io";

/// A registry host as pushes and pull specs are compared: lower case, and Docker Hub's other
/// names (`index.docker.io`, `registry-1.docker.io`, `registry.hub.docker.com`) as `docker.io`.
pub(crate) fn canonical_registry(host: &str) -> String {
    let host = host.to_ascii_lowercase();
    match host.as_str() {
        "index.docker.io" | "registry-1.docker.io" | "registry.hub.docker.com" => DOCKER_HUB.into(),
        _ => host,
    }
}

/// `host/path/repo:tag` (or `@digest`) and its tag -> the push.
fn split_url(url: &str, tag: &str) -> Option<Push> {
    let (registry, rest) = url.split_once('/')?;
    let repository = rest
        .split('@')
        .next()?
        .strip_suffix(&format!(":{tag}"))
        .unwrap_or_else(|| rest.split('@').next().unwrap_or(rest));
    (!registry.is_empty() && !repository.is_empty()).then(|| Push {
        registry: canonical_registry(registry),
        repository: repository.to_string(),
        tag: tag.to_string(),
    })
}
