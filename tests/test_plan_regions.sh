#!/usr/bin/env bash
# Regions in plan and evaluate (issue 39): on a cluster whose plan crosses two regions, the
# egress $ is in plan's and evaluate's price and in evaluate --json with the bytes per iteration
# by link class; without "egress_usd_per_gb" the price says "egress unpriced"; a slower "links"
# override between the regions makes the same plan slower (every transfer is priced on the link
# between its nodes); a link faster than its class keeps the planner's lower bound below its plan;
# a one-zone cluster's price says nothing of egress. Egress in the search: on
# examples/clusters/two-region.json, --objective cost with the egress priced chooses a plan that
# sends fewer bytes across zones and regions, and costs less per token (egress counted), than the
# plan it chooses with the egress unpriced; --budget caps the GPUs' and the egress's $/h together;
# simulate counts the egress in its $; checkpoint traffic counted with --ckpt-every (and said not
# counted without). llama2-70b, planning only.
# Usage: bash tests/test_plan_regions.sh BUILD_DIR SOURCE_DIR
. "$(dirname "$0")/check_common.sh"
cluster() { # cluster FILE NETWORK-MEMBERS: one H100 node in us-east-1, one A100 node in eu-west-1
    cat >"$1" <<JSON
{"nodes": [
 {"name": "us-0", "gpu": "H100", "count": 8, "zone": "us-east-1a", "region": "us-east-1", "usd_per_gpu_hour": 3.9},
 {"name": "eu-0", "gpu": "A100-80G", "count": 8, "zone": "eu-west-1a", "region": "eu-west-1", "usd_per_gpu_hour": 1.6}],
 "network": {$2}}
JSON
}
cluster "$TMP/priced.json" '"egress_usd_per_gb": {"inter_zone": 0.01, "inter_region": 0.02}'
cluster "$TMP/unpriced.json" ''
cluster "$TMP/slow.json" '"egress_usd_per_gb": {"inter_zone": 0.01, "inter_region": 0.02}, "links": [{"between": ["us-east-1", "eu-west-1"], "gb_s": 0.01, "private": true}]'
RUN=(--model llama2-70b --global-batch 32 --seq-len 1024)

"$AH" plan "${RUN[@]}" --cluster "$TMP/priced.json" -o "$TMP/plan.json" >"$TMP/plan.txt" 2>&1
st=$?; check "plan on two regions: $(tail -3 "$TMP/plan.txt")" "$st"
grep -q "^predicted: .*per million tokens (egress \$[0-9.]*/h)" "$TMP/plan.txt"
st=$?; check "plan's price has the egress: $(grep predicted "$TMP/plan.txt")" "$st"
grep -q "traffic per iteration: .* inter-region [1-9][0-9.]* GB (\$[0-9.]*/h); egress \$[0-9.]* per iteration (bytes cross regions on links not marked private)" "$TMP/plan.txt"
st=$?; check "plan's traffic crosses regions, in the open: $(grep traffic "$TMP/plan.txt")" "$st"

"$AH" evaluate --plan "$TMP/plan.json" --json >"$TMP/eval.json" 2>&1
st=$?; check "evaluate --json: $(head -c 300 "$TMP/eval.json")" "$st"
$PY - "$TMP/eval.json" <<'PYEOF'
import json, sys
d = json.load(open(sys.argv[1]))
b = d["bytes_per_iteration"]
assert b["inter-region"] > 0 and b["intra-node"] > 0, b
assert d["egress_usd_per_hour"] > 0 and d["egress_unpriced"] is False, d
# $/h = the GPUs' (16 x (3.9 + 1.6) / 2 ... as the plan uses them) + egress: egress is part of it
assert d["usd_per_hour"] > d["egress_usd_per_hour"], d
by = d["egress_usd_per_hour_by_link"]
assert abs(by["inter-region"] + by["inter-zone"] - d["egress_usd_per_hour"]) < 1e-9 * d["egress_usd_per_hour"], by
PYEOF
check "evaluate --json has bytes by link class and egress \$/h" $?

