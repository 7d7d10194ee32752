//! Proof of validation: when an ImagePromotion names a Pipeline and its tasks
//! (`spec.validation.pipeline`, `spec.validation.tasks`), a `promote` run must be a child of a
//! running PipelineRun of that Pipeline in which each of those tasks succeeded with an `image`
//! param naming exactly the digest promoted. The PipelineRun and its TaskRuns are what the
//! pipeline controller wrote, so a hand-made CustomRun, or a PipelineRun that validated another
//! image, cannot pass for a validation.
//!
//! Pure: [`Proof`] is the requirement (parsed by [`super::params`], one per ImagePromotion that
//! asks, [`super::policy`]), [`Evidence`] what was read ([`read`] reads it), [`standing`] says
//! whether the run is the PipelineRun's own child and [`verify`] what is missing of one proof.
//! The run must be controlled by the PipelineRun (an owner reference with its uid: the
//! `tekton.dev/pipelineRun` label alone proves nothing), the PipelineRun must not have finished
//! (an old run's proof is not replayed) and it must list the run in `status.childReferences`
//! (a CustomRun someone made with an owner reference the PipelineRun never created is not its
//! child; until Tekton lists a new child the run waits). A TaskRun counts only as a child the
//! PipelineRun lists and controls (its owner reference's uid), so a stale TaskRun of the same
//! name cannot stand in. Every TaskRun of a required task must have succeeded with the digest (a
//! `matrix` over other images fails).

pub mod chains;
pub mod pin;
pub mod read;

use crate::api::{PipelineRun, TaskRun, digest_from_reference};

/// The param of a validation TaskRun that names the image it validated.
pub const IMAGE_PARAM: &str = "image";

/// What counts as proof (`spec.validation.pipeline` and `tasks`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Proof {
    /// The Pipeline the owning PipelineRun must run, by name.
    pub pipeline: String,
    /// The pipeline tasks that must have succeeded with the digest.
    pub tasks: Vec<String>,
    /// Who asks for it, as the start of a sentence (`ImagePromotion "gov" governs nb and asks`).
    pub asked_by: String,
    /// The content each task must have run ([`pin`]), by task; a task without one is proven by
    /// name.
    pub pins: std::collections::BTreeMap<String, String>,
    /// The keys Tekton Chains signs with, when each TaskRun of `tasks` must carry its signed
    /// record ([`chains`]); empty: not asked.
    pub chains: Vec<crate::controller::keys::TrustedKey>,
}

impl Proof {
    /// What it asks for, for messages: `<who> asks for proof from Pipeline "<name>"`.
    pub(crate) fn asks(&self) -> String {
        format!(
            "{} for proof from Pipeline {:?}",
            self.asked_by, self.pipeline
        )
    }
}

/// Whether the run is the own, running child of the PipelineRun the evidence is about.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Standing {
    /// It is: the proofs can be verified.
    Child,
    /// The PipelineRun runs and controls it but has not listed it yet: a moment, not a failure.
    NotListedYet(String),
    /// It is not, for the reason given: nothing it shows is proof.
    Outside(String),
}

/// Whether `evidence` is about the running PipelineRun that created the CustomRun `run`.
pub(crate) fn standing(evidence: &Evidence, run: &str) -> Standing {
    let pr = match evidence {
        Evidence::NoPipelineRun => {
            return Standing::Outside(
                "the CustomRun belongs to no PipelineRun (it has no controlling PipelineRun owner \
                 reference with a uid; a tekton.dev/pipelineRun label alone proves nothing)"
                    .into(),
            );
        }
        Evidence::PipelineRunGone { name } => {
            return Standing::Outside(format!(
                "its PipelineRun {name:?} does not exist (deleted, or replaced by another of that \
                 name)"
            ));
        }
        Evidence::Found { pipeline_run, .. } => pipeline_run,
    };
    let name = pr.metadata.name.clone().unwrap_or_default();
    if pr.is_done() {
        return Standing::Outside(format!(
            "PipelineRun {name:?} has finished; only the running PipelineRun that created a \
             CustomRun proves it"
        ));
    }
    if !pr.lists_custom_run(run) {
        return Standing::NotListedYet(format!(
            "PipelineRun {name:?} does not list CustomRun {run:?} among its children yet (a \
             PipelineRun lists the children it creates at once; this one it did not create)"
        ));
    }
    Standing::Child
}

