#!/bin/bash
# autohet simulate end to end: the printed unit and mapping, the per-policy table, --json and
# --svg outputs, and clear errors for bad traces and flags. Usage: test_simulate.sh BUILD SRC
set -u
BUILD=$1
SRC=$2
AH="$BUILD/autohet"
PY=/usr/bin/python3
T="$SRC/tests/data/traces"
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
fails=0
pass() { echo "ok   $1"; }
fail() { echo "FAIL $1"; fails=$((fails + 1)); }
has() { grep -qF -- "$2" "$1" && pass "$3" || { fail "$3 (no \"$2\" in $1)"; cat "$1"; }; }

cat >"$W/cluster.json" <<'EOF'
{"nodes": [
  {"name": "od-0", "gpu": "A100-80G", "count": 1, "spot": false, "usd_per_gpu_hour": 2},
  {"name": "sp-0", "gpu": "A100-80G", "count": 1, "spot": true, "usd_per_gpu_hour": 1},
  {"name": "h20-0", "gpu": "H20", "count": 1, "spot": true, "usd_per_gpu_hour": 0.5},
  {"name": "h20-1", "gpu": "H20", "count": 1, "spot": true, "usd_per_gpu_hour": 0.5}],
 "network": {"inter_node_gb_s": 100, "cloud_gb_s": 0.5}}
EOF
COMMON=(--model gpt2-124m --cluster "$W/cluster.json" --global-batch 64 --seq-len 1024 --micro-batch 4
        --ckpt-every-s 1000 --restart-s 30 --replan-s 5)

"$AH" simulate "${COMMON[@]}" --trace "A100-80G=$T/one-preempt-s.csv" --trace "H20=$T/counts-hours.csv" \
    --hours 2 --bound --json "$W/out.json" --svg "$W/out.svg" >"$W/out.txt" 2>&1
[ $? -eq 0 ] && pass "simulate runs" || { fail "simulate exit code"; cat "$W/out.txt"; }
has "$W/out.txt" "bound (--bound): every availability set trained at its plan" "--bound printed"
has "$W/out.txt" "unit s (detected: whole-number times" "seconds detected and printed"
has "$W/out.txt" "unit h (detected: fractional times" "hours detected and printed"
has "$W/out.txt" "decreases remove the newest" "count mapping rule printed"
has "$W/out.txt" "always up: od-0: 1 on-demand node" "on-demand nodes listed as always up"
has "$W/out.txt" "0.500 h  count      down h20-1" "newest H20 node leaves first"
for p in autohet uniform varuna on-demand megatron-best; do
    grep -q "^$p " "$W/out.txt" && pass "row for $p" || fail "row for $p"
done
"$PY" - "$W/out.json" "$SRC" <<'EOF' && pass "JSON totals and timelines" || fail "JSON totals and timelines"
import json, sys
d = json.load(open(sys.argv[1]))
pol = {p["policy"]: p for p in d["policies"]}
assert set(pol) == {"autohet", "uniform", "varuna", "on-demand", "megatron-best"}, pol.keys()
for p in pol.values():
    for k in ("tokens", "wall_hours", "gpu_hours", "usd", "usd_per_mtoken", "recovery_hours", "replans", "simulate_s"):
        assert k in p, k
    tl = p["timeline"]
    assert tl and tl[0]["start_s"] == 0 and abs(tl[-1]["end_s"] - 7200) < 1e-6, (tl[0], tl[-1])
    for a, b in zip(tl, tl[1:]):
        assert abs(a["end_s"] - b["start_s"]) < 1e-9
assert pol["on-demand"]["replans"] == 0
# one record per (re)start, in the agent's terms; the terms add up to the recovery time
for p in pol.values():
    rc = p["recoveries"]
    assert rc[0]["event"] == "start" and len(rc) == p["replans"] + 1, (p["policy"], len(rc))
    for v in rc:
        b = v["breakdown"]
        assert abs(b["stop_s"] - b["wait_s"] - b["save_s"]) < 1e-9, b
        total = b["stop_s"] + b["replan_s"] + b["startup_s"] + b["transfer_s"] + b["first_step_s"]
        assert abs(v["seconds"] - total) < 1e-9 * max(1, total), v
        assert set(v["bytes"]) == {"local", "peer", "cloud", "memory"} and set(v["tier_seconds"]) == {"local", "peer", "cloud", "memory"}
    if p["policy"] != "autohet":
        assert all(v["breakdown"]["stop_s"] == 0 for v in rc), p["policy"]
