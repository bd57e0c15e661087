# In-place reconfiguration (issue 36 "Survivors keep their processes"; runtime/reconfig.h,
# docs/elastic.md "In-place reconfiguration at a notice"): three one-rank mpirun jobs joined through an
# ompi-server (AH_WORLD_JOIN, as tests/test_train_joined.sh) train dp3 (one replica a job, micro-batches
# 3+3+2) for 8 steps; RUN_DIR/reconfigure.json says that at step 3 one job leaves and the two others go on
# under a dp2 plan of their nodes. Checked: the leaving job's process says so and its mpirun exits 0; the
# survivors' processes are the ones started (each job's pid taken by `exec` before the trainer starts
# equals the pid the "reconfigure" event lists for it), they resume from the step-3 checkpoint just
# saved and train steps 3..7 on 2 ranks, every loss bit-identical to an uninterrupted 2-rank run resumed
# from that step's checkpoint (steps 0..2 to one mpirun of dp3). Case "kill": job 0 (the one whose port
# the others joined through, rank 0 of the old world) leaves and is SIGKILLed right after the split
# (AH_TEST_HOOK phase reconfig-split, as bench/mpi_leave_probe.sh killed the leaver's host): the survivors
# go on the same, job 1's rank now rank 0, writing the metrics. Case "renumber": the request's "ranks" makes
# job 2 rank 0 of the new world (the new plan's rank 0 is on its node) and job 0 rank 1.
# Usage: bash tests/test_train_inplace.sh BUILD_DIR SOURCE_DIR
. "$(dirname "$0")/train_common.sh"
STEPS=8
python3 "$SRC/tests/dp_plans.py" "$PLANS/train-dp4.json" "$WORK" dp3=n0,n1,n2:3,3,2 dp2-01=n0,n1:4,4 dp2-12=n1,n2:4,4 \
    dp2-20=n2,n0:5,3
. "$SRC/tests/joined_common.sh"
# The references: dp3 in one mpirun, its step 3 saved; dp2 resumed from that step alone.
timeout 120 $MPIRUN -np 3 $(train dp3 ref3 --ckpt-every 3 --keep 10 --local-root "$WORK/r3") >"$WORK/ref3.out" 2>&1 ||
    { cat "$WORK/ref3.out" >&2; fail "dp3 in one mpirun"; }
