#!/usr/bin/env bash
# Runs every fuzz target for SECONDS each (default 60) with cargo-fuzz on the nightly toolchain,
# each on its corpus fuzz/corpus/<target> (started from the committed seeds in fuzz/seeds/<target>, seed.sh,
# and kept between runs, not committed), and prints per target the runs, the corpus size before and
# after, and libFuzzer's coverage when the corpus was loaded and at the end (equal: nothing new). A crash is reported and the script goes on to the next target, exiting
# non-zero at the end; libFuzzer writes the input to fuzz/artifacts/<target>/. docs/testing.md
# has the runs.
set -uo pipefail
cd "$(dirname "$0")"
secs="${1:-60}"
failed=0
mkdir -p logs
# The same dependency versions as the workspace (libfuzzer-sys is added on the first build).
[ -f Cargo.lock ] || cp ../Cargo.lock Cargo.lock
for target in customrun imagepromotion_spec watch_object checkpoint_entry ce_overrides durations retry_after label_selector imagestreamsource checkpoint_shards controller_decision recorded_target; do
  ./seed.sh "$target"
  before="$(find "corpus/$target" -type f | wc -l)"
  if cargo +nightly fuzz run "$target" "corpus/$target" -- -max_total_time="$secs" -rss_limit_mb=2048 > "logs/$target.log" 2>&1; then
    verdict=ok
  else
    verdict="CRASH or error (logs/$target.log, artifacts/$target/)"
    failed=1
  fi
  # Coverage when the corpus was loaded, and at the end: equal means this run found nothing new.
  inited="$(grep -oE 'INITED cov: [0-9]+' "logs/$target.log" | grep -oE '[0-9]+$' | tail -1)"
  done_cov="$(grep -oE 'DONE +cov: [0-9]+' "logs/$target.log" | grep -oE '[0-9]+$' | tail -1)"
  runs="$(grep -oE '^Done [0-9]+ runs' "logs/$target.log" | grep -oE '[0-9]+' | head -1)"
  after="$(find "corpus/$target" -type f | wc -l)"
  echo "$target: ${secs}s, $verdict; ${runs:-?} runs; corpus $before -> $after inputs; coverage ${inited:-?} -> ${done_cov:-?}"
done
exit "$failed"
