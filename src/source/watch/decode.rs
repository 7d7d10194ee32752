//! Lenient, typed decoding of the watched ImageStreams: each object is parsed from its JSON
//! text straight into the typed stream, as far as the mode reads it ([`Reading`]); one that
//! does not parse keeps its name and the reason, so it is logged, counted and skipped
//! ([`typed`]) and never fails a whole list (and with it the watch).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::Value;
use tracing::warn;

use crate::api::ImageStream;
use crate::source::checkpoint::StreamKey;
use crate::source::metrics::Metrics;

/// How much of each watched ImageStream the source reads.
pub trait Reading: Clone + std::fmt::Debug + Send + Sync + 'static {
    /// The stream parsed from its JSON text, or why it does not parse.
    fn parse(text: &str) -> Result<ImageStream, serde_json::Error>;
}

/// Everything: modes `resource` and `reference` send the object itself.
#[derive(Clone, Debug)]
pub(crate) struct Whole;

impl Reading for Whole {
    fn parse(text: &str) -> Result<ImageStream, serde_json::Error> {
        serde_json::from_str(text)
    }
}

/// What mode `imagestreamtag` uses: the status (every tag's history and conditions) and the
/// metadata that names the stream and resumes the watch (name, namespace, uid,
/// resourceVersion). The spec and the rest of the metadata (annotations, labels, the
/// `managedFields` a real API server sends with every object) are skipped unparsed, and a
/// malformed spec does not make the stream malformed: no event is made from it.
#[derive(Clone, Debug)]
pub(crate) struct TagsOnly;

impl Reading for TagsOnly {
    fn parse(text: &str) -> Result<ImageStream, serde_json::Error> {
        tags(text, false)
    }
}

/// What the multi-tenant adapter's watches use in mode `imagestreamtag`: [`TagsOnly`] and the
/// labels, which each source's `selector` is matched against (the watch, shared by sources
/// with different selectors, has none).
#[derive(Clone, Debug)]
pub struct TagsAndLabels;

impl Reading for TagsAndLabels {
    fn parse(text: &str) -> Result<ImageStream, serde_json::Error> {
        tags(text, true)
    }
}

/// The status and the naming metadata of the stream in `text`; its labels too with `labels`.
fn tags(text: &str, labels: bool) -> Result<ImageStream, serde_json::Error> {
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Meta {
        name: Option<String>,
        namespace: Option<String>,
        uid: Option<String>,
        resource_version: Option<String>,
        #[serde(default)]
        labels: Option<std::collections::BTreeMap<String, String>>,
    }
    #[derive(serde::Deserialize)]
    struct Stream {
        metadata: Meta,
        #[serde(default)]
        status: Option<crate::api::imagestream::ImageStreamStatus>,
    }
    let Stream { metadata, status } = serde_json::from_str(text)?;
    Ok(ImageStream {
        metadata: ObjectMeta {
            name: metadata.name,
            namespace: metadata.namespace,
            uid: metadata.uid,
            resource_version: metadata.resource_version,
            labels: metadata.labels.filter(|_| labels),
            ..ObjectMeta::default()
        },
        spec: Default::default(),
        status,
    })
}

/// An ImageStream as the watch delivers it: parsed (as far as `R` reads), or why it could not
/// be. Deserializing never fails, so one malformed object cannot fail a whole list (and with
/// it the watch).
#[derive(Clone, Debug)]
pub(crate) struct Watched<R = Whole> {
    /// The stream's metadata (what could be read of it when the object is malformed).
    metadata: ObjectMeta,
    /// The rest of the stream (its metadata is in `metadata`), or why it does not parse.
    stream: Result<Box<ImageStream>, String>,
    reading: std::marker::PhantomData<R>,
}

impl<'de, R: Reading> serde::Deserialize<'de> for Watched<R> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        // The object is taken as its JSON text and parsed straight into the typed stream:
        // nearly every object parses, and the typed parse reads the text once. Only an object
        // that does not parse is read again, as a JSON value, for the name to log it by (a
        // typed parse that fails half-way leaves nothing to go on).
        let raw = <Box<serde_json::value::RawValue> as serde::Deserialize>::deserialize(d)?;
        match R::parse(raw.get()) {
            Ok(mut is) => Ok(Watched {
                metadata: std::mem::take(&mut is.metadata),
                stream: Ok(Box::new(is)),
                reading: std::marker::PhantomData,
            }),
            Err(e) => Ok(Watched::malformed(raw.get(), e.to_string())),
        }
    }
}

