# The trainer on a world of separate mpirun jobs (AH_WORLD_JOIN, src/comm/join.c; issue 36, docs/elastic.md
# "In-place reconfiguration at a notice"): two mpirun jobs of one rank each, joined through an
# ompi-server, train a plan of two ranks with every loss bit-identical to one mpirun of two ranks:
# the data-parallel dp2 (an all-reduce across the jobs) and train-pp2-recompute (a pipeline whose
# activations and gradients cross between the jobs). Job 1 starts first (it waits for job 0's
# port; for dp2, 2 s first, past an earlier run's port file whose writer is no longer alive). The
# port file is gone once the world is built (a rerun with the same DIR must not read it). A malformed AH_WORLD_JOIN is refused, named. With AH_BACKEND=cuda on a -DAH_CUDA_EMU=ON
# build (scripts/cuda-emu-check.sh) the same on the CUDA backend: pp2's two devices are distinct,
# so its transfers go over the emulated NCCL, whose communicators meet over the joined world.
# Usage: [AH_BACKEND=cuda] bash tests/test_train_joined.sh BUILD_DIR SOURCE_DIR
. "$(dirname "$0")/train_common.sh"
command -v ompi-server >/dev/null || { echo "no ompi-server: skipped"; exit 77; }
STEPS=3
dp2_plan "$WORK/dp2.json"
cp "$PLANS/train-pp2-recompute.json" "$WORK/pp2.json"
ompi-server --no-daemonize -r "$WORK/uri" &
SERVER=$!
trap 'kill $SERVER 2>/dev/null; rm -rf "$WORK"' EXIT
for i in $(seq 100); do [ -s "$WORK/uri" ] && break; sleep 0.1; done
[ -s "$WORK/uri" ] || fail "ompi-server wrote no $WORK/uri"
train() { # plan out-name: autohet train on $WORK/plan.json, the metrics in $WORK/out-name.jsonl
    echo "$AUTOHET" train --plan "$WORK/$1.json" --data "$WORK/text.bin" --steps $STEPS --quiet --metrics "$WORK/$2.jsonl"
}
for plan in dp2 pp2; do
    timeout 120 $MPIRUN -np 2 $(train $plan $plan-one) >"$WORK/$plan-one.out" 2>&1 \
        || { cat "$WORK/$plan-one.out" >&2; fail "$plan: one mpirun of 2 ranks"; }
    mkdir -p "$WORK/join-$plan"
    if [ $plan = dp2 ]; then # an earlier run's port file, its writer (this host's) no longer alive
        sh -c 'exit 0' &
        dead=$!
        wait $dead
        printf 'stale-port-name\n%s %s %s\n' "$(hostname)" "$(readlink /proc/self/ns/pid | tr ' ' _)" $dead \
            >"$WORK/join-$plan/port"
    fi
    pids=()
    for job in 1 0; do
        AH_WORLD_JOIN=$WORK/join-$plan:$job:2 timeout 120 $MPIRUN --ompi-server "file:$WORK/uri" -x AH_WORLD_JOIN \
            -np 1 $(train $plan $plan-joined) >"$WORK/$plan-job$job.out" 2>&1 &
        pids+=($!)
        [ $plan = dp2 ] && [ $job = 1 ] && sleep 2 # job 1 finds the stale port first
    done
    for p in "${pids[@]}"; do
        wait "$p" || { kill "${pids[@]}" 2>/dev/null; cat "$WORK/$plan-job"*.out >&2; fail "$plan: two joined mpirun jobs"; }
    done
    same_losses "$plan-one" "$plan-joined"
    [ ! -e "$WORK/join-$plan/port" ] || fail "$plan: $WORK/join-$plan/port left once the world was built"
done
AH_WORLD_JOIN=$WORK/x:2:2 "$AUTOHET" train --plan "$WORK/dp2.json" --data "$WORK/text.bin" --steps 1 \
    >"$WORK/bad.out" 2>&1 && fail "AH_WORLD_JOIN=DIR:2:2 accepted"
grep -q "AH_WORLD_JOIN=$WORK/x:2:2: expected DIR:JOB:NJOBS" "$WORK/bad.out" || { cat "$WORK/bad.out" >&2; fail "the refusal"; }
echo "PASS"
