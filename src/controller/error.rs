//! Why a reconcile could not finish: [`Error`] names the API call that failed. Bad input is
//! never an error: it ends the run with a reason (see `reconcile`).

/// A reconcile that could not finish; retried with backoff by the error policy.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Reading the ImagePromotion named by `customRef.name`.
    #[error("reading ImagePromotion {name}: {source}")]
    ReadSpec {
        /// Its name.
        name: String,
        /// The API error.
        source: kube::Error,
    },
    /// Reading the ImageStream.
    #[error("reading ImageStream {name}: {source}")]
    ReadImageStream {
        /// Its name.
        name: String,
        /// The API error.
        source: kube::Error,
    },
    /// Reading the candidate image's metadata.
    #[error("reading ImageStreamImage {name}: {source}")]
    ReadImage {
        /// `{is}@{digest}`.
        name: String,
        /// The API error.
        source: kube::Error,
    },
    /// Writing the served tag.
    #[error("patching ImageStream {name}: {source}")]
    PatchImageStream {
        /// Its name.
        name: String,
        /// The API error.
        source: kube::Error,
    },
    /// The ImageStream changed under every attempt to write it.
    #[error("ImageStream {name} changed during each of {attempts} attempts to write it")]
    Contended {
        /// Its name.
        name: String,
        /// How many attempts.
        attempts: usize,
    },
    /// Writing the CustomRun's status.
    #[error("writing the status of CustomRun {name}: {source}")]
    WriteStatus {
        /// Its name.
        name: String,
        /// The API error.
        source: kube::Error,
    },
}

impl Error {
    /// A fixed label for metrics (never the error's text).
    pub fn kind(&self) -> &'static str {
        match self {
            Error::ReadSpec { .. } => "read_spec",
            Error::ReadImageStream { .. } => "read_imagestream",
            Error::ReadImage { .. } => "read_image",
            Error::PatchImageStream { .. } => "patch_imagestream",
            Error::Contended { .. } => "contended",
            Error::WriteStatus { .. } => "write_status",
        }
    }
}

/// The HTTP status of an API error (`None` for a transport error).
pub(super) fn api_status(e: &kube::Error) -> Option<u16> {
    match e {
        kube::Error::Api(s) => Some(s.code),
        _ => None,
    }
}

/// The API server's message of an API error (else the error's text).
pub(super) fn api_message(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) => s.message.clone(),
        other => other.to_string(),
    }
}
