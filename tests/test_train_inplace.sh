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
    dp2-20=n2,n0:5,3 dp1-1=n1:8 dp4=n0,n1,n2,n3:2,2,2,2
# Partitioned plans, where the move carries layers between processes (runtime/reconfig_move.h): pp3 (n0 blocks
# 0-1 and the embedding, n1 block 2, n2 block 3 and the head), pp2 over n0, n1 (blocks 0-1, 2-3); pp3-n0, the
# same stages on n0's devices 0-2, and tp2-n0 on n0's devices 0 and 1 (one stage, every block split in two: a
# TP and PP change at once; a TP group stays in a node, and the reference's resume of tp2-n0 reads only n0's
# disk, so the old plan is on n0 too; the trainer's processes need not be on the plan's node here).
python3 - "$PLANS/train-dp4.json" "$WORK" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
def plan(name, tp, stages):  # stages: (layers, ["NODE:INDEX", ...])
    e = json.loads(json.dumps(d))
    st0 = e["pipelines"][0]["stages"][0]
    e["tp"], e["pipelines"] = tp, [{"micro_batches": 8, "stages": [dict(st0, layers=l, devices=[
        {"node": v.split(":")[0], "index": int(v.split(":")[1])} for v in devs]) for l, devs in stages]}]
    json.dump(e, open(f"{sys.argv[2]}/{name}.json", "w"))
plan("pp3", 1, [([0, 2], ["n0:0"]), ([2, 3], ["n1:0"]), ([3, 4], ["n2:0"])])
plan("pp2-01", 1, [([0, 2], ["n0:0"]), ([2, 4], ["n1:0"])])
plan("pp3-n0", 1, [([0, 2], ["n0:0"]), ([2, 3], ["n0:1"]), ([3, 4], ["n0:2"])])
plan("tp2-n0", 2, [([0, 4], ["n0:0", "n0:1"])])
PY
. "$SRC/tests/joined_common.sh"
# The references: dp3 (pp3) in one mpirun, its step 3 saved; each new plan resumed from that step alone.
for old in dp3 pp3 pp3-n0; do
    timeout 120 $MPIRUN -np 3 $(train $old ref-$old --ckpt-every 3 --keep 10 --local-root "$WORK/r-$old") \
        >"$WORK/ref-$old.out" 2>&1 || { cat "$WORK/ref-$old.out" >&2; fail "$old in one mpirun"; }
    rm -rf "$WORK"/r-$old/*/step-0000000[68]
done
for p in dp3:dp2-01 dp3:dp2-12 dp3:dp2-20 pp3:pp2-01 pp3-n0:tp2-n0; do
    old=${p%%:*} p=${p#*:}
    rm -rf "$WORK/r-$p" && cp -r "$WORK/r-$old" "$WORK/r-$p"
    timeout 120 $MPIRUN -np 2 $(train $p ref-$p --resume --local-root "$WORK/r-$p" \
        $([ $p = dp2-01 ] && echo --ckpt-every 3 --keep 10)) >"$WORK/ref-$p.out" 2>&1 || # readmit's step 6
        { cat "$WORK/ref-$p.out" >&2; fail "$p resumed from step 3"; }
done
# run_jobs DIR LEAVER HOOK CMD...: three one-rank mpirun jobs joined into one world (DIR/join), each running
# CMD with AH_JOB its job number (LEAVER's, or $HOOK_JOB's, with AH_TEST_HOOK=HOOK), started 2, 1, 0; each mpirun's status in
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
            AH_JOB=$job AH_TEST_HOOK=$([ "$job" = "${HOOK_JOB:-$leaver}" ] && echo "$hook") AH_WORLD_JOIN=$d/join:$job:3 timeout 180 \
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
# inplace CASE LEAVER PLAN [HOOK [RANKS]]: the three jobs (under $OLD, default dp3), LEAVER leaving at step 3 for
# PLAN (HOOK: the leaver's AH_TEST_HOOK; RANKS: the request's "ranks", e.g. 1,-1,0); each job's pid in
# $WORK/CASE/pidJ, its mpirun's status in $WORK/CASE/stJ. The state moves rank to rank (the event's "state"
# "moved", its load phase 0) and "moved_bytes" is exactly the data of the shard files $MOVED names (the pieces
# that change process: the step-3 checkpoint's copies of them, 12 bytes a parameter), none for dp3 -> dp2 (a
# survivor holds every piece already); with $RESTORED set, the move is refused and the state restored
# from the checkpoint instead, the event saying why ("not_moved").
inplace() {
    local c=$1 leaver=$2 plan=$3 hook=${4:-} ranks=${5:-} d=$WORK/$1 old=${OLD:-dp3}
    mkdir -p "$d/join" "$d/run"
    printf '{"step": 3, "leave": [%d], "plan": "%s"%s}\n' "$leaver" "$WORK/$plan.json" \
        "${ranks:+, \"ranks\": [$ranks]}" >"$d/run/reconfigure.json"
    run_jobs "$d" "$leaver" "$hook" bash -c "echo \$\$ >$d/pid\$AH_JOB; exec \
        $(train $old $c/ip --local-root "$d/root" --run-dir "$d/run" ${FLAGS:-})"
    python3 - "$WORK" "$c" "$leaver" "$plan" "$ranks" "$old" "${MOVED:-}" "${RESTORED:-}" "${SYNC_WHY:-}" "${FLAGS:-}" <<'PY' ||
import glob, json, os, sys
work, c, leaver, plan, old = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[6]
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
ref = {o["step"]: o["loss"] for f in (f"ref-{old}", f"ref-{plan}") for o in map(json.loads, open(f"{work}/{f}.jsonl"))
       if "event" not in o and (f == f"ref-{old}") == (o["step"] < 3)}
for o in steps:
    assert o["loss"] == ref[o["step"]], f"step {o['step']}: {o['loss']!r} vs {ref[o['step']]!r}"
def data_bytes(name):  # a shard file's data section: the file less its 8-byte length and JSON header
    f = glob.glob(f"{work}/r-{old}/*/step-00000003/{name}.safetensors")[0]
    return os.path.getsize(f) - 8 - int.from_bytes(open(f, "rb").read(8), "little")