/// What the API server holds about the run's PipelineRun.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Evidence {
    /// The run belongs to no PipelineRun (no controlling owner reference with a uid).
    NoPipelineRun,
    /// The PipelineRun the run names does not exist (or is another one now: its uid differs).
    PipelineRunGone {
        /// Its name.
        name: String,
    },
    /// The PipelineRun, and the TaskRuns it lists for the required tasks (None: not found).
    Found {
        /// The owning PipelineRun.
        pipeline_run: Box<PipelineRun>,
        /// Each child TaskRun of a required task, by name, as read.
        task_runs: Vec<(String, Option<TaskRun>)>,
        /// The Chains keys of each proof, in the order of the proofs: by name, the PEM or why
        /// it could not be read (empty for a proof that asks for no Chains record).
        chains_keys: Vec<Keys>,
    },
}

/// Keys by name: each the PEM or why it could not be had.
pub(crate) type Keys = Vec<(String, Result<String, String>)>;

/// What is missing of a proof.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Missing {
    /// Everything missing, `; `-separated.
    pub why: String,
    /// Whether all of it is Chains' record not written yet: waited for, not refused.
    pub not_yet: bool,
}

/// Whether `evidence` proves that `proof` (the `index`th proof asked for) holds for `digest`:
/// Ok with what was shown, or what is missing.
pub(crate) fn verify(
    proof: &Proof,
    index: usize,
    evidence: &Evidence,
    digest: &str,
) -> Result<String, Missing> {
    verify_all(proof, index, evidence, digest).map_err(|lacks| Missing {
        not_yet: lacks.iter().all(|l| matches!(l, chains::Lack::NotYet(_))),
        why: (lacks.iter())
            .map(|l| match l {
                chains::Lack::NotYet(why) | chains::Lack::Refused(why) => why.as_str(),
            })
            .collect::<Vec<_>>()
            .join("; "),
    })
}

