# Bad input to autohet train: the whole job exits non-zero quickly (no hang) and rank 0 prints a
# message that says what is wrong. Cases: wrong rank count, missing / truncated data, a directory
# as data, wrong magic, a token outside the vocabulary (found as read), a file shorter than one
# sequence, a glob matching nothing, shards of mixed token widths, a plan for another model, an emulated memory cap that
# the stage does not fit (out-of-memory naming the tensor and the shortfall), a checkpoint flag
# without the tier it needs, a checkpoint root that is a file or holds another run's steps.
. "$(dirname "$0")/train_common.sh"
PLAN=$PLANS/train-pp4.json
python3 - "$WORK" <<'PY'
import struct, sys
w = sys.argv[1]
hdr = lambda magic, n: struct.pack("<256i", magic, 1, n, *([0] * 253))
open(f"{w}/magic.bin", "wb").write(hdr(12345, 100) + bytes(200))
open(f"{w}/trunc.bin", "wb").write(hdr(20240520, 1000) + bytes(200))
open(f"{w}/vocab.bin", "wb").write(hdr(20240520, 300) + struct.pack("<300H", *([7] * 50 + [300] + [7] * 249)))
open(f"{w}/short.bin", "wb").write(hdr(20240520, 5) + struct.pack("<5H", *range(5)))
hdr32 = struct.pack("<256i", 20240801, 7, 100, *([0] * 253))
open(f"{w}/wide.bin", "wb").write(hdr32 + struct.pack("<100I", *([7] * 100)))
PY
# A plan whose devices are capped at 1 MiB: the weights alone do not fit.
python3 - "$PLAN" "$WORK/small.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
d["cluster"]["gpu_types"]["cpu"]["emulate"]["memory_mib"] = 1
json.dump(d, open(sys.argv[2], "w"))
PY
expect() { # ranks pattern args...
    local n=$1 pat=$2
    shift 2
    local start=$(date +%s)
    timeout 60 $MPIRUN -np "$n" "$AUTOHET" train --quiet "$@" >"$WORK/out" 2>&1
    local rc=$?
    local secs=$(( $(date +%s) - start ))
    [ $rc -ne 0 ] || fail "expected failure for: $*"
    [ $rc -ne 124 ] || fail "hung (killed by timeout): $*"
    grep -q -- "$pat" "$WORK/out" || { cat "$WORK/out" >&2; fail "no \"$pat\" in the message for: $*"; }
    [ "$(grep -c "^autohet train: " "$WORK/out")" = 1 ] || { cat "$WORK/out" >&2; fail "expected one message (from rank 0): $*"; }
    ! grep -q "rank [0-9]*: rank [0-9]*:" "$WORK/out" || { cat "$WORK/out" >&2; fail "a rank named twice: $*"; }
    echo "ok ($secs s, rc $rc): $(grep "^autohet train: " "$WORK/out" | cut -c1-150)"
}
expect 3 "has 4 devices but the job has 3 ranks" --plan "$PLAN" --data "$WORK/text.bin"
# Every rank fails the same way: the message names no rank (it would be "rank 0: ...").
expect 4 "^autohet train: I/O error: $WORK/missing.bin: cannot open data file" --plan "$PLAN" --data "$WORK/missing.bin"
expect 4 "^autohet train: I/O error: $WORK: is a directory, not a data file (--data takes token files" --plan "$PLAN" --data "$WORK"
expect 4 "truncated or padded" --plan "$PLAN" --data "$WORK/trunc.bin"
expect 4 "magic 12345, expected 20240520" --plan "$PLAN" --data "$WORK/magic.bin"
# Found as it is read, in the step (so one rank: a pipeline's first and last stage both read).
expect 1 "vocab.bin: token 50 (byte offset 1124) is 300, outside the model's vocabulary of 256" \
    --plan "$PLANS/train-single.json" --data "$WORK/vocab.bin" --steps 1
