//! The interceptor's serving certificate. Triggers calls a ClusterInterceptor over https when it
//! has a `caBundle`, and trusts only the CAs of the ClusterInterceptors labelled
//! `server/type: https` (it reloads them every minute). So, as Triggers' own core interceptors
//! do, the interceptor makes its CA and certificate, keeps them in a Secret of its namespace
//! (so every replica serves the same one), and writes the CA into its ClusterInterceptor's
//! `spec.clientConfig.caBundle`. Nothing else reads the Secret; the CA signs this certificate
//! only. A certificate within [`RENEW_BEFORE`] of its end is replaced, at start and by the
//! running process (checked hourly): [`Resolver`] serves the newest, and the bundle keeps the
//! previous CA beside the new one ([`bundle`]), so a replica that still serves the old
//! certificate until its next check stays trusted.

use std::sync::{Arc, RwLock};
use std::time::Duration;

use base64::Engine;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{ApiResource, DynamicObject, ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

/// How long a certificate is valid.
pub(crate) const VALIDITY: SignedDuration = SignedDuration::from_hours(365 * 24);
/// How long before its end a certificate is replaced.
pub(crate) const RENEW_BEFORE: SignedDuration = SignedDuration::from_hours(30 * 24);
/// The Secret annotation that says until when the certificate is valid (RFC 3339).
const NOT_AFTER: &str = "imagegate.dev/not-after";
/// The Secret annotation that lists the names the certificate is for.
const NAMES: &str = "imagegate.dev/names";

/// A CA and the serving certificate it signed, in PEM.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Material {
    /// The CA certificate (the ClusterInterceptor's `caBundle`).
    pub(crate) ca: String,
    /// The serving certificate.
    pub(crate) cert: String,
    /// Its key.
    pub(crate) key: String,
    /// Its end.
    pub(crate) not_after: Timestamp,
    /// The DNS names it is for.
    pub(crate) names: Vec<String>,
}

/// Makes a CA and a certificate for `names`, valid from `now` for [`VALIDITY`].
pub(crate) fn issue(names: &[String], now: Timestamp) -> anyhow::Result<Material> {
    use rcgen::{
        BasicConstraints, CertificateParams, CertifiedIssuer, DistinguishedName, DnType,
        ExtendedKeyUsagePurpose, IsCa, KeyPair, KeyUsagePurpose,
    };
    let not_after = now
        .checked_add(VALIDITY)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let offset = |t: Timestamp| {
        rcgen::date_time_ymd(1970, 1, 1) + Duration::from_secs(t.as_second().max(0) as u64)
    };
    let mut ca = CertificateParams::new(Vec::<String>::new())?;
    ca.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, "imagegate interceptor CA");
    ca.distinguished_name = dn;
    ca.not_before = offset(now);
    ca.not_after = offset(not_after);
    let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate()?)?;
    let mut leaf = CertificateParams::new(names.to_vec())?;
    let mut dn = DistinguishedName::new();
    dn.push(
        DnType::CommonName,
        names.first().map_or("imagegate", String::as_str),
    );
    leaf.distinguished_name = dn;
    leaf.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    leaf.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    leaf.not_before = offset(now);
    leaf.not_after = offset(not_after);
    let key = KeyPair::generate()?;
    let cert = leaf.signed_by(&key, &ca)?;
    Ok(Material {
        ca: ca.pem(),
        cert: cert.pem(),
        key: key.serialize_pem(),
        not_after,
        names: names.to_vec(),
    })
}

/// Whether `m` is for `names` and valid past `now` + [`RENEW_BEFORE`].
pub(crate) fn fresh(m: &Material, names: &[String], now: Timestamp) -> bool {
    m.names == names && now.checked_add(RENEW_BEFORE).is_ok_and(|t| t < m.not_after)
}

/// The CA bundle of a renewal: the new CA, then the first certificate of the old bundle (the
/// CA the replaced certificate was signed by; older ones are dropped).
pub(crate) fn bundle(new_ca: &str, old_bundle: &str) -> String {
    const END: &str = "-----END CERTIFICATE-----";
    let old_first = match old_bundle.find(END) {
        Some(i) => old_bundle[..i + END.len()].trim(),
        None => return new_ca.to_string(),
    };
    if old_first == new_ca.trim() {
        return new_ca.to_string();
    }
    format!("{}\n{old_first}\n", new_ca.trim_end())
}

fn to_secret(m: &Material, name: &str, resource_version: Option<String>) -> Secret {
    let data = [("ca.crt", &m.ca), ("tls.crt", &m.cert), ("tls.key", &m.key)]
        .into_iter()
        .map(|(k, v)| (k.to_string(), ByteString(v.as_bytes().to_vec())))
        .collect();
    Secret {
        metadata: ObjectMeta {
            name: Some(name.into()),
            resource_version,
            labels: Some(
                [(
                    "app.kubernetes.io/part-of".to_string(),
                    "imagegate".to_string(),
                )]
                .into(),
            ),
            annotations: Some(
                [
                    (NOT_AFTER.to_string(), m.not_after.to_string()),
                    (NAMES.to_string(), m.names.join(",")),
                ]
                .into(),
            ),
            ..Default::default()
        },
        data: Some(data),
        type_: Some("kubernetes.io/tls".into()),
        ..Default::default()
    }
}

