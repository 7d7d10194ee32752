//! Pure sink resolution, as Knative's `URIResolver.AddressableFromDestinationV1` does it
//! (knative/pkg `resolver/addressable_resolver.go`), in two steps around the one read:
//!
//! 1. [`plan`]: a `uri` alone must be absolute with a host and is the sink; a `ref` names an
//!    object to read (its namespace defaults to the source's), and a `uri` beside it must be
//!    relative.
//! 2. [`resolve`]: the object read (None: it does not exist) gives the address. A core
//!    `v1/Service` is special-cased as Knative does: `http://NAME.NAMESPACE.svc.CLUSTER_DOMAIN`,
//!    no port (so port 80; a Service that listens elsewhere needs a `uri`), no path, `https`
//!    when `CACerts` is given. Any other object is read as an Addressable: the first of
//!    `status.addresses`, else `status.address`, whose `url` must have a host. A relative
//!    `uri` is then resolved against that URL (RFC 3986). The destination's `CACerts` and
//!    `audience` replace the address's own when set.
//!
//! Every failure is an [`Unresolved`] with the reason the source's `SinkProvided` condition
//! shows and a message that says what to change.

use kube::core::{GroupVersion, GroupVersionKind};
use serde_json::Value;

use crate::adapter::crd::status::reason;
use crate::adapter::crd::{Destination, KReference};

/// The cluster domain Knative assumes when it cannot read one (`network.GetClusterDomainName`).
pub(crate) const DEFAULT_CLUSTER_DOMAIN: &str = "cluster.local";

/// A resolved sink (Knative's duck/v1 Addressable).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Resolved {
    /// Where events go.
    pub url: String,
    /// PEM CA certificates to trust for it.
    pub ca_certs: Option<String>,
    /// Its OIDC audience.
    pub audience: Option<String>,
}

/// Why a sink did not resolve.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Unresolved {
    /// The `SinkProvided=False` reason ([`reason::SINK_INVALID`], [`reason::SINK_NOT_FOUND`]
    /// or [`reason::SINK_NOT_ADDRESSABLE`]).
    pub reason: &'static str,
    /// What is wrong and what to change.
    pub message: String,
}

impl Unresolved {
    fn new(reason: &'static str, message: impl Into<String>) -> Unresolved {
        Unresolved {
            reason,
            message: message.into(),
        }
    }
}

/// The object a `ref` names, with its namespace defaulted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Target {
    /// `apiVersion` (`v1`, `eventing.knative.dev/v1`).
    pub api_version: String,
    /// `kind`.
    pub kind: String,
    /// Its resource, guessed from the kind as Knative does ([`guess_plural`]).
    pub plural: String,
    /// `name`.
    pub name: String,
    /// `namespace`.
    pub namespace: String,
}

impl Target {
    /// Its group (empty for the core group), version and kind.
    pub(crate) fn gvk(&self) -> GroupVersionKind {
        gvk(&self.api_version, &self.kind)
    }

    /// `Kind namespace/name`, as messages name it.
    pub(crate) fn describe(&self) -> String {
        format!(
            "{} {}/{} ({})",
            self.kind, self.namespace, self.name, self.api_version
        )
    }

    fn is_core_service(&self) -> bool {
        self.api_version == "v1" && self.kind == "Service"
    }
}

/// What resolving a destination takes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Plan {
    /// Nothing to read: the `uri` is the sink.
    Uri(Resolved),
    /// Read this object, then [`resolve`].
    Read(Target),
}

