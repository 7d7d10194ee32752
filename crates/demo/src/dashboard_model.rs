//! What the Open Data Hub dashboard shows for a notebook ImageStream, as pure functions of the
//! stream: whether a spawner lists it ([`view`]), which tags it offers and in what order, the
//! error it shows for a custom image, and the badge of a workbench started from it
//! ([`workbench_status`]). Each rule names the dashboard file it models; the sources, at the
//! commits read, are in `../shared/reference/notes/odh-notebook-images.md` (§ numbers below).
//! Derived rules (worked out from the code, not seen on a cluster) are marked so.

use imagegate::api::{ImageStream, TagReference};
use imagegate::odh::key;

mod order;

/// One tag a spawner offers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Offered {
    /// The tag name.
    pub tag: String,
    /// `workbench-image-recommended: "true"`: sorted first, labelled Latest.
    pub recommended: bool,
    /// `notebook-build-commit`, shown as `tag (commit)`.
    pub build_commit: Option<String>,
    /// `notebook-software` as written (a JSON list).
    pub software: Option<String>,
    /// "Build date": `created` of the history item whose `dockerImageReference` equals the
    /// tag's `from.name` (§1.3), so an `ImageStreamImage` pin shows none (derived).
    pub build_date: Option<String>,
}

/// What the dashboard shows for one stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct View {
    /// The spawners list the stream (§1.1: label `opendatahub.io/notebook-image: "true"`, not a
    /// hidden shipped stream, not an invalid custom image).
    pub listed: bool,
    /// A custom (BYON) image (`app.kubernetes.io/created-by: byon`).
    pub byon: bool,
    /// The offered tags, the default first (§1.3 `compareTagVersions` run by the browser's
    /// sort: recommended first, then tag names as versions, else in locale order, descending;
    /// see [`order`]).
    pub offered: Vec<Offered>,
    /// The error text of a custom image (§1.2: `status.tags[spec.tags[0]].conditions[0].message`);
    /// always empty for a shipped stream.
    pub error: Option<String>,
    /// The stream's description (`notebook-image-desc`).
    pub description: Option<String>,
}

impl View {
    /// The tag a new workbench gets unless the user picks another.
    pub fn default_tag(&self) -> Option<&str> {
        self.offered.first().map(|o| o.tag.as_str())
    }

    /// Whether the spawner shows a version selector (`ImageVersionSelector` renders nothing for
    /// one offered tag or none): with one, a user sees neither the tag nor its build commit.
    pub fn selector_shown(&self) -> bool {
        self.offered.len() > 1
    }
}

fn ann<'t>(tag: &'t TagReference, k: &str) -> Option<&'t str> {
    tag.annotations.as_ref()?.get(k).map(String::as_str)
}

fn stream_ann<'s>(is: &'s ImageStream, k: &str) -> Option<&'s str> {
    is.metadata.annotations.as_ref()?.get(k).map(String::as_str)
}

fn stream_label<'s>(is: &'s ImageStream, k: &str) -> Option<&'s str> {
    is.metadata.labels.as_ref()?.get(k).map(String::as_str)
}

/// §1.4: any non-empty `image-tag-outdated` hides a tag from new workbenches.
fn outdated(tag: &TagReference) -> bool {
    ann(tag, key::TAG_OUTDATED).is_some_and(|v| !v.is_empty())
}

/// Whether the stream is a custom (BYON) image.
pub fn is_byon(is: &ImageStream) -> bool {
    stream_label(is, key::CREATED_BY) == Some(key::BYON)
}

