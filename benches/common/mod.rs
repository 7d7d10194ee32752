//! What the benchmarks share: percentiles, formatting, and the resident set of a process.

#![allow(dead_code)]

/// The `p` quantile of sorted samples (nearest rank), NaN when there are none.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

/// Seconds as milliseconds with two decimals.
pub fn ms(seconds: f64) -> String {
    format!("{:.2} ms", seconds * 1000.0)
}

/// A field of `/proc/<pid>/status` in KiB (`VmRSS:` now, `VmHWM:` the peak), 0 if unreadable.
pub fn rss_kib(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

/// Waits until `GET 127.0.0.1:{admin}/readyz` answers 200 (a program's first list is done).
pub async fn wait_ready(admin: u16) {
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], admin));
    if let Err(e) = imagegate::admin::wait_ready(addr, std::time::Duration::from_secs(60)).await {
        panic!("the program on admin port {admin} never became ready: {e}");
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

/// The heading of a benchmark's report and its table header.
pub fn report_header(title: &str, setup: &str) {
    println!("## {title}");
    println!();
    println!(
        "{setup}; {} cores",
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(0)
    );
    println!();
    println!("| measure | value |");
    println!("|---|---|");
}

/// The digest of tag `tag` of stream `i` in import round `round` (0: the seeded one).
pub fn digest(i: usize, tag: usize, round: usize) -> String {
    format!("sha256:{round:08x}{tag:08x}{}{i:016x}", "0".repeat(32))
}

/// `n` ImageStreams `bench/nb-<i>` with tags t0..t2, each with its seeded digest in its history.
pub fn streams_yaml(n: usize) -> String {
    let mut out = String::new();
    for i in 0..n {
        out.push_str(&format!(
            "---\napiVersion: image.openshift.io/v1\nkind: ImageStream\nmetadata: {{name: nb-{i}, namespace: bench}}\nspec:\n  tags:\n"
        ));
        for t in 0..3 {
            out.push_str(&format!(
                "  - {{name: t{t}, from: {{kind: DockerImage, name: \"quay.io/org/nb-{i}:t{t}\"}}}}\n"
            ));
        }
        out.push_str("status:\n  tags:\n");
        for t in 0..3 {
            let d = digest(i, t, 0);
            out.push_str(&format!(
                "  - tag: t{t}\n    items:\n    - {{created: \"2026-11-30T00:00:00Z\", dockerImageReference: \"quay.io/org/nb-{i}@{d}\", image: \"{d}\", generation: 1}}\n"
            ));
        }
    }
    out
}
