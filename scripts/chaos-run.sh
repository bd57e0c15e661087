#!/usr/bin/env bash
# Failures no CI test tries, against autohet run's failure handling (session 25, issue 36; not CI:
# minutes in all). Each scenario prints "chaos NAME: PASS ..." or "chaos NAME: FAIL ...". A pass is
# a run that finishes with every step 0..N-1 once and every loss equal to the uninterrupted run's
# (check_metrics: bit-exact on the reference's plan, 1e-4 after a re-plan), or one that stops with a
# named error and whose last committed checkpoint the same command then resumes to the end, as
# above. docs/elastic.md "Failures tried in session 25" gives each scenario's outcome.
#
#   bash scripts/chaos-run.sh BUILD_DIR SOURCE_DIR [SCENARIO...]     (default: every scenario)
#
# Scenarios (the local launcher, cpu-hetero's three one-device nodes slowed 10x, 24 steps; tests/agent_common.sh):
#   kill2      slow-0's rank SIGKILLed mid-run, then slow-1's as soon as the relaunch's ranks are up (its
#              restore; on a busy machine maybe after its first step): two failures, the second during the
#              recovery of the first
#   snapwrite  slow-0's rank SIGKILLed while its asynchronous writer is between step 8's pieces and
#              the manifest (hook ckpt-write), and slow-0's disk wiped before the relaunch
#   manflip    the run stopped (SIGINT) after step 9; one bit of slow-0's newest committed manifest
#              flipped (its data position); the same command again
#   stepflip   as manflip, the bit flipped in fast-0's manifest's "step" (10 -> 11): fast-0 holds every block
#   shardflip  as manflip, one bit in the middle of one of slow-0's shard files of that step
#   bothflip   as manflip, one bit flipped in the same shard file on both nodes holding it
#   enospc     slow-0's checkpoint disk a 256 KiB tmpfs (full at the first save)
#   changekill a notice to slow-1, and fast-0's rank SIGKILLed during the change in place (hook
#              reconfig-save): a kill of another node during the recovery of a notice
#   changestop as changekill, fast-0's rank SIGSTOPped (a hang) at the change's save
#   agentchange the agent SIGKILLed while the trainers change in place; the same command again
#   joinmove   slow-1 joined in place; its new rank SIGKILLed at the change's save, before the move
#   notice2    a notice to slow-1, and one to slow-0 while the first's change is being made (hook reconfig-save)
#   mpirunkill launch 0's mpirun SIGKILLed (its ranks not) mid-step 5 (hook): no rank of the old job may train on
#              beside the relaunch
#   mpirunstop launch 0's mpirun SIGSTOPped at step 5 (its ranks not), for good: the ranks train on without it and
#              cannot finalize; the run must end (finished or named), not hang
#   agentpause the agent itself SIGSTOPped for 6 s at step 5 (a head node paused), --step-timeout 3: nothing is lost
#              for the pause (no rank named stalled, no node lost)
#   agentbackoff  slow-0's rank killed at step 5 (hook), and the agent SIGKILLed during the restart's backoff; the
#              same command again
#   joinkill   slow-1 joined in place; its new job SIGKILLed when rank 0 reads the join's request (hook
#              reconfig-join), before its turn: the staying ranks wait idle for it; --step-timeout 5; no node may be
#              lost for that wait (every node was, and every checkpoint with their disks)
#   detresume  a notice to slow-1 (relaunch, --no-in-place), then slow-0's rank crashing at step 10 every time
#              (hook action=kill): named stop; the same command without the crash resumes to the end
#
# Over emulated hosts (tests/cluster/cluster.sh: h0..h2, each its own disk and /dev/shm, --launcher ssh; root
# and openssh-server, else skipped), the plan h1 > h2 > h0 with block 1 on h2 alone (h2_alone_cluster), 16 steps,
# a checkpoint every 4, in-memory replicas on (--replica-memory-gb 0.5), no cloud:
#   cwipe      h2 stopped mid-step 6 (hook), then every process of h2 killed, its sshd included (its disk and its
#              memory tier go), and h2 back at once as a new machine (empty disk, empty /dev/shm): every host
#              answers, so the failure policy restarts on the same hosts; h2's pieces only in h0's memory
#   creplkill  h0, the holder of h2's replicas, killed whole while it receives step 8's (hook replica): h0 lost,
#              the run re-planned on h1 + h2 from step 4, h0's pieces from h1's memory
#   cshm       every host's memory (its /dev/shm) 1 MiB, far under --replica-memory-gb: the replicas' writes fail
#              for want of space (ENOSPC, not the budget); h2 killed whole mid-step 6; the run must go on from what
#              the disks and memory hold, said (a new cluster: the others' is taken down first)
set -u
source "$(dirname "$0")/../tests/train_common.sh"
source "$SRC/tests/agent_common.sh"
trap '[ -n "${KEEP:-}" ] || rm -rf "$WORK"; for m in $MOUNTS; do umount "$m" 2>/dev/null; done' EXIT
MOUNTS=""
STEPS=24
CKPT_EVERY=2
small_cluster
# slowed (the emulation's slowdown changes no loss): a step takes long enough to act inside it
sed -i -e 's/"slowdown": 1,/"slowdown": 10,/' -e 's/"slowdown": 3,/"slowdown": 30,/' "$CLUSTER"
ALL="kill2 snapwrite manflip stepflip shardflip bothflip enospc changekill changestop agentchange joinmove notice2 mpirunkill detresume mpirunstop agentpause agentbackoff joinkill cwipe creplkill cshm"
CHOSEN=${*:3}
CHOSEN=${CHOSEN:-$ALL}

