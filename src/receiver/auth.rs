//! Who may nudge: every sender proves itself with a shared secret of its own, read from a file
//! at start (a mounted Secret's key), sent as `Authorization: Bearer <secret>` (the Distribution
//! registry sends the headers its `notifications.endpoints[].headers` configure, Harbor its
//! policy's auth header), or, for GitHub, used to sign each body (`X-Hub-Signature-256`, an
//! HMAC-SHA256), or, for Quay and Docker Hub, whose webhooks can send neither a header nor a
//! signature, as the last segment of the URL they are configured with. Compared in constant time (`ring::hmac::verify`, a comparison of MACs under a key made at start), so
//! the answer's timing says nothing of how much of a guess was right.

use ring::hmac;
use ring::rand::SystemRandom;

/// The shortest secret accepted: 16 bytes, 128 bits of a random token.
pub(crate) const MIN_SECRET: usize = 16;

/// Whether the secret in `text` (trimmed as [`Secret::new`] trims it) can be a URL's segment as
/// it is: only RFC 3986's unreserved characters, so that no sender's or proxy's encoding of it
/// differs from what is compared.
pub(crate) fn url_safe(text: &str) -> bool {
    text.trim()
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~'))
}

/// A sender's secret, held as its MAC under a key of this process, and as the key a sender that
/// signs its bodies (GitHub) signs them with.
pub(crate) struct Secret {
    key: hmac::Key,
    tag: hmac::Tag,
    signing: hmac::Key,
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(..)")
    }
}

impl Secret {
    /// The secret of `text` (surrounding whitespace, a file's last newline, is not part of it);
    /// refused when shorter than [`MIN_SECRET`].
    pub(crate) fn new(text: &str) -> Result<Secret, String> {
        let secret = text.trim();
        if secret.len() < MIN_SECRET {
            return Err(format!(
                "the secret has {} bytes; at least {MIN_SECRET} are needed",
                secret.len()
            ));
        }
        let key = hmac::Key::generate(hmac::HMAC_SHA256, &SystemRandom::new())
            .map_err(|_| "no random key for comparing secrets".to_string())?;
        let tag = hmac::sign(&key, secret.as_bytes());
        let signing = hmac::Key::new(hmac::HMAC_SHA256, secret.as_bytes());
        Ok(Secret { key, tag, signing })
    }

    /// Whether `signature` (an `X-Hub-Signature-256` header: `sha256=` and the hex HMAC-SHA256
    /// of the body under the secret, as GitHub signs its webhooks) signs `body`.
    pub(crate) fn signed(&self, body: &[u8], signature: Option<&str>) -> bool {
        let Some(hex) = signature.and_then(|s| s.strip_prefix("sha256=")) else {
            return false;
        };
        let Ok(mac) = hex::decode(hex.trim()) else {
            return false;
        };
        hmac::verify(&self.signing, body, &mac).is_ok()
    }

    /// Whether an `Authorization` header value is `Bearer <this secret>`.
    pub(crate) fn admits(&self, authorization: Option<&str>) -> bool {
        self.is(authorization.and_then(|h| h.strip_prefix("Bearer ")))
    }

    /// Whether `token` (a URL's last segment) is this secret.
    pub(crate) fn is(&self, token: Option<&str>) -> bool {
        let Some(token) = token else {
            return false;
        };
        hmac::verify(&self.key, token.trim().as_bytes(), self.tag.as_ref()).is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_bearer_of_the_secret_is_admitted() {
        let s = Secret::new("0123456789abcdef-token\n").unwrap();
        assert!(s.admits(Some("Bearer 0123456789abcdef-token")));
        for wrong in [
            None,
            Some(""),
            Some("Bearer "),
            Some("Bearer 0123456789abcdef-toke"),
            Some("Bearer 0123456789abcdef-tokenX"),
            Some("Basic 0123456789abcdef-token"),
            Some("0123456789abcdef-token"),
        ] {
            assert!(!s.admits(wrong), "{wrong:?}");
        }
    }

    #[test]
    fn only_the_secret_itself_is_it() {
        let s = Secret::new("0123456789abcdef-token").unwrap();
        assert!(s.is(Some("0123456789abcdef-token")));
        for wrong in [
            None,
            Some(""),
            Some("0123456789abcdef-toke"),
            Some("Bearer 0123456789abcdef-token"),
        ] {
            assert!(!s.is(wrong), "{wrong:?}");
        }
    }

    #[test]
    fn only_a_body_signed_with_the_secret_is_admitted() {
        let s = Secret::new("It's a Secret to Everybody").unwrap();
        // GitHub's documented example: the body "Hello, World!" under this secret.
        let good = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17";
        assert!(s.signed(b"Hello, World!", Some(good)));
        assert!(!s.signed(b"Hello, World?", Some(good)));
        for bad in [
            None,
            Some(""),
            Some("sha1=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"),
            Some("sha256=757107ea"),
            Some("sha256=zz7107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"),
            Some("sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e1"),
        ] {
            assert!(!s.signed(b"Hello, World!", bad), "{bad:?}");
        }
    }

    #[test]
    fn a_short_secret_is_refused() {
        assert!(Secret::new("short\n").unwrap_err().contains("at least 16"));
        assert!(format!("{:?}", Secret::new("0123456789abcdef").unwrap()) == "Secret(..)");
    }
}
