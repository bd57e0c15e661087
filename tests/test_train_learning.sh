# Learning: on a real English text (GPL-3, byte-level), tiny-gpt2 on a 2-stage recomputing
# pipeline gets from ~ln(256) = 5.5 nats per byte to well below it within 80 steps. Also checks
# the metrics file's fields and the progress line.
. "$(dirname "$0")/train_common.sh"
timeout 120 $MPIRUN -np 2 "$AUTOHET" train --plan "$PLANS/train-pp2-recompute.json" --data "$WORK/text.bin" \
    --steps 80 --lr 3e-3 --warmup 10 --metrics "$WORK/m.jsonl" >"$WORK/out" 2>"$WORK/err" \
    || { cat "$WORK/err" >&2; fail "train"; }
grep -q "^step   79/79 | loss .* tok/s .* ETA" "$WORK/out" || { cat "$WORK/out" >&2; fail "progress line"; }
grep -q "memory high-water mark per rank" "$WORK/err" || fail "no memory report at exit"
python3 - "$WORK/m.jsonl" <<'PY' || fail "did not learn"
import json, math, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert len(rows) == 80
for k in ("step", "loss", "lr", "grad_norm", "tokens", "seconds", "memory_high_bytes"):
    assert k in rows[0], k
assert rows[0]["step"] == 0 and rows[-1]["step"] == 79 and len(rows[0]["memory_high_bytes"]) == 2
first = rows[0]["loss"]
last = sum(r["loss"] for r in rows[-10:]) / 10
assert abs(first - math.log(256)) < 0.3, f"initial loss {first}, expected about ln 256"
assert last < 0.65 * first, f"loss {first:.3f} -> {last:.3f}"
print(f"loss {first:.3f} -> {last:.3f} (mean of the last 10 steps)")
PY
echo "PASS"
