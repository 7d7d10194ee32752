#!/usr/bin/env bash
# How much of imagegate's own code each target's corpus reaches: runs every input of
# fuzz/corpus/<target> once through the target built with source-based coverage (`cargo fuzz
# coverage`), then prints, per file of this repository's src/ that the target reaches, the code
# regions of the functions it entered and which of them no input reached, with their lines.
# libFuzzer's `cov` counts edges in every crate (serde_json's number parser as much as ours);
# this counts ours, so a branch of a parser that no input takes is named, and a seed for it can
# be added to fuzz/seeds/<target>.
#
#   fuzz/coverage.sh [TARGET...]     (default: every target)
#
# Needs the nightly toolchain's llvm-tools (`rustup component add llvm-tools-preview
# --toolchain nightly`) and python3. Each target's lines are appended to logs/coverage.tsv (date,
# target, corpus inputs, file, regions in reached functions, of them missed). With
# IMAGEGATE_HEAVY_LOCK=<file>, each build and run is under `flock <file>`.
set -euo pipefail
cd "$(dirname "$0")"
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(customrun imagepromotion_spec watch_object checkpoint_entry ce_overrides durations retry_after label_selector imagestreamsource checkpoint_shards controller_decision recorded_target)
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
# Of the functions of src/ the corpus entered (any instantiation), the code regions no input
# reached, merged over instantiations, per file, with their lines: what the fuzzer has not found
# inside the code it does reach. (Whole functions it never entered are not counted: a file
# holds more than its target's entry point reaches.)
reached='
import json, sys
src, target, inputs, day, tsv = sys.argv[1:6]
regions = {}
for f in json.load(sys.stdin)["data"][0]["functions"]:
    name = f["filenames"][0]
    if not name.startswith(src) or f["count"] == 0:
        continue
    for r in f["regions"]:
        if r[7] != 0 or f["filenames"][r[5]] != name:
            continue
        key = (name[len(src) - 4:], r[0], r[1], r[2], r[3])
        regions[key] = max(regions.get(key, 0), r[4])
files = sorted({k[0] for k in regions})
print("%-44s %8s %7s  %s" % ("file", "regions", "missed", "lines of the missed regions"))
with open(tsv, "a") as out:
    for file in files:
        mine = [k for k in regions if k[0] == file]
        missed = sorted(k for k in mine if regions[k] == 0)
        lines = sorted({k[1] for k in missed})
        shown = ",".join(map(str, lines[:12])) + (",..." if len(lines) > 12 else "")
        print(f"{file:44} {len(mine):>8} {len(missed):>7}  {shown}")
        out.write(f"{day}\t{target}\t{inputs}\t{file}\t{len(mine)}\t{len(missed)}\n")
'
locked() {
  if [ -n "${IMAGEGATE_HEAVY_LOCK:-}" ]; then flock "$IMAGEGATE_HEAVY_LOCK" "$@"; else "$@"; fi
}
for target in "${targets[@]}"; do
  ./seed.sh "$target"
  inputs="$(find "corpus/$target" -type f | wc -l)"
  locked cargo +nightly fuzz coverage "$target" "corpus/$target" > "logs/$target.coverage.log" 2>&1
  binary="target/$host/coverage/$host/release/$target"
  echo "== $target ($inputs inputs)"
  "$llvm_cov" export "$binary" -instr-profile="coverage/$target/coverage.profdata" -skip-expansions 2>/dev/null |
    python3 -c "$reached" "$src" "$target" "$inputs" "$(date -u +%F)" logs/coverage.tsv
done
