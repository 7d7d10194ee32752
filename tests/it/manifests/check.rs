//! The check of a set of manifests against each other and the code: [`check`] walks the documents
//! by kind and hands each to the module that knows it ([`super::tekton`], [`super::triggers`],
//! [`super::network`],
//! [`super::knative`], [`super::containers`]). Lookups resolve names the way the cluster would:
//! a document's namespace is its own, or its kustomization's.

use std::collections::{BTreeMap, BTreeSet};

use super::code::Code;
use super::model::{Doc, Manifests, Report};

/// Checks `m` against `code`.
pub fn check(m: &Manifests, code: &Code) -> Report {
    let mut c = Checker {
        docs: &m.docs,
        code,
        r: Report::default(),
        kustomize_ns: kustomize_namespaces(&m.docs),
        used_bindings: BTreeSet::new(),
        custom_checked: BTreeSet::new(),
    };
    for (file, message) in &m.unparsable {
        c.r.file_error(file, message.clone());
    }
    c.run();
    c.r
}

/// The state of one check.
pub struct Checker<'a> {
    pub docs: &'a [Doc],
    pub code: &'a Code,
    pub r: Report,
    /// The namespace a directory's kustomization sets.
    kustomize_ns: BTreeMap<String, String>,
    /// TriggerBindings some EventListener uses.
    pub used_bindings: BTreeSet<String>,
    /// Custom-task references already checked: (file, document, path).
    pub custom_checked: BTreeSet<(String, usize, String)>,
}

impl<'a> Checker<'a> {
    fn run(&mut self) {
        for d in self.of_kind("Pipeline") {
            self.pipeline(d, d.spec(), "spec");
        }
        for d in self.of_kind("Task") {
            self.task(d, d.spec(), "spec");
        }
        for d in self.of_kind("PipelineRun") {
            self.pipelinerun(d, &d.obj, "");
        }
        for d in self.of_kind("TriggerTemplate") {
            self.trigger_template(d);
        }
        for d in self.of_kind("ImagePromotion") {
            self.proof_of_validation(d);
        }
        for d in self.of_kind("TriggerBinding") {
            self.trigger_binding(d);
        }
        for d in self.of_kind("EventListener") {
            self.event_listener(d);
            self.event_listener_reachability(d);
        }
        for d in self.of_kind("Trigger") {
            if d.obj["apiVersion"]
                .as_str()
                .is_some_and(|v| v.starts_with("eventing.knative.dev/"))
            {
                self.knative_trigger(d);
            }
        }
        for d in self.of_kind("TriggerBinding") {
            if !self.used_bindings.contains(d.name()) {
                self.r.warn(
                    d,
                    "",
                    "no EventListener trigger uses this TriggerBinding, so its params were not \
                     checked against a TriggerTemplate or its $(body...) against an event schema",
                );
            }
        }
        for d in self
            .of_kind("ContainerSource")
            .chain(self.of_kind("SinkBinding"))
            .chain(self.of_kind("ImageStreamSource"))
        {
            self.knative_source(d);
        }
        for d in self.of_kind("Broker") {
            let dls = &d.spec()["delivery"]["deadLetterSink"];
            self.destination(d, dls, "spec.delivery.deadLetterSink");
        }
        self.event_types();
        self.monitoring();
        for d in self.docs {
            self.custom_refs_anywhere(d);
            self.imagegate_containers(d);
        }
    }

    /// The documents of `kind`.
    pub fn of_kind(&self, kind: &'a str) -> impl Iterator<Item = &'a Doc> + 'a {
        self.docs.iter().filter(move |d| d.kind() == kind)
    }

    /// The document of `kind` named `name` (in `namespace`, when given and the document has one).
    pub fn find(&self, kind: &str, name: &str, namespace: Option<&str>) -> Option<&'a Doc> {
        self.docs.iter().find(|d| {
            d.kind() == kind
                && d.name() == name
                && namespace.is_none_or(|ns| self.ns(d).is_none_or(|own| own == ns))
        })
    }

    /// A document's namespace: its own, or its kustomization's.
    pub fn ns<'s>(&'s self, d: &'s Doc) -> Option<&'s str> {
        d.namespace()
            .or_else(|| self.kustomize_ns.get(d.directory()).map(String::as_str))
    }

    /// The candidate tags the ImagePromotions name (the code's default where they name none).
    pub fn candidate_tags(&self) -> BTreeSet<String> {
        let default = self.code.default_candidate_tag.to_string();
        let mut tags: BTreeSet<String> = self
            .of_kind(self.code.custom_task.1)
            .map(|d| {
                d.spec()["candidateTag"]
                    .as_str()
                    .map(str::to_string)
                    .unwrap_or_else(|| default.clone())
            })
            .collect();
        if tags.is_empty() {
            tags.insert(default);
        }
        tags
    }
}

fn kustomize_namespaces(docs: &[Doc]) -> BTreeMap<String, String> {
    docs.iter()
        .filter(|d| d.kind() == "Kustomization" && d.file.ends_with("kustomization.yaml"))
        .filter_map(|d| {
            d.obj["namespace"]
                .as_str()
                .map(|ns| (d.directory().to_string(), ns.to_string()))
        })
        .collect()
}

/// A sorted list, as messages show one.
pub fn list<I, S>(items: I) -> String
where
    I: IntoIterator<Item = S>,
    S: AsRef<str>,
{
    let mut v: Vec<String> = items
        .into_iter()
        .map(|s| format!("'{}'", s.as_ref()))
        .collect();
    v.sort();
    v.dedup();
    format!("[{}]", v.join(", "))
}
