# Overlapped gradient sync (issue 35): each plan trains 8 steps with the DP sync overlapped with the
# backward (the default) and with --no-overlap-grad-sync; losses and gradient norms must be the same
# bits at every step, and so must the weights after step 3 (the buckets are the same collectives
# either way, docs/runtime.md "Overlapped gradient sync"). Plans: pure DP, asymmetric pipelines
# with DP and a recomputing stage, TP 2 x asymmetric PP x DP, LLaMA (GQA) asymmetric, the sharded
# optimizer (even over 4 replicas; uneven over asymmetric pipelines, the tied group included), and
# pure DP on an emulated 3x slower device (each bucket started when the emulated device reaches
# its hook and tested in the emulator's sleeps: some complete before the sync's wait,
# "dp_sync_hidden", how many depends on the machine's load; none without overlap), the
# same sharded (the updated weights' all-gather overlapped with the next forward, the emulator
# catching up before its waits), and asymmetric pipelines two of which run zero-bubble (its
# buckets start in the last W pass), sharded unevenly; then memory to the byte with and without
# overlap (the zero-bubble plan included: sharded, so with the all-gathers in flight).
# Usage: bash tests/test_train_overlap.sh BUILD_DIR SOURCE_DIR [PLAN...]
# (PLAN[+SCHEDULE[/I,J]][@hier][:even|:uneven][@k]; +SCHEDULE and @hier as in train_common.sh's spec_plan)
# OVERLAP_STEPS (default 8, at least 4) steps; AH_BACKEND=cuda runs it on the CUDA backend
# (scripts/gpu-check.sh: the buckets on the communication stream against the blocking sync). Every
# plan's memory high-water marks must be equal on and off too (the overlap allocates nothing).
. "$(dirname "$0")/train_common.sh"
shift 2
SPECS=("$@")
[ ${#SPECS[@]} -gt 0 ] || SPECS=(dp4 asym tp2-asym llama-asym dp4:even asym:uneven dp4@3 dp4:even@3 asym+zero-bubble/1,2:uneven)
# Under AH_CLUSTER_SHORT=1 (CI's sanitizer stage): TP, the sharded optimizer (even), the emulated
# device and zero-bubble sharded unevenly, 4 of the 9 plans (and the memory checks, which need the
# second and fourth); every plan is bit-checked in CI's first stage.
[ $# -gt 0 ] || [ "${AH_CLUSTER_SHORT:-0}" != 1 ] || SPECS=(tp2-asym dp4:even dp4@3 asym+zero-bubble/1,2:uneven)
STEPS=${OVERLAP_STEPS:-8}
run() { # name ranks plan flags...
    local name=$1 n=$2 plan=$3
    shift 3
    timeout 120 $MPIRUN -np "$n" "$AUTOHET" train --plan "$plan" --data "$WORK/text.bin" --steps "$STEPS" --quiet \
        --metrics "$WORK/$name.jsonl" --dump-params "$WORK/$name.params" --dump-step 3 "$@" 2>"$WORK/$name.err" \
        || { cat "$WORK/$name.err" >&2; fail "$name: autohet train failed"; }
}
for spec in "${SPECS[@]}"; do
    slow=
    case ${spec##*@} in [0-9]*) slow=${spec##*@} spec=${spec%@*} ;; esac # @k; not PLAN@hier
    spec_plan "$spec"
    plan=$SPEC_PLAN name=$SPEC_NAME
    extra=()
    if [ -n "$slow" ]; then
        emulated_cluster "$plan" "$slow" "$WORK/$name-cluster.json"
        extra=(--cluster "$WORK/$name-cluster.json")
        name=$name-x$slow
    fi
    n=$(plan_ranks "$plan")
    run "$name-on" "$n" "$plan" "${extra[@]}"
    run "$name-off" "$n" "$plan" "${extra[@]}" --no-overlap-grad-sync
    python3 - "$WORK" "$name" "$STEPS" "$slow" <<'PY' || fail "$name: overlap on and off differ"
import json, sys
work, name, steps, slow = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
on = [json.loads(l) for l in open(f"{work}/{name}-on.jsonl") if '"loss"' in l]
off = [json.loads(l) for l in open(f"{work}/{name}-off.jsonl") if '"loss"' in l]
assert len(on) == len(off) == steps, (len(on), len(off))
for a, b in zip(on, off):
    assert a["loss"] == b["loss"] and a["grad_norm"] == b["grad_norm"], (a["step"], a["loss"], b["loss"], a["grad_norm"], b["grad_norm"])
p, q = (open(f"{work}/{name}-{k}.params/params.bin", "rb").read() for k in ("on", "off"))
assert len(p) > 0 and p == q, "weights after step 3 differ"
assert on[-1]["loss"] < on[0]["loss"], "the loss did not move"
assert on[0]["memory_high_bytes"] == off[0]["memory_high_bytes"], (on[0]["memory_high_bytes"], off[0]["memory_high_bytes"])
# CPU ranks count their buckets complete before the sync's wait (GPU ranks do not: no field)
hidden = [a.get("dp_sync_hidden", [0, 0]) for a in on]
assert all(b.get("dp_sync_hidden", [0, 0]) == [0, h[1]] for b, h in zip(off, hidden)), "without overlap a bucket was hidden"
if slow and hidden[0][1]:  # an emulated backward sleeps k-1 times its compute: buckets started at their hooks complete in it
    assert sum(h[0] for h in hidden) > 0, f"no bucket complete before the sync's wait: {hidden}"
print(f"{name}: {steps} losses and grad norms identical, {len(p) // 4} weights identical after step 3, "
      f"memory high-water marks equal ({on[0]['memory_high_bytes'][0]} bytes on rank 0); DP buckets complete "
      f"before the wait with overlap {[h[0] for h in hidden]} of {hidden[0][1]}")
PY
done
# Memory: the overlap needs no buffer (each bucket is summed in place in the gradients): the
# high-water mark is the predicted one to the byte with and without it.
[ $# -gt 0 ] || for flags in "" --no-overlap-grad-sync; do
    for plan in "$PLANS/train-asym.json" "$WORK/dp4.plan.json" "$WORK/asym.sched.json"; do
        CHECK_MEMORY_FLAGS=$flags check_memory "$plan"
        echo "memory of $(basename "$plan") ${flags:-(overlap)}: to the byte"
    done
done
echo "PASS"
