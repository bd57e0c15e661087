# Tier fallback on resume, with a 2-node data-parallel plan (one replica on n0, one on n1) that
# saved steps 8 and 12 (the last) of 12; step 12 is dropped from every tier, and every run resumed
# from step 8 must give the uninterrupted run's losses bit-identically.
# Usage: bash tests/test_resume_tiers.sh BUILD_DIR SOURCE_DIR [CASE]
#   CASE peer (default): n1's disk gone -> its rank gets every shard from n0 over MPI; a corrupt
#                        shard on n0 -> that one file from n1 (a fallback), the rest local.
#   CASE cloud:          a real S3 server (moto_server on 127.0.0.1): the run uploads in the
#                        background; with no local copy anywhere (and a corrupt one) the resume
#                        takes the cloud's; an unreachable endpoint never stops training;
#                        --keep 1 leaves the cloud (and each disk) with the last step alone.
#   CASE diskfull:       small tmpfs disks (root only; SKIP otherwise): a root that cannot hold
#                        --keep + 1 steps refused at start-up (bytes needed and free), --keep 1
#                        fits; n1's disk filled after step 4: steps 8 and 12 fail, on no node
#                        committed, the run exits non-zero naming step 4 and the 8 steps to redo,
#                        and the resume takes step 4; autohet run passes --keep on, and its last
#                        save failing exits non-zero with the summary naming the step to redo from.
. "$(dirname "$0")/train_common.sh"
CASE=${3:-peer}
STEPS=12
dp2_plan "$WORK/dp2.json"
run() { # out-name [flags...]: dp2_train, which must succeed
    dp2_train "$@" || { cat "$WORK/$1.out" "$WORK/$1.err" >&2; fail "$1: autohet train failed"; }
}
# check OUT EXPECT: OUT resumed from step 8, bit-exact, its recover event satisfying EXPECT
check() { resumed_exactly full "$1" 8 "$2"; }
fresh() { rm -rf "$WORK/ck8"; cp -r "$WORK/ck" "$WORK/ck8" && rm -rf "$WORK"/ck8/*/step-00000012; }
S8=step-00000008
case $CASE in
peer)
    run full --ckpt-every 8 --local-root "$WORK/ck"
    fresh
    rm -rf "$WORK/ck8/n1"
    run peer --local-root "$WORK/ck8" --resume
    check peer 'r["files"] == {"local": 6, "peer": 6, "cloud": 0, "memory": 0} and r["bytes"]["peer"] > 0 and r["fallbacks"] == 0'
    fresh
    flip_byte "$WORK/ck8/n0/$S8/block-001.tp1-0.safetensors"
    run corrupt --local-root "$WORK/ck8" --resume
    check corrupt 'r["files"] == {"local": 11, "peer": 1, "cloud": 0, "memory": 0} and r["fallbacks"] == 1 and "block-001" in r["last_fallback"]'
    ;;
cloud)
    start_moto
    CLOUD=(--cloud s3://ckpt/run1 --s3-endpoint "$EP")
    run full --ckpt-every 8 --local-root "$WORK/ck" "${CLOUD[@]}"
    python3 - "$WORK/full.jsonl" <<'PY' || fail "checkpoint event"
import json, sys
ev = [o for o in map(json.loads, open(sys.argv[1])) if o.get("event") == "checkpoint"]
assert [e["step"] for e in ev] == [8, 12] and all(e["ok"] and "cloud_step" in e for e in ev), ev
PY
    "$AUTOHET" ckpt verify "${CLOUD[@]}" >"$WORK/verify.out" || { cat "$WORK/verify.out" >&2; fail "cloud copy does not verify"; }
    # One copy of each shard: n0's rank is the lowest holder of all six, so n1 uploads nothing. The
    # last step is uploaded as any other.
    grep -q "step 8: ok (6 files, manifest-n0.json)" "$WORK/verify.out" && grep -q "step 12: ok (6 files, manifest-n0.json)" \
        "$WORK/verify.out" || { cat "$WORK/verify.out" >&2; fail "cloud layout"; }
    # Step 12 leaves the cloud: its manifest deleted (signed: moto refuses an unsigned DELETE).
    curl -sf --aws-sigv4 "aws:amz:$AWS_REGION:s3" --user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY" -X DELETE \
        "$EP/ckpt/run1/step-00000012/manifest-n0.json" || fail "cannot delete the cloud's step 12"
    run cloud --local-root "$WORK/gone" --resume "${CLOUD[@]}"
    check cloud 'r["files"] == {"local": 0, "peer": 0, "cloud": 12, "memory": 0} and r["bytes"]["cloud"] > 0'
    # A corrupt copy on n0 and no n1 disk: both ranks take block 1 from the cloud (n0's rank
    # after its local copy fails the checksum, n1's after n0 refuses to send a corrupt copy); the
    # other shards come from n0's disk, locally or over MPI.
    fresh
    rm -rf "$WORK/ck8/n1"
    flip_byte "$WORK/ck8/n0/$S8/block-001.tp1-0.safetensors"
    run mixed --local-root "$WORK/ck8" --resume "${CLOUD[@]}"
    check mixed 'r["files"] == {"local": 5, "peer": 5, "cloud": 2, "memory": 0} and r["fallbacks"] == 2'
    # An unreachable endpoint: training finishes; the failed upload is reported, not fatal.
    run down --ckpt-every 4 --local-root "$WORK/ck-down" --cloud s3://ckpt/run2 --s3-endpoint http://127.0.0.1:1
    grep -q "cloud upload failed" "$WORK/down.err" || { cat "$WORK/down.err" >&2; fail "no upload failure reported"; }
    [ "$(grep -v '"event"' "$WORK/down.jsonl" | grep -c '"step"')" -eq 12 ] || fail "training did not finish with the cloud down"
    # --keep 1 in the cloud tier as on the disks: a save every 2 steps, and at the end the cloud
    # holds step 12 alone (every older step's manifest and files removed), each disk too.
    run keep1 --ckpt-every 2 --local-root "$WORK/ck-keep" --keep 1 --cloud s3://ckpt/run3 --s3-endpoint "$EP"
    "$AUTOHET" ckpt ls --cloud s3://ckpt/run3 --s3-endpoint "$EP" --json >"$WORK/keep1.json" || fail "ckpt ls --cloud"
    python3 - "$WORK/keep1.json" <<'PY' || fail "--keep 1 in the cloud"
import json, sys
rows = json.load(open(sys.argv[1]))
assert [(r["step"], r["committed"]) for r in rows] == [(12, True)], rows
PY
    [ "$(cd "$WORK/ck-keep" && echo n*/step-*)" = "n0/step-00000012 n1/step-00000012" ] || fail "--keep 1 on the disks"
    ;;
