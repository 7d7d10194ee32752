//! Whether an event names a stream's current candidate (pure): the interceptor believes nothing
//! the event says that it can read from the API instead. It passes on only what the API says:
//! the stream of the Trigger's own namespace, governed by an ImagePromotion, the candidate tag
//! that policy names, the digest that tag points at now, and the PipelineRun id keyed by the
//! install's [`RunKey`] (so nobody can take the name first).

use serde_json::{Map, Value, json};

use crate::api::ImageStream;
use crate::controller::crd::ImagePromotion;
use crate::controller::policy::governs;
use crate::runkey::{self, Candidate, RunKey};

use super::wire::{Claimed, code};

/// The extensions key the interceptor writes under (`$(extensions.imagegate.<field>)`).
pub(crate) const EXTENSION: &str = "imagegate";

/// Why an event is refused: a bounded reason (the metric's label), the gRPC code and a message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Refused {
    /// One of [`reason`].
    pub(crate) reason: &'static str,
    /// The gRPC code Triggers is answered.
    pub(crate) code: u32,
    /// What was wrong, for the EventListener's log.
    pub(crate) message: String,
}

/// The reasons an event is refused.
pub(crate) mod reason {
    /// Not a CloudEvent `updated` with every field.
    pub(crate) const MALFORMED: &str = "malformed";
    /// The request names no Trigger namespace, or the stream is of another namespace.
    pub(crate) const OTHER_NAMESPACE: &str = "other_namespace";
    /// The stream does not exist.
    pub(crate) const NO_STREAM: &str = "no_stream";
    /// No ImagePromotion governs the stream.
    pub(crate) const NOT_GOVERNED: &str = "not_governed";
    /// The governing ImagePromotions name different candidate tags.
    pub(crate) const POLICY_CONFLICT: &str = "policy_conflict";
    /// The tag is not the policy's candidate tag.
    pub(crate) const NOT_CANDIDATE_TAG: &str = "not_candidate_tag";
    /// The digest is not what the candidate tag points at now.
    pub(crate) const NOT_CURRENT: &str = "not_current";
    /// Every served tag the governing policies name already serves the digest: nothing to
    /// validate (the candidate tag `imagegate adopt` adds is imported at once on it).
    pub(crate) const ALREADY_SERVED: &str = "already_served";
    /// The API could not be read.
    pub(crate) const API: &str = "api";
    /// Every reason, for the metric's series.
    pub(crate) const ALL: [&str; 9] = [
        MALFORMED,
        OTHER_NAMESPACE,
        NO_STREAM,
        NOT_GOVERNED,
        POLICY_CONFLICT,
        NOT_CANDIDATE_TAG,
        NOT_CURRENT,
        ALREADY_SERVED,
        API,
    ];
}

impl Refused {
    /// A refusal.
    pub(crate) fn new(reason: &'static str, code: u32, message: impl Into<String>) -> Refused {
        Refused {
            reason,
            code,
            message: message.into(),
        }
    }
}

/// Whether the stream the event claims is of the Trigger's namespace (the PipelineRun is
/// created there: a listener of one namespace never validates another's streams).
pub(crate) fn namespace(claimed: &Claimed, trigger_namespace: Option<&str>) -> Result<(), Refused> {
    match trigger_namespace {
        Some(ns) if ns == claimed.namespace => Ok(()),
        Some(ns) => Err(Refused::new(
            reason::OTHER_NAMESPACE,
            code::FAILED_PRECONDITION,
            format!(
                "the event is for ImageStream {}/{}, the Trigger is of namespace {ns:?}",
                claimed.namespace, claimed.imagestream
            ),
        )),
        None => Err(Refused::new(
            reason::OTHER_NAMESPACE,
            code::INVALID_ARGUMENT,
            "the request names no Trigger (context.trigger_id namespaces/<ns>/triggers/<name>)",
        )),
    }
}

/// What passes: the extensions for the binding.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Passed {
    /// `{"imagegate": {...}}`.
    pub(crate) extensions: Map<String, Value>,
    /// The run id (for the log).
    pub(crate) run_id: String,
}