secs = rc["seconds"]
if sys.argv[8]:
    assert rc["state"] == "restored" and sys.argv[8] in rc.get("not_moved", "") and secs["move"] == 0 and \
        secs["load"] > 0, rc
    assert sum(sys.argv[8] in out[j] for j in range(3)) >= 1, "the fallback is said"
else:
    want = sum(data_bytes(n) for n in sys.argv[7].split())
    assert rc["state"] == "moved" and secs["load"] == 0 and secs["move"] > 0, rc
    assert rc["moved_bytes"] == want and rc["kept_bytes"] > 0, (rc["moved_bytes"], want, rc["kept_bytes"])
# The change's save (docs/elastic.md "Durability"): written behind the next step from the moved state ("async"),
# committed then on the survivors' disks; before the move ("sync", said why) when the state is restored or
# the last committed step has a file only the leaver holds ($SYNC_WHY).
sync_why = sys.argv[9] or ("the state is not moved" if sys.argv[8] else "")
# "committed": step 3 committed at the change (the agent records the change saved from it); not with "async",
# nor when the sync save failed ($UNSAVED: step 3's directory on a node is a file)
unsaved = bool(os.environ.get("UNSAVED"))
assert rc["committed"] == (rc["save"] == "sync" and not unsaved), rc
if unsaved:
    ck3 = [o for o in lines if o.get("event") == "checkpoint" and o["step"] == 3]
    assert len(ck3) == 1 and not ck3[0]["ok"], ck3
if sync_why:
    assert rc["save"] == "sync" and sync_why in rc.get("save_sync_why", ""), rc
    assert any("the step is saved before the move, not written behind" in out[j] for j in range(3)), "said"
else:
    assert rc["save"] == "async" and "save_sync_why" not in rc, rc
    for n in [f"n{j}" for j in stay] if old != "pp3-n0" else ["n0"]:  # the survivors' nodes: step 3 committed
        assert os.path.exists(f"{d}/root/{n}/step-00000003/manifest.json"), f"step 3 not committed on {n}"
    # the snapshot buffer: without --ckpt-every (no periodic save) returned once step 3 commits, else held
    ck3 = [o for o in lines if o.get("event") == "checkpoint" and o["step"] == 3 and o.get("async")]
    assert len(ck3) == 1 and ck3[0]["snapshot_kept"] == ("--ckpt-every" in sys.argv[10]), ck3
    # with --ckpt-every and AH_CKPT_SNAPSHOT_KEEP=1, rank 0's buffer of step 2 kept across the change (the same
    # layout): no second allocation; the CPU backend's default (ppmem: the variable empty) allocates it again
    keep = os.environ.get("AH_CKPT_SNAPSHOT_KEEP") == "1" or "--ckpt-every" not in sys.argv[10]
    assert ck3[0]["snapshot_allocs"] == (1 if keep else 2), ck3
