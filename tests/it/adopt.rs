//! `imagegate adopt` end to end: the real binary against the emulator, on each kind of stream
//! (a plain single-tag stream, a dashboard-created custom image, an operator-shipped notebook
//! stream, each from `tests/fixtures/`), twice, with `--dry-run`, refused, and `--check` after a
//! wholesale edit that drops the candidate; the controller's drift metric and Event; and an
//! adopted stream through a promotion. Every request adopt makes is checked against the RBAC
//! docs/adopt.md documents.

use std::path::{Path, PathBuf};
use std::process::Command;

use imagegate::api::ImageStream;
use kube::api::{Api, PostParams};
use serde_json::{Value, json};

use crate::support::EmulatorServer;
use crate::support::rbac::{Policy, assert_allowed};

const A: &str = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
const B: &str = "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
const C: &str = "sha256:cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc";
/// The digest of the real ansible-runner fixture's one image.
const RUNNER: &str = "sha256:bd09ef403f2f90f2c6bd133d7533e939058903f69223c5f12557a49e3aed14bb";
/// The user adopt runs as, bound to the ClusterRole of docs/adopt.md.
const USER: &str = "adopter";

fn fixture(file: &str) -> String {
    std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures")
            .join(file),
    )
    .unwrap()
}

/// What one run of the binary said.
struct Ran {
    code: i32,
    stdout: String,
    stderr: String,
}

/// The emulator, and a kubeconfig for [`USER`].
struct Env {
    emu: EmulatorServer,
    kubeconfig: PathBuf,
    _dir: tempfile::TempDir,
}

impl Env {
    async fn new(namespaces: &[&str]) -> Env {
        let emu = EmulatorServer::start().await;
        for ns in namespaces {
            emu.seed_str(&format!(
                "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {ns}\n"
            ))
            .await;
        }
        let dir = tempfile::tempdir().unwrap();
        let kubeconfig = dir.path().join("kubeconfig");
        emu.write_kubeconfig(&kubeconfig, USER);
        Env {
            emu,
            kubeconfig,
            _dir: dir,
        }
    }

