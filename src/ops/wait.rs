//! `promote`, `rollback`, `reject`: read what the run needs (the stream, the ImagePromotion),
//! create the CustomRun ([`super::runs`]), then follow it until the controller's verdict, one
//! progress line on stderr per change of its `Succeeded` condition. The verdict and the run's
//! results go to stdout; a refusal's reason and message to stderr, with exit status 3.

use std::time::{Duration, Instant};

use anyhow::{Context, anyhow, bail};
use kube::api::{Api, PostParams};

use crate::api::{CustomRun, ImageStream, status_code};
use crate::cli::ops::{PromoteArgs, RejectArgs, RollbackArgs, RunArgs};
use crate::controller::crd::{ImagePromotion, ImagePromotionSpec};
use crate::controller::params::{Action, DEFAULT_CANDIDATE_TAG};
use crate::controller::status::{reason, results};

use super::Verdict;
use super::runs::{RunRequest, choose_promotion, custom_run};

/// How often the run is read while waiting.
const POLL: Duration = Duration::from_millis(250);
/// How long past `--timeout` the command waits for the controller to report the timeout.
const GRACE: Duration = Duration::from_secs(5);

/// What every run-creating command reads first.
struct Target {
    client: kube::Client,
    namespace: String,
    imagestream: String,
    stream: ImageStream,
    promotion: Option<String>,
    spec: Option<ImagePromotionSpec>,
}

impl Target {
    async fn read(args: &RunArgs) -> anyhow::Result<Target> {
        let (client, default_ns) = super::connect::client(&args.kube).await?;
        let (namespace, imagestream) = super::connect::split_target(
            &args.imagestream,
            args.kube.namespace.as_deref(),
            &default_ns,
        )?;
        let stream = Api::<ImageStream>::namespaced(client.clone(), &namespace)
            .get_opt(&imagestream)
            .await
            .with_context(|| format!("cannot read ImageStream {namespace}/{imagestream}"))?
            .ok_or_else(|| {
                anyhow!("ImageStream {imagestream:?} does not exist in namespace {namespace:?}")
            })?;
        let promotions = match Api::<ImagePromotion>::namespaced(client.clone(), &namespace)
            .list(&Default::default())
            .await
        {
            Ok(l) => l.items,
            Err(e) if status_code(&e) == Some(404) => Vec::new(),
            Err(e) => return Err(e).context(format!("cannot list ImagePromotions in {namespace}")),
        };
        let promotion = choose_promotion(args.promotion.as_deref(), &promotions, &imagestream)
            .map_err(|e| anyhow!(e))?;
        let spec = promotion.as_ref().and_then(|n| {
            promotions
                .iter()
                .find(|p| p.metadata.name.as_deref() == Some(n))
                .map(|p| p.spec.clone())
        });
        Ok(Target {
            client,
            namespace,
            imagestream,
            stream,
            promotion,
            spec,
        })
    }

    /// The digest the candidate tag points at now.
    fn candidate_digest(&self, args: &RunArgs) -> anyhow::Result<String> {
        let tag = args
            .candidate_tag
            .clone()
            .or_else(|| self.spec.as_ref().and_then(|s| s.candidate_tag.clone()))
            .unwrap_or_else(|| DEFAULT_CANDIDATE_TAG.into());
        self.stream
            .current_digest(&tag)
            .map(str::to_string)
            .ok_or_else(|| {
                anyhow!(
                    "{}/{}:{tag} points at no image yet; give --digest, or import it first (imagegate import)",
                    self.namespace,
                    self.imagestream
                )
            })
    }

    fn request(&self, args: &RunArgs, action: Action, digest: Option<String>) -> RunRequest {
        RunRequest {
            namespace: self.namespace.clone(),
            imagestream: self.imagestream.clone(),
            action,
            digest,
            validation_status: None,
            allow_rolled_back: false,
            candidate_tag: args.candidate_tag.clone(),
            served_tag: args.served_tag.clone(),
            promotion: self.promotion.clone(),
            service_account: args.service_account.clone(),
            timeout: args.timeout,
        }
    }
}

/// `promote`.
pub(crate) async fn promote(args: PromoteArgs) -> anyhow::Result<Verdict> {
    let t = Target::read(&args.run).await?;
    let digest = match args.digest {
        Some(d) => d,
        None => t.candidate_digest(&args.run)?,
    };
    let validation = t
        .spec
        .as_ref()
        .map(|s| s.validation.clone())
        .unwrap_or_default();
    if let Some(pipeline) = &validation.pipeline {
        eprintln!(
            "note: ImagePromotion {:?} asks for proof that Pipeline {pipeline:?} validated the digest; \
             a promotion by hand carries none, so the controller will refuse it (Unverified)",
            t.promotion.clone().unwrap_or_default()
        );
    } else if args.validation_status.is_none() && validation.status_required() {
        eprintln!(
            "note: no --validation-status given; the controller promotes only with validation \
             evidence and will refuse (ValidationRequired)"
        );
    }
    let mut req = t.request(&args.run, Action::Promote, Some(digest));
    req.validation_status = args.validation_status;
    req.allow_rolled_back = args.allow_rolled_back;
    submit(&t, req, &args.run).await
}

