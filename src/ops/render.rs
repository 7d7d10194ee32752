//! The rows of `status` as text: a table in kubectl's style (columns padded by three spaces,
//! `<none>` for nothing, ages as `45s`, `12m`, `3h`, `2d`), a wide table, JSON or YAML
//! (`{"items": [...]}`, every field, timestamps in RFC 3339).

use k8s_openapi::jiff::Timestamp;

use crate::cli::ops::OutputFormat;

use super::status::Row;

const NONE: &str = "<none>";

/// The text of `rows` in `format`; `namespaces` adds the NAMESPACE column (`-A`). `now` is when
/// ages are measured to.
pub(crate) fn render(
    rows: &[Row],
    format: OutputFormat,
    namespaces: bool,
    now: Timestamp,
) -> anyhow::Result<String> {
    Ok(match format {
        OutputFormat::Json => {
            serde_json::to_string_pretty(&serde_json::json!({ "items": rows }))? + "\n"
        }
        OutputFormat::Yaml => serde_norway::to_string(&serde_json::json!({ "items": rows }))?,
        OutputFormat::Table | OutputFormat::Wide if rows.is_empty() => {
            "No ImageStreams gated by imagegate found.\n".to_string()
        }
        OutputFormat::Table => table(rows, false, namespaces, now),
        OutputFormat::Wide => table(rows, true, namespaces, now),
    })
}

fn table(rows: &[Row], wide: bool, namespaces: bool, now: Timestamp) -> String {
    let digest = |d: &Option<String>| match d {
        None => NONE.to_string(),
        Some(d) if wide => d.clone(),
        Some(d) => short(d),
    };
    let mut header = vec!["NAMESPACE", "IMAGESTREAM", "PHASE", "SERVED", "CANDIDATE"];
    if wide {
        header.extend(["PREVIOUS", "CANDIDATE TAG", "IMPORT", "SERVED IMPORT"]);
    }
    header.extend(["LAST RUN", "OUTCOME", "AGE", "MESSAGE"]);
    let skip = usize::from(!namespaces);
    let mut lines: Vec<Vec<String>> = vec![header[skip..].iter().map(|h| h.to_string()).collect()];
    for r in rows {
        let run = r.last_run.as_ref();
        let mut cells = vec![
            r.namespace.clone(),
            format!("{}:{}", r.imagestream, r.served_tag),
            r.phase.clone().unwrap_or_else(|| NONE.into()),
            digest(&r.served_digest),
            digest(&r.candidate_digest),
        ];
        if wide {
            cells.push(digest(&r.previous_digest));
            cells.push(r.candidate_tag.clone());
            cells.push(
                r.import_failure
                    .clone()
                    .map_or_else(|| "ok".into(), |f| format!("failed ({f})")),
            );
            cells.push(r.served_import.clone().unwrap_or_else(|| "ok".into()));
        }
        cells.extend([
            run.map_or_else(|| NONE.into(), |s| s.name.clone()),
            run.map_or_else(|| NONE.into(), |s| s.outcome().to_string()),
            run.and_then(|s| s.since.as_ref())
                .map_or_else(|| NONE.into(), |t| age(now, t.0)),
            message(r),
        ]);
        lines.push(cells.split_off(skip));
    }
    align(&lines)
}

/// The MESSAGE cell: the drift and a served tag's failed or pending import first
/// (`[CandidateTagOffered] `, `[served import failed] `), then the served tag's message.
fn message(r: &Row) -> String {
    let mut drift = r
        .drift
        .iter()
        .map(|d| format!("[{d}] "))
        .collect::<String>();
    if let Some(import) = &r.served_import {
        let state = import.split(' ').next().unwrap_or_default();
        drift.push_str(&format!("[served import {state}] "));
    }
    match (&r.message, drift.is_empty()) {
        (None, true) => NONE.into(),
        (None, false) => drift.trim_end().to_string(),
        (Some(m), _) => format!("{drift}{m}"),
    }
}

