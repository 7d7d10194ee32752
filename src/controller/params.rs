//! What a CustomRun asks for: its params read together with its ImagePromotion spec (the named
//! object's defaults and checks, or the inline `customSpec`), the checks parsed by [`checks`].
//! Pure: bad input is a message that ends the run with `InvalidParams`, never a retried error.

use std::collections::BTreeMap;

use crate::api::{CustomRun, ParamValue};

use super::crd::{ImagePromotionSpec, PromoteAs};
use super::proof::Proof;

pub mod checks;
pub mod odh;
pub mod proof;
pub mod signature;

use self::checks::ParsedChecks;
use self::odh::OdhSettings;

/// The custom task's `apiVersion`.
pub const API_VERSION: &str = "imagegate.dev/v1alpha1";
/// The custom task's `kind`.
pub const KIND: &str = "ImagePromotion";

/// The param names, as pipeline authors write them.
pub mod names {
    /// The ImageStream (in the run's namespace).
    pub(crate) const IMAGESTREAM: &str = "imagestream";
    /// The hidden tag the scheduled import fills.
    pub const CANDIDATE_TAG: &str = "candidate-tag";
    /// The tag users are served.
    pub const SERVED_TAG: &str = "served-tag";
    /// The candidate digest the pipeline validates.
    pub const DIGEST: &str = "digest";
    /// `begin`, `promote`, `reject` or `rollback`.
    pub const ACTION: &str = "action";
    /// The validation outcome, e.g. `$(tasks.status)`.
    pub const VALIDATION_STATUS: &str = "validation-status";
    /// `"true"` lets `promote` promote a digest that was rolled back.
    pub const ALLOW_ROLLED_BACK: &str = "allow-rolled-back";
    /// `promote` with `odh.enabled`: the served tag's `opendatahub.io/notebook-software` (a JSON
    /// list, e.g. `$(tasks.validate.results.notebook-software)`).
    pub(crate) const NOTEBOOK_SOFTWARE: &str = "notebook-software";
    /// `promote` with `odh.enabled`: the served tag's
    /// `opendatahub.io/notebook-python-dependencies` (a JSON list).
    pub(crate) const NOTEBOOK_PYTHON_DEPENDENCIES: &str = "notebook-python-dependencies";
    /// Every param the task accepts.
    pub(crate) const ALL: &[&str] = &[
        IMAGESTREAM,
        CANDIDATE_TAG,
        SERVED_TAG,
        DIGEST,
        ACTION,
        VALIDATION_STATUS,
        ALLOW_ROLLED_BACK,
        NOTEBOOK_SOFTWARE,
        NOTEBOOK_PYTHON_DEPENDENCIES,
    ];
}

pub use super::crd::{DEFAULT_CANDIDATE_TAG, DEFAULT_SERVED_TAG, PREVIOUS_TAG_SUFFIX};

/// What the run does to the served tag.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    /// Mark the served tag `Validating` for the candidate (start of a pipeline).
    Begin,
    /// Promote the validated digest (or mark the served tag `UpdateFailed`).
    Promote,
    /// Mark the served tag `UpdateFailed` (from a `finally` task when validation failed).
    Reject,
    /// Point the served tag back at the previous digest.
    Rollback,
}

impl Action {
    /// The param value.
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Begin => "begin",
            Action::Promote => "promote",
            Action::Reject => "reject",
            Action::Rollback => "rollback",
        }
    }
}

