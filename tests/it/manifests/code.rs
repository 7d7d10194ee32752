//! What the code defines that the manifests must agree with, asked of the code itself: the events
//! the source builds (their types, attributes and `dataschema`) and the headers it puts on the
//! wire in binary mode, the JSON Schemas in `schemas/`, the custom task the controller runs and
//! the results a finished run reports, the generated ImagePromotion CRD, the clap command, and the
//! metrics both programs export.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use clap::CommandFactory;
use cloudevents::Event;
use cloudevents::event::AttributesReader;
use imagegate::api::{CustomRun, ImageStream};
use imagegate::controller::{crd, params, status};
use imagegate::source::Mode;
use imagegate::source::apiserver::{self, Shape, WatchAction};
use imagegate::source::change::{ChangeKind, TagChange};
use imagegate::source::deliver::{ContentMode, Encoded};
use imagegate::source::event::{self, EventSettings, KINDS};
use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};

/// An event type the source publishes with a schema (mode `imagestreamtag`).
#[derive(Clone, Debug)]
pub struct Published {
    /// The file in `schemas/`.
    pub schema_file: String,
    /// The `dataschema` the source sends with the default `--dataschema-base`.
    pub dataschema: String,
}

/// The code's side of every check.
pub struct Code {
    /// Every `type` the source sends, in any mode.
    pub event_types: BTreeSet<String>,
    /// The types of mode `imagestreamtag`, each with its schema.
    pub published: BTreeMap<String, Published>,
    /// The attributes sent as `ce-` headers in binary mode, in mode `imagestreamtag` (without
    /// the prefix, lowercase).
    pub binary_headers: BTreeSet<String>,
    /// Every attribute and extension name of any event, in any mode.
    pub attributes: BTreeSet<String>,
    /// `schemas/*.json`, by file name.
    pub schemas: BTreeMap<String, Value>,
    /// The custom task the controller runs: (apiVersion, kind).
    pub custom_task: (&'static str, &'static str),
    /// The candidate tag when neither a param nor the ImagePromotion names one.
    pub default_candidate_tag: &'static str,
    /// The results a finished run reports.
    pub results: BTreeSet<String>,
    /// The ImagePromotion CRD, as `imagegate crds` prints it.
    pub crd: Value,
    /// `imagegate`'s command line, built (global flags propagated to the subcommands).
    pub cli: clap::Command,
    /// The series both programs export, with their label names.
    pub metrics: super::exported::Series,
}

impl Code {
    /// Asks the code.
    pub fn ask() -> Code {
        let mut cli = imagegate::cli::Cli::command();
        cli.build();
        let base = default_of(&cli, "source", "dataschema_base");
        let settings = EventSettings::new(base.clone())
            .unwrap_or_else(|e| panic!("the default --dataschema-base {base:?}: {e}"));
        let now = chrono::DateTime::parse_from_rfc3339("2026-12-01T10:00:00Z")
            .unwrap()
            .to_utc();

        let mut code = Code {
            event_types: BTreeSet::new(),
            published: BTreeMap::new(),
            binary_headers: BTreeSet::new(),
            attributes: BTreeSet::new(),
            schemas: schemas(&Path::new(super::ROOT).join("schemas")),
            custom_task: (params::API_VERSION, params::KIND),
            default_candidate_tag: params::DEFAULT_CANDIDATE_TAG,
            results: finished_results(),
            crd: serde_norway::from_str(&crd::crd_yaml()).expect("imagegate crds prints YAML"),
            cli,
            metrics: super::exported::series(),
        };
        for kind in KINDS {
            let e = event::tag_event(&change(kind), &settings, now);
            code.published.insert(
                e.ty().to_string(),
                Published {
                    schema_file: event::schema_file(kind).to_string(),
                    dataschema: e.dataschema().map(ToString::to_string).unwrap_or_default(),
                },
            );
            let wire = Encoded::new(e.clone(), ContentMode::Binary).expect("an event encodes");
            code.binary_headers.extend(
                wire.headers()
                    .keys()
                    .filter_map(|h| h.as_str().strip_prefix("ce-").map(str::to_string)),
            );
            code.learn(&e);
        }
        // The controller's verdicts, with the same default schema base.
        let base_url: url::Url = base
            .parse()
            .expect("the default --dataschema-base is a URL");
        for kind in imagegate::controller::verdict::event::Kind::ALL {
            let v = imagegate::controller::verdict::event::Verdict {
                kind,
                namespace: "notebooks".into(),
                imagestream: "jupyter".into(),
                served_tag: "latest".into(),
                digest: "sha256:bb".into(),
                served_digest: "sha256:bb".into(),
                previous_digest: "sha256:aa".into(),
                reason: "Promoted".into(),
                message: "m".into(),
                customrun: Some("pr-promote".into()),
                key: "uid".into(),
                time: now,
            };
            let e = imagegate::controller::verdict::event::event(&v, Some(&base_url));
            code.published.insert(
                e.ty().to_string(),
                Published {
                    schema_file: "verdict.json".into(),
                    dataschema: e.dataschema().map(ToString::to_string).unwrap_or_default(),
                },
            );
            code.learn(&e);
        }
        let stream = stream();
        // Every mode of the CLI: those with an ApiServerSource shape send these.
        for shape in [Mode::Resource, Mode::Reference]
            .into_iter()
            .filter_map(Shape::of)
        {
            for action in [WatchAction::Add, WatchAction::Update, WatchAction::Delete] {
                code.learn(&apiserver::event(
                    shape,
                    action,
                    &stream,
                    "https://api.example:6443",
                    now,
                ));
            }
        }
        code
    }

