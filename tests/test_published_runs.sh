#!/usr/bin/env bash
# Issue #18's published-runs table: every row of bench/published_runs.json that is not excluded
# (Megatron-LM runs of Narayanan et al. 2021 and Korthikanti et al. 2022), scored by
# `autohet evaluate` on its own plan, must come within 10 % of the published TFLOP/s per GPU
# (bench/bench_published_runs.py --check 0.10; the table is docs/cost-model.md's). And the check
# itself must bite: the same rows with one published figure raised by 15 % must fail it, naming
# that row.
# Usage: bash tests/test_published_runs.sh BUILD_DIR SOURCE_DIR
set -u
BUILD=$1 SRC=$2
PY=/usr/bin/python3
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

out=$("$PY" "$SRC/bench/bench_published_runs.py" "$BUILD/autohet" --check 0.10 2>&1) ||
    fail "a published row is off by more than 10 %:
$out"
echo "$out"
echo "$out" | grep -q "gpt-1008b" || fail "the 1T row is not in the table"

"$PY" - "$SRC/bench/published_runs.json" "$WORK/off.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
r = next(r for r in d["runs"] if r["name"] == "gpt-145.6b")
r["tflops_per_gpu"] *= 1.15
json.dump(d, open(sys.argv[2], "w"))
PY
out=$("$PY" "$SRC/bench/bench_published_runs.py" "$BUILD/autohet" "$WORK/off.json" --check 0.10 2>&1) &&
    fail "a row 15 % off passed the check: $out"
echo "$out" | grep -q "off by more than 10%: gpt-145.6b" || fail "the check does not name the row: $out"
echo "PASS test_published_runs"