expect 4 "short.bin: 5 tokens, fewer than one sequence: sequence length 32 needs 33" --plan "$PLAN" --data "$WORK/short.bin"
expect 4 "--data: pattern \"$WORK/none_\*.bin\" matches no file" --plan "$PLAN" --data "$WORK/none_*.bin"
expect 4 "wide.bin: uint32 tokens, but .*text.bin, the first shard, holds uint16" --plan "$PLAN" --data "$WORK/text.bin,$WORK/wide.bin"
expect 4 "plan for model tiny-gpt2, but --model is gpt2-124m, whose n_layer is 12 where the plan.s is 4" --plan "$PLAN" --data "$WORK/text.bin" --model gpt2-124m
# Each rank's message names its own device: the lowest failing rank's is shown, with its rank.
expect 4 "out of memory: rank 0: device n0:0 (cpu): out of memory allocating .*short by" --plan "$WORK/small.json" --data "$WORK/text.bin"
# A checkpoint or preemption flag without the tier it acts on would do nothing: refused.
expect 4 "usage error: --ckpt-every needs --local-root DIR" --plan "$PLAN" --data "$WORK/text.bin" --ckpt-every 5
expect 4 "usage error: --resume needs --local-root DIR" --plan "$PLAN" --data "$WORK/text.bin" --resume
expect 4 "^autohet train: --ckpt-every: expected 0 .. 10000000, got -3" --plan "$PLAN" --data "$WORK/text.bin" --ckpt-every -3 --local-root "$WORK/lr"
expect 4 "--grace-s needs --local-root" --plan "$PLAN" --data "$WORK/text.bin" --grace-s 5
expect 4 "--cloud-only needs --cloud" --plan "$PLAN" --data "$WORK/text.bin" --cloud-only --local-root "$WORK/lr"
expect 4 "--dump-step needs --dump-params" --plan "$PLAN" --data "$WORK/text.bin" --dump-step 3
expect 4 "--cloud needs --local-root" --plan "$PLAN" --data "$WORK/text.bin" --cloud s3://b/p
expect 4 "--s3-endpoint needs --cloud" --plan "$PLAN" --data "$WORK/text.bin" --s3-endpoint http://127.0.0.1:1
# A root that cannot hold a checkpoint stops the job before its first step (not a failed save each
# time); a root holding an earlier run's committed steps is refused without --resume (the two runs'
# steps would mix), and taken with it.
echo hi >"$WORK/afile"
expect 4 "^autohet train: I/O error: --local-root $WORK/afile: cannot make node n0's checkpoint directory: $WORK/afile: exists and is not a directory" \
    --plan "$PLAN" --data "$WORK/text.bin" --ckpt-every 2 --local-root "$WORK/afile" --metrics "$WORK/refused.jsonl"
[ ! -e "$WORK/refused.jsonl" ] || fail "a run refused at start-up left a new metrics file behind"
timeout 60 "$AUTOHET" train --quiet --plan "$PLANS/train-single.json" --data "$WORK/text.bin" --steps 8 --ckpt-every 4 \
    --local-root "$WORK/old" --metrics "$WORK/old.jsonl" >/dev/null 2>&1 || fail "the earlier run"
cp "$WORK/old.jsonl" "$WORK/old.jsonl.before"
expect 4 "^autohet train: usage error: --local-root $WORK/old holds an earlier run's checkpoints (node n0's newest committed step is 8, in $WORK/old/n0): give --resume to continue that run, or use an empty root" \
    --plan "$PLAN" --data "$WORK/text.bin" --steps 12 --ckpt-every 4 --local-root "$WORK/old" --metrics "$WORK/old.jsonl"
# the refused run trained nothing and left the earlier run's metrics file as it was (not emptied)
cmp -s "$WORK/old.jsonl" "$WORK/old.jsonl.before" || fail "the refused run changed the metrics file: $(head -c 300 "$WORK/old.jsonl")"
[ "$(ls "$WORK/old/n0")" = "$(printf 'step-00000004\nstep-00000008')" ] || fail "the refused run changed the root: $(ls "$WORK/old/n0")"
timeout 60 $MPIRUN -np 4 "$AUTOHET" train --quiet --plan "$PLAN" --data "$WORK/text.bin" --steps 12 --ckpt-every 4 \
    --local-root "$WORK/old" --resume --reschedule >"$WORK/out" 2>&1 || { cat "$WORK/out" >&2; fail "--resume into the earlier run's root"; }
grep -q "resumed from step 8" "$WORK/out" || { cat "$WORK/out" >&2; fail "--resume did not take step 8"; }
# one node's directory given as the root (DIR/n0 for DIR): refused, not a resume that finds nothing
expect 4 "^autohet train: usage error: --local-root $WORK/old/n0 holds checkpoint steps itself (newest 12): it is one node's directory; give the directory above it" \
    --plan "$PLAN" --data "$WORK/text.bin" --steps 16 --ckpt-every 4 --local-root "$WORK/old/n0" --resume
echo "PASS"
