//! GitHub's package events (GitHub Container Registry).

use super::{Parsed, split_url};

/// A GitHub webhook for GitHub Container Registry (`ghcr.io`): the `package` or
/// `registry_package` event (`X-GitHub-Event`), action `published` or `updated`, of a container
/// package. The push is the version's `package_url` (`ghcr.io/owner/name:tag`), or
/// `ghcr.io/<owner>/<name>` and `container_metadata.tag.name` where it has none. Any other event
/// (`ping` on creation included) names no push.
pub(crate) fn github(body: &[u8], event: Option<&str>) -> Result<Parsed, String> {
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::Push;
    use super::*;

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
}
