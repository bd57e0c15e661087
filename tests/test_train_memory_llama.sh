# Memory truth for LLaMA: the high-water mark each rank's allocator reports (metrics
# "memory_high_bytes") equals the cost model's per-device prediction (autohet evaluate --json, minus
# the type's reserved constant, which the runtime does not allocate) to the byte, for untied
# (tiny-llama, tiny-llama-tp4) and tied heads (their shapes with tie_word_embeddings true, as
# config.json files) at TP 1, 2 and 4, with and without recomputation, asymmetric pipelines, and a
# larger micro-batch.
. "$(dirname "$0")/train_common.sh"
llama_config "$WORK/tied.config.json" tiny-llama true
llama_config "$WORK/tied4.config.json" tiny-llama-tp4 true
# micro-batch 2 and sequence length 64 on the asymmetric pipelines (micro-batches 2 + 1 + 1 = 8 / 2)
python3 - "$PLANS/train-llama-asym.json" "$WORK/llama-asym-mb2.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
d["train"].update(micro_batch=2, seq_len=64)
for p, n in zip(d["pipelines"], (2, 1, 1)):
    p["micro_batches"] = n
json.dump(d, open(sys.argv[2], "w"))
PY
PLAN_FILES=("$PLANS/train-llama-single.json" "$PLANS/train-llama-tp2.json" "$PLANS/train-llama-tp2-asym.json"
            "$PLANS/train-llama-asym.json" "$PLANS/train-llama-pp2-recompute.json" "$WORK/llama-asym-mb2.json"
            "$PLANS/train-llama4-tp4.json" "$PLANS/train-llama4-tp4-pp2.json")
for name in single tp2 tp2-asym asym pp2-recompute; do
    plan_with_config "$PLANS/train-llama-$name.json" "$WORK/tied.config.json" tiny-llama-tied "$WORK/tied-$name.json"
    PLAN_FILES+=("$WORK/tied-$name.json")
done
for name in tp4 tp4-pp2; do
    plan_with_config "$PLANS/train-llama4-$name.json" "$WORK/tied4.config.json" tiny-llama-tp4-tied "$WORK/tied4-$name.json"
    PLAN_FILES+=("$WORK/tied4-$name.json")
done
failed=0
for plan in "${PLAN_FILES[@]}"; do
    n=$(plan_ranks "$plan")
    "$AUTOHET" evaluate --json --plan "$plan" >"$WORK/eval.json" || fail "evaluate $plan"
    timeout 60 $MPIRUN -np "$n" "$AUTOHET" train --plan "$plan" --data "$WORK/text.bin" --steps 1 \
        --quiet --metrics "$WORK/m.jsonl" 2>"$WORK/err" || { cat "$WORK/err" >&2; fail "train $plan"; }
    python3 - "$plan" "$WORK/eval.json" "$WORK/m.jsonl" <<'PY' || failed=$((failed + 1)) # every plan runs; all mismatches reported
import json, sys
plan, ev = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
m = plan["model"]
got = json.loads(open(sys.argv[3]).readline())["memory_high_bytes"]
gpus = [s["gpu"] for p in plan["pipelines"] for s in p["stages"] for _ in s["devices"]]
assert len(got) == len(ev["devices"]) == len(gpus), (len(got), len(ev["devices"]))
bad = []
for r, (dev, high, gpu) in enumerate(zip(ev["devices"], got, gpus)):
    reserved = int(round(plan["cluster"]["gpu_types"][gpu]["reserved_gib"] * 2**30))
    want = dev["memory_bytes"] - reserved
    if high != want:
        bad.append(f"rank {r}: runtime high-water mark {high} vs predicted {want} ({high - want:+d} bytes)")
name = m if isinstance(m, str) else m["name"]
label = f"{sys.argv[1].split('/')[-1]} ({name}, tp {plan['tp']})"
if bad:
    sys.exit(label + ":\n  " + "\n  ".join(bad))
print(f"{label}: {len(got)} ranks, predicted = high-water mark to the byte")
PY
done
[ $failed = 0 ] || fail "$failed of ${#PLAN_FILES[@]} plans: the runtime's memory differs from the prediction"
echo "PASS"