/// The dashboard's view of `is`. `spec.tags` are taken in the order given, which is the API's
/// (sorted by name): for a custom image only `spec.tags[0]` counts (§1.3).
pub fn view(is: &ImageStream) -> View {
    let byon = is_byon(is);
    let first = is.spec.tags.first();
    let first_status = first.and_then(|t| is.status_tag(&t.name));
    // §1.1 isInvalidBYONImageStream: the first tag has no status entry, or `items: null`.
    let invalid_byon = byon && first_status.is_none_or(|s| s.items.is_none());
    let hidden_ootb = !byon && stream_ann(is, key::IMAGE_HIDDEN) == Some("true");
    let labelled = stream_label(is, key::NOTEBOOK_IMAGE) == Some("true");
    let error = if byon {
        first_status
            .and_then(|s| s.conditions.first())
            .and_then(|c| c.message.clone())
            .filter(|m| !m.is_empty())
    } else {
        None
    };
    // §1.3 getExistingVersionsForImageStream: not outdated, and a same-named status entry.
    let mut offered: Vec<Offered> = is
        .spec
        .tags
        .iter()
        .filter(|t| !outdated(t) && is.status_tag(&t.name).is_some())
        .map(|t| Offered {
            tag: t.name.clone(),
            recommended: ann(t, key::RECOMMENDED) == Some("true"),
            build_commit: ann(t, key::BUILD_COMMIT).map(str::to_string),
            software: ann(t, key::SOFTWARE).map(str::to_string),
            build_date: build_date(is, t),
        })
        .collect();
    order::js_sort(&mut offered, |a, b| {
        order::compare_tags((&a.tag, a.recommended), (&b.tag, b.recommended))
    });
    View {
        listed: labelled && !hidden_ootb && !invalid_byon,
        byon,
        offered,
        error,
        description: stream_ann(is, key::IMAGE_DESC).map(str::to_string),
    }
}

fn build_date(is: &ImageStream, tag: &TagReference) -> Option<String> {
    let from = tag.from.as_ref()?.name.as_deref()?;
    is.history(&tag.name)
        .iter()
        .find(|e| e.docker_image_reference == from)
        .and_then(|e| e.created.as_ref())
        .map(|t| t.0.to_string())
}

/// A workbench as the dashboard reads it (§1.3, §1.4): its container image and the two
/// annotations the dashboard's spawner writes when it creates one. A Notebook made another way
/// (the Jupyter tile's backend, kubectl, GitOps, an older dashboard) may lack either.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Workbench {
    /// The container image (`<status.dockerImageRepository>:<tag>`, or what the webhook set).
    pub image: String,
    /// `notebooks.opendatahub.io/last-image-selection`: `<imagestream>:<tag>`.
    pub last_image_selection: Option<String>,
    /// `…/last-image-version-git-commit-selection`: the tag's `notebook-build-commit` then
    /// (the spawner writes `""` when the tag had none); `None` when the Notebook has no such
    /// annotation, which the dashboard compares as `undefined`.
    pub last_commit: Option<String>,
}

impl Workbench {
    /// A workbench started now from `tag` of `is`, as the dashboard's spawner creates it: the
    /// image `<status.dockerImageRepository>:<tag>`, or, without an integrated registry, what
    /// the workbench webhook puts there instead, the tag's newest `dockerImageReference` (§2).
    pub fn started_from(is: &ImageStream, tag: &str) -> Workbench {
        let name = is.metadata.name.clone().unwrap_or_default();
        let repository = is
            .status
            .as_ref()
            .map(|s| s.docker_image_repository.clone())
            .unwrap_or_default();
        let image = if repository.is_empty() {
            is.history(tag)
                .first()
                .map(|e| e.docker_image_reference.clone())
                .unwrap_or_else(|| format!(":{tag}"))
        } else {
            format!("{repository}:{tag}")
        };
        Workbench {
            image,
            last_image_selection: Some(format!("{name}:{tag}")),
            last_commit: Some(
                is.spec_tag(tag)
                    .and_then(|t| ann(t, key::BUILD_COMMIT))
                    .unwrap_or_default()
                    .to_string(),
            ),
        }
    }

    /// The same workbench made without the commit annotation (the Jupyter tile's backend path
    /// never writes it; kubectl and GitOps Notebooks seldom do).
    pub fn without_commit(self) -> Workbench {
        Workbench {
            last_commit: None,
            ..self
        }
    }
}

