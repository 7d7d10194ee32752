//! A trusted public key as a policy names it: the vocabulary of the signature policy
//! ([`super::params::signature`]) and of the proof's Chains record ([`super::proof`]), which both
//! read keys the same way ([`super::signature::pem_of`]).

use super::crd::KeyRef;

/// Where one public key comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KeySource {
    /// PEM in the spec.
    Inline(String),
    /// A key of a ConfigMap in the controller's own namespace.
    ConfigMap(KeyRef),
}

/// One trusted key, by the name the `checks` result gives it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TrustedKey {
    /// `keys[].name`.
    pub name: String,
    /// Where its PEM is.
    pub source: KeySource,
}
