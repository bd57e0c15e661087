# Shared by tests/test_agent*.sh, tests/test_nothing_lost*.sh and the many-hosts tests (sourced
# after train_common.sh): running the agent on the emulated cluster, and the checks of its merged
# metrics.
STEPS=${STEPS:-16}
CKPT_EVERY=${CKPT_EVERY:-2}
GB=8
SEQ=64
CLUSTER=${CLUSTER:-cpu-hetero}

# cpu-hetero with one device per node (3 ranks start faster than 6 on a shared 2-core machine);
# the plan is [fast-0] + [slow-0 > slow-1], so losing slow-1 changes the pipelines.
small_cluster() {
    cat >"$WORK/cpu-hetero-3.json" <<'JSON'
{"gpu_types": {
  "cpu-fast": {"tflops": {"bf16": 0.05, "fp16": 0.05, "fp32": 0.05}, "mem_bw_gb_s": 10, "intra_node_gb_s": 5,
               "emulate": {"slowdown": 1, "memory_mib": 160}},
  "cpu-slow": {"tflops": {"bf16": 0.016666666666666666, "fp16": 0.016666666666666666, "fp32": 0.016666666666666666},
               "mem_bw_gb_s": 3.3333333333333335, "intra_node_gb_s": 5, "emulate": {"slowdown": 3, "memory_mib": 512}}},
 "nodes": [{"name": "fast-0", "gpu": "cpu-fast", "count": 1, "usd_per_gpu_hour": 0.3},
           {"name": "slow-0", "gpu": "cpu-slow", "count": 1, "spot": true, "usd_per_gpu_hour": 0.1},
           {"name": "slow-1", "gpu": "cpu-slow", "count": 1, "spot": true, "usd_per_gpu_hour": 0.1}],
 "network": {"inter_node_gb_s": 1, "cloud_gb_s": 0.1}}
JSON
    CLUSTER=$WORK/cpu-hetero-3.json
}

# run_agent DIR [autohet run flags...]: tiny-gpt2 on $CLUSTER; output in DIR.log. A flag is given
# once (autohet refuses a repeated one): DATA=FILE and CKPT_EVERY=K set those two for one call.
run_agent() {
    local dir=$1
    shift
    "$AUTOHET" run --model tiny-gpt2 --cluster "$CLUSTER" --data "${DATA:-$WORK/text.bin}" --global-batch $GB \
        --seq-len $SEQ --steps "$STEPS" --ckpt-every "$CKPT_EVERY" --work-dir "$dir" --quiet "$@" \
        >"$dir.log" 2>&1
}

# Seconds from the agent's start to launch 0's first finished step, and the whole run, from a log.
first_step_s() { sed -n 's/^autohet run: \[ *\([0-9.]*\) s\] launch 0: first step.*/\1/p' "$1" | head -1; }
wall_s() { python3 -c 'import json,sys; print([json.loads(l) for l in open(sys.argv[1])][-1]["wall_s"])' "$1"; }