print(f"  {c}: job {leaver} left at step 3 (mpirun status {st[leaver]}), jobs {stay} kept pids "
      f"{rc['pids']}, 8 losses bit-identical (3 of {old}, 5 of {plan} resumed); save {rc['save']}, state {rc['state']}, "
      f"{rc['moved_bytes']} bytes moved, {rc['kept_bytes']} kept; phases {secs}")
PY
        { tail -n 20 "$d"/job*.out >&2; fail "$c: in place"; }
}
# --ckpt-every 2: step 2 committed (on every disk: dp3 replicates it), so step 3 is written behind the next step.
# The snapshot buffer is kept across the change (AH_CKPT_SNAPSHOT_KEEP=1: on the CPU backend not by default)
export AH_CKPT_SNAPSHOT_KEEP=1
FLAGS="--ckpt-every 2 --keep 10" inplace leave 2 dp2-01
inplace kill 0 dp2-12 "phase=reconfig-split,step=3,action=kill"
# "ranks": the survivors renumbered as the new plan's ranks (job 2 on n2 is its rank 0, job 0 on n0 its rank 1),
# not kept in the world's order: the reconfigure event's pids are job 2's, then job 0's. With --ckpt-sync step 3 is
# saved before the move, and that save fails (a file where the leaver's n1/step-00000003 goes): the event says
# step 3 is not committed ("committed" false), the move goes on, the losses the same.
mkdir -p "$WORK/renumber/root/n1" && echo x >"$WORK/renumber/root/n1/step-00000003"
UNSAVED=1 FLAGS=--ckpt-sync SYNC_WHY=--ckpt-sync inplace renumber 1 dp2-20 "" 1,-1,0
# Layers that change process: pp3 -> pp2 (job 2 leaves; job 1 gets block 3 and the head from the leaver and
# the tied embedding from job 0); pp3 -> tp2 (every block split in two: job 0 gets block 2 from job 1, block 3
# and the head from the leaver; job 1 the embedding and blocks 0-1 from job 0, block 3 and the head from the
# leaver). Without the move, pp3 -> pp2 fails here: block 3 is on the leaver's disk only (no --replica-memory-gb),
# and the survivors' restore refuses step 0 (what the fallback case below would say for it). Then the move
# refused on the leaver (AH_TEST_HOOK phase reconfig-move, action=fail: a rank that cannot take part), dp3 ->
# dp2: the state restored from the checkpoint just saved, said, the losses the same; and a leaver that cannot
# map a send buffer (action=nomem).
# pp3 -> pp2 with step 2 committed (--ckpt-every 2): block 3 and the head of step 2 are on the leaver's disk only,
# so step 3 is saved before the move (a kill before its commit would find no step the survivors restore), said.
OLD=pp3 MOVED="block-003.tp1-0 head.tp1-0 embed.tp1-0" FLAGS="--ckpt-every 2 --keep 10" \
    SYNC_WHY="has a file only the leaving nodes hold" inplace pp 2 pp2-01
# The same with --replica-memory-gb: step 2's files of the leaver are also in a staying host's memory (its replica
# partner's), so step 3 is written behind ("async"), the losses the same; the snapshot buffer not kept (the CPU
# backend's default, AH_CKPT_SNAPSHOT_KEEP empty).
AH_CKPT_SNAPSHOT_KEEP= OLD=pp3 MOVED="block-003.tp1-0 head.tp1-0 embed.tp1-0" \
    FLAGS="--ckpt-every 2 --keep 10 --replica-memory-gb 1 --replica-root $WORK/ppmem.mem" inplace ppmem 2 pp2-01
