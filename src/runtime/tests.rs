//! The runtime without leader election: the program runs at once, the admin server answers
//! while it runs, and shutdown cancels the program's token and stops the server. (With a
//! Lease, against the emulator: `tests/it/runtime.rs`.)

use super::*;

use std::time::Duration;

use tokio::sync::oneshot;

/// A client that is never called (no election): building one connects to nothing.
fn client() -> kube::Client {
    super::tls::install_crypto_provider();
    let config = kube::Config::new("http://127.0.0.1:1".parse().unwrap());
    kube::Client::try_from(config).unwrap()
}

fn settings() -> Settings {
    Settings {
        admin_addr: "127.0.0.1:0".parse().unwrap(),
        leader: None,
        until_ready: "the first list is not done",
    }
}

async fn get(addr: SocketAddr, path: &str) -> Result<(u16, String), reqwest::Error> {
    let resp = reqwest::get(format!("http://{addr}{path}")).await?;
    let code = resp.status().as_u16();
    Ok((code, resp.text().await?))
}

const PATIENCE: Duration = Duration::from_secs(30);

#[tokio::test]
async fn without_a_lease_the_program_runs_at_once_and_shutdown_cancels_its_token() {
    let health = Health::new();
    let (stop, stopped) = oneshot::channel::<()>();
    let runtime = Runtime::start(
        client(),
        settings(),
        Registry::default(),
        health.clone(),
        async {
            let _ = stopped.await;
        },
    )
    .await
    .unwrap();
    let addr = runtime.admin_addr();
    let (ran_tx, ran_rx) = oneshot::channel::<()>();
    let run = tokio::spawn(runtime.run(move |token| async move {
        let _ = ran_tx.send(());
        token.cancelled().await;
        Ok::<(), Ended>(())
    }));
    tokio::time::timeout(PATIENCE, ran_rx)
        .await
        .unwrap()
        .unwrap();

    assert_eq!(get(addr, "/livez").await.unwrap(), (200, "ok".into()));
    assert_eq!(
        get(addr, "/readyz").await.unwrap(),
        (503, "the first list is not done".into()),
        "not ready until the program says so"
    );
    health.set_ready(true);
    assert_eq!(get(addr, "/readyz").await.unwrap(), (200, "ok".into()));

    stop.send(()).unwrap();
    let result = tokio::time::timeout(PATIENCE, run).await.unwrap().unwrap();
    assert_eq!(result, Ok(()));
    assert!(
        get(addr, "/livez").await.is_err(),
        "the admin server stopped"
    );
}

#[tokio::test]
async fn a_failing_program_gets_its_error_back_after_the_admin_server_stopped() {
    let runtime = Runtime::start(
        client(),
        settings(),
        Registry::default(),
        Health::new(),
        std::future::pending(),
    )
    .await
    .unwrap();
    let addr = runtime.admin_addr();
    let result: Result<(), String> = runtime
        .run(|_| async { Err("the checkpoint cannot be read".to_string()) })
        .await;
    assert_eq!(result, Err("the checkpoint cannot be read".to_string()));
    assert!(
        get(addr, "/livez").await.is_err(),
        "the admin server stopped"
    );
}

impl From<Ended> for String {
    fn from(e: Ended) -> String {
        e.to_string()
    }
}

#[tokio::test]
async fn an_admin_address_in_use_is_an_error() {
    let taken = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let busy = Settings {
        admin_addr: taken.local_addr().unwrap(),
        ..settings()
    };
    let result = Runtime::start(
        client(),
        busy,
        Registry::default(),
        Health::new(),
        std::future::pending(),
    )
    .await;
    assert_eq!(
        result.err().map(|e| e.kind()),
        Some(std::io::ErrorKind::AddrInUse)
    );
}
