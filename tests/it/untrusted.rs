//! The parsers of outside input never panic: a fast property test of the entry points the fuzz
//! targets in `fuzz/` run (`imagegate::untrusted`). Each entry point gets well-formed seeds (the
//! ones here and the fuzz target's committed `fuzz/seeds/<target>/*`; each must be taken, so that
//! the mutations start from real input) and then thousands of inputs made from them by a
//! deterministic generator: bytes flipped, inserted, deleted, duplicated and spliced between
//! seeds, truncations, and bytes the grammars care about. A panic fails the test and names the
//! input. A crash a fuzz run finds becomes a seed or a case here.
//!
//! A target's `fuzz/seeds/<target>/cases.jsonl` holds one case a line, `{"input": <the JSON the
//! target reads>, "error": "<the exact message>"}` (refused with that message) or without
//! `error` (taken): the inputs that reach each error branch, which start the fuzz corpus too
//! (`fuzz/seed.sh`), so the fuzzer does not have to find them, and whose messages are checked
//! here.

use imagegate::untrusted;

/// Inputs per entry point.
const ROUNDS: usize = 3_000;

/// Bytes that matter to the grammars under test.
const INTERESTING: &[u8] = b"{}[]\":,;=|/\\!()<>-+.0123456789eEhmsunPTYMDWHS \t\n\0\xff\xc3@#";

/// xorshift64*: deterministic, so a failure reproduces.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }

    fn byte(&mut self) -> u8 {
        if self.next().is_multiple_of(2) {
            INTERESTING[self.below(INTERESTING.len())]
        } else {
            self.next() as u8
        }
    }
}

/// One input: a seed changed by one to four mutations.
fn mutate(rng: &mut Rng, seeds: &[&[u8]]) -> Vec<u8> {
    let mut out = seeds[rng.below(seeds.len())].to_vec();
    for _ in 0..=rng.below(4) {
        let at = rng.below(out.len() + 1);
        match rng.below(7) {
            0 if !out.is_empty() => {
                let i = rng.below(out.len());
                out[i] ^= 1 << rng.below(8);
            }
            1 => {
                let b = rng.byte();
                out.insert(at, b);
            }
            2 if at < out.len() => {
                let end = at + 1 + rng.below((out.len() - at).min(16));
                out.drain(at..end);
            }
            3 if at < out.len() => {
                let end = at + 1 + rng.below((out.len() - at).min(16));
                let copy = out[at..end].to_vec();
                out.splice(at..at, copy);
            }
            4 => {
                let other = seeds[rng.below(seeds.len())];
                let from = rng.below(other.len());
                out.splice(at..at, other[from..].iter().copied());
            }
            5 => out.truncate(at),
            _ => {
                let b = rng.byte();
                if let Some(slot) = out.get_mut(at) {
                    *slot = b;
                }
            }
        }
    }
    out
}

/// The directory of fuzz target `name`'s committed seeds.
fn seed_dir(name: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/seeds")
        .join(name)
}

/// The committed seeds of fuzz target `name` (`fuzz/seeds/<name>/*` but `cases.jsonl`), which
/// start its corpus.
fn seed_files(name: &str) -> Vec<Vec<u8>> {
    let dir = seed_dir(name);
    let mut paths: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.expect("a seed file").path())
        .filter(|path| !path.ends_with(CASES))
        .collect();
    paths.sort();
    assert!(!paths.is_empty(), "{} has no seeds", dir.display());
    paths
        .iter()
        .map(|path| std::fs::read(path).expect("a readable seed"))
        .collect()
}

/// The file of a target's cases.
const CASES: &str = "cases.jsonl";

/// One line of `cases.jsonl`.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Case {
    /// The input, as JSON (the target reads its compact text).
    input: serde_json::Value,
    /// The exact message it is refused with; taken when absent.
    #[serde(default)]
    error: Option<String>,
}

