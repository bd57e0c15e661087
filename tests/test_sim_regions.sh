#!/bin/bash
# simulate over two regions (issue 39): a pool named by region (TYPE@REGION), the autohet-region
# policy (autohet confined to one region: the cheapest by mean $ per GPU-hour, or --region), and
# the egress the replay pays: the plans' bytes across zones/regions, the memory tier's replication
# of checkpoints to a holder in the other region, a recovery's peer reads from the other region,
# and the uploads to a cloud tier in another region (--cloud-region). Tiny model, 4 one-GPU nodes, 2 h.
# Usage: test_sim_regions.sh BUILD SRC
. "$(dirname "$0")/check_common.sh"
T="$SRC/tests/data/traces"
cat >"$TMP/c.json" <<'J'
{"nodes": [
  {"name": "ra-0", "gpu": "A100-80G", "count": 1, "zone": "ra-1", "region": "ra", "spot": true, "usd_per_gpu_hour": 2},
  {"name": "ra-1", "gpu": "A100-80G", "count": 1, "zone": "ra-1", "region": "ra", "spot": true, "usd_per_gpu_hour": 2},
  {"name": "rb-0", "gpu": "A100-80G", "count": 1, "zone": "rb-1", "region": "rb", "spot": true, "usd_per_gpu_hour": 1},
  {"name": "rb-1", "gpu": "A100-80G", "count": 1, "zone": "rb-1", "region": "rb", "spot": true, "usd_per_gpu_hour": 1}],
 "network": {"inter_node_gb_s": 100, "cloud_gb_s": 0.5, "inter_region_gb_s": 100,
             "egress_usd_per_gb": {"inter_zone": 0.01, "inter_region": 0.02}}}
J
COMMON=(--model gpt2-124m --cluster "$TMP/c.json" --global-batch 256 --seq-len 1024 --micro-batch 4
        --ckpt-every-s 600 --restart-s 30 --replan-s 5 --hours 2 --replica-memory-gb 64 --replicas-always)
# region ra's nodes are always up (no trace): the other region's capacity only adds to rb's
"$AH" simulate "${COMMON[@]}" --policy autohet,autohet-region,on-demand --trace "A100-80G@rb=$T/counts-hours.csv" \
    --json "$TMP/s.json" >"$TMP/s.txt" 2>&1
st=$?
check "three policies run over two regions: $(tail -3 "$TMP/s.txt")" $st
grep -q "pool A100-80G@rb: 2 spot nodes" "$TMP/s.txt"
check "a pool named by its region takes that region's spot nodes of the type" $?
$PY - "$TMP/s.json" <<'P'
import json, sys
r = {p["policy"]: p for p in json.load(open(sys.argv[1]))["policies"]}
a, c, od = r["autohet"], r["autohet-region"], r["on-demand"]
def need(ok, what):
    if not ok:
        print("FAIL:", what); sys.exit(1)
need(c["region"] == "rb", "autohet-region is confined to the cheapest region rb, not %r" % c.get("region"))
need(a["tokens"] >= c["tokens"] > 0, "across regions %g tokens >= confined %g > 0" % (a["tokens"], c["tokens"]))
need(od["tokens"] > 0 and od["egress_usd"] > 0, "on-demand trains on both regions and pays their egress")
need(a["ckpt_bytes_across_regions"] > 0 and a["ckpt_egress_usd"] > 0,
     "autohet's replicas cross the regions and pay egress: %g bytes $%g" % (a["ckpt_bytes_across_regions"], a["ckpt_egress_usd"]))
# the cloud tier is in ra (the first node's region): the confined policy's uploads from rb cross
need(c["ckpt_bytes_across_regions"] > 0 and abs(c["ckpt_egress_usd"] - c["ckpt_bytes_across_regions"] / 1e9 * 0.02)
     < 1e-6 * c["ckpt_egress_usd"], "the confined policy's uploads to the cloud in ra cross at $0.02/GB")
for p in (a, c, od):
    need(p["egress_usd"] >= p["ckpt_egress_usd"] >= 0 and p["usd"] > p["egress_usd"],
         "%s: egress within $ and checkpoints' within egress" % p["policy"])
# one zone per region: every replica that leaves its zone crosses the region at $0.02/GB
need(abs(a["ckpt_egress_usd"] - a["ckpt_bytes_across_regions"] / 1e9 * 0.02) < 1e-6 * a["ckpt_egress_usd"],
     "checkpoint egress $%g is the bytes across at $0.02/GB" % a["ckpt_egress_usd"])
