# Memory truth: the high-water mark each rank's allocator reports (metrics "memory_high_bytes")
# equals the cost model's per-device prediction (autohet evaluate --json, minus the type's reserved
# constant, which the runtime does not allocate) within 1 %, for plans with and without
# recomputation, TP, asymmetric pipelines, and a larger micro-batch.
. "$(dirname "$0")/train_common.sh"
# A variant with micro-batch 2 and sequence length 64 (micro-batches 2 + 1 + 1 = 8 / 2).
python3 - "$PLANS/train-asym.json" "$WORK/asym-mb2.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
d["train"].update(micro_batch=2, seq_len=64)
for p, n in zip(d["pipelines"], (2, 1, 1)):
    p["micro_batches"] = n
json.dump(d, open(sys.argv[2], "w"))
PY
for plan in "$PLANS/train-tp2-asym.json" "$PLANS/train-asym.json" "$PLANS/train-pp2-recompute.json" \
            "$PLANS/train-tp4.json" "$WORK/asym-mb2.json"; do
    n=$(plan_ranks "$plan")
    "$AUTOHET" evaluate --json --plan "$plan" >"$WORK/eval.json" || fail "evaluate $plan"
    timeout 60 $MPIRUN -np "$n" "$AUTOHET" train --plan "$plan" --data "$WORK/text.bin" --steps 1 \
        --quiet --metrics "$WORK/m.jsonl" 2>"$WORK/err" || { cat "$WORK/err" >&2; fail "train $plan"; }
    python3 - "$plan" "$WORK/eval.json" "$WORK/m.jsonl" <<'PY' || fail "memory of $plan"
import json, sys
plan, ev = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
got = json.loads(open(sys.argv[3]).readline())["memory_high_bytes"]
gpus = [s["gpu"] for p in plan["pipelines"] for s in p["stages"] for _ in s["devices"]]
assert len(got) == len(ev["devices"]) == len(gpus), (len(got), len(ev["devices"]))
worst = 0.0
for r, (dev, high, gpu) in enumerate(zip(ev["devices"], got, gpus)):
    reserved = int(round(plan["cluster"]["gpu_types"][gpu]["reserved_gib"] * 2**30))
    want = dev["memory_bytes"] - reserved
    rel = abs(high - want) / want
    worst = max(worst, rel)
    assert rel <= 0.01, f"rank {r}: runtime high-water mark {high} vs predicted {want} ({rel:.2%})"
print(f"{sys.argv[1].split('/')[-1]}: {len(got)} ranks, worst difference {worst:.4%}")
PY
done
echo "PASS"
