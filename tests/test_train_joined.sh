# The trainer on a world of separate mpirun jobs (AH_WORLD_JOIN, src/comm/join.c; issue 36, docs/elastic.md
# "In-place reconfiguration at a notice"): two mpirun jobs of one rank each, joined through an
# ompi-server, train a plan of two ranks with every loss bit-identical to one mpirun of two ranks:
# the data-parallel dp2 (an all-reduce across the jobs) and train-pp2-recompute (a pipeline whose
# activations and gradients cross between the jobs). Job 1 starts first (it waits for its turn, which
# job 0 publishes at the ompi-server; for dp2, 2 s first, past the turn an earlier run with the same DIR
# published before it was killed, its writer no longer alive). No port file is written. AH_WORLD_RANKS
# numbers the world (below). A malformed AH_WORLD_JOIN is refused, named. With AH_BACKEND=cuda on a -DAH_CUDA_EMU=ON
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
    if [ $plan = dp2 ]; then # an earlier run's published port, its writer (this host's) killed before the world was built
        AH_WORLD_JOIN=$WORK/join-$plan:0:2 $MPIRUN --ompi-server "file:$WORK/uri" -x AH_WORLD_JOIN \
            -np 1 bash -c "echo \$\$ >$WORK/stale.pid; exec $(train $plan stale)" >"$WORK/stale.out" 2>&1 &
        stale=$!
        sleep 5 # MPI_Init, the port opened and job 1's turn published; then job 0 waits in its accept
        kill -9 "$(cat "$WORK/stale.pid")"
        wait $stale 2>/dev/null
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
    [ ! -e "$WORK/join-$plan" ] || [ -z "$(ls -A "$WORK/join-$plan")" ] || fail "$plan: files in $WORK/join-$plan"
done
# AH_WORLD_RANKS (join.c): the world numbered as the jobs say, not job by job. pp2 with job 0's rank as world
# rank 1 and job 1's as world rank 0: the same losses (the plan's rank 0, stage 0, now runs in job 1), and
# the run directory's rank-0.json is job 1's process. Then each bad AH_WORLD_RANKS refused on every rank of
# both jobs, named, none left waiting: set in one job only; a world rank given twice; not one entry a rank.
# ranked CASE RANKS0 RANKS1 [FLAGS]: the two one-rank jobs of pp2 (job J with AH_WORLD_RANKS=RANKSJ, none
# when empty), each job's pid in $WORK/CASE/pidJ, its output in $WORK/CASE/jobJ.out, its status in stJ.
ranked() {
    local c=$1 d=$WORK/$1 r0=$2 r1=$3 job pids=()
    shift 3
    mkdir -p "$d"
    for job in 1 0; do
        local r=$([ $job = 0 ] && echo "$r0" || echo "$r1")
        AH_WORLD_RANKS=$r AH_WORLD_JOIN=$d/join:$job:2 timeout 120 $MPIRUN --ompi-server "file:$WORK/uri" \
            -x AH_WORLD_JOIN -x AH_WORLD_RANKS -np 1 bash -c "echo \$\$ >$d/pid$job; exec $(train pp2 $c/m) $*" \
            >"$d/job$job.out" 2>&1 &
        pids+=($!)
    done
    for job in 1 0; do
        wait "${pids[$((1 - job))]}"
        echo $? >"$d/st$job"
    done
}
ranked swap 1 0 --run-dir "$WORK/swap/run"
[ "$(cat "$WORK/swap/st0")$(cat "$WORK/swap/st1")" = 00 ] || { cat "$WORK/swap/"job*.out >&2; fail "swap: the jobs failed"; }
STEPS=$STEPS python3 - "$WORK" <<'PY' || fail "swap: AH_WORLD_RANKS=1 and =0"
import json, sys
w = sys.argv[1]
ref = [o["loss"] for o in map(json.loads, open(f"{w}/pp2-one.jsonl")) if "event" not in o]
got = [o["loss"] for o in map(json.loads, open(f"{w}/swap/m.jsonl")) if "event" not in o]
assert ref == got and len(got) == 3, (ref, got)
pid = {j: int(open(f"{w}/swap/pid{j}").read()) for j in (0, 1)}
ranks = {r: json.load(open(f"{w}/swap/run/rank-{r}.json"))["pid"] for r in (0, 1)}
assert ranks == {0: pid[1], 1: pid[0]}, (ranks, pid)
print(f"  swap: world rank 0 is job 1 (pid {pid[1]}), rank 1 job 0 (pid {pid[0]}); 3 losses as one mpirun's")
PY
for bad in "half|0||AH_WORLD_RANKS is set in job 0 but not in job 1" \
           "twice|0|0|AH_WORLD_RANKS of job [01]: world rank 0 is given twice" \
           "count|0,1|0|AH_WORLD_RANKS of job 0: expected one world rank per rank of the job"; do
    IFS='|' read -r c r0 r1 want <<<"$bad"
    ranked "$c" "$r0" "$r1"
    for job in 0 1; do
        [ "$(cat "$WORK/$c/st$job")" != 0 ] || fail "$c: job $job exited 0"
        grep -q "$want" "$WORK/$c/job$job.out" || { cat "$WORK/$c/job$job.out" >&2; fail "$c: job $job lacks '$want'"; }
    done
done
AH_WORLD_RANKS=0 "$AUTOHET" train --plan "$WORK/dp2.json" --data "$WORK/text.bin" --steps 1 >"$WORK/bad.out" 2>&1 &&
    fail "AH_WORLD_RANKS without AH_WORLD_JOIN accepted"
grep -q "AH_WORLD_RANKS=0 is set without AH_WORLD_JOIN" "$WORK/bad.out" || { cat "$WORK/bad.out" >&2; fail "the refusal"; }
AH_WORLD_JOIN=$WORK/x:2:2 "$AUTOHET" train --plan "$WORK/dp2.json" --data "$WORK/text.bin" --steps 1 \
    >"$WORK/bad.out" 2>&1 && fail "AH_WORLD_JOIN=DIR:2:2 accepted"
grep -q "AH_WORLD_JOIN=$WORK/x:2:2: expected DIR:JOB:NJOBS" "$WORK/bad.out" || { cat "$WORK/bad.out" >&2; fail "the refusal"; }
echo "PASS"
