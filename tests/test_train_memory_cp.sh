# Memory truth for context parallelism: each CP rank's allocator high-water mark (metrics
# "memory_high_bytes") equals the cost model's per-device prediction (autohet evaluate --json,
# minus the type's reserved constant) to the byte: its T/cp tokens' activation slots (the ring's
# logsumexp as the attention state), the workspace, p2p buffers, and the ring's own buffers
# (ah_cp_ring_bytes). CP 2 and 4, CP 2 with TP 2, CP 2 with PP 2 and a recomputing stage, LLaMA
# (GQA: only the KV heads go around the ring) at CP 2 and with TP 2 and recomputation, and three
# pipelines of CP 2, 4 and 1 in one job, and CP 2 with PP 2 with the optimizer sharded over the CP
# ranks (each owns its part's AdamW state), CP 2 under interleaved 1F1B (train-cp2-il2) and CP 2 x
# PP 2 under zero-bubble. Under AH_CLUSTER_SHORT=1 (CI's ASan stage) the first
# three only.
. "$(dirname "$0")/train_common.sh"
# tiny-llama at CP 2 x TP 2 with recomputation (4 ranks)
python3 - "$PLANS/train-cp2-tp2.json" "$WORK/llama-cp2-tp2-recompute.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
d["model"] = "tiny-llama"
for p in d["pipelines"]:
    for s in p["stages"]:
        s["recompute"] = True
json.dump(d, open(sys.argv[2], "w"))
PY
with_schedule "$PLANS/train-cp2-pp2.json" zero-bubble "$WORK/cp2-pp2-zb.json"
PLAN_FILES=("$PLANS/train-cp2.json" "$PLANS/train-cp2-tp2.json" "$PLANS/train-llama-cp2.json")
[ "${AH_CLUSTER_SHORT:-0}" = 1 ] ||
    PLAN_FILES+=("$PLANS/train-cp4.json" "$PLANS/train-cp2-pp2.json" "$WORK/llama-cp2-tp2-recompute.json"
                 "$PLANS/train-cp-mixed.json" "$PLANS/train-cp2-pp2-sharded.json" "$PLANS/train-cp2-il2.json"
                 "$WORK/cp2-pp2-zb.json")
for plan in "${PLAN_FILES[@]}"; do
    check_memory "$plan"
done
echo "PASS"
