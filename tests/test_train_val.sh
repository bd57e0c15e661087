# Validation (--val-data FILES --val-every K --val-batches N): the loss over N global batches of
# held-out shards after every K-th step and the last, in the progress line and the step line's
# "val_loss"; the same value on every plan (one rank; a 4-stage pipeline; 4 data-parallel
# replicas; a hybrid TP 2 plan of two unequal pipelines), training itself unchanged by it, and
# autohet run passing the flags to its launches.
. "$(dirname "$0")/train_common.sh"
# Held-out text in two shards (a glob), as `autohet tokenize` writes them.
head -c 6000 /usr/share/common-licenses/GPL-2 >"$WORK/val-a.txt"
tail -c 6000 /usr/share/common-licenses/GPL-2 >"$WORK/val-b.txt"
"$AUTOHET" tokenize "$WORK/val-a.txt" -o "$WORK/val_0.bin" >/dev/null || fail "tokenize"
"$AUTOHET" tokenize "$WORK/val-b.txt" -o "$WORK/val_1.bin" >/dev/null || fail "tokenize"
train() { # NAME PLAN [flags]
    local name=$1 plan=$PLANS/$2.json
    shift 2
    $MPIRUN -np "$(plan_ranks "$plan")" "$AUTOHET" train --plan "$plan" --data "$WORK/text.bin" --steps 4 \
        --metrics "$WORK/$name.jsonl" "$@" >"$WORK/$name.out" 2>&1 || { cat "$WORK/$name.out"; fail "train $name"; }
}
VAL=(--val-data "$WORK/val_*.bin" --val-every 2 --val-batches 3)
train single train-single "${VAL[@]}"
train pp4 train-pp4 "${VAL[@]}"
train dp4 train-dp4 "${VAL[@]}"
train tp2 train-tp2-asym "${VAL[@]}"
train plain train-pp4
grep -q "^step    1/3 | loss [0-9.]* | val loss [0-9.]* | lr" "$WORK/pp4.out" || { cat "$WORK/pp4.out"; fail "no val loss in the progress line"; }
! grep -q "^step    0/3 .*val loss" "$WORK/pp4.out" || fail "a val loss at step 0 (--val-every 2)"
python3 - "$WORK" <<'PY' || fail "validation losses"
import json, sys
w = sys.argv[1]
def lines(n):
    return [json.loads(l) for l in open(f"{w}/{n}.jsonl") if "event" not in json.loads(l)]
ref = lines("single")
vals = {s["step"]: s["val_loss"] for s in ref if "val_loss" in s}
assert sorted(vals) == [1, 3], f"validated after steps {sorted(vals)}, expected 2 and 4"
assert vals[3] < vals[1], f"validation loss did not fall: {vals}"
assert all(abs(v - l["loss"]) > 1e-6 for l in ref for v in [vals.get(l["step"], 0)] if "val_loss" in l), "val loss is the training loss"
for n in ["pp4", "dp4", "tp2"]:
    got = {s["step"]: s["val_loss"] for s in lines(n) if "val_loss" in s}
    for k, v in vals.items():
        assert abs(got[k] - v) <= 1e-5 * v, f"{n}: val loss after step {k + 1} is {got[k]!r}, one rank's {v!r}"
plain = [s["loss"] for s in lines("plain")]
assert plain == [s["loss"] for s in lines("pp4")], "validation changed the training losses"
print("val losses", vals, "equal on 4 plans")
PY
# autohet run passes the flags on to every launch.
"$AUTOHET" run --model tiny-gpt2 --cluster cpu-hetero --data "$WORK/text.bin" --val-data "$WORK/val_*.bin" \
    --val-every 2 --val-batches 1 --steps 4 --work-dir "$WORK/run" --quiet >"$WORK/run.out" 2>&1 || { cat "$WORK/run.out"; fail "run"; }
[ "$(grep -c '"val_loss"' "$WORK/run/metrics.jsonl")" = 2 ] || fail "autohet run: expected 2 val_loss lines"
"$AUTOHET" train --plan "$PLANS/train-single.json" --data "$WORK/text.bin" --val-every 2 >"$WORK/usage.out" 2>&1 \
    && fail "--val-every without --val-data accepted"
grep -q "need --val-data FILES" "$WORK/usage.out" || fail "no message for --val-every without --val-data"
# Held-out data of one sample (sequence length 32: 33 to 64 tokens), fewer than --val-batches 4 x 8.
head -c 40 /usr/share/common-licenses/GPL-2 >"$WORK/one.txt"
"$AUTOHET" tokenize "$WORK/one.txt" -o "$WORK/one.bin" >/dev/null || fail "tokenize one sample"
train small train-single --val-data "$WORK/one.bin"
grep -q "^autohet train: warning: --val-data holds 1 sample, fewer than --val-batches 4 x the global batch 8" \
    "$WORK/small.out" || { cat "$WORK/small.out"; fail "the warning for one held-out sample"; }
echo PASS