/// The committed cases of fuzz target `name` (none without a `cases.jsonl`): each input and
/// what it must give.
fn cases(name: &str) -> Vec<(Vec<u8>, Result<(), String>)> {
    let path = seed_dir(name).join(CASES);
    let Ok(text) = std::fs::read_to_string(&path) else {
        return Vec::new();
    };
    text.lines()
        .enumerate()
        .map(|(i, line)| {
            let case: Case = serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("{}:{}: {e}", path.display(), i + 1));
            let input = serde_json::to_vec(&case.input).expect("JSON");
            (input, case.error.map_or(Ok(()), Err))
        })
        .collect()
}

/// An entry point that only says whether it took the input.
fn taken(yes: bool) -> Result<(), String> {
    if yes { Ok(()) } else { Err("not taken".into()) }
}

/// Runs `parse` on every seed, the ones given and the fuzz target's committed ones (each must be
/// taken), on each committed case (each must give what it says), and on [`ROUNDS`] mutations of
/// them all.
fn never_panics(name: &str, given: &[&[u8]], parse: fn(&[u8]) -> Result<(), String>) {
    let files = seed_files(name);
    let cases = cases(name);
    let mut wrong = Vec::new();
    for seed in given.iter().copied().chain(files.iter().map(Vec::as_slice)) {
        if let Err(why) = parse(seed) {
            wrong.push(format!(
                "the seed {:?} is not taken: {why}",
                String::from_utf8_lossy(seed)
            ));
        }
    }
    for (input, expected) in &cases {
        let got = parse(input);
        if &got != expected {
            wrong.push(format!(
                "the case {:?} gives {got:?}, not {expected:?}",
                String::from_utf8_lossy(input)
            ));
        }
    }
    assert!(wrong.is_empty(), "{name}:\n{}", wrong.join("\n"));
    let seeds: Vec<&[u8]> = given
        .iter()
        .copied()
        .chain(files.iter().map(Vec::as_slice))
        .chain(cases.iter().map(|(input, _)| input.as_slice()))
        .collect();
    let seeds = seeds.as_slice();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ name.len() as u64);
    for _ in 0..ROUNDS {
        let input = mutate(&mut rng, seeds);
        let caught = std::panic::catch_unwind(|| parse(&input));
        assert!(
            caught.is_ok(),
            "{name} panicked on {:?}",
            String::from_utf8_lossy(&input)
        );
    }
}

const DIGEST: &str = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";

#[test]
fn customrun_params_and_inline_specs() {
    let named = format!(
        r#"{{"apiVersion":"tekton.dev/v1beta1","kind":"CustomRun","metadata":{{"name":"r","namespace":"ds"}},"spec":{{"customRef":{{"apiVersion":"imagegate.dev/v1alpha1","kind":"ImagePromotion","name":"nb"}},"serviceAccountName":"p","params":[{{"name":"imagestream","value":"ds/nb"}},{{"name":"digest","value":"{DIGEST}"}},{{"name":"action","value":"promote"}},{{"name":"validation-status","value":"Succeeded"}},{{"name":"allow-rolled-back","value":"false"}}]}}}}"#
    );
    let inline = r#"{"apiVersion":"tekton.dev/v1beta1","kind":"CustomRun","metadata":{"name":"r","namespace":"ds"},"spec":{"customSpec":{"apiVersion":"imagegate.dev/v1alpha1","kind":"ImagePromotion","spec":{"servedTag":"latest","previousTag":"prev","checks":{"maxAge":"720h","maxSize":"5Gi","nonRootUser":true},"validation":{"pipeline":"p","tasks":["validate"]}}},"params":[{"name":"imagestream","value":"nb"},{"name":"action","value":"rollback"}]}}"#;
    never_panics(
        "customrun",
        &[named.as_bytes(), inline.as_bytes()],
        untrusted::customrun,
    );
}

