//! The adoption of one stream as a pure function: the stream as the API server returned it (and
//! the gated copy, when one exists) in, the writes that give it the gated shape, or the reason it
//! cannot be adopted, out. Invariant, pinned by a test: planning the result of a plan again asks
//! for no write, which is what makes `imagegate adopt` safe to run twice.
//!
//! Every JSON field of the stream is carried through, known to imagegate's types or not, so a
//! whole-object write (`PUT`) of the result drops nothing another client set.

use serde_json::{Value, json};

use self::copy::plan_copy;
use super::names;
use super::shape::{
    self, Kind, annotation, candidate_tag, gated_by_hand, hide_tag, is_managed, object,
    pinned_by_digest, previous_tag, put_tag, served_tag, set_entry, tag_value,
};
use super::{Options, Summary};
use crate::api::{ImageStream, TagEvent};
use crate::controller::decide::annotation::PREVIOUS_OF;

/// What adopting a stream takes.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Plan {
    /// The stream (or its gated copy) already has the gated shape: nothing to write.
    Adopted(Summary),
    /// The writes, in order.
    Write(Vec<Write>, Summary),
}

/// One write of a plan.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Write {
    /// How it is written.
    pub(crate) kind: WriteKind,
    /// The object as read (`None` for a create).
    pub(crate) before: Option<Value>,
    /// The object as it should be.
    pub(crate) after: Value,
}

/// How a write is made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WriteKind {
    /// A `PUT` of the whole stream carrying the resourceVersion read (409 if it changed since).
    Replace,
    /// A `POST` of the gated copy (409 if a stream of that name appeared since).
    Create,
    /// A merge patch of two annotations of the operator-shipped original (hide it, name the copy);
    /// it touches no field the operator applies, so it needs no resourceVersion.
    HideOriginal,
}

impl Write {
    /// `namespace/name` of the object written.
    pub(crate) fn target(&self) -> String {
        let meta = &self.after["metadata"];
        format!(
            "{}/{}",
            meta["namespace"].as_str().unwrap_or_default(),
            meta["name"].as_str().unwrap_or_default()
        )
    }

    /// The merge patch of a [`WriteKind::HideOriginal`] write.
    pub(crate) fn hide_patch(&self) -> Value {
        let a = &self.after["metadata"]["annotations"];
        json!({"metadata": {"annotations": {
            names::ODH_IMAGE_HIDDEN: a[names::ODH_IMAGE_HIDDEN],
            names::GATED_COPY: a[names::GATED_COPY],
        }}})
    }
}

/// How the served and previous tags are pinned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Pin {
    /// `ImageStreamImage <stream>@<digest>`: the image in the stream's own history, as the
    /// controller's promotions write it; nothing is pulled from upstream.
    Stream,
    /// `DockerImage <repository>@<digest>`: for a new copy, which has no history of its own yet.
    Registry,
}

impl Pin {
    fn to(self, stream: &str, event: &TagEvent, digest: &str) -> Value {
        match self {
            Pin::Stream => {
                json!({"kind": "ImageStreamImage", "name": format!("{stream}@{digest}")})
            }
            Pin::Registry => json!({"kind": "DockerImage", "name": by_digest(event, digest)}),
        }
    }

    /// Whether `from` already pins the tag of `stream`. In a copy, an `ImageStreamImage` into
    /// another stream's history (the original's) does not count: the copy is pinned on its own.
    fn holds(self, stream: &str, from: Option<&Value>) -> bool {
        let own = from.is_some_and(|f| {
            f["kind"] != "ImageStreamImage"
                || f["name"]
                    .as_str()
                    .is_some_and(|n| n.starts_with(&format!("{stream}@")))
        });
        pinned_by_digest(from) && (self == Pin::Stream || own)
    }
}

/// The pull spec of `event` by digest: its `dockerImageReference` when that names the digest,
/// else its repository with `@<digest>`.
fn by_digest(event: &TagEvent, digest: &str) -> String {
    let reference = &event.docker_image_reference;
    if reference.contains('@') {
        return reference.clone();
    }
    let slash = reference.rfind('/').map_or(0, |i| i + 1);
    let repository = match reference[slash..].rfind(':') {
        Some(colon) => &reference[..slash + colon],
        None => reference.as_str(),
    };
    format!("{repository}@{digest}")
}

/// Plans the adoption of `stream`; `copy` is the stream named as its gated copy, when the stream
/// is operator-shipped and that stream exists ([`copy_name`] names it).
pub(crate) fn plan(
    stream: &Value,
    copy: Option<&Value>,
    options: &Options,
) -> Result<Plan, String> {
    let is = parse(stream)?;
    if is_managed(&is) {
        let (after, summary) = gate(stream, &is, options, Pin::Stream)?;
        return Ok(in_place(stream, after, summary));
    }
    if let Some(mark) = gated_by_hand(&is) {
        return Err(format!(
            "it is already gated differently ({mark}) without imagegate's {} label; \
             imagegate adopt changes only streams it shaped",
            names::MANAGED_LABEL
        ));
    }
    match Kind::of(&is) {
        Kind::Shipped => plan_copy(stream, &is, copy, options),
        Kind::Custom | Kind::Plain => {
            let (after, summary) = gate(stream, &is, options, Pin::Stream)?;
            Ok(in_place(stream, after, summary))
        }
    }
}

