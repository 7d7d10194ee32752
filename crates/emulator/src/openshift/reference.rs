//! Container image references as library-go's `reference.Parse` splits them, the docker
//! tag-name rule, and image-ID prefix matching: the shapes `spec.tags[].from.name`,
//! `dockerImageReference` and `spec.dockerImageRepository` are validated against, and how an
//! ImageStreamImage name finds its image.

/// A container image reference split like library-go `reference.Parse`.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct DockerRef {
    pub registry: String,
    pub namespace: String,
    pub name: String,
    pub tag: String,
    pub id: String,
}

impl DockerRef {
    pub fn parse(spec: &str) -> Result<DockerRef, String> {
        const BAD: &str = "invalid reference format";
        if spec.is_empty() {
            return Err("repository name must have at least one component".into());
        }
        let (rest, id) = match spec.split_once('@') {
            Some((r, id)) => (r, id),
            None => (spec, ""),
        };
        if !id.is_empty() {
            let ok = id.split_once(':').is_some_and(|(alg, hex)| {
                !alg.is_empty()
                    && alg
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b"+._-".contains(&b))
                    && hex.len() >= 32
                    && hex.bytes().all(|b| b.is_ascii_hexdigit())
            });
            if !ok {
                return Err(BAD.into());
            }
        } else if spec.contains('@') {
            return Err(BAD.into());
        }
        let slash = rest.rfind('/').map_or(0, |i| i + 1);
        let (path, tag) = match rest[slash..].rfind(':') {
            Some(i) => (&rest[..slash + i], &rest[slash + i + 1..]),
            None => (rest, ""),
        };
        if !tag.is_empty() && !valid_tag(tag) || rest.ends_with(':') {
            return Err(BAD.into());
        }
        let mut parts: Vec<&str> = path.split('/').collect();
        let registry = match parts.as_slice() {
            [first, _, ..] if first.contains(['.', ':']) || *first == "localhost" => {
                parts.remove(0)
            }
            _ => "",
        };
        let (host, port) = registry.split_once(':').unwrap_or((registry, "0"));
        let host_ok = host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b".-".contains(&b))
            && !port.is_empty()
            && port.bytes().all(|b| b.is_ascii_digit());
        if !host_ok || parts.iter().any(|p| !valid_path_component(p)) {
            return Err(if path.bytes().any(|b| b.is_ascii_uppercase()) {
                format!("{BAD}: repository name must be lowercase")
            } else {
                BAD.into()
            });
        }
        let (namespace, name) = match parts.split_first() {
            Some((ns, more)) if !more.is_empty() => (ns.to_string(), more.join("/")),
            _ => (String::new(), parts.join("/")),
        };
        Ok(DockerRef {
            registry: registry.into(),
            namespace,
            name,
            tag: tag.into(),
            id: id.into(),
        })
    }

    /// `DockerImageReference.Exact()`.
    pub fn exact(&self) -> String {
        let mut s: Vec<&str> = Vec::new();
        for p in [&self.registry, &self.namespace, &self.name] {
            if !p.is_empty() {
                s.push(p);
            }
        }
        let mut out = s.join("/");
        if !self.tag.is_empty() {
            out = format!("{out}:{}", self.tag);
        }
        if !self.id.is_empty() {
            out = format!("{out}@{}", self.id);
        }
        out
    }
}

/// `imageutil.DigestOrImageMatch`: `id` is a prefix of the digest's hex or of the whole name.
pub(crate) fn digest_or_image_match(image: &str, id: &str) -> bool {
    match image.split_once(':') {
        Some((_, hex)) => hex.starts_with(id) || image.starts_with(id),
        None => image.starts_with(id),
    }
}

/// A docker tag: `[\w][\w.-]{0,127}`.
pub(crate) fn valid_tag(tag: &str) -> bool {
    let word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let b = tag.as_bytes();
    !b.is_empty()
        && b.len() <= 128
        && word(b[0])
        && b.iter().all(|&c| word(c) || c == b'.' || c == b'-')
}

fn valid_path_component(p: &str) -> bool {
    let alnum = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    let b = p.as_bytes();
    !b.is_empty()
        && alnum(b[0])
        && alnum(b[b.len() - 1])
        && b.iter()
            .all(|&c| alnum(c) || c == b'.' || c == b'_' || c == b'-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn docker_references_split_like_library_go() {
        let r = DockerRef::parse("image-registry.openshift-image-registry.svc:5000/ds/nb:latest")
            .unwrap();
        assert_eq!(
            (
                r.registry.as_str(),
                r.namespace.as_str(),
                r.name.as_str(),
                r.tag.as_str()
            ),
            (
                "image-registry.openshift-image-registry.svc:5000",
                "ds",
                "nb",
                "latest"
            )
        );
        let d = format!("sha256:{}", "a".repeat(64));
        let r = DockerRef::parse(&format!("python@{d}")).unwrap();
        assert_eq!((r.name.as_str(), r.id.as_str()), ("python", d.as_str()));
        assert_eq!(
            DockerRef::parse("quay.io/org/nb:3.8.12").unwrap().exact(),
            "quay.io/org/nb:3.8.12"
        );
        for bad in ["", "Quay/Org", "nb@sha256:zz", "nb:", "a b", "nb:bad/tag"] {
            assert!(DockerRef::parse(bad).is_err(), "{bad:?} must not parse");
        }
    }
}