fn from_secret(s: &Secret) -> Option<Material> {
    let data = s.data.as_ref()?;
    let text = |k: &str| String::from_utf8(data.get(k)?.0.clone()).ok();
    let ann = s.metadata.annotations.as_ref()?;
    Some(Material {
        ca: text("ca.crt")?,
        cert: text("tls.crt")?,
        key: text("tls.key")?,
        not_after: ann.get(NOT_AFTER)?.parse().ok()?,
        names: ann.get(NAMES)?.split(',').map(str::to_string).collect(),
    })
}

/// The material in Secret `name` of `namespace` if it is fresh, else a new one written there
/// (created, or replaced at the resourceVersion read; when another replica wrote first, its
/// material is used).
pub(crate) async fn ensure(
    client: Client,
    namespace: &str,
    name: &str,
    names: &[String],
) -> anyhow::Result<Material> {
    let api: Api<Secret> = Api::namespaced(client, namespace);
    let what = || format!("the interceptor's certificate, Secret {namespace}/{name}");
    for _ in 0..3 {
        let now = Timestamp::now();
        let current = api
            .get_opt(name)
            .await
            .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", what()))?;
        if let Some(m) = current.as_ref().and_then(from_secret)
            && fresh(&m, names, now)
        {
            return Ok(m);
        }
        let mut m = issue(names, now)?;
        // A renewal keeps the old CA in the bundle beside the new one: a replica still serving
        // the old certificate (until its hourly check) stays trusted by an EventListener that
        // loads the new bundle.
        if let Some(old) = current.as_ref().and_then(from_secret) {
            m.ca = bundle(&m.ca, &old.ca);
        }
        let written = match current {
            None => {
                api.create(&PostParams::default(), &to_secret(&m, name, None))
                    .await
            }
            Some(s) => {
                let rv = s.metadata.resource_version.clone();
                api.replace(name, &PostParams::default(), &to_secret(&m, name, rv))
                    .await
            }
        };
        match written {
            Ok(_) => return Ok(m),
            // Another replica wrote first: read what it wrote.
            Err(kube::Error::Api(s)) if s.code == 409 => continue,
            Err(e) => anyhow::bail!("cannot write {}: {e}", what()),
        }
    }
    anyhow::bail!("{} kept changing under three writes", what())
}

/// The ClusterInterceptor resource (Triggers `v1alpha1`).
fn cluster_interceptors(client: Client) -> Api<DynamicObject> {
    let ar = ApiResource {
        group: "triggers.tekton.dev".into(),
        version: "v1alpha1".into(),
        api_version: "triggers.tekton.dev/v1alpha1".into(),
        kind: "ClusterInterceptor".into(),
        plural: "clusterinterceptors".into(),
    };
    Api::all_with(client, &ar)
}

/// Writes `ca` into ClusterInterceptor `name`'s `spec.clientConfig.caBundle` unless it is there.
pub(crate) async fn publish_ca(client: Client, name: &str, ca: &str) -> anyhow::Result<()> {
    let api = cluster_interceptors(client);
    let ci = api.get(name).await.map_err(|e| {
        anyhow::anyhow!(
            "cannot read ClusterInterceptor {name} (apply config/404-interceptor.yaml): {e}"
        )
    })?;
    let want = base64::engine::general_purpose::STANDARD.encode(ca);
    let has = ci
        .data
        .pointer("/spec/clientConfig/caBundle")
        .and_then(|v| v.as_str());
    if has == Some(want.as_str()) {
        return Ok(());
    }
    let patch = serde_json::json!({"spec": {"clientConfig": {"caBundle": want}}});
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(|e| anyhow::anyhow!("cannot write ClusterInterceptor {name}'s caBundle: {e}"))?;
    Ok(())
}

/// Serves the newest certificate (replaced by [`Resolver::set`] when renewed).
#[derive(Debug)]
pub(crate) struct Resolver(RwLock<Arc<CertifiedKey>>);

impl Resolver {
    /// A resolver serving `m`.
    pub(crate) fn new(m: &Material) -> anyhow::Result<Resolver> {
        Ok(Resolver(RwLock::new(certified(m)?)))
    }

    /// Serves `m` from now on.
    pub(crate) fn set(&self, m: &Material) -> anyhow::Result<()> {
        let key = certified(m)?;
        *self.0.write().unwrap_or_else(|p| p.into_inner()) = key;
        Ok(())
    }
}

impl ResolvesServerCert for Resolver {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.0.read().unwrap_or_else(|p| p.into_inner()).clone())
    }
}

