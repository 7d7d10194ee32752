//! Which ImagePromotions judge a run. The policy of a gated stream belongs to the platform team
//! that wrote its ImagePromotions, never to whoever starts a run: an ImagePromotion *governs* the
//! stream its `spec.imageStream` names, and every stream of its namespace when it names none.
//! Every run on a governed stream is judged by every ImagePromotion that governs it, whether the
//! run names one of them, another one, none, or carries an inline spec: the run's own spec can
//! add requirements, never remove them.
//!
//! Pure: [`judge`] takes the run, its own spec ([`Own`]) and the ImagePromotions of its
//! namespace, and gives the [`Request`] to act on with the names the SubjectAccessReview must
//! ask about, or the terminal outcome of a run that asks for more than its policy allows:
//! - *where* (the stream, the candidate, served and previous tags) must agree: a param or an
//!   inline spec naming another than a governing (or the named) ImagePromotion sets ends
//!   `ParamOverridesPolicy`, two governing ImagePromotions that disagree end `PolicyConflict`;
//! - *requirements* add up: `validation-status` is required if any asks, every proof and every
//!   set of checks must hold;
//! - *permissions* are the platform's: `allowRolledBack` holds only if every governing
//!   ImagePromotion sets it (the param counts only where none governs);
//! - *presentation* (`promoteAs`, `odh`) comes from the run's own ImagePromotion when it governs
//!   the stream, else from the governing ones.
//!
//! A stream no ImagePromotion governs keeps the defaults (`validation-status` required).

use crate::api::{CustomRun, ImageStream};

use super::crd::{ImagePromotion, ImagePromotionSpec};
use super::params::checks::ParsedChecks;
use super::params::signature::SignatureRequirement;
use super::params::{self, Request, Values, names};
use super::proof::Proof;
use super::status::{Outcome, reason};

/// Why a run may not go on: a terminal reason and its message (the run's outcome, [`Outcome`],
/// is made of it by [`Refusal::outcome`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Refusal {
    /// The condition reason.
    pub reason: &'static str,
    /// The message.
    pub message: String,
}

impl Refusal {
    fn new(reason: &'static str, message: impl Into<String>) -> Refusal {
        Refusal {
            reason,
            message: message.into(),
        }
    }

    /// The run's terminal outcome.
    pub(crate) fn outcome(self) -> Outcome {
        Outcome::failed(self.reason, self.message)
    }
}

/// The run's own spec: where its `customRef`/`customSpec` points.
#[derive(Clone, Debug)]
pub(crate) enum Own {
    /// No spec: params and defaults.
    Defaults,
    /// An inline `customSpec.spec`.
    Inline(ImagePromotionSpec),
    /// The ImagePromotion `customRef.name` names, as read.
    Named(String, ImagePromotionSpec),
}

impl Own {
    fn spec(&self) -> ImagePromotionSpec {
        match self {
            Own::Defaults => ImagePromotionSpec::default(),
            Own::Inline(spec) | Own::Named(_, spec) => spec.clone(),
        }
    }

    fn name(&self) -> Option<&str> {
        match self {
            Own::Named(name, _) => Some(name),
            _ => None,
        }
    }

    /// How a message names a field of this spec.
    fn field(&self, field: &str) -> String {
        match self {
            Own::Named(name, _) => format!("ImagePromotion {name:?}'s {field}"),
            _ => format!("the inline spec's {field}"),
        }
    }

    /// How a message names this spec.
    fn called(&self) -> String {
        match self {
            Own::Named(name, _) => format!("ImagePromotion {name:?}"),
            _ => "the inline spec".to_string(),
        }
    }
}

/// What the run may do, once judged.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Judged {
    /// The request, with every governing requirement in it.
    pub request: Request,
    /// The ImagePromotions that govern the stream, by name.
    pub governing: Vec<String>,
    /// The ImagePromotions the run's service account must hold `promote` on: every governing
    /// one and the one the run names. Empty: the run names none and none governs the stream (the
    /// review asks about every ImagePromotion of the namespace).
    pub reviews: Vec<String>,
}