/// A fully resolved request.
#[derive(Clone, Debug, PartialEq)]
pub struct Request {
    /// The run's namespace, the only one it may act in.
    pub namespace: String,
    /// The ImageStream.
    pub imagestream: String,
    /// The candidate tag.
    pub candidate_tag: String,
    /// The served tag.
    pub served_tag: String,
    /// The hidden tag that keeps the digest served before the last promotion.
    pub previous_tag: String,
    /// Whether `promote` may promote, and `rollback` return to, a digest that was rolled back
    /// (`spec.allowRolledBack`, or the `allow-rolled-back` param where no ImagePromotion governs
    /// the stream: [`super::policy`]).
    pub allow_rolled_back: bool,
    /// The digest validated (required except for rollback).
    pub digest: Option<String>,
    /// What to do.
    pub action: Action,
    /// The raw `validation-status` param.
    pub validation_status: String,
    /// Whether `promote` requires `validation-status` (`spec.validation.required`, default true).
    pub validation_required: bool,
    /// Each proof of validation asked for (`spec.validation.pipeline` and `tasks` of each
    /// ImagePromotion that judges the run): all must hold.
    pub proofs: Vec<Proof>,
    /// The checks the candidate image must pass, one set per ImagePromotion that asks for
    /// some: all must pass.
    pub checks: Vec<ParsedChecks>,
    /// The publisher signatures the candidate must carry, one requirement per ImagePromotion
    /// (or inline spec) that asks: all must be met.
    pub signatures: Vec<signature::SignatureRequirement>,
    /// How `promote` and `rollback` pin the served tag (`spec.promoteAs`).
    pub promote_as: PromoteAs,
    /// What the Open Data Hub dashboard is told (`spec.odh`), when enabled.
    pub odh: Option<OdhSettings>,
}

/// What the pipeline reported about its validation, as `promote` reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Validation {
    /// `Succeeded` or `Completed` (or no status where the ImagePromotion does not require one).
    Passed,
    /// No `validation-status` where one is required: the run fails closed.
    Missing,
    /// Anything else (`$(tasks.<t>.status)` is `Failed` or `None` when the task did not pass).
    Failed,
}

impl Request {
    /// What `validation-status` says: a missing (or empty) status passes only where the
    /// ImagePromotion sets `validation.required: false`.
    pub(crate) fn validation(&self) -> Validation {
        match self.validation_status.as_str() {
            "Succeeded" | "Completed" => Validation::Passed,
            "" if self.validation_required => Validation::Missing,
            "" => Validation::Passed,
            _ => Validation::Failed,
        }
    }
}

/// Where the run's ImagePromotion spec comes from.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum SpecSource {
    /// No spec: params and defaults only.
    Defaults,
    /// `customRef.name`: an ImagePromotion object in the run's namespace.
    Named(String),
    /// `customSpec.spec`, inline.
    Inline(Box<ImagePromotionSpec>),
}

/// Whether a CustomRun is for this custom task (`customRef` or `customSpec`).
pub(crate) fn is_ours(run: &CustomRun) -> bool {
    run.is_for(API_VERSION, KIND)
}

/// Where the spec comes from; an inline spec that does not parse is an error.
pub(crate) fn spec_source(run: &CustomRun) -> Result<SpecSource, String> {
    if let Some(cs) = &run.spec.custom_spec {
        if cs.spec.is_null() {
            return Ok(SpecSource::Defaults);
        }
        // kube-apiserver holds a named ImagePromotion to the CRD's schema; Tekton passes an inline
        // spec through unchecked, and serde reads a struct from a JSON array too (`[]` would pass
        // as "all defaults"), so the inline spec meets the schema's object types first.
        crate::controller::crd::check_object_types(&cs.spec)
            .map_err(|e| format!("customSpec.spec is not a valid ImagePromotion spec: {e}"))?;
        let spec: ImagePromotionSpec = serde_json::from_value(cs.spec.clone())
            .map_err(|e| format!("customSpec.spec is not a valid ImagePromotion spec: {e}"))?;
        return Ok(SpecSource::Inline(Box::new(spec)));
    }
    match run
        .spec
        .custom_ref
        .as_ref()
        .and_then(|r| r.name.as_deref())
        .filter(|n| !n.is_empty())
    {
        Some(name) => Ok(SpecSource::Named(name.to_string())),
        None => Ok(SpecSource::Defaults),
    }
}

pub(super) fn is_dns_subdomain(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s.split('.').all(|part| {
            !part.is_empty()
                && part
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !part.starts_with('-')
                && !part.ends_with('-')
        })
}

