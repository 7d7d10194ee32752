//! A stored object, frozen as its JSON text.
//!
//! etcd keeps an object as the bytes kube-apiserver encoded, and decodes it when it needs
//! the fields; the emulator does the same. A `serde_json::Value` takes about ten times the
//! memory of its JSON (every small map is a B-tree node of eleven slots), and the store holds
//! every object and every retained version of it: at 100,000 ImageStreams that was the
//! difference between fitting in the machine and not. Lists and watches write the text as it
//! is, without decoding; a decision that reads the fields decodes them with [`Stored::value`].

use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;

/// One version of an object, immutable once committed.
pub struct Stored(Box<RawValue>);

impl Stored {
    /// Freezes an object.
    pub fn new(v: &Value) -> Stored {
        // Serialising a `Value` cannot fail: its map keys are strings and its numbers finite.
        Stored(
            serde_json::value::to_raw_value(v)
                .unwrap_or_else(|_| RawValue::from_string("null".into()).expect("null is JSON")),
        )
    }

    /// The object, decoded.
    pub fn value(&self) -> Value {
        // The text was written from a `Value` that was itself decoded from JSON or YAML within
        // the same depth limit, so it decodes again.
        serde_json::from_str(self.0.get()).unwrap_or(Value::Null)
    }

    /// The object's JSON text.
    pub fn json(&self) -> &str {
        self.0.get()
    }

    /// The object as a raw JSON value, to embed in a response without decoding it.
    pub fn raw(&self) -> &RawValue {
        &self.0
    }

    /// The object's `metadata.labels`, decoded alone (lists and watches select on them).
    pub fn labels(&self) -> Option<Value> {
        #[derive(Deserialize)]
        struct Object {
            #[serde(default)]
            metadata: Option<Metadata>,
        }
        #[derive(Deserialize)]
        struct Metadata {
            #[serde(default)]
            labels: Option<Value>,
        }
        serde_json::from_str::<Object>(self.0.get())
            .ok()?
            .metadata?
            .labels
    }
}

impl PartialEq for Stored {
    fn eq(&self, other: &Self) -> bool {
        self.0.get() == other.0.get()
    }
}

impl std::fmt::Debug for Stored {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0.get())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_object_round_trips_through_its_text() {
        let v = json!({"metadata": {"name": "a", "labels": {"x": "1"}}, "spec": {"n": 2.5, "l": [1, null, true]}});
        let s = Stored::new(&v);
        assert_eq!(s.value(), v);
        assert_eq!(s.json(), serde_json::to_string(&v).unwrap());
        assert_eq!(s.labels(), Some(json!({"x": "1"})));
    }

    #[test]
    fn labels_are_none_when_absent_or_metadata_is_missing() {
        assert_eq!(
            Stored::new(&json!({"metadata": {"name": "a"}})).labels(),
            None
        );
        assert_eq!(Stored::new(&json!({"kind": "X"})).labels(), None);
        assert_eq!(Stored::new(&json!({"metadata": null})).labels(), None);
    }
}