# The same with a cloud (--cloud, moto here): step 2 complete in the cloud survives the leaver (its upload, handed
# off at step 2's commit at the change, waited for), so step 3 is written behind. Before, the cloud was not counted
# as a holder: saved before the move ("has a file only the leaving nodes hold").
if command -v moto_server >/dev/null; then
    start_moto
    trap 'kill $MOTO $SERVER 2>/dev/null; wait $MOTO 2>/dev/null; rm -rf "$WORK"' EXIT
    OLD=pp3 MOVED="block-003.tp1-0 head.tp1-0 embed.tp1-0" \
        FLAGS="--ckpt-every 2 --keep 10 --cloud s3://ckpt/ppcloud --s3-endpoint $EP" inplace ppcloud 2 pp2-01
else
    echo "  ppcloud: skipped (no moto_server)"
fi
OLD=pp3-n0 MOVED="block-002.tp1-0 block-003.tp1-0 head.tp1-0 embed.tp1-0 block-000.tp1-0 block-001.tp1-0 \
block-003.tp1-0 head.tp1-0" inplace tp 2 tp2-n0
RESTORED="test hook: this rank takes no part in the move" inplace fallback 2 dp2-01 \
    "phase=reconfig-move,step=3,action=fail"
# A rank whose buffer for a piece it sends cannot be mapped (action=nomem: the leaver of pp3-n0 -> tp2-n0, which
# sends block 3 and the head; as a map under RLIMIT_AS that fails): every rank maps and packs its buffers before
# the agreement that starts the exchange, so the change falls back to the restore, said, the losses the same.
# Before, the buffers were mapped while the messages were posted: the leaver stopped posting, its peers waited
# for its messages for ever, and run_jobs' timeout killed the three.
OLD=pp3-n0 RESTORED="no host memory for" inplace nomem 2 tp2-n0 "phase=reconfig-move,step=3,action=nomem"
# park_jobs CASE NEXT: job 0 (2 ranks, world ranks 0 and 1) and job 1 (1 rank) train dp3, job 0's rank 1 parked at
# step 3 (the first request: "ranks" [0, -1, 1] under dp2-01, "leave" []); NEXT, the second request, is written while
# job 1's rank is held mid-step 5 by the test hook (action=pause), so it is taken at step 6; each mpirun's status in
# CASE/stJ, each rank's pid in CASE/pidJ-R.
park_jobs() {
    local d=$WORK/$1 next=$2 job np p0 p1
    mkdir -p "$d/join" "$d/run"
    printf '{"step": 3, "leave": [], "plan": "%s", "ranks": [0, -1, 1]}\n' "$WORK/dp2-01.json" >"$d/run/reconfigure.json"
    for job in 1 0; do
        np=$((2 - job))
        AH_JOB=$job AH_TEST_HOOK=$([ $job = 1 ] && echo "phase=step,step=5,action=pause,file=$d/held") \
            AH_WORLD_JOIN=$d/join:$job:2 timeout 180 $MPIRUN --ompi-server "file:$WORK/uri" -x AH_JOB -x AH_TEST_HOOK \
            -x AH_WORLD_JOIN -np $np bash -c "echo \$\$ >$d/pid\$AH_JOB-\$OMPI_COMM_WORLD_RANK; exec \
            $(train dp3 $1/ip --local-root "$d/root" --run-dir "$d/run")" >"$d/job$job.out" 2>&1 &
        eval "p$job=\$!"
    done
    for _ in $(seq 1800); do [ -e "$d/held" ] && break; kill -0 "$p1" 2>/dev/null || break; sleep 0.1; done
    echo "$next" >"$d/run/next.json"
    mv "$d/run/next.json" "$d/run/reconfigure.json"
    rm -f "$d/held"
    wait "$p1"; echo $? >"$d/st1"
    wait "$p0"; echo $? >"$d/st0"
}
# park (docs/elastic.md "Parked ranks"): a host's job keeps some of its ranks. Job 0 runs 2 ranks (world ranks 0
# and 1, one host's), job 1 one (rank 2); at step 3 "ranks" [0, -1, 1] ("leave" []) keeps job 0's rank 0 and job 1's
# under dp2-01, and job 0's rank 1 parks: it hands over its state in the move, leaves the world, frees its trainer and
# waits asleep until its job ends. At step 6 job 0 leaves (its host goes: a second request, written while job 1's
# rank is held mid-step 5 by the test hook, action=pause) and job 1 trains steps 6-7 alone under dp1-1: the parked
# rank ends with its job. Checked: both mpiruns exit 0; the survivors' pids are the ones started; the losses of
# steps 0-5 bit-identical (3 of dp3, 3 of dp2-01 resumed from step 3); 8 steps trained, on 3, 2 and 1 ranks; the
# parked process said it parked and, at its job's end, how long and its CPU seconds meanwhile (every thread's: under
# 2 % of the wait plus 20 ms), and is gone.
park_case() {
    local d=$WORK/park
    park_jobs park "{\"step\": 6, \"leave\": [0], \"plan\": \"$WORK/dp1-1.json\"}"
    python3 - "$WORK" <<'PY2' || { tail -n 20 "$d"/job*.out >&2; fail "park: a host's job keeps 1 of its 2 ranks"; }
import json, os, re, sys
work = sys.argv[1]
d = f"{work}/park"
st = {j: int(open(f"{d}/st{j}").read()) for j in (0, 1)}
out = {j: open(f"{d}/job{j}.out").read() for j in (0, 1)}
pid = {k: int(open(f"{d}/pid{k}").read()) for k in ("0-0", "0-1", "1-0")}
assert st == {0: 0, 1: 0}, (st, out)
m = re.search(r"job 0 \(pid (\d+)\) parks at step 3", out[0])
assert m and int(m.group(1)) == pid["0-1"], out[0]
assert f"job 0 (pid {pid['0-0']}) leaves at step 6" in out[0], out[0]
m = re.search(r"pid (\d+) parked ([0-9.]+) s \(CPU ([0-9.]+) s\): its job ends", out[0])
assert m and int(m.group(1)) == pid["0-1"], out[0]
wait, cpu = float(m.group(2)), float(m.group(3))
assert wait > 0 and cpu <= 0.02 * wait + 0.02, f"parked {wait} s with {cpu} s of CPU: not idle"
assert not os.path.exists(f"/proc/{pid['0-1']}"), "the parked process is still there"
lines = [json.loads(l) for l in open(f"{d}/ip.jsonl")]
rc = [o for o in lines if o.get("event") == "reconfigure"]
assert len(rc) == 2 and rc[0]["step"] == 3 and rc[0]["ranks_from"] == 3 and rc[0]["ranks_to"] == 2, rc
assert rc[0]["pids"] == [pid["0-0"], pid["1-0"]] and rc[0]["state"] == "moved", rc[0]
assert rc[1]["step"] == 6 and rc[1]["leave"] == [0] and rc[1]["pids"] == [pid["1-0"]], rc[1]
steps = [o for o in lines if "event" not in o]
assert [o["step"] for o in steps] == list(range(8)), [o["step"] for o in steps]
assert [len(o["memory_high_bytes"]) for o in steps] == [3] * 3 + [2] * 3 + [1] * 2
ref = {o["step"]: o["loss"] for f in ("ref-dp3", "ref-dp2-01") for o in map(json.loads, open(f"{work}/{f}.jsonl"))
       if "event" not in o and (f == "ref-dp3") == (o["step"] < 3)}
for o in steps[:6]:
    assert o["loss"] == ref[o["step"]], f"step {o['step']}: {o['loss']!r} vs {ref[o['step']]!r}"
print(f"  park: job 0's rank 1 (pid {pid['0-1']}) parked at step 3 for {wait:.3f} s, CPU {cpu:.3f} s, ended with its "
      f"job at step 6 (job 0 left, job 1 on alone); pids kept {rc[0]['pids']}; losses 0-5 bit-identical (3 of dp3, "
      f"3 of dp2-01 resumed)")
PY2
}
park_case
# readmit (docs/elastic.md "Parked ranks", re-admission): as park to step 6, where the second request takes job 0's
# parked rank 1 back ("readmit": [{"job": 0, "rank": 1, "to": 2}], "ranks" [0, 1]) and the three train dp3 again
# to step 7: the parked process is woken by job 0's rank 0 over their mpirun's own communicator, merged into the
# world and sent its pieces of step 6 by the staying ranks, as a joining rank is (the move to the joiners).
# Case readjoin: the same request with "join": 1 (job 2, started with the others, AH_WORLD_RANKS=3) under dp4: the
# parked rank back first, then job 2 admitted by the four (a host back whose job's parked rank comes back too).
# Checked: every mpirun exits 0; no process started but the joining job's, the event's pids those started ([0-0,
# 1-0, 0-1(, 2-0)]); the parked process said it was re-admitted; 8 steps on 3, 2, then 3 (4) ranks, every loss
# bit-identical (dp3 0-2, dp2-01 resumed from step 3 for 3-5, dp3 (dp4) resumed from dp2-01's step-6 checkpoint
# for 6-7).
# readmit_case CASE PLAN JOIN: the request at step 6 under PLAN, JOIN 1 with job 2 joining.
readmit_case() {
    local c=$1 plan=$2 join=$3 d=$WORK/$1 p2=
    rm -rf "$WORK/r-$c" && cp -r "$WORK/r-dp2-01" "$WORK/r-$c" && rm -rf "$WORK"/r-$c/*/step-00000008
    timeout 120 $MPIRUN -np $((3 + join)) $(train $plan ref-$c --resume --local-root "$WORK/r-$c") \
        >"$WORK/ref-$c.out" 2>&1 || { cat "$WORK/ref-$c.out" >&2; fail "$plan resumed from dp2-01's step 6"; }
    if [ "$join" = 1 ]; then
        mkdir -p "$d/run"
        AH_JOB=2 AH_WORLD_JOIN=$d/join:2:3 AH_WORLD_RANKS=3 AH_JOIN_WAIT_S=90 timeout 180 $MPIRUN --ompi-server \
            "file:$WORK/uri" -x AH_JOB -x AH_WORLD_JOIN -x AH_WORLD_RANKS -x AH_JOIN_WAIT_S -np 1 bash -c "echo \$\$ \
            >$d/pid2-0; exec $(train dp3 $c/ip --local-root "$d/root" --run-dir "$d/run")" >"$d/job2.out" 2>&1 &
        p2=$!
    fi
    park_jobs $c "{\"step\": 6, \"leave\": [], \"plan\": \"$WORK/$plan.json\", \"ranks\": [0, 1], \"join\": $join, \
\"readmit\": [{\"job\": 0, \"rank\": 1, \"to\": 2}]}"
    if [ -n "$p2" ]; then wait "$p2"; echo $? >"$d/st2"; fi
    python3 - "$WORK" "$c" "$join" <<'PY2' || { tail -n 20 "$d"/job*.out >&2; fail "$c: a parked rank taken back"; }
import json, re, sys
work, c, join = sys.argv[1], sys.argv[2], int(sys.argv[3])
d = f"{work}/{c}"
jobs = (0, 1, 2) if join else (0, 1)
st = {j: int(open(f"{d}/st{j}").read()) for j in jobs}
out = {j: open(f"{d}/job{j}.out").read() for j in jobs}
pid = {k: int(open(f"{d}/pid{k}").read()) for k in ("0-0", "0-1", "1-0", "2-0")[:3 + join]}
assert st == {j: 0 for j in jobs}, (st, out)
assert f"job 0 (pid {pid['0-1']}) parks at step 3" in out[0], out[0]
m = re.search(r"job 0 \(pid (\d+)\) parked ([0-9.]+) s \(CPU ([0-9.]+) s\): re-admitted at step 6 as rank 2", out[0])
assert m and int(m.group(1)) == pid["0-1"], out[0]
lines = [json.loads(l) for l in open(f"{d}/ip.jsonl")]
rc = [o for o in lines if o.get("event") == "reconfigure"]
assert len(rc) == 2 and rc[0]["step"] == 3 and rc[0]["ranks_to"] == 2, rc
assert rc[1]["step"] == 6 and rc[1]["ranks_from"] == 2 and rc[1]["ranks_to"] == 3 + join and rc[1]["readmit"] == 1, rc[1]
assert rc[1]["join"] == join and rc[1]["pids"] == list(pid[k] for k in ("0-0", "1-0", "0-1", "2-0")[:3 + join]), rc[1]
assert rc[1]["state"] == "moved", rc[1]
steps = [o for o in lines if "event" not in o]
assert [o["step"] for o in steps] == list(range(8)), [o["step"] for o in steps]
assert [len(o["memory_high_bytes"]) for o in steps] == [3] * 3 + [2] * 3 + [3 + join] * 2
ref = {}
for f, lo, hi in (("ref-dp3", 0, 3), ("ref-dp2-01", 3, 6), (f"ref-{c}", 6, 8)):
    ref.update({o["step"]: o["loss"] for o in map(json.loads, open(f"{work}/{f}.jsonl")) if "event" not in o and
                lo <= o["step"] < hi})
for o in steps:
    assert o["loss"] == ref[o["step"]], f"step {o['step']}: {o['loss']!r} vs {ref[o['step']]!r}"
print(f"  {c}: job 0's rank 1 (pid {pid['0-1']}) parked at step 3 for {float(m.group(2)):.3f} s (CPU "
      f"{float(m.group(3)):.3f} s), re-admitted at step 6{' with job 2 joining' if join else ''} (moved "
      f"{rc[1]['moved_bytes']} bytes; phases {rc[1]['seconds']}); pids {rc[1]['pids']}; losses 0-7 bit-identical")
PY2
}
readmit_case readmit dp3 0
readmit_case readjoin dp4 1
# A kill in the window (docs/elastic.md "Durability" (c)): dp3 -> dp2 with step 2 committed, step 3 written behind;
# job 0 (a survivor, the new world's rank 0) SIGKILLs itself on its writer's thread once its part of step 3 is
# written (AH_TEST_HOOK ckpt-write, action=kill), before the commit: Open MPI ends job 1 with it. Step 3 is then
# committed nowhere, step 2 is intact on the survivors' disks, and with the leaver's disk gone the survivors'
# plan resumes from step 2: the steps trained since (2, and 3 when its line came out) are redone, counted, and
# every loss is the reference's (1e-4 relative: step 2 retrained under dp2, not dp3).
# window CASE OLD NEW [FLAGS...]: that kill under OLD -> NEW (the leaver job 2, on n2), FLAGS the trainers' too;
# with --replica-root R the leaver's memory root R/n2 is removed with its disk.
window() {
    local c=$1 old=$2 new=$3 d=$WORK/$1
    shift 3
    local mem=$(echo "$@" | sed -n 's/.*--replica-root \([^ ]*\).*/\1/p')
    mkdir -p "$d/join" "$d/run"
    printf '{"step": 3, "leave": [2], "plan": "%s"}\n' "$WORK/$new.json" >"$d/run/reconfigure.json"
    # Job 0's writer stops in step 3's write behind (the hook's file); job 0's process is killed there (SIGKILL, as
    # an OOM kill) once the "reconfigure" event is written too (the writer can get there first: killed then, the
    # event was never written). Job 1's process, left waiting for job 0 in the joined world, is killed once job 0's
    # is gone (as the agent ends a launch whose job failed): by its pid, written before the trainer starts.
    (for i in $(seq 1200); do
        [ -s "$d/pid0" ] && [ -e "$d/hook" ] && grep -qs '"reconfigure"' "$d/ip.jsonl" && kill -9 "$(cat "$d/pid0")" 2>/dev/null
        [ -s "$d/pid0" ] && [ -s "$d/pid1" ] && ! kill -0 "$(cat "$d/pid0")" 2>/dev/null &&
            { kill -9 "$(cat "$d/pid1")" 2>/dev/null; break; }
        sleep 0.1
    done) &
    local watch=$!
    local t0=$SECONDS
    HOOK_JOB=0 run_jobs "$d" 2 "phase=ckpt-write,step=3,file=$d/hook" bash -c "echo \$\$ >$d/pid\$AH_JOB; exec \
        $(train $old $c/ip --local-root "$d/root" --run-dir "$d/run" --ckpt-every 2 --keep 10 "$@")"
    kill "$watch" 2>/dev/null; wait "$watch" 2>/dev/null
    [ "$(cat "$d/st0")" = 137 ] || { tail -n 20 "$d"/job*.out >&2; fail "$c: job 0 not killed at the hook"; }
    [ "$(cat "$d/st1")" != 0 ] || fail "$c: job 1 went on without job 0"
    ! ls "$d"/root/*/step-00000003/manifest.json 2>/dev/null || fail "$c: step 3 committed despite the kill"
    echo "  $c: the three jobs ended in $((SECONDS - t0)) s (job 0: $(cat "$d/st0"), job 1: $(cat "$d/st1"))"
    rm -rf "$d/root/n2" ${mem:+"$mem/n2"} # the leaver's disk (and host memory) gone with it
    timeout 120 $MPIRUN -np 2 $(train $new $c/re --resume --local-root "$d/root" "$@") >"$d/re.out" 2>&1 ||
        { cat "$d/re.out" >&2; fail "$c: the survivors' plan does not resume"; }
    python3 - "$WORK" "$c" "$old" "$new" "$mem" <<'PY' || fail "$c: the resume"
import json, sys
w, c, old, new, mem = sys.argv[1:6]
ip = [json.loads(l) for l in open(f"{w}/{c}/ip.jsonl")]
re = [json.loads(l) for l in open(f"{w}/{c}/re.jsonl")]
rc = [o for o in ip if o.get("event") == "reconfigure"]
assert len(rc) == 1 and rc[0]["save"] == "async", rc
rec = [o for o in re if o.get("event") == "recover"]
assert rec and rec[0]["step"] == 2 and rec[0]["found"], rec
assert not mem or rec[0]["files"]["memory"] > 0, rec  # the leaver's pieces of step 2 from a staying host's memory
trained = [o["step"] for o in ip if "event" not in o]
again = [o["step"] for o in re if "event" not in o]
assert again == list(range(2, 8)), again
redo = [s for s in trained if s >= 2]
ref = {o["step"]: o["loss"] for f in (f"ref-{old}", f"ref-{new}") for o in map(json.loads, open(f"{w}/{f}.jsonl"))
       if "event" not in o and (f == f"ref-{old}") == (o["step"] < 3)}
for o in (o for o in re if "event" not in o):
    assert abs(o["loss"] - ref[o["step"]]) <= 1e-4 * abs(ref[o["step"]]), (o["step"], o["loss"], ref[o["step"]])
print(f"  {c}: killed in step 3's write behind (trained {trained}): resumed from step 2 (files {rec[0]['files']}), "
      f"{len(redo)} step(s) redone {redo}, 6 losses within 1e-4 of the reference")
PY
}
window window dp3 dp2-01
# The same under pp3 -> pp2 with step 2's leaver-only pieces in a staying host's memory (case ppmem above): step 3
# is written behind, and after the kill and the leaver's disk and memory removed, step 2 resumes, those from memory.
window winmem pp3 pp2-01 --replica-memory-gb 1 --replica-root "$WORK/winmem.mem"
# Requests that cannot be carried out are not taken, each said once before anything is saved or torn down,
# and the three train on to the end: a job not in the world; a plan that cannot be read; a run without
# --local-root (no step to resume in place; before, the leaver left and the others failed on --resume); a
# plan of another seq_len; a "ranks" that keeps a leaving job's rank.
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
    [ "$(grep -c '^{"event":"reconfigure_refused","step":3,"why":' "$WORK/$c/ip.jsonl")" = 1 ] || # the agent's at once
        { grep reconfigure "$WORK/$c/ip.jsonl" >&2; fail "$c: no reconfigure_refused event for step 3, once"; }
    same_losses ref-dp3 $c/ip
}
refused bad 5 "$WORK/dp2-01.json" "job 5 is not in the world" --local-root "$WORK/bad/root"
refused noplan 2 "$WORK/nope.json" "$WORK/nope.json.*" --local-root "$WORK/noplan/root"
refused noroot 2 "$WORK/dp2-01.json" "the run has no --local-root"
# A plan of another seq_len: the data position counts samples of seq_len + 1 tokens, so the restore refuses
# it (ckpt_resume.c) and the move, which reads no manifest, is refused the same before anything is saved.
python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); d["train"]["seq_len"] = 16; json.dump(d, open(sys.argv[2], "w"))' \
    "$WORK/dp2-01.json" "$WORK/dp2-01-t16.json"
refused seqlen 2 "$WORK/dp2-01-t16.json" "step 3 was saved with seq_len 32 but the plan trains seq_len 16" \
    --local-root "$WORK/seqlen/root"
RANKS=0,1,-1 refused ranks 1 "$WORK/dp2-20.json" '"ranks"\[1\] is 1 but rank 1.s job 1 leaves (-1)' \
    --local-root "$WORK/ranks/root"
echo "PASS"