/// Judges `run` (whose own spec is `own`) by the ImagePromotions of its namespace (`all`):
/// the request to act on, or the refusal that ends the run (`InvalidParams`,
/// `ParamOverridesPolicy`, `PolicyConflict`) before anything is written.
pub(crate) fn judge(run: &CustomRun, own: &Own, all: &[ImagePromotion]) -> Result<Judged, Refusal> {
    let invalid = |message: String| Refusal::new(reason::INVALID_PARAMS, message);
    let overrides = |message: String| Refusal::new(reason::PARAM_OVERRIDES_POLICY, message);
    let own_spec = own.spec();
    let values = Values::read(run).map_err(invalid)?;
    let asked = params::parse(run, &own_spec).map_err(invalid)?;
    let (namespace, stream) = (asked.namespace.as_str(), asked.imagestream.clone());
    if !governs(&own_spec, namespace, &stream) {
        let set = own_spec.image_stream.clone().unwrap_or_default();
        return Err(overrides(format!(
            "param {:?} is {stream:?}, but {} promotes ImageStream {set:?}",
            names::IMAGESTREAM,
            own.called()
        )));
    }
    let mut governing: Vec<(&str, &ImagePromotionSpec)> = all
        .iter()
        .filter(|p| governs(&p.spec, namespace, &stream))
        .map(|p| (p.metadata.name.as_deref().unwrap_or_default(), &p.spec))
        .collect();
    governing.sort_by_key(|(name, _)| *name);
    let own_governs = own
        .name()
        .is_some_and(|n| governing.iter().any(|(g, _)| *g == n));

    let mut merged = own_spec.clone();
    merged.image_stream = Some(stream.clone());
    for field in TagField::ALL {
        let chosen = field.chosen(&values, own);
        let set = agreed(&governing, &stream, field.name(), |s| field.of(s))?;
        if let (Some((by, want)), Some((from, value))) = (&set, &chosen)
            && want != value
        {
            return Err(overrides(format!(
                "{from} is {value:?}, but ImagePromotion {by:?} sets {want:?}; it governs \
                 ImageStream {stream:?}, and a run may not name another {}",
                field.name()
            )));
        }
        if let Some((_, want)) = set {
            field.set(&mut merged, want);
        }
    }
    if !governing.is_empty() {
        let allowed = governing.iter().all(|(_, s)| s.allow_rolled_back);
        let first_not = governing.iter().find(|(_, s)| !s.allow_rolled_back);
        if let Some((by, _)) = first_not {
            if values.get(names::ALLOW_ROLLED_BACK) == "true" {
                return Err(overrides(format!(
                    "param {:?} counts only where no ImagePromotion governs the stream; \
                     ImagePromotion {by:?} does not set allowRolledBack",
                    names::ALLOW_ROLLED_BACK
                )));
            }
            if own_spec.allow_rolled_back {
                return Err(overrides(format!(
                    "{} is true, but ImagePromotion {by:?}, which governs ImageStream \
                     {stream:?}, does not set it",
                    own.field("allowRolledBack")
                )));
            }
        }
        merged.allow_rolled_back = allowed;
        if !own_governs {
            let (promote_as, odh) = agreed_presentation(&governing, &stream).map_err(conflict)?;
            merged.promote_as = promote_as;
            merged.odh = odh;
        }
    }
    let required = std::iter::once(&own_spec)
        .chain(governing.iter().map(|(_, s)| *s))
        .any(|s| s.validation.status_required());
    merged.validation.required = Some(required);
    let mut request = params::parse(run, &merged).map_err(invalid)?;
    (request.proofs, request.checks, request.signatures) =
        requirements(own, &own_spec, &governing, &stream)?;
    let names: Vec<String> = governing.iter().map(|(n, _)| n.to_string()).collect();
    let mut reviews = names.clone();
    if let Some(name) = own.name()
        && !reviews.iter().any(|r| r == name)
    {
        reviews.push(name.to_string());
    }
    Ok(Judged {
        request,
        governing: names,
        reviews,
    })
}