impl<R> Watched<R> {
    /// An object that does not parse as an ImageStream: its metadata, as far as it can be
    /// read, and why the object does not parse.
    fn malformed(text: &str, error: String) -> Self {
        let metadata = serde_json::from_str::<Value>(text)
            .ok()
            .and_then(|mut v| v.get_mut("metadata").map(Value::take))
            .map(<ObjectMeta as serde::Deserialize>::deserialize);
        let (metadata, error) = match metadata {
            Some(Ok(metadata)) => (metadata, error),
            Some(Err(e)) => (ObjectMeta::default(), format!("metadata: {e}")),
            None => (ObjectMeta::default(), error),
        };
        Watched {
            metadata,
            stream: Err(error),
            reading: std::marker::PhantomData,
        }
    }
}

impl<R: Reading> kube::Resource for Watched<R> {
    type DynamicType = ();
    type Scope = kube::core::NamespaceResourceScope;

    fn kind(_: &()) -> std::borrow::Cow<'_, str> {
        <ImageStream as kube::Resource>::kind(&())
    }
    fn group(_: &()) -> std::borrow::Cow<'_, str> {
        <ImageStream as kube::Resource>::group(&())
    }
    fn version(_: &()) -> std::borrow::Cow<'_, str> {
        <ImageStream as kube::Resource>::version(&())
    }
    fn plural(_: &()) -> std::borrow::Cow<'_, str> {
        <ImageStream as kube::Resource>::plural(&())
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// The namespace and name of a watched object, readable or not.
pub(crate) fn key<R>(obj: &Watched<R>) -> StreamKey {
    (
        obj.metadata.namespace.clone().unwrap_or_default(),
        obj.metadata.name.clone().unwrap_or_default(),
    )
}