    fn adopt(&self, args: &[&str]) -> Ran {
        let out = Command::new(env!("CARGO_BIN_EXE_imagegate"))
            .arg("adopt")
            .args(args)
            .env("KUBECONFIG", &self.kubeconfig)
            .env_remove("RUST_LOG")
            .output()
            .expect("the binary runs");
        Ran {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    async fn stream(&self, ns: &str, name: &str) -> ImageStream {
        Api::<ImageStream>::namespaced(self.emu.client(), ns)
            .get(name)
            .await
            .unwrap()
    }

    /// The writes adopt made so far.
    async fn writes(&self) -> Vec<String> {
        self.emu
            .mutating_requests()
            .await
            .into_iter()
            .filter(|r| r.user == USER)
            .map(|r| format!("{} {}", r.verb, r.name).trim_end().to_string())
            .collect()
    }

    /// Every request adopt made is allowed by the ClusterRole docs/adopt.md documents.
    async fn assert_documented_rbac_allows(&self) {
        let mut policy = Policy::default();
        policy.add("docs/adopt.md", &documented_role());
        policy.add(
            "binding",
            &format!(
                "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata:\n  name: adopter\n\
                 roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: imagegate-adopter}}\n\
                 subjects: [{{apiGroup: rbac.authorization.k8s.io, kind: User, name: {USER}}}]\n"
            ),
        );
        assert_allowed(&policy, &self.emu.requests().await, USER, USER);
    }
}

/// The ClusterRole in docs/adopt.md (the first ```yaml block of its RBAC section).
fn documented_role() -> String {
    let doc = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/adopt.md"))
        .unwrap();
    let section = doc
        .split("## RBAC")
        .nth(1)
        .expect("docs/adopt.md has a section ## RBAC");
    let block = section
        .split("```yaml\n")
        .nth(1)
        .expect("with a yaml block");
    block.split("```").next().unwrap().to_string()
}

fn tag_names(is: &ImageStream) -> Vec<&str> {
    is.spec.tags.iter().map(|t| t.name.as_str()).collect()
}

fn from(is: &ImageStream, tag: &str) -> (String, String) {
    let f = is.spec_tag(tag).unwrap().from.clone().unwrap();
    (f.kind.unwrap_or_default(), f.name.unwrap_or_default())
}

fn scheduled(is: &ImageStream, tag: &str) -> bool {
    is.spec_tag(tag)
        .and_then(|t| t.import_policy.as_ref())
        .is_some_and(|p| p.scheduled)
}

fn tag_annotation(is: &ImageStream, tag: &str, key: &str) -> Option<String> {
    is.spec_tag(tag)?.annotations.as_ref()?.get(key).cloned()
}

/// The expected `--dry-run` output for the real ansible-runner stream.
const PLAIN_DRY_RUN: &str = include_str!("adopt/plain_dry_run.txt");

#[tokio::test]
async fn a_plain_single_tag_stream_is_adopted_in_place_once() {
    let env = Env::new(&["openshift"]).await;
    env.emu
        .seed_str(&fixture(
            "ci-note_ansible-runner_imagestream_import-failed.yaml",
        ))
        .await;

    let dry = env.adopt(&["openshift/ansible-runner", "--dry-run"]);
    assert_eq!(dry.code, 0, "{}", dry.stderr);
    assert_eq!(dry.stdout, PLAIN_DRY_RUN);
    assert_eq!(
        env.writes().await,
        Vec::<String>::new(),
        "a dry run writes nothing"
    );

    let first = env.adopt(&["openshift/ansible-runner"]);
    assert_eq!(first.code, 0, "{}", first.stderr);
    assert!(
        first.stdout.starts_with(&format!(
            "adopted openshift/ansible-runner: served tag \"latest\" pinned to {RUNNER}; candidate \
             tag \"candidate\" (hidden) imports docker.io/ansible/ansible-runner:latest on a schedule\n"
        )),
        "{}",
        first.stdout
    );
    assert_eq!(env.writes().await, ["update ansible-runner"], "one PUT");
    let is = env.stream("openshift", "ansible-runner").await;
    assert_eq!(tag_names(&is), ["candidate", "latest"]);
    assert_eq!(
        from(&is, "latest"),
        (
            "ImageStreamImage".into(),
            format!("ansible-runner@{RUNNER}")
        )
    );
    assert!(!scheduled(&is, "latest"));
    assert!(scheduled(&is, "candidate"));
    assert_eq!(
        from(&is, "candidate"),
        (
            "DockerImage".into(),
            "docker.io/ansible/ansible-runner:latest".into()
        )
    );
    assert_eq!(
        tag_annotation(&is, "candidate", "opendatahub.io/image-tag-outdated").as_deref(),
        Some("true")
    );
    assert_eq!(is.current_digest("latest"), Some(RUNNER), "still served");

    let second = env.adopt(&["openshift/ansible-runner"]);
    assert_eq!(second.code, 0, "{}", second.stderr);
    assert_eq!(
        second.stdout,
        "openshift/ansible-runner: already adopted (served tag \"latest\", candidate tag \
         \"candidate\"); nothing written\n"
    );
    assert_eq!(env.writes().await.len(), 1, "the second run writes nothing");
    env.assert_documented_rbac_allows().await;
}

/// The BYON import pipeline's stream, its placeholders filled, imported once.
fn custom_image() -> String {
    fixture("byon_import-pipeline_imagestream_created-then-patched.yaml")
        .replace("$(params.url)", "quay.io/org/custom-nb:latest")
        .replace("$(params.name)", "My notebook")
        .replace("$(params.desc)", "A custom notebook")
        .replace("$(params.creator)", "alice")
        .replace("$(context.pipelineRun.name)", "custom-my-notebook")
        .replace("$(context.pipelineRun.namespace)", "ds")
        .replace("$IMAGE_TAG", "latest")
        .replace("$PHASE", "Succeeded")
        .replace("$MESSAGES", "")
        .replace("$NOTEBOOK_SOFTWARE", "[]")
        .replace("$NOTEBOOK_PYTHON_DEPENDENCIES", "[]")
}

#[tokio::test]
async fn a_custom_image_keeps_its_served_tag_as_spec_tags_0() {
    let env = Env::new(&["ds"]).await;
    // The pipeline's two steps: the empty stream, then its merge patch with the one tag.
    let text = custom_image();
    let mut docs = text.split("\n---\n").skip(1);
    let (created, patch) = (docs.next().unwrap(), docs.next().unwrap());
    env.emu.seed_str(created).await;
    let patch: Value = serde_norway::from_str(patch).unwrap();
    Api::<ImageStream>::namespaced(env.emu.client(), "ds")
        .patch(
            "custom-my-notebook",
            &Default::default(),
            &kube::api::Patch::Merge(patch),
        )
        .await
        .unwrap();
    env.emu
        .import("ds", "custom-my-notebook", "latest", A)
        .await;

    let ran = env.adopt(&["ds/custom-my-notebook", "--reference-policy", "Local"]);
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    assert!(
        ran.stdout
            .contains("pipeline: candidate-tag=latest-candidate served-tag=latest"),
        "{}",
        ran.stdout
    );
    let is = env.stream("ds", "custom-my-notebook").await;
    assert_eq!(
        tag_names(&is),
        ["latest", "latest-candidate"],
        "as the API server returns them: the served tag stays spec.tags[0]"
    );
    assert_eq!(
        is.spec_tag("latest")
            .unwrap()
            .reference_policy
            .as_ref()
            .unwrap()
            .type_,
        "Local"
    );
    assert_eq!(
        is.spec_tag("latest").unwrap().annotations.as_ref().unwrap()["openshift.io/imported-from"],
        "quay.io/org/custom-nb:latest",
        "the dashboard's annotations are kept"
    );
    assert_eq!(
        from(&is, "latest-candidate").1,
        "quay.io/org/custom-nb:latest"
    );
    let again = env.adopt(&["ds/custom-my-notebook"]);
    assert!(again.stdout.contains("already adopted"), "{}", again.stdout);
    assert_eq!(env.writes().await.len(), 1);
    env.assert_documented_rbac_allows().await;
}

/// jupyter-minimal-notebook as the operator applies it: the shipped manifest with digests for
/// the placeholders and the workbenches-operator's labels, both tags imported.
async fn seed_shipped(env: &Env) {
    let text = fixture("odh-notebooks_jupyter-minimal-notebook_imagestream_manifest.yaml")
        .replace(
            "odh-workbench-jupyter-minimal-cpu-py312-ubi9-n_PLACEHOLDER",
            &format!("quay.io/opendatahub/workbench-images@{B}"),
        )
        .replace(
            "odh-workbench-jupyter-minimal-cpu-py311-ubi9-n-1_PLACEHOLDER",
            &format!("quay.io/opendatahub/workbench-images@{A}"),
        )
        .replace("-commit-n_PLACEHOLDER", "-commit-b")
        .replace("-commit-n-1_PLACEHOLDER", "-commit-a")
        .replace(
            "  name: jupyter-minimal-notebook\n",
            "  name: jupyter-minimal-notebook\n  namespace: opendatahub\n",
        )
        .replace(
            "    opendatahub.io/notebook-image: \"true\"\n",
            "    opendatahub.io/notebook-image: \"true\"\n    app.opendatahub.io/workbenches: \"true\"\n    app.kubernetes.io/part-of: workbenches\n",
        );
    env.emu.seed_str(&text).await;
    env.emu
        .import("opendatahub", "jupyter-minimal-notebook", "2025.1", A)
        .await;
    env.emu
        .import("opendatahub", "jupyter-minimal-notebook", "2025.2", B)
        .await;
}

const FOLLOW: &str = "quay.io/opendatahub/workbench-images:jupyter-minimal-cpu-py312-ubi9";

#[tokio::test]
async fn an_operator_shipped_stream_gets_a_gated_copy_and_is_hidden() {
    let env = Env::new(&["opendatahub"]).await;
    seed_shipped(&env).await;
    let original = env.stream("opendatahub", "jupyter-minimal-notebook").await;

    let refused = env.adopt(&["opendatahub/jupyter-minimal-notebook"]);
    assert_eq!(refused.code, 1);
    assert!(
        refused.stderr.contains(
            "cannot adopt ImageStream opendatahub/jupyter-minimal-notebook: the served tag \"2025.2\" imports DockerImage"
        ) && refused.stderr.contains("--candidate-from"),
        "{}",
        refused.stderr
    );

    let ran = env.adopt(&[
        "opendatahub/jupyter-minimal-notebook",
        "--candidate-from",
        FOLLOW,
    ]);
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    assert_eq!(
        env.writes().await,
        ["create", "patch jupyter-minimal-notebook"],
        "the copy first, then the original hidden"
    );
    let hidden = env.stream("opendatahub", "jupyter-minimal-notebook").await;
    assert_eq!(
        hidden.spec, original.spec,
        "the operator's tags are untouched"
    );
    let annotations = hidden.metadata.annotations.clone().unwrap();
    assert_eq!(annotations["opendatahub.io/notebook-image-hidden"], "true");
    assert_eq!(
        annotations["imagegate.dev/gated-copy"],
        "jupyter-minimal-notebook-gated"
    );

    let copy = env
        .stream("opendatahub", "jupyter-minimal-notebook-gated")
        .await;
    let labels = copy.metadata.labels.clone().unwrap();
    assert_eq!(
        labels
            .get("opendatahub.io/notebook-image")
            .map(String::as_str),
        Some("true")
    );
    assert!(
        !labels.contains_key("app.opendatahub.io/workbenches"),
        "not the operator's"
    );
    assert_eq!(tag_names(&copy), ["2025.1", "2025.2", "candidate"]);
    assert_eq!(
        from(&copy, "2025.2"),
        (
            "DockerImage".into(),
            format!("quay.io/opendatahub/workbench-images@{B}")
        )
    );
    assert_eq!(
        from(&copy, "candidate"),
        ("DockerImage".into(), FOLLOW.into())
    );
    assert!(scheduled(&copy, "candidate"));
    // The import controller imports the copy's tags, as it does for any new stream.
    for (tag, digest) in [("2025.1", A), ("2025.2", B), ("candidate", C)] {
        env.emu
            .import("opendatahub", "jupyter-minimal-notebook-gated", tag, digest)
            .await;
    }

    let again = env.adopt(&["opendatahub/jupyter-minimal-notebook"]);
    assert_eq!(again.code, 0, "{}", again.stderr);
    assert!(
        again
            .stdout
            .starts_with("opendatahub/jupyter-minimal-notebook-gated: already adopted"),
        "{}",
        again.stdout
    );
    assert_eq!(env.writes().await.len(), 2, "the second run writes nothing");
    env.assert_documented_rbac_allows().await;
}

#[tokio::test]
async fn streams_adopt_cannot_gate_are_refused_with_the_reason_and_left_alone() {
    let env = Env::new(&["ds", "pam"]).await;
    env.emu
        .seed_str(
            &fixture("rhpam-lab_rhpam-kieserver-rhel8_imagestream_never-imported.yaml")
                .replace("userNN-pam-dm1", "pam"),
        )
        .await;
    env.emu
        .seed_str(
            &std::fs::read_to_string(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/examples/notebook-imagestreams.yaml"
            ))
            .unwrap()
            .replace("namespace: notebooks", "namespace: ds")
            .replace("name: notebooks\n", "name: ds-unused\n"),
        )
        .await;
    env.emu
        .seed(json!({"apiVersion": "image.openshift.io/v1", "kind": "ImageStream",
            "metadata": {"name": "two", "namespace": "ds"},
            "spec": {"tags": [{"name": "a", "from": {"kind": "DockerImage", "name": "quay.io/org/x:a"}},
                              {"name": "b", "from": {"kind": "DockerImage", "name": "quay.io/org/x:b"}}]}}))
        .await;
    env.emu
        .seed(
            json!({"apiVersion": "image.openshift.io/v1", "kind": "ImageStream",
            "metadata": {"name": "empty", "namespace": "ds"}, "spec": {}}),
        )
        .await;
    let cases = [
        (
            "pam/rhpam-kieserver-rhel8",
            "the served tag \"7.5.1\" has no image yet",
        ),
        ("ds/jupyter-minimal-notebook", "already gated differently"),
        ("ds/two", "several tags could be the served one (a, b)"),
        ("ds/empty", "it has no spec tags"),
        ("ds/missing", "ImageStream ds/missing not found"),
    ];
    for (stream, reason) in cases {
        let ran = env.adopt(&[stream]);
        assert_eq!(ran.code, 1, "{stream}: {}", ran.stdout);
        assert!(
            ran.stderr.contains(reason),
            "{stream}: {:?} not in {}",
            reason,
            ran.stderr
        );
    }
    assert_eq!(env.writes().await, Vec::<String>::new());
}

/// Adopts the plain fixture, then writes the tag list back without the candidate, as a client
/// that replaces the whole list it knew (`oc apply` of an old manifest) does.
async fn adopt_then_drop_candidate(env: &Env, ns: &str) {
    let text = fixture("ci-note_ansible-runner_imagestream_import-failed.yaml")
        .replace("namespace: openshift", &format!("namespace: {ns}"));
    env.emu.seed_str(&text).await;
    let ran = env.adopt(&[&format!("{ns}/ansible-runner")]);
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    let api = Api::<ImageStream>::namespaced(env.emu.client(), ns);
    let mut is = api.get("ansible-runner").await.unwrap();
    is.spec.tags.retain(|t| t.name != "candidate");
    api.replace("ansible-runner", &PostParams::default(), &is)
        .await
        .unwrap();
}

#[tokio::test]
async fn check_reports_a_candidate_dropped_by_a_wholesale_edit_until_adopt_restores_it() {
    let env = Env::new(&["ds", "other"]).await;
    adopt_then_drop_candidate(&env, "ds").await;

    let check = env.adopt(&["--check", "-n", "ds"]);
    assert_eq!(check.code, 1);
    assert_eq!(
        check.stdout,
        "ds/ansible-runner: CandidateTagMissing: the candidate tag \"candidate\" is gone from \
         spec.tags (a wholesale edit of the tags?), so no new image is imported or validated\n\
         ds/ansible-runner: restore it with: imagegate adopt ds/ansible-runner\n"
    );
    assert!(
        check
            .stderr
            .contains("1 of 1 adopted or governed ImageStreams drifted from the gated shape"),
        "{}",
        check.stderr
    );
    assert_eq!(env.adopt(&["--check", "-A"]).code, 1);
    let elsewhere = env.adopt(&["--check", "-n", "other"]);
    assert_eq!(elsewhere.code, 0);
    assert_eq!(
        elsewhere.stdout,
        "no drift: 0 adopted or governed ImageStream(s) in namespace other in the gated shape\n"
    );

    let restore = env.adopt(&["ds/ansible-runner"]);
    assert_eq!(restore.code, 0, "{}", restore.stderr);
    let is = env.stream("ds", "ansible-runner").await;
    assert_eq!(
        from(&is, "candidate").1,
        "docker.io/ansible/ansible-runner:latest",
        "restored from what adopt recorded"
    );
    let check = env.adopt(&["--check", "-A"]);
    assert_eq!(check.code, 0, "{}", check.stdout);
    assert_eq!(
        check.stdout,
        "no drift: 1 adopted or governed ImageStream(s) in all namespaces in the gated shape\n"
    );
    env.assert_documented_rbac_allows().await;
}

#[test]
fn check_takes_namespace_flags_and_adopt_takes_a_stream() {
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_imagegate"))
            .arg("adopt")
            .args(args)
            .output()
            .unwrap()
    };
    for args in [
        &[][..],
        &["-n", "ds"],
        &["ds/nb", "--check"],
        &["--check", "-n", "ds", "-A"],
        &["--check", "--dry-run"],
        &["nb"],
    ] {
        let out = run(args);
        assert_eq!(out.status.code(), Some(2), "a usage error: {args:?}");
    }
}