#[test]
fn imagepromotion_specs() {
    let spec = r#"{"imageStream":"nb","candidateTag":"candidate","servedTag":"latest","checks":{"requiredLabels":["a","b=c"],"allowedRegistries":["quay.io/org/"],"allowedArchitectures":["amd64"],"allowedOS":["linux"],"maxAge":"1h30m","maxSize":"1.5Gi","nonRootUser":true},"validation":{"required":true,"pipeline":"imagegate-promote","tasks":["validate","scan"]}}"#;
    never_panics(
        "imagepromotion_spec",
        &[spec.as_bytes(), b"{}"],
        untrusted::imagepromotion_spec,
    );
}

#[test]
fn watched_objects() {
    let object = format!(
        r#"{{"kind":"ImageStream","apiVersion":"image.openshift.io/v1","metadata":{{"name":"nb","namespace":"ds","uid":"u1","resourceVersion":"7"}},"spec":{{"tags":[{{"name":"latest","from":{{"kind":"DockerImage","name":"quay.io/x/nb:latest"}}}}]}},"status":{{"dockerImageRepository":"r/ds/nb","tags":[{{"tag":"latest","items":[{{"image":"{DIGEST}","dockerImageReference":"quay.io/x/nb@{DIGEST}","generation":2,"created":"2026-12-01T10:00:00Z"}}],"conditions":[{{"type":"ImportSuccess","status":"False","reason":"NotFound","generation":3}}]}}]}}}}"#
    );
    never_panics("watch_object", &[object.as_bytes()], |data| {
        taken(untrusted::watch_object(data))
    });
}

#[test]
fn checkpoint_entries() {
    let compact = format!("u-1;latest=B{},3;old=,1,2|ns/nb", "A".repeat(43));
    let json =
        format!(r#"{{"u":"u-1","t":{{"latest":{{"d":"{DIGEST}","g":3}},"old":{{"g":1,"f":2}}}}}}"#);
    never_panics(
        "checkpoint_entry",
        &[compact.as_bytes(), json.as_bytes()],
        |data| taken(untrusted::checkpoint_entry(data)),
    );
}

#[test]
fn ce_overrides() {
    never_panics(
        "ce_overrides",
        &[
            br#"{"extensions":{"cluster":"prod-east","team":"ds"}}"#,
            b"null",
        ],
        |data| taken(untrusted::ce_overrides(data)),
    );
}

#[test]
fn durations() {
    never_panics(
        "durations",
        &[
            b"1h30m",
            b"1.5h",
            b"300ms",
            b"PT0.2S",
            b"P1DT2H3M4.5S",
            b"0",
        ],
        |data| taken(untrusted::durations(data)),
    );
}

#[test]
fn retry_after() {
    never_panics(
        "retry_after",
        &[
            b"120",
            b"Sun, 06 Nov 1994 08:49:37 GMT",
            b"Sunday, 06-Nov-94 08:49:37 GMT",
            b"Sun Nov  6 08:49:37 1994",
        ],
        |data| taken(untrusted::retry_after(data)),
    );
}

#[test]
fn label_selectors() {
    never_panics(
        "label_selector",
        &[
            b"team in (ds,ml),!old,tier!=x,gen>3",
            b"opendatahub.io/notebook-image=true",
        ],
        |data| taken(untrusted::label_selector(data)),
    );
}

#[test]
fn imagestreamsources_and_their_sinks() {
    never_panics("imagestreamsource", &[], |data| {
        taken(untrusted::imagestreamsource(data))
    });
}

#[test]
fn checkpoint_shards_as_listed() {
    never_panics("checkpoint_shards", &[], |data| {
        taken(untrusted::checkpoint_shards(data))
    });
}

#[test]
fn controller_decisions_over_hostile_objects() {
    never_panics("controller_decision", &[], |data| {
        taken(untrusted::controller_decision(data))
    });
}

#[test]
fn recorded_targets() {
    never_panics("recorded_target", &[], |data| {
        taken(untrusted::recorded_target(data))
    });
}