# checkpoint traffic (docs/cost-model.md "Checkpoint traffic"): not counted without --ckpt-every,
# said; with a save every 10, replicas and the bucket in eu-west-1, the checkpoint bytes that leave
# a region cross the one us <-> eu link (each node's partner is the other; us-0's upload to eu),
# priced at its $0.02/GB (eu-0's upload stays in eu: inter-node, $0);
# a bucket in none of the cluster's regions is refused, named
"$AH" evaluate --plan "$TMP/plan.json" >"$TMP/nockpt.txt" 2>&1
grep -q "^checkpoint traffic: not counted (no --ckpt-every" "$TMP/nockpt.txt"
st=$?; check "without --ckpt-every: not counted, said: $(grep checkpoint "$TMP/nockpt.txt")" "$st"
AWS_REGION=eu-west-1 "$AH" evaluate --plan "$TMP/plan.json" --ckpt-every 10 --replica-memory-gb 1000 \
    --cloud s3://ckpt-bucket/run --json >"$TMP/ckpt.json" 2>"$TMP/ckpt.err"
$PY - "$TMP/ckpt.json" "$TMP/eval.json" <<'PYEOF'
import json, sys
d, base = (json.load(open(p)) for p in sys.argv[1:3])
k, c = d["bytes_per_iteration_by_kind"]["checkpoint"], d["checkpoint"]
assert c["every"] == 10 and k["inter-region"] > 0 and k["inter-zone"] == 0, (k, c)  # inter-node: eu-0's upload
assert abs(c["egress_usd_per_iteration"] - k["inter-region"] / 1e9 * 0.02) < 1e-12, (k, c)
assert abs(d["bytes_per_iteration"]["inter-region"] - base["bytes_per_iteration"]["inter-region"] - k["inter-region"]) < 1, d
assert c["blocked_s_per_iteration"] > 0 and abs(d["breakdown"]["ckpt_s"] - c["blocked_s_per_iteration"]) < 1e-12, c
assert abs(d["iteration_s"] - base["iteration_s"] - d["breakdown"]["ckpt_s"]) < 1e-9, (d["iteration_s"], base["iteration_s"])
x = d["region_crossings"][0]["bytes_per_iteration"]
assert abs(x["checkpoint"] - k["inter-region"]) < 1, x
PYEOF
st=$?; check "evaluate --ckpt-every: checkpoint bytes across regions and their egress: $(head -c 300 "$TMP/ckpt.err")" "$st"
AWS_REGION=ap-south-1 "$AH" evaluate --plan "$TMP/plan.json" --ckpt-every 10 --cloud s3://ckpt-bucket/run >"$TMP/far.txt" 2>&1
st=$?
[ "$st" = 2 ] && grep -q "the bucket's region ap-south-1 .* is none of the cluster's regions" "$TMP/far.txt"
st=$?; check "a bucket in none of the cluster's regions is refused: $(head -c 300 "$TMP/far.txt")" "$st"
# --cloud-region (simulate's flag) places the bucket before AWS_REGION does: the same figures
AWS_REGION=ap-south-1 "$AH" evaluate --plan "$TMP/plan.json" --ckpt-every 10 --replica-memory-gb 1000 \
    --cloud s3://ckpt-bucket/run --cloud-region eu-west-1 --json >"$TMP/ckpt-r.json" 2>&1
$PY -c 'import json, sys; a, b = (json.load(open(p)) for p in sys.argv[1:3]); assert a["checkpoint"] == b["checkpoint"] and a["bytes_per_iteration_by_kind"] == b["bytes_per_iteration_by_kind"], (a["checkpoint"], b["checkpoint"])' \
    "$TMP/ckpt.json" "$TMP/ckpt-r.json"