/// Step 1: what `dest`, written in a source of `source_namespace`, needs read.
pub(crate) fn plan(dest: &Destination, source_namespace: &str) -> Result<Plan, Unresolved> {
    let uri = dest.uri.as_deref().filter(|u| !u.is_empty());
    if let Some(r) = &dest.r#ref {
        if let Some(uri) = uri
            && url::Url::parse(uri).is_ok()
        {
            return Err(Unresolved::new(
                reason::SINK_INVALID,
                format!(
                    "spec.sink.uri {uri:?} is absolute, but beside spec.sink.ref only a URI \
                     relative to the object's address is allowed: remove the ref or make the \
                     URI a path"
                ),
            ));
        }
        return target(r, source_namespace).map(Plan::Read);
    }
    let Some(uri) = uri else {
        return Err(Unresolved::new(
            reason::SINK_INVALID,
            "spec.sink has neither ref nor uri: set one",
        ));
    };
    match url::Url::parse(uri) {
        Ok(url) if url.has_host() => Ok(Plan::Uri(Resolved {
            url: uri.to_owned(),
            ca_certs: non_empty(&dest.ca_certs),
            audience: non_empty(&dest.audience),
        })),
        _ => Err(Unresolved::new(
            reason::SINK_INVALID,
            format!(
                "spec.sink.uri {uri:?} is not an absolute URL with a host (without a ref it \
                 must be, for example http://NAME.NAMESPACE.svc.cluster.local)"
            ),
        )),
    }
}

/// `kind` of `api_version`, read as kube reads an apiVersion (`group/version`, or a core
/// group's `version`).
pub(crate) fn gvk(api_version: &str, kind: &str) -> GroupVersionKind {
    // kube's parse takes any string (the part before the first `/` is the group).
    let gv = api_version
        .parse::<GroupVersion>()
        .unwrap_or_else(|_| GroupVersion::gv("", api_version));
    gv.with_kind(kind)
}

/// Whether `api_version` is `version` or `group/version` as Kubernetes names them: a group is a
/// lowercase DNS subdomain, a version a lowercase DNS label. It is a tenant's text that the
/// adapter puts into the path it reads with its own identity and into the group its
/// cross-namespace review asks about, so anything else (dot segments, more slashes) is refused
/// before either is made; kube's parse takes any text (all after the first `/` is the version).
fn is_api_version(api_version: &str) -> bool {
    let label = |l: &str| {
        (1..=63).contains(&l.len())
            && l.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    match api_version.split_once('/') {
        None => label(api_version),
        Some((group, version)) => {
            group.len() <= 253 && group.split('.').all(label) && label(version)
        }
    }
}

fn target(r: &KReference, source_namespace: &str) -> Result<Target, Unresolved> {
    for (field, value) in [
        ("apiVersion", &r.api_version),
        ("kind", &r.kind),
        ("name", &r.name),
    ] {
        if value.is_empty() {
            return Err(Unresolved::new(
                reason::SINK_INVALID,
                format!("spec.sink.ref.{field} is empty: set it"),
            ));
        }
    }
    if !is_api_version(&r.api_version) {
        return Err(Unresolved::new(
            reason::SINK_INVALID,
            format!(
                "spec.sink.ref.apiVersion {:?} is not `version` or `group/version` (a lowercase \
                 DNS name and a version such as `v1`)",
                r.api_version
            ),
        ));
    }
    let namespace = r
        .namespace
        .clone()
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| source_namespace.to_owned());
    Ok(Target {
        api_version: r.api_version.clone(),
        kind: r.kind.clone(),
        plural: guess_plural(&r.kind),
        name: r.name.clone(),
        namespace,
    })
}

/// The verb a source's service account must hold on a sink in another namespace, Knative's
/// (`cross-namespace-event-links`: `knsubscribe` on the Broker or Channel subscribed to).
pub(crate) const CROSS_NAMESPACE_VERB: &str = "knsubscribe";

/// Why a ref of a source in `source_namespace` may not name `target`, before anything is read
/// (so the answer tells nothing of the object): None when it is in the source's namespace, or
/// when the platform allows refs across namespaces (`allowed`; the review of
/// [`CROSS_NAMESPACE_VERB`] comes next). Knative's default: a ref stays in its namespace.
pub(crate) fn other_namespace(
    target: &Target,
    source_namespace: &str,
    allowed: bool,
) -> Option<Unresolved> {
    if target.namespace == source_namespace || allowed {
        return None;
    }
    Some(Unresolved::new(
        reason::SINK_NOT_ALLOWED,
        format!(
            "the ref names {kind} {name:?} in namespace {ns:?}, not the source's own ({source_namespace:?}): \
             a ref resolves only in its source's namespace (Knative's cross-namespace-event-links \
             is off by default); send to an object of this namespace, or ask the platform to \
             run the adapter with --allow-cross-namespace-sinks and grant the source's service \
             account {CROSS_NAMESPACE_VERB} on it",
            kind = target.kind,
            name = target.name,
            ns = target.namespace,
        ),
    ))
}

