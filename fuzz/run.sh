#!/usr/bin/env bash
# Runs every fuzz target for SECONDS each (default 60) with cargo-fuzz on the nightly toolchain,
# each on its corpus fuzz/corpus/<target> (started from the committed seeds in fuzz/seeds/<target>
# and kept between runs, not committed), and prints libFuzzer's last status line and the corpus
# size after each run. A crash is reported and the script goes on to the next target, exiting
# non-zero at the end; libFuzzer writes the input to fuzz/artifacts/<target>/. docs/testing.md
# has the runs.
set -uo pipefail
cd "$(dirname "$0")"
secs="${1:-60}"
failed=0
mkdir -p logs
# The same dependency versions as the workspace (libfuzzer-sys is added on the first build).
[ -f Cargo.lock ] || cp ../Cargo.lock Cargo.lock
for target in customrun imagepromotion_spec watch_object checkpoint_entry ce_overrides durations retry_after label_selector; do
  mkdir -p "corpus/$target"
  cp -n "seeds/$target"/* "corpus/$target/"
  if cargo +nightly fuzz run "$target" "corpus/$target" -- -max_total_time="$secs" -rss_limit_mb=2048 > "logs/$target.log" 2>&1; then
    verdict=ok
  else
    verdict="CRASH or error (logs/$target.log, artifacts/$target/)"
    failed=1
  fi
  last="$(grep -E '^#[0-9]+' "logs/$target.log" | tail -1)"
  echo "$target: ${secs}s, $verdict; $(find "corpus/$target" -type f | wc -l) inputs in the corpus; $last"
done
exit "$failed"