st=$?; check "--cloud-region eu-west-1 counts as AWS_REGION=eu-west-1: $(head -c 200 "$TMP/ckpt-r.json")" "$st"
# a one-region cluster (both nodes in us-east-1) and AWS_REGION naming another region: the bucket is
# outside the cluster, each node's upload crosses a region at its $0.02/GB (until session 17 the bucket
# was taken to be in us-east-1 whatever AWS_REGION said: $0); AWS_REGION=us-east-1: nothing crosses
sed 's/"zone": "eu-west-1a", "region": "eu-west-1"/"zone": "us-east-1b", "region": "us-east-1"/' "$TMP/priced.json" >"$TMP/one.json"
for r in eu-west-1 us-east-1; do
    AWS_REGION=$r "$AH" evaluate --plan "$TMP/plan.json" --cluster "$TMP/one.json" --ckpt-every 10 \
        --cloud s3://ckpt-bucket/run --json >"$TMP/one-$r.json" 2>"$TMP/one-$r.err"
done
$PY - "$TMP/one-eu-west-1.json" "$TMP/one-us-east-1.json" <<'PYEOF'
import json, sys
far, near = (json.load(open(p)) for p in sys.argv[1:3])
k, c = far["bytes_per_iteration_by_kind"]["checkpoint"], far["checkpoint"]
assert k.get("inter-region", 0) > 0 and abs(c["egress_usd_per_iteration"] - k["inter-region"] / 1e9 * 0.02) < 1e-12, (k, c)
assert near["bytes_per_iteration_by_kind"]["checkpoint"].get("inter-region", 0) == 0, near["bytes_per_iteration_by_kind"]
assert near["checkpoint"]["egress_usd_per_iteration"] == 0, near["checkpoint"]
PYEOF
st=$?; check "one region, AWS_REGION=eu-west-1: the uploads cross a region: $(head -c 300 "$TMP/one-eu-west-1.err")" "$st"
"$AH" evaluate --plan "$TMP/plan.json" --ckpt-every 10 --cloud s3://ckpt-bucket/run --cloud-region mars >"$TMP/mars.txt" 2>&1
st=$?
[ "$st" = 2 ] && grep -q -- "--cloud-region mars: none of the cluster's regions (us-east-1, eu-west-1)" "$TMP/mars.txt"
st=$?; check "an unknown --cloud-region is refused, the regions named: $(head -c 200 "$TMP/mars.txt")" "$st"

"$AH" evaluate --plan "$TMP/plan.json" --cluster "$TMP/unpriced.json" >"$TMP/unpriced.txt" 2>&1
grep -q "^price: .*per million tokens, egress unpriced" "$TMP/unpriced.txt"
st=$?; check "without egress prices the price says so: $(grep price "$TMP/unpriced.txt")" "$st"

"$AH" evaluate --plan "$TMP/plan.json" --json >"$TMP/fast.json" 2>&1
"$AH" evaluate --plan "$TMP/plan.json" --cluster "$TMP/slow.json" --json >"$TMP/slow.json.out" 2>&1
$PY - "$TMP/fast.json" "$TMP/slow.json.out" <<'PYEOF'
import json, sys
fast, slow = (json.load(open(p)) for p in sys.argv[1:3])
assert slow["iteration_s"] > fast["iteration_s"] * 1.05, (fast["iteration_s"], slow["iteration_s"])
PYEOF
check "a slower link between the regions makes the plan slower" $?

# a link faster than its class: the planner's lower bound stays below the plan it finds
cluster "$TMP/fast.json" '"links": [{"between": ["us-east-1", "eu-west-1"], "gb_s": 50, "latency_us": 5}]'
"$AH" plan "${RUN[@]}" --cluster "$TMP/fast.json" --json >"$TMP/fast_plan.json" 2>"$TMP/fast_plan.err"
$PY - "$TMP/fast_plan.json" <<'PYEOF'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["lower_bound_s"] <= d["iteration_overlap_s"] * (1 + 1e-9), (d["lower_bound_s"], d["iteration_overlap_s"])
PYEOF
st=$?; check "lower bound with a fast link: $(head -c 300 "$TMP/fast_plan.err")" "$st"

"$AH" plan --model llama2-7b --global-batch 64 --seq-len 1024 --cluster "$2/examples/clusters/paper-24.json" >"$TMP/one.txt" 2>&1
grep "^predicted:" "$TMP/one.txt" | grep -qv egress
st=$?; check "a one-zone cluster's price says nothing of egress: $(grep predicted "$TMP/one.txt")" "$st"

