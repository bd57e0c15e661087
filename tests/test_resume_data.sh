# The shard list in a checkpoint: a resume with other shards than the checkpoint was trained on is
# refused, naming the first difference (its data position would point elsewhere); the same
# shards, even listed another way from another directory, resume.
. "$(dirname "$0")/train_common.sh"
PLAN=$PLANS/train-single.json
mkdir -p "$WORK/d" "$WORK/moved"
python3 - "$WORK" <<'PY'
import struct, sys
w = sys.argv[1]
tok = open(f"{w}/text.bin", "rb").read()[1024:]
n = len(tok) // 2
for name, part in [("shard_0.bin", tok[: n]), ("shard_1.bin", tok[n : 2 * n])]:
    k = len(part) // 2
    for d in ["d", "moved"]:
        open(f"{w}/{d}/{name}", "wb").write(struct.pack("<256i", 20240520, 1, k, *([0] * 253)) + part[: 2 * k])
PY
train() { # OUT flags...
    local out=$1
    shift
    $MPIRUN -np 1 "$AUTOHET" train --quiet --plan "$PLAN" --local-root "$WORK/ckpt" "$@" >"$WORK/$out" 2>&1
}
train first --data "$WORK/d/shard_*.bin" --steps 2 --ckpt-every 2 || { cat "$WORK/first"; fail "first run"; }
python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); assert [s["name"] for s in d["data"]] == ["shard_0.bin", "shard_1.bin"], d.get("data")' \
    "$WORK"/ckpt/n0/step-00000002/*.json || fail "the manifest keeps no shard list"
train other --data "$WORK/d/shard_1.bin" --steps 4 --resume && fail "a resume on other shards was accepted"
grep -q "^autohet train: invalid input: step 2 (resume with the shards it was trained on, or another --local-root): the data differs from the checkpoint's, so its data position would point elsewhere: shard 1 is shard_1.bin ([0-9]* tokens), the checkpoint's is shard_0.bin" "$WORK/other" \
    || { cat "$WORK/other"; fail "no message naming the first difference"; }
train same --data "$WORK/moved/shard_1.bin,$WORK/moved/shard_0.bin" --steps 4 --resume --reschedule || { cat "$WORK/same"; fail "resume on the same shards"; }
grep -q "resumed from step 2" "$WORK/same" || { cat "$WORK/same"; fail "did not resume"; }
echo PASS