say() { echo "chaos $1: $2"; }
# launch_rank_pid DIR K NODE: NODE's rank pid in launch K, empty when its rank file is not there yet.
launch_rank_pid() {
    local p
    [ -d "$1/launch-$2" ] && p=$(rank_pids "$1/launch-$2" "$3") && [ -n "$p" ] && echo "$p"
}
steps_in() { grep -cs '"loss"' "$1" || true; }

reference "$WORK/ref"
PATIENCE=$(patience_s "$WORK/ref")
echo "reference: $(wall_s "$WORK/ref/metrics.jsonl") s, patience $PATIENCE s"

# history DIR: the final history of DIR's merged metrics (each launch's first step where it resumed)
# holds every step 0..STEPS-1 once, each loss the reference's (bit-exact while every launch ran the
# reference's plan, else within 1e-4 relative), the run's last event a "done" with history_ok. For
# a run stopped and run again, where check_metrics's one preempt a relaunch does not hold.
history() {
    python3 - "$1" "$WORK/ref" "$STEPS" <<'PY'
import json, os, sys
d, rd, steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
lines = [json.loads(l) for l in open(os.path.join(d, "metrics.jsonl"))]
ref = {x["step"]: x["loss"] for x in map(json.loads, open(os.path.join(rd, "metrics.jsonl"))) if "event" not in x}
key = lambda f: (lambda p: json.dumps([p["tp"], p["pipelines"], p["train"]], sort_keys=True))(json.load(open(f)))
hist, first = [], {}
for x in lines:
    if "event" in x: continue
    k, s = x["launch"], x["step"]
    if k not in first:
        first[k] = s
        assert s <= len(hist), f"launch {k} starts at step {s} past the history's {len(hist)}: skipped"
        hist = hist[:s]
    assert s == len(hist), f"launch {k}: step {s} after {len(hist) - 1}"
    hist.append((s, x["loss"], k))
assert len(hist) == steps, f"{len(hist)} of {steps} steps"
same = all(key(os.path.join(d, f"plan-{k}.json")) == key(os.path.join(rd, "plan-0.json")) for k in first) and \
    not any(x.get("event") == "reconfigure" for x in lines)  # a change in place: another plan, unnamed by a file
worst = 0.0
for s, loss, k in hist:
    if same: assert loss == ref[s], f"step {s}: {loss!r} != {ref[s]!r}"
    worst = max(worst, abs(loss - ref[s]) / abs(ref[s]))
assert worst <= 1e-4, f"max rel {worst:.2e}"
assert lines[-1].get("event") == "done" and lines[-1]["history_ok"], lines[-1]
print(f"launches={len(first)} resumed={list(first.values())} {'bit-exact' if same else f'maxrel={worst:.1e}'}")
PY
}

# finished NAME DIR: the run in DIR against the reference, said as NAME's outcome.
finished() {
    local out
    if out=$(check_metrics "$2" "$WORK/ref" 2>&1); then say "$1" "PASS: $out"; else say "$1" "FAIL: $out (log $2.log)"; fi
}
# rerun_finished NAME DIR: the same for a run stopped and run again.
rerun_finished() {
    local out
    if out=$(history "$2" 2>&1); then say "$1" "PASS: $out"; else say "$1" "FAIL: $out (log $2.log)"; fi
}

