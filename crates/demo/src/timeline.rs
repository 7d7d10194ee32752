//! What the demo prints while it runs: one line per thing a user would watch happen, with the
//! seconds since the start.

use std::fmt::Display;
use std::io::Write;
use std::sync::Mutex;
use std::time::Instant;

/// The demo's output.
pub struct Timeline {
    start: Instant,
    out: Mutex<()>,
}

impl Default for Timeline {
    fn default() -> Self {
        Timeline {
            start: Instant::now(),
            out: Mutex::new(()),
        }
    }
}

impl Timeline {
    /// A line: `  1.23s  <who>  <what>`.
    pub fn line(&self, who: &str, what: impl Display) {
        let _guard = self.out.lock().unwrap_or_else(|p| p.into_inner());
        let secs = self.start.elapsed().as_secs_f64();
        let what = shorten_digests(&what.to_string());
        let mut stdout = std::io::stdout().lock();
        let _ = writeln!(stdout, "{secs:7.2}s  {who:<10} {what}");
        let _ = stdout.flush();
    }

    /// A heading between scenarios.
    pub fn heading(&self, text: impl Display) {
        let _guard = self.out.lock().unwrap_or_else(|p| p.into_inner());
        let mut stdout = std::io::stdout().lock();
        let _ = writeln!(stdout, "\n== {text}");
        let _ = stdout.flush();
    }

    /// Plain text, as it is.
    pub fn text(&self, text: impl Display) {
        let _guard = self.out.lock().unwrap_or_else(|p| p.into_inner());
        let mut stdout = std::io::stdout().lock();
        let _ = writeln!(stdout, "{text}");
        let _ = stdout.flush();
    }
}

/// `sha256:1234567890ab…` for a line of output; anything else as it is.
pub fn short_digest(digest: &str) -> String {
    match digest.strip_prefix("sha256:") {
        Some(hex) if hex.len() > 12 => format!("sha256:{}", &hex[..12]),
        _ => digest.to_string(),
    }
}

/// Every `sha256:<64 hex>` in `text` cut to its first 12 hex digits.
pub fn shorten_digests(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find("sha256:") {
        out.push_str(&rest[..i]);
        let hex = &rest[i + 7..];
        let n = hex.bytes().take_while(|b| b.is_ascii_hexdigit()).count();
        if n == 64 {
            out.push_str(&short_digest(&rest[i..i + 71]));
            rest = &rest[i + 71..];
        } else {
            out.push_str("sha256:");
            rest = hex;
        }
    }
    out.push_str(rest);
    out
}

/// A long generated name cut for a line of output.
pub fn short_name(name: &str) -> String {
    if name.chars().count() > 22 {
        format!("{}…", name.chars().take(21).collect::<String>())
    } else {
        name.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digests_in_text_are_shortened_and_nothing_else_changes() {
        let d = format!("sha256:{}", "ab".repeat(32));
        assert_eq!(
            shorten_digests(&format!("from {d} to {d}.")),
            "from sha256:abababababab to sha256:abababababab."
        );
        assert_eq!(
            shorten_digests("sha256:12 and sha256:"),
            "sha256:12 and sha256:"
        );
        assert_eq!(short_digest("latest"), "latest");
    }
}