/// Judges `claimed` against the stream as the API has it (`None`: there is none) and the
/// ImagePromotions of its namespace.
pub(crate) fn candidate(
    claimed: &Claimed,
    stream: Option<&ImageStream>,
    policies: &[ImagePromotion],
    key: &RunKey,
) -> Result<Passed, Refused> {
    let (ns, name) = (&claimed.namespace, &claimed.imagestream);
    let Some(is) = stream else {
        return Err(Refused::new(
            reason::NO_STREAM,
            code::FAILED_PRECONDITION,
            format!("ImageStream {ns}/{name} does not exist"),
        ));
    };
    let governing: Vec<(&str, String, String)> = policies
        .iter()
        .filter(|p| p.metadata.namespace.as_deref() == Some(ns.as_str()))
        .filter(|p| governs(&p.spec, ns, name))
        .map(|p| {
            let (tag, served) = (
                p.spec.candidate_tag_or_default(),
                p.spec.served_tag_or_default(),
            );
            (
                p.metadata.name.as_deref().unwrap_or(""),
                tag.to_string(),
                served.to_string(),
            )
        })
        .collect();
    let Some((first, tag, _)) = governing.first() else {
        return Err(Refused::new(
            reason::NOT_GOVERNED,
            code::FAILED_PRECONDITION,
            format!(
                "no ImagePromotion of namespace {ns:?} governs ImageStream {name:?}: only a \
                 governed stream's candidate is validated"
            ),
        ));
    };
    if let Some((other, t, _)) = governing.iter().find(|(_, t, _)| t != tag) {
        return Err(Refused::new(
            reason::POLICY_CONFLICT,
            code::FAILED_PRECONDITION,
            format!(
                "ImagePromotions {first:?} and {other:?} both govern ImageStream {ns}/{name} and \
                 set candidateTag {tag:?} and {t:?}"
            ),
        ));
    }
    if claimed.tag != *tag {
        return Err(Refused::new(
            reason::NOT_CANDIDATE_TAG,
            code::FAILED_PRECONDITION,
            format!(
                "tag {:?} of ImageStream {ns}/{name} is not its candidate tag {tag:?} \
                 (ImagePromotion {first:?})",
                claimed.tag
            ),
        ));
    }
    let current = is.status_tag(tag).and_then(|t| t.current());
    let Some(item) = current.filter(|i| i.digest() == Some(claimed.digest.as_str())) else {
        let now = current
            .and_then(|i| i.digest())
            .map_or("nothing".to_string(), |d| format!("{d:?}"));
        return Err(Refused::new(
            reason::NOT_CURRENT,
            code::FAILED_PRECONDITION,
            format!(
                "digest {:?} is not the candidate of ImageStream {ns}/{name}: tag {tag:?} points \
                 at {now}",
                claimed.digest
            ),
        ));
    };
    // Nothing to validate where every served tag already serves it. The ledger counts such a
    // candidate as having its verdict (`ledger::judge`), so no page follows the refusal.
    let served: Vec<&str> = governing.iter().map(|(_, _, s)| s.as_str()).collect();
    if served
        .iter()
        .all(|s| is.current_digest(s) == Some(claimed.digest.as_str()))
    {
        return Err(Refused::new(
            reason::ALREADY_SERVED,
            code::FAILED_PRECONDITION,
            format!(
                "{} already serve{} {:?} of ImageStream {ns}/{name}: nothing to validate",
                served.join(" and "),
                if served.len() == 1 { "s" } else { "" },
                claimed.digest
            ),
        ));
    }
    let since = runkey::since(item.created.as_ref());
    let run_id = key.run_id(&Candidate {
        namespace: ns,
        imagestream: name,
        tag,
        digest: &claimed.digest,
        since: &since,
    });
    let mut extensions = Map::new();
    extensions.insert(
        EXTENSION.into(),
        json!({
            "namespace": ns,
            "imageStream": name,
            "tag": tag,
            "digest": claimed.digest,
            "runId": run_id,
            "eventId": claimed.id,
        }),
    );
    Ok(Passed { extensions, run_id })
}

#[cfg(test)]
mod tests {
    //! Each thing a forged or stale event can claim, refused; the genuine one passed with the
    //! stream's own values.

    use serde_json::{Value, json};

    use super::*;

    const A: &str = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    const B: &str = "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

    fn key() -> RunKey {
        RunKey::from_bytes(&[9; 32]).unwrap()
    }

    /// `nb` of `ds`: its candidate at `candidate` (imported at 10:00), served `A`.
    fn stream(candidate: &str) -> ImageStream {
        let ev = |d: &str| json!({"created": "2026-12-01T10:00:00Z", "dockerImageReference": format!("quay.io/org/nb@{d}"), "image": d, "generation": 2});
        serde_json::from_value(json!({
            "metadata": {"name": "nb", "namespace": "ds"},
            "spec": {"tags": [{"name": "candidate"}, {"name": "latest"}]},
            "status": {"dockerImageRepository": "", "tags": [
                {"tag": "candidate", "items": [ev(candidate)]},
                {"tag": "latest", "items": [ev(A)]}
            ]}
        }))
        .unwrap()
    }

    fn policy(name: &str, spec: Value) -> ImagePromotion {
        serde_json::from_value(json!({
            "apiVersion": "imagegate.dev/v1alpha1", "kind": "ImagePromotion",
            "metadata": {"name": name, "namespace": "ds"}, "spec": spec
        }))
        .unwrap()
    }

    fn claimed(tag: &str, digest: &str) -> Claimed {
        Claimed {
            id: "forged-or-not".into(),
            namespace: "ds".into(),
            imagestream: "nb".into(),
            tag: tag.into(),
            digest: digest.into(),
        }
    }

    #[test]
    fn the_current_candidate_passes_with_what_the_api_says_and_a_keyed_run_id() {
        let p = candidate(
            &claimed("candidate", B),
            Some(&stream(B)),
            &[policy("notebooks", json!({}))],
            &key(),
        )
        .unwrap();
        let want_id = key().run_id(&Candidate {
            namespace: "ds",
            imagestream: "nb",
            tag: "candidate",
            digest: B,
            since: "2026-12-01T10:00:00Z",
        });
        assert_eq!(p.run_id, want_id);
        assert_eq!(
            Value::Object(p.extensions),
            json!({"imagegate": {"namespace": "ds", "imageStream": "nb", "tag": "candidate",
            "digest": B, "runId": want_id, "eventId": "forged-or-not"}})
        );
    }

