#!/usr/bin/env bash
# Issue 40 item 4: a pipeline across zones whose hop is about a stage's time. The prediction and
# the plan's own SVG replay of the same schedule must agree (they were 4.54 s and 9.19 s here: the
# closed form counted the hop once in the fill, not in each micro-batch's pace), `evaluate`
# re-scores the written plan to the same figure, and the breakdown's p2p term carries the pace
# (more than one round trip's hops).
# Usage: bash tests/test_plan_replay.sh BUILD_DIR SOURCE_DIR
set -u
BUILD=$(cd "$1" && pwd)
AH="$BUILD/autohet"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# One A100 per zone, 50 MB/s between the zones: LLaMA-2-7B needs both GPUs (two stages), and a
# 2048-token activation (16.8 MB) takes about a stage's time to cross.
cat >"$TMP/zones.json" <<'EOF'
{
  "nodes": [
    {"name": "east", "gpu": "A100-80G", "count": 1, "zone": "us-east"},
    {"name": "west", "gpu": "A100-80G", "count": 1, "zone": "us-west"}
  ],
  "network": {"inter_node_gb_s": 25, "inter_zone_gb_s": 0.05}
}
EOF
"$AH" plan --model llama2-7b --cluster "$TMP/zones.json" --global-batch 16 --seq-len 2048 \
    --svg "$TMP/p.svg" -o "$TMP/plan.json" >"$TMP/out" 2>&1 || fail "plan: $(cat "$TMP/out")"
cat "$TMP/out"
line=$(grep -o 'pipelines [0-9.]* s (replayed [0-9.]* s)' "$TMP/p.svg") || fail "no timeline note in the SVG"
echo "svg: $line"
/usr/bin/python3 - "$line" "$TMP/plan.json" <<'PY' || exit 1
import json, re, sys
pred, replayed = map(float, re.findall(r"[0-9.]+", sys.argv[1]))
if abs(pred - replayed) > 1e-4 * replayed:
    sys.exit(f"FAIL: the prediction's pipelines take {pred} s, the SVG's replay of them {replayed} s")
plan = json.load(open(sys.argv[2]))
pl = plan["pipelines"]
if len(pl) != 1 or len(pl[0]["stages"]) != 2 or pl[0]["micro_batches"] < 4:
    sys.exit(f"FAIL: expected one two-stage pipeline across the zones with several micro-batches: {pl}")
b = plan["predicted"]["breakdown"]
# one hop each way: 16.8 MB at 50 MB/s + 0.1 ms; the pace puts more than a round trip in the p2p term
hop = 2048 * 4096 * 2 / 0.05e9
if b["p2p_s"] < 4 * hop:
    sys.exit(f"FAIL: the p2p term {b['p2p_s']:.3f} s is not more than a round trip's hops ({2 * hop:.3f} s)")
print(f"pipelines {pred} s = replay {replayed} s; p2p {b['p2p_s']:.3f} s against one round trip {2 * hop:.3f} s")
PY
"$AH" evaluate --plan "$TMP/plan.json" >"$TMP/eval" 2>&1 || fail "evaluate: $(cat "$TMP/eval")"
grep -q '(+0.00% from this evaluation)' "$TMP/eval" || fail "evaluate disagrees with the plan's prediction: $(cat "$TMP/eval")"
echo "PASS"