P
check "across >= confined tokens, egress counted where it crosses" $?
grep -q "cloud tier in region ra (--cloud-region)" "$TMP/s.txt"
check "the report names the cloud tier's region" $?
"$AH" simulate "${COMMON[@]}" --cloud-region rb --policy autohet-region --trace "A100-80G@rb=$T/counts-hours.csv" \
    --json "$TMP/cb.json" >"$TMP/cb.txt" 2>&1
$PY -c "import json,sys; p=json.load(open('$TMP/cb.json'))['policies'][0]; sys.exit(0 if p['region']=='rb' and p['tokens']>0 and p['ckpt_bytes_across_regions']==0 else 1)"
check "with the cloud tier in rb the confined policy sends no checkpoint across regions" $?
# region rb goes down (0.5 h) and comes back (1 h): the rejoined nodes read the state from region ra
# (no holder left in rb), a peer read across regions, billed at $0.02/GB
printf '0,2\n0.5,2\n0.5,0\n1,0\n1,2\n' >"$TMP/rb-down.csv"
"$AH" simulate "${COMMON[@]}" --policy autohet --trace "A100-80G@rb=$TMP/rb-down.csv,unit=h" --json "$TMP/p.json" \
    >"$TMP/p.txt" 2>&1
st=$?
check "rb down and back runs: $(tail -2 "$TMP/p.txt")" $st
$PY - "$TMP/p.json" <<'P'
import json, sys
p = json.load(open(sys.argv[1]))["policies"][0]
wan = [v for v in p["recoveries"] if v.get("bytes_across_regions", 0) > 0]
assert wan and all(v["event"].startswith("join") for v in wan), [v["event"] for v in p["recoveries"]]
for v in wan:
    assert v["bytes_across_regions"] <= v["bytes"]["peer"] + v["bytes"]["memory"], v
    assert abs(v["egress_usd"] - v["bytes_across_regions"] / 1e9 * 0.02) < 1e-9, v
assert p["ckpt_bytes_across_regions"] >= sum(v["bytes_across_regions"] for v in wan), p["ckpt_bytes_across_regions"]
P
check "the join reads the state across regions, its egress at \$0.02/GB" $?
# the memory tier across regions: LLaMA-2-13B in a pipeline over the four nodes, no save at the notice
# (--grace-s 0); ra-1 leaves and its pieces come from its partner's memory in rb, over a WAN of 10
# GB/s per GPU: the memory phase takes longer than all its bytes would at the 100 GB/s inside a
# region; and each periodic checkpoint's replication to the partners holds training longer. The WAN's
# latency is set to 10 us here: at the default 35 ms, paid once a 1 MiB piece as the runtime's blocking
# sends do (plan/ckpt_traffic.h ah_ckpt_pairs_s), it, not the bandwidth, sets the replication's time
sed 's/"inter_region_gb_s": 100/"inter_region_gb_s": 10, "inter_region_latency_us": 10/' "$TMP/c.json" >"$TMP/c10.json"
sed 's/"inter_region_gb_s": 100/"inter_region_gb_s": 100, "inter_region_latency_us": 10/' "$TMP/c.json" >"$TMP/c100.json"
printf '0,2\n0.5,2\n0.5,1\n' >"$TMP/ra-one.csv"
for wan in 10 100; do
    "$AH" simulate --model llama2-13b --cluster "$TMP/c$wan.json" --global-batch 64 --seq-len 1024 --ckpt-every-s 600 \
        --restart-s 30 --replan-s 5 --hours 1 --replica-memory-gb 512 --grace-s 0 --policy autohet \
        --trace "A100-80G@ra=$TMP/ra-one.csv,unit=h" --json "$TMP/m$wan.json" >"$TMP/m$wan.txt" 2>&1
    st=$?
    check "ra-1 leaves a 13B pipeline, WAN $wan GB/s: $(tail -2 "$TMP/m$wan.txt")" $st