diskfull)
    [ "$(id -u)" = 0 ] || { echo "SKIP: needs root to mount a small tmpfs"; exit 77; }
    MOUNTS=()
    mnt() { # DIR SIZE: a tmpfs of SIZE at DIR, unmounted at exit
        mkdir -p "$1" && mount -t tmpfs -o "size=$2" tmpfs "$1" || { echo "SKIP: cannot mount a tmpfs"; exit 77; }
        MOUNTS+=("$1")
    }
    trap 'for m in "${MOUNTS[@]}"; do umount "$m" 2>/dev/null; done; rm -rf "$WORK"' EXIT
    # refused OUT PLAN flags...: autohet train exits non-zero; stderr in OUT.err
    refused() {
        local out=$1 plan=$2
        shift 2
        if timeout 120 $MPIRUN -np 2 "$AUTOHET" train --plan "$plan" --data "$WORK/text.bin" --steps $STEPS --quiet \
            --metrics "$WORK/$out.jsonl" "$@" >"$WORK/$out.out" 2>"$WORK/$out.err"; then
            cat "$WORK/$out.err" >&2
            fail "$out: exit 0"
        fi
    }
    run full --ckpt-every 4 --local-root "$WORK/ck"
    # A step of one node as the test measures it: its files, in 4 KiB blocks.
    STEP=$(python3 -c 'import os,sys; d=sys.argv[1]; print(sum((os.path.getsize(os.path.join(d,f))+4095)//4096*4096 for f in os.listdir(d)))' \
        "$WORK/ck/n0/step-00000012")

    # (1) The start-up check: both nodes on one 12 MiB disk; --keep 2 (the default) needs 3 steps a
    # node: refused before the first step, naming the root, the bytes needed and free, and the step's
    # size (known from the layout: within the part file's block of what a step takes).
    mnt "$WORK/small" 12m
    refused small "$WORK/dp2.json" --ckpt-every 4 --local-root "$WORK/small/ck"
    python3 - "$WORK/small.err" "$WORK/small/ck" "$STEP" <<'PY' || fail "start-up space check"
