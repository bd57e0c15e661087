#!/usr/bin/env bash
# Recovery time, local-first vs cloud-only (Varuna-like), one run after the other on the same set-up.
#
#   bash bench/bench_recovery.sh [BUILD_DIR]      (default build; build it Release:
#                                                  cmake -S . -B B -DCMAKE_BUILD_TYPE=Release)
#   CLOUD_GB_S=0.1 bash bench/bench_recovery.sh B  (the cloud cap; default 0.05, see below)
#   KEEP=DIR bash bench/bench_recovery.sh B        (keep the runs' work directories in DIR)
#   MEMORY=0 bash bench/bench_recovery.sh B        (without the third run, local-first with replicas)
#   SET=inplace bash bench/bench_recovery.sh B     (the relaunch against --in-place instead: below)
#   SET=partial bash bench/bench_recovery.sh B     (the same for a host that keeps some of its ranks: below)
#   SET=readmit bash bench/bench_recovery.sh B     (SET=partial, then the host back: a join that re-admits a parked rank)
#   SET=inplace BASE=B0 bash bench/bench_recovery.sh B  (and in place with B0's autohet too, side by side)
#
# Model: GPT-2 small's shape with a byte vocabulary (12 layers, 768 wide, 85.2M parameters); its
# state (fp32 weights + AdamW m, v) is 1.02 GB. Cluster: two one-device nodes, fast-0 on demand and
# spot-0 spot, 4 GiB each; inter-node 12.5 GB/s (100 Gb/s), so the planner makes them two
# data-parallel replicas and every shard is on both disks. Checkpoints every 2 steps on each
# node's disk and in an S3 store (moto_server on loopback). Each policy's run:
#   1. the agent starts training (global batch 2 x 16 tokens, one sequence per replica);
#   2. once the cloud holds a complete step (fast-0's manifest of a step is listed), the bench
#      appends "now,remove,spot-0" to the agent's events file: the preemption notice (grace 60 s);
#   3. the agent stops the job, drops spot-0's disk, re-plans (one device: fast-0) and relaunches:
#      local-first: at the notice the nodes save the current step when that takes less than
#                   redoing the steps since the last checkpoint; fast-0 restores the newest step
#                   from its own disk;
#      cloud-only:  no save at the notice and every disk is dropped (a restart on fresh machines):
#                   fast-0 restores the cloud's newest complete step (all 1.02 GB over the link);
#      memory:      local-first with --replica-memory-gb 4: the save at the notice is memory first
#                   (each node's pieces into its own host's memory, spot-0's replicated to fast-0's
#                   memory: committed there; then the disks), so the grace period covers only the
#                   snapshot and the replication (the notice's checkpoint event gives both). With a
#                   save every 2 steps the notice often saves nothing (redoing a step is cheaper),
#                   and the summary says so; bench/bench_notice_save.sh times the save itself;
#   4. once the recovery is measured (the agent's recover event), the bench interrupts the run.
# The cloud link: the cluster's network.cloud_gb_s caps every S3 transfer of a node. Default 0.05
# (50 MB/s per node): moto on this loaded 2-core machine serves GETs at well under 100 MB/s, so a
# 0.1 cap would time the server, not the link (the "cloud rate" column shows what was seen).
# Printed: each recovery's breakdown (stop = notice to exit incl. the step in progress and the
# save, re-plan, start-up, transfer by tier, first step), whether the notice brought a save, the
# step stopped at and resumed from, the cloud rate, and four ratios: the recovery time (the
# headline: from the old job's exit to the first finished step, i.e. the issue's detect + re-plan +
# relaunch + transfer + first step; the node is gone then), notice to the first finished step (the
# grace-period stop included: the step in progress and the save), the same without the first step,
# and the state restore alone (the trainer's resume); then the steps each policy must redo.
# SET=inplace (issue 36 "Survivors keep their processes"): no cloud; two runs, "relaunch" (the stop and
# relaunch, --no-in-place) and "in-place" (autohet run's default: one mpirun a node, and at the notice fast-0's rank
# changes to the one-device plan in its own process), the notice once launch 0 has trained 4 steps;
# printed: each recovery by phase, the in-place change's own phases, and relaunch / in place.
# SET=partial (docs/elastic.md "Parked ranks"): SET=inplace's two runs where the staying host keeps only some of its
# ranks: tiny-gpt2 (global batch 4, 64 tokens) on fast-0 (3 devices), slow-0 and fast-1 (spot); plan-0 is
# data-parallel over fast-0's 3 devices and fast-1's, the notice removes fast-1, and the next plan is fast-0:0 and
# fast-0:1: in place, fast-0's third rank parks (before parking: the stop and relaunch). Also printed: the parked
# rank's wait and its CPU seconds meanwhile.
# SET=readmit (docs/elastic.md "Parked ranks", re-admission): SET=partial's runs, then fast-1 back once the first
# recovery is in, with --join-horizon-s 1000000 so that the join rule takes plan-0's devices again: "relaunch"
# (--no-in-place) stops and relaunches at the join, "in-place" joins fast-1 in place and re-admits fast-0's parked
# rank in the same change. Printed: the join's recovery in each (cause join), by phase, and relaunch / in place.
# With BASE=B0 (another build's directory, e.g. main before a change), a third run "in-place-base" with B0's autohet,
# right before the in-place one, and base / this build: notice to the first step, the stop, the change's save.
# (SET=readmit: the second recovery, the join that re-admits the parked rank.)
# A benchmark: it never fails on a timing; it exits non-zero only when a run fails.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=$(cd "${1:-build}" && pwd)
AUTOHET=$BUILD/autohet
CLOUD_GB_S=${CLOUD_GB_S:-0.05}
WORK=${KEEP:-$(mktemp -d)}
mkdir -p "$WORK"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1

