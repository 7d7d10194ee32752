#!/usr/bin/env bash
# Fuzzes each target until it finds nothing new: in chunks of CHUNK seconds (default 120) on its
# corpus fuzz/corpus/<target> (started from fuzz/seeds/<target>, kept between runs, not
# committed), stopping a target after QUIET chunks in a row (default 2) whose coverage at the end
# equals the coverage at load (libFuzzer's `cov`, the edges reached: no new edge for QUIET x CHUNK
# seconds), or after MAX chunks (default 15) if it never settles. One libFuzzer process at a
# time (no -jobs or -fork, which log to fuzz-N.log files instead); with
# IMAGEGATE_HEAVY_LOCK=<file>, each chunk runs under `flock <file>` and releases it between
# chunks, so other heavy jobs on a shared machine can interleave.
#
#   fuzz/saturate.sh [CHUNK] [QUIET] [MAX] [TARGET...]     (default: every target)
#
# Per chunk it appends a line to logs/saturation.tsv; per target it prints the chunks, the time,
# the executions, the coverage and features at the end, the corpus size and whether it crashed
# (libFuzzer writes a crash to artifacts/<target>/ and the script goes on with the next target,
# exiting non-zero at the end). docs/testing.md has the runs.
set -uo pipefail
cd "$(dirname "$0")"
chunk="${1:-120}"
quiet_needed="${2:-2}"
max_chunks="${3:-15}"
shift $(( $# < 3 ? $# : 3 ))
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(customrun imagepromotion_spec watch_object checkpoint_entry ce_overrides durations retry_after label_selector imagestreamsource checkpoint_shards controller_decision recorded_target)
mkdir -p logs
[ -f Cargo.lock ] || cp ../Cargo.lock Cargo.lock
failed=0
locked() {
  if [ -n "${IMAGEGATE_HEAVY_LOCK:-}" ]; then flock "$IMAGEGATE_HEAVY_LOCK" "$@"; else "$@"; fi
}
for target in "${targets[@]}"; do
  ./seed.sh "$target"
  quiet=0 chunks=0 runs_total=0 verdict=ok cov='?' ft='?'
  while [ "$chunks" -lt "$max_chunks" ] && [ "$quiet" -lt "$quiet_needed" ]; do
    chunks=$((chunks + 1))
    log="logs/$target.$chunks.log"
    if ! locked cargo +nightly fuzz run "$target" "corpus/$target" -- \
        -max_total_time="$chunk" -rss_limit_mb=2048 -print_final_stats=1 > "$log" 2>&1; then
      verdict="CRASH or error ($log, artifacts/$target/)"
      failed=1
    fi
    inited="$(grep -oE 'INITED cov: [0-9]+' "$log" | grep -oE '[0-9]+$' | tail -1)"
    cov="$(grep -oE 'DONE +cov: [0-9]+' "$log" | grep -oE '[0-9]+$' | tail -1)"
    ft="$(grep -E 'DONE +cov:' "$log" | grep -oE 'ft: [0-9]+' | grep -oE '[0-9]+' | tail -1)"
    runs="$(grep -oE '^Done [0-9]+ runs' "$log" | grep -oE '[0-9]+' | head -1)"
    runs_total=$((runs_total + ${runs:-0}))
    size="$(find "corpus/$target" -type f | wc -l)"
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$target" "$chunks" "$chunk" "${runs:-?}" "${inited:-?}" "${cov:-?}" "${ft:-?}" "$size" >> logs/saturation.tsv
    [ "$verdict" = ok ] || break
    if [ -n "$inited" ] && [ "$inited" = "$cov" ]; then quiet=$((quiet + 1)); else quiet=0; fi
  done
  settled=$([ "$quiet" -ge "$quiet_needed" ] && echo "settled" || echo "still growing")
  echo "$target: $chunks chunks of ${chunk}s ($((chunks * chunk))s), $runs_total runs, cov ${cov:-?}, ft ${ft:-?}, corpus $(find "corpus/$target" -type f | wc -l) inputs, $settled, $verdict"
done
exit "$failed"