assert d["options"]["disk_gb_s"] == 8 and d["options"]["grace_s"] == 120
assert pol["autohet"]["tokens"] >= pol["uniform"]["tokens"] > 0
assert pol["megatron-best"]["tokens"] > 0
assert d["pools"][1]["unit"] == "h" and d["pools"][0]["unit"] == "s"
assert any(m["node"] == "sp-0" and m["change"] == "down" and m["t_s"] == 3600 for m in d["mapping"])
# where the time went: the states add up to the horizon, the GPU-hours used are at most those up
for p in pol.values():
    b = p["breakdown"]
    assert abs(b["train_h"] + b["recover_h"] + b["stalled_h"] - 2) < 1e-9, b
    assert abs(b["recover_h"] - p["recovery_hours"]) < 1e-9 and p["gpu_hours"] <= b["gpu_hours_up"] + 1e-9, b
assert pol["on-demand"]["breakdown"]["gpu_hours_up"] == 8 and d["options"]["churn_aware"] is False
# --bound: no policy of the spot nodes trains more; bench/sim_bound_gap.py's terms add up to its gap to autohet
b = d["bound"]
assert all(b["tokens"] >= p["tokens"] for p in pol.values() if p["policy"] != "on-demand"), b["tokens"]
assert b["any_plan_tokens"] >= b["tokens"] and b["any_plan_unknown_s"] == 0 and b["all_up_tokens"] > 0 and b["timeline"][0]["start_s"] == 0, b
sys.path.insert(0, sys.argv[2] + "/bench")
import sim_bound_gap
terms = sim_bound_gap.gap_terms(d)
gap = b["tokens"] - pol["autohet"]["tokens"]
assert gap > 0 and abs(terms[-1][1]) < 0.01 * gap and dict(terms)["restart"] > 0, (gap, terms)
EOF
has "$W/out.txt" "autohet: train " "where the time went printed"
has "$W/out.txt" "vs on-demand: tokens " "each policy against on-demand"
"$AH" simulate "${COMMON[@]}" --trace "A100-80G=$T/one-preempt-s.csv" --trace "H20=$T/counts-hours.csv" \
    --hours 2 --policy autohet --churn-aware --json "$W/ca.json" >"$W/ca.txt" 2>&1
[ $? -eq 0 ] && pass "simulate --churn-aware runs" || { fail "simulate --churn-aware exit code"; cat "$W/ca.txt"; }
has "$W/ca.txt" "autohet: churn-aware plans (--churn-aware)" "--churn-aware said"
grep -q '"churn_aware": true' "$W/ca.json" && pass "--churn-aware in the JSON options" || fail "--churn-aware in the JSON options"
# in place at a notice is the default, as run's (session 22); --no-in-place relaunches; --no-handover too
for f in "" --in-place --no-in-place --no-handover; do
    # shellcheck disable=SC2086
    "$AH" simulate "${COMMON[@]}" --trace "A100-80G=$T/one-preempt-s.csv" --hours 2 --policy autohet $f \
        --json "$W/ip$f.json" >"$W/ip$f.txt" 2>&1
    [ $? -eq 0 ] && pass "simulate ${f:-(default)} runs" || { fail "simulate ${f:-(default)} exit code"; cat "$W/ip$f.txt"; }
done
has "$W/ip.txt" "autohet: plans changed in place at a notice (the default; --no-in-place: off), the change's step written behind" "in place said"
python3 -c 'import json, sys
for f, want in zip(sys.argv[1:], (True, True, False, False)):
    d = json.load(open(f)); r = d["policies"][0]["recoveries"]
    assert d["options"]["in_place"] is want and [x.get("in_place", False) for x in r] == [False, want], (f, r)' \
    "$W/ip.json" "$W/ip--in-place.json" "$W/ip--no-in-place.json" "$W/ip--no-handover.json" &&
    pass "in place by default and with --in-place (the notice's recovery, the start not); not with --no-in-place or --no-handover" ||
    fail "in place in the JSON"
