#!/usr/bin/env bash
# Recovery time, local-first vs cloud-only (Varuna-like), side by side in one run.
#
#   bash bench/bench_recovery.sh [BUILD_DIR]      (default build; a Release build is best)
#
# A GPT-2-shaped model of 17.9M parameters (10 layers, 384 wide, byte vocabulary): its checkpoint
# (weights + AdamW m, v in fp32) is 214 MB. It trains on a 3-node emulated cluster (one device
# each: fast-0 on demand, spot-0 and spot-1 spot) with checkpoints on each node's disk and in an
# S3 store (moto_server on loopback). 4 s after the start of a
# checkpointed run, spot-1 is preempted (events file); the agent saves in the grace period, drops
# spot-1, re-plans and relaunches:
#   local-first: every rank takes its shards from its node's disk, then a peer, then the cloud;
#   cloud-only:  every node's disk is dropped (--recovery cloud-only), as a restart on fresh
#                machines does: everything comes from the cloud.
# The cloud link is the cluster's network.cloud_gb_s = 0.1 (100 MB/s per node). Printed: the
# breakdown of each recovery (stop = notice to exit incl. the save, re-plan, start-up, transfer
# by tier, first step), the cloud rate actually seen, and the ratio of the two recovery times.
# A benchmark: it never fails on a timing; it exits non-zero only when a run fails.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=$(cd "${1:-build}" && pwd)
AUTOHET=$BUILD/autohet
WORK=$(mktemp -d)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1

command -v moto_server >/dev/null || { echo "bench_recovery: moto_server not on PATH (pip install 'moto[server]')" >&2; exit 1; }
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
moto_server -H 127.0.0.1 -p "$PORT" >"$WORK/moto.log" 2>&1 &
MOTO=$!
trap 'kill $MOTO 2>/dev/null; wait $MOTO 2>/dev/null; rm -rf "$WORK"' EXIT
EP=http://127.0.0.1:$PORT
for _ in $(seq 100); do curl -s "$EP" >/dev/null && break; sleep 0.1; done
export AWS_ACCESS_KEY_ID=bench AWS_SECRET_ACCESS_KEY=bench AWS_REGION=us-east-1
curl -s -X PUT "$EP/ckpt" >/dev/null

cat >"$WORK/model.json" <<'JSON'
{"model_type": "gpt2", "n_layer": 10, "n_embd": 384, "n_head": 6, "vocab_size": 256, "n_positions": 64}
JSON
cat >"$WORK/cluster.json" <<'JSON'
{"gpu_types": {"cpu": {"tflops": {"bf16": 0.05, "fp16": 0.05, "fp32": 0.05}, "mem_bw_gb_s": 10,
                       "intra_node_gb_s": 5, "emulate": {"slowdown": 1, "memory_mib": 4096}}},
 "nodes": [{"name": "fast-0", "gpu": "cpu", "count": 1, "usd_per_gpu_hour": 0.3},
           {"name": "spot-0", "gpu": "cpu", "count": 1, "spot": true, "usd_per_gpu_hour": 0.1},
           {"name": "spot-1", "gpu": "cpu", "count": 1, "spot": true, "usd_per_gpu_hour": 0.1}],
 "network": {"inter_node_gb_s": 1, "cloud_gb_s": 0.1}}
JSON
"$AUTOHET" tokenize /usr/share/common-licenses/GPL-3 -o "$WORK/text.bin" >/dev/null
echo "4000,remove,spot-1" >"$WORK/events.csv"

run() { # NAME [flags]
    local name=$1
    shift
    "$AUTOHET" run --model "$WORK/model.json" --cluster "$WORK/cluster.json" --data "$WORK/text.bin" \
        --global-batch 4 --seq-len 64 --steps 12 --ckpt-every 2 --grace-s 60 --events "$WORK/events.csv" \
        --cloud "s3://ckpt/$name" --s3-endpoint "$EP" --work-dir "$WORK/$name" --quiet "$@" \
        >"$WORK/$name.log" 2>&1 || { cat "$WORK/$name.log" >&2; echo "bench_recovery: the $name run failed" >&2; exit 1; }
}
run local-first
run cloud-only --recovery cloud-only

python3 - "$WORK" <<'PY'
import json, sys
w = sys.argv[1]
def rec(name):
    ev = [json.loads(l) for l in open(f"{w}/{name}/metrics.jsonl")]
    r = [e for e in ev if e.get("event") == "recover"]
    ck = [e for e in ev if e.get("event") == "checkpoint" and e.get("ok")]
    assert r, f"{name}: no recovery (was the preemption after the end?)"
    return r[0], ck
rows = {n: rec(n) for n in ("local-first", "cloud-only")}
state = sum(rows["cloud-only"][0]["bytes"].values())
print(f"state restored after the preemption (every rank's shards): {state / 1e6:.0f} MB; "
      f"cloud link: cluster cloud_gb_s = 0.1 (100 MB/s per node)")
print(f"{'':13s} {'total':>7s} {'stop':>6s} {'replan':>7s} {'startup':>8s} {'transfer':>9s} {'first':>6s}   bytes local / peer / cloud        cloud rate")
for n, (r, _) in rows.items():
    b, ts = r["breakdown"], r["tier_seconds"]
    rate = r["bytes"]["cloud"] / ts["cloud"] / 1e6 if ts["cloud"] > 0 else 0
    print(f"{n:13s} {r['seconds']:6.2f}s {b['stop_s']:5.2f}s {b['replan_s']:6.3f}s {b['startup_s']:7.2f}s "
          f"{b['transfer_s']:8.2f}s {b['first_step_s']:5.2f}s   "
          f"{r['bytes']['local'] / 1e6:6.1f} / {r['bytes']['peer'] / 1e6:5.1f} / {r['bytes']['cloud'] / 1e6:6.1f} MB   "
          + (f"{rate:6.1f} MB/s" if rate else "-"))
lf, co = rows["local-first"][0], rows["cloud-only"][0]
print(f"recovery time cloud-only / local-first: {co['seconds'] / lf['seconds']:.2f}x "
      f"(from the notice to the first step after it); transfer alone: "
      f"{co['breakdown']['transfer_s'] / max(lf['breakdown']['transfer_s'], 1e-9):.1f}x")
PY