# resumed_after_stop NAME DIR WHY: a run that stopped (named: the agent's last line), then the same
# command again without the failure: it must finish as the reference did.
resumed_after_stop() {
    local name=$1 d=$2
    local why
    why=$(grep '^autohet run: ' "$d.log" | tail -1 | cut -c1-240)
    cp "$d.log" "$d.first.log"
    if ! run_agent "$d"; then say "$name" "FAIL: stopped ($why), the same command again failed: $(tail -3 "$d.log")"; return; fi
    local out
    if out=$(history "$d" 2>&1); then say "$name" "PASS: stopped named ($why); again: $out"
    else say "$name" "FAIL: stopped ($why); again: $out"; fi
}

sc_kill2() {
    local d=$WORK/kill2 pid
    run_agent "$d" &
    local agent=$!
    wait_until "$PATIENCE" step_lines_at_least 5 "$d/launch-0/metrics.jsonl" || { kill $agent; say kill2 "FAIL: no 5 steps"; return; }
    pid=$(launch_rank_pid "$d" 0 slow-0)
    kill -KILL $pid
    # the relaunch: its ranks started, no step yet (the restore)
    local end=$((SECONDS + PATIENCE))
    until launch_rank_pid "$d" 1 slow-1 >/dev/null || [ $SECONDS -ge $end ]; do sleep 0.01; done
    local n
    n=$(steps_in "$d/launch-1/metrics.jsonl")
    kill -KILL "$(launch_rank_pid "$d" 1 slow-1)"
    echo "kill2: second kill with launch 1 at $n steps"
    if wait $agent; then finished kill2 "$d"; else resumed_after_stop kill2 "$d"; fi
}

sc_snapwrite() {
    local d=$WORK/snapwrite m=$WORK/snapwrite.mark
    AH_TEST_HOOK="phase=ckpt-write,step=8,node=slow-0,action=pause,file=$m" run_agent "$d" &
    local agent=$!
    wait_until "$PATIENCE" test -e "$m" || { kill $agent; say snapwrite "FAIL: the hook never fired"; return; }
    kill -KILL "$(launch_rank_pid "$d" 0 slow-0)"
    rm -rf "$d/local/slow-0"
    rm -f "$m"
    # the relaunch writes step 8 again: let it through each time
    while kill -0 $agent 2>/dev/null; do rm -f "$m"; sleep 0.05; done
    if wait $agent; then finished snapwrite "$d"; else resumed_after_stop snapwrite "$d"; fi
}

# stopped_at NAME DIR N: the run in DIR interrupted (SIGINT to the agent) once N steps are logged.
stopped_at() {
    local d=$2
    run_agent "$d" &
    local agent=$!
    wait_until "$PATIENCE" step_lines_at_least "$3" "$d/launch-0/metrics.jsonl" || { kill $agent; return 1; }
    kill -INT "$(pgrep -P $agent | head -1)" # the autohet under the function's subshell
    wait $agent
    [ $? = 130 ] || { echo "$1: the interrupted run did not exit 130"; return 1; }
}

# newest_step DISK: the newest committed step directory under DISK.
newest_step() { ls -d "$1"/step-* 2>/dev/null | while read -r s; do [ -e "$s/manifest.json" ] && echo "$s"; done | tail -1; }

# flip FILE OFFSET BIT: one bit of FILE flipped in place.
flip() {
    python3 - "$@" <<'PY'
import sys
f, off, bit = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
b = bytearray(open(f, "rb").read())
b[off] ^= 1 << bit
open(f, "wb").write(b)
PY
}

sc_manflip() {
    local d=$WORK/manflip s off
    stopped_at manflip "$d" 9 || { say manflip "FAIL: no stop"; return; }
    s=$(newest_step "$d/local/slow-0")
    # the last digit of "data_position": N, one bit (0 <-> 1, 2 <-> 3, ...)
    off=$(python3 -c 'import re,sys; t=open(sys.argv[1]).read(); m=re.search(r"\"data_position\": *([0-9]+)", t); print(m.end(1)-1)' "$s/manifest.json")
    flip "$s/manifest.json" "$off" 0
    echo "manflip: $s/manifest.json: $(grep -o '"data_position": *[0-9]*' "$s/manifest.json")"
    if ! run_agent "$d"; then resumed_after_flip manflip "$d"; return; fi
    # the flipped step skipped, named, for the next older one (before: trained from scratch)
    grep -q "checkpoint step $((10#${s##*step-})) skipped (.*disagree on the data position" "$d.log" ||
        { say manflip "FAIL: the flipped step not skipped, named: $(grep 'autohet train' "$d.log" | head -3)"; return; }
    rerun_finished manflip "$d"
}