# --objective cost weighs the egress: the example with its prices, and with them taken out
TWO="$2/examples/clusters/two-region.json"
$PY - "$TWO" "$TMP/two-unpriced.json" <<'PYEOF'
import json, sys
c = json.load(open(sys.argv[1]))
del c["network"]["egress_usd_per_gb"]
for l in c["network"]["links"]:
    l.pop("usd_per_gb", None)
json.dump(c, open(sys.argv[2], "w"))
PYEOF
"$AH" plan "${RUN[@]}" --cluster "$TWO" --objective cost -o "$TMP/cost.json" >"$TMP/cost.txt" 2>&1
st=$?; check "plan --objective cost, egress priced: $(tail -3 "$TMP/cost.txt")" "$st"
"$AH" plan "${RUN[@]}" --cluster "$TMP/two-unpriced.json" --objective cost -o "$TMP/cost0.json" >"$TMP/cost0.txt" 2>&1
st=$?; check "plan --objective cost, egress unpriced: $(tail -3 "$TMP/cost0.txt")" "$st"
"$AH" evaluate --plan "$TMP/cost.json" --json >"$TMP/cost.eval" 2>&1
"$AH" evaluate --plan "$TMP/cost0.json" --cluster "$TWO" --json >"$TMP/cost0.eval" 2>&1 # at the egress prices
$PY - "$TMP/cost.eval" "$TMP/cost0.eval" <<'PYEOF'
import json, sys
priced, blind = (json.load(open(p)) for p in sys.argv[1:3])
cross = lambda d: d["bytes_per_iteration"]["inter-zone"] + d["bytes_per_iteration"]["inter-region"]
print(f"  bytes across zones and regions per iteration: {cross(priced) / 1e9:.3f} GB egress priced, "
      f"{cross(blind) / 1e9:.3f} GB unpriced; $ per million tokens with egress {priced['usd_per_mtoken']:.4f} "
      f"vs {blind['usd_per_mtoken']:.4f}")
assert cross(priced) < cross(blind), (cross(priced), cross(blind))
assert priced["usd_per_mtoken"] < blind["usd_per_mtoken"], (priced["usd_per_mtoken"], blind["usd_per_mtoken"])
PYEOF
check "egress priced: fewer bytes across zones and regions, cheaper per token" $?

