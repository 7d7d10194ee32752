//! End to end with `odh.enabled`: the real `imagegate controller` against the emulator, over
//! streams built from the real Open Data Hub objects (`support::odh`), checked with the model of
//! the dashboard (`imagegate_demo::dashboard_model`): the candidate hidden, the served tag described on
//! promotion and old workbenches Deprecated, a failure visible in the description while the served
//! tag is still offered, a served tag that always has an image, and the DockerImage pin.

use crate::support::controller::{A, B, C, Setup, reason, result};
use crate::support::odh::{self, MINIMAL, REPO, SERVED};
use crate::support::rbac;

use imagegate::controller::decide::UPDATE_FAILED_NOTE;
use imagegate::odh::key;
use imagegate_demo::dashboard_model::{self as dashboard, Badge, Workbench};
use serde_json::json;

/// A digest N-1 serves.
const N1: &str = "sha256:1111111111111111111111111111111111111111111111111111111111111111";

fn notebooks() -> serde_json::Value {
    json!({"spec": {"customRef": {"name": "notebooks"}}})
}

fn params<'a>(stream: &'a str, digest: &'a str, action: &'a str) -> Vec<(&'a str, &'a str)> {
    vec![
        ("imagestream", stream),
        ("served-tag", SERVED),
        ("digest", digest),
        ("action", action),
    ]
}

fn offered(is: &imagegate::api::ImageStream) -> Vec<String> {
    dashboard::view(is)
        .offered
        .into_iter()
        .map(|o| o.tag)
        .collect()
}

async fn shipped() -> Setup {
    let s = Setup::new().await;
    odh::seed_shipped(&s.emu, A, N1, B).await;
    s
}

#[tokio::test]
async fn begin_hides_the_candidate_in_its_one_write_and_the_served_tag_stays_offered() {
    let s = shipped().await;
    odh::seed_promotion(&s.emu, json!({})).await;
    let before = odh::stream(&s.client, MINIMAL).await;
    assert_eq!(
        offered(&before),
        ["2025.2", "candidate", "2025.1"],
        "an ungated candidate is offered to every user"
    );
    s.create_run("begin-b", &params(MINIMAL, B, "begin"), notebooks())
        .await;
    let run = s.done("begin-b").await;
    assert_eq!(reason(&run), ("True".into(), "Validating".into()));
    let is = odh::stream(&s.client, MINIMAL).await;
    let candidate = is.spec_tag("candidate").unwrap();
    assert_eq!(
        candidate.annotations.as_ref().unwrap()[key::TAG_OUTDATED],
        "true"
    );
    assert_eq!(offered(&is), ["2025.2", "2025.1"]);
    assert_eq!(is.current_digest(SERVED), Some(A));
    assert_eq!(
        s.writes("imagestreams").await.len(),
        1,
        "the candidate is hidden in begin's own write"
    );
    rbac::assert_config_allows(&s.emu, "controller").await;
}

#[tokio::test]
async fn a_promotion_describes_the_new_image_and_old_workbenches_show_deprecated() {
    let s = shipped().await;
    odh::seed_promotion(&s.emu, json!({})).await;
    s.emu
        .set_image_metadata(
            B,
            json!({"Config": {"Labels": {
                "vcs-ref": "commit-b",
                "opendatahub.io/notebook-python-dependencies": "[{\"name\":\"JupyterLab\",\"version\":\"4.6\"}]"
            }}}),
        )
        .await;
    let before = odh::stream(&s.client, MINIMAL).await;
    let old = Workbench::started_from(&before, SERVED);
    assert_eq!(dashboard::workbench_status(&before, &old), Badge::Latest);

    let mut p = params(MINIMAL, B, "promote");
    p.push(("validation-status", "Succeeded"));
    p.push((
        "notebook-software",
        r#"[{"name":"Python","version":"v3.12.9"}]"#,
    ));
    s.create_run("promote-b", &p, notebooks()).await;
    let run = s.done("promote-b").await;
    assert_eq!(
        reason(&run),
        ("True".into(), "Promoted".into()),
        "{:?}",
        run.status
    );
    assert_eq!(result(&run, "promoted-digest"), B);

    let is = odh::stream(&s.client, MINIMAL).await;
    assert_eq!(is.current_digest(SERVED), Some(B));
    let served = is.spec_tag(SERVED).unwrap().annotations.clone().unwrap();
    assert_eq!(served[key::BUILD_COMMIT], "commit-b");
    assert_eq!(
        served[key::SOFTWARE],
        r#"[{"name":"Python","version":"v3.12.9"}]"#
    );
    assert_eq!(
        served[key::PYTHON_DEPENDENCIES],
        r#"[{"name":"JupyterLab","version":"4.6"}]"#
    );
    assert_eq!(
        served[key::RECOMMENDED],
        "true",
        "the manifest's own keys are kept"
    );
    // The dashboard: same offer, the old build's workbench Deprecated, a new one Latest.
    assert_eq!(
        offered(&is),
        ["2025.2", "2025.1"],
        "the previous tag is hidden too"
    );
    assert_eq!(dashboard::workbench_status(&is, &old), Badge::Deprecated);
    let new = Workbench::started_from(&is, SERVED);
    assert_eq!(dashboard::workbench_status(&is, &new), Badge::Latest);
    assert_eq!(s.writes("imagestreams").await.len(), 1);
    rbac::assert_config_allows(&s.emu, "controller").await;
}