# check_metrics DIR REF_DIR: the merged metrics of the run in DIR against an uninterrupted
# reference run in REF_DIR:
#  - the step sequence, with each launch's first step taken as where it resumed (steps from there
#    on before it were lost work, redone): every step 0..STEPS-1 exactly once in the final history,
#    each with the full batch's tokens, no launch starting past the history (a skip);
#  - every loss of the final history vs the reference's loss of the same step: bit-exact while
#    every launch so far ran the reference's plan, within 1e-4 relative from the first launch with
#    another plan on, or from the first change in place (--in-place: a "reconfigure" event) on;
#  - one preempt and one recover event per relaunch, and one of each per change in place, recovery
#    seconds > 0, resumed step <= stopped.
# Prints "launches=N exact=E close=C maxrel=R resumed=... in_place=K".
check_metrics() {
    python3 - "$1" "$2" "$STEPS" $((GB * SEQ)) <<'EOF'
import json, os, sys
d, ref_dir, steps, tps = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
lines = [json.loads(l) for l in open(os.path.join(d, "metrics.jsonl"))]
ref = {x["step"]: x["loss"] for x in map(json.loads, open(os.path.join(ref_dir, "metrics.jsonl"))) if "event" not in x}
assert len(ref) == steps, f"reference has {len(ref)} steps"
def key(k, where=d):
    p = json.load(open(os.path.join(where, f"plan-{k}.json")))
    return json.dumps([p["tp"], p["pipelines"], p["train"]], sort_keys=True)
hist, first_of = [], {}
for x in lines:
    if "event" in x:
        continue
    k, s = x["launch"], x["step"]
    if k not in first_of:
        first_of[k] = s
        assert s <= len(hist), f"launch {k} starts at step {s}, history has {len(hist)}: samples skipped"
        hist = hist[:s]
    assert s == len(hist), f"launch {k}: step {s} after step {len(hist) - 1} (skipped or repeated)"
    assert x["tokens"] == tps, f"step {s}: {x['tokens']} tokens, expected {tps}"
    hist.append((s, x["loss"], k))
assert len(hist) == steps, f"final history has {len(hist)} of {steps} steps"
launches = max(k for _, _, k in hist) + 1
changed = min([x["step"] for x in lines if x.get("event") == "reconfigure"], default=steps)
exact_upto = 0
while exact_upto < launches and key(exact_upto) == key(0, ref_dir):
    exact_upto += 1
exact = close = 0
maxrel = 0.0
for s, loss, k in hist:
    r = ref[s]
    if k < exact_upto and s < changed:
        assert loss == r, f"step {s} (launch {k}, same plan throughout): loss {loss!r} != reference {r!r}"
        exact += 1
    else:
        rel = abs(loss - r) / abs(r)
        maxrel = max(maxrel, rel)
        assert rel <= 1e-4, f"step {s} (launch {k}): loss {loss} vs reference {r}, rel {rel:.2e}"
        close += 1
ev = [x for x in lines if "event" in x]
pre = [x for x in ev if x["event"] == "preempt"]
rec = [x for x in ev if x["event"] == "recover"]
inp = len([x for x in pre if x.get("in_place")])
assert len(pre) - inp == launches - 1, f"{len(pre) - inp} preempt events (not in place) for {launches} launches"
assert len([x for x in rec if x.get("in_place")]) == inp, f"{inp} changes in place, recover events {rec}"
assert len(rec) == launches - 1 + inp, f"{len(rec)} recover events for {launches} launches and {inp} in place"
cut = sum(len(p.get("interrupted_writes", [])) for p in pre)
for p in pre:
    assert p.get("committed_intact", True), f"a kill damaged a committed step: {p}"
for p, r in zip(pre, rec):
    assert r["seconds"] > 0 and r["step"] <= p["step"], f"recover {r} after preempt {p}"
    bd = r["breakdown"]
    parts = bd["stop_s"] + bd["replan_s"] + bd["startup_s"] + bd["transfer_s"] + bd["first_step_s"]
    assert abs(parts - r["seconds"]) < 0.05, f"breakdown {bd} does not add up to {r['seconds']}"
done = ev[-1]
assert done["event"] == "done" and done["ok"] and done["history_ok"], f"last event {done}"
print(f"launches={launches} exact={exact} close={close} maxrel={maxrel:.2e} "
      f"resumed={[r['step'] for r in rec]} stopped={[p['step'] for p in pre]} "
      f"saved={[p['saved'] for p in pre]} forced={[p['forced'] for p in pre]} writes_cut={cut} in_place={inp}")
EOF
}

# reference DIR: an uninterrupted agent run (no events); its metrics are the oracle.
reference() {
    run_agent "$1" || { cat "$1.log"; fail "reference run"; }
}