# --objective cost weighs the checkpoints' egress: llama2-13b's cheapest plan trains on eu-west-1's
# L40S; with a save every 10 to a bucket in us-east-1 its upload (12 bytes x 13.0 B parameters / 10
# = 15.6 GB an iteration) would cross to us-east-1 at $0.02/GB, and the plan moves to us-east-1:
# no checkpoint egress, cheaper per token than the first plan with that upload priced
C13=(--model llama2-13b --global-batch 512 --seq-len 2048 --cluster "$TWO" --objective cost)
CK=(--ckpt-every 10 --cloud s3://ckpt-bucket/run)
"$AH" plan "${C13[@]}" -o "$TMP/c13.json" >"$TMP/c13.txt" 2>&1
st=$?; check "plan llama2-13b --objective cost: $(tail -3 "$TMP/c13.txt")" "$st"
AWS_REGION=us-east-1 "$AH" plan "${C13[@]}" "${CK[@]}" -o "$TMP/c13ck.json" >"$TMP/c13ck.txt" 2>&1
st=$?; check "plan llama2-13b --objective cost with checkpoints: $(tail -3 "$TMP/c13ck.txt")" "$st"
AWS_REGION=us-east-1 "$AH" evaluate --plan "$TMP/c13.json" "${CK[@]}" --json >"$TMP/c13.eval" 2>&1
AWS_REGION=us-east-1 "$AH" evaluate --plan "$TMP/c13ck.json" "${CK[@]}" --json >"$TMP/c13ck.eval" 2>&1
$PY - "$TMP/c13.eval" "$TMP/c13ck.eval" <<'PYEOF'
import json, sys
blind, aware = (json.load(open(p)) for p in sys.argv[1:3])
up = 12 * 13015864320 / 10  # llama2-13b's parameters (published count)
kb, ka = blind["bytes_per_iteration_by_kind"]["checkpoint"], aware["bytes_per_iteration_by_kind"]["checkpoint"]
assert abs(kb["inter-region"] - up) < 1 and abs(blind["checkpoint"]["egress_usd_per_iteration"] - up / 1e9 * 0.02) < 1e-9, blind
assert ka["inter-region"] == 0 and aware["checkpoint"]["egress_usd_per_iteration"] == 0, aware
assert aware["usd_per_mtoken"] < blind["usd_per_mtoken"], (aware["usd_per_mtoken"], blind["usd_per_mtoken"])
PYEOF
check "--objective cost moves the plan to the bucket's region: no checkpoint egress, cheaper per token" $?

# --budget caps the GPUs' $/h and the egress's: the fastest plan's egress alone is over it
"$AH" plan "${RUN[@]}" --cluster "$TWO" --budget 100 -o "$TMP/budget.json" >"$TMP/budget.txt" 2>&1
st=$?; check "plan --budget 100: $(tail -3 "$TMP/budget.txt")" "$st"
"$AH" evaluate --plan "$TMP/budget.json" --json >"$TMP/budget.eval" 2>&1
$PY - "$TMP/budget.eval" <<'PYEOF'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["egress_usd_per_hour"] > 0 and d["usd_per_hour"] <= 100 * (1 + 1e-9), (d["usd_per_hour"], d["egress_usd_per_hour"])
PYEOF
check "--budget 100: the plan's \$/h with its egress is within it" $?

# the least budget the refusal names admits a plan within it, egress counted (the egress $/h
# depends on the time: a plan within the budget at the search's time once came out over it at its
# evaluated time and the fastest baseline, at $292/h, was emitted)
"$AH" plan "${RUN[@]}" --cluster "$TWO" --budget 30 >"$TMP/b30.txt" 2>&1
least=$(sed -n 's/.*so --budget \([0-9.]*\) admits a plan.*/\1/p' "$TMP/b30.txt")
[ -n "$least" ]
st=$?; check "--budget 30 names the least budget: $(tail -1 "$TMP/b30.txt")" "$st"
"$AH" plan "${RUN[@]}" --cluster "$TWO" --budget "${least:-1}" -o "$TMP/least.json" >"$TMP/least.txt" 2>&1
st=$?; check "--budget $least: $(tail -2 "$TMP/least.txt")" "$st"
"$AH" evaluate --plan "$TMP/least.json" --json >"$TMP/least.eval" 2>&1
$PY - "$TMP/least.eval" "${least:-1}" <<'PYEOF'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["usd_per_hour"] <= float(sys.argv[2]) * (1 + 1e-9), (d["usd_per_hour"], sys.argv[2])
PYEOF
check "--budget $least: the plan's \$/h with its egress is within it" $?

# simulate counts the egress in its $ (while training), and none where egress is unpriced
for c in priced unpriced; do
    "$AH" simulate "${RUN[@]}" --cluster "$TMP/$c.json" --policy autohet --hours 1 --json "$TMP/sim-$c.json" \
        >"$TMP/sim-$c.txt" 2>&1
    st=$?; check "simulate on $c: $(tail -3 "$TMP/sim-$c.txt")" "$st"
done
grep -q '^autohet: .*; egress \$[1-9][0-9.]* of the \$$' "$TMP/sim-priced.txt"
st=$?; check "simulate says the egress: $(grep '^autohet:' "$TMP/sim-priced.txt")" "$st"
$PY - "$TMP/sim-priced.json" "$TMP/sim-unpriced.json" <<'PYEOF'
import json, sys
priced, unpriced = (json.load(open(p))["policies"][0] for p in sys.argv[1:3])
assert 0 < priced["egress_usd"] < priced["usd"], priced
assert unpriced["egress_usd"] == 0 and abs(priced["usd"] - priced["egress_usd"] - unpriced["usd"]) < 1e-6 * unpriced["usd"], (priced, unpriced)
PYEOF
check "simulate's \$ has the egress, and only it differs without prices" $?

checks_done
