# Memory truth: the high-water mark each rank's allocator reports (metrics "memory_high_bytes")
# equals the cost model's per-device prediction (autohet evaluate --json, minus the type's reserved
# constant, which the runtime does not allocate) to the byte, for plans with and without
# recomputation, TP 1, 2 and 4 (the vocabulary-parallel embedding and head), asymmetric pipelines,
# a larger micro-batch, LLaMA, and an untied GPT-2 head; and zero-bubble pipelines (their W inputs
# kept from B to W, and min(S, n) activation slots per stage): TP 2 with a recomputing stage
# (W keeps the linear layers' inputs too), LLaMA with recomputation, and LLaMA TP 2 on asymmetric
# pipelines (the qkv and gate/up gradients kept in the slot's dead tensors).
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
# LLaMA (tiny-llama's 2 kv heads allow TP 2, tiny-llama-tp4's 4 TP 4, one with recomputation) and
# GPT-2 with its own LM head, on the TP plans.
python3 - "$PLANS" "$WORK" "$AUTOHET" <<'PY'
import json, subprocess, sys
plans, work, autohet = sys.argv[1:]
untied = json.loads(subprocess.run([autohet, "model", "--model", "tiny-gpt2", "--json"],
                                   capture_output=True, check=True).stdout)["model"]
untied.update(tied=False, name="tiny-gpt2-untied")
for src, out, model, rc in [("train-tp2-asym", "llama-tp2", "tiny-llama", False),
                            ("train-tp4", "llama-tp4", "tiny-llama-tp4", False),
                            ("train-pp2-recompute", "llama-pp2-recompute", "tiny-llama", True),
                            ("train-tp2-asym", "untied-tp2", untied, False),
                            ("train-tp4", "untied-tp4", untied, False)]:
    d = json.load(open(f"{plans}/{src}.json"))
    d["model"] = model
    for p in d["pipelines"]:
        for s in p["stages"]:
            s["recompute"] = s.get("recompute", False) or rc
    json.dump(d, open(f"{work}/{out}.json", "w"))
PY
with_schedule "$PLANS/train-tp2-asym.json" zero-bubble "$WORK/zb-tp2-asym.json"
with_schedule "$WORK/llama-pp2-recompute.json" zero-bubble "$WORK/zb-llama-pp2-recompute.json"
with_schedule "$WORK/llama-tp2.json" zero-bubble "$WORK/zb-llama-tp2.json"
for plan in "$PLANS/train-tp2-asym.json" "$PLANS/train-asym.json" "$PLANS/train-pp2-recompute.json" \
            "$PLANS/train-tp4.json" "$WORK/asym-mb2.json" "$WORK/llama-tp2.json" "$WORK/llama-tp4.json" \
            "$WORK/llama-pp2-recompute.json" "$WORK/untied-tp2.json" "$WORK/untied-tp4.json" \
            "$WORK/zb-tp2-asym.json" "$WORK/zb-llama-pp2-recompute.json" "$WORK/zb-llama-tp2.json"; do
    check_memory "$plan"
done
echo "PASS"
