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
# uploaded SEED: the uploads worked (a failed one is only a warning): none failed, and the try's
# prefix holds a committed step in the cloud (a checkpoint event's cloud_step can still be -1 at
# the end of so short a run: it names the newest step every uploading node had finished then).
uploaded() {
    ! grep -q "cloud upload failed" "$WORK/seed-$1.log" || fail "seed $1: an upload failed: $(grep -m1 "cloud upload failed" "$WORK/seed-$1.log")"
    "$AUTOHET" ckpt ls --cloud "s3://ckpt/seed$1-try$seed_try" --s3-endpoint "$EP" --json >"$WORK/ls-$1.json" ||
        fail "seed $1: ckpt ls of the cloud tier"
    python3 -c 'import json,sys; c=[s["step"] for s in json.load(open(sys.argv[1])) if s.get("committed")]; print(f"seed {sys.argv[2]}: committed in the cloud: steps {c}"); sys.exit(not c)' \
        "$WORK/ls-$1.json" "$1" || fail "seed $1: no committed step in the cloud: $(cat "$WORK/ls-$1.json")"
    # the summary's cloud line names the cloud's newest committed step
    local newest
    newest=$(python3 -c 'import json,sys; print(max(s["step"] for s in json.load(open(sys.argv[1])) if s.get("committed")))' "$WORK/ls-$1.json")
    grep -q "^cloud: newest complete step $newest\$" "$WORK/seed-$1.log" ||
        fail "seed $1: the summary does not say the cloud's newest step $newest: $(grep '^cloud:' "$WORK/seed-$1.log")"
}
seed_case 10 "$WORK/ref" --cloud s3://ckpt/seed10 --s3-endpoint "$EP"
uploaded 10
seed_case 11 "$WORK/ref" --cloud s3://ckpt/seed11 --s3-endpoint "$EP"
uploaded 11
seed_case 12 "$WORK/ref" --cloud s3://ckpt/seed12 --s3-endpoint "$EP" --recovery cloud-only
uploaded 12
# in place is the default: cloud-only says once that it makes no change in place
[ "$(grep -c "note: --recovery cloud-only: no change is made in place" "$WORK/seed-12.log")" = 1 ] ||
    fail "seed 12: cloud-only does not say once that nothing changes in place"
python3 - "$WORK/seed-12/metrics.jsonl" <<'PY' || fail "cloud-only recovery took state from elsewhere"
import json, sys
rec = [o for o in map(json.loads, open(sys.argv[1])) if o.get("event") == "recover"]
for r in rec:
    assert r["bytes"]["local"] == 0 and r["bytes"]["peer"] == 0, r
    assert r["step"] == 0 or r["bytes"]["cloud"] > 0, r
print("seed 12: cloud-only recovery from step", [r["step"] for r in rec], "cloud bytes", [r["bytes"]["cloud"] for r in rec])
PY
# A cloud that cannot be listed at the first launch's resume (a wrong port): the run stops, exit 1,
# with the trainer's message as its error, not a generic failure, and nothing trained.
run_agent "$WORK/down" --cloud s3://ckpt/down --s3-endpoint http://127.0.0.1:1 --cloud-retries 0 && fail "run with the cloud down exited 0"
grep -q "the training job stopped on this error (.*the cloud tier s3://ckpt/down (endpoint http://127.0.0.1:1) cannot be listed" \
    "$WORK/down.log" || { cat "$WORK/down.log"; fail "the agent does not say the cloud cannot be listed"; }
! grep -q '"event": *"checkpoint"\|"loss"' "$WORK/down/metrics.jsonl" 2>/dev/null || fail "the run with the cloud down trained"
echo "cloud down at the resume: $(grep -o 'autohet run: [a-z ]*error: .\{0,200\}' "$WORK/down.log" | head -1)"
echo "PASS"