import re, sys
err, root, step = open(sys.argv[1]).read(), sys.argv[2], int(sys.argv[3])
m = re.search(r"--local-root (\S+) cannot hold this run's checkpoints: node n0's (\S+) needs (\d+) bytes \(a step is "
              r"(\d+) bytes there; --keep 2 keeps 2 steps.*node n1 keeps its checkpoints on the same filesystem: "
              r"(\d+) bytes with this node's, but (\d+) bytes are free: free space there, lower --keep", err)
assert m, err
assert m[1] == root and m[2] == root + "/n0", m.groups()
need, s, both, free = map(int, m.groups()[2:])
assert 0 <= s - step <= 8192, f"step {s} bytes said, {step} on disk"
assert need == 3 * s and both == 2 * need and both > free > 0, m.groups()
print(f"  refused: a step {s} bytes (on disk {step}), {both} needed, {free} free")
PY
    [ ! -s "$WORK/small.jsonl" ] || fail "small: trained before the refusal"
    # --keep 1 needs 2 steps a node: it fits, every save commits, each node keeps its newest step.
    run keep1 --ckpt-every 4 --local-root "$WORK/small/ck" --keep 1
    [ "$(cd "$WORK/small/ck" && echo n*/step-*)" = "n0/step-00000012 n1/step-00000012" ] ||
        fail "--keep 1 kept: $(cd "$WORK/small/ck" && echo n*/step-*)"
    grep -q "the newest restorable checkpoint is step 12 in --local-root $WORK/small/ck: nothing to redo" \
        "$WORK/keep1.err" || { cat "$WORK/keep1.err" >&2; fail "keep1: the last line"; }
    refused nokeep "$WORK/dp2.json" --keep 3
    grep -q -- "--keep 3 needs --local-root DIR" "$WORK/nokeep.err" || { cat "$WORK/nokeep.err" >&2; fail "--keep alone"; }

    # (2) n1's disk fills during the run, once step 4 is saved (a long validation before the saves of
    # steps 8 and 12, about 2 s each here, lets the filler land well before the last save; which
    # save fails first depends on the machine's load, and the test reads it from the events: K, the
    # last step saved; validation changes no weight): the saves after K fail on n1, and
    # n0, whose disk has room, keeps none of them (nothing committed on any node for a step that
    # failed on one, so neither `ckpt ls` nor a resume takes it); the last step's save failed, so
    # the run exits non-zero naming the newest restorable step, K, and the 12 - K steps a resume
    # redoes.
    mnt "$WORK/ck2/n0" 10m
    mnt "$WORK/ck2/n1" 10m
    (for _ in $(seq 1200); do
        grep -q '"event":"checkpoint","step":4,' "$WORK/fill.jsonl" 2>/dev/null && break
        sleep 0.05
    done
    dd if=/dev/zero of="$WORK/ck2/n1/filler" bs=64k 2>/dev/null
    touch "$WORK/filled") &
    refused fill "$WORK/dp2.json" --ckpt-every 4 --local-root "$WORK/ck2" --val-data "$WORK/text.bin" --val-every 8 \
        --val-batches 300
    wait
    [ -e "$WORK/filled" ] || fail "the filler did not run"
    K=$(python3 - "$WORK/fill.jsonl" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
ev = [o for o in lines if o.get("event") == "checkpoint"]
assert [e["step"] for e in ev] == [4, 8, 12] and ev[0]["ok"] and not ev[-1]["ok"], ev
k = max(e["step"] for e in ev if e["ok"])
assert all(e["ok"] == (e["step"] <= k) for e in ev), ev
assert all("no space left" in e["error"] and "--keep N" in e["error"] for e in ev if not e["ok"]), ev
assert len([o for o in lines if "event" not in o]) == 12
print(k)
PY
) || fail "checkpoint events on a full disk"
    echo "  full disk: saved up to step $K; the later saves failed with: $(grep -m1 -o 'no space left[^;]*' "$WORK/fill.err")"
    grep -q "^autohet train: I/O error: the checkpoint of the last step, 12, was not saved (.*no space left on the device.*); the newest restorable checkpoint is step $K in --local-root $WORK/ck2: a --resume redoes the $((12 - K)) steps after it" \
        "$WORK/fill.err" || { cat "$WORK/fill.err" >&2; fail "fill: no error naming the newest restorable step"; }
    "$AUTOHET" ckpt ls --local-root "$WORK/ck2" --json >"$WORK/ls.json" || fail "ckpt ls"
    python3 - "$WORK/ls.json" "$K" <<'PY' || fail "a step whose save failed is listed"