/// Whether a spec of an ImagePromotion in `namespace` governs `stream`: it names it (as
/// `<stream>` or `<namespace>/<stream>`), or names no stream.
pub(crate) fn governs(spec: &ImagePromotionSpec, namespace: &str, stream: &str) -> bool {
    match spec.image_stream.as_deref() {
        None | Some("") => true,
        Some(name) => match name.split_once('/') {
            Some((ns, name)) => ns == namespace && name == stream,
            None => name == stream,
        },
    }
}

/// Whether a spec of an ImagePromotion in `namespace` gates `stream`: it names the stream, or
/// names none and the stream has its candidate tag (a namespace-wide policy gates the streams
/// that have the tag it validates). What `imagegate status` lists and the drift check reads.
pub(crate) fn gates(spec: &ImagePromotionSpec, namespace: &str, stream: &ImageStream) -> bool {
    let name = stream.metadata.name.as_deref().unwrap_or_default();
    let named = spec.image_stream.as_deref().is_some_and(|n| !n.is_empty());
    governs(spec, namespace, name)
        && (named || stream.spec_tag(spec.candidate_tag_or_default()).is_some())
}

fn conflict(message: String) -> Refusal {
    Refusal::new(reason::POLICY_CONFLICT, message)
}

/// The one value the governing ImagePromotions that set `field` agree on, with the first that
/// sets it; `PolicyConflict` when two differ.
fn agreed<'a>(
    governing: &[(&'a str, &'a ImagePromotionSpec)],
    stream: &str,
    field: &str,
    of: impl Fn(&ImagePromotionSpec) -> Option<&str>,
) -> Result<Option<(&'a str, String)>, Refusal> {
    let mut found: Option<(&str, String)> = None;
    for (name, spec) in governing {
        let Some(value) = of(spec).filter(|v| !v.is_empty()) else {
            continue;
        };
        match &found {
            Some((first, v)) if v != value => {
                return Err(conflict(format!(
                    "ImagePromotions {first:?} and {name:?} both govern ImageStream {stream:?} \
                     and set {field} {v:?} and {value:?}; make them agree"
                )));
            }
            Some(_) => {}
            None => found = Some((name, value.to_string())),
        }
    }
    Ok(found)
}

/// `promoteAs` and `odh` of the governing ImagePromotions, which must agree.
fn agreed_presentation(
    governing: &[(&str, &ImagePromotionSpec)],
    stream: &str,
) -> Result<(super::crd::PromoteAs, super::crd::Odh), String> {
    let (first, spec) = governing[0];
    for (name, other) in &governing[1..] {
        if other.promote_as != spec.promote_as || other.odh != spec.odh {
            return Err(format!(
                "ImagePromotions {first:?} and {name:?} both govern ImageStream {stream:?} with \
                 different promoteAs or odh settings, and the run names neither; name one of \
                 them, or make them agree"
            ));
        }
    }
    Ok((spec.promote_as, spec.odh.clone()))
}

