//! What the product's benchmarks share: the measures and fixtures of every benchmark
//! ([`shared`]), the real control plane of the real-tier benchmarks ([`cluster`]), a
//! program's readiness, and a program killed when dropped.

#![allow(dead_code)]

mod cluster;
mod shared;

#[allow(unused_imports)]
pub use cluster::Cluster;
pub use shared::*;

/// Runs a benchmark's body on the two-thread runtime every benchmark here measures on, with the
/// TLS provider installed first.
pub fn run<F: std::future::Future>(bench: F) -> F::Output {
    imagegate::runtime::tls::install_crypto_provider();
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a benchmark's runtime")
        .block_on(bench)
}

/// A setting of a benchmark from its environment, or `default` when unset or not a number.
pub fn env_usize(key: &str, default: usize) -> usize {
    std::env::var(key)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A TCP port free on 127.0.0.1 now (for a program's admin or sink address).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Waits until `GET 127.0.0.1:{admin}/readyz` answers 200 (a program's first list is done).
pub async fn wait_ready(admin: u16) {
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], admin));
    if let Err(e) =
        imagegate_demo::ready::admin_ready(addr, std::time::Duration::from_secs(60)).await
    {
        panic!("the program on admin port {admin} never became ready: {e}");
    }
}

/// Polls CustomRun `name` of `runs` every 2 ms until it is final; the seconds since `start`. A
/// run that does not end `Promoted`, or within 60 s, stops the benchmark.
pub async fn promoted_since(
    runs: &kube::Api<imagegate::api::CustomRun>,
    name: &str,
    start: std::time::Instant,
) -> f64 {
    loop {
        let now = runs.get(name).await.unwrap();
        if now.is_done() {
            let took = start.elapsed().as_secs_f64();
            let reason = (now.succeeded_condition())
                .and_then(|c| c.reason.clone())
                .unwrap_or_default();
            assert_eq!(reason, "Promoted", "{name}: {:?}", now.status);
            return took;
        }
        assert!(
            start.elapsed() < std::time::Duration::from_secs(60),
            "{name} never ended"
        );
        tokio::time::sleep(std::time::Duration::from_millis(2)).await;
    }
}

/// A program under measurement, killed when dropped; `term` stops it as the kubelet would.
pub struct Killed(Option<std::process::Child>);

impl Killed {
    /// Takes ownership of a started program.
    pub fn new(child: std::process::Child) -> Killed {
        Killed(Some(child))
    }

    /// Its process id (for /proc).
    pub fn pid(&self) -> u32 {
        self.0.as_ref().map_or(0, std::process::Child::id)
    }

    /// SIGTERM, then wait for it to exit.
    pub fn term(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = std::process::Command::new("kill")
                .args(["-TERM", &c.id().to_string()])
                .status();
            let _ = c.wait();
        }
    }
}

impl Drop for Killed {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}
