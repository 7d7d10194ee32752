//! Waiting for a program the demo started: its admin server's `GET /readyz` answers 200 once its
//! first list is done. (The product serves `/readyz`; only the demo, which starts the programs
//! itself, waits on it.)

use std::net::SocketAddr;
use std::time::Duration;

/// Waits until the admin server at `addr` answers `GET /readyz` with 200, polling every 20 ms.
/// The error says how long it waited and the last answer.
pub async fn admin_ready(addr: SocketAddr, timeout: Duration) -> Result<(), String> {
    let url = format!("http://{addr}/readyz");
    let http = reqwest::Client::new();
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let last = match http.get(&url).send().await {
            Ok(r) if r.status() == reqwest::StatusCode::OK => return Ok(()),
            Ok(r) => {
                let code = r.status();
                format!("{code}: {}", r.text().await.unwrap_or_default().trim())
            }
            Err(e) => e.to_string(),
        };
        if tokio::time::Instant::now() >= deadline {
            return Err(format!("{url} was not ready within {timeout:?} ({last})"));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use imagegate::runtime::admin::{Health, router, serve};
    use tokio::net::TcpListener;

    use super::*;

    #[tokio::test]
    async fn it_reports_the_reason_until_the_program_is_ready() {
        imagegate::runtime::tls::install_crypto_provider();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let health = Health::new();
        health.set_not_ready("the ImageStreams have not been listed yet");
        let registry = Arc::new(prometheus_client::registry::Registry::default());
        let app = router(health.clone(), registry);
        tokio::spawn(serve(listener, app, std::future::pending::<()>()));
        let err = admin_ready(addr, Duration::from_millis(100))
            .await
            .unwrap_err();
        assert!(err.contains("503"), "{err}");
        assert!(err.contains("have not been listed yet"), "{err}");
        health.set_ready(true);
        admin_ready(addr, Duration::from_secs(10)).await.unwrap();
    }
}
