//! What a registry's push notification claims: the pushes it names, as [`Push`]es ([`distribution`],
//! [`harbor`], [`github`]). Pure, and
//! never trusted for a digest: a push only says which repository and tag to import again now;
//! the import reads the registry itself.
//!
//! The CNCF Distribution registry's notifications (`notifications.endpoints` in its
//! configuration; <https://distribution.github.io/distribution/about/notifications/>): an
//! envelope `{"events": [...]}` (media type `application/vnd.docker.distribution.events.v2+json`
//! or `v1`), one event per blob or manifest pushed, pulled, mounted or deleted. Only a manifest
//! pushed under a tag moves anything: a blob, a pull, a push by digest alone (the platform
//! manifests of a list) are [`Ignored`]. The registry host is the one the pushing client named
//! (`request.host`), which is how ImageStreams name it in `from`.

use serde::Deserialize;

/// One pushed tag: `registry/repository:tag`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Push {
    /// The registry host as clients name it (`quay.io`, `registry.example.com:5000`).
    pub registry: String,
    /// The repository path (`org/notebook`).
    pub repository: String,
    /// The tag pushed.
    pub tag: String,
}

/// Why an event of a notification named no push.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ignored {
    /// Not a push (a pull, a mount, a delete).
    NotAPush,
    /// A blob, not a manifest.
    NotAManifest,
    /// A manifest pushed by digest only: no tag moved.
    NoTag,
}

/// What a notification body said: the pushes, and how many events named none.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Parsed {
    /// Each tag pushed, once, in order.
    pub pushes: Vec<Push>,
    /// Events that moved no tag.
    pub ignored: usize,
}

/// The most events one notification may carry (the registry sends them in small batches).
pub const MAX_EVENTS: usize = 1024;

#[derive(Deserialize)]
struct Envelope {
    events: Vec<Event>,
}