/// The name of the gated copy of an operator-shipped stream: `--copy-name`, else the copy the
/// stream already names, else `<name>-gated`. `None` for a stream adopted in place.
pub(crate) fn copy_name(stream: &Value, options: &Options) -> Option<String> {
    let is = parse(stream).ok()?;
    if is_managed(&is) || Kind::of(&is) != Kind::Shipped {
        return None;
    }
    let name = is.metadata.name.clone().unwrap_or_default();
    Some(
        options
            .copy_name
            .clone()
            .or_else(|| annotation(&is, names::GATED_COPY).map(str::to_string))
            .unwrap_or_else(|| format!("{name}-gated")),
    )
}

fn parse(stream: &Value) -> Result<ImageStream, String> {
    serde_json::from_value(stream.clone()).map_err(|e| format!("it is not an ImageStream: {e}"))
}

fn in_place(before: &Value, after: Value, summary: Summary) -> Plan {
    if &after == before {
        return Plan::Adopted(summary);
    }
    let write = Write {
        kind: WriteKind::Replace,
        before: Some(before.clone()),
        after,
    };
    Plan::Write(vec![write], summary)
}

/// The gated shape of `stream`: served tag pinned, candidate scheduled and hidden, previous tag
/// kept, the names recorded on the stream.
fn gate(
    stream: &Value,
    is: &ImageStream,
    options: &Options,
    pin: Pin,
) -> Result<(Value, Summary), String> {
    let managed = is_managed(is);
    let kind = Kind::of(is);
    let recorded = |key: &str| {
        managed
            .then(|| annotation(is, key).map(str::to_string))
            .flatten()
    };
    for (asked, key, flag) in [
        (&options.served_tag, names::SERVED_TAG, "--served-tag"),
        (
            &options.candidate_tag,
            names::CANDIDATE_TAG,
            "--candidate-tag",
        ),
    ] {
        if let (Some(asked), Some(had)) = (asked, recorded(key))
            && *asked != had
        {
            return Err(format!(
                "it is already gated differently: adopted with {key}={had:?}, not the \
                 {flag} {asked:?}"
            ));
        }
    }
    let served = served_tag(
        is,
        options
            .served_tag
            .clone()
            .or(recorded(names::SERVED_TAG))
            .as_deref(),
    )?;
    let candidate = candidate_tag(
        kind,
        &served,
        options
            .candidate_tag
            .clone()
            .or(recorded(names::CANDIDATE_TAG))
            .as_deref(),
    )?;
    let previous = previous_tag(&served);
    let existing_candidate = tag_value(stream, &candidate).cloned();
    if !managed && existing_candidate.is_some() {
        return Err(format!(
            "it already has a tag {candidate:?}; name another candidate with --candidate-tag"
        ));
    }
    let existing_previous = tag_value(stream, &previous).cloned();
    if !managed
        && existing_previous.is_some()
        && shape::tag_annotation(is, &previous, PREVIOUS_OF) != Some(served.as_str())
    {
        return Err(format!(
            "it already has a tag {previous:?}, which the controller keeps as the previous tag \
             of {served:?}; rename that tag first"
        ));
    }
    let Some(event) = is.status_tag(&served).and_then(|s| s.current()) else {
        return Err(format!(
            "the served tag {served:?} has no image yet (never imported, or its first import \
             failed): there is no digest to pin"
        ));
    };
    let Some(digest) = event.digest().map(str::to_string) else {
        return Err(format!(
            "the served tag {served:?} points at {:?}, which names no digest to pin",
            event.docker_image_reference
        ));
    };
    let served_value = tag_value(stream, &served).cloned().unwrap_or_default();
    let candidate_from = candidate_source(
        &served,
        &served_value,
        existing_candidate.as_ref(),
        options,
        recorded(names::CANDIDATE_FROM),
    )?;
    let name = is.metadata.name.clone().unwrap_or_default();
    let policy = options.reference_policy.clone().or_else(|| {
        served_value["referencePolicy"]["type"]
            .as_str()
            .map(str::to_string)
    });

    let mut after = stream.clone();
    // The served tag: pinned by digest, no longer imported on a schedule.
    let mut served_tag_value = served_value.clone();
    if !pin.holds(&name, served_value.get("from")) {
        served_tag_value["from"] = pin.to(&name, event, &digest);
    }
    if let Some(policy) = served_tag_value
        .get_mut("importPolicy")
        .and_then(Value::as_object_mut)
    {
        policy.remove("scheduled");
    }
    if let Some(p) = &options.reference_policy {
        served_tag_value["referencePolicy"] = json!({"type": p});
    }
    put_tag(&mut after, served_tag_value);

    // The candidate: imports what the served tag imported, on a schedule, hidden.
    let new_candidate = existing_candidate.is_none();
    let mut cand = existing_candidate.unwrap_or_else(|| json!({"name": candidate}));
    if cand["from"]["kind"] != "DockerImage" || cand["from"]["name"] != candidate_from.as_str() {
        cand["from"] = json!({"kind": "DockerImage", "name": candidate_from});
    }
    {
        let import = object(&mut cand, "importPolicy");
        import.insert("scheduled".into(), Value::Bool(true));
        if new_candidate {
            for key in ["importMode", "insecure"] {
                if let Some(v) = served_value["importPolicy"].get(key) {
                    import.insert(key.into(), v.clone());
                }
            }
        }
    }
    if (options.reference_policy.is_some() || new_candidate)
        && let Some(p) = &policy
    {
        cand["referencePolicy"] = json!({"type": p});
    }
    hide_tag(&mut cand);
    set_entry(&mut cand, "annotations", names::ROLE, "candidate");
    put_tag(&mut after, cand);

    // The previous tag: kept if there, else pinned to the digest served before, if any.
    let mut notes = Vec::new();
    let kept = match existing_previous {
        Some(_) => is
            .current_digest(&previous)
            .map(|d| (previous.clone(), d.to_string())),
        None => {
            let before = is
                .history(&served)
                .iter()
                .find(|e| e.digest().is_some_and(|d| d != digest));
            match before.and_then(|e| Some((e, e.digest()?.to_string()))) {
                Some((e, d)) => {
                    let mut prev = json!({"name": previous, "from": pin.to(&name, e, &d)});
                    if let Some(p) = &policy {
                        prev["referencePolicy"] = json!({"type": p});
                    }
                    hide_tag(&mut prev);
                    set_entry(&mut prev, "annotations", PREVIOUS_OF, &served);
                    put_tag(&mut after, prev);
                    Some((previous.clone(), d))
                }
                None => {
                    notes.push(format!(
                        "no previous tag yet: {served:?} has served only {digest}; the first \
                         promotion writes {previous:?}"
                    ));
                    None
                }
            }
        }
    };

    let meta = object(&mut after, "metadata");
    let meta = Value::Object(std::mem::take(meta));
    let mut meta = meta;
    set_entry(&mut meta, "labels", names::MANAGED_LABEL, "true");
    set_entry(&mut meta, "annotations", names::SERVED_TAG, &served);
    set_entry(&mut meta, "annotations", names::CANDIDATE_TAG, &candidate);
    set_entry(
        &mut meta,
        "annotations",
        names::CANDIDATE_FROM,
        &candidate_from,
    );
    after["metadata"] = meta;

    let summary = Summary {
        gated: format!(
            "{}/{name}",
            is.metadata.namespace.clone().unwrap_or_default()
        ),
        served,
        served_digest: digest,
        candidate,
        candidate_from,
        previous: kept,
        notes,
    };
    Ok((after, summary))
}

