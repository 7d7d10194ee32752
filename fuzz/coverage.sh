#!/usr/bin/env bash
# How much of imagegate's own code each target's corpus reaches: runs every input of
# fuzz/corpus/<target> once through the target built with source-based coverage (`cargo fuzz
# coverage`), then prints, per file of this repository's src/ that the target reaches, the
# regions and lines covered (llvm-cov's report). libFuzzer's `cov` counts edges in every crate
# (serde_json's number parser as much as ours); this counts ours, so a region of a parser that
# no input reaches is named, and a seed for it can be added to fuzz/seeds/<target>.
#
#   fuzz/coverage.sh [TARGET...]     (default: every target)
#
# Needs the nightly toolchain's llvm-tools (`rustup component add llvm-tools-preview
# --toolchain nightly`). Each target's lines are appended to logs/coverage.tsv (date, target,
# corpus inputs, file, regions, regions missed, lines, lines missed). With
# IMAGEGATE_HEAVY_LOCK=<file>, each build and run is under `flock <file>`.
set -euo pipefail
cd "$(dirname "$0")"
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(customrun imagepromotion_spec watch_object checkpoint_entry ce_overrides durations retry_after label_selector)
sysroot="$(rustc +nightly --print sysroot)"
llvm_cov="$(find "$sysroot/lib/rustlib" -name llvm-cov -type f | head -1)"
if [ -z "$llvm_cov" ]; then
  echo "llvm-cov not found under $sysroot: rustup component add llvm-tools-preview --toolchain nightly" >&2
  exit 2
fi
host="$(rustc +nightly -vV | sed -n 's/^host: //p')"
src="$(cd .. && pwd)/src/"
mkdir -p logs
[ -f Cargo.lock ] || cp ../Cargo.lock Cargo.lock
locked() {
  if [ -n "${IMAGEGATE_HEAVY_LOCK:-}" ]; then flock "$IMAGEGATE_HEAVY_LOCK" "$@"; else "$@"; fi
}
for target in "${targets[@]}"; do
  mkdir -p "corpus/$target"
  cp -n "seeds/$target"/* "corpus/$target/"
  inputs="$(find "corpus/$target" -type f | wc -l)"
  locked cargo +nightly fuzz coverage "$target" "corpus/$target" > "logs/$target.coverage.log" 2>&1
  binary="target/$host/coverage/$host/release/$target"
  echo "== $target ($inputs inputs)"
  printf '%-48s %8s %8s %7s %8s %8s %7s\n' file regions missed cover lines missed cover
  "$llvm_cov" report "$binary" -instr-profile="coverage/$target/coverage.profdata" 2>/dev/null |
    awk -v src="$src" -v target="$target" -v inputs="$inputs" -v day="$(date -u +%F)" '
      # Columns: file, regions, missed, cover, functions, missed, executed, lines, missed, cover.
      { file = $1; sub("^/?", "/", file) }
      index(file, src) == 1 && $3 != $2 {
        short = substr(file, length(src) - 3)
        printf "%-48s %8d %8d %7s %8d %8d %7s\n", short, $2, $3, $4, $8, $9, $10
        printf "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", day, target, inputs, short, $2, $3, $8, $9 >> "logs/coverage.tsv"
      }'
done