#[tokio::test]
async fn a_failed_update_is_noted_in_the_description_until_the_next_success() {
    let s = shipped().await;
    odh::seed_promotion(&s.emu, json!({})).await;
    let desc = "Jupyter notebook image with minimal dependency set to start experimenting with Jupyter environment.";
    let before = odh::stream(&s.client, MINIMAL).await;
    let served_before = before.spec_tag(SERVED).cloned().unwrap();

    let mut p = params(MINIMAL, B, "promote");
    p.push(("validation-status", "Failed"));
    s.create_run("promote-b", &p, notebooks()).await;
    let run = s.done("promote-b").await;
    assert_eq!(reason(&run), ("False".into(), "ValidationFailed".into()));
    let is = odh::stream(&s.client, MINIMAL).await;
    let view = dashboard::view(&is);
    assert_eq!(
        view.description.as_deref(),
        Some(format!("{desc} {UPDATE_FAILED_NOTE}").as_str())
    );
    assert!(view.listed);
    assert_eq!(
        view.default_tag(),
        Some(SERVED),
        "the served tag is still offered"
    );
    assert_eq!(is.current_digest(SERVED), Some(A));
    let served = is.spec_tag(SERVED).unwrap();
    assert_eq!(
        served.from, served_before.from,
        "the served image is unchanged"
    );
    let ann = served.annotations.clone().unwrap();
    assert_eq!(ann[key::BUILD_COMMIT], "commit-a");
    assert_eq!(ann["imagegate.dev/phase"], "UpdateFailed");

    s.emu.import("ds", MINIMAL, "candidate", C).await;
    let mut p = params(MINIMAL, C, "promote");
    p.push(("validation-status", "Succeeded"));
    s.create_run("promote-c", &p, notebooks()).await;
    assert_eq!(reason(&s.done("promote-c").await).1, "Promoted");
    let is = odh::stream(&s.client, MINIMAL).await;
    assert_eq!(dashboard::view(&is).description.as_deref(), Some(desc));
    rbac::assert_config_allows(&s.emu, "controller").await;
}

#[tokio::test]
async fn a_custom_image_never_has_a_served_tag_without_an_image() {
    let s = Setup::new().await;
    odh::seed_custom(&s.emu, B).await;
    odh::seed_promotion(
        &s.emu,
        json!({"servedTag": "latest", "promoteAs": "DockerImage"}),
    )
    .await;
    let run_params = |digest, action| {
        vec![
            ("imagestream", "custom-my-image"),
            ("digest", digest),
            ("action", action),
            ("validation-status", "Succeeded"),
        ]
    };
    s.create_run("begin-b", &run_params(B, "begin")[..3], notebooks())
        .await;
    assert_eq!(reason(&s.done("begin-b").await).1, "Validating");
    let is = odh::stream(&s.client, "custom-my-image").await;
    assert!(
        is.spec_tag("latest").is_none(),
        "begin creates no bare served tag"
    );
    assert!(
        !is.status.as_ref().unwrap().tags.is_empty(),
        "the webhook needs status.tags"
    );

    s.create_run("promote-b", &run_params(B, "promote"), notebooks())
        .await;
    assert_eq!(reason(&s.done("promote-b").await).1, "Promoted");
    let is = odh::stream(&s.client, "custom-my-image").await;
    let served = is.spec_tag("latest").unwrap();
    assert_eq!(
        served.from.as_ref().unwrap().kind.as_deref(),
        Some("ImageStreamImage"),
        "a first promotion pins in the stream, whatever the form"
    );
    assert_eq!(is.current_digest("latest"), Some(B), "an image at once");
    let view = dashboard::view(&is);
    assert!(view.byon && view.listed, "{view:?}");
    assert_eq!(view.error, None);
    assert_eq!(offered(&is), ["latest"], "the candidate is not offered");
    rbac::assert_config_allows(&s.emu, "controller").await;
}