grep -q "<svg" "$W/out.svg" && grep -q "autohet" "$W/out.svg" && pass "SVG written" || fail "SVG written"

# unit given by the user wins
"$AH" simulate "${COMMON[@]}" --policy autohet --trace "H20=$T/counts-hours.csv,unit=s" --hours 1 >"$W/u.txt" 2>&1
has "$W/u.txt" "unit s (given)" "unit=s given"

# errors: file:line, unknown pool, bad policy, ambiguous unit
printf '0,add,node1\n5,kill,node2\n' >"$W/bad.csv"
"$AH" simulate "${COMMON[@]}" --trace "H20=$W/bad.csv" >"$W/e1.txt" 2>&1
[ $? -ne 0 ] && pass "bad trace fails" || fail "bad trace fails"
has "$W/e1.txt" "$W/bad.csv:2: action \"kill\" in \"5,kill,node2\": expected add or remove" "bad row named by file:line"
"$AH" simulate "${COMMON[@]}" --trace "V100-16G=$T/one-preempt-s.csv" >"$W/e2.txt" 2>&1
[ $? -ne 0 ] && pass "unknown pool fails" || fail "unknown pool: exit code 0"
has "$W/e2.txt" "spot pools there are: A100-80G@" "unknown pool lists the pools"
"$AH" simulate "${COMMON[@]}" --policy autohet,megatron >"$W/e3.txt" 2>&1
[ $? -eq 2 ] && pass "bad policy is a usage error" || fail "bad policy exit code"
printf '0.5,1\n500.5,2\n' >"$W/amb.csv"
"$AH" simulate "${COMMON[@]}" --trace "H20=$W/amb.csv" >"$W/e4.txt" 2>&1
[ $? -ne 0 ] && pass "ambiguous unit fails" || fail "ambiguous unit: exit code 0"
has "$W/e4.txt" "cannot tell the time unit" "ambiguous unit refused"
"$AH" simulate "${COMMON[@]}" --policy , >"$W/e5.txt" 2>&1
[ $? -eq 2 ] && pass "an empty policy list is a usage error" || fail "empty policy list exit code"
has "$W/e5.txt" "name at least one of" "empty policy list refused"
"$AH" simulate "${COMMON[@]}" --hours 0 >"$W/e6.txt" 2>&1
[ $? -eq 2 ] && pass "--hours 0: a usage error" || fail "--hours 0: exit code (want 2)"
has "$W/e6.txt" "--hours 0: expected > 0" "--hours 0 refused, not taken as the trace end"
# (without COMMON, which gives these flags already: a flag given twice is refused)
"$AH" simulate --model gpt2-124m --cluster "$W/cluster.json" --seq-len 0 >"$W/e8.txt" 2>&1
[ $? -eq 2 ] && pass "--seq-len 0: a usage error" || fail "--seq-len 0: exit code (want 2)"
has "$W/e8.txt" "--seq-len: expected 1 .. 1048576, got 0" "--seq-len 0 refused up front, in plan's words"
"$AH" simulate --model gpt2-124m --cluster "$W/cluster.json" --replan-s -1 >"$W/e7.txt" 2>&1
[ $? -eq 2 ] && pass "--replan-s -1: a usage error" || fail "--replan-s -1: exit code (want 2)"
has "$W/e7.txt" "--replan-s -1: expected >= 0" "a negative --replan-s refused"
"$AH" simulate --model gpt2-124m --cluster "$W/cluster.json" --restart-s -1 >"$W/e10.txt" 2>&1
[ $? -eq 2 ] && pass "--restart-s -1: a usage error" || fail "--restart-s -1: exit code (want 2)"
has "$W/e10.txt" "--restart-s: expected >= 0, got -1" "a negative --restart-s named alone"
"$AH" simulate --model gpt2-124m --cluster "$W/cluster.json" --global-batch 64 --micro-batch 3 >"$W/e9.txt" 2>&1
[ $? -eq 1 ] && pass "--micro-batch 3 of 64: refused (exit 1)" || fail "--micro-batch 3 of 64: exit code (want 1)"
has "$W/e9.txt" "--global-batch 64 is not divisible by --micro-batch 3" "a micro-batch that does not divide the batch refused up front, not a stall in every policy"
# horizons a replay cannot run: refused, not a replay that never ends (or a silent 1-second one)
# exits WANT FILE WHAT CMD...: CMD (at most 20 s) exits WANT, its output in FILE
exits() {
    local want=$1 out=$2 what=$3
    shift 3
    timeout 20 "$@" >"$out" 2>&1
    local rc=$?
    [ $rc -eq "$want" ] && pass "$what: exit $want" || fail "$what: exit code $rc (want $want)"
}
printf '0,1\n1e20,2\n' >"$W/far.csv"
exits 2 "$W/e11.txt" "a trace ending 1e20 s in" "$AH" simulate "${COMMON[@]}" --policy autohet --trace "H20=$W/far.csv"
has "$W/e11.txt" "is past the 100000 h (11 years) simulate replays; check the trace's time unit" "a far trace end refused"
exits 2 "$W/e12.txt" "--ckpt-every-s 1e-300" "$AH" simulate --model gpt2-124m --cluster "$W/cluster.json" \
    --global-batch 64 --seq-len 1024 --micro-batch 4 --policy autohet --hours 1 --ckpt-every-s 1e-300