/// The typed ImageStream, or None (logged and counted) when the object does not parse.
pub(crate) fn typed<R>(obj: Watched<R>, metrics: &Metrics) -> Option<ImageStream> {
    match obj.stream {
        Ok(mut is) => {
            is.metadata = obj.metadata;
            Some(*is)
        }
        Err(e) => {
            let (namespace, name) = (
                obj.metadata.namespace.unwrap_or_default(),
                obj.metadata.name.unwrap_or_default(),
            );
            metrics.malformed.inc();
            warn!(namespace = %namespace, imagestream = %name, error = %e, "malformed ImageStream skipped");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_watched_stream_is_typed_whole_and_a_malformed_one_keeps_its_name() {
        let good = serde_json::json!({
            "metadata": {"name": "nb", "namespace": "ds", "uid": "u1"},
            "spec": {},
            "status": {"tags": [{"tag": "latest", "items": [{"image": "sha256:a", "generation": 2}]}]},
        });
        let w: Watched = serde_json::from_value(good).unwrap();
        assert_eq!(key(&w), ("ds".into(), "nb".into()));
        let is = typed(w, &Metrics::register(&mut Default::default())).unwrap();
        assert_eq!(is.metadata.name.as_deref(), Some("nb"));
        assert_eq!(is.metadata.uid.as_deref(), Some("u1"));
        assert_eq!(is.status.unwrap().tags[0].history()[0].generation, 2);

        let bad = serde_json::json!({
            "metadata": {"name": "nb", "namespace": "ds"},
            "status": {"tags": "not a list"},
        });
        let w: Watched = serde_json::from_value(bad).unwrap();
        assert_eq!(key(&w), ("ds".into(), "nb".into()));
        assert!(w.stream.is_err());

        for unnamed in [serde_json::json!({"metadata": 7}), serde_json::json!([1])] {
            let w: Watched = serde_json::from_value(unnamed).unwrap();
            assert!(w.stream.is_err());
        }
    }

    #[test]
    fn a_watch_line_is_typed_straight_from_its_text_and_a_malformed_object_keeps_its_name() {
        // The path the watch takes: kube-rs reads each line as a WatchEvent from its text.
        let line = r#"{"type":"MODIFIED","object":{"kind":"ImageStream","apiVersion":"image.openshift.io/v1","metadata":{"name":"nb","namespace":"ds","uid":"u1","resourceVersion":"7"},"spec":{"tags":[{"name":"latest"}]},"status":{"tags":[{"tag":"latest","items":[{"image":"sha256:a","generation":2,"created":"2026-12-01T10:00:00Z"}]}]},"unknownField":{"x":[1,2]}}}"#;
        let kube::core::WatchEvent::Modified(w) =
            serde_json::from_str::<kube::core::WatchEvent<Watched>>(line).unwrap()
        else {
            panic!("not a MODIFIED event");
        };
        assert_eq!(key(&w), ("ds".into(), "nb".into()));
        assert_eq!(w.metadata.resource_version.as_deref(), Some("7"));
        let is = typed(w, &Metrics::register(&mut Default::default())).unwrap();
        assert_eq!(is.metadata.uid.as_deref(), Some("u1"));
        assert_eq!(
            is.status.unwrap().tags[0].history()[0].image,
            "sha256:a".to_string()
        );

        let bad = r#"{"type":"ADDED","object":{"metadata":{"name":"nb","namespace":"ds"},"status":{"tags":[{"tag":"latest","items":"not a list"}]}}}"#;
        let kube::core::WatchEvent::Added(w) =
            serde_json::from_str::<kube::core::WatchEvent<Watched>>(bad).unwrap()
        else {
            panic!("not an ADDED event");
        };
        assert_eq!(key(&w), ("ds".into(), "nb".into()));
        let why = w.stream.as_ref().unwrap_err();
        assert!(why.contains("invalid type"), "{why}");
        let metrics = Metrics::register(&mut Default::default());
        assert!(typed(w, &metrics).is_none());
        assert_eq!(metrics.malformed.get(), 1);

        // A metadata that is no object: the stream is unnamed and the reason says so.
        let unnamed = r#"{"type":"ADDED","object":{"metadata":7}}"#;
        let kube::core::WatchEvent::Added(w) =
            serde_json::from_str::<kube::core::WatchEvent<Watched>>(unnamed).unwrap()
        else {
            panic!("not an ADDED event");
        };
        assert_eq!(key(&w), (String::new(), String::new()));
        assert!(w.stream.unwrap_err().starts_with("metadata: "));
    }

    #[test]
    fn mode_imagestreamtag_reads_the_status_and_the_naming_metadata_and_skips_the_rest() {
        let line = r#"{"type":"MODIFIED","object":{"kind":"ImageStream","apiVersion":"image.openshift.io/v1","metadata":{"name":"nb","namespace":"ds","uid":"u1","resourceVersion":"7","generation":3,"annotations":{"opendatahub.io/notebook-image":"true"},"managedFields":[{"manager":"oc","operation":"Update","fieldsType":"FieldsV1","fieldsV1":{"f:spec":{"f:tags":{}}}}]},"spec":{"tags":[{"name":"latest","from":{"kind":"DockerImage","name":"quay.io/x/nb:latest"}}]},"status":{"dockerImageRepository":"r/ds/nb","tags":[{"tag":"latest","items":[{"image":"sha256:a","generation":2,"created":"2026-12-01T10:00:00Z"}],"conditions":[{"type":"ImportSuccess","status":"False","reason":"NotFound","generation":3}]}]}}}"#;
        let event = |line: &str| -> Watched<TagsOnly> {
            match serde_json::from_str::<kube::core::WatchEvent<Watched<TagsOnly>>>(line) {
                Ok(kube::core::WatchEvent::Modified(w)) => w,
                other => panic!("not a MODIFIED event: {other:?}"),
            }
        };
        let w = event(line);
        assert_eq!(key(&w), ("ds".into(), "nb".into()));
        assert_eq!(w.metadata.resource_version.as_deref(), Some("7"));
        let is = typed(w, &Metrics::register(&mut Default::default())).unwrap();
        assert_eq!(is.metadata.uid.as_deref(), Some("u1"));
        assert_eq!(is.metadata.annotations, None, "not read");
        assert_eq!(is.metadata.managed_fields, None, "not read");
        assert!(is.spec.tags.is_empty(), "the spec is not read");
        // The status is read whole: the same as the whole object's.
        let whole: kube::core::WatchEvent<Watched<Whole>> = serde_json::from_str(line).unwrap();
        let kube::core::WatchEvent::Modified(whole) = whole else {
            panic!("not a MODIFIED event")
        };
        let whole = typed(whole, &Metrics::register(&mut Default::default())).unwrap();
        assert_eq!(is.status, whole.status);
        assert_eq!(whole.spec.tags.len(), 1);

        // A malformed spec makes no event of mode imagestreamtag wrong: it is not malformed
        // there, and it is for the modes that send the object.
        let bad_spec = line.replace(r#""spec":{"tags":[{"#, r#""spec":{"tags":"no list","x":[{"#);
        assert!(
            serde_json::from_str::<Value>(&bad_spec).is_ok(),
            "{bad_spec}"
        );
        assert!(event(&bad_spec).stream.is_ok());
        let whole: kube::core::WatchEvent<Watched<Whole>> =
            serde_json::from_str(&bad_spec).unwrap();
        let kube::core::WatchEvent::Modified(whole) = whole else {
            panic!("not a MODIFIED event")
        };
        assert!(whole.stream.is_err());

        // A malformed status is malformed in every mode, and the stream keeps its name.
        let bad_status = line.replace(r#""items":[{"#, r#""items":"no list","x":[{"#);
        let w = event(&bad_status);
        assert_eq!(key(&w), ("ds".into(), "nb".into()));
        assert!(w.stream.is_err());
    }
}
