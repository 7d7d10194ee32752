//! The guard at connect time: a name that resolves only to loopback (`localhost`, here) is never
//! connected to for a tenant's sink, whatever the static check let through, unless the operator
//! allows the name; a client without a guard (the single source's) connects.

use std::time::Duration;

use crate::source::deliver::client::SinkClient;
use crate::source::deliver::guard::Guard;
use crate::source::deliver::{ContentMode, Encoded};

async fn listener() -> u16 {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = l.local_addr().unwrap().port();
    let app = axum::Router::new().fallback(|| async { axum::http::StatusCode::ACCEPTED });
    tokio::spawn(async move { axum::serve(l, app).await });
    port
}

fn event() -> Encoded {
    use cloudevents::EventBuilder;
    let e = cloudevents::EventBuilderV10::new()
        .id("1")
        .ty("t")
        .source("/s")
        .build()
        .unwrap();
    Encoded::new(e, ContentMode::Binary).unwrap()
}

#[tokio::test]
async fn a_tenants_sink_name_that_resolves_to_loopback_is_not_connected_to() {
    let port = listener().await;
    let url: reqwest::Url = format!("http://localhost:{port}/").parse().unwrap();
    let guarded =
        SinkClient::shared_guarded(Some(Duration::from_secs(5)), None, Some(&Guard::default()))
            .unwrap();
    let err = guarded.post(&url, event()).await.unwrap_err();
    assert!(
        err.to_string().contains("resolves only to loopback"),
        "{err}"
    );
    let allowed = Guard {
        allowed: vec!["localhost".into()],
        ..Guard::default()
    };
    let allowed =
        SinkClient::shared_guarded(Some(Duration::from_secs(5)), None, Some(&allowed)).unwrap();
    assert_eq!(allowed.post(&url, event()).await.unwrap(), 202);
    let single = SinkClient::shared(Some(Duration::from_secs(5)), None).unwrap();
    assert_eq!(single.post(&url, event()).await.unwrap(), 202);
}