done
$PY - "$TMP/m10.json" "$TMP/m100.json" <<'P'
import json, sys
slow, fast = (json.load(open(f))["policies"][0] for f in sys.argv[1:3])
# the periodic checkpoints' replication to partners in the other region holds training longer on the slower WAN
assert slow["checkpoint_hours"] > fast["checkpoint_hours"] > 0, (slow["checkpoint_hours"], fast["checkpoint_hours"])
v = [v for v in slow["recoveries"] if v["event"] == "preempt ra-1"][0]
assert v["bytes"]["memory"] > 0 and v["bytes_across_regions"] > 0, v
assert v["tier_seconds"]["memory"] > v["bytes"]["memory"] / 100e9, v
assert abs(v["egress_usd"] - v["bytes_across_regions"] / 1e9 * 0.02) < 1e-9, v
P
check "memory reads and replication across regions go over the WAN, reads pay its egress" $?
"$AH" simulate "${COMMON[@]}" --region ra --policy autohet-region --trace "A100-80G@rb=$T/counts-hours.csv" \
    --json "$TMP/r.json" >"$TMP/r.txt" 2>&1
check "--region ra runs" $?
$PY -c "import json,sys; p=json.load(open('$TMP/r.json'))['policies'][0]; sys.exit(0 if p['region']=='ra' and p['tokens']>0 else 1)"
check "--region picks the confined region" $?
"$AH" simulate "${COMMON[@]}" --policy autohet-region --region nowhere >"$TMP/e.txt" 2>&1
[ $? -ne 0 ] && grep -q 'region "nowhere": no node of the cluster is in it; its regions are ra, rb' "$TMP/e.txt"
st=$?
check "an unknown --region is refused naming the regions: $(cat "$TMP/e.txt")" $st
"$AH" simulate "${COMMON[@]}" --policy autohet --region ra >"$TMP/e2.txt" 2>&1
[ $? -eq 2 ] && grep -q "region is the autohet-region policy's region; add autohet-region to --policy" "$TMP/e2.txt"
st=$?
check "--region without autohet-region is refused: $(cat "$TMP/e2.txt")" $st
"$AH" simulate "${COMMON[@]}" --policy autohet --cloud-region nowhere >"$TMP/e3.txt" 2>&1
[ $? -eq 2 ] && grep -q 'cloud-region "nowhere": no node of the cluster is in it; its regions are ra, rb' "$TMP/e3.txt" &&
    ! grep -q "^horizon" "$TMP/e3.txt"
st=$?
check "an unknown --cloud-region is refused before the report, naming the regions: $(cat "$TMP/e3.txt")" $st
# one rate for egress $/h: evaluate --json prices the plan's egress at the iteration train runs it at
# (the DP sync overlapped), as the replay pays it while that plan trains (all nodes up, on-demand,
# no checkpoint in the hour): the replay's egress = evaluate's $/h x the hours it trained (its tokens
# at evaluate's overlapped rate; the first step's included). Before: evaluate's $/h was at the
# sync-after-backward iteration (2 % under on this plan).
SAME=(--model gpt2-124m --cluster "$TMP/c.json" --global-batch 256 --seq-len 1024 --micro-batch 4)
"$AH" plan "${SAME[@]}" -o "$TMP/od-plan.json" >/dev/null 2>&1 &&
    "$AH" evaluate --plan "$TMP/od-plan.json" --json >"$TMP/od-eval.json" 2>&1 &&
    "$AH" simulate "${SAME[@]}" --policy on-demand --hours 1 --ckpt-every-s 100000 --json "$TMP/od-sim.json" >/dev/null 2>&1 &&
    $PY - "$TMP/od-eval.json" "$TMP/od-sim.json" <<'P'
import json, sys
e = json.load(open(sys.argv[1]))
s = json.load(open(sys.argv[2]))["policies"][0]
tokens_per_s = 256 * 1024 / e["priced_iteration_s"]
assert e["priced_iteration_s"] == e["iteration_overlap_s"] < e["iteration_s"], e
assert abs(s["breakdown"]["train_tokens_per_s"] - tokens_per_s) < 1e-9 * tokens_per_s, (s["breakdown"], tokens_per_s)
hours = s["tokens"] / tokens_per_s / 3600
assert s["ckpt_egress_usd"] == 0 and e["egress_usd_per_hour"] > 0, (s["ckpt_egress_usd"], e["egress_usd_per_hour"])
want = e["egress_usd_per_hour"] * hours
assert abs(s["egress_usd"] - want) < 1e-9 * want, ("simulate", s["egress_usd"], "evaluate", want)
P
check "evaluate's egress \$/h and the simulator's egress for the same plan over the same hours agree" $?
checks_done test_sim_regions