rm -rf "$WORK"/r3/*/step-0000000[68]
for p in dp2-01 dp2-12 dp2-20; do
    rm -rf "$WORK/r-$p" && cp -r "$WORK/r3" "$WORK/r-$p"
    timeout 120 $MPIRUN -np 2 $(train $p ref-$p --resume --local-root "$WORK/r-$p") >"$WORK/ref-$p.out" 2>&1 ||
        { cat "$WORK/ref-$p.out" >&2; fail "$p resumed from step 3"; }
done
# run_jobs DIR LEAVER HOOK CMD...: three one-rank mpirun jobs joined into one world (DIR/join), each running
# CMD with AH_JOB its job number (LEAVER's with AH_TEST_HOOK=HOOK), started 2, 1, 0; each mpirun's status in
# DIR/stJ. The join itself (AH_WORLD_JOIN, not this test's subject) hung on this machine's Open MPI 4.1
# when two jobs connected at once (4 of 30 three-job joins under load; one connect at a time since, now
# by turns published at the ompi-server, comm/join.c): jobs that wrote no metrics line in 90 s are still killed and
# started once more, said on stdout, so that a join that hangs all the same is named as such.
run_jobs() {
    local d=$1 leaver=$2 hook=$3 try job pids i
    shift 3
    for try in 1 2; do
        rm -rf "$d/join" && mkdir -p "$d/join"
        pids=()
        for job in 2 1 0; do
            AH_JOB=$job AH_TEST_HOOK=$([ "$job" = "$leaver" ] && echo "$hook") AH_WORLD_JOIN=$d/join:$job:3 timeout 180 \
                $MPIRUN --ompi-server "file:$WORK/uri" -x AH_JOB -x AH_WORLD_JOIN -x AH_TEST_HOOK -np 1 "$@" \
                >"$d/job$job.out" 2>&1 &
            pids+=($!)
        done
        for i in $(seq 900); do
            grep -qs '"step": 0' "$d/ip.jsonl" && break
            kill -0 "${pids[@]}" 2>/dev/null || break
            sleep 0.1
        done
        if grep -qs '"step": 0' "$d/ip.jsonl" || ! kill -0 "${pids[@]}" 2>/dev/null; then
            for job in 2 1 0; do
                wait "${pids[$((2 - job))]}"
                echo $? >"$d/st$job"
            done
            return 0
        fi
        echo "  note: $(basename "$d"): the jobs' join hung (try $try): killed$([ $try = 1 ] && echo ", started again")"
        kill "${pids[@]}" 2>/dev/null
        wait "${pids[@]}" 2>/dev/null
    done
    fail "$(basename "$d"): the jobs' join hung twice"
}
# inplace CASE LEAVER PLAN [HOOK [RANKS]]: the three jobs, LEAVER leaving at step 3 for PLAN (HOOK: the leaver's
# AH_TEST_HOOK; RANKS: the request's "ranks", e.g. 1,-1,0); each job's pid in $WORK/CASE/pidJ, its mpirun's
# status in $WORK/CASE/stJ.
inplace() {
    local c=$1 leaver=$2 plan=$3 hook=${4:-} ranks=${5:-} d=$WORK/$1
    mkdir -p "$d/join" "$d/run"
    printf '{"step": 3, "leave": [%d], "plan": "%s"%s}\n' "$leaver" "$WORK/$plan.json" \
        "${ranks:+, \"ranks\": [$ranks]}" >"$d/run/reconfigure.json"
    run_jobs "$d" "$leaver" "$hook" bash -c "echo \$\$ >$d/pid\$AH_JOB; exec \
        $(train dp3 $c/ip --local-root "$d/root" --run-dir "$d/run")"
    python3 - "$WORK" "$c" "$leaver" "$plan" "$ranks" <<'PY' || { tail -n 20 "$d"/job*.out >&2; fail "$c: in place"; }
import json, os, sys
work, c, leaver, plan = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
ranks = [int(r) for r in sys.argv[5].split(",")] if sys.argv[5] else None
d = f"{work}/{c}"
st = {j: int(open(f"{d}/st{j}").read()) for j in range(3)}
pid = {j: int(open(f"{d}/pid{j}").read()) for j in range(3)}
out = {j: open(f"{d}/job{j}.out").read() for j in range(3)}
stay = [j for j in range(3) if j != leaver]
if ranks:  # the old world's rank (= job) r is the new world's ranks[r]
    stay.sort(key=lambda j: ranks[j])
for j in stay:
    assert st[j] == 0, f"job {j}'s mpirun exited {st[j]}:\n{out[j]}"
if c == "kill":
    # SIGKILLed by the hook right after the split (mpirun reports 137): a crash there would show another status
    assert st[leaver] == 137 and "leaves at step 3" not in out[leaver], (st[leaver], out[leaver])
else:
    assert st[leaver] == 0, f"the leaving job {leaver}'s mpirun exited {st[leaver]}:\n{out[leaver]}"
    assert f"job {leaver} (pid {pid[leaver]}) leaves at step 3" in out[leaver], out[leaver]
lines = [json.loads(l) for l in open(f"{d}/ip.jsonl")]
rc = [o for o in lines if o.get("event") == "reconfigure"]
assert len(rc) == 1, rc
assert not os.path.exists(f"{d}/run/reconfigure.json") and os.path.exists(f"{d}/run/reconfigure.done.json"), \
    "the request taken is renamed reconfigure.done.json"
rc = rc[0]
assert rc["step"] == 3 and rc["resumed_step"] == 3 and rc["ranks_from"] == 3 and rc["ranks_to"] == 2, rc
assert rc["pids"] == [pid[j] for j in stay], f"not the processes started: {rc['pids']} vs {[pid[j] for j in stay]}"
assert any(f"reconfigured in place at step 3: 3 -> 2 ranks" in out[j] for j in stay)
steps = [o for o in lines if "event" not in o]
assert [o["step"] for o in steps] == list(range(8)), [o["step"] for o in steps]
assert [len(o["memory_high_bytes"]) for o in steps] == [3] * 3 + [2] * 5
ref = {o["step"]: o["loss"] for f in ("ref3", f"ref-{plan}") for o in map(json.loads, open(f"{work}/{f}.jsonl"))
       if "event" not in o and (f == "ref3") == (o["step"] < 3)}
for o in steps:
    assert o["loss"] == ref[o["step"]], f"step {o['step']}: {o['loss']!r} vs {ref[o['step']]!r}"
print(f"  {c}: job {leaver} left at step 3 (mpirun status {st[leaver]}), jobs {stay} kept pids "
      f"{rc['pids']}, 8 losses bit-identical (3 of dp3, 5 of {plan} resumed); phases {rc['seconds']}")
PY
}
inplace leave 2 dp2-01
inplace kill 0 dp2-12 "phase=reconfig-split,step=3,action=kill"
# "ranks": the survivors renumbered as the new plan's ranks (job 2 on n2 is its rank 0, job 0 on n0 its rank 1),
# not kept in the world's order: the reconfigure event's pids are job 2's, then job 0's.
inplace renumber 1 dp2-20 "" 1,-1,0
# Requests that cannot be carried out are not taken, each said once before anything is saved or torn down,
# and the three train on to the end: a job not in the world; a plan that cannot be read; a run without
# --local-root (no step to resume in place; before, the leaver left and the others failed on --resume); a
# "ranks" that keeps a leaving job's rank.
refused() { # CASE LEAVE PLAN WHAT [flags] (RANKS=...: the request's "ranks")
    local c=$1 leave=$2 plan=$3 what=$4 d=$WORK/$1
    shift 4
    mkdir -p "$d/join" "$d/run"
    printf '{"step": 3, "leave": [%d], "plan": "%s"%s}\n' "$leave" "$plan" "${RANKS:+, \"ranks\": [$RANKS]}" \
        >"$d/run/reconfigure.json"
    run_jobs "$d" -1 "" $(train dp3 $c/ip --run-dir "$d/run" "$@")
    for job in 0 1 2; do [ "$(cat "$d/st$job")" = 0 ] || { tail -n 20 "$d"/job*.out >&2; fail "$c: job $job failed"; }; done
    [ "$(grep -c "reconfigure.json's request at step 3 is not taken: $what" "$d/job0.out")" = 1 ] ||
        { cat "$d/job0.out" >&2; fail "$c: the warning '$what', once"; }
    ! grep -q "leaves at step" "$d"/job*.out || fail "$c: a job left"
    same_losses ref3 $c/ip
}
refused bad 5 "$WORK/dp2-01.json" "job 5 is not in the world" --local-root "$WORK/bad/root"
refused noplan 2 "$WORK/nope.json" "$WORK/nope.json.*" --local-root "$WORK/noplan/root"
refused noroot 2 "$WORK/dp2-01.json" "the run has no --local-root"
RANKS=0,1,-1 refused ranks 1 "$WORK/dp2-20.json" '"ranks"\[1\] is 1 but rank 1.s job 1 leaves (-1)' \
    --local-root "$WORK/ranks/root"
echo "PASS"
