# Asynchronous checkpoints on the CUDA backend (docs/checkpoints.md "Asynchronous checkpoints"): the
# snapshot is copied into pinned host memory on a side stream (backend.h snap_*) while the next
# step trains; run by scripts/gpu-check.sh on a GPU and, in CI's cuda-emu stage, on the CUDA
# emulation, where a copy or an AdamW that is not ordered by its event runs out of order.
#  1. dp2 (nodes n0 and n1, a rank each), 5 steps, a save every 2: losses without checkpoints, with
#     --ckpt-sync and asynchronous bit-identical; steps 2 and 4 written in the background
#     ("snapshot_copy": "side-stream"), 5 at the end; every file of them equal to the --ckpt-sync
#     run's (size and CRC-32C, from the manifests); every committed step verifies; the events'
#     snapshot bytes are the memory model's (evaluate --json "host_memory"); a resume from step 4
#     (written in the background) continues bit-identically.
#  2. the same plan with the optimizer sharded (the weights copied on the side stream, the AdamW
#     moments gathered through the host and copied there): --ckpt-sync and asynchronous losses and
#     files identical.
# Exits 77 in a build without the CUDA backend (-DAH_CUDA=ON or -DAH_CUDA_EMU=ON).
# Usage: bash tests/test_cuda_ckpt_async.sh BUILD_DIR SOURCE_DIR   (AH_BACKEND=cuda unless set)
grep -qE '^AH_CUDA(_EMU)?:BOOL=ON' "$1/CMakeCache.txt" 2>/dev/null ||
    { echo "SKIP: $1 has no CUDA backend (configure with -DAH_CUDA=ON or -DAH_CUDA_EMU=ON)"; exit 77; }
. "$(dirname "$0")/train_common.sh"
export AH_BACKEND=${AH_BACKEND:-cuda}
COPY=side-stream # the snapshot's copy on the CUDA backend; a memcpy on the CPU (gpu-check.sh's dry run)
[ "$AH_BACKEND" = cuda ] || COPY=memcpy
MPIRUN="$MPIRUN -x AH_BACKEND"
STEPS=5
run() { # plan out [flags...]
    local plan=$1 out=$2
    shift 2
    timeout 240 $MPIRUN -np 2 "$AUTOHET" train --plan "$plan" --data "$WORK/text.bin" --steps $STEPS --quiet \
        --metrics "$WORK/$out.jsonl" "$@" >"$WORK/$out.out" 2>&1 || { cat "$WORK/$out.out" >&2; fail "$out: autohet train"; }
}
# files NAME SYNC ASYNC: the async run's events (steps 2 and 4 in the background on the side stream, 5 at
# the end) and its files in every node's manifests equal to the --ckpt-sync run's
files() {
    python3 - "$WORK/$2.jsonl" "$WORK/$3.jsonl" "$WORK/$2" "$WORK/$3" "$COPY" <<'PY' || fail "$1: asynchronous checkpoints"
import json, os, sys
def events(p):
    return {o["step"]: o for o in map(json.loads, open(p)) if o.get("event") == "checkpoint"}
sync, asyn = events(sys.argv[1]), events(sys.argv[2])
assert sorted(sync) == sorted(asyn) == [2, 4, 5], (sorted(sync), sorted(asyn))
assert all(e["ok"] for e in list(sync.values()) + list(asyn.values()))
assert not any(e.get("async") for e in sync.values()) and not asyn[5].get("async"), (sync, asyn[5])
for e in (asyn[2], asyn[4]):
    assert e.get("async") and e["snapshot_copy"] == sys.argv[5] and e["bytes"]["local"] == sync[2]["bytes"]["local"], e
for node in ("n0", "n1"):
    for step in (2, 4, 5):
        m = f"step-{step:08d}/manifest.json"
        a, s = (json.load(open(os.path.join(r, node, m)))["files"] for r in (sys.argv[4], sys.argv[3]))
        assert a == s, f"{node} step {step}: the asynchronous files differ from --ckpt-sync's"
print(f"  steps 2, 4 copied ({sys.argv[5]}) and written in the background, 5 at the end; every file (n0, n1) "
      f"equal to --ckpt-sync's (size, CRC-32C); snapshot {asyn[2]['snapshot_bytes']} bytes")
PY
    "$AUTOHET" ckpt verify --local-root "$WORK/$3/n0" >/dev/null && "$AUTOHET" ckpt verify --local-root "$WORK/$3/n1" >/dev/null ||
        fail "$1: the asynchronous run's committed steps do not verify"
}

dp2_plan "$WORK/dp2.json"
echo "== dp2 on backend $AH_BACKEND"
run "$WORK/dp2.json" ref
run "$WORK/dp2.json" sync --ckpt-sync --ckpt-every 2 --keep 5 --local-root "$WORK/sync"
run "$WORK/dp2.json" async --ckpt-every 2 --keep 5 --local-root "$WORK/async"
same_losses ref sync
same_losses ref async
files dp2 sync async
"$AUTOHET" evaluate --json --plan "$WORK/dp2.json" >"$WORK/eval.json" || fail "evaluate dp2"
python3 - "$WORK/eval.json" "$WORK/async.jsonl" <<'PY' || fail "snapshot bytes: model vs runtime"
import json, sys
model = sum(n["snapshot_bytes"] for n in json.load(open(sys.argv[1]))["host_memory"])
ev = [o for o in map(json.loads, open(sys.argv[2])) if o.get("event") == "checkpoint" and o.get("async")]
assert ev and all(e["snapshot_bytes"] == model for e in ev), (model, [e["snapshot_bytes"] for e in ev])
print(f"  pinned snapshot buffers: {model} bytes, the memory model's figure to the byte")
PY
cp -r "$WORK/async" "$WORK/resume"
rm -rf "$WORK"/resume/*/step-00000005
run "$WORK/dp2.json" resume --ckpt-every 2 --local-root "$WORK/resume" --resume
same_losses ref resume 4

echo "== dp2, the optimizer sharded, on backend $AH_BACKEND"
"$AUTOHET" evaluate --plan "$WORK/dp2.json" --shard-optimizer even -o "$WORK/dp2s.json" >/dev/null || fail "evaluate --shard-optimizer"
run "$WORK/dp2s.json" ssync --ckpt-sync --ckpt-every 2 --keep 5 --local-root "$WORK/ssync"
run "$WORK/dp2s.json" sasync --ckpt-every 2 --keep 5 --local-root "$WORK/sasync"
same_losses ssync sasync
files sharded ssync sasync
echo PASS