/// `rollback`.
pub(crate) async fn rollback(args: RollbackArgs) -> anyhow::Result<Verdict> {
    let t = Target::read(&args.run).await?;
    let req = t.request(&args.run, Action::Rollback, args.digest);
    submit(&t, req, &args.run).await
}

/// `reject`.
pub(crate) async fn reject(args: RejectArgs) -> anyhow::Result<Verdict> {
    let t = Target::read(&args.run).await?;
    let digest = match args.digest {
        Some(d) => d,
        None => t.candidate_digest(&args.run)?,
    };
    let mut req = t.request(&args.run, Action::Reject, Some(digest));
    req.validation_status = Some(args.validation_status);
    submit(&t, req, &args.run).await
}

async fn submit(t: &Target, req: RunRequest, args: &RunArgs) -> anyhow::Result<Verdict> {
    let api = Api::<CustomRun>::namespaced(t.client.clone(), &t.namespace);
    let created = api
        .create(&PostParams::default(), &custom_run(&req))
        .await
        .with_context(|| format!("cannot create the CustomRun in namespace {}", t.namespace))?;
    let name = created.metadata.name.clone().unwrap_or_default();
    if args.no_wait {
        println!("customrun/{name} created");
        return Ok(Verdict::Done);
    }
    eprintln!(
        "customrun/{name} created: {} {} in {} as service account {:?}",
        req.action.as_str(),
        t.imagestream,
        t.namespace,
        req.service_account
    );
    let run = follow(&api, &name, &t.namespace, args.timeout + GRACE).await?;
    Ok(report(&run, req.action))
}

/// Reads the run until it is done, printing each new condition.
async fn follow(
    api: &Api<CustomRun>,
    name: &str,
    namespace: &str,
    patience: Duration,
) -> anyhow::Result<CustomRun> {
    let deadline = Instant::now() + patience;
    let mut seen: Option<(String, Option<String>, Option<String>)> = None;
    loop {
        let run = api
            .get_opt(name)
            .await
            .with_context(|| format!("cannot read customrun/{name}"))?
            .ok_or_else(|| anyhow!("customrun/{name} was deleted while waiting for it"))?;
        if let Some(c) = run.succeeded_condition() {
            let now = (c.status.clone(), c.reason.clone(), c.message.clone());
            if seen.as_ref() != Some(&now) && !run.is_done() {
                eprintln!(
                    "customrun/{name}: {}: {}",
                    c.reason.as_deref().unwrap_or(&c.status),
                    c.message.as_deref().unwrap_or_default()
                );
            }
            seen = Some(now);
        }
        if run.is_done() {
            return Ok(run);
        }
        if Instant::now() >= deadline {
            let why = if seen.is_none() {
                "no controller has reported on it: is `imagegate controller` running and watching this namespace?"
            } else {
                "it is still running"
            };
            bail!(
                "customrun/{name} did not finish within {}s; {why} (kubectl get customrun {name} -n {})",
                patience.as_secs(),
                namespace
            );
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Prints the verdict: results on stdout when it succeeded (or `reject` rejected), the reason,
/// message and a hint on stderr when the controller refused.
fn report(run: &CustomRun, action: Action) -> Verdict {
    let name = run.metadata.name.as_deref().unwrap_or_default();
    let c = run.succeeded_condition().cloned().unwrap_or_default();
    let why = c.reason.clone().unwrap_or_default();
    let message = c.message.clone().unwrap_or_default();
    let expected = c.is_true() || (action == Action::Reject && why == reason::REJECTED);
    if !expected {
        eprintln!("error: customrun/{name} ended {why}: {message}");
        if let Some(hint) = hint(&why) {
            eprintln!("hint: {hint}");
        }
        return Verdict::Refused;
    }
    println!("customrun/{name}: {why}: {message}");
    let results = run
        .status
        .as_ref()
        .map(|s| s.results.clone())
        .unwrap_or_default();
    for key in [
        results::PROMOTED_DIGEST,
        results::PREVIOUS_DIGEST,
        results::PHASE,
    ] {
        if let Some(r) = results
            .iter()
            .find(|r| r.name == key && !r.value.is_empty())
        {
            println!("  {key}: {}", r.value);
        }
    }
    Verdict::Done
}

/// What to do about a refusal, for the reasons an operator can act on.
pub(crate) fn hint(why: &str) -> Option<&'static str> {
    Some(match why {
        reason::VALIDATION_REQUIRED => {
            "promote needs validation evidence: run the validation pipeline, or, if you validated \
             this digest yourself, say so with --validation-status Succeeded"
        }
        reason::UNVERIFIED => {
            "this ImagePromotion accepts only a promotion proven by its validation Pipeline; \
             start that Pipeline instead (a promotion by hand cannot carry the proof)"
        }
        reason::FORBIDDEN => {
            "bind the ClusterRole imagegate-promoter to the run's service account in this \
             namespace, or pick another with --service-account"
        }
        reason::DIGEST_ROLLED_BACK => {
            "this digest was rolled back; promote it again on purpose with --allow-rolled-back"
        }
        reason::CANDIDATE_MOVED => {
            "the candidate moved on; run `imagegate status` and promote the current candidate"
        }
        _ => return None,
    })
}