/// What the candidate imports: `--candidate-from`, else what it imports already, else what
/// adopt recorded, else what the served tag imported. A digest is refused: a scheduled import of
/// a digest never moves, so nothing would ever be validated.
fn candidate_source(
    served: &str,
    served_value: &Value,
    existing: Option<&Value>,
    options: &Options,
    recorded: Option<String>,
) -> Result<String, String> {
    let from = &served_value["from"];
    let found = options
        .candidate_from
        .clone()
        .or_else(|| {
            existing
                .filter(|c| c["from"]["kind"] == "DockerImage")
                .and_then(|c| c["from"]["name"].as_str().map(str::to_string))
        })
        .or(recorded)
        .or_else(|| {
            (from["kind"] == "DockerImage" && !pinned_by_digest(Some(from)))
                .then(|| from["name"].as_str().map(str::to_string))
                .flatten()
        });
    let Some(found) = found.filter(|f| !f.trim().is_empty()) else {
        let what = match (from["kind"].as_str(), from["name"].as_str()) {
            (Some(kind), Some(name)) => format!("imports {kind} {name}"),
            _ => "imports nothing (its image was pushed)".to_string(),
        };
        return Err(format!(
            "the served tag {served:?} {what}, which no scheduled import moves; name the \
             repository and tag the candidate should follow with --candidate-from (for example \
             quay.io/org/image:tag)"
        ));
    };
    if found.contains('@') || found.chars().any(char::is_whitespace) {
        return Err(format!(
            "the candidate cannot follow {found:?}: a scheduled import needs a pull spec by tag \
             (a digest never moves)"
        ));
    }
    Ok(found)
}

mod copy;

#[cfg(test)]
mod tests;
