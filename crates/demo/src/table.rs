//! The demo's final tables: what each stream serves (digest, phase, candidate), and what the
//! Open Data Hub dashboard shows for it ([`super::dashboard`]).

use super::timeline::{Timeline, short_digest};
use super::{NAMESPACE, Row};

/// Prints both tables.
pub fn print(timeline: &Timeline, rows: &[Row], served_tag: &str) {
    timeline.heading(format!(
        "Result: what each ImageStream serves ({NAMESPACE}, served tag `{served_tag}`)"
    ));
    let mut out = format!(
        "{:<30} {:<71}  {:<13} {}\n",
        "IMAGESTREAM", "SERVED DIGEST", "PHASE", "CANDIDATE"
    );
    for r in rows {
        out.push_str(&format!(
            "{:<30} {:<71}  {:<13} {}\n",
            r.imagestream,
            r.served,
            if r.phase.is_empty() { "-" } else { &r.phase },
            short_digest(&r.candidate)
        ));
    }
    timeline.text(out.trim_end());
    timeline.heading(
        "What the Open Data Hub dashboard shows: the offered tags (default first), the default's \
         build, the badge of a workbench started from each stream's first build, and of the same \
         workbench made without the commit annotation",
    );
    let mut out = format!(
        "{:<30} {:<24} {:<20} {:<18} {:<18} {}\n",
        "IMAGESTREAM", "OFFERED", "BUILD", "FIRST-WORKBENCH", "WITHOUT-ANNOTATION", "DESCRIPTION"
    );
    for r in rows {
        let d = &r.dashboard;
        out.push_str(&format!(
            "{:<30} {:<24} {:<20} {:<18} {:<18} {}\n",
            r.imagestream,
            d.offered,
            d.build,
            d.workbench.as_str(),
            d.without_commit.as_str(),
            if d.update_failed {
                "update-failed-note"
            } else {
                "-"
            }
        ));
    }
    timeline.text(out.trim_end());
}
