#!/usr/bin/env bash
# Starts (or tops up) the corpus of each target, fuzz/corpus/<target>, from its committed seeds:
# the files in fuzz/seeds/<target>/ and, where there is one, each case's input in
# fuzz/seeds/<target>/cases.jsonl (one JSON case a line, {"input": ..., "error": ...}; the
# property test tests/it/untrusted.rs checks what each gives), written compact as a file named
# by its SHA-1, as libFuzzer names its corpus files. Inputs already there are kept.
#
#   fuzz/seed.sh TARGET...
#
# run.sh, saturate.sh and coverage.sh call it before each target.
set -euo pipefail
cd "$(dirname "$0")"
for target in "$@"; do
  mkdir -p "corpus/$target"
  find "seeds/$target" -maxdepth 1 -type f ! -name cases.jsonl -exec cp -n {} "corpus/$target/" \;
  if [ -f "seeds/$target/cases.jsonl" ]; then
    python3 - "seeds/$target/cases.jsonl" "corpus/$target" <<'PY'
import hashlib, json, os, sys
cases, corpus = sys.argv[1:3]
with open(cases, encoding="utf-8") as lines:
    for line in lines:
        data = json.dumps(json.loads(line)["input"], separators=(",", ":"), ensure_ascii=False).encode()
        path = os.path.join(corpus, hashlib.sha1(data).hexdigest())
        if not os.path.exists(path):
            with open(path, "wb") as out:
                out.write(data)
PY
  fi
done