# resumed_after_flip NAME DIR: a resume refused on damage: named? then the damaged step's directory
# removed by hand (what an operator would do on the message) and the same command again.
resumed_after_flip() {
    local why
    why=$(grep -i 'error\|refus\|inconsistent\|damaged' "$2.log" | tail -2 | cut -c1-300 | tr '\n' ' ')
    say "$1" "FAIL: the resume stopped: $why"
}

sc_stepflip() {
    local d=$WORK/stepflip s off
    stopped_at stepflip "$d" 9 || { say stepflip "FAIL: no stop"; return; }
    s=$(newest_step "$d/local/fast-0")
    off=$(python3 -c 'import re,sys; t=open(sys.argv[1]).read(); m=re.search(r"\"step\": *([0-9]+)", t); print(m.end(1)-1)' "$s/manifest.json")
    flip "$s/manifest.json" "$off" 0
    echo "stepflip: $s/manifest.json: $(grep -o '"step": *[0-9]*' "$s/manifest.json")"
    if run_agent "$d"; then rerun_finished stepflip "$d"; else resumed_after_flip stepflip "$d"; fi
}

sc_shardflip() {
    local d=$WORK/shardflip s f
    stopped_at shardflip "$d" 9 || { say shardflip "FAIL: no stop"; return; }
    s=$(newest_step "$d/local/slow-0")
    f=$(ls "$s"/block-*.safetensors | head -1)
    flip "$f" $(($(stat -c %s "$f") / 2)) 3
    if run_agent "$d"; then
        grep -q "repaired\|replaced a copy" "$d.log" || { say shardflip "FAIL: no repair said"; return; }
        rerun_finished shardflip "$d"
    else resumed_after_flip shardflip "$d"; fi
}