import json, sys
rows, k = json.load(open(sys.argv[1])), int(sys.argv[2])
steps = sorted((r["tier"], r["step"]) for r in rows)
assert steps == [(f"local:{n}", s) for n in ("n0", "n1") for s in range(4, k + 1, 4)], rows
assert all(r["committed"] for r in rows), rows
PY
    rm "$WORK/ck2/n1/filler"
    run resume --local-root "$WORK/ck2" --resume
    python3 - "$WORK/full.jsonl" "$WORK/resume.jsonl" "$K" <<'PY' || fail "resume after a full disk"
import json, sys
ref = {o["step"]: o["loss"] for o in map(json.loads, open(sys.argv[1])) if "event" not in o}
lines, k = [json.loads(l) for l in open(sys.argv[2])], int(sys.argv[3])
assert [o["step"] for o in lines if o.get("event") == "recover"] == [k], lines[0]
got = [o for o in lines if "event" not in o]
assert [o["step"] for o in got] == list(range(k, 12)) and all(o["loss"] == ref[o["step"]] for o in got)
PY

    # (3) autohet run: --keep goes to the trainer, and a run whose last save failed (a file where
    # step 4's directory goes, on every node) exits non-zero; its summary names the newest
    # restorable step and the steps a rerun redoes.
    RUN=(--model tiny-gpt2 --cluster "$SRC/examples/clusters/cpu-hetero.json" --data "$WORK/text.bin" --global-batch 8
        --seq-len 32 --steps 4 --ckpt-every 2 --quiet)
    "$AUTOHET" run "${RUN[@]}" --keep 1 --work-dir "$WORK/run1" >"$WORK/run1.out" 2>&1 ||
        { cat "$WORK/run1.out" >&2; fail "run --keep 1"; }
    for d in "$WORK"/run1/local/*/; do
        [ "$(cd "$d" && echo step-*)" = step-00000004 ] || fail "run --keep 1 kept $(cd "$d" && echo step-*) in $d"
    done
    grep -q "^checkpoints: the newest restorable is step 4, the last trained: nothing to redo" "$WORK/run1.out" ||
        { cat "$WORK/run1.out" >&2; fail "run1: the summary's checkpoint line"; }
    for n in fast-0 slow-0 slow-1; do mkdir -p "$WORK/run2/local/$n" && echo x >"$WORK/run2/local/$n/step-00000004"; done
    if "$AUTOHET" run "${RUN[@]}" --work-dir "$WORK/run2" >"$WORK/run2.out" 2>&1; then
        cat "$WORK/run2.out" >&2
        fail "run: the last save failed, exit 0"
    fi
    grep -q "^checkpoints: the newest restorable is step 2: a rerun redoes 2 steps (2..3); 1 save failed, the last: .*step-00000004" \
        "$WORK/run2.out" || { cat "$WORK/run2.out" >&2; fail "run2: the summary's checkpoint line"; }
    grep -q "the checkpoint of the last step, 4, was not saved" "$WORK/run2.out" ||
        { cat "$WORK/run2.out" >&2; fail "run2: the error"; }
    ;;
*) fail "unknown case $CASE" ;;
esac
echo PASS
