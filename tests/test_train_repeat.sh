# A run that reads past the end of its data is warned before the first step, naming the step that
# starts reading it again (also after a --resume, from the checkpoint's data position); a run
# that stays within one pass is not.
. "$(dirname "$0")/train_common.sh"
PLAN=$PLANS/train-single.json # B 8, T 32
# 3 steps of samples: 24 windows of 32 + 1 tokens (the last token only a target); and one window.
python3 - "$WORK/text.bin" "$WORK/small.bin" "$WORK/one.bin" <<'PY'
import struct, sys
for out, n in [(sys.argv[2], 769), (sys.argv[3], 40)]:
    tok = open(sys.argv[1], "rb").read()[1024:1024 + 2 * n]
    open(out, "wb").write(struct.pack("<256i", 20240520, 1, n, *([0] * 253)) + tok)
PY
train() { # OUT flags...
    local out=$1
    shift
    $MPIRUN -np 1 "$AUTOHET" train --quiet --plan "$PLAN" --data "$WORK/small.bin" "$@" >"$WORK/$out" 2>&1 \
        || { cat "$WORK/$out"; fail "train $*"; }
}
train three --steps 3
! grep -q "more than once" "$WORK/three" || { cat "$WORK/three"; fail "a warning for a run within one pass"; }
train five --steps 5
grep -q "^autohet train: warning: the run will see its data more than once: --data holds 24 samples of 32 + 1 tokens (769 tokens in 1 shard), 8 a step; step 3 (of 0..4) starts reading it again" "$WORK/five" \
    || { cat "$WORK/five"; fail "no warning naming step 4"; }
$MPIRUN -np 1 "$AUTOHET" train --quiet --plan "$PLAN" --data "$WORK/one.bin" --steps 1 >"$WORK/one" 2>&1 ||
    { cat "$WORK/one"; fail "train on one sample"; }
grep -q "^autohet train: warning: the run will see its data more than once: --data holds 1 sample of 32 + 1 tokens (40 tokens in 1 shard), 8 a step; step 0 (of 0..0)" "$WORK/one" \
    || { cat "$WORK/one"; fail "the warning for one sample"; }
train first --steps 2 --ckpt-every 2 --local-root "$WORK/ckpt"
train resumed --steps 8 --resume --reschedule --local-root "$WORK/ckpt"
grep -q "step 3 (of 0..7) starts reading it again" "$WORK/resumed" || { cat "$WORK/resumed"; fail "no warning after the resume"; }
echo PASS
