//! Where a governed stream's candidate stands, read from the stream alone (pure): settled (it
//! has its verdict, or there is no candidate), waiting for its validation to begin (since the
//! candidate's import), or being validated (the served tag says `Validating` for it); and
//! whether the candidate tag's last import failed and the served tag is `UpdateFailed`.

use crate::api::ImageStream;
use crate::controller::decide::annotation;
use crate::controller::status::phase;

/// The candidate and served tag names the stream's policy sets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tags {
    /// The candidate tag (scheduled import).
    pub candidate: String,
    /// The served tag.
    pub served: String,
}

/// Where the current candidate stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Standing {
    /// No candidate, or it has its verdict: served, failed, or rolled back from.
    Settled,
    /// Nothing began validating `digest`, which the candidate tag has pointed at since `since`
    /// (its import; None when the stream does not say).
    Waiting {
        digest: String,
        since: Option<k8s_openapi::jiff::Timestamp>,
    },
    /// The served tag says `Validating` for `digest`, marked by the `begin` CustomRun `run`.
    Validating { digest: String, run: String },
}

/// What the ledger reads of one stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Judged {
    /// Where its candidate stands.
    pub standing: Standing,
    /// The candidate tag's failed import (`ImportSuccess=False`): its message.
    pub import_failing: Option<String>,
    /// Whether the served tag's phase is `UpdateFailed`.
    pub update_failed: bool,
}

/// Judges `is` under `tags`.
pub fn judge(is: &ImageStream, tags: &Tags) -> Judged {
    let served = is
        .spec_tag(&tags.served)
        .and_then(|t| t.annotations.clone())
        .unwrap_or_default();
    let get = |k: &str| served.get(k).map(String::as_str).unwrap_or("");
    let import_failing = is.import_failure(&tags.candidate).map(|c| {
        c.message
            .clone()
            .or_else(|| c.reason.clone())
            .unwrap_or_else(|| "the import failed".into())
    });
    let update_failed = get(annotation::PHASE) == phase::UPDATE_FAILED;
    let judged = |standing| Judged {
        standing,
        import_failing: import_failing.clone(),
        update_failed,
    };
    let Some(current) = is.status_tag(&tags.candidate).and_then(|t| t.current()) else {
        return judged(Standing::Settled);
    };
    let Some(digest) = current.digest().map(str::to_string) else {
        return judged(Standing::Settled);
    };
    let listed = |key: &str| get(key).split(',').any(|d| d.trim() == digest);
    let marked = get(annotation::CANDIDATE_DIGEST) == digest;
    let verdict = is.current_digest(&tags.served) == Some(digest.as_str())
        || (marked && get(annotation::PHASE) == phase::UPDATE_FAILED)
        // A rolled-back digest is refused at promote unless a policy allows it: its verdict.
        || listed(annotation::ROLLED_BACK_DIGESTS);
    if verdict {
        return judged(Standing::Settled);
    }
    if marked && get(annotation::PHASE) == phase::VALIDATING {
        return judged(Standing::Validating {
            digest,
            run: get(annotation::CUSTOMRUN).to_string(),
        });
    }
    judged(Standing::Waiting {
        digest,
        since: current.created.as_ref().map(|t| t.0),
    })
}

#[cfg(test)]
mod tests;
