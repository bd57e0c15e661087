# The handover at a notice (issue 36; docs/checkpoints.md "The handover at a notice") across three
# emulated hosts (tests/cluster/cluster.sh: each its own disk and its own tmpfs on /dev/shm) under
# autohet run --launcher ssh, in-memory replicas on. The plan is one pipeline h1 > h2 > h0 with
# block 1 on h2 alone (h2_alone_cluster). After 6 steps the events file preempts h2: the agent plans
# over h0 + h1 first and writes that plan into the run directory of every host, then sends the
# notice; the trainer's save hands each file of the step over to the memory of the host that reads
# it under that plan (h2's block 1 to the host the new plan gives it), and the relaunch, with the
# plan made at the notice, reads every file on its own host: the notice's save writes no disk (the
# step is committed in the next plan's hosts' memory), the recover event takes files from the
# memory (each host's own snapshot and what was handed to it), none from a peer's disk or the cloud
# (there is no cloud), the relaunched job writes that step to its disks at once, in the background,
# and every loss
# equals the uninterrupted run's (bit-exact while the plan is the reference's, 1e-4 after).
# Short enough for the sanitizer stage as it is (one run of 12 steps and its reference).
# Needs root and openssh-server; skipped (77) without them.
# With HANDOVER_SLURM=1 (tests/test_cluster_slurm_handover.sh) the same under a real Slurm: --launcher
# slurm inside `salloc -N3`, the next plan written to the hosts through srun.
# --no-in-place: this test is the handover's relaunch path (the next plan uses only h0's and h1's running
# devices, so by default the survivors would change to it in place instead: tests/test_cluster_agent_inplace.sh).
. "$(dirname "$0")/train_common.sh"
. "$SRC/tests/agent_common.sh"
. "$SRC/tests/cluster/cluster.sh"
[ "$(id -u)" = 0 ] && [ -x /usr/sbin/sshd ] || { echo "SKIP: needs root and openssh-server"; exit 77; }
SLURM=${HANDOVER_SLURM:-0}
if [ "$SLURM" = 1 ]; then
    . "$SRC/tests/cluster/slurm.sh"
    command -v slurmctld >/dev/null && command -v munged >/dev/null ||
        { echo "SKIP: needs slurm-wlm and munge"; exit 77; }
    LAUNCH=(salloc -N3 --ntasks-per-node=2 --no-kill)
    LAUNCHER=(--launcher slurm)
else
    LAUNCH=()
    LAUNCHER=() # --launcher ssh once cluster_up has made CL_RSH
fi
STEPS=12
CKPT_EVERY=4
h2_alone_cluster
# the reference at the cluster's own pace: the slowdown below changes no loss and no plan (the planner does
# not read it; check_metrics below must find the run's first launch on the reference's plan, exact > 0)
cluster_reference "$WORK/ref"
# steps of ~0.7 s (the emulation's slowdown; the losses do not change), so that the notice comes mid-run:
# after step 5 the agent needs ~1.5 s under load (the events file's poll, the next plan written to the
# hosts through srun) before its notice, and at ~0.3 s a step a loaded CI finished all 12 steps first
python3 - "$CLUSTER" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for t in d["gpu_types"].values():
    t["emulate"]["slowdown"] *= 25
json.dump(d, open(sys.argv[1], "w"))
PY
cluster_up 3 1000 || fail "cannot make the test cluster"
[ "$SLURM" = 1 ] && { CL_SLURM_MSG_TIMEOUT=3 CL_SLURMD_TIMEOUT=120 slurm_up || fail "cannot start Slurm on the test cluster"; }
[ "$SLURM" = 1 ] || LAUNCHER=(--launcher ssh --rsh-agent "$CL_RSH") # CL_RSH is set by cluster_up
MPI_ARGS="--mca btl_tcp_if_include $CL_IFACE --mca oob_tcp_if_include $CL_IFACE --mca mpi_yield_when_idle 1
 -x OPENBLAS_NUM_THREADS=1 -x ASAN_OPTIONS=verify_asan_link_order=0:detect_leaks=0"
WD=$CL_DISK/work
# the events file is read again when it grows: h2's preemption is written once 6 steps are done
printf '99999,remove,h0\n' >"$WORK/events.csv"
cluster_head "${LAUNCH[@]}" env ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=1" "$AUTOHET" run \
    --model tiny-gpt2 --cluster "$CLUSTER" --data "$WORK/text.bin" --global-batch $GB --seq-len $SEQ --steps $STEPS \
    --ckpt-every $CKPT_EVERY --work-dir "$WD" --quiet "${LAUNCHER[@]}" \
    --local-root "$CL_DISK/ck" --mpirun-args "$(echo $MPI_ARGS)" --events "$WORK/events.csv" --grace-s 60 \
    --replica-memory-gb 0.5 --no-in-place >"$WORK/run.log" 2>&1 &
agent=$!
agent_log=$WORK/run.log
steps_at_least() { [ "$(grep -c '"loss"' "$WD/metrics.jsonl" 2>/dev/null)" -ge "$1" ] 2>/dev/null; }
wait_for "step 5 in the metrics" steps_at_least 6
printf '0,remove,h2\n99999,remove,h0\n' >"$WORK/events.csv"
wait $agent || { cat "$WORK/run.log"; fail "autohet run with h2 preempted"; }
out=$(check_metrics "$WD" "$WORK/ref") || { cat "$WORK/run.log"; fail "metrics: $out"; }
[[ $out == *" exact=0 "* ]] && fail "no step compared bit-exact: the reference's plan is not the run's ($out)"
echo "h2 preempted after step 5: $out"
grep -q "next plan, for the handover at the notice: " "$WORK/run.log" || { cat "$WORK/run.log"; fail "no next plan"; }
grep -q "the plan made at the notice, taken" "$WORK/run.log" || { cat "$WORK/run.log"; fail "the relaunch planned again"; }
python3 - "$WD/metrics.jsonl" <<'PY' || { cat "$WORK/run.log"; fail "the handover"; }
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
pre = [x for x in ev if x.get("event") == "preempt"]
assert len(pre) == 1 and pre[0]["saved"] and pre[0]["nodes"] == ["h2"], pre
n = pre[0]["step"]
ck = [x for x in ev if x.get("event") == "checkpoint" and x["step"] == n]
assert ck and ck[0].get("handover") is True and ck[0]["memory_committed"] is True, ck
# committed in the next plan's hosts' memory: the disks are not written before the job exits
assert ck[0]["disks"] is False and ck[0]["bytes"]["local"] == 0, ck
rec = [x for x in ev if x.get("event") == "recover"]
assert len(rec) == 1 and rec[0]["step"] == n, rec
b, f = rec[0]["bytes"], rec[0]["files"]
# every file read on its own host: the survivors' disks and what was handed over into their memory
assert f["memory"] > 0 and f["peer"] == 0 and f["cloud"] == 0, rec[0]
# and written to the disks right after the relaunch, in the background
after = ev[ev.index(rec[0]):]
assert any(x.get("event") == "checkpoint" and x["step"] == n and x["bytes"]["local"] > 0 for x in after), after
print(f"handover of step {n}: {ck[0]['bytes']['memory']} bytes into the next plan's hosts' memory in "
      f"{ck[0]['memory_commit_seconds']:.3f} s; recovery: bytes {b}, files {f}, breakdown {rec[0]['breakdown']}")
PY
echo PASS
