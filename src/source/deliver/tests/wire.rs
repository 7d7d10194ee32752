//! The wire: the dead-letter extensions, and the encoding byte for byte against the SDK's own
//! reqwest binding.

use super::*;
use cloudevents::message::StructuredDeserializer as _;

#[test]
fn knative_error_data_is_standard_base64_cut_to_1024_characters() {
    let sink = Url::parse("http://el-images.ci.svc.cluster.local:8080").unwrap();
    let body = |len: usize| (0..len).map(|i| (i % 251) as u8).collect::<Vec<u8>>();
    let status = |body: Vec<u8>| SendError::Status {
        status: 503,
        retry_after: None,
        body,
    };
    let long = body(2000);
    let table = [
        (
            status(b"overloaded".to_vec()),
            503,
            "b3ZlcmxvYWRlZA==".to_owned(),
        ),
        (status(Vec::new()), 503, String::new()),
        (status(b"a".to_vec()), 503, "YQ==".to_owned()),
        // `send` keeps ERROR_BODY_LIMIT bytes; their base64 is Knative's cut of the whole.
        (
            status(long[..ERROR_BODY_LIMIT].to_vec()),
            503,
            BASE64.encode(&long)[..1024].to_owned(),
        ),
        (
            status(long.clone()),
            503,
            BASE64.encode(&long)[..1024].to_owned(),
        ),
        (
            SendError::Transport("connection refused".into()),
            500,
            BASE64.encode("dispatch error: connection refused"),
        ),
        (SendError::Encode("bad header".into()), -1, String::new()),
    ];
    for (err, code, data) in table {
        let [dest, code_ext, data_ext] = knative_error_extensions(&sink, &err, true);
        assert_eq!(
            dest,
            (
                KNATIVE_ERROR_DEST,
                "http://el-images.ci.svc.cluster.local:8080/".into()
            )
        );
        assert_eq!(
            code_ext,
            (KNATIVE_ERROR_CODE, ExtensionValue::Integer(code))
        );
        assert_eq!(
            data_ext,
            (KNATIVE_ERROR_DATA, ExtensionValue::String(data)),
            "{err:?}"
        );
    }
}

// ---- TLS -------------------------------------------------------------------------------------

// A test-only CA and a server certificate it signed for 127.0.0.1 and localhost (P-256,
// valid 2000-2099), made with `openssl ca`. The key protects nothing.

/// The headers and body of a request as sorted pairs and bytes.
fn wire(headers: &reqwest::header::HeaderMap, body: &[u8]) -> (Vec<(String, String)>, Vec<u8>) {
    let mut pairs: Vec<(String, String)> = headers
        .iter()
        .map(|(k, v)| (k.as_str().to_owned(), v.to_str().unwrap().to_owned()))
        .collect();
    pairs.sort();
    (pairs, body.to_vec())
}

#[test]
fn an_encoded_event_is_byte_for_byte_what_the_sdks_reqwest_binding_sends() {
    use cloudevents::binding::reqwest::{RequestBuilderExt as _, RequestSerializer};
    // Every kind of attribute value: the data and dataschema of an `updated` event, a
    // deletion's missing data fields, an integer and a string extension as a dead letter
    // carries them, and an override.
    let mut dead = event();
    let err = SendError::Status {
        status: 503,
        retry_after: None,
        body: b"busy".to_vec(),
    };
    let sink: Url = "http://sink.example/".parse().unwrap();
    for (name, value) in knative_error_extensions(&sink, &err, true) {
        dead.set_extension(name, value);
    }
    dead.set_extension("team", "ml");
    let http = reqwest::Client::new();
    for ev in [event(), dead] {
        let sdk = http
            .post(sink.clone())
            .event(ev.clone())
            .unwrap()
            .build()
            .unwrap();
        let ours = Encoded::new(ev.clone(), ContentMode::Binary).unwrap();
        assert_eq!(
            wire(ours.headers(), ours.body()),
            wire(sdk.headers(), sdk.body().unwrap().as_bytes().unwrap()),
            "binary mode"
        );
        let sdk = ev
            .clone()
            .deserialize_structured(RequestSerializer::new(http.post(sink.clone())))
            .unwrap()
            .build()
            .unwrap();
        let ours = Encoded::new(ev.clone(), ContentMode::Structured).unwrap();
        assert_eq!(
            wire(ours.headers(), ours.body()),
            wire(sdk.headers(), sdk.body().unwrap().as_bytes().unwrap()),
            "structured mode"
        );
    }
    let header = |name: &str| {
        Encoded::new(event(), ContentMode::Binary)
            .unwrap()
            .headers()
            .get(name)
            .map(|v| v.to_str().unwrap().to_owned())
    };
    assert_eq!(header("content-type").as_deref(), Some("application/json"));
    assert_eq!(header("ce-imagetag").as_deref(), Some("latest"));
}

#[test]
fn without_detail_a_transport_error_says_only_that_the_sink_was_not_reached() {
    let sink: Url = "http://10.0.0.7:6379/".parse().unwrap();
    let err = SendError::Transport("tcp connect error: Connection refused (os error 111)".into());
    let [_, code, data] = knative_error_extensions(&sink, &err, false);
    assert_eq!(code, (KNATIVE_ERROR_CODE, ExtensionValue::Integer(500)));
    assert_eq!(
        data,
        (
            KNATIVE_ERROR_DATA,
            ExtensionValue::String(BASE64.encode("dispatch error: the sink could not be reached"))
        )
    );
    let refused = SendError::Status {
        status: 400,
        retry_after: None,
        body: Vec::new(),
    };
    let [_, code, _] = knative_error_extensions(&sink, &refused, false);
    assert_eq!(
        code,
        (KNATIVE_ERROR_CODE, ExtensionValue::Integer(400)),
        "the status stays"
    );
}