/// Step 2: the sink, from the object `target` names as read (None: it does not exist).
pub(crate) fn resolve(
    dest: &Destination,
    target: &Target,
    object: Option<&Value>,
    cluster_domain: &str,
) -> Result<Resolved, Unresolved> {
    let Some(object) = object else {
        return Err(Unresolved::new(
            reason::SINK_NOT_FOUND,
            format!(
                "spec.sink.ref names {}, which does not exist: create it or fix the ref",
                target.describe()
            ),
        ));
    };
    let ca_certs = non_empty(&dest.ca_certs);
    let base = if target.is_core_service() {
        let scheme = if ca_certs.is_some() { "https" } else { "http" };
        let host = format!("{}.{}.svc.{cluster_domain}", target.name, target.namespace);
        Resolved {
            url: format!("{scheme}://{host}"),
            ca_certs: ca_certs.clone(),
            audience: non_empty(&dest.audience),
        }
    } else {
        addressable(object, target)?
    };
    let mut resolved = match dest.uri.as_deref().filter(|u| !u.is_empty()) {
        None => base,
        Some(relative) => {
            let joined = url::Url::parse(&base.url)
                .and_then(|b| b.join(relative))
                .map_err(|e| {
                    Unresolved::new(
                        reason::SINK_INVALID,
                        format!(
                            "spec.sink.uri {relative:?} cannot be resolved against {}: {e}",
                            base.url
                        ),
                    )
                })?;
            Resolved {
                url: joined.to_string(),
                ..base
            }
        }
    };
    if ca_certs.is_some() {
        resolved.ca_certs = ca_certs;
    }
    if let Some(audience) = non_empty(&dest.audience) {
        resolved.audience = Some(audience);
    }
    Ok(resolved)
}

/// The address of an Addressable: the first of `status.addresses`, else `status.address`.
fn addressable(object: &Value, target: &Target) -> Result<Resolved, Unresolved> {
    let status = object.get("status");
    let first = status
        .and_then(|s| s.get("addresses"))
        .and_then(Value::as_array)
        .and_then(|a| a.first());
    let address = first.or_else(|| {
        status
            .and_then(|s| s.get("address"))
            .filter(|a| !a.is_null())
    });
    let not_addressable = |what: &str| {
        Unresolved::new(
            reason::SINK_NOT_ADDRESSABLE,
            format!(
                "{} {what}: wait until it is Ready, or point spec.sink at an object that has \
                 an address (a Broker, a Knative Service, an EventListener, a v1 Service)",
                target.describe()
            ),
        )
    };
    let Some(address) = address else {
        return Err(not_addressable(
            "has no address (status.addresses or status.address)",
        ));
    };
    let Some(url) = address
        .get("url")
        .and_then(Value::as_str)
        .filter(|u| !u.is_empty())
    else {
        return Err(not_addressable("has an address without a url"));
    };
    if !url::Url::parse(url).is_ok_and(|u| u.has_host()) {
        return Err(not_addressable(&format!(
            "has the address url {url:?}, which has no host"
        )));
    }
    let text = |field: &str| {
        address
            .get(field)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
    };
    Ok(Resolved {
        url: url.to_owned(),
        ca_certs: text("CACerts"),
        audience: text("audience"),
    })
}

/// Knative's (apimachinery's) `UnsafeGuessKindToResource`: the lowercase kind, unchanged when
/// it ends in `endpoints`, else `-s` -> `-ses`, `-y` -> `-ies` (even after a vowel: a
/// `Gateway` is guessed `gatewaies`, as Knative guesses it), anything else `+s`.
pub(crate) fn guess_plural(kind: &str) -> String {
    let lower = kind.to_lowercase();
    if lower.is_empty() || lower.ends_with("endpoints") {
        return lower;
    }
    if lower.ends_with('s') {
        return format!("{lower}es");
    }
    if let Some(stem) = lower.strip_suffix('y') {
        return format!("{stem}ies");
    }
    format!("{lower}s")
}

fn non_empty(value: &Option<String>) -> Option<String> {
    value.clone().filter(|v| !v.is_empty())
}