sc_bothflip() {
    local d=$WORK/bothflip s f n name
    stopped_at bothflip "$d" 9 || { say bothflip "FAIL: no stop"; return; }
    s=$(newest_step "$d/local/slow-0")
    name=$(basename "$(ls "$s"/block-*.safetensors | head -1)")
    n=0
    for f in "$d"/local/*/"$(basename "$s")/$name"; do flip "$f" $(($(stat -c %s "$f") / 2)) 3; n=$((n + 1)); done
    echo "bothflip: $name flipped on $n nodes"
    if run_agent "$d"; then rerun_finished bothflip "$d"; else resumed_after_flip bothflip "$d"; fi
}

sc_enospc() {
    local d=$WORK/enospc disk=$WORK/enospc/local/slow-0
    mkdir -p "$disk"
    mount -t tmpfs -o size=6m tmpfs "$disk" || { say enospc "SKIP: cannot mount a tmpfs"; return; }
    MOUNTS="$MOUNTS $disk"
    run_agent "$d" &
    local agent=$!
    wait_until "$PATIENCE" step_lines_at_least 5 "$d/launch-0/metrics.jsonl" || { kill $agent; say enospc "FAIL: no 5 steps"; return; }
    # the disk filled by someone else mid-run: less left than one step's files
    dd if=/dev/zero of="$disk/filler" bs=64k 2>/dev/null
    rm -f "$disk/filler" && dd if=/dev/zero of="$disk/filler" bs=64k count=$(( ($(df --output=avail -B1 "$disk" | tail -1) - 500000) / 65536 )) 2>/dev/null
    echo "enospc: slow-0's disk filled at step $(steps_in "$d/launch-0/metrics.jsonl"): $(df --output=avail -B1 "$disk" | tail -1) bytes left"
    if wait $agent; then
        finished enospc "$d"
    else
        say enospc "STOPPED: $(grep '^autohet run: ' "$d.log" | tail -1 | cut -c1-300)"
    fi
    grep 'not saved\|No space' "$d.log" | head -2
    rm -f "$disk/filler"
    grep -q '"done"' "$d/metrics.jsonl" && ! grep -q '"event":"done","ok":true' "$d/metrics.jsonl" &&
        resumed_after_stop enospc "$d" # the space freed, the same command again
    umount "$disk"
}

sc_changekill() {
    local d=$WORK/changekill m=$WORK/changekill.mark
    echo "0,add,fast-0" >"$d.csv"
    local t0=$SECONDS
    AH_TEST_HOOK="phase=reconfig-save,step=any,node=fast-0,action=pause,file=$m" run_agent "$d" --events "$d.csv" --grace-s 60 &
    local agent=$!
    wait_until "$PATIENCE" step_lines_at_least 4 "$d/launch-0/metrics.jsonl" || { kill $agent; say changekill "FAIL: no 4 steps"; return; }
    echo "$(((SECONDS - t0) * 1000)),remove,slow-1" >>"$d.csv"
    wait_until "$PATIENCE" test -e "$m" || { kill $agent; say changekill "FAIL: the hook never fired: $(tail -3 "$d.log")"; return; }
    kill -KILL "$(launch_rank_pid "$d" 0 fast-0)"
    rm -f "$m"
    while kill -0 $agent 2>/dev/null; do rm -f "$m"; sleep 0.05; done
    if wait $agent; then finished changekill "$d"; else resumed_after_stop changekill "$d"; fi
}

# notice_then NAME HOOK [flags]: the agent (--grace-s 60) with AH_TEST_HOOK=HOOK (its file $WORK/NAME.mark), slow-1
# noticed once 4 steps are in; returns once the hook's file is there (0) or not in time (1). Sets agent, d, m.
notice_then() {
    local name=$1 hook=$2
    shift 2
    d=$WORK/$name m=$WORK/$name.mark
    echo "0,add,fast-0" >"$d.csv"
    local t0=$SECONDS
    AH_TEST_HOOK="$hook,file=$m" run_agent "$d" --events "$d.csv" --grace-s 60 "$@" &
    agent=$!
    wait_until "$PATIENCE" step_lines_at_least 4 "$d/launch-0/metrics.jsonl" || { kill $agent; return 1; }
    echo "$(((SECONDS - t0) * 1000)),remove,slow-1" >>"$d.csv"
    wait_until "$PATIENCE" test -e "$m" || { kill $agent; return 1; }
}

# changestop: fast-0's rank stopped (SIGSTOP: a hang, not a death) at the change's save (hook reconfig-save:
# the step's save decided, the move not started)
sc_changestop() {
    local agent d m pid
    notice_then changestop "phase=reconfig-save,step=any,node=fast-0,action=pause" --step-timeout 3 ||
        { say changestop "FAIL: the hook never fired: $(tail -3 "$d.log")"; return; }
    pid=$(launch_rank_pid "$d" 0 fast-0)
    kill -STOP "$pid"
    rm -f "$m"
    while kill -0 $agent 2>/dev/null; do rm -f "$m"; sleep 0.05; done
    kill -CONT "$pid" 2>/dev/null; kill -KILL "$pid" 2>/dev/null
    if wait $agent; then finished changestop "$d"; else resumed_after_stop changestop "$d"; fi
}

# agentchange: the agent itself SIGKILLed while the trainers change in place (hook reconfig-save); the same
# command again
sc_agentchange() {
    local agent d m
    notice_then agentchange "phase=reconfig-save,step=any,node=fast-0,action=pause" ||
        { say agentchange "FAIL: the hook never fired: $(tail -3 "$d.log")"; return; }
    kill -KILL "$(pgrep -P $agent | head -1)"
    rm -f "$m"
    wait $agent
    # its job ends with it (PR_SET_PDEATHSIG on mpirun): wait for the ranks to go
    local k
    for k in $(seq 200); do
        ls "$d"/launch-0/rank-*.json >/dev/null 2>&1 || break
        python3 -c 'import glob,json,os,sys
for f in glob.glob(sys.argv[1] + "/rank-*.json"):
    try: os.kill(json.load(open(f))["pid"], 0); sys.exit(1)
    except ProcessLookupError: pass' "$d/launch-0" && break
        sleep 0.1
    done
    AH_TEST_HOOK="" resumed_after_stop agentchange "$d"
}

sc_notice2() {
    local agent d m
    notice_then notice2 "phase=reconfig-save,step=any,node=fast-0,action=pause" ||
        { say notice2 "FAIL: the hook never fired: $(tail -3 "$d.log")"; return; }
    local ms
    ms=$(python3 -c 'import sys; print(int(float(sys.argv[1]) * 1000) + 1)' "$(sed -n 's/^autohet run: \[ *\([0-9.]*\) s\] preemption of slow-1.*/\1/p' "$d.log" | head -1)")
    echo "$ms,remove,slow-0" >>"$d.csv"
    sleep 1
    while kill -0 $agent 2>/dev/null; do rm -f "$m"; sleep 0.05; done
    if wait $agent; then finished notice2 "$d"; else resumed_after_stop notice2 "$d"; fi
}

