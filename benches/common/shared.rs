//! What every benchmark of the workspace shares: percentiles, formatting, the resident set of a
//! process, and the ImageStreams they seed. The emulator's benchmark
//! (`crates/emulator/benches/emulator.rs`) includes this file by path, so it uses nothing of
//! imagegate.

#![allow(dead_code)]

/// The `p` quantile of sorted samples (nearest rank), NaN when there are none.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

/// The samples in ascending order.
pub fn sorted(samples: &[f64]) -> Vec<f64> {
    let mut s = samples.to_vec();
    s.sort_by(f64::total_cmp);
    s
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
    streams_yaml_in("bench", n)
}

/// `n` ImageStreams `<namespace>/nb-<i>` with tags t0..t2, each with its seeded digest in its
/// history (the same digests in every namespace).
pub fn streams_yaml_in(namespace: &str, n: usize) -> String {
    let mut out = String::new();
    for i in 0..n {
        out.push_str(&format!(
            "---\napiVersion: image.openshift.io/v1\nkind: ImageStream\nmetadata: {{name: nb-{i}, namespace: {namespace}}}\nspec:\n  tags:\n"
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

/// The CPU time (user + system) process `pid` has used so far, in seconds, from
/// `/proc/<pid>/stat` (0 when it cannot be read).
pub fn cpu_seconds(pid: u32) -> f64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return 0.0;
    };
    // The fields after the command (which may hold spaces) start after the last ')'.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map_or("", |(_, rest)| rest)
        .split_whitespace()
        .collect();
    // utime and stime are fields 14 and 15 of the line; what follows the command starts at
    // field 3 (index 0), so they are indexes 11 and 12.
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // /proc counts in USER_HZ, which Linux fixes at 100 for its user-space ABI.
    (ticks(11) + ticks(12)) / 100.0
}