    #[test]
    fn the_run_id_does_not_depend_on_the_event_id() {
        let mut other = claimed("candidate", B);
        other.id = "another-id".into();
        let p = |c: &Claimed| {
            candidate(c, Some(&stream(B)), &[policy("p", json!({}))], &key())
                .unwrap()
                .run_id
        };
        assert_eq!(p(&claimed("candidate", B)), p(&other));
    }

    #[test]
    fn a_digest_the_candidate_tag_does_not_point_at_is_refused() {
        let r = candidate(
            &claimed("candidate", A),
            Some(&stream(B)),
            &[policy("p", json!({}))],
            &key(),
        )
        .unwrap_err();
        assert_eq!(r.reason, reason::NOT_CURRENT);
        assert!(r.message.contains(B), "{}", r.message);
    }

    #[test]
    fn another_tag_than_the_policys_candidate_tag_is_refused() {
        // The served tag of the stream, whose digest the forger reads off the stream.
        let r = candidate(
            &claimed("latest", A),
            Some(&stream(B)),
            &[policy("p", json!({}))],
            &key(),
        )
        .unwrap_err();
        assert_eq!(r.reason, reason::NOT_CANDIDATE_TAG);
        // The policy names another candidate tag: `candidate` is then just a tag.
        let r = candidate(
            &claimed("candidate", B),
            Some(&stream(B)),
            &[policy("p", json!({"candidateTag": "upstream"}))],
            &key(),
        )
        .unwrap_err();
        assert_eq!(r.reason, reason::NOT_CANDIDATE_TAG);
    }

    #[test]
    fn an_ungoverned_missing_or_conflicting_stream_is_refused() {
        let r = candidate(&claimed("candidate", B), Some(&stream(B)), &[], &key()).unwrap_err();
        assert_eq!(r.reason, reason::NOT_GOVERNED);
        let r = candidate(
            &claimed("candidate", B),
            Some(&stream(B)),
            &[policy("other", json!({"imageStream": "other"}))],
            &key(),
        )
        .unwrap_err();
        assert_eq!(r.reason, reason::NOT_GOVERNED);
        let r = candidate(
            &claimed("candidate", B),
            None,
            &[policy("p", json!({}))],
            &key(),
        )
        .unwrap_err();
        assert_eq!(r.reason, reason::NO_STREAM);
        let r = candidate(
            &claimed("candidate", B),
            Some(&stream(B)),
            &[
                policy("a", json!({})),
                policy("b", json!({"imageStream": "nb", "candidateTag": "next"})),
            ],
            &key(),
        )
        .unwrap_err();
        assert_eq!(r.reason, reason::POLICY_CONFLICT);
    }

    #[test]
    fn a_policy_of_another_namespace_governs_nothing_here() {
        let mut p = policy("p", json!({}));
        p.metadata.namespace = Some("elsewhere".into());
        let r = candidate(&claimed("candidate", B), Some(&stream(B)), &[p], &key()).unwrap_err();
        assert_eq!(r.reason, reason::NOT_GOVERNED);
    }

    #[test]
    fn a_stream_of_another_namespace_than_the_triggers_is_refused() {
        assert!(namespace(&claimed("candidate", B), Some("ds")).is_ok());
        let r = namespace(&claimed("candidate", B), Some("team-b")).unwrap_err();
        assert_eq!(r.reason, reason::OTHER_NAMESPACE);
        let r = namespace(&claimed("candidate", B), None).unwrap_err();
        assert_eq!(r.reason, reason::OTHER_NAMESPACE);
    }

    #[test]
    fn a_candidate_the_served_tag_already_serves_is_refused() {
        // Issue 33: `imagegate adopt` adds the candidate tag on the digest already served, and the
        // real server imports it at once: that import's event would start a pipeline that can only
        // end AlreadyPromoted.
        let r = candidate(
            &claimed("candidate", A),
            Some(&stream(A)),
            &[policy("p", json!({}))],
            &key(),
        )
        .unwrap_err();
        assert_eq!(r.reason, reason::ALREADY_SERVED);
        assert!(
            r.message.contains("latest already serves") && r.message.contains(A),
            "{}",
            r.message
        );
        // Served by the tag the policy names, not by another.
        let p = candidate(
            &claimed("candidate", A),
            Some(&stream(A)),
            &[policy("p", json!({"servedTag": "stable"}))],
            &key(),
        );
        assert!(p.is_ok(), "{p:?}");
        // Two policies serving two tags: refused only when every one already serves it.
        let two = [
            policy("a", json!({"servedTag": "latest"})),
            policy("b", json!({"servedTag": "stable"})),
        ];
        assert!(candidate(&claimed("candidate", A), Some(&stream(A)), &two, &key()).is_ok());
    }
}
