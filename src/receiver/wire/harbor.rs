//! Harbor's webhooks.

use super::{MAX_EVENTS, Parsed, split_url};

/// A Harbor webhook (<https://goharbor.io/docs/latest/working-with-projects/project-configuration/configure-webhooks/>),
/// either of its two payload formats: `Default` (`{"type": "PUSH_ARTIFACT", "event_data":
/// {"resources": [...], "repository": {...}}}`) or `CloudEvents` (type `harbor.artifact.pushed`,
/// structured with the same `resources` and `repository` under `data`, or binary with the type
/// in `ce-type` and those as the body). Each resource pushed under a tag is a push; its
/// `resource_url` (`harbor.example.com/project/repo:tag`) names the registry host clients use.
pub(crate) fn harbor(body: &[u8], ce_type: Option<&str>) -> Result<Parsed, String> {
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::Push;
    use super::*;

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
}