SET=${SET:-}
EVERY=2 # SET=inplace: 100, so that both runs save at the notice (redoing the steps since step 0 costs more)
STEPS_RUN=200 READMIT= # SET=readmit: SET=partial's, 2000 steps (the run goes on to the join)
[ "$SET" = readmit ] && SET=partial READMIT=1 STEPS_RUN=2000
[ "$SET" = inplace ] || [ "$SET" = partial ] && EVERY=100
MODEL=$WORK/model.json CLUSTER=$WORK/cluster.json GB=2 SEQ=16 SPOT=spot-0
MOTO=
AGENT=
cleanup() {
    [ -n "$AGENT" ] && kill -INT "$AGENT" 2>/dev/null && wait "$AGENT" 2>/dev/null
    [ -z "$MOTO" ] || { kill $MOTO 2>/dev/null; wait $MOTO 2>/dev/null; }
    [ -n "${KEEP:-}" ] || rm -rf "$WORK"
}
trap cleanup EXIT
if [ "$SET" != inplace ] && [ "$SET" != partial ]; then
    command -v moto_server >/dev/null || { echo "bench_recovery: moto_server not on PATH (pip install 'moto[server]')" >&2; exit 1; }
    PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    moto_server -H 127.0.0.1 -p "$PORT" >"$WORK/moto.log" 2>&1 &
    MOTO=$!
    EP=http://127.0.0.1:$PORT
    for _ in $(seq 100); do curl -s "$EP" >/dev/null && break; sleep 0.1; done
    export AWS_ACCESS_KEY_ID=bench AWS_SECRET_ACCESS_KEY=bench AWS_REGION=us-east-1
    curl -s -X PUT "$EP/ckpt" >/dev/null
fi

cat >"$WORK/model.json" <<'JSON'
{"model_type": "gpt2", "n_layer": 12, "n_embd": 768, "n_head": 12, "vocab_size": 256, "n_positions": 64}
JSON
cat >"$WORK/cluster.json" <<JSON
{"gpu_types": {"cpu": {"tflops": {"bf16": 0.05, "fp16": 0.05, "fp32": 0.05}, "mem_bw_gb_s": 10,
                       "intra_node_gb_s": 5, "emulate": {"slowdown": 1, "memory_mib": 4096}}},
 "nodes": [{"name": "fast-0", "gpu": "cpu", "count": 1, "usd_per_gpu_hour": 0.3},
           {"name": "spot-0", "gpu": "cpu", "count": 1, "spot": true, "usd_per_gpu_hour": 0.1}],
 "network": {"inter_node_gb_s": 12.5, "cloud_gb_s": $CLOUD_GB_S}}
JSON
"$AUTOHET" tokenize /usr/share/common-licenses/GPL-3 -o "$WORK/text.bin" >/dev/null
if [ "$SET" = partial ]; then
    MODEL=tiny-gpt2 GB=4 SEQ=64 SPOT=fast-1 CLUSTER=$PWD/examples/clusters/cpu-partial-host.json