sc_mpirunkill() {
    local d=$WORK/mpirunkill m=$WORK/mpirunkill.mark mp ranks p
    AH_TEST_HOOK="phase=step,step=5,node=slow-0,action=pause,file=$m" run_agent "$d" --no-in-place &
    local agent=$!
    wait_until "$PATIENCE" test -e "$m" || { kill $agent; say mpirunkill "FAIL: the hook never fired"; return; }
    ranks="$(launch_rank_pid "$d" 0 fast-0) $(launch_rank_pid "$d" 0 slow-0) $(launch_rank_pid "$d" 0 slow-1)"
    mp=$(ps -o ppid= -p "$(launch_rank_pid "$d" 0 fast-0)" | tr -d ' ')
    [ "$(cat /proc/"$mp"/comm)" = mpirun ] || { kill $agent; say mpirunkill "FAIL: the rank's parent $mp is $(cat /proc/"$mp"/comm)"; return; }
    kill -KILL "$mp"
    rm -f "$m" # slow-0's rank goes on, if it is still there
    ( while kill -0 $agent 2>/dev/null; do rm -f "$m"; sleep 0.05; done ) &
    sleep 2
    local alive=""
    for p in $ranks; do grep -qs '^State:[[:space:]]*[^Z[:space:]]' "/proc/$p/status" && alive="$alive $p"; done
    [ -z "$alive" ] || echo "mpirunkill: old ranks alive 2 s after their mpirun's kill:$alive"
    if wait $agent; then finished mpirunkill "$d"; else resumed_after_stop mpirunkill "$d"; fi
    alive=""
    for p in $ranks; do grep -qs '^State:[[:space:]]*[^Z[:space:]]' "/proc/$p/status" && alive="$alive $p"; done
    [ -z "$alive" ] || { say mpirunkill "FAIL: old ranks alive after the run:$alive"; kill -KILL $alive; }
}

sc_mpirunstop() {
    local d=$WORK/mpirunstop m=$WORK/mpirunstop.mark mp
    AH_TEST_HOOK="phase=step,step=5,node=slow-0,action=pause,file=$m" run_agent "$d" --no-in-place --step-timeout 3 &
    local agent=$!
    wait_until "$PATIENCE" test -e "$m" || { kill $agent; say mpirunstop "FAIL: the hook never fired"; return; }
    mp=$(ps -o ppid= -p "$(launch_rank_pid "$d" 0 slow-0)" | tr -d ' ')
    kill -STOP "$mp"
    ( while kill -0 $agent 2>/dev/null; do rm -f "$m"; sleep 0.05; done ) &
    local end=$((SECONDS + 120))
    while kill -0 $agent 2>/dev/null && [ $SECONDS -lt $end ]; do sleep 0.2; done
    if kill -0 $agent 2>/dev/null; then
        say mpirunstop "FAIL: still running 120 s after its mpirun stopped: $(tail -2 "$d.log" | cut -c1-200)"
        kill -CONT "$mp" 2>/dev/null; kill -INT "$(pgrep -P $agent | head -1)"; sleep 1; kill -KILL "$mp" 2>/dev/null
        wait $agent
        return
    fi
    kill -CONT "$mp" 2>/dev/null
    if wait $agent; then finished mpirunstop "$d"; else resumed_after_stop mpirunstop "$d"; fi
}

sc_agentpause() {
    local d=$WORK/agentpause a
    run_agent "$d" --step-timeout 3 &
    local agent=$!
    wait_until "$PATIENCE" step_lines_at_least 5 "$d/launch-0/metrics.jsonl" || { kill $agent; say agentpause "FAIL: no 5 steps"; return; }
    a=$(pgrep -P $agent | head -1)
    kill -STOP "$a"
    sleep 6
    kill -CONT "$a"
    if ! wait $agent; then resumed_after_stop agentpause "$d"; return; fi
    if grep -q '"event":"stalled"\|"event":"preempt"' "$d/metrics.jsonl"; then
        say agentpause "FAIL: the pause cost a stop: $(grep -m1 'stopped progressing\|preempt' "$d.log" | cut -c1-250)"
    else finished agentpause "$d"; fi
}