mod controller;

/// `imagegate adopt` on the emulator ends where it ended on the real openshift-apiserver with
/// the real import controller (`85-adopt-before.json`, `85-adopt-after.json`, kept in
/// `crates/emulator/tests/real-openshift/endstates/`): the stream created, imported once, then
/// adopted; the new candidate tag is imported at once (generation 4, two status tags), which the
/// emulator did not do before it ran the import controllers.
#[tokio::test]
async fn adopt_ends_as_on_the_real_openshift_apiserver() {
    let env = Env::new(&["notebooks"]).await;
    let recorded = |file: &str| -> Value {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("crates/emulator/tests/real-openshift/endstates")
            .join(file);
        serde_json::from_str::<Value>(&std::fs::read_to_string(path).unwrap()).unwrap()["real"]
            .clone()
    };
    let (before, after) = (
        recorded("85-adopt-before.json"),
        recorded("85-adopt-after.json"),
    );
    let digest = before["status"]["tags"][0]["items"][0]["image"]
        .as_str()
        .unwrap()
        .to_string();
    env.emu
        .upstream("127.0.0.1:5000/plainimg:latest", json!({"digest": digest}))
        .await;
    // What `kubectl create -f step5/plain.json` created: the spec, without what the server sets.
    let mut create = json!({"apiVersion": "image.openshift.io/v1", "kind": "ImageStream",
        "metadata": {"name": "plain", "namespace": "notebooks"}, "spec": before["spec"].clone()});
    for tag in create["spec"]["tags"].as_array_mut().unwrap() {
        let tag = tag.as_object_mut().unwrap();
        tag.remove("generation");
        tag.remove("annotations");
    }
    Api::<ImageStream>::namespaced(env.emu.client(), "notebooks")
        .create(
            &PostParams::default(),
            &serde_json::from_value(create).unwrap(),
        )
        .await
        .unwrap();
    let comparable = |v: Value| -> Value {
        let mut v = v;
        let meta = v["metadata"].as_object_mut().unwrap();
        for key in [
            "uid",
            "resourceVersion",
            "creationTimestamp",
            "managedFields",
        ] {
            meta.remove(key);
        }
        if let Some(a) = meta.get_mut("annotations").and_then(Value::as_object_mut) {
            a.remove("openshift.io/image.dockerRepositoryCheck");
        }
        for tag in v["status"]["tags"].as_array_mut().into_iter().flatten() {
            for item in tag["items"].as_array_mut().into_iter().flatten() {
                item.as_object_mut().unwrap().remove("created");
            }
        }
        for tag in v["spec"]["tags"].as_array_mut().into_iter().flatten() {
            // The real server writes `annotations: null` where the emulator leaves it out.
            if tag["annotations"].is_null() {
                tag.as_object_mut().unwrap().remove("annotations");
            }
        }
        v
    };
    let now = || async { serde_json::to_value(env.stream("notebooks", "plain").await).unwrap() };
    let until = |want: Value, what: &'static str| {
        let now = &now;
        async move {
            let start = std::time::Instant::now();
            loop {
                let got = comparable(now().await);
                if got == want {
                    return;
                }
                assert!(
                    start.elapsed() < std::time::Duration::from_secs(10),
                    "{what}: the emulator's\n{got:#}\nthe real server's\n{want:#}"
                );
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
        }
    };
    until(comparable(before), "created and imported once").await;
    let ran = env.adopt(&["notebooks/plain"]);
    assert_eq!(ran.code, 0, "{}{}", ran.stdout, ran.stderr);
    until(comparable(after), "adopted, the candidate imported at once").await;
}
