//! The CNCF Distribution registry's notifications (`notifications.endpoints` in its
//! configuration; <https://distribution.github.io/distribution/about/notifications/>): an
//! envelope `{"events": [...]}` (media type `application/vnd.docker.distribution.events.v2+json`
//! or `v1`), one event per blob or manifest pushed, pulled, mounted or deleted. Only a manifest
//! pushed under a tag moves anything: a blob, a pull, a push by digest alone (the platform
//! manifests of a list) are [`Ignored`]. The registry host is the one the pushing client named
//! (`request.host`), which is how ImageStreams name it in `from`.

use serde::Deserialize;

use super::{Ignored, MAX_EVENTS, Parsed, Push, canonical_registry};

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
pub(crate) fn distribution(body: &[u8]) -> Result<Parsed, String> {
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
        registry: canonical_registry(registry),
        repository: repository.clone(),
        tag: tag.clone(),
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