has "$W/e12.txt" "--ckpt-every-s 1e-300 over a horizon of 1 h is 3.6e+303 checkpoints" "a checkpoint interval too fine refused"
printf '0,1\n' >"$W/point.csv"
exits 2 "$W/e13.txt" "a one-point trace without --hours" "$AH" simulate "${COMMON[@]}" --policy autohet --trace "H20=$W/point.csv"
has "$W/e13.txt" "nothing to replay: $W/point.csv: its rows (1) are all at time 0; give --hours H" "a one-point trace refused, naming its file"
# precision: varuna keeps the biggest type that runs bf16 (T4 has no bf16: it stalled the whole run,
# blaming memory); a cluster where no type runs it is refused up front
cat >"$W/t4mix.json" <<'EOF'
{"nodes": [{"name": "t", "gpu": "T4", "count": 4, "spot": true, "usd_per_gpu_hour": 0.2},
 {"name": "a", "gpu": "A100-80G", "count": 2, "spot": true, "usd_per_gpu_hour": 1}]}
EOF
"$AH" simulate --model gpt2-124m --cluster "$W/t4mix.json" --hours 1 --replan-s 1 --global-batch 8 --seq-len 512 \
    --policy varuna >"$W/t4mix.txt" 2>&1
awk '$1 == "varuna" && $2 + 0 > 0 { ok = 1 } END { exit !ok }' "$W/t4mix.txt" && pass "varuna trains on the type that runs bf16" ||
    { fail "varuna on T4 + A100"; cat "$W/t4mix.txt"; }
printf '{"nodes": [{"name": "t", "gpu": "T4", "count": 4, "spot": true, "usd_per_gpu_hour": 0.2}]}\n' >"$W/t4.json"
exits 1 "$W/e14.txt" "no type runs bf16" "$AH" simulate --model gpt2-124m --cluster "$W/t4.json" --hours 1 \
    --global-batch 8 --seq-len 512 --precision bf16
has "$W/e14.txt" "no GPU type of the cluster runs bf16" "no type runs bf16: said up front"

# ---- the flags simulate shares with plan (issue 40, item 5): --precision auto by default, as plan ----
# a V100 cluster: plan plans it in fp16; simulate defaulted to bf16 and refused it (or, with bf16
# types beside, dropped the V100s silently and drew them as always up)
cat >"$W/v100.json" <<'EOF'
{"nodes": [{"name": "v0", "gpu": "V100-16G", "count": 8, "spot": true, "usd_per_gpu_hour": 0.9},
 {"name": "v1", "gpu": "V100-16G", "count": 8, "spot": true, "usd_per_gpu_hour": 0.9}]}
EOF
V=(--model gpt2-124m --global-batch 32 --seq-len 1024 --hours 1 --replan-s 1)
exits 0 "$W/v.txt" "a V100 cluster, precision left out" "$AH" simulate "${V[@]}" --cluster "$W/v100.json"
has "$W/v.txt" "global batch 32 x seq-len 1024, fp16; cluster" "a V100 cluster simulated in fp16, as plan plans it"
has "$W/v.txt" "why fp16: fp16 (with dynamic loss scaling)" "auto's choice said with plan's why line"
awk '$1 == "autohet" && $2 + 0 > 0 { ok = 1 } END { exit !ok }' "$W/v.txt" && pass "autohet trains the V100s" ||
    fail "autohet on V100s: no tokens"