/// Columns padded to the widest cell plus three spaces; the last column unpadded.
fn align(lines: &[Vec<String>]) -> String {
    let columns = lines.first().map_or(0, Vec::len);
    let widths: Vec<usize> = (0..columns)
        .map(|c| {
            lines
                .iter()
                .map(|l| l[c].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for line in lines {
        for (c, cell) in line.iter().enumerate() {
            out.push_str(cell);
            if c + 1 < columns {
                out.push_str(&" ".repeat(widths[c] - cell.chars().count() + 3));
            }
        }
        out.push('\n');
    }
    out
}

/// `sha256:` and the first 12 hex digits, as `docker images` shortens IDs.
pub(crate) fn short(digest: &str) -> String {
    match digest.strip_prefix("sha256:") {
        Some(hex) if hex.len() > 12 => format!("sha256:{}", &hex[..12]),
        _ => digest.to_string(),
    }
}

/// kubectl's short age: `45s`, `12m`, `3h`, `2d` (the largest whole unit; `0s` for the future).
pub(crate) fn age(now: Timestamp, then: Timestamp) -> String {
    let secs = now.as_second().saturating_sub(then.as_second()).max(0);
    match secs {
        s if s < 120 => format!("{s}s"),
        s if s < 2 * 3600 => format!("{}m", s / 60),
        s if s < 2 * 86400 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86400),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::status::RunSummary;

    const A: &str = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    const B: &str = "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

    fn ts(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn rows() -> Vec<Row> {
        vec![
            Row {
                namespace: "ds".into(),
                imagestream: "nb".into(),
                served_tag: "latest".into(),
                candidate_tag: "candidate".into(),
                served_digest: Some(A.into()),
                candidate_digest: Some(B.into()),
                phase: Some("UpdateFailed".into()),
                message: Some("validation failed".into()),
                last_run: Some(RunSummary {
                    name: "run-1".into(),
                    action: "reject".into(),
                    succeeded: Some("False".into()),
                    reason: Some("Rejected".into()),
                    message: None,
                    since: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(ts(
                        "2026-01-01T00:00:00Z",
                    ))),
                }),
                ..Default::default()
            },
            Row {
                namespace: "ds".into(),
                imagestream: "other".into(),
                served_tag: "latest".into(),
                candidate_tag: "candidate".into(),
                candidate_digest: Some(A.into()),
                import_failure: Some("NotFound: gone".into()),
                ..Default::default()
            },
        ]
    }

    #[test]
    fn the_table_has_kubectls_shape() {
        let now = ts("2026-01-01T00:03:00Z");
        assert_eq!(
            render(&rows(), OutputFormat::Table, false, now).unwrap(),
            "\
IMAGESTREAM    PHASE          SERVED                CANDIDATE             LAST RUN   OUTCOME    AGE      MESSAGE
nb:latest      UpdateFailed   sha256:aaaaaaaaaaaa   sha256:bbbbbbbbbbbb   run-1      Rejected   3m       validation failed
other:latest   <none>         <none>                sha256:aaaaaaaaaaaa   <none>     <none>     <none>   <none>
"
        );
        let wide = render(&rows(), OutputFormat::Wide, true, now).unwrap();
        assert!(wide.starts_with("NAMESPACE   IMAGESTREAM"), "{wide}");
        assert!(
            wide.contains(A) && wide.contains("failed (NotFound: gone)"),
            "{wide}"
        );
    }

    #[test]
    fn json_and_yaml_hold_every_field() {
        let now = ts("2026-01-01T00:03:00Z");
        let json: serde_json::Value =
            serde_json::from_str(&render(&rows(), OutputFormat::Json, false, now).unwrap())
                .unwrap();
        assert_eq!(json["items"][0]["servedDigest"], A);
        assert_eq!(json["items"][0]["lastRun"]["since"], "2026-01-01T00:00:00Z");
        assert_eq!(json["items"][1]["phase"], serde_json::Value::Null);
        let yaml: serde_json::Value =
            serde_norway::from_str(&render(&rows(), OutputFormat::Yaml, false, now).unwrap())
                .unwrap();
        assert_eq!(yaml, json);
        assert_eq!(
            render(&[], OutputFormat::Table, false, now).unwrap(),
            "No ImageStreams gated by imagegate found.\n"
        );
    }

    #[test]
    fn ages_use_the_largest_whole_unit() {
        let now = ts("2026-01-10T00:00:00Z");
        for (then, want) in [
            ("2026-01-10T00:00:00Z", "0s"),
            ("2026-01-09T23:58:30Z", "90s"),
            ("2026-01-09T23:00:00Z", "60m"),
            ("2026-01-09T12:00:00Z", "12h"),
            ("2026-01-01T00:00:00Z", "9d"),
            ("2026-01-11T00:00:00Z", "0s"),
        ] {
            assert_eq!(age(now, ts(then)), want, "{then}");
        }
    }
}
