//! What kind of PATCH a request is: its type, from `Content-Type`.

/// The PATCH flavours kube-apiserver accepts, told apart by the request's `Content-Type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PatchType {
    /// `application/merge-patch+json` (RFC 7386).
    Merge,
    /// `application/json-patch+json` (RFC 6902).
    Json,
    /// `application/strategic-merge-patch+json`.
    Strategic,
    /// `application/apply-patch+yaml` (server-side apply).
    Apply,
}

impl PatchType {
    /// All patch types, in the order kube-apiserver lists them in `Accept-Patch`.
    pub const ALL: [PatchType; 4] = [
        PatchType::Json,
        PatchType::Merge,
        PatchType::Strategic,
        PatchType::Apply,
    ];

    /// The patch type of a `Content-Type` header value; parameters such as `;charset=utf-8` are
    /// ignored. `None` means 415 Unsupported Media Type, as in kube-apiserver (which has no
    /// `apply-patch+json`: an apply body in JSON is sent as YAML, JSON being YAML).
    pub fn from_content_type(ct: &str) -> Option<PatchType> {
        let media = ct.split(';').next().unwrap_or_default().trim();
        PatchType::ALL
            .into_iter()
            .find(|t| t.content_type().eq_ignore_ascii_case(media))
    }

    /// The canonical media type.
    pub fn content_type(self) -> &'static str {
        match self {
            PatchType::Merge => "application/merge-patch+json",
            PatchType::Json => "application/json-patch+json",
            PatchType::Strategic => "application/strategic-merge-patch+json",
            PatchType::Apply => "application/apply-patch+yaml",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_types_map_to_patch_types_ignoring_parameters_and_case() {
        let cases = [
            ("application/merge-patch+json", Some(PatchType::Merge)),
            ("application/json-patch+json", Some(PatchType::Json)),
            (
                "application/strategic-merge-patch+json",
                Some(PatchType::Strategic),
            ),
            ("application/apply-patch+yaml", Some(PatchType::Apply)),
            (
                "application/merge-patch+json; charset=utf-8",
                Some(PatchType::Merge),
            ),
            ("Application/Apply-Patch+YAML", Some(PatchType::Apply)),
            ("application/json", None),
            ("application/apply-patch+json", None),
            ("", None),
        ];
        for (ct, want) in cases {
            assert_eq!(PatchType::from_content_type(ct), want, "{ct}");
        }
        for t in PatchType::ALL {
            assert_eq!(PatchType::from_content_type(t.content_type()), Some(t));
        }
    }
}
