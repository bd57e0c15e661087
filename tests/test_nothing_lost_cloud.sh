#!/usr/bin/env bash
# Nothing lost (4 of 4; seeds 10-12) with a cloud tier (moto_server on loopback): every checkpoint
# is also uploaded in the background, so with a checkpoint every step a kill often lands during an
# upload. Seeds 10 and 11 recover local-first; seed 12 recovers cloud-only (every disk dropped, the
# Varuna-like policy): it resumes from the newest step whose upload completed, and every byte it
# restores comes from the cloud. Same checks as tests/test_nothing_lost.sh.
source "$(dirname "$0")/train_common.sh"
source "$SRC/tests/agent_common.sh"
start_moto
small_cluster
reference "$WORK/ref"
seed_case 10 "$WORK/ref" --cloud s3://ckpt/seed10 --s3-endpoint "$EP"
seed_case 11 "$WORK/ref" --cloud s3://ckpt/seed11 --s3-endpoint "$EP"
seed_case 12 "$WORK/ref" --cloud s3://ckpt/seed12 --s3-endpoint "$EP" --recovery cloud-only
python3 - "$WORK/seed-12/metrics.jsonl" <<'PY' || fail "cloud-only recovery took state from elsewhere"
import json, sys
rec = [o for o in map(json.loads, open(sys.argv[1])) if o.get("event") == "recover"]
for r in rec:
    assert r["bytes"]["local"] == 0 and r["bytes"]["peer"] == 0, r
    assert r["step"] == 0 or r["bytes"]["cloud"] > 0, r
print("seed 12: cloud-only recovery from step", [r["step"] for r in rec], "cloud bytes", [r["bytes"]["cloud"] for r in rec])
PY
echo "PASS"