"$AH" plan --model gpt2-124m --global-batch 32 --seq-len 1024 --cluster "$W/v100.json" >"$W/vp.txt" 2>&1
has "$W/vp.txt" ", fp16" "plan picks the same precision"
cat >"$W/va.json" <<'EOF'
{"nodes": [{"name": "v0", "gpu": "V100-16G", "count": 8, "spot": true, "usd_per_gpu_hour": 0.9},
 {"name": "a0", "gpu": "A100-80G", "count": 8, "spot": true, "usd_per_gpu_hour": 1.5}]}
EOF
exits 0 "$W/va.txt" "V100 + A100 at bf16" "$AH" simulate "${V[@]}" --cluster "$W/va.json" --precision bf16 \
    --json "$W/va.out.json"
has "$W/va.txt" "left out: V100-16G (8 GPUs on v0): no bf16 rate (tflops.bf16), so it cannot run bf16" \
    "the V100s left out in plan's words"
has "$W/va.txt" "8 GPUs in 1 node (of 16 GPUs in 2 nodes)" "the GPUs replayed, of those given"
grep "^always up:" "$W/va.txt" | grep -q v0 && fail "a left-out node drawn as always up: $(grep '^always up' "$W/va.txt")" ||
    pass "a left-out node is not drawn as always up"
"$PY" - "$W/va.out.json" <<'EOF' && pass "JSON: no V100 in the availability" || fail "JSON: V100 in the availability"
import json, sys
d = json.load(open(sys.argv[1]))
assert all("V100-16G" not in a["gpus"] for a in d["availability"]), d["availability"]
assert d["options"]["precision"] == "bf16", d["options"]
EOF
exits 2 "$W/vt.txt" "a trace of a left-out type" "$AH" simulate "${V[@]}" --cluster "$W/va.json" --precision bf16 \
    --trace "V100-16G=$T/one-preempt-s.csv"
has "$W/vt.txt" "V100-16G is left out: it has no bf16 rate" "a trace of a left-out type refused, named"
# nothing fits anywhere: every policy stalls; said, named, exit 1 (was: 0 tokens for all, exit 0)
exits 1 "$W/nf.txt" "nothing fits" "$AH" simulate --model llama2-70b --cluster "$W/va.json" --global-batch 64 \
    --hours 1 --precision fp16 --replan-s 1
has "$W/nf.txt" "no policy trained a token: none has a plan that fits what is up; autohet: stalled at 0.00 h: model llama2-70b does not fit" \
    "nothing fits: refused with each policy's reason"
exits 1 "$W/nf2.txt" "nothing fits, precision auto" "$AH" simulate --model llama2-70b --cluster "$W/va.json" \
    --global-batch 64 --hours 1 --replan-s 1
has "$W/nf2.txt" "--precision auto: neither bf16 nor fp16 plans" "nothing fits at auto: refused up front, as plan"
# a node without a price under --objective cost or --budget: refused as plan refuses it (the
# unpriced rule, ah_cluster_require_prices), not taken as $0
cat >"$W/unpriced.json" <<'EOF'
{"nodes": [{"name": "a0", "gpu": "A100-80G", "count": 2, "spot": true, "usd_per_gpu_hour": 1},
 {"name": "a1", "gpu": "A100-80G", "count": 2, "spot": true}]}
EOF
for f in "--objective cost|--objective cost" "--budget 5|--budget"; do
    # shellcheck disable=SC2086
    exits 1 "$W/up.txt" "simulate ${f%|*}, a node unpriced" "$AH" simulate "${V[@]}" --cluster "$W/unpriced.json" ${f%|*}
    has "$W/up.txt" "${f#*|} needs every node's price" "simulate ${f%|*}: an unpriced node refused, named"
    has "$W/up.txt" "for node a1 (1 of 2 nodes)" "simulate ${f%|*}: the unpriced node named"