fn certified(m: &Material) -> anyhow::Result<Arc<CertifiedKey>> {
    let certs = CertificateDer::pem_slice_iter(m.cert.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| anyhow::anyhow!("the interceptor's certificate is not PEM: {e}"))?;
    let key = PrivateKeyDer::from_pem_slice(m.key.as_bytes())
        .map_err(|e| anyhow::anyhow!("the interceptor's key is not PEM: {e}"))?;
    let signer = rustls::crypto::ring::sign::any_supported_type(&key)
        .map_err(|e| anyhow::anyhow!("the interceptor's key cannot sign: {e}"))?;
    Ok(Arc::new(CertifiedKey::new(certs, signer)))
}

#[cfg(test)]
mod tests {
    use rustls::client::danger::ServerCertVerifier;

    use super::*;

    fn names() -> Vec<String> {
        vec!["imagegate-interceptor.imagegate-system.svc".into()]
    }

    #[test]
    fn issued_material_is_fresh_until_renewal_is_due_and_round_trips_through_its_secret() {
        let now: Timestamp = "2026-12-06T00:00:00Z".parse().unwrap();
        let m = issue(&names(), now).unwrap();
        assert!(fresh(&m, &names(), now));
        let due = now.checked_add(VALIDITY - RENEW_BEFORE).unwrap();
        assert!(!fresh(&m, &names(), due), "renewed 30 days before its end");
        assert!(
            !fresh(&m, &["other".to_string()], now),
            "renewed for other names"
        );
        assert_eq!(from_secret(&to_secret(&m, "s", None)), Some(m.clone()));
        Resolver::new(&m).unwrap();
    }

    #[test]
    fn a_renewals_bundle_trusts_the_old_and_the_new_certificate() {
        let now = Timestamp::now();
        let old = issue(&names(), now).unwrap();
        let new = issue(&names(), now).unwrap();
        let b = bundle(&new.ca, &old.ca);
        assert_eq!(
            CertificateDer::pem_slice_iter(b.as_bytes()).count(),
            2,
            "{b}"
        );
        // Renewed again: the bundle keeps the newest and the one before, not every CA.
        let newer = issue(&names(), now).unwrap();
        let b2 = bundle(&newer.ca, &b);
        let certs: Vec<_> = CertificateDer::pem_slice_iter(b2.as_bytes())
            .map(Result::unwrap)
            .collect();
        let first = |pem: &str| {
            CertificateDer::pem_slice_iter(pem.as_bytes())
                .next()
                .unwrap()
                .unwrap()
        };
        assert_eq!(certs, vec![first(&newer.ca), first(&new.ca)]);
        assert_eq!(
            bundle(&new.ca, &new.ca),
            new.ca,
            "the same CA is not doubled"
        );
        // Both leaves verify against the bundle.
        let mut roots = rustls::RootCertStore::empty();
        for c in CertificateDer::pem_slice_iter(b.as_bytes()) {
            roots.add(c.unwrap()).unwrap();
        }
        let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(
            Arc::new(roots),
            Arc::new(rustls::crypto::ring::default_provider()),
        )
        .build()
        .unwrap();
        let at = rustls::pki_types::UnixTime::since_unix_epoch(Duration::from_secs(
            now.as_second() as u64 + 60,
        ));
        let name = rustls::pki_types::ServerName::try_from(names()[0].clone()).unwrap();
        for m in [&old, &new] {
            let leaf = first(&m.cert);
            verifier
                .verify_server_cert(&leaf, &[], &name, &[], at)
                .expect("old and new certificates are trusted during the overlap");
        }
    }

    #[test]
    fn a_client_that_trusts_the_ca_verifies_the_certificate_for_its_names() {
        let now = Timestamp::now();
        let m = issue(&names(), now).unwrap();
        let mut roots = rustls::RootCertStore::empty();
        for c in CertificateDer::pem_slice_iter(m.ca.as_bytes()) {
            roots.add(c.unwrap()).unwrap();
        }
        let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(
            Arc::new(roots),
            Arc::new(rustls::crypto::ring::default_provider()),
        )
        .build()
        .unwrap();
        let leaf = CertificateDer::pem_slice_iter(m.cert.as_bytes())
            .next()
            .unwrap()
            .unwrap();
        let at = rustls::pki_types::UnixTime::since_unix_epoch(Duration::from_secs(
            now.as_second() as u64 + 60,
        ));
        let name = rustls::pki_types::ServerName::try_from(names()[0].clone()).unwrap();
        verifier
            .verify_server_cert(&leaf, &[], &name, &[], at)
            .expect("the CA's certificate for the Service's name");
        let other = rustls::pki_types::ServerName::try_from("evil.example").unwrap();
        assert!(
            verifier
                .verify_server_cert(&leaf, &[], &other, &[], at)
                .is_err()
        );
    }
}