/// The badge of a workbench (§1.4, `useNotebookImageData.ts`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Badge {
    /// Green "Latest": its tag is recommended.
    Latest,
    /// Yellow "Deprecated", with "Update to the latest version".
    Deprecated,
    /// Red "Notebook image deleted": the stream no longer knows its image.
    Deleted,
    /// No badge.
    Current,
}

impl Badge {
    /// As the dashboard labels it.
    pub fn as_str(self) -> &'static str {
        match self {
            Badge::Latest => "Latest",
            Badge::Deprecated => "Deprecated",
            Badge::Deleted => "Deleted",
            Badge::Current => "-",
        }
    }
}

/// The badge `wb` shows, from the stream as it is now (the stream alone: see
/// [`workbench_status_among`]).
pub fn workbench_status(is: &ImageStream, wb: &Workbench) -> Badge {
    workbench_status_among(std::slice::from_ref(is), wb)
}

/// The stream and tag the dashboard finds for `wb` among `streams` (the project's streams, then
/// the dashboard namespace's), as `getNotebookImageData` does, each path tried while the ones
/// before find nothing (§1.4): (a) the image's last path segment `<stream>:<tag>` names a
/// stream, which has that tag; (b) the stream `last-image-selection` names has a tag whose
/// `from.name` is the image; (c) any stream whose status tag named as selected has the image in
/// its history, whatever the stream's name. The workbench's row and its update dialog describe
/// this tag (its build commit, its software), whatever build the workbench runs.
pub fn matched<'s>(
    streams: &'s [ImageStream],
    wb: &Workbench,
) -> Option<(&'s ImageStream, &'s TagReference)> {
    let segment = wb.image.rsplit('/').next().unwrap_or_default();
    let mut parts = segment.split(':');
    let (image_name, version) = (parts.next().unwrap_or_default(), parts.next());
    let version = version?;
    let mut selection = wb.last_image_selection.as_deref().map(|s| s.split(':'));
    let selected_name = selection.as_mut().and_then(|s| s.next());
    let selected_tag = selection.as_mut().and_then(|s| s.next());
    let named = |is: &&ImageStream| is.metadata.name.as_deref() == Some(image_name);
    // Without the tag, a shipped stream is "deleted" and a custom one has no version: either
    // way the next path is tried.
    let by_path = streams
        .iter()
        .find(named)
        .and_then(|is| Some((is, is.spec_tag(version)?)));
    let from_is_image = |t: &&TagReference| {
        t.from.as_ref().and_then(|f| f.name.as_deref()) == Some(wb.image.as_str())
    };
    let by_from = || {
        let is = streams.iter().find(|is| {
            is.metadata.name.as_deref() == selected_name
                && is.spec.tags.iter().any(|t| from_is_image(&t))
        })?;
        Some((is, is.spec.tags.iter().find(from_is_image)?))
    };
    let by_history = || {
        let tag = selected_tag?;
        let is = streams.iter().find(|is| {
            is.history(tag)
                .iter()
                .any(|e| e.docker_image_reference == wb.image)
        })?;
        Some((is, is.spec_tag(tag)?))
    };
    by_path.or_else(by_from).or_else(by_history)
}

/// The badge `wb` shows among `streams`: Deleted when [`matched`] finds nothing; then an
/// outdated tag, or (not for custom images) a commit annotation that no spec tag of the stream
/// carries (a missing annotation is carried by every tag without a build commit) is Deprecated;
/// a recommended tag is Latest.
pub fn workbench_status_among(streams: &[ImageStream], wb: &Workbench) -> Badge {
    let Some((is, tag)) = matched(streams, wb) else {
        return Badge::Deleted;
    };
    let commit_kept = is
        .spec
        .tags
        .iter()
        .any(|t| ann(t, key::BUILD_COMMIT) == wb.last_commit.as_deref());
    if ann(tag, key::TAG_OUTDATED) == Some("true") || (!is_byon(is) && !commit_kept) {
        return Badge::Deprecated;
    }
    if ann(tag, key::RECOMMENDED) == Some("true") {
        return Badge::Latest;
    }
    Badge::Current
}

#[cfg(test)]
mod tests;