done
# --objective cost and --budget (issue 40, item 11): autohet's and on-demand's plans under them, as in plan
# (--release-idle: the plan's nodes only are paid, so a cheaper plan on fewer nodes costs less; without it
# every node up is paid, checked below)
P2=("${COMMON[@]}" --hours 2 --policy autohet,on-demand --release-idle)
exits 0 "$W/ct.txt" "--objective time" "$AH" simulate "${P2[@]}" --json "$W/ct.json"
exits 0 "$W/cc.txt" "--objective cost" "$AH" simulate "${P2[@]}" --objective cost --json "$W/cc.json"
exits 0 "$W/cb.txt" "--budget 1.2" "$AH" simulate "${P2[@]}" --budget 1.2 --json "$W/cb.json"
has "$W/cb.txt" 'autohet and on-demand plan for the least time, at most $1.2 per hour of GPUs and egress' "the budget said"
"$PY" - "$W/ct.json" "$W/cc.json" "$W/cb.json" <<'EOF' && pass "cost and budget: cheaper, within the budget" ||
import json, sys
t, c, b = ({p["policy"]: p for p in json.load(open(f))["policies"]} for f in sys.argv[1:])
assert json.load(open(sys.argv[2]))["options"]["objective"] == "cost"
assert c["autohet"]["usd_per_mtoken"] < t["autohet"]["usd_per_mtoken"] * 0.99, (c["autohet"], t["autohet"])
assert b["autohet"]["tokens"] > 0 and b["autohet"]["usd"] / b["autohet"]["wall_hours"] <= 1.2 + 1e-9, b["autohet"]
assert t["autohet"]["usd"] / t["autohet"]["wall_hours"] > 1.2, t["autohet"]  # the budget binds
# on-demand pays on-demand prices: none of its plans fits $1.2/h (an H20 on demand is $1.25)
assert b["on-demand"]["tokens"] == 0 and "--budget" in b["on-demand"]["note"], b["on-demand"]
EOF
    fail "cost and budget"
exits 2 "$W/ipx.txt" "--in-place --no-in-place" "$AH" simulate "${COMMON[@]}" --hours 1 --in-place --no-in-place
has "$W/ipx.txt" "--in-place and --no-in-place: give one" "--in-place with --no-in-place refused, named"
exits 2 "$W/iph.txt" "--in-place --no-handover" "$AH" simulate "${COMMON[@]}" --hours 1 --in-place --no-handover
has "$W/iph.txt" "give one of --in-place, --no-handover" "--in-place with --no-handover refused, named"
# without --release-idle every node up is paid, the plan's or not, a stalled policy's too (rule 2): here
# all four nodes the whole 2 h, $4/h at spot prices (on-demand at on-demand prices: od-0 $2 for both A100s, 2.5 x 0.5 an H20)
exits 0 "$W/ch.txt" "--budget 1.2, nodes held" "$AH" simulate "${P2[@]:0:${#P2[@]}-1}" --budget 1.2 --json "$W/ch.json"
"$PY" - "$W/ch.json" <<'EOF' && pass "every node up paid: the budget binds the plan, not the nodes held" ||
import json, sys
p = {p["policy"]: p for p in json.load(open(sys.argv[1]))["policies"]}
assert abs(p["autohet"]["usd"] - 2 * (2 + 1 + 0.5 + 0.5)) < 1e-6, p["autohet"]
assert abs(p["autohet"]["gpu_hours"] - 2 * 4) < 1e-6, p["autohet"]
assert p["on-demand"]["tokens"] == 0 and abs(p["on-demand"]["usd"] - 2 * (2 + 2 + 1.25 + 1.25)) < 1e-6, p["on-demand"]
EOF
    fail "every node up paid"
# --objective cost without --release-idle: every node up is paid, so autohet's planner weighs the held
# nodes' $/h (held_usd_per_hour), not its plan's GPUs', and no policy trains cheaper per token (before: a
# plan on the H20s alone, 0.95 B tokens for the $ that bought varuna and megatron-best 1.71 B)
exits 0 "$W/chd.txt" "--objective cost, nodes held" "$AH" simulate "${COMMON[@]}" --hours 2 --objective cost \
    --trace "A100-80G=$T/one-preempt-s.csv" --trace "H20=$T/counts-hours.csv" --json "$W/chd.json"