sc_agentbackoff() {
    local d=$WORK/agentbackoff
    AH_TEST_HOOK="phase=step,step=5,node=slow-0,action=kill" run_agent "$d" &
    local agent=$!
    wait_until "$PATIENCE" grep -q "restart 1 (--max-restarts" "$d.log" || { kill $agent; say agentbackoff "FAIL: no restart said"; return; }
    kill -KILL "$(pgrep -P $agent | head -1)"
    wait $agent
    ls "$d"/launch-1 >/dev/null 2>&1 && echo "agentbackoff: launch 1 had started"
    resumed_after_stop agentbackoff "$d"
}

# join_killed NAME HOOK [flags]: slow-1 down at the start, back once 3 steps are in and joined in place; its new job
# SIGKILLed once AH_TEST_HOOK=HOOK (a pause, its file $WORK/NAME.mark) holds the staying ranks, then let go. Sets
# agent and d; returns 1 (said) when a step of that failed.
join_killed() {
    local name=$1 hook=$2 m=$WORK/$1.mark
    shift 2
    d=$WORK/$name
    echo "0,remove,slow-1" >"$d.csv"
    local t0=$SECONDS
    AH_TEST_HOOK="$hook,action=pause,file=$m" run_agent "$d" --events "$d.csv" --grace-s 60 --join-horizon-s 1000000 "$@" &
    agent=$!
    wait_until "$PATIENCE" step_lines_at_least 3 "$d/launch-0/metrics.jsonl" || { kill $agent; say "$name" "FAIL: no 3 steps"; return 1; }
    echo "$(((SECONDS - t0) * 1000)),add,slow-1" >>"$d.csv"
    wait_until "$PATIENCE" test -e "$m" || { kill $agent; say "$name" "FAIL: the hook never fired: $(tail -3 "$d.log")"; return 1; }
    # the joining job's rank writes its rank file once joined: the trainer process of this run that is not
    # fast-0's nor slow-0's
    local known p joiner=""
    known=" $(launch_rank_pid "$d" 0 fast-0) $(launch_rank_pid "$d" 0 slow-0) "
    for p in $(pgrep -f "autohet train .*$d/"); do [[ $known == *" $p "* ]] || joiner=$p; done
    [ -n "$joiner" ] || { kill $agent; say "$name" "FAIL: no joining process found"; return 1; }
    kill -KILL "$joiner"
    rm -f "$m"
    ( while kill -0 $agent 2>/dev/null; do rm -f "$m"; sleep 0.05; done ) &
}

sc_joinkill() {
    local agent d
    join_killed joinkill "phase=reconfig-join,step=any" --step-timeout 5 || return
    if ! wait $agent; then resumed_after_stop joinkill "$d"; return; fi
    if grep -q '"event":"stalled"' "$d/metrics.jsonl"; then
        say joinkill "FAIL: nodes lost for the wait: $(grep -m1 'leave as lost' "$d.log" | cut -c1-250)"
    else finished joinkill "$d"; fi
}

# joinmove: its new rank killed at the change's save on fast-0 (hook reconfig-save), the state not yet moved to it
sc_joinmove() {
    local agent d
    join_killed joinmove "phase=reconfig-save,step=any,node=fast-0" || return
    if ! wait $agent; then resumed_after_stop joinmove "$d"; return; fi
    if grep -q '"event":"stalled"' "$d/metrics.jsonl"; then
        say joinmove "FAIL: nodes lost for the wait: $(grep -m1 'leave as lost' "$d.log" | cut -c1-250)"
    else finished joinmove "$d"; fi
}

sc_detresume() {
    local d=$WORK/detresume
    echo "0,add,fast-0" >"$d.csv"
    local t0=$SECONDS
    AH_TEST_HOOK="phase=step,step=10,node=slow-0,action=kill" run_agent "$d" --events "$d.csv" --no-in-place &
    local agent=$!
    wait_until "$PATIENCE" step_lines_at_least 4 "$d/launch-0/metrics.jsonl" || { kill $agent; say detresume "FAIL: no 4 steps"; return; }
    echo "$(((SECONDS - t0) * 1000)),remove,slow-1" >>"$d.csv"
    if wait $agent; then say detresume "FAIL: a crash at step 10 every time, and the run succeeded"; return; fi
    grep -q "not restarted again: it came back at step 10" "$d.log" || { say detresume "FAIL: $(tail -3 "$d.log")"; return; }
    # the same command, the crash gone, and slow-1's removal kept (the events file from the start)
    resumed_after_stop detresume "$d"
}