# seed_case SEED REF_DIR [more autohet run flags]: one preemption of slow-1 at a random time
# (uniform from just before launch 0's first step to 60% of the reference run), a grace period
# by seed (0: killed wherever it is, forward/backward or checkpoint write or upload; 5 s: saved at
# the notice; 20-300 ms: saved only if the last save's time fits) with a checkpoint every step
# when a kill is likely (so kills land in writes often), and for even seeds the node comes back
# 1 ms later (a replacement with an empty disk: the same plan again, so bit-exact).
seed_case() {
    local seed=$1 ref=$2
    shift 2
    local t0 tw
    t0=$(first_step_s "$ref.log")
    tw=$(wall_s "$ref/metrics.jsonl")
    local spec
    spec=$(python3 -c '
import random, sys
seed, t0, tw = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
r = random.Random(seed)
t = r.uniform(max(0.0, t0 - 0.3), t0 + 0.6 * (tw - t0))
grace = [0.0, 5.0, r.uniform(0.02, 0.3)][seed % 3]
every = [1, 3, 1][seed % 3]
print(int(t * 1000), f"{grace:.3f}", seed % 2 == 0, every)' "$seed" "$t0" "$tw")
    local t_ms grace back every
    read -r t_ms grace back every <<<"$spec"
    local dir=$WORK/seed-$seed try
    # The machine is shared: when this run was faster than the reference and ended before the
    # event, the same seed tries again with the event earlier.
    for try in 1 2 3 4 5; do
        # A try that ended early left checkpoints the next would resume: each try starts from an
        # empty work dir and, with a cloud tier, its own bucket prefix.
        rm -rf "$dir" "$dir.log"
        local args=() prev=
        for a in "$@"; do
            [ "$prev" = --cloud ] && a="$a-try$try"
            args+=("$a")
            prev=$a
        done
        {
            echo "$t_ms,remove,slow-1"
            [ "$back" = True ] && echo "$((t_ms + 1)),add,slow-1"
        } >"$dir.csv"
        CKPT_EVERY=$every run_agent "$dir" --events "$dir.csv" --grace-s "$grace" "${args[@]}" || { cat "$dir.log"; fail "seed $seed: autohet run"; }
        grep -q '"event":"preempt"' "$dir/metrics.jsonl" && break
        echo "seed $seed: the run ended before the preemption at $t_ms ms; again at $((t_ms * 6 / 10)) ms"
        t_ms=$((t_ms * 6 / 10))
    done
    grep -q '"event":"preempt"' "$dir/metrics.jsonl" || fail "seed $seed: no preemption happened"
    seed_try=$try # the try that counted (its cloud prefix ends -try$seed_try)
    local out
    out=$(check_metrics "$dir" "$ref") || { cat "$dir.log"; fail "seed $seed (preempt at $t_ms ms, grace $grace s, back $back)"; }
    # node back at once: the same plan again (bit-exact), unless with --in-place the trainers took the
    # change before the node's return made the agent fall back: the agent then adopts it (said; the
    # losses close after it; or the change came before the return: waited for as usual), or, when the
    # grace period was over first and the leaving ranks were killed, ignores it (said) and relaunches
    # (nothing lost, the losses close; docs/elastic.md says so)
    if [ "$back" = True ]; then
        if echo "$out" | grep -q "in_place=0$"; then
            echo "$out" | grep -q "close=0 " ||
                grep -q "a change in place at step [0-9]* that this agent did not wait for (the grace period was over" "$dir.log" ||
                fail "seed $seed: node back at once should keep the plan: $out"
        else
            grep -q "in place: \(the trainers took the change at step [0-9]* before the fallback withdrew it: adopted\|changed at step\)" \
                "$dir.log" || fail "seed $seed: node back at once, a change in place neither adopted nor waited for: $out"
        fi
    fi
    echo "seed $seed: preempt slow-1 at $t_ms ms, grace $grace s, checkpoint every $every, back at once $back: $out"
}

# recovered_from_survivors METRICS: the many-hosts tests' run with h2 preempted once: one recovery,
# with bytes from the survivors' own disks and none from the cloud, re-planned on h0 + h1.
recovered_from_survivors() {
    python3 - "$1" <<'PY'
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
rec = [x for x in ev if x.get("event") == "recover"]
assert len(rec) == 1, rec
b = rec[0]["bytes"]
assert b["local"] > 0 and b["cloud"] == 0, b
up = [x["nodes_up"] for x in ev if x.get("event") == "replan" and not x.get("in_place")]
assert up == [["h0", "h1"]], up
print(f"recovery: {b['local']} bytes from the survivors' own disks, {b['peer']} from a peer, none from the cloud")
PY
}

# ---- the many-hosts tests' hosts lost without notice (tests/cluster/cluster.sh sourced too) ----

# cluster_reference DIR: the uninterrupted run on this machine: the local launcher's mpirun flags
# and the ring all-reduce the ssh and slurm launchers ask for, so that the same plan sums in the
# same order (bit-exact losses).
cluster_reference() {
    run_agent "$1" --mpirun-args "-q --oversubscribe --bind-to none --mca mpi_yield_when_idle 1 --mca plm isolated \
-x OPENBLAS_NUM_THREADS=1 --mca coll_libnbc_iallreduce_algorithm 1" || { cat "$1.log"; fail "reference run"; }
}

# hosts_cluster: small_cluster's nodes named h0, h1, h2, as the test cluster's hosts (fast-0, slow-0,
# slow-1 in that order). Sets CLUSTER.
hosts_cluster() {
    small_cluster
    sed -e 's/fast-0/h0/; s/slow-0/h1/; s/slow-1/h2/' "$CLUSTER" >"$WORK/c3.json"
    CLUSTER=$WORK/c3.json
}

# h2_alone_cluster: small_cluster's nodes named h0, h1, h2, with devices of 3 MiB: the plan is one
# pipeline h1 > h2 > h0 and a block (1) is on h2 alone (checked), so a recovery without h2 needs
# the cloud for that block. Sets CLUSTER.
h2_alone_cluster() {
    hosts_cluster
    python3 - "$CLUSTER" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for t in d["gpu_types"].values():
    t["emulate"]["memory_mib"] = 3
json.dump(d, open(sys.argv[1], "w"))
PY
    "$AUTOHET" plan --model tiny-gpt2 --cluster "$CLUSTER" --global-batch $GB --seq-len $SEQ -o "$WORK/plan.json" \
        >/dev/null || fail "plan of the 3 MiB cluster"
    python3 - "$WORK/plan.json" <<'PY' || fail "the plan no longer puts a block on h2 alone"
import json, sys
p = json.load(open(sys.argv[1]))
on = {}
for pl in p["pipelines"]:
    for s in pl["stages"]:
        for b in range(*s["layers"]):
            on.setdefault(b, set()).update(d["node"] for d in s["devices"])
assert any(v == {"h2"} for v in on.values()), on
PY
}

# cluster_mpi_args [VAR...]: sets MPI_ARGS, the mpirun flags of a job across the test cluster:
# Open MPI's TCP and out-of-band traffic on the cluster's interface, idle ranks yielding, one BLAS
# thread, no leak check in the ranks (Open MPI's own at-exit leaks) and each VAR passed on to them.
cluster_mpi_args() {
    MPI_ARGS="--mca btl_tcp_if_include $CL_IFACE --mca oob_tcp_if_include $CL_IFACE --mca mpi_yield_when_idle 1"
    MPI_ARGS+=" -x OPENBLAS_NUM_THREADS=1 -x ASAN_OPTIONS=verify_asan_link_order=0:detect_leaks=0"
    local v
    for v in "$@"; do MPI_ARGS+=" -x $v"; done
}

# cluster_with_cloud [VAR...]: three emulated hosts at 1 Gbit/s, moto on the head node (cloud_up),
# and MPI_ARGS passing the cloud's credentials and each VAR on to the ranks.
cluster_with_cloud() {
    cluster_up 3 1000 || fail "cannot make the test cluster"
    cloud_up
    cluster_mpi_args AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_REGION "$@"
}

# ssh_agent NAME [autohet run flags...]: autohet run --launcher ssh on the head node, in the
# background: tiny-gpt2 on $CLUSTER for $STEPS steps, a save every $CKPT_EVERY, work directory
# $CL_DISK/work-NAME, checkpoints in $CL_DISK/ck-NAME (each host's own disk) and, once cloud_up ran,
# s3://ckpt/NAME; ssh through $RSH (default: the cluster's). The agent (no MPI in it) keeps ASan's
# leak checks, its ranks do not (MPI_ARGS). Sets agent, agent_log ($WORK/NAME.log) and WD.
ssh_agent() {
    local name=$1
    shift
    WD=$CL_DISK/work-$name
    agent_log=$WORK/$name.log
    cluster_head env ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=1" "$AUTOHET" run --model tiny-gpt2 \
        --cluster "$CLUSTER" --data "$WORK/text.bin" --global-batch $GB --seq-len $SEQ --steps "$STEPS" \
        --ckpt-every "$CKPT_EVERY" --work-dir "$WD" --quiet --launcher ssh --rsh-agent "${RSH:-$CL_RSH}" \
        --local-root "$CL_DISK/ck-$name" --mpirun-args "$(echo $MPI_ARGS)" \
        ${EP:+--cloud "s3://ckpt/$name" --s3-endpoint "$EP"} "$@" >"$agent_log" 2>&1 &
    agent=$!
}

# cloud_up: moto on the head node at EP (its address inside the cluster), bucket "ckpt"; the
# credentials exported.
cloud_up() {
    local head
    head=$(awk '$2 == "head" {print $1}' "$CL_DIR/hosts")
    cluster_head moto_server -H "$head" -p 5000 >"$WORK/moto.log" 2>&1 &
    EP=http://$head:5000
    export AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test AWS_REGION=us-east-1
    for _ in $(seq 300); do cluster_head curl -s "$EP" >/dev/null && break; sleep 0.1; done
    cluster_head curl -sf -X PUT "$EP/ckpt" >/dev/null || fail "cannot create the bucket on $EP"
}

# cloud_has PREFIX STEP NAME: the object is listed in s3://ckpt/PREFIX (moto refuses an unsigned
# GET, not a listing).
cloud_has() {
    local key=$1/step-$(printf %08d "$2")/$3
    cluster_head curl -s "$EP/ckpt?list-type=2&prefix=$key" | grep -q "<Key>$key</Key>"
}

# wait_for WHAT CMD...: until CMD succeeds while the agent ($agent, logging to $agent_log) runs, at
# most 60 s; otherwise the log and a failure naming WHAT (and $case, when set).
wait_for() {
    local what=$1 i
    shift
    for i in $(seq 1200); do
        "$@" && return 0
        kill -0 "$agent" 2>/dev/null || { cat "$agent_log"; fail "${case:+$case: }the agent ended before $what"; }
        sleep 0.05
    done
    cat "$agent_log"
    fail "${case:+$case: }no $what after 60 s"
}

# h2_lost_and_recovered METRICS [step=N] [cloud=yes|only] [back=add|answers] [t_lost=S]: a run
# where h2 vanished or hung without notice: the first stop is h2's, cause "host lost"; the
# re-plan is on h0 + h1; the recovery (from step N when given) read bytes from the survivors'
# disks (own or a peer's), and with cloud=yes from the cloud too (what only h2 held), with
# cloud=only from the cloud at least. back: h2 was planned back in at a later checkpoint (a
# second stop, cause "node joined", a re-plan on h0..h2): with add, after an add event (or the
# agent's own probe, whichever came first); with answers, with no event, because it answered
# again (a join event). t_lost: when h2 was lost, seconds since the agent started: the detection
# time is printed.
h2_lost_and_recovered() {
    python3 - "$@" <<'PY'
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
opt = dict(a.split("=", 1) for a in sys.argv[2:])
back = opt.get("back")
pre = [x for x in ev if x.get("event") == "preempt"]
rec = [x for x in ev if x.get("event") == "recover"]
assert len(pre) == 1 + bool(back) and pre[0]["cause"] == "host lost" and pre[0]["nodes"] == ["h2"], pre
assert not back or pre[1]["cause"] == "node joined", pre
join = [x for x in ev if x.get("event") == "join" and x.get("why") == "answers again"]
assert (len(join) == 1 if back == "answers" else back == "add" or not join), join
assert all(j["nodes"] == ["h2"] for j in join), join
assert len(rec) == len(pre), rec
b = rec[0]["bytes"]
assert rec[0]["step"] == int(opt["step"]) if "step" in opt else rec[0]["step"] > 0, rec[0]
assert opt.get("cloud") == "only" or b["local"] + b["peer"] > 0, f"nothing from the survivors' disks: {b}"
assert opt.get("cloud") not in ("yes", "only") or b["cloud"] > 0, f"nothing from the cloud, only h2 held a block: {b}"
up = [x["nodes_up"] for x in ev if x.get("event") == "replan" and not x.get("in_place")]
# a relaunch re-plans (a replan event); h2 taken back in place (the default) is a replan with "in_place"
relaunched = [p for p in pre if not p.get("in_place")]
assert up == [["h0", "h1"], ["h0", "h1", "h2"]][:len(relaunched)], (up, pre)
ip = [x for x in ev if x.get("event") == "replan" and x.get("in_place")]
assert len(ip) == len(pre) - len(relaunched), (ip, pre)
if "t_lost" in opt:
    print(f"detected {pre[0]['t_s'] - float(opt['t_lost']):.2f} s after h2 was lost")
print(f"recovery from step {rec[0]['step']}: {b['local']} bytes from the survivors' own disks, {b['peer']} from a "
      f"peer, {b['cloud']} from the cloud, {rec[0]['seconds']:.2f} s")
if back:
    print(f"h2 back ({'it answers again' if join else 'an add event'}): planned in at step {rec[1]['step']}, "
          f"{rec[1]['bytes']}")
PY
}

# h2_dies_and_restarts WD KEEP: the agent ($agent, log $agent_log, work directory WD) trains on
# h2_alone_cluster with --cloud s3://ckpt/r; once h2's step 4 is in the cloud and step 6 is trained,
# every process of h2 but those named in KEEP (an extended regex of process names: its daemons) is
# killed at once and h2's disk emptied, as a host that came straight back. Then: the run finishes with the
# reference's ($WORK/ref) losses, one restart said and in the metrics (cause "job failed", no node
# lost), and the recovery takes block 1, which h2 alone held, from the cloud and the rest from the
# survivors' disks (tests/test_cluster_restart.sh, test_cluster_slurm_restart.sh).
h2_dies_and_restarts() {
    local wd=$1 keep=$2 pids p n
    wait_for "h2's step 4 in the cloud" cloud_has r 4 manifest-h2.json
    steps_at_least() {
        n=$(grep -c '"step"' "$wd/metrics.jsonl" 2>/dev/null)
        [ "${n:-0}" -ge "$1" ]
    }
    wait_for "step 6 in the metrics" steps_at_least 7
    pids=$(for p in $(cl_pids_in h2); do
        [[ "$(cat /proc/$p/comm 2>/dev/null)" =~ ^($keep)$ ]] || echo "$p"
    done)
    [ -n "$pids" ] || fail "no process of h2 to kill"
    kill -KILL $pids 2>/dev/null
    rm -rf "${CL_DIR:?}/disks/h2/"*
    wait $agent || { cat "$agent_log"; fail "autohet run after h2's processes died"; }
    out=$(check_metrics "$wd" "$WORK/ref") || { cat "$agent_log"; fail "metrics: $out"; }
    echo "h2's processes killed, its disk wiped: $out"
    grep -q "the job failed at step [0-9]*: .*; restart 1 (--max-restarts 3" "$agent_log" ||
        { cat "$agent_log"; fail "the restart is not said"; }
    grep -q "host lost" "$agent_log" && { cat "$agent_log"; fail "h2 answered, yet it was counted lost"; }
    python3 - "$wd/metrics.jsonl" <<'PY' || { cat "$agent_log"; fail "the recovery"; }
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
pre = [x for x in ev if x.get("event") == "preempt"]
rec = [x for x in ev if x.get("event") == "recover"]
rs = [x for x in ev if x.get("event") == "restart"]
assert len(rs) == 1 and len(pre) == 1 and pre[0]["cause"] == "job failed" and pre[0]["nodes"] == [], (rs, pre)
assert len(rec) == 1 and rec[0]["cause"] == "job failed", rec
b = rec[0]["bytes"]
# block 1 lived on h2 alone and h2's disk is empty: the cloud serves it; the survivors' disks the rest,
# unless a loaded machine's cloud tier fell so far behind that the newest step it holds whole is one
# the survivors' retention (--keep) had already removed: then the cloud serves every file
assert b["cloud"] > 0, b
assert b["local"] > 0 or rec[0]["files"]["cloud"] == sum(rec[0]["files"].values()), rec[0]
print(f"restart at step {rs[0]['step']} ({rs[0]['cause'][:60]}); resumed at step {rec[0]['step']}: "
      f"local {b['local']} B, peer {b['peer']} B, cloud {b['cloud']} B")
PY
}

# rank_pids RUN_DIR NODE: the pids of NODE's ranks of a launch, from its rank-R.json files.
rank_pids() {
    python3 -c '
import glob, json, sys
print(" ".join(str(d["pid"]) for d in map(lambda f: json.load(open(f)), glob.glob(sys.argv[1] + "/rank-*.json"))
               if d["node"] == sys.argv[2]))' "$1" "$2"
}

# patience_s REF_DIR: how long a wait for part of a run may take on this machine now: the whole
# uninterrupted run in REF_DIR (its wall_s, measured in the same test), at least 30 s. A loaded
# machine lengthens both alike (fixed bounds of 10-30 s failed at load 20+ on 2 cores), and a wait
# for a few steps, or for a job to stop, never needs a whole run.
patience_s() { python3 -c 'import sys; print(max(30, int(float(sys.argv[1])) + 1))' "$(wall_s "$1/metrics.jsonl")"; }

# wait_until SECONDS CMD...: runs CMD every 50 ms until it succeeds (status 0) or SECONDS have passed
# (status 1).
wait_until() {
    local end=$((SECONDS + $1))
    shift
    until "$@"; do
        [ $SECONDS -ge $end ] && return 1
        sleep 0.05
    done
}

# step_lines_at_least N FILE: FILE (a trainer's metrics) holds N step lines or more.
step_lines_at_least() {
    local n
    n=$(grep -c '"loss"' "$2" 2>/dev/null)
    [ "${n:-0}" -ge "$1" ]
}
