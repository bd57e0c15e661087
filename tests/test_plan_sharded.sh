# The planner with a sharded optimizer (issue 21): on 4 one-device nodes of 3.4 MiB each, tiny-gpt2
# fits unsharded only as one pipeline of 4 stages; `autohet plan --shard-optimizer auto` finds a
# faster plan with replicas whose AdamW state is split over them, a plan that does not fit
# unsharded (evaluate --shard-optimizer none refuses it) and that trains under the emulated caps
# with its predicted memory to the byte. The schedule search weighs sharded plans (issue 35):
# --schedule auto gives the sharded replicas zero-bubble, and --schedule interleaved gives them
# virtual stages with the shards redrawn for the new DP groups, a plan that trains under the caps
# at its predicted memory to the byte. --shard-optimizer's bad value is refused, naming it.
. "$(dirname "$0")/train_common.sh"
python3 - "$PLANS/train-dp4.json" "$WORK/tight.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))["cluster"]
t = c["gpu_types"]["cpu"]
t["memory_gib"], t["emulate"]["memory_mib"] = 3.4 / 1024, 3.4
c["nodes"] = [{"name": f"n{i}", "gpu": "cpu", "count": 1, "zone": "a", "spot": False, "usd_per_gpu_hour": 0.1}
              for i in range(4)]
json.dump(c, open(sys.argv[2], "w"))
PY
# --schedule 1f1b: like compared with like (the schedules below)
for sh in none auto; do
    "$AUTOHET" plan --model tiny-gpt2 --cluster "$WORK/tight.json" --global-batch 8 --seq-len 64 --precision fp32 \
        --schedule 1f1b --shard-optimizer $sh -o "$WORK/plan-$sh.json" >"$WORK/plan-$sh.out" 2>&1 || { cat "$WORK/plan-$sh.out"; fail "plan $sh"; }
done
python3 - "$WORK/plan-none.json" "$WORK/plan-auto.json" <<'PY' || fail "the sharded plan is not the faster one with replicas"
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:])
assert len(a["pipelines"]) == 1 and not a.get("optimizer_shards"), "unsharded: one pipeline"
assert len(b["pipelines"]) >= 2 and b.get("optimizer_shards"), "sharded: replicas, shares"
ta, tb = a["predicted"]["iteration_s"], b["predicted"]["iteration_s"]
assert tb < ta, (ta, tb)
print(f"unsharded: 1 pipeline, {ta:.4f} s; sharded: {len(b['pipelines'])} pipelines, {tb:.4f} s ({ta / tb:.2f}x)")
PY
grep -q "^optimizer: AdamW state sharded over" "$WORK/plan-auto.out" || fail "plan does not say the optimizer is sharded"
if "$AUTOHET" evaluate --plan "$WORK/plan-auto.json" --shard-optimizer none >"$WORK/ev.out" 2>&1; then
    fail "the sharded plan fits unsharded too: the test shows nothing"
fi
grep -q "OVER CAPACITY" "$WORK/ev.out" || { cat "$WORK/ev.out"; fail "evaluate does not say which device is over"; }
check_memory "$WORK/plan-auto.json"
for sched in auto interleaved; do
    "$AUTOHET" plan --model tiny-gpt2 --cluster "$WORK/tight.json" --global-batch 8 --seq-len 64 --precision fp32 \
        --schedule $sched --shard-optimizer auto -o "$WORK/plan-$sched.json" >"$WORK/plan-$sched.out" 2>&1 ||
        { cat "$WORK/plan-$sched.out"; fail "plan --schedule $sched"; }
    grep "^schedules:" "$WORK/plan-$sched.out"
done
python3 - "$WORK/plan-auto.json" "$WORK/plan-interleaved.json" <<'PY' || fail "the sharded plans got no schedule"
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:])
assert a.get("optimizer_shards") and b.get("optimizer_shards"), "both sharded"
assert {p.get("schedule") for p in a["pipelines"]} == {"zero-bubble"}, [p.get("schedule") for p in a["pipelines"]]
assert {p.get("schedule") for p in b["pipelines"]} == {"interleaved"}, [p.get("schedule") for p in b["pipelines"]]
cuts = sorted({g["layers"][0] for g in b["optimizer_shards"] if g["group"] == "blocks"})
assert len(cuts) > len({g["layers"][0] for g in a["optimizer_shards"] if g["group"] == "blocks"}), "the shards not redrawn"
print(f"sharded zero-bubble {a['predicted']['iteration_s']:.4f} s; sharded interleaved {b['predicted']['iteration_s']:.4f} s, block groups from {cuts}")
PY
check_memory "$WORK/plan-interleaved.json"
! "$AUTOHET" plan --model tiny-gpt2 --cluster "$WORK/tight.json" --shard-optimizer half 2>"$WORK/bad.err" &&
    grep -q -- '--shard-optimizer: expected none, even, memory or auto, got "half"' "$WORK/bad.err" ||
    fail "a bad --shard-optimizer is not refused by name"
echo PASS