# ---- over emulated hosts ----
CL_REF=""
# cluster_ready: the cluster and its reference run, made once (returns 1 when this machine cannot)
cluster_ready() {
    [ -n "$CL_REF" ] && return 0
    [ "$(id -u)" = 0 ] && [ -x /usr/sbin/sshd ] || return 1
    source "$SRC/tests/cluster/cluster.sh"
    STEPS=16 CKPT_EVERY=4
    h2_alone_cluster
    cluster_reference "$WORK/cref"
    cluster_up 3 1000 || fail "cannot make the test cluster"
    cluster_mpi_args AH_TEST_HOOK
    CL_REF=$WORK/cref
}

# cluster_outcome NAME: the ssh run ($WD, $agent_log) against the cluster's reference, with the recover events'
# bytes by tier.
cluster_outcome() {
    local out
    if out=$(check_metrics "$WD" "$CL_REF" 2>&1); then
        say "$1" "PASS: $out; $(python3 -c 'import json,sys
for x in map(json.loads, open(sys.argv[1])):
    if x.get("event") == "recover": print("from", x["step"], x["cause"], x["bytes"], end="; ")' "$WD/metrics.jsonl")"
    else say "$1" "FAIL: $out (log $agent_log)"; fi
}

sc_cwipe() {
    cluster_ready || { say cwipe "SKIP: needs root and openssh-server"; return; }
    local m=$CL_DIR/disks/h2/hook-cwipe agent
    AH_TEST_HOOK="phase=step,step=6,node=h2,action=pause,file=$CL_DISK/hook-cwipe" ssh_agent cwipe --replica-memory-gb 0.5
    wait_until 120 test -e "$m" || { kill $agent; say cwipe "FAIL: the hook never fired: $(tail -3 "$agent_log")"; return; }
    cluster_kill_host h2
    cluster_revive_host h2 || { say cwipe "FAIL: h2 not revived"; return; }
    # the relaunch trains step 6 again on h2: let it through
    while kill -0 $agent 2>/dev/null; do rm -f "$m"; sleep 0.1; done
    wait $agent || { say cwipe "FAIL: the run failed: $(grep '^autohet run: ' "$agent_log" | tail -1 | cut -c1-300)"; return; }
    cluster_outcome cwipe
}

sc_creplkill() {
    cluster_ready || { say creplkill "SKIP: needs root and openssh-server"; return; }
    local m=$CL_DIR/disks/h0/hook-repl agent
    AH_TEST_HOOK="phase=replica,step=8,node=h0,action=pause,file=$CL_DISK/hook-repl" ssh_agent creplkill --replica-memory-gb 0.5
    wait_until 120 test -e "$m" || { kill $agent; say creplkill "FAIL: the hook never fired: $(tail -3 "$agent_log")"; return; }
    cluster_kill_host h0
    wait $agent || { say creplkill "FAIL: the run failed: $(grep '^autohet run: ' "$agent_log" | tail -1 | cut -c1-300)"; return; }
    cluster_outcome creplkill
}

sc_cshm() {
    cluster_ready || { say cshm "SKIP: needs root and openssh-server"; return; }
    cluster_down
    CL_SHM_MB=1 cluster_up 3 1000 || { say cshm "FAIL: no cluster"; return; }
    cluster_mpi_args AH_TEST_HOOK
    local m=$CL_DIR/disks/h2/hook-shm agent
    AH_TEST_HOOK="phase=step,step=6,node=h2,action=pause,file=$CL_DISK/hook-shm" ssh_agent cshm --replica-memory-gb 0.5
    wait_until 120 test -e "$m" || { kill $agent; say cshm "FAIL: the hook never fired: $(tail -3 "$agent_log")"; return; }
    grep -h '"event":"checkpoint"' "$WD/metrics.jsonl" | head -2 | cut -c1-400
    cluster_kill_host h2
    wait $agent || { say cshm "STOPPED: $(grep '^autohet run: ' "$agent_log" | tail -1 | cut -c1-300)"; return; }
    cluster_outcome cshm
}

for s in $CHOSEN; do
    echo "---- $s ($(date +%T))"
    "sc_$s"
done
