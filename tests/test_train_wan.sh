#!/usr/bin/env bash
# The rule for traffic across regions in the open (issue 39; docs/multi-host.md "Across regions"):
# a plan whose DP sync crosses a region boundary on a link not marked private is refused by train
# before any set-up, naming the link, what crosses it and --allow-unencrypted-wan; with the flag it
# trains; with "private": true on the link's network.links entry it trains without the flag; plan
# and evaluate say which link carries what. Two one-device replicas of tiny-gpt2 (dp2_plan) on
# nodes n0 (region us-east-1) and n1 (region eu-west-1), 2 steps each; the regions are emulated
# (both ranks run here: the rule reads the plan's cluster, not the network). autohet run: refused
# before launch 0 without the flag, one step with it (3 ranks); a re-plan that would cross in the
# open (a join) planned in the fastest region alone instead (agent_plan.c); a join under --objective cost
# weighed by cost and not restarted onto nodes that cannot restore the saved step.
# Usage: bash tests/test_train_wan.sh BUILD_DIR SOURCE_DIR
source "$(dirname "$0")/train_common.sh"
STEPS=2
dp2_plan "$WORK/dp2-one.json"
# regions_plan OUT LINKS: the dp2 plan with n0 and n1 in two regions and network.links = LINKS
regions_plan() {
    python3 - "$WORK/dp2-one.json" "$1" "$2" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for n in d["cluster"]["nodes"]:
    n["zone"], n["region"] = ("us-east-1a", "us-east-1") if n["name"] != "n1" else ("eu-west-1a", "eu-west-1")
d["cluster"].setdefault("network", {})["links"] = json.loads(sys.argv[3])
json.dump(d, open(sys.argv[2], "w"))
PY
}
regions_plan "$WORK/dp2.json" '[]'

dp2_train open && fail "train across regions in the open ran without --allow-unencrypted-wan"
grep -Eq "the plan's traffic crosses a region boundary in the open, unencrypted .*: across regions: (us-east-1 <-> eu-west-1|eu-west-1 <-> us-east-1) \(not marked private\): DP sync [0-9.]* GB per iteration; .*--allow-unencrypted-wan" "$WORK/open.err" ||
    fail "the refusal names the link, the DP sync and the flag: $(cat "$WORK/open.err")"
[ "$(grep -c "crosses a region boundary" "$WORK/open.err")" -eq 1 ] || fail "the refusal is said once: $(cat "$WORK/open.err")"
[ -s "$WORK/open.jsonl" ] && fail "the refused run wrote metrics"
echo "refused: $(head -c 400 "$WORK/open.err")"

dp2_train allowed --allow-unencrypted-wan || fail "train with --allow-unencrypted-wan: $(cat "$WORK/allowed.err")"
[ "$(grep -vc event "$WORK/allowed.jsonl")" -eq "$STEPS" ] || fail "the allowed run trained $STEPS steps"

regions_plan "$WORK/dp2.json" '[{"between": ["us-east-1", "eu-west-1"], "private": true}]'
dp2_train private || fail "train over a private link without the flag: $(cat "$WORK/private.err")"
python3 - "$WORK/allowed.jsonl" "$WORK/private.jsonl" <<'PY' || fail "the private run's losses differ from the allowed run's"
import json, sys
a, b = ([o["loss"] for o in map(json.loads, open(p)) if "event" not in o] for p in sys.argv[1:3])
assert a == b and len(a) == 2, (a, b)
PY

"$AUTOHET" evaluate --plan "$WORK/dp2.json" >"$WORK/eval.txt" 2>&1 || fail "evaluate: $(cat "$WORK/eval.txt")"
grep -q "^across regions: us-east-1 <-> eu-west-1 (its network.links entry, private): DP sync [0-9.]* GB per iteration$" "$WORK/eval.txt" ||
    fail "evaluate says which link carries what: $(grep -i region "$WORK/eval.txt")"