fi
echo "load average at the start: $(cut -d' ' -f1-3 /proc/loadavg)"

run() { # NAME [flags]
    local name=$1 t0 i n
    shift
    echo "0,add,fast-0" >"$WORK/$name.events" # fast-0 is up from the start: a no-op to begin the trace
    t0=$(date +%s%N)
    # --schedule 1f1b: the two data-parallel replicas this bench compares (under auto the planner now
    # takes one interleaved pipeline over fast-0 and spot-0, and each disk holds half the state)
    "${RUN_AUTOHET:-$AUTOHET}" run --model "$MODEL" --cluster "$CLUSTER" --data "$WORK/text.bin" \
        --global-batch $GB --seq-len $SEQ --steps $STEPS_RUN --ckpt-every "$EVERY" --grace-s 60 --events "$WORK/$name.events" \
        --schedule 1f1b ${EP:+--cloud "s3://ckpt/$name" --s3-endpoint "$EP"} --work-dir "$WORK/$name" --quiet \
        ${READMIT:+--join-horizon-s 1000000} "$@" \
        >"$WORK/$name.log" 2>&1 &
    AGENT=$!
    # The notice once a step is complete in the cloud (a manifest is its commit point); SET=inplace: once
    # launch 0 has trained 4 steps.
    for i in $(seq 3000); do
        if [ "$SET" = inplace ] || [ "$SET" = partial ]; then
            n=$(grep -cs '"step"' "$WORK/$name/launch-0/metrics.jsonl" || true)
            [ "${n:-0}" -ge 4 ] && break
        else
            curl -s "$EP/ckpt?list-type=2&prefix=$name/" | grep -q "manifest-fast-0.json" && break
        fi
        kill -0 $AGENT 2>/dev/null || break
        sleep 0.2
    done
    echo "$(( ($(date +%s%N) - t0) / 1000000 )),remove,$SPOT" >>"$WORK/$name.events"
    for want in 1 ${READMIT:+2}; do # SET=readmit: fast-1 back once the first recovery is in, then the join's
        for i in $(seq 3000); do
            [ "$(grep -cs '"event":"recover"' "$WORK/$name/metrics.jsonl")" -ge $want ] && break
            kill -0 $AGENT 2>/dev/null || break
            sleep 0.2
        done
        [ $want = 2 ] || [ -z "${READMIT:-}" ] || echo "$(( ($(date +%s%N) - t0) / 1000000 )),add,$SPOT" >>"$WORK/$name.events"
    done
    kill -INT $AGENT 2>/dev/null || true
    wait $AGENT 2>/dev/null || true
    AGENT=
    grep -q '"event":"recover"' "$WORK/$name/metrics.jsonl" 2>/dev/null ||
        { cat "$WORK/$name.log" >&2; echo "bench_recovery: the $name run did not recover" >&2; exit 1; }
}
if [ "$SET" = inplace ] || [ "$SET" = partial ]; then
    run relaunch --no-in-place
    [ -z "${BASE:-}" ] || RUN_AUTOHET=$(cd "$BASE" && pwd)/autohet run in-place-base
    run in-place # autohet run's default
    echo "load average at the end:   $(cut -d' ' -f1-3 /proc/loadavg)"
    python3 bench/recovery_summary.py "$([ -n "$READMIT" ] && echo readmit || echo inplace)" "$WORK"
    [ "$SET" = inplace ] || grep -h "parks at step\|parked .* s (CPU" "$WORK/in-place.log" ||
        echo "in-place: no rank parked (see its log)"
    [ -z "${BASE:-}" ] || python3 bench/recovery_summary.py "$([ -n "$READMIT" ] && echo readmit || echo inplace)-base" "$WORK"
    exit 0
fi
# every run of this set is the stop and relaunch (--no-in-place; cloud-only never changes in place)
run local-first --no-in-place
run cloud-only --recovery cloud-only --no-in-place
# local-first with in-memory replicas (--replica-memory-gb): the notice's save goes to the hosts'
# memory first (snapshot, replication to fast-0's memory), then the disks (docs/checkpoints.md)
[ "${MEMORY:-1}" = 0 ] || run memory --replica-memory-gb 4 --no-in-place
echo "load average at the end:   $(cut -d' ' -f1-3 /proc/loadavg)"

# the table and the ratios: bench/recovery_summary.py (shared with bench_hosts_recovery.sh)
python3 bench/recovery_summary.py notice "$WORK" "$CLOUD_GB_S"
