//! The `signature` of an ImagePromotion spec, validated before any registry is asked: each key
//! has a unique name and exactly one source, an inline key is a public key the verifier can use,
//! and the names of ConfigMaps, Secrets and pull secrets are object names. Pure; the lookup and
//! the verification are [`crate::controller::signature`].

use crate::controller::crd::{KeyRef, Keyless, Signature, SignatureKey};

pub use crate::controller::keys::{KeySource, TrustedKey};

/// What one ImagePromotion (or the run's inline spec) asks of the candidate's signatures: a
/// signature over exactly the candidate digest by any of `keys`, or a keyless one by any of
/// `keyless`'s identities.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SignatureRequirement {
    /// Who asks (`ImagePromotion "notebooks"`, `the inline spec`), for the messages.
    pub by: String,
    /// The keys, any of which satisfies the requirement.
    pub keys: Vec<TrustedKey>,
    /// The keyless identities, and the trusted root they are verified with.
    pub keyless: Option<KeylessRequirement>,
    /// The dockerconfigjson Secrets of the run's namespace that hold the registry's credentials.
    pub pull_secrets: Vec<String>,
}

impl Signature {
    /// Validates the block for `by`. The error lists every problem, `; `-separated, each naming
    /// the field (`signature.keys[1]: set exactly one of publicKey, configMapKeyRef`). The
    /// bounds are the CRD's, held here too: a CustomRun's inline spec is not checked against
    /// the CRD's schema.
    pub(crate) fn parse(&self, by: &str) -> Result<SignatureRequirement, String> {
        let mut problems = Vec::new();
        if self.keys.is_empty() && self.keyless.is_none() {
            problems.push(
                "signature: name at least one public key (keys) or keyless identity (keyless)"
                    .to_string(),
            );
        }
        if self.keys.len() > MAX_KEYS || self.pull_secrets.len() > MAX_PULL_SECRETS {
            return Err(format!(
                "signature: at most {MAX_KEYS} keys and {MAX_PULL_SECRETS} pullSecrets (there are {} and {})",
                self.keys.len(),
                self.pull_secrets.len()
            ));
        }
        let keys = parse_keys(&self.keys, "signature.keys", &mut problems);
        let keyless = (self.keyless.as_ref()).map(|k| parse_keyless(k, &keys, &mut problems));
        for (i, name) in self.pull_secrets.iter().enumerate() {
            if !is_object_name(name) {
                problems.push(format!(
                    "signature.pullSecrets[{i}]: {name:?} is not a Secret name"
                ));
            }
        }
        if !problems.is_empty() {
            return Err(problems.join("; "));
        }
        Ok(SignatureRequirement {
            by: by.to_string(),
            keys,
            keyless,
            pull_secrets: self.pull_secrets.clone(),
        })
    }
}

/// The keys of `field` (`signature.keys`, `validation.chains.keys`): each with a unique name and
/// exactly one source, an inline key one the verifier can use, a ConfigMap named by an object
/// name. What is wrong is added to `problems`, naming the field.
pub(crate) fn parse_keys(
    keys: &[SignatureKey],
    field: &str,
    problems: &mut Vec<String>,
) -> Vec<TrustedKey> {
    let mut parsed = Vec::new();
    for (i, key) in keys.iter().enumerate() {
        let field = format!("{field}[{i}]");
        if key.name.trim().is_empty() {
            problems.push(format!("{field}.name: give the key a name"));
        } else if keys[..i].iter().any(|k| k.name == key.name) {
            problems.push(format!("{field}.name: {:?} is named twice", key.name));
        }
        let sources = [
            key.public_key.clone().map(KeySource::Inline),
            key.config_map_key_ref.clone().map(KeySource::ConfigMap),
        ];
        let mut given: Vec<KeySource> = sources.into_iter().flatten().collect();
        if given.len() != 1 {
            problems.push(format!(
                "{field}: set exactly one of publicKey, configMapKeyRef"
            ));
            continue;
        }
        let source = given.remove(0);
        match &source {
            KeySource::Inline(pem) => {
                if let Err(e) = public_key(pem) {
                    problems.push(format!("{field}.publicKey: {e}"));
                }
            }
            KeySource::ConfigMap(r) => {
                if let Some(why) = bad_ref(r) {
                    problems.push(format!("{field}: {why}"));
                }
            }
        }
        parsed.push(TrustedKey {
            name: key.name.clone(),
            source,
        });
    }
    parsed
}