# run: the agent refuses a plan across regions in the open before it launches any rank, and passes
# the flag on to train. cpu-hetero-3 with fast-0 in us-east-1 and slow-* in eu-west-1, the WAN as
# fast as the nodes' link so that the plan spans both regions ([fast-0] + [slow-0 > slow-1]).
python3 - "$WORK/run-cluster.json" <<'PY'
import json, sys
t = {"bf16": 0.05, "fp16": 0.05, "fp32": 0.05}
slow = {k: v / 3 for k, v in t.items()}
c = {"gpu_types": {"cpu-fast": {"memory_gib": 1, "tflops": t, "mem_bw_gb_s": 10, "intra_node_gb_s": 5, "emulate": {"slowdown": 1}},
                   "cpu-slow": {"memory_gib": 1, "tflops": slow, "mem_bw_gb_s": 10 / 3, "intra_node_gb_s": 5, "emulate": {"slowdown": 3}}},
     "nodes": [{"name": "fast-0", "gpu": "cpu-fast", "count": 1, "zone": "us-east-1a", "region": "us-east-1"},
               {"name": "slow-0", "gpu": "cpu-slow", "count": 1, "zone": "eu-west-1a", "region": "eu-west-1"},
               {"name": "slow-1", "gpu": "cpu-slow", "count": 1, "zone": "eu-west-1a", "region": "eu-west-1"}],
     "network": {"inter_node_gb_s": 1, "inter_region_gb_s": 1, "inter_region_latency_us": 5}}
json.dump(c, open(sys.argv[1], "w"))
PY
RUN=("$AUTOHET" run --model tiny-gpt2 --cluster "$WORK/run-cluster.json" --data "$WORK/text.bin" --global-batch 8
     --seq-len 64 --quiet)
timeout 60 "${RUN[@]}" --steps 1 --work-dir "$WORK/run-open" >"$WORK/run-open.log" 2>&1 && fail "run across regions in the open ran"
grep -q "^autohet run: usage error: launch 0: the plan's traffic crosses a region boundary in the open.*DP sync.*--allow-unencrypted-wan" "$WORK/run-open.log" ||
    fail "run's refusal: $(cat "$WORK/run-open.log")"
[ -e "$WORK/run-open/launch-0" ] && fail "run launched although it refused"
timeout 120 "${RUN[@]}" --steps 1 --work-dir "$WORK/run-allowed" --allow-unencrypted-wan --replica-memory-gb 1 >"$WORK/run-allowed.log" 2>&1 ||
    fail "run --allow-unencrypted-wan: $(tail -5 "$WORK/run-allowed.log")"
grep -q "^trained 1 of 1 steps" "$WORK/run-allowed.log" || fail "run --allow-unencrypted-wan trained: $(tail -5 "$WORK/run-allowed.log")"
# run plans with the checkpoint policy its trainer follows (a save every 5 by default, replicas on):
# its prediction is plan's with the same flags, which counts the replication (not plan's without them)
predicted() { grep -Eo "predicted:? [0-9.]+ s" | head -1 | grep -Eo "[0-9.]+"; }
run_s=$(grep "plan: 3 devices" "$WORK/run-allowed.log" | predicted)
PLAN=("$AUTOHET" plan --model tiny-gpt2 --cluster "$WORK/run-cluster.json" --global-batch 8 --seq-len 64 --ckpt-every 5)
with_s=$("${PLAN[@]}" --replica-memory-gb 1 2>/dev/null | predicted)
without_s=$("${PLAN[@]}" 2>/dev/null | predicted)
[ -n "$run_s" ] && [ "$run_s" = "$with_s" ] && [ "$with_s" != "$without_s" ] ||
    fail "run's prediction ($run_s s) is plan's with its checkpoint policy ($with_s s; without: $without_s s)"
# a re-plan is not refused: fast-0 (us-east-1) is down at the start, so the run starts in eu-west-1
# (fast-1, slow-0); fast-0 joins 300 ms in; at the next checkpoint the plan over all three would
# cross in the open, so the agent plans over each region alone and takes the fastest (eu-west-1,
# the running plan: no restart), says so and trains on (agent_plan.c)
python3 - "$WORK/run-cluster.json" "$WORK/run-cluster-2.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c["nodes"] = [{"name": "fast-0", "gpu": "cpu-fast", "count": 1, "zone": "us-east-1a", "region": "us-east-1"},
              {"name": "fast-1", "gpu": "cpu-fast", "count": 1, "zone": "eu-west-1a", "region": "eu-west-1"},
              {"name": "slow-0", "gpu": "cpu-slow", "count": 1, "zone": "eu-west-1a", "region": "eu-west-1"}]