#[tokio::test]
async fn the_docker_image_pin_keeps_the_history_and_shows_the_build_date() {
    let s = shipped().await;
    odh::seed_promotion(&s.emu, json!({"promoteAs": "DockerImage"})).await;
    let before = odh::stream(&s.client, MINIMAL).await;
    // A workbench the webhook resolved to the old image (no integrated registry).
    let old = Workbench {
        image: format!("{REPO}@{A}"),
        last_image_selection: Some(format!("{MINIMAL}:{SERVED}")),
        last_commit: Some("commit-a".into()),
    };
    assert_eq!(dashboard::workbench_status(&before, &old), Badge::Latest);

    let mut p = params(MINIMAL, B, "promote");
    p.push(("validation-status", "Succeeded"));
    s.create_run("promote-b", &p, notebooks()).await;
    assert_eq!(reason(&s.done("promote-b").await).1, "Promoted");
    let is = odh::stream(&s.client, MINIMAL).await;
    let from = is.spec_tag(SERVED).unwrap().from.clone().unwrap();
    assert_eq!(
        (from.kind.as_deref(), from.name.as_deref()),
        (Some("DockerImage"), Some(format!("{REPO}@{B}").as_str()))
    );
    assert_eq!(
        offered(&is),
        ["2025.2", "2025.1"],
        "offered while the import is pending"
    );

    // The import controller imports the pinned digest; a second run has nothing to do.
    s.emu.import("ds", MINIMAL, SERVED, B).await;
    s.create_run("promote-b-again", &p, notebooks()).await;
    assert_eq!(
        reason(&s.done("promote-b-again").await).1,
        "AlreadyPromoted"
    );
    assert_eq!(s.writes("imagestreams").await.len(), 1);
    let is = odh::stream(&s.client, MINIMAL).await;
    let history: Vec<&str> = is
        .history(SERVED)
        .iter()
        .filter_map(|e| e.digest())
        .collect();
    assert_eq!(history, [B, A], "the old digest stays in the history");
    let view = dashboard::view(&is);
    assert!(view.offered[0].build_date.is_some(), "{view:?}");
    assert_eq!(
        dashboard::workbench_status(&is, &old),
        Badge::Deprecated,
        "the old workbench is recognised through the history, and told to update"
    );
    rbac::assert_config_allows(&s.emu, "controller").await;
}

#[tokio::test]
async fn a_workbench_without_the_commit_annotation_shows_deprecated_once_a_promotion_moved_the_tag()
{
    // Issue 34: a Notebook made by the Jupyter tile's backend, kubectl or GitOps has no
    // `last-image-version-git-commit-selection`; the dashboard compares its `undefined` with
    // every tag's build commit, so any tag without one (the hidden candidate and previous tags)
    // kept it Latest after a promotion.
    let s = shipped().await;
    odh::seed_promotion(&s.emu, json!({})).await;
    s.emu
        .set_image_metadata(B, json!({"Config": {"Labels": {"vcs-ref": "commit-b"}}}))
        .await;
    // The build the manifest describes as commit-a says so itself (a rollback reads the label).
    s.emu
        .set_image_metadata(A, json!({"Config": {"Labels": {"vcs-ref": "commit-a"}}}))
        .await;
    s.create_run("begin-b", &params(MINIMAL, B, "begin"), notebooks())
        .await;
    assert_eq!(reason(&s.done("begin-b").await).1, "Validating");
    let before = odh::stream(&s.client, MINIMAL).await;
    let elsewhere = Workbench::started_from(&before, SERVED).without_commit();
    let old = Workbench::started_from(&before, SERVED);
    assert_eq!(
        dashboard::workbench_status(&before, &elsewhere),
        Badge::Latest,
        "nothing has moved while the candidate validates"
    );

    let mut p = params(MINIMAL, B, "promote");
    p.push(("validation-status", "Succeeded"));
    s.create_run("promote-b", &p, notebooks()).await;
    assert_eq!(reason(&s.done("promote-b").await).1, "Promoted");
    let is = odh::stream(&s.client, MINIMAL).await;
    assert_eq!(dashboard::workbench_status(&is, &old), Badge::Deprecated);
    assert_eq!(
        dashboard::workbench_status(&is, &elsewhere),
        Badge::Deprecated,
        "a workbench on the old build is told to update, annotation or not"
    );
    let new = Workbench::started_from(&is, SERVED);
    assert_eq!(dashboard::workbench_status(&is, &new), Badge::Latest);
    assert_eq!(offered(&is), ["2025.2", "2025.1"], "still hidden");

    s.create_run(
        "rollback",
        &[
            ("imagestream", MINIMAL),
            ("served-tag", SERVED),
            ("action", "rollback"),
        ],
        notebooks(),
    )
    .await;
    assert_eq!(reason(&s.done("rollback").await).1, "RolledBack");
    let is = odh::stream(&s.client, MINIMAL).await;
    assert_eq!(is.current_digest(SERVED), Some(A));
    assert_eq!(
        dashboard::workbench_status(&is, &old),
        Badge::Latest,
        "the build served again"
    );
    assert_eq!(
        dashboard::workbench_status(&is, &new),
        Badge::Deprecated,
        "the build rolled back from, though the candidate tag still holds its digest"
    );
    assert_eq!(
        dashboard::workbench_status(&is, &elsewhere),
        Badge::Deprecated,
        "which build it runs cannot be told; it is asked to update"
    );
    assert_eq!(offered(&is), ["2025.2", "2025.1"]);
    rbac::assert_config_allows(&s.emu, "controller").await;
}