/// The keyless block: a trusted root by a ConfigMap reference, 1 to [`MAX_KEYS`] identities, each
/// named uniquely among the keys and identities, with an issuer and exactly one of a subject and
/// a subject pattern that compiles.
fn parse_keyless(
    keyless: &Keyless,
    keys: &[TrustedKey],
    problems: &mut Vec<String>,
) -> KeylessRequirement {
    let root = &keyless.trusted_root.config_map_key_ref;
    if let Some(why) = bad_ref(root) {
        problems.push(format!(
            "signature.keyless.trustedRoot.configMapKeyRef: {why}"
        ));
    }
    let found = keyless.identities.len();
    if found == 0 || found > MAX_KEYS {
        problems.push(format!(
            "signature.keyless.identities: name 1 to {MAX_KEYS} identities (there are {found})"
        ));
    }
    let mut identities = Vec::new();
    for (i, identity) in keyless.identities.iter().enumerate() {
        let field = format!("signature.keyless.identities[{i}]");
        let name = &identity.name;
        let taken = keys.iter().any(|k| &k.name == name)
            || keyless.identities[..i].iter().any(|k| &k.name == name);
        if name.trim().is_empty() {
            problems.push(format!("{field}.name: give the identity a name"));
        } else if taken {
            problems.push(format!("{field}.name: {name:?} is named twice"));
        }
        if identity.issuer.trim().is_empty() {
            problems.push(format!("{field}.issuer: name the OIDC issuer"));
        }
        let subject = match (&identity.subject, &identity.subject_reg_exp) {
            (Some(exact), None) if !exact.is_empty() => SubjectRule::Exact(exact.clone()),
            (None, Some(pattern)) => match anchored(pattern) {
                Ok(_) => SubjectRule::Pattern(pattern.clone()),
                Err(why) => {
                    problems.push(format!("{field}.subjectRegExp: {why}"));
                    continue;
                }
            },
            _ => {
                problems.push(format!(
                    "{field}: set exactly one of subject, subjectRegExp (not empty)"
                ));
                continue;
            }
        };
        identities.push(TrustedIdentity {
            name: name.clone(),
            issuer: identity.issuer.clone(),
            subject,
        });
    }
    KeylessRequirement {
        trusted_root: root.clone(),
        identities,
    }
}

/// What a keyless policy trusts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeylessRequirement {
    /// The ConfigMap key (controller's namespace) of the Sigstore trusted root.
    pub trusted_root: KeyRef,
    /// The identities, any of which satisfies the requirement.
    pub identities: Vec<TrustedIdentity>,
}

/// One identity a keyless signature may be made by.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TrustedIdentity {
    /// `identities[].name`.
    pub name: String,
    /// The OIDC issuer, exactly.
    pub issuer: String,
    /// The subject.
    pub subject: SubjectRule,
}

/// How a certificate's subject is matched.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SubjectRule {
    /// Exactly.
    Exact(String),
    /// By a regular expression over the whole subject (checked to compile when parsed).
    Pattern(String),
}

impl TrustedIdentity {
    /// Whether a certificate for `subject` from `issuer` is this identity's.
    pub(crate) fn matches(&self, issuer: &str, subject: &str) -> bool {
        issuer == self.issuer
            && match &self.subject {
                SubjectRule::Exact(exact) => subject == exact,
                SubjectRule::Pattern(pattern) => {
                    anchored(pattern).is_ok_and(|re| re.is_match(subject))
                }
            }
    }
}

/// The longest subject pattern a policy may give.
const MAX_PATTERN: usize = 1024;

/// `pattern` compiled to match a whole subject (anchored at both ends), within a size bound.
fn anchored(pattern: &str) -> Result<regex::Regex, String> {
    if pattern.is_empty() || pattern.len() > MAX_PATTERN {
        return Err(format!("give a pattern of 1 to {MAX_PATTERN} characters"));
    }
    let build = |p: &str| {
        regex::RegexBuilder::new(p)
            .size_limit(1 << 20)
            .build()
            .map_err(|e| format!("not a regular expression ({e})"))
    };
    // On its own first: `a)|(.*` does not compile alone, but wrapped it would, as `^(?:a)|(.*)$`,
    // matching anything.
    build(pattern)?;
    build(&format!("^(?:{pattern})$"))
}

/// The most keys one signature policy lists (the CRD's bound).
pub(crate) const MAX_KEYS: usize = 16;
/// The most pull secrets one signature policy names (the CRD's bound).
pub(crate) const MAX_PULL_SECRETS: usize = 8;

impl SignatureRequirement {
    /// Whether it names anything outside itself (a ConfigMap of keys, a pull secret): only an
    /// ImagePromotion may, not a CustomRun's inline spec.
    pub(crate) fn names_objects(&self) -> bool {
        !self.pull_secrets.is_empty()
            || self.keyless.is_some()
            || (self.keys.iter()).any(|k| matches!(k.source, KeySource::ConfigMap(_)))
    }
}

/// The verifier of a PEM public key (ECDSA P-256/P-384, Ed25519, RSA), or why it cannot be one.
/// The message never quotes the key.
pub(crate) fn public_key(pem: &str) -> Result<sigstore::crypto::CosignVerificationKey, String> {
    sigstore::crypto::CosignVerificationKey::try_from_pem(pem.trim().as_bytes())
        .map_err(|e| format!("not a PEM public key cosign can verify with ({e})"))
}

fn bad_ref(r: &KeyRef) -> Option<String> {
    if !is_object_name(&r.name) {
        return Some(format!("{:?} is not an object name", r.name));
    }
    let key_ok = !r.key.is_empty()
        && r.key.len() <= 253
        && (r.key.chars()).all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    (!key_ok).then(|| format!("{:?} is not a data key", r.key))
}

/// A DNS subdomain (RFC 1123), what ConfigMap and Secret names are.
fn is_object_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && (name.chars())
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '-' | '.'))
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric())
}

#[cfg(test)]
pub(crate) mod tests;
