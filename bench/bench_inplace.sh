#!/usr/bin/env bash
# In-place reconfiguration vs stopping and restarting the processes (issue 36 "Survivors keep their
# processes"; runtime/reconfig.h, docs/elastic.md "In-place reconfiguration at a notice"), on the case of
# tests/test_train_inplace.sh: three one-device data-parallel replicas (dp3, nodes n0 n1 n2, the
# tiny-gpt2 of examples/plans/train-dp4.json) of which n2's leaves at step S; two replicas (dp2, n0 n1)
# go on. Each round, one after the other:
#   in place: three one-rank mpirun jobs joined through an ompi-server (AH_WORLD_JOIN); RUN_DIR's
#             reconfigure.json asks for the change at step S: the notice's save, the old runtime freed,
#             the world split, dp2 set up in the same processes, the step-S checkpoint loaded, step S;
#   restart:  what the agent does today: one mpirun of 3 ranks; mid-step S-1 (test hook, pause) every rank
#             gets SIGTERM (the notice), saves step S and exits 75; at once one mpirun of 2 ranks resumes
#             (--resume) and trains step S (no agent in between: its own re-planning is not counted).
# Phases, seconds: in place from the "reconfigure" event (the slowest rank's save, teardown, split,
# init: plan, data, trainer, session; load: the restore) and step S's own seconds (first step);
# restart: save (the notice's checkpoint event), exit (the old job's end after the save), start-up
# (process start, MPI_Init, plan, trainer, session: the relaunch's wall to its step-S line less load and
# first step), load (the recover event), first step. "total" is measured outside, the same way for both:
# from the moment step S-1's metrics line appears to the moment step S's does (a poller, 2 ms).
#   [ROUNDS=3] [S=3] bash bench/bench_inplace.sh [BUILD_DIR]      (medians over the rounds, and the ratio)
set -u
S=${S:-3}
ROUNDS=${ROUNDS:-3}
SRC=$(cd "$(dirname "$0")/.." && pwd)
. "$SRC/bench/common.sh" "${1:-$SRC/build}"
command -v ompi-server >/dev/null || { echo "no ompi-server"; exit 1; }
STEPS=$((S + 2))
python3 "$SRC/tests/dp_plans.py" "$SRC/examples/plans/train-dp4.json" "$WORK" dp3=n0,n1,n2:3,3,2 dp2=n0,n1:4,4
cat >"$WORK/poll.py" <<'PY'
# poll.py METRICS OUT STEPS: the wall time (time.time()) each of STEPS' step lines appeared in METRICS
import json, sys, time
path, out, want = sys.argv[1], sys.argv[2], set(int(x) for x in sys.argv[3].split(","))
seen, pos, buf, end = {}, 0, "", time.time() + 300
with open(out, "w") as o:
    while want - seen.keys() and time.time() < end:
        try:
            with open(path) as f:
                f.seek(pos)
                chunk = f.read()
                pos += len(chunk)
        except FileNotFoundError:
            chunk = ""
        buf += chunk
        while "\n" in buf:
            line, buf = buf.split("\n", 1)
            try:
                d = json.loads(line)
            except ValueError:
                continue
            if "event" not in d and d["step"] in want and d["step"] not in seen:
                seen[d["step"]] = time.time()
                o.write(f"{d['step']} {seen[d['step']]:.6f}\n")
                o.flush()
        time.sleep(0.002)