fn verify_all(
    proof: &Proof,
    index: usize,
    evidence: &Evidence,
    digest: &str,
) -> Result<String, Vec<chains::Lack>> {
    let refused = |why: String| vec![chains::Lack::Refused(why)];
    let (pr, task_runs, keys) = match evidence {
        Evidence::NoPipelineRun => {
            return Err(refused(format!(
                "the CustomRun belongs to no PipelineRun (it has no controlling PipelineRun owner \
                 reference with a uid), so nothing shows that Pipeline {:?} validated \
                 {digest}",
                proof.pipeline
            )));
        }
        Evidence::PipelineRunGone { name } => {
            return Err(refused(format!(
                "its PipelineRun {name:?} does not exist (deleted, or replaced by another of \
                 that name), so nothing shows that Pipeline {:?} validated {digest}",
                proof.pipeline
            )));
        }
        Evidence::Found {
            pipeline_run,
            task_runs,
            chains_keys,
        } => (pipeline_run, task_runs, chains_keys.get(index)),
    };
    let pr_name = pr.metadata.name.clone().unwrap_or_default();
    let mut missing = Vec::new();
    let mut signed_by = Vec::new();
    match pr.pipeline_name() {
        Some(p) if p == proof.pipeline => {}
        Some(p) => missing.push(chains::Lack::Refused(format!(
            "PipelineRun {pr_name:?} runs Pipeline {p:?}, not {:?}",
            proof.pipeline
        ))),
        None => missing.push(chains::Lack::Refused(format!(
            "PipelineRun {pr_name:?} runs an inline pipelineSpec or a Pipeline no name names \
             (only pipelineRef.name, or the cluster resolver in its namespace or the bundles \
             resolver by name, count), not Pipeline {:?}",
            proof.pipeline
        ))),
    }
    let uid = pr.metadata.uid.clone().unwrap_or_default();
    for task in &proof.tasks {
        let children = pr.task_runs_of(task);
        if children.is_empty() {
            missing.push(chains::Lack::Refused(format!(
                "task {task:?} has no TaskRun in PipelineRun {pr_name:?}"
            )));
        }
        for name in children {
            let read = task_runs.iter().find(|(n, _)| n == name).map(|(_, t)| t);
            let run = read.and_then(Option::as_ref);
            let which = format!("task {task:?} (TaskRun {name:?})");
            if let Err(why) = task_proves(task, name, run, &uid, digest) {
                missing.push(chains::Lack::Refused(why));
                continue;
            }
            let Some(run) = run else { continue };
            if let Some(want) = proof.pins.get(task)
                && let Err(why) = pinned(task, name, run, want)
            {
                missing.push(chains::Lack::Refused(why));
            }
            if proof.chains.is_empty() {
                continue;
            }
            let want = chains::Expected {
                pipeline_run_uid: &uid,
                task,
                digest,
            };
            match chains::verify(run, keys.map(Vec::as_slice).unwrap_or_default(), want) {
                Ok(key) => signed_by.push(format!("{which} by {key:?}")),
                Err(chains::Lack::NotYet(why)) => {
                    missing.push(chains::Lack::NotYet(format!("{which}: {why}")));
                }
                Err(chains::Lack::Refused(why)) => {
                    missing.push(chains::Lack::Refused(format!("{which}: {why}")));
                }
            }
        }
    }
    if !missing.is_empty() {
        return Err(missing);
    }
    let mut shown = format!(
        "PipelineRun {pr_name:?} of Pipeline {:?} validated {digest} in {}",
        proof.pipeline,
        proof.tasks.join(", ")
    );
    if !signed_by.is_empty() {
        shown += &format!(", signed by Tekton Chains: {}", signed_by.join(", "));
    }
    Ok(shown)
}

/// Whether the TaskRun ran the pinned content `want`.
fn pinned(task: &str, name: &str, run: &TaskRun, want: &str) -> Result<(), String> {
    let which = format!("task {task:?} (TaskRun {name:?})");
    match pin::of_task_run(run) {
        Ok(got) if got == want => Ok(()),
        Ok(got) => Err(format!(
            "{which} ran content {got}, not the pinned {want} (the Task, its command or its \
             params differ from what was pinned)"
        )),
        Err(why) => Err(format!("{which} cannot be held to its pin: {why}")),
    }
}

/// Whether one TaskRun of `task` proves the digest: it exists, the PipelineRun controls it, it
/// succeeded, and its `image` param names exactly `digest`.
fn task_proves(
    task: &str,
    name: &str,
    run: Option<&TaskRun>,
    pr_uid: &str,
    digest: &str,
) -> Result<(), String> {
    let which = format!("task {task:?} (TaskRun {name:?})");
    let Some(run) = run else {
        return Err(format!("{which} does not exist"));
    };
    if !run.is_controlled_by(pr_uid) {
        return Err(format!("{which} is not controlled by the PipelineRun"));
    }
    let env = run.pod_template_env();
    if !env.is_empty() {
        return Err(format!(
            "{which}: its pod template sets environment variables ({}), which override the \
             Task's own, so what ran is not what the Task (or its pin) says; set them in the \
             Task, or in Tekton's default-pod-template",
            env.join(", ")
        ));
    }
    match run.succeeded_condition() {
        Some(c) if c.is_true() => {}
        Some(c) => {
            return Err(format!(
                "{which} did not succeed ({}: {})",
                c.reason.as_deref().unwrap_or("no reason"),
                c.message.as_deref().unwrap_or("")
            ));
        }
        None => return Err(format!("{which} has not finished")),
    }
    match run.param_str(IMAGE_PARAM) {
        None => Err(format!("{which} has no {IMAGE_PARAM:?} param")),
        Some(image) if digest_from_reference(image) == Some(digest) => Ok(()),
        Some(image) => Err(format!("{which} validated {image:?}, not {digest}")),
    }
}

#[cfg(test)]
mod tests;
