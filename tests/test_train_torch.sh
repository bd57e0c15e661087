# PyTorch full-model reference: tests/torch/gpt2_train_ref.py builds the same GPT-2 (tiny-gpt2)
# in torch from autohet's initial weights (--dump-params at step 0) and the same batches of the
# same token file, and compares the loss and every gradient tensor of step 0 (--dump-grads,
# <= 1e-5 relative per tensor) and the losses of 10 AdamW steps (warm-up, cosine, weight decay on
# matrices, clipping), for a single-rank run and for an 8-rank plan (TP 2 x asymmetric PP x DP,
# with a recomputing stage). Torch is required: a missing torch fails, it does not skip.
# Usage: bash tests/test_train_torch.sh BUILD_DIR SOURCE_DIR
. "$(dirname "$0")/train_common.sh"
PY=/usr/bin/python3 # Debian's python3-torch; the python3 on PATH may not have torch
"$PY" -c 'import torch' 2>/dev/null || fail "$PY cannot import torch; install it: apt-get install python3-torch"
STEPS=10
# Hyper-parameters away from the defaults, so that the reference has to follow them: short
# warm-up then cosine, a clip that bites in the first steps.
HP=(--lr 3e-3 --warmup 3 --weight-decay 0.05 --grad-clip 0.5)
for name in single tp2-asym; do
    plan=$PLANS/train-$name.json
    n=$(plan_ranks "$plan")
    cmd=("$AUTOHET" train --plan "$plan" --data "$WORK/text.bin" --steps $STEPS "${HP[@]}" --quiet
         --metrics "$WORK/$name.jsonl" --dump-params "$WORK/$name" --dump-grads "$WORK/$name" --dump-step 0)
    if [ "$n" = 1 ]; then timeout 120 "${cmd[@]}" 2>"$WORK/$name.err"; else timeout 120 $MPIRUN -np "$n" "${cmd[@]}" 2>"$WORK/$name.err"; fi \
        || { cat "$WORK/$name.err" >&2; fail "$name: autohet train failed"; }
    read -r B T M < <(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); t=d["train"]; print(t["global_batch"], t["seq_len"], d["model"])' "$plan")
    H=$("$AUTOHET" model --model "$M" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["model"]["n_head"])')
    "$PY" "$SRC/tests/torch/gpt2_train_ref.py" --label "$name ($n ranks)" --params "$WORK/$name" \
        --grads "$WORK/$name" --metrics "$WORK/$name.jsonl" --data "$WORK/text.bin" --batch "$B" \
        --seq-len "$T" --heads "$H" --steps $STEPS "${HP[@]}" || fail "$name differs from PyTorch"
done
echo PASS