PY
now() { date +%s.%N; }
train() { # PLAN METRICS [flags]
    local plan=$1 m=$2
    shift 2
    echo "$AH" train --plan "$WORK/$plan.json" --data "$WORK/text.bin" --steps $STEPS --quiet --metrics "$m" "$@"
}
in_place() { # ROUND: the three joined jobs, the change at step S; WORK/ip-R.{jsonl,times}
    local r=$1 d=$WORK/ip-$1 job pids=()
    mkdir -p "$d/join" "$d/run"
    printf '{"step": %d, "leave": [2], "plan": "%s"}\n' "$S" "$WORK/dp2.json" >"$d/run/reconfigure.json"
    python3 "$WORK/poll.py" "$d/m.jsonl" "$d/times" "$((S - 1)),$S" &
    local poller=$!
    for job in 2 1 0; do
        AH_WORLD_JOIN=$d/join:$job:3 timeout 300 $MPIRUN --ompi-server "file:$WORK/uri" -x AH_WORLD_JOIN -np 1 \
            $(train dp3 "$d/m.jsonl" --local-root "$d/root" --run-dir "$d/run") >"$d/job$job.out" 2>&1 &
        pids+=($!)
    done
    for job in 0 1 2; do wait "${pids[$job]}" || { tail "$d"/job*.out >&2; echo "in place: a job failed"; exit 1; }; done
    wait $poller
}
restart() { # ROUND: one mpirun of dp3 stopped by a notice at step S, then dp2 resumed; WORK/rs-R
    local r=$1 d=$WORK/rs-$1 st
    mkdir -p "$d/run"
    python3 "$WORK/poll.py" "$d/m1.jsonl" "$d/times1" "$((S - 1))" &
    local poller=$!
    AH_TEST_HOOK="phase=step,step=$((S - 1)),node=n0,file=$d/hook,action=pause" timeout 300 $MPIRUN -np 3 \
        -x AH_TEST_HOOK $(train dp3 "$d/m1.jsonl" --local-root "$d/root" --run-dir "$d/run") >"$d/old.out" 2>&1 &
    local job=$!
    for _ in $(seq 3000); do [ -e "$d/hook" ] && [ "$(ls "$d"/run/rank-*.json 2>/dev/null | wc -l)" = 3 ] && break; sleep 0.01; done
    [ -e "$d/hook" ] || { cat "$d/old.out" >&2; echo "restart: the hook was not reached"; exit 1; }
    for f in "$d"/run/rank-*.json; do kill -TERM "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["pid"])' "$f")"; done
    rm -f "$d/hook"
    wait $job
    st=$?
    now >"$d/exited"
    [ $st = 75 ] || { cat "$d/old.out" >&2; echo "restart: the old job exited $st, not 75"; exit 1; }
    wait $poller
    python3 "$WORK/poll.py" "$d/m2.jsonl" "$d/times2" "$S" &
    poller=$!
    now >"$d/launched"
    timeout 300 $MPIRUN -np 2 $(train dp2 "$d/m2.jsonl" --resume --local-root "$d/root") >"$d/new.out" 2>&1 ||
        { cat "$d/new.out" >&2; echo "restart: the relaunch failed"; exit 1; }
    wait $poller
}
ompi-server --no-daemonize -r "$WORK/uri" &
SERVER=$!
trap 'kill $SERVER 2>/dev/null; rm -rf "$WORK"' EXIT
for _ in $(seq 100); do [ -s "$WORK/uri" ] && break; sleep 0.1; done
for r in $(seq "$ROUNDS"); do
    in_place "$r"
    restart "$r"
done
python3 - "$WORK" "$ROUNDS" "$S" <<'PY'
import json, statistics, sys
work, rounds, S = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def lines(p): return [json.loads(l) for l in open(p)]
def times(p): return {int(a): float(b) for a, b in (l.split() for l in open(p))}
def step_s(ls, k): return next(o["seconds"] for o in ls if "event" not in o and o["step"] == k)
ip_rows, rs_rows = [], []
for r in range(1, rounds + 1):
    d = f"{work}/ip-{r}"
    ls, t = lines(f"{d}/m.jsonl"), times(f"{d}/times")
    ev = next(o for o in ls if o.get("event") == "reconfigure")
    assert ev["resumed_step"] == S, ev
    ph = ev["seconds"]
    ip_rows.append([ph["save"], ph["teardown"], ph["split"], ph["init"], ph["load"], step_s(ls, S), t[S] - t[S - 1]])
    d = f"{work}/rs-{r}"
    l1, l2 = lines(f"{d}/m1.jsonl"), lines(f"{d}/m2.jsonl")
    t1, t2 = times(f"{d}/times1"), times(f"{d}/times2")
    pre = next(o for o in l1 if o.get("event") == "preempt")
    assert pre["saved"] and pre["step"] == S, pre
    save = next(o["seconds"] for o in l1 if o.get("event") == "checkpoint" and o["step"] == S)
    rec = next(o for o in l2 if o.get("event") == "recover")
    assert rec["found"] and rec["step"] == S, rec
    exited, launched = float(open(f"{d}/exited").read()), float(open(f"{d}/launched").read())
    first = step_s(l2, S)
    rs_rows.append([save, exited - t1[S - 1] - save, t2[S] - launched - rec["seconds"] - first, rec["seconds"], first,
                    t2[S] - t1[S - 1]])
print(f"(the tiny-gpt2 dp3 -> dp2 at step {S}; {rounds} rounds; seconds, medians)")
med = lambda rows, k: statistics.median(row[k] for row in rows)
print("in place: save %.3f  teardown %.4f  split %.4f  init %.3f  load %.3f  first step %.3f  | total %.3f" %
      tuple(med(ip_rows, k) for k in range(7)))
print("restart:  save %.3f  exit %.3f  start-up %.3f  load %.3f  first step %.3f  | total %.3f" %
      tuple(med(rs_rows, k) for k in range(6)))
for r in range(rounds):
    print(f"  round {r + 1}: in place {ip_rows[r][-1]:.3f} s, restart {rs_rows[r][-1]:.3f} s")
print("restart / in place: %.1fx (total, medians)" % (med(rs_rows, 5) / med(ip_rows, 6)))
PY
