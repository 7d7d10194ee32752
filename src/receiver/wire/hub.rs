//! Quay's and Docker Hub's webhooks: neither can carry a secret but in its URL.

use super::{DOCKER_HUB, MAX_EVENTS, Parsed, Push, split_url};

/// A Quay repository notification (`repo_push`, method "Webhook POST";
/// <https://docs.redhat.com/en/documentation/red_hat_quay/3.12/html/use_red_hat_quay/repository-events>):
/// `docker_url` (`quay.io/org/repo`, the host clients pull from, a self-hosted Quay's own) and
/// `updated_tags`, each a push. Old Quay sent `updated_tags` as an object of tag to image id;
/// its keys are the tags. A notification without tags (another event sent to this endpoint) names
/// no push.
pub(crate) fn quay(body: &[u8]) -> Result<Parsed, String> {
    let v: serde_json::Value = serde_json::from_slice(body)
        .map_err(|e| format!("not a Quay repository notification: {e}"))?;
    let Some(url) = v["docker_url"].as_str() else {
        return Err("not a Quay repository notification: no docker_url".into());
    };
    let tags: Vec<&str> = match &v["updated_tags"] {
        serde_json::Value::Array(tags) => tags.iter().filter_map(|t| t.as_str()).collect(),
        serde_json::Value::Object(tags) => tags.keys().map(String::as_str).collect(),
        _ => Vec::new(),
    };
    if tags.len() > MAX_EVENTS {
        return Err(format!(
            "{} tags in one notification; at most {MAX_EVENTS}",
            tags.len()
        ));
    }
    let mut parsed = Parsed::default();
    if tags.is_empty() {
        parsed.ignored = 1;
    }
    let url = url
        .trim_start_matches("https://")
        .trim_start_matches("http://");
    for tag in tags {
        match (!tag.is_empty())
            .then(|| split_url(&format!("{url}:{tag}"), tag))
            .flatten()
        {
            Some(p) if !parsed.pushes.contains(&p) => parsed.pushes.push(p),
            Some(_) => {}
            None => parsed.ignored += 1,
        }
    }
    Ok(parsed)
}

/// A Docker Hub repository webhook (<https://docs.docker.com/docker-hub/repos/manage/webhooks/>):
/// one push, `push_data.tag` of `repository.repo_name` on Docker Hub (`docker.io`; a name without
/// a namespace is an official image, `library/<name>`). Docker Hub sends nothing else.
pub(crate) fn dockerhub(body: &[u8]) -> Result<Parsed, String> {
    let v: serde_json::Value =
        serde_json::from_slice(body).map_err(|e| format!("not a Docker Hub webhook: {e}"))?;
    let Some(name) = v["repository"]["repo_name"].as_str() else {
        return Err("not a Docker Hub webhook: no repository.repo_name".into());
    };
    let tag = v["push_data"]["tag"].as_str().unwrap_or_default();
    let mut parsed = Parsed::default();
    let repository = if name.contains('/') {
        name.to_string()
    } else {
        format!("library/{name}")
    };
    if tag.is_empty() || name.is_empty() {
        parsed.ignored = 1;
    } else {
        parsed.pushes.push(Push {
            registry: DOCKER_HUB.into(),
            repository,
            tag: tag.into(),
        });
    }
    Ok(parsed)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::canonical_registry;
    use super::*;

    #[test]
    fn a_quay_push_names_each_updated_tag_in_either_form() {
        let push = |tag: &str| Push {
            registry: "quay.example.com".into(),
            repository: "ml/jupyter".into(),
            tag: tag.into(),
        };
        let today = json!({"name": "jupyter", "repository": "ml/jupyter", "namespace": "ml",
            "docker_url": "Quay.Example.com/ml/jupyter", "homepage": "https://quay.example.com/repository/ml/jupyter",
            "updated_tags": ["2026.1", "latest", "2026.1"]});
        let p = quay(today.to_string().as_bytes()).unwrap();
        assert_eq!(p.pushes, [push("2026.1"), push("latest")]);
        let old = json!({"docker_url": "quay.example.com/ml/jupyter", "updated_tags": {"2026.1": "b750fe79"}});
        assert_eq!(
            quay(old.to_string().as_bytes()).unwrap().pushes,
            [push("2026.1")]
        );
        let build = json!({"docker_url": "quay.example.com/ml/jupyter", "build_id": "296ec063", "docker_tags": ["latest"]});
        let p = quay(build.to_string().as_bytes()).unwrap();
        assert_eq!((p.pushes.len(), p.ignored), (0, 1));
        for bad in [&b"{"[..], b"[]", b"{\"updated_tags\": [\"x\"]}"] {
            assert!(
                quay(bad)
                    .unwrap_err()
                    .starts_with("not a Quay repository notification")
            );
        }
    }

    #[test]
    fn a_docker_hub_push_is_on_docker_hub_under_its_namespace() {
        let body = |name: &str, tag: &str| {
            json!({"callback_url": "https://registry.hub.docker.com/u/x/hook/1/",
                   "push_data": {"pushed_at": 1417566161, "pusher": "ci", "tag": tag},
                   "repository": {"repo_name": name}})
            .to_string()
        };
        let p = dockerhub(body("platform/jupyter", "2026.1").as_bytes()).unwrap();
        assert_eq!(
            p.pushes,
            [Push {
                registry: "docker.io".into(),
                repository: "platform/jupyter".into(),
                tag: "2026.1".into()
            }]
        );
        let official = dockerhub(body("python", "3.12").as_bytes()).unwrap();
        assert_eq!(official.pushes[0].repository, "library/python");
        assert_eq!(
            dockerhub(body("platform/jupyter", "").as_bytes())
                .unwrap()
                .ignored,
            1
        );
        assert!(dockerhub(b"{}").unwrap_err().contains("repo_name"));
        assert_eq!(canonical_registry("Index.Docker.io"), "docker.io");
        assert_eq!(canonical_registry("Quay.io"), "quay.io");
    }
}