/// Every proof, set of checks and signature requirement asked for: the run's own spec's and
/// each governing ImagePromotion's, each once.
fn requirements(
    own: &Own,
    own_spec: &ImagePromotionSpec,
    governing: &[(&str, &ImagePromotionSpec)],
    stream: &str,
) -> Result<Requirements, Refusal> {
    let invalid = |message: String| Refusal::new(reason::INVALID_PARAMS, message);
    let mut proofs: Vec<Proof> = Vec::new();
    let mut checks = Vec::new();
    let mut signatures: Vec<SignatureRequirement> = Vec::new();
    let own_asks = match own {
        Own::Named(name, _) => format!("ImagePromotion {name:?} asks"),
        _ => "the inline spec asks".to_string(),
    };
    let asking = std::iter::once((own_asks, own_spec, String::new(), own.called())).chain(
        governing.iter().map(|(name, spec)| {
            let asks = format!("ImagePromotion {name:?} governs {stream} and asks");
            let called = format!("ImagePromotion {name:?}");
            (asks, *spec, format!("ImagePromotion {name:?}: "), called)
        }),
    );
    let inline = matches!(own, Own::Inline(_));
    for (i, (asks, spec, prefix, called)) in asking.enumerate() {
        if let Some(signature) = &spec.signature {
            let parsed = signature
                .parse(&called)
                .map_err(|m| invalid(prefix.clone() + &m))?;
            // The run's own inline spec is the runner's: it may add a key, never make the
            // controller read a ConfigMap or a Secret on its behalf.
            if i == 0 && inline && parsed.names_objects() {
                return Err(invalid(
                    "the inline spec's signature may list keys only as publicKey, and no \
                     pullSecrets: name an ImagePromotion for keys kept in a ConfigMap or for \
                     registry credentials"
                        .into(),
                ));
            }
            let same = |s: &SignatureRequirement| {
                s.keys == parsed.keys && s.pull_secrets == parsed.pull_secrets
            };
            if !signatures.iter().any(same) {
                signatures.push(parsed);
            }
        }
        let proof =
            params::proof(&spec.validation, &asks).map_err(|m| invalid(prefix.clone() + &m))?;
        // As for signatures: the runner's inline spec may add Chains keys only inline.
        let from_config_map = |p: &Proof| {
            (p.chains.iter())
                .any(|k| matches!(k.source, params::signature::KeySource::ConfigMap(_)))
        };
        if i == 0 && inline && proof.as_ref().is_some_and(from_config_map) {
            return Err(invalid(
                "the inline spec's validation.chains may list keys only as publicKey: name an \
                 ImagePromotion for keys kept in a ConfigMap"
                    .into(),
            ));
        }
        if let Some(p) = proof
            && !proofs.iter().any(|q| same_proof(q, &p))
        {
            proofs.push(p);
        }
        let parsed = spec.checks.parse().map_err(|m| invalid(prefix + &m))?;
        if !parsed.is_empty() && !checks.contains(&parsed) {
            checks.push(parsed);
        }
    }
    Ok((proofs, checks, signatures))
}

/// Whether two proofs ask the same, whoever asks.
fn same_proof(a: &Proof, b: &Proof) -> bool {
    a.pipeline == b.pipeline && a.tasks == b.tasks && a.pins == b.pins && a.chains == b.chains
}

/// What [`requirements`] gathers: proofs, sets of checks, signature requirements.
type Requirements = (Vec<Proof>, Vec<ParsedChecks>, Vec<SignatureRequirement>);

/// The tags a policy may set, and a run may only repeat.
#[derive(Clone, Copy)]
enum TagField {
    Candidate,
    Served,
    Previous,
}

impl TagField {
    const ALL: [TagField; 3] = [TagField::Candidate, TagField::Served, TagField::Previous];

    fn name(self) -> &'static str {
        match self {
            TagField::Candidate => "candidateTag",
            TagField::Served => "servedTag",
            TagField::Previous => "previousTag",
        }
    }

    fn param(self) -> Option<&'static str> {
        match self {
            TagField::Candidate => Some(names::CANDIDATE_TAG),
            TagField::Served => Some(names::SERVED_TAG),
            TagField::Previous => None,
        }
    }

    fn of(self, spec: &ImagePromotionSpec) -> Option<&str> {
        match self {
            TagField::Candidate => spec.candidate_tag.as_deref(),
            TagField::Served => spec.served_tag.as_deref(),
            TagField::Previous => spec.previous_tag.as_deref(),
        }
    }

    fn set(self, spec: &mut ImagePromotionSpec, value: String) {
        let slot = match self {
            TagField::Candidate => &mut spec.candidate_tag,
            TagField::Served => &mut spec.served_tag,
            TagField::Previous => &mut spec.previous_tag,
        };
        *slot = Some(value);
    }

    /// What the run chose itself, and where: its param, else its own spec.
    fn chosen(self, values: &Values, own: &Own) -> Option<(String, String)> {
        if let Some(param) = self.param()
            && !values.get(param).is_empty()
        {
            return Some((format!("param {param:?}"), values.get(param).to_string()));
        }
        let spec = match own {
            Own::Defaults => return None,
            Own::Inline(spec) | Own::Named(_, spec) => spec,
        };
        let value = self.of(spec).filter(|v| !v.is_empty())?;
        Some((own.field(self.name()), value.to_string()))
    }
}

#[cfg(test)]
mod tests;