#[derive(Deserialize)]
struct Event {
    #[serde(default)]
    action: String,
    #[serde(default)]
    target: Target,
    #[serde(default)]
    request: Request,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Target {
    #[serde(default)]
    media_type: String,
    #[serde(default)]
    repository: String,
    #[serde(default)]
    tag: String,
}

#[derive(Default, Deserialize)]
struct Request {
    #[serde(default)]
    host: String,
}

const MANIFEST_TYPES: [&str; 5] = [
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.v2+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
    "application/vnd.docker.distribution.manifest.v1+prettyjws",
];

/// The pushes of a Distribution notification body, or why it is not one.
pub fn distribution(body: &[u8]) -> Result<Parsed, String> {
    let envelope: Envelope = serde_json::from_slice(body)
        .map_err(|e| format!("not a registry notification envelope: {e}"))?;
    if envelope.events.len() > MAX_EVENTS {
        return Err(format!(
            "{} events in one notification; at most {MAX_EVENTS}",
            envelope.events.len()
        ));
    }
    let mut parsed = Parsed::default();
    for e in envelope.events {
        match judge(&e) {
            Ok(push) => {
                if !parsed.pushes.contains(&push) {
                    parsed.pushes.push(push);
                }
            }
            Err(_) => parsed.ignored += 1,
        }
    }
    Ok(parsed)
}

fn judge(e: &Event) -> Result<Push, Ignored> {
    if e.action != "push" {
        return Err(Ignored::NotAPush);
    }
    if !MANIFEST_TYPES.contains(&e.target.media_type.as_str()) {
        return Err(Ignored::NotAManifest);
    }
    let (registry, repository, tag) = (&e.request.host, &e.target.repository, &e.target.tag);
    if tag.is_empty() || registry.is_empty() || repository.is_empty() {
        return Err(Ignored::NoTag);
    }
    Ok(Push {
        registry: registry.to_ascii_lowercase(),
        repository: repository.clone(),
        tag: tag.clone(),
    })
}

/// A Harbor webhook (<https://goharbor.io/docs/latest/working-with-projects/project-configuration/configure-webhooks/>),
/// either of its two payload formats: `Default` (`{"type": "PUSH_ARTIFACT", "event_data":
/// {"resources": [...], "repository": {...}}}`) or `CloudEvents` (type `harbor.artifact.pushed`,
/// structured with the same `resources` and `repository` under `data`, or binary with the type
/// in `ce-type` and those as the body). Each resource pushed under a tag is a push; its
/// `resource_url` (`harbor.example.com/project/repo:tag`) names the registry host clients use.
pub fn harbor(body: &[u8], ce_type: Option<&str>) -> Result<Parsed, String> {
    let v: serde_json::Value =
        serde_json::from_slice(body).map_err(|e| format!("not a Harbor webhook payload: {e}"))?;
    let (kind, data) = if let Some(t) = ce_type {
        (t.to_string(), &v)
    } else if v.get("specversion").is_some() {
        let t = v["type"].as_str().unwrap_or_default().to_string();
        (t, &v["data"])
    } else {
        let t = v["type"].as_str().unwrap_or_default().to_string();
        (t, &v["event_data"])
    };
    let Some(resources) = data["resources"].as_array() else {
        return Err("not a Harbor webhook payload: no resources".into());
    };
    if resources.len() > MAX_EVENTS {
        return Err(format!(
            "{} resources in one notification; at most {MAX_EVENTS}",
            resources.len()
        ));
    }
    let mut parsed = Parsed::default();
    let pushed = kind == "PUSH_ARTIFACT" || kind == "harbor.artifact.pushed";
    for r in resources {
        let tag = r["tag"].as_str().unwrap_or_default();
        let url = r["resource_url"].as_str().unwrap_or_default();
        let push = pushed
            .then(|| split_url(url, tag))
            .flatten()
            .filter(|_| !tag.is_empty());
        match push {
            Some(p) if !parsed.pushes.contains(&p) => parsed.pushes.push(p),
            Some(_) => {}
            None => parsed.ignored += 1,
        }
    }
    Ok(parsed)
}

/// A GitHub webhook for GitHub Container Registry (`ghcr.io`): the `package` or
/// `registry_package` event (`X-GitHub-Event`), action `published` or `updated`, of a container
/// package. The push is the version's `package_url` (`ghcr.io/owner/name:tag`), or
/// `ghcr.io/<owner>/<name>` and `container_metadata.tag.name` where it has none. Any other event
/// (`ping` on creation included) names no push.
pub fn github(body: &[u8], event: Option<&str>) -> Result<Parsed, String> {
    let v: serde_json::Value =
        serde_json::from_slice(body).map_err(|e| format!("not a GitHub webhook payload: {e}"))?;
    let mut parsed = Parsed::default();
    let package = match event {
        Some("package") => &v["package"],
        Some("registry_package") => &v["registry_package"],
        _ => {
            parsed.ignored = 1;
            return Ok(parsed);
        }
    };
    if !package.is_object() {
        return Err("not a GitHub package event: no package".into());
    }
    let action = v["action"].as_str().unwrap_or_default();
    let kind = package["package_type"].as_str().unwrap_or_default();
    let container = matches!(kind.to_ascii_lowercase().as_str(), "container" | "docker");
    let version = &package["package_version"];
    let tag = version["container_metadata"]["tag"]["name"]
        .as_str()
        .unwrap_or_default();
    let push = if !(container && matches!(action, "published" | "updated")) || tag.is_empty() {
        None
    } else {
        let url = version["package_url"].as_str().unwrap_or_default();
        let url = url.trim_start_matches("https://");
        split_url(url, tag).or_else(|| {
            let owner = package["owner"]["login"].as_str()?.to_ascii_lowercase();
            let name = package["name"].as_str()?;
            split_url(&format!("ghcr.io/{owner}/{name}:{tag}"), tag)
        })
    };
    match push {
        Some(p) => parsed.pushes.push(p),
        None => parsed.ignored = 1,
    }
    Ok(parsed)
}

/// `host/path/repo:tag` (or `@digest`) and its tag -> the push.
fn split_url(url: &str, tag: &str) -> Option<Push> {
    let (registry, rest) = url.split_once('/')?;
    let repository = rest
        .split('@')
        .next()?
        .strip_suffix(&format!(":{tag}"))
        .unwrap_or_else(|| rest.split('@').next().unwrap_or(rest));
    (!registry.is_empty() && !repository.is_empty()).then(|| Push {
        registry: registry.to_ascii_lowercase(),
        repository: repository.to_string(),
        tag: tag.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn event(action: &str, media: &str, tag: &str) -> serde_json::Value {
        json!({
            "id": "e1", "timestamp": "2026-12-06T10:00:00Z", "action": action,
            "target": {"mediaType": media, "size": 528, "digest": "sha256:0000", "length": 528,
                       "repository": "org/nb", "url": "http://r:5000/v2/org/nb/manifests/sha256:0000", "tag": tag},
            "request": {"id": "r1", "addr": "10.0.0.9:4711", "host": "Registry.Example:5000", "method": "PUT", "useragent": "skopeo"},
            "actor": {}, "source": {"addr": "r:5000", "instanceID": "i"}
        })
    }

    #[test]
    fn a_manifest_pushed_under_a_tag_is_a_push_and_everything_else_is_ignored() {
        let body = json!({"events": [
            event("push", "application/vnd.oci.image.layer.v1.tar+gzip", ""),
            event("push", "application/vnd.oci.image.manifest.v1+json", ""),
            event("push", "application/vnd.oci.image.index.v1+json", "2026.1"),
            event("pull", "application/vnd.oci.image.index.v1+json", "2026.1"),
            event("push", "application/vnd.docker.distribution.manifest.v2+json", "2026.1"),
        ]});
        let parsed = distribution(body.to_string().as_bytes()).unwrap();
        assert_eq!(
            parsed.pushes,
            [Push {
                registry: "registry.example:5000".into(),
                repository: "org/nb".into(),
                tag: "2026.1".into()
            }],
            "the same tag twice is one push"
        );
        assert_eq!(parsed.ignored, 3);
    }

    fn harbor_default(kind: &str, tag: &str) -> serde_json::Value {
        json!({
            "type": kind, "occur_at": 1737446601, "operator": "admin",
            "event_data": {
                "resources": [{"digest": "sha256:7652", "tag": tag,
                               "resource_url": format!("Harbor.Example.com/ml/jupyter:{tag}")}],
                "repository": {"date_created": 1737446600, "name": "jupyter", "namespace": "ml",
                               "repo_full_name": "ml/jupyter", "repo_type": "private"}
            }
        })
    }

    #[test]
    fn a_harbor_push_in_either_format_is_a_push_and_other_events_are_ignored() {
        let want = vec![Push {
            registry: "harbor.example.com".into(),
            repository: "ml/jupyter".into(),
            tag: "2026.1".into(),
        }];
        let default = harbor_default("PUSH_ARTIFACT", "2026.1").to_string();
        assert_eq!(harbor(default.as_bytes(), None).unwrap().pushes, want);
        let data = harbor_default("PUSH_ARTIFACT", "2026.1")["event_data"].clone();
        let structured = json!({"specversion": "1.0", "id": "1", "source": "/projects/1/webhook/policies/1",
            "type": "harbor.artifact.pushed", "datacontenttype": "application/json", "data": data});
        let parsed = harbor(structured.to_string().as_bytes(), None).unwrap();
        assert_eq!(parsed.pushes, want);
        let binary = harbor(data.to_string().as_bytes(), Some("harbor.artifact.pushed")).unwrap();
        assert_eq!(binary.pushes, want);
        let pulled = harbor_default("PULL_ARTIFACT", "2026.1").to_string();
        let parsed = harbor(pulled.as_bytes(), None).unwrap();
        assert_eq!((parsed.pushes.len(), parsed.ignored), (0, 1));
        let by_digest = harbor_default("PUSH_ARTIFACT", "").to_string();
        assert_eq!(harbor(by_digest.as_bytes(), None).unwrap().ignored, 1);
        assert!(
            harbor(b"{\"type\": \"PUSH_ARTIFACT\"}", None)
                .unwrap_err()
                .contains("no resources")
        );
    }

    fn github_package(action: &str, tag: &str, url: Option<&str>) -> serde_json::Value {
        let mut version = json!({"id": 7, "name": "sha256:0123", "container_metadata": {"tag": {"name": tag, "digest": "sha256:0123"}}});
        if let Some(url) = url {
            version["package_url"] = json!(url);
        }
        json!({"action": action, "package": {"id": 1, "name": "jupyter", "package_type": "CONTAINER",
               "owner": {"login": "Platform-Team"}, "package_version": version}})
    }

    #[test]
    fn a_github_container_package_published_under_a_tag_is_a_push() {
        let want = vec![Push {
            registry: "ghcr.io".into(),
            repository: "platform-team/jupyter".into(),
            tag: "2026.1".into(),
        }];
        let with_url = github_package(
            "published",
            "2026.1",
            Some("ghcr.io/platform-team/jupyter:2026.1"),
        );
        let p = github(with_url.to_string().as_bytes(), Some("package")).unwrap();
        assert_eq!(p.pushes, want);
        let without = github_package("updated", "2026.1", None);
        assert_eq!(
            github(without.to_string().as_bytes(), Some("package"))
                .unwrap()
                .pushes,
            want
        );
        let mut registry = json!({"action": "published"});
        registry["registry_package"] = with_url["package"].clone();
        let p = github(registry.to_string().as_bytes(), Some("registry_package")).unwrap();
        assert_eq!(p.pushes, want);
        for (body, event) in [
            (github_package("published", "", None), Some("package")),
            (github_package("deleted", "2026.1", None), Some("package")),
            (
                json!({"zen": "Keep it logically awesome.", "hook_id": 1}),
                Some("ping"),
            ),
            (github_package("published", "2026.1", None), Some("push")),
        ] {
            let p = github(body.to_string().as_bytes(), event).unwrap();
            assert_eq!((p.pushes.len(), p.ignored), (0, 1), "{body}");
        }
        let mut npm = github_package("published", "1.0.0", None);
        npm["package"]["package_type"] = json!("npm");
        assert_eq!(
            github(npm.to_string().as_bytes(), Some("package"))
                .unwrap()
                .ignored,
            1
        );
        assert!(
            github(b"{}", Some("package"))
                .unwrap_err()
                .contains("no package")
        );
    }

    #[test]
    fn what_is_not_an_envelope_is_refused_with_why() {
        for bad in [&b"{"[..], b"[]", b"{\"events\": 3}", b"null"] {
            let e = distribution(bad).unwrap_err();
            assert!(e.starts_with("not a registry notification envelope"), "{e}");
        }
        let many = json!({"events": vec![json!({}); MAX_EVENTS + 1]});
        assert!(
            distribution(many.to_string().as_bytes())
                .unwrap_err()
                .contains("at most")
        );
        let empty = distribution(b"{\"events\": [{}]}").unwrap();
        assert_eq!((empty.pushes.len(), empty.ignored), (0, 1));
    }
}
