# PyTorch full-model reference for LLaMA: tests/torch/llama_train_ref.py builds the same LLaMA in
# torch (its own code: RMSNorm, rotary positions, grouped-query attention, SwiGLU; transformers is
# not used) from autohet's initial weights (--dump-params at step 0) and the same batches of the
# same token file, checks the rotary convention (Hugging Face's rotate-half on the dumped q/k
# weights = Meta's interleaved pairs on the weights with HF's conversion permutation inverted),
# and compares the loss and every gradient tensor of step 0 (--dump-grads, <= 1e-5 relative per
# tensor) and the losses of 10 AdamW steps (warm-up, cosine, weight decay on the matrices,
# clipping). Plans: tiny-llama (untied head) on one rank and on 8 (TP 2 with GQA x asymmetric PP x
# DP, a recomputing stage, the head on another stage than the embedding), tiny-llama's shape
# with a tied head (a config.json with tie_word_embeddings) on one rank and on TP 2 x PP, and with
# LLaMA 3.1's rope_scaling on TP 2 x PP, and at 1k tokens with context parallelism 4 (tiny-llama's
# shape with a 1024-position context, one sequence a step split over 4 ranks: ring attention,
# rotary angles by position; issue 38; not under AH_CLUSTER_SHORT=1, CI's sanitizer stage).
# Torch is required: a missing torch fails, it does not skip.
# Usage: bash tests/test_train_torch_llama.sh BUILD_DIR SOURCE_DIR
. "$(dirname "$0")/train_common.sh"
PY=/usr/bin/python3 # Debian's python3-torch; the python3 on PATH may not have torch
"$PY" -c 'import torch' 2>/dev/null || fail "$PY cannot import torch; install it: apt-get install python3-torch"
STEPS=10
HP=(--lr 3e-3 --warmup 3 --weight-decay 0.05 --grad-clip 0.5)
llama_config "$WORK/tied.config.json" tiny-llama true
plan_with_config "$PLANS/train-llama-single.json" "$WORK/tied.config.json" tiny-llama-tied "$WORK/train-llama-tied-single.json"
plan_with_config "$PLANS/train-llama-tp2-asym.json" "$WORK/tied.config.json" tiny-llama-tied "$WORK/train-llama-tied-tp2-asym.json"
# LLaMA 3.1's rotary scaling on tiny-llama (head dim 16, theta 1e4: wavelengths 6.3, 19.9, 62.8,
# ...): with an original context of 32, the first frequency is kept, the second blended and the
# rest divided by 8 within the plans' sequences
llama_config "$WORK/scaled.config.json" tiny-llama false \
    '{"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 32}'
plan_with_config "$PLANS/train-llama-tp2-asym.json" "$WORK/scaled.config.json" tiny-llama-scaled "$WORK/train-llama-scaled-tp2-asym.json"
# CP 4 at 1k tokens: train-llama-cp2's plan with the model's context 1024, 4 CP ranks, global batch 1
"$AUTOHET" model --model tiny-llama --json >"$WORK/tiny-llama.json" || fail "autohet model --model tiny-llama"
python3 - "$PLANS/train-llama-cp2.json" "$WORK/tiny-llama.json" "$WORK/train-llama-cp4-1k.json" <<'PY' || fail "the CP 4 plan"
import json, sys
d, m = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))["model"]
m.update(name="tiny-llama-1k", max_pos=1024)
d["model"] = m
d["train"].update(global_batch=1, seq_len=1024, micro_batch=1)
p = d["pipelines"][0]
p.update(cp=4, micro_batches=1)
p["stages"][0]["devices"] = [{"node": "n0", "index": i} for i in range(4)]
json.dump(d, open(sys.argv[3], "w"), indent=1)
PY
CP_PLAN=("$WORK/train-llama-cp4-1k.json")
[ "${AH_CLUSTER_SHORT:-0}" = 1 ] && CP_PLAN=()
for plan in "$PLANS/train-llama-single.json" "$PLANS/train-llama-tp2-asym.json" \
            "$WORK/train-llama-tied-single.json" "$WORK/train-llama-tied-tp2-asym.json" \
            "$WORK/train-llama-scaled-tp2-asym.json" "${CP_PLAN[@]}"; do
    name=$(basename "$plan" .json)
    n=$(plan_ranks "$plan")
    cmd=("$AUTOHET" train --plan "$plan" --data "$WORK/text.bin" --steps $STEPS "${HP[@]}" --quiet
         --metrics "$WORK/$name.jsonl" --dump-params "$WORK/$name" --dump-grads "$WORK/$name" --dump-step 0)
    if [ "$n" = 1 ]; then timeout 120 "${cmd[@]}" 2>"$WORK/$name.err"; else timeout 120 $MPIRUN -np "$n" "${cmd[@]}" 2>"$WORK/$name.err"; fi \
        || { cat "$WORK/$name.err" >&2; fail "$name: autohet train failed"; }
    read -r B T < <(python3 -c 'import json,sys; t=json.load(open(sys.argv[1]))["train"]; print(t["global_batch"], t["seq_len"])' "$plan")
    plan_model_json "$plan" "$WORK/$name.model.json"
    "$PY" "$SRC/tests/torch/llama_train_ref.py" --label "$name ($n ranks)" --model-json "$WORK/$name.model.json" \
        --params "$WORK/$name" --grads "$WORK/$name" --metrics "$WORK/$name.jsonl" --data "$WORK/text.bin" \
        --batch "$B" --seq-len "$T" --steps $STEPS "${HP[@]}" || fail "$name differs from PyTorch"
done
echo PASS
