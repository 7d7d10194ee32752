//! The containers that run `imagegate` (in `config/`'s Deployments and `knative/`'s
//! ContainerSource): their args go through the program's own clap command
//! (`imagegate::cli::Cli::command()`), and each `IMAGEGATE_*`/`K_*` variable in their env is one
//! an argument of that subcommand reads, with a value its parser takes. A `K_SINK` that points at
//! an EventListener names one in the manifests.

use clap::CommandFactory;
use serde_json::Value;

use super::check::Checker;
use super::model::{Doc, at, items};

impl Checker<'_> {
    pub fn imagegate_containers(&mut self, doc: &Doc) {
        let mut found = Vec::new();
        containers(&doc.obj, String::new(), &mut found);
        for (path, c) in found {
            if !c["image"].as_str().is_some_and(|i| i.contains("imagegate")) {
                continue;
            }
            let args: Vec<String> = items(&c["command"])
                .iter()
                .skip(1)
                .chain(items(&c["args"]))
                .map(|a| {
                    a.as_str()
                        .map(str::to_string)
                        .unwrap_or_else(|| a.to_string())
                })
                .collect();
            let Some(sub) = args.first().filter(|s| self.code.subcommand(s).is_some()) else {
                continue;
            };
            if let Err(e) = parse(&args) {
                let msg = format!(
                    "`imagegate {}` is refused by its command line: {e}",
                    args.join(" ")
                );
                self.r.error(doc, &at(&path, "args"), msg);
            }
            for (j, e) in items(&c["env"]).iter().enumerate() {
                self.container_env(doc, &format!("{path}.env[{j}]"), sub, e);
            }
        }
    }

    fn container_env(&mut self, doc: &Doc, path: &str, sub: &str, e: &Value) {
        let name = e["name"].as_str().unwrap_or_default();
        let value = e["value"].as_str();
        let command = self.code.subcommand(sub).expect("a subcommand");
        let arg = command
            .get_arguments()
            .find(|a| a.get_env().is_some_and(|n| n == name));
        match arg {
            None if name.starts_with("IMAGEGATE_") || name.starts_with("K_") => {
                self.r
                    .error(doc, path, format!("`imagegate {sub}` reads no {name}"));
            }
            Some(arg) if arg.get_action().takes_values() => {
                if let (Some(long), Some(value)) = (arg.get_long(), value)
                    && let Err(err) = parse(&[sub.to_string(), format!("--{long}={value}")])
                {
                    let msg =
                        format!("{name}={value} is refused by `imagegate {sub}` (--{long}): {err}");
                    self.r.error(doc, path, msg);
                }
            }
            _ => {}
        }
        if name == "K_SINK"
            && let Some(uri) = value.filter(|v| v.contains("://el-"))
        {
            self.event_listener_url(doc, &at(path, "value"), uri);
        }
        if name == "K_SINK" && doc.kind() == "ContainerSource" {
            let msg = "a ContainerSource injects K_SINK from spec.sink; do not set it";
            self.r.error(doc, path, msg);
        }
    }
}

/// Every container list's entries under `node`, with their paths.
fn containers<'v>(node: &'v Value, path: String, out: &mut Vec<(String, &'v Value)>) {
    match node {
        Value::Object(o) => {
            for (k, v) in o {
                let p = at(&path, k);
                if k == "containers" && v.is_array() {
                    for (i, c) in items(v).iter().enumerate() {
                        out.push((format!("{p}[{i}]"), c));
                    }
                } else {
                    containers(v, p, out);
                }
            }
        }
        Value::Array(a) => {
            for (i, v) in a.iter().enumerate() {
                containers(v, format!("{path}[{i}]"), out);
            }
        }
        _ => {}
    }
}

/// Parses `imagegate ARGS` with the program's clap command. No argument is required and none
/// reads the environment here: what the container's env provides is checked one variable at a
/// time, and the test's own environment must not decide the outcome.
fn parse(args: &[String]) -> Result<(), String> {
    // Required-ness is the env's business (a SinkBinding sets K_SINK), so it is dropped here,
    // also `--sink`'s required_unless_present(multi_tenant).
    let free = |a: clap::Arg| {
        a.required(false)
            .required_unless_present(clap::builder::Resettable::Reset)
            .env(None::<&str>)
    };
    imagegate::cli::Cli::command()
        .mut_args(free)
        .mut_subcommands(|s| s.mut_args(free))
        .try_get_matches_from(std::iter::once("imagegate".to_string()).chain(args.iter().cloned()))
        .map(drop)
        .map_err(|e| {
            let text = e.to_string();
            let what = text.split("\n\nUsage").next().unwrap_or(&text);
            what.trim().replace('\n', " ").replace("  ", " ")
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn the_command_line_judges_flags_and_values() {
        assert_eq!(
            parse(&args(&["source", "--leader-elect", "--mode=resource"])),
            Ok(())
        );
        let e = parse(&args(&["source", "--leader-election"])).unwrap_err();
        assert!(e.contains("unexpected argument '--leader-election'"), "{e}");
        let e = parse(&args(&["source", "--mode=everything"])).unwrap_err();
        assert!(e.contains("invalid value 'everything'"), "{e}");
        let e = parse(&args(&["controller", "--concurrency=0"])).unwrap_err();
        assert!(e.contains("--concurrency"), "{e}");
    }
}

/// F-22: every image imagegate ships a reference to is pinned by digest, so what runs is what was
/// reviewed: the Containerfile's base images, and each container image of the manifests, except
/// imagegate's own (kustomize's `images:` sets it to the user's build) and a Task's
/// `$(params.image)` (the candidate, by digest from `begin`).
#[test]
fn every_shipped_image_is_pinned_by_digest() {
    let root = super::ROOT;
    let digest = |image: &str| {
        image
            .split_once("@sha256:")
            .is_some_and(|(_, d)| d.len() == 64 && d.chars().all(|c| c.is_ascii_hexdigit()))
    };
    let containerfile = std::fs::read_to_string(format!("{root}/Containerfile")).unwrap();
    let bases: Vec<&str> = containerfile
        .lines()
        .filter_map(|l| l.strip_prefix("FROM "))
        .map(|l| l.split_whitespace().next().unwrap())
        .collect();
    assert_eq!(bases.len(), 2, "{bases:?}");
    for base in bases {
        assert!(
            digest(base),
            "Containerfile: FROM {base} is not pinned by digest"
        );
    }
    let m = super::shipped();
    let mut unpinned = Vec::new();
    for doc in &m.docs {
        let file = &doc.file;
        let mut found = Vec::new();
        containers(&doc.obj, String::new(), &mut found);
        for (path, c) in found {
            let image = c["image"].as_str().unwrap_or_default();
            let own = image.starts_with("ghcr.io/imagegate/imagegate");
            if !own && !image.starts_with("$(params.") && !digest(image) {
                unpinned.push(format!("{file}: {path}: {image}"));
            }
        }
    }
    assert!(
        unpinned.is_empty(),
        "not pinned by digest:\n{}",
        unpinned.join("\n")
    );
}
