//! What the Open Data Hub dashboard shows for each demo stream, from the rules modelled in
//! [`crate::dashboard_model`] (the notes' §1.3 offered tags and default, §1.4 the workbench
//! badges): the tags a spawner offers, the default tag's build, the badge of a workbench
//! started from the build each stream served when the demo began, and whether the description
//! carries imagegate's update-failed note. Also the image labels the demo's builds carry, so
//! that a promotion can describe them.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::dashboard_model::{self as dashboard, Badge, Workbench};
use imagegate::api::ImageStream;
use imagegate::controller::decide::UPDATE_FAILED_NOTE;
use imagegate::odh::key;

/// The build commit the demo's image of `digest` carries (its `vcs-ref` label), and what
/// `examples/notebook-imagestreams.yaml` writes on the served tags it seeds.
pub fn commit_of(digest: &str) -> String {
    let hex = digest.strip_prefix("sha256:").unwrap_or(digest);
    format!("build-{}", hex.chars().take(7).collect::<String>())
}

/// The labels of a demo build: its commit, and the lists the dashboard shows, copied from the
/// served tag it would replace (the demo's builds change no versions).
pub fn labels(digest: &str, served: Option<&BTreeMap<String, String>>) -> Value {
    let mut labels = json!({"vcs-ref": commit_of(digest)});
    for k in [key::SOFTWARE, key::PYTHON_DEPENDENCIES] {
        if let Some(v) = served.and_then(|a| a.get(k)) {
            labels[k] = json!(v);
        }
    }
    labels
}

/// What the dashboard shows for one stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shown {
    /// The offered tags, the default first, `[Latest]` after a recommended one.
    pub offered: String,
    /// The default tag's `notebook-build-commit` (`-` when none).
    pub build: String,
    /// The badge of the workbench started when the demo began.
    pub workbench: Badge,
    /// The badge of the same workbench made without the commit annotation (the Jupyter tile's
    /// backend, kubectl or GitOps write none): Deprecated once a promotion moved the served tag,
    /// because which build it runs cannot be told.
    pub without_commit: Badge,
    /// The description ends with imagegate's update-failed note.
    pub update_failed: bool,
}

/// The dashboard's view of `is`, and the badge of `first`.
pub fn shown(is: &ImageStream, first: Option<&Workbench>) -> Shown {
    let view = dashboard::view(is);
    let offered: Vec<String> = view
        .offered
        .iter()
        .map(|o| {
            if o.recommended {
                format!("{}[Latest]", o.tag)
            } else {
                o.tag.clone()
            }
        })
        .collect();
    Shown {
        offered: if offered.is_empty() {
            "-".into()
        } else {
            offered.join(",")
        },
        build: view
            .offered
            .first()
            .and_then(|o| o.build_commit.clone())
            .unwrap_or_else(|| "-".into()),
        workbench: first.map_or(Badge::Deleted, |wb| dashboard::workbench_status(is, wb)),
        without_commit: first.map_or(Badge::Deleted, |wb| {
            dashboard::workbench_status(is, &wb.clone().without_commit())
        }),
        update_failed: view
            .description
            .is_some_and(|d| d.ends_with(UPDATE_FAILED_NOTE)),
    }
}

impl Shown {
    /// One line for the timeline.
    pub fn summary(&self) -> String {
        format!(
            "dashboard offers {} (build {}), the first workbench shows {} ({} without its commit \
             annotation){}",
            self.offered,
            self.build,
            self.workbench.as_str(),
            self.without_commit.as_str(),
            if self.update_failed {
                ", the description says the update failed"
            } else {
                ""
            }
        )
    }
}

/// The workbenches started, one per stream, from each served tag as it is now.
pub fn started(streams: &[ImageStream], served: &str) -> BTreeMap<String, Workbench> {
    streams
        .iter()
        .filter_map(|s| {
            let name = s.metadata.name.clone()?;
            s.spec_tag(served)?;
            Some((name, Workbench::started_from(s, served)))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seeded() -> Vec<ImageStream> {
        let text = include_str!("../../../examples/notebook-imagestreams.yaml");
        serde_norway::Deserializer::from_str(text)
            .map(|d| <Value as serde::Deserialize>::deserialize(d).unwrap())
            .filter(|v| v["kind"] == "ImageStream")
            .map(|v| serde_json::from_value(v).unwrap())
            .collect()
    }

    #[test]
    fn the_examples_offer_only_the_served_tag_as_latest_with_the_seeded_build() {
        for is in seeded() {
            let served = is.current_digest("latest").unwrap().to_string();
            let first = Workbench::started_from(&is, "latest");
            let shown = shown(&is, Some(&first));
            assert_eq!(shown.offered, "latest[Latest]", "the candidate is hidden");
            assert_eq!(shown.build, commit_of(&served));
            assert_eq!(shown.workbench, Badge::Latest);
            assert!(!shown.update_failed);
        }
    }

    #[test]
    fn a_new_build_commit_makes_the_first_workbench_deprecated() {
        let mut is = seeded().remove(0);
        let first = Workbench::started_from(&is, "latest");
        let tag = is
            .spec
            .tags
            .iter_mut()
            .find(|t| t.name == "latest")
            .unwrap();
        tag.annotations
            .get_or_insert_default()
            .insert(key::BUILD_COMMIT.into(), commit_of("sha256:3333333"));
        let shown = shown(&is, Some(&first));
        assert_eq!(shown.workbench, Badge::Deprecated);
        assert_eq!(shown.build, "build-3333333");
        assert!(shown.summary().contains("first workbench shows Deprecated"));
    }

    #[test]
    fn demo_builds_carry_their_commit_and_the_served_lists() {
        let served = BTreeMap::from([(key::SOFTWARE.to_string(), "[]".to_string())]);
        assert_eq!(
            labels("sha256:abcdef0123", Some(&served)),
            json!({"vcs-ref": "build-abcdef0", key::SOFTWARE: "[]"})
        );
    }
}