"$PY" - "$W/chd.json" <<'EOF' && pass "--objective cost, every node held: autohet the cheapest per token" ||
import json, sys
p = {p["policy"]: p for p in json.load(open(sys.argv[1]))["policies"]}
a = p["autohet"]["usd_per_mtoken"]
assert p["autohet"]["tokens"] > 0 and len(p) == 5, p.keys()
assert all(a <= q["usd_per_mtoken"] * (1 + 1e-9) for n, q in p.items() if q["tokens"] > 0), {n: q["usd_per_mtoken"] for n, q in p.items()}
EOF
    fail "--objective cost, every node held"

# the memory tier (--replica-memory-gb, docs/simulator.md rule 8): said, in the options and per policy
exits 0 "$W/mem.txt" "--replica-memory-gb 100" "$AH" simulate "${P2[@]}" --replica-memory-gb 100 --snapshot-gb-s 3 \
    --json "$W/mem.json"
has "$W/mem.txt" "autohet: in-memory peer replicas, at most 100 GB per host; snapshot 3 GB/s per device" "the memory tier said"
"$PY" - "$W/mem.json" "$W/ct.json" <<'EOF' && pass "the memory tier in the JSON" ||
import json, sys
d, t = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert d["options"]["replica_memory_gb"] == 100 and d["options"]["snapshot_gb_s"] == 3, d["options"]
assert t["options"]["replica_memory_gb"] == 0, t["options"]
for p in d["policies"] + t["policies"]:
    assert "memory" in p["bytes"], p["bytes"]
    assert all("memory" in r["bytes"] for r in p["recoveries"]), p["policy"]
EOF
    fail "the memory tier in the JSON"
exits 2 "$W/snap0.txt" "--snapshot-gb-s 0" "$AH" simulate "${P2[@]}" --replica-memory-gb 1 --snapshot-gb-s 0
# the handover at a notice (the memory tier's default; docs/simulator.md rule 9): a notice that saves
# commits in the next plan's memory, so its recovery moves nothing after the relaunch and rolls nothing
# back; taken only when that commits sooner than the disks plus the relaunch's fetch (a snapshot at
# 100 GB/s: it is; at 3 GB/s against 8 GB/s disks: it is not); --no-handover never
# (--no-in-place: a change in place writes its step behind with no save before it, so no handover: recovery.c)
P3=("${COMMON[@]}" --trace "A100-80G=$T/one-preempt-s.csv" --trace "H20=$T/counts-hours.csv" --hours 2
    --policy autohet,on-demand --replica-memory-gb 100 --no-in-place)
exits 0 "$W/ho.txt" "the handover" "$AH" simulate "${P3[@]}" --snapshot-gb-s 100 --json "$W/ho.json"
has "$W/ho.txt" "the handover at a notice (--no-handover: off)" "the handover said"
exits 0 "$W/noho.txt" "--no-handover" "$AH" simulate "${P3[@]}" --snapshot-gb-s 100 --no-handover --json "$W/noho.json"
exits 0 "$W/slow.txt" "a slow snapshot" "$AH" simulate "${P3[@]}" --snapshot-gb-s 3 --json "$W/slow.json"
"$PY" - "$W/ho.json" "$W/noho.json" "$W/slow.json" <<'EOF' && pass "the handover: no transfer after the relaunch, nothing lost" ||
import json, sys
d, n, slow = ({p["policy"]: p for p in json.load(open(f))["policies"]} for f in sys.argv[1:])
assert json.load(open(sys.argv[1]))["options"]["handover"] is True
assert json.load(open(sys.argv[2]))["options"]["handover"] is False
ho = [r for r in d["autohet"]["recoveries"] if r["handover"]]
assert ho, "no handover in the replay"
for r in ho:
    assert r["saved"] and r["breakdown"]["transfer_s"] == 0 and r["tokens_lost"] == 0, r
    assert r["bytes"]["peer"] == 0 and r["bytes"]["cloud"] == 0, r
assert not any(r["handover"] for r in n["autohet"]["recoveries"])
assert not any(r["handover"] for r in slow["autohet"]["recoveries"])  # the rule declines it
# what the partners' recovery moved after the relaunch is moved before the exit instead
print("  handover:", [round(r["seconds"], 2) for r in ho], "without:",
      [round(r["seconds"], 2) for r in n["autohet"]["recoveries"] if r["event"] != "start"])
