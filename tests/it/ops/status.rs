//! `status` over streams in every phase, each brought there by the real controller (promote,
//! reject, begin, rollback), in every output format, with the exit status that says whether
//! anything is UpdateFailed.

use serde_json::{Value, json};

use super::{Ops, seed_gated_stream};
use crate::support::controller::{A, B, grant_promote};

/// ds: nb Promoted, failing UpdateFailed, checking Validating, fresh gated but never run;
/// team: rolled RolledBack.
async fn streams_in_every_phase() -> Ops {
    let o = Ops::new().await;
    let emu = o.emu();
    for name in ["failing", "checking", "fresh"] {
        seed_gated_stream(emu, "ds", name, A, B).await;
    }
    seed_gated_stream(emu, "team", "rolled", A, B).await;
    grant_promote(emu, "team", "imagegate-pipeline").await;
    emu.seed(json!({
        "apiVersion": "imagegate.dev/v1alpha1", "kind": "ImagePromotion",
        "metadata": {"name": "fresh-only", "namespace": "ds"},
        "spec": {"imageStream": "fresh"}
    }))
    .await;
    for args in [
        &[
            "promote",
            "nb",
            "-n",
            "ds",
            "--validation-status",
            "Succeeded",
        ][..],
        &["reject", "failing", "-n", "ds"],
        &["promote", "team/rolled", "--validation-status", "Succeeded"],
        &["rollback", "team/rolled"],
    ] {
        let out = o.run(args).await;
        assert_eq!(out.code, Some(0), "{args:?}: {out}");
    }
    o.s.create_run(
        "begin-checking",
        &[
            ("imagestream", "checking"),
            ("digest", B),
            ("action", "begin"),
        ],
        json!({}),
    )
    .await;
    o.s.done("begin-checking").await;
    o
}

/// The table's cells, split on runs of spaces of three or more.
fn cells(table: &str) -> Vec<Vec<String>> {
    table
        .lines()
        .map(|l| {
            l.split("   ")
                .map(str::trim)
                .filter(|c| !c.is_empty())
                .map(str::to_string)
                .collect()
        })
        .collect()
}

#[tokio::test]
async fn status_shows_every_gated_stream_in_every_format_and_exits_by_update_failed() {
    let o = streams_in_every_phase().await;

    let out = o.run(&["status", "-n", "ds"]).await;
    assert_eq!(out.code, Some(3), "failing is UpdateFailed: {out}");
    let table = cells(&out.stdout);
    assert_eq!(
        table[0],
        [
            "IMAGESTREAM",
            "PHASE",
            "SERVED",
            "CANDIDATE",
            "LAST RUN",
            "OUTCOME",
            "AGE",
            "MESSAGE"
        ]
    );
    let short_a = "sha256:aaaaaaaaaaaa";
    let short_b = "sha256:bbbbbbbbbbbb";
    let row = |i: usize| table[i][..4].iter().map(String::as_str).collect::<Vec<_>>();
    assert_eq!(
        row(1),
        ["checking:latest", "Validating", short_a, short_b],
        "{out}"
    );
    assert_eq!(
        row(2),
        ["failing:latest", "UpdateFailed", short_a, short_b],
        "{out}"
    );
    assert_eq!(
        row(3),
        ["fresh:latest", "<none>", short_a, short_b],
        "{out}"
    );
    assert_eq!(row(4), ["nb:latest", "Promoted", short_b, short_b], "{out}");
    assert_eq!(table.len(), 5, "only gated streams: {out}");
    assert_eq!(table[1][4], "begin-checking");
    assert_eq!(
        (table[2][5].as_str(), table[4][5].as_str()),
        ("Rejected", "Promoted")
    );
    assert!(
        table[2][4].starts_with("imagegate-reject-failing-"),
        "{out}"
    );
    assert_eq!(
        table[2][7],
        format!("validation of {B} failed (validation-status \"Failed\"); latest keeps {A}")
    );
    assert_eq!(
        &table[3][4..],
        ["<none>", "<none>", "<none>", "<none>"],
        "never run: {out}"
    );

    let json = o.run(&["status", "-n", "ds", "-o", "json"]).await;
    assert_eq!(json.code, Some(3), "{json}");
    let v: Value = serde_json::from_str(&json.stdout).unwrap();
    let items = v["items"].as_array().unwrap();
    assert_eq!(items.len(), 4);
    assert_eq!(items[3]["imagestream"], "nb");
    assert_eq!(items[3]["servedDigest"], B);
    assert_eq!(items[3]["previousDigest"], A);
    assert_eq!(items[3]["phase"], "Promoted");
    assert_eq!(items[3]["lastRun"]["succeeded"], "True");
    assert_eq!(items[1]["phaseDigest"], B);
    assert_eq!(items[2]["phase"], Value::Null);

    let yaml = o.run(&["status", "-n", "ds", "-o", "yaml"]).await;
    assert_eq!(
        serde_norway::from_str::<Value>(&yaml.stdout).unwrap(),
        v,
        "{yaml}"
    );

    let wide = o.run(&["status", "-n", "ds", "-o", "wide"]).await;
    let wide_table = cells(&wide.stdout);
    assert_eq!(
        &wide_table[0][..9],
        [
            "IMAGESTREAM",
            "PHASE",
            "SERVED",
            "CANDIDATE",
            "PREVIOUS",
            "CANDIDATE TAG",
            "IMPORT",
            "SERVED IMPORT",
            "LAST RUN"
        ]
    );
    assert_eq!(
        &wide_table[4][..8],
        ["nb:latest", "Promoted", B, B, A, "candidate", "ok", "ok"]
    );

    let all = o.run(&["status", "-A"]).await;
    assert_eq!(all.code, Some(3), "{all}");
    let all_table = cells(&all.stdout);
    assert_eq!(all_table[0][0], "NAMESPACE");
    assert_eq!(
        &all_table[5][..3],
        ["team", "rolled:latest", "RolledBack"],
        "{all}"
    );
}

#[tokio::test]
async fn status_exits_0_when_nothing_is_update_failed_and_names_one_stream() {
    let o = streams_in_every_phase().await;
    let team = o.run(&["status", "-n", "team"]).await;
    assert_eq!(team.code, Some(0), "{team}");
    assert_eq!(cells(&team.stdout)[1][..2], ["rolled:latest", "RolledBack"]);

    let one = o.run(&["status", "ds/nb"]).await;
    assert_eq!(one.code, Some(0), "{one}");
    assert_eq!(one.stdout.lines().count(), 2, "{one}");

    let absent = o.run(&["status", "ds/absent"]).await;
    assert_eq!(absent.code, Some(1), "{absent}");
    assert!(
        absent
            .stderr
            .contains("ImageStream \"absent\" in namespace \"ds\" is not gated by imagegate"),
        "{absent}"
    );

    let empty = o.run(&["status", "-n", "nowhere"]).await;
    assert_eq!(
        (empty.code, empty.stdout.as_str()),
        (Some(0), "No ImageStreams gated by imagegate found.\n"),
        "{empty}"
    );
}
