# The planner with a sharded optimizer (issue 21): on 4 one-device nodes of 3.4 MiB each, tiny-gpt2
# fits unsharded only as one pipeline of 4 stages; `autohet plan --shard-optimizer auto` finds a
# faster plan with replicas whose AdamW state is split over them, a plan that does not fit
# unsharded (evaluate --shard-optimizer none refuses it) and that trains under the emulated caps
# with its predicted memory to the byte. --shard-optimizer's bad value is refused, naming it.
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
# --schedule 1f1b: sharded plans are 1F1B (the schedule search does not weigh them), and the
# unsharded pipeline would otherwise run zero-bubble: like is compared with like
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
! "$AUTOHET" plan --model tiny-gpt2 --cluster "$WORK/tight.json" --shard-optimizer half 2>"$WORK/bad.err" &&
    grep -q -- '--shard-optimizer: expected none, even, memory or auto, got "half"' "$WORK/bad.err" ||
    fail "a bad --shard-optimizer is not refused by name"
echo PASS