json.dump(c, open(sys.argv[2], "w"))
PY
printf '0,remove,fast-0\n300,add,fast-0\n' >"$WORK/join-east.csv"
timeout 120 "$AUTOHET" run --model tiny-gpt2 --cluster "$WORK/run-cluster-2.json" --data "$WORK/text.bin" --global-batch 8 \
    --seq-len 64 --quiet --steps 6 --ckpt-every 1 --events "$WORK/join-east.csv" --work-dir "$WORK/run-join" >"$WORK/run-join.log" 2>&1 || fail "run with a join that would cross regions: $(tail -5 "$WORK/run-join.log")"
grep -q "crosses a region boundary in the open; without --allow-unencrypted-wan (or a link marked \"private\") the agent plans in region eu-west-1 alone" \
    "$WORK/run-join.log" || fail "the re-plan in one region is said: $(cat "$WORK/run-join.log")"
grep -q '"event":"confined","region":"eu-west-1"' "$WORK/run-join/metrics.jsonl" || fail "a confined event in the metrics"
grep -q "^trained 6 of 6 steps" "$WORK/run-join.log" || fail "the confined run trained: $(tail -5 "$WORK/run-join.log")"
# a join under --objective cost (fast-0 at $1/h, the eu-west-1 nodes at $10/h; fast-0 a type the
# planner prices 20x faster, its emulation unchanged): the plan over the nodes up is fast-0 alone,
# cheaper per token than the running fast-1 (agent_plan.c; since c82da79 every node up is paid
# whatever the plan uses, so fast-0 must be the faster too, not only the cheaper). It leaves out
# fast-1, which alone holds the step saved at the stop, so no restart: fast-0's rank could not read
# that step and would start over (the bug this checks, with and without in-memory replicas).
python3 - "$WORK/run-cluster-2.json" "$WORK/run-cluster-3.json" <<'PY'
import copy, json, sys
c = json.load(open(sys.argv[1]))
x = copy.deepcopy(c["gpu_types"]["cpu-fast"])
x["tflops"] = {d: v * 20 for d, v in x["tflops"].items()}
x["mem_bw_gb_s"] *= 20
c["gpu_types"]["cpu-fast-x"] = x
for n in c["nodes"]:
    n["usd_per_gpu_hour"] = 1 if n["name"] == "fast-0" else 10
    if n["name"] == "fast-0":
        n["gpu"] = "cpu-fast-x"
json.dump(c, open(sys.argv[2], "w"))
PY
for replicas in 0 1; do
    out="$WORK/run-cost-$replicas"
    timeout 120 "$AUTOHET" run --model tiny-gpt2 --cluster "$WORK/run-cluster-3.json" --data "$WORK/text.bin" --global-batch 8 \
        --seq-len 64 --quiet --steps 6 --ckpt-every 1 --objective cost --replica-memory-gb $replicas --events "$WORK/join-east.csv" \
        --work-dir "$out" >"$out.log" 2>&1 || fail "run --objective cost with a join (replicas $replicas): $(tail -5 "$out.log")"
    grep -q "a plan with the joined nodes is better under --objective cost" "$out.log" || fail "the join is weighed by cost: $(cat "$out.log")"
    grep -q "^trained 6 of 6 steps" "$out.log" || fail "trained (replicas $replicas): $(tail -5 "$out.log")"
    grep -q "(0 steps redone after a rollback)" "$out.log" || fail "no step redone (replicas $replicas): $(cat "$out.log")"
    grep -q "but it leaves out fast-1, which holds part of the step the restart would resume from.*: no restart" "$out.log" ||
        fail "the join does not restart, said (replicas $replicas): $(cat "$out.log")"
done
[ "$("$AUTOHET" train --help | grep -- "^  --allow-unencrypted-wan ")" = "$("$AUTOHET" run --help | grep -- "^  --allow-unencrypted-wan ")" ] ||
    fail "train's and run's --allow-unencrypted-wan lines differ"
echo "ok: refused in the open, trained with --allow-unencrypted-wan and over a private link (losses equal); run likewise, and a re-plan confined to one region"