/// OpenShift's tag name rule, `^[\w][\w.-]{0,127}$`.
fn is_tag_name(s: &str) -> bool {
    let ok = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if ok(c))
        && s.len() <= 128
        && chars.all(|c| ok(c) || c == '.' || c == '-')
}

/// `sha256:` followed by 64 lowercase hex digits.
pub(crate) fn is_digest(s: &str) -> bool {
    s.strip_prefix("sha256:").is_some_and(|hex| {
        hex.len() == 64
            && hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

/// Reads the params of `run` over `spec` (the merged ImagePromotion spec). The namespace is
/// always the run's own: an `imagestream` naming another namespace is refused. The first
/// problem found is the message, in the order of the steps below.
pub fn parse(run: &CustomRun, spec: &ImagePromotionSpec) -> Result<Request, String> {
    let namespace = run.metadata.namespace.clone().unwrap_or_default();
    let values = Values::read(run)?;
    let imagestream = imagestream(&values, spec, &namespace)?;
    let (candidate_tag, served_tag) = tags(&values, spec)?;
    let previous_tag = previous_tag(spec, &candidate_tag, &served_tag)?;
    let allow_rolled_back = spec.allow_rolled_back || flag(&values, names::ALLOW_ROLLED_BACK)?;
    let action = action(&values)?;
    let digest = digest(&values, action)?;
    let checks = spec.checks.parse()?;
    let proof = proof(&spec.validation, SPEC_ASKS)?;
    let signature = (spec.signature.as_ref())
        .map(|s| s.parse("the ImagePromotion"))
        .transpose()?;
    let odh = odh::settings(
        &spec.odh,
        action,
        values.get(names::NOTEBOOK_SOFTWARE),
        values.get(names::NOTEBOOK_PYTHON_DEPENDENCIES),
    )?;
    Ok(Request {
        namespace,
        imagestream,
        candidate_tag,
        served_tag,
        previous_tag,
        allow_rolled_back,
        digest,
        action,
        validation_status: values.get(names::VALIDATION_STATUS).to_string(),
        validation_required: spec.validation.status_required(),
        proofs: proof.into_iter().collect(),
        checks: Some(checks).filter(|c| !c.is_empty()).into_iter().collect(),
        signatures: signature.into_iter().collect(),
        promote_as: spec.promote_as,
        odh,
    })
}

/// The run's params by name, each a string, trimmed.
pub(super) struct Values(BTreeMap<&'static str, String>);

impl Values {
    /// Every param must be one the task takes, given once, as a string.
    pub(super) fn read(run: &CustomRun) -> Result<Values, String> {
        let mut values = BTreeMap::new();
        for p in &run.spec.params {
            let Some(known) = names::ALL.iter().find(|n| **n == p.name) else {
                return Err(format!(
                    "unknown param {:?}; ImagePromotion takes {}",
                    p.name,
                    names::ALL.join(", ")
                ));
            };
            let ParamValue::String(value) = &p.value else {
                return Err(format!("param {:?} must be a string", p.name));
            };
            if values.insert(*known, value.trim().to_string()).is_some() {
                return Err(format!("param {:?} is given twice", p.name));
            }
        }
        Ok(Values(values))
    }

    /// The param's value (empty when not given).
    pub(super) fn get(&self, name: &str) -> &str {
        self.0.get(name).map(String::as_str).unwrap_or_default()
    }

    /// The param if given and not empty, else the spec's `default` if not empty, else
    /// `fallback`.
    fn pick(&self, name: &str, default: Option<&String>, fallback: &str) -> String {
        Some(self.get(name))
            .filter(|v| !v.is_empty())
            .or_else(|| default.map(String::as_str).filter(|d| !d.is_empty()))
            .unwrap_or(fallback)
            .to_string()
    }
}

/// The ImageStream's name: required, in the run's own namespace (`ns/name` only for that
/// one), a DNS subdomain.
fn imagestream(
    values: &Values,
    spec: &ImagePromotionSpec,
    namespace: &str,
) -> Result<String, String> {
    let raw = values.pick(names::IMAGESTREAM, spec.image_stream.as_ref(), "");
    if raw.is_empty() {
        return Err(format!(
            "param {:?} is required (the ImageStream whose served tag is promoted)",
            names::IMAGESTREAM
        ));
    }
    let name = match raw.split_once('/') {
        Some((ns, name)) if ns == namespace => name.to_string(),
        Some((ns, _)) => {
            return Err(format!(
                "a CustomRun in namespace {namespace:?} may only promote ImageStreams in its own \
                 namespace, not in {ns:?} (param {:?} is {raw:?})",
                names::IMAGESTREAM
            ));
        }
        None => raw.clone(),
    };
    if !is_dns_subdomain(&name) {
        return Err(format!(
            "param {:?}: {name:?} is not a valid ImageStream name",
            names::IMAGESTREAM
        ));
    }
    Ok(name)
}

/// The candidate and served tags: valid tag names, and not the same tag.
fn tags(values: &Values, spec: &ImagePromotionSpec) -> Result<(String, String), String> {
    let candidate = values.pick(
        names::CANDIDATE_TAG,
        spec.candidate_tag.as_ref(),
        DEFAULT_CANDIDATE_TAG,
    );
    let served = values.pick(
        names::SERVED_TAG,
        spec.served_tag.as_ref(),
        DEFAULT_SERVED_TAG,
    );
    for (name, tag) in [
        (names::CANDIDATE_TAG, &candidate),
        (names::SERVED_TAG, &served),
    ] {
        if !is_tag_name(tag) {
            return Err(format!("param {name:?}: {tag:?} is not a valid tag name"));
        }
    }
    if candidate == served {
        return Err(format!(
            "the candidate tag and the served tag are both {served:?}; they must differ"
        ));
    }
    Ok((candidate, served))
}

/// The previous tag: the spec's, else `<served>-previous`; a valid tag name that is neither the
/// candidate nor the served tag.
fn previous_tag(
    spec: &ImagePromotionSpec,
    candidate: &str,
    served: &str,
) -> Result<String, String> {
    let tag = spec
        .previous_tag
        .clone()
        .filter(|t| !t.is_empty())
        .unwrap_or_else(|| format!("{served}{PREVIOUS_TAG_SUFFIX}"));
    if !is_tag_name(&tag) {
        return Err(format!("previousTag: {tag:?} is not a valid tag name"));
    }
    if tag == candidate || tag == served {
        return Err(format!(
            "previousTag {tag:?} must differ from the candidate tag {candidate:?} and the served tag {served:?}"
        ));
    }
    Ok(tag)
}

/// A boolean param: `true`, or `false`/empty.
fn flag(values: &Values, name: &str) -> Result<bool, String> {
    match values.get(name) {
        "true" => Ok(true),
        "" | "false" => Ok(false),
        other => Err(format!(
            "param {name:?}: {other:?} is not \"true\" or \"false\""
        )),
    }
}

/// The action; `promote` when not given.
fn action(values: &Values) -> Result<Action, String> {
    match values.get(names::ACTION) {
        "" | "promote" => Ok(Action::Promote),
        "begin" => Ok(Action::Begin),
        "reject" => Ok(Action::Reject),
        "rollback" => Ok(Action::Rollback),
        other => Err(format!(
            "param {:?}: {other:?} is not one of begin, promote, reject, rollback",
            names::ACTION
        )),
    }
}

/// The digest: a `sha256:` digest, required except for a rollback.
fn digest(values: &Values, action: Action) -> Result<Option<String>, String> {
    match values.get(names::DIGEST) {
        "" if action == Action::Rollback => Ok(None),
        "" => Err(format!(
            "param {:?} is required for action {}: the candidate digest the pipeline validated",
            names::DIGEST,
            action.as_str()
        )),
        d if !is_digest(d) => Err(format!(
            "param {:?}: {d:?} is not an image digest (sha256: and 64 hex digits)",
            names::DIGEST
        )),
        d => Ok(Some(d.to_string())),
    }
}

pub use self::proof::{SPEC_ASKS, proof};

#[cfg(test)]
mod tests;