    fn learn(&mut self, e: &Event) {
        self.event_types.insert(e.ty().to_string());
        self.attributes
            .extend(e.iter().map(|(name, _)| name.to_string()));
    }

    /// The `imagegate` subcommand `name`.
    pub fn subcommand(&self, name: &str) -> Option<&clap::Command> {
        self.cli.find_subcommand(name)
    }

    /// The versions of the custom task's kind the generated CRD serves.
    pub fn served_versions(&self) -> Vec<String> {
        super::model::items(&self.crd["spec"]["versions"])
            .iter()
            .filter(|v| v["served"] == true)
            .filter_map(|v| v["name"].as_str().map(str::to_string))
            .collect()
    }
}

/// The default value of a subcommand's argument, as clap has it.
fn default_of(cli: &clap::Command, sub: &str, id: &str) -> String {
    let arg = cli
        .find_subcommand(sub)
        .and_then(|s| s.get_arguments().find(|a| a.get_id() == id))
        .unwrap_or_else(|| panic!("`imagegate {sub}` has no argument {id}"));
    arg.get_default_values()
        .first()
        .map(|v| v.to_string_lossy().into_owned())
        .unwrap_or_else(|| panic!("`imagegate {sub}` --{id} has no default"))
}

/// A change of `kind` with every optional field set, so its event carries every attribute.
fn change(kind: ChangeKind) -> TagChange {
    let digest = format!("sha256:{}", "a".repeat(64));
    TagChange {
        kind,
        namespace: "ns".into(),
        image_stream: "nb".into(),
        image_stream_uid: "uid-1".into(),
        tag: "candidate".into(),
        digest: Some(digest.clone()),
        previous_digest: Some(format!("sha256:{}", "b".repeat(64))),
        docker_image_reference: Some(format!("quay.io/org/nb@{digest}")),
        generation: 2,
        time: Some("2026-12-01T09:59:00Z".into()),
        reason: Some("NotFound".into()),
        message: Some("not found".into()),
    }
}

fn stream() -> ImageStream {
    serde_json::from_value(json!({
        "apiVersion": "image.openshift.io/v1", "kind": "ImageStream",
        "metadata": {"name": "nb", "namespace": "ns", "uid": "uid-1", "resourceVersion": "7"},
        "spec": {}
    }))
    .expect("an ImageStream")
}

/// The result names of a finished run, as the controller writes them.
fn finished_results() -> BTreeSet<String> {
    let now: Timestamp = "2026-12-01T10:00:00Z".parse().unwrap();
    let outcome = status::Outcome::failed(status::reason::INVALID_PARAMS, "a probe");
    status::finished(&CustomRun::default(), &outcome, now)
        .results
        .into_iter()
        .map(|r| r.name)
        .collect()
}

fn schemas(dir: &Path) -> BTreeMap<String, Value> {
    let mut out = BTreeMap::new();
    for entry in std::fs::read_dir(dir).expect("schemas/") {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "json") {
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            let text = std::fs::read_to_string(&path).unwrap();
            let schema = serde_json::from_str(&text)
                .unwrap_or_else(|e| panic!("schemas/{name} is not JSON: {e}"));
            out.insert(name, schema);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_code_answers_every_question_the_checks_ask() {
        let code = Code::ask();
        // The source's three, the controller's six verdicts.
        assert_eq!(code.published.len(), KINDS.len() + 6);
        for (ty, p) in &code.published {
            assert!(code.event_types.contains(ty));
            assert!(p.dataschema.ends_with(&p.schema_file), "{ty}: {p:?}");
        }
        // Types of every mode: three of the source's, six of ApiServerSource's, six verdicts.
        assert_eq!(code.event_types.len(), 15, "{:?}", code.event_types);
        for h in [
            "type",
            "id",
            "source",
            "specversion",
            "imagetag",
            "imagedigest",
        ] {
            assert!(code.binary_headers.contains(h), "{:?}", code.binary_headers);
        }
        assert!(!code.binary_headers.contains("datacontenttype"));
        assert!(code.attributes.contains("kind") && code.attributes.contains("type"));
        assert!(
            code.results.contains("promoted-digest"),
            "{:?}",
            code.results
        );
        assert_eq!(code.served_versions(), vec!["v1alpha1"]);
        assert!(code.subcommand("source").is_some() && code.subcommand("controller").is_some());
    }
}