EOF
    fail "the handover"

# --cp 2 (issue 38): every policy's plans split the sequence over 2 GPUs of a node (nodes of 2
# here); the replay's per-device tables take a CP stage's tp x cp devices (its checkpoint bytes
# per device overflowed their array before: simulate aborted)
sed 's/"count": 1/"count": 2/' "$W/cluster.json" >"$W/cluster2.json"
"$AH" simulate "${COMMON[@]/#$W\/cluster.json/$W/cluster2.json}" --precision fp32 --cp 2 --replica-memory-gb 10 \
    --trace "A100-80G=$T/one-preempt-s.csv" --trace "H20=$T/counts-hours.csv" --hours 2 >"$W/cp.txt" 2>&1
[ $? -eq 0 ] && grep -q "^autohet " "$W/cp.txt" && pass "simulate --cp 2 runs" || { fail "simulate --cp 2"; cat "$W/cp.txt"; }
# a horizon (18 s) inside the first start (re-plan 5 s + restart 30 s): no policy keeps a token but
# each pays its GPUs; its $/M tokens has no value ("-", null, "no tokens kept"), not $0 (before: 0.000
# in the table and the JSON, which reads as the cheapest)
exits 0 "$W/z.txt" "a horizon inside the first start" "$AH" simulate "${COMMON[@]}" --hours 0.005 \
    --policy autohet,on-demand --json "$W/z.json" --svg "$W/z.svg"
grep -Eq '^autohet +0\.000 +0\.01 +0\.0 +0\.0[0-9] +- ' "$W/z.txt" && grep -q 'no tokens kept' "$W/z.svg" &&
    "$PY" -c 'import json, sys; p = json.load(open(sys.argv[1]))["policies"]
assert all(x["tokens"] == 0 and x["usd"] > 0 and x["usd_per_mtoken"] is None for x in p), p' "$W/z.json" &&
    pass "no tokens kept: no \$/M tokens" || { fail "no tokens kept: \$/M tokens"; cat "$W/z.txt"; }
# the memory tier never resumes from a step older than the cloud's (bench/sim_chaos.py grace-0-mem, session 25):
# paper-64 with no save fitting (grace 0); plans whose pieces are on two nodes' disks do not replicate, so the
# memory kept an old step, and at 11760 s (h800-0 lost) the replay read h800-0's pieces from memory, going back
# past the cloud's newest upload: 0.007 B tokens kept against 1.457 B without the memory tier. A resume takes the
# newest step some tier holds whole (docs/checkpoints.md): the cloud's here, so the two runs keep the same
printf '0,add,a1\n0,add,a2\n3060000,remove,a1\n3060000,remove,a2\n3660000,add,a3\n3660000,add,a4\n4620000,remove,a3\n4800000,add,a5\n5100000,remove,a5\n5400000,add,a6\n' >"$W/ma.csv"
printf '480000,add,m1\n540000,add,m2\n1680000,remove,m1\n1740000,add,m3\n7200000,remove,m2\n7380000,add,m4\n9840000,remove,m4\n9960000,add,m5\n11640000,remove,m5\n11760000,remove,m3\n' >"$W/mh.csv"
M=(--model llama2-7b --cluster "$SRC/examples/clusters/paper-64.json" --trace "A100-80G=$W/ma.csv" --trace "H800=$W/mh.csv"
   --hours 3.3 --policy autohet --grace-s 0 --replan-s 0.5)
"$AH" simulate "${M[@]}" --json "$W/m0.json" >"$W/m0.txt" 2>&1 &&
    "$AH" simulate "${M[@]}" --replica-memory-gb 512 --json "$W/m1.json" >"$W/m1.txt" 2>&1 &&
    "$PY" -c 'import json, sys; a, b = (json.load(open(f))["policies"][0]["tokens"] for f in sys.argv[1:])
assert b >= 0.9 * a > 0, (a, b)' "$W/m0.json" "$W/m1.json" &&
    pass "the memory tier does not resume from a step older than the cloud's" ||
    { fail "the memory tier resumed from an old step"; tail -3 "$W/m0.txt" "$W/m1.txt"; }
[ $fails -eq 0 ] && echo "all passed" || echo "$fails failed"
[ $fails -eq 0 ]
