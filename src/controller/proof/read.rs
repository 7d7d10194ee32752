//! Reads the [`Evidence`] of a run: the PipelineRun that controls it (by its owner reference,
//! whose uid must still match; a label proves nothing), then each TaskRun the PipelineRun lists
//! for a task of any proof asked for. Only `get`s, in the run's namespace; a 404 is
//! evidence (something is missing), any other failure an API error to retry. The Chains keys
//! a proof names are read as a signature policy's are ([`crate::controller::signature`]).

use kube::ResourceExt;
use kube::api::Api;

use crate::api::{CustomRun, PipelineRun, TaskRun, status_code};
use crate::controller::error::Error;

use super::{Evidence, Proof};

/// The evidence of `run` for `proofs`; the Chains keys a proof names by ConfigMap are read in
/// `keys_namespace` (the controller's own).
pub(crate) async fn read(
    client: &kube::Client,
    run: &CustomRun,
    proofs: &[Proof],
    keys_namespace: &str,
) -> Result<Evidence, Error> {
    let Some((name, uid)) = run.pipeline_run() else {
        return Ok(Evidence::NoPipelineRun);
    };
    let namespace = run.namespace().unwrap_or_default();
    let pipeline_runs: Api<PipelineRun> = Api::namespaced(client.clone(), &namespace);
    let pipeline_run = match pipeline_runs.get_opt(&name).await {
        Ok(Some(pr)) => pr,
        Ok(None) => return Ok(Evidence::PipelineRunGone { name }),
        Err(e) if status_code(&e) == Some(404) => return Ok(Evidence::PipelineRunGone { name }),
        Err(source) => {
            return Err(Error::ReadEvidence {
                what: format!("PipelineRun {name}"),
                source,
            });
        }
    };
    if pipeline_run.metadata.uid.as_deref() != Some(uid.as_str()) {
        return Ok(Evidence::PipelineRunGone { name });
    }
    let task_runs_api: Api<TaskRun> = Api::namespaced(client.clone(), &namespace);
    let mut task_runs = Vec::new();
    let mut tasks: Vec<&String> = proofs.iter().flat_map(|p| &p.tasks).collect();
    tasks.sort();
    tasks.dedup();
    for task in tasks {
        for child in pipeline_run.task_runs_of(task) {
            let read = match task_runs_api.get_opt(child).await {
                Ok(found) => found,
                Err(e) if status_code(&e) == Some(404) => None,
                Err(source) => {
                    return Err(Error::ReadEvidence {
                        what: format!("TaskRun {child}"),
                        source,
                    });
                }
            };
            task_runs.push((child.to_string(), read));
        }
    }
    let mut chains_keys = Vec::new();
    for proof in proofs {
        let mut keys = Vec::new();
        for key in &proof.chains {
            let pem = crate::controller::signature::pem_of(client, keys_namespace, &key.source);
            keys.push((key.name.clone(), pem.await?));
        }
        chains_keys.push(keys);
    }
    Ok(Evidence::Found {
        pipeline_run: Box::new(pipeline_run),
        task_runs,
        chains_keys,
    })
}
