# Tier fallback on resume, with a 2-node data-parallel plan (one replica on n0, one on n1) that
# saved steps 8 and 12 (the last) of 12; step 12 is dropped from every tier, and every run resumed
# from step 8 must give the uninterrupted run's losses bit-identically.
# Usage: bash tests/test_resume_tiers.sh BUILD_DIR SOURCE_DIR [CASE]
#   CASE peer (default): n1's disk gone -> its rank gets every shard from n0 over MPI; a corrupt
#                        shard on n0 -> that one file from n1 (a fallback), the rest local.
#   CASE cloud:          a real S3 server (moto_server on 127.0.0.1): the run uploads in the
#                        background; with no local copy anywhere (and a corrupt one) the resume
#                        takes the cloud's; an unreachable endpoint never stops training.
#   CASE diskfull:       the node dirs on a 6 MiB tmpfs (root only; SKIP otherwise): step 4 fits,
#                        steps 8 and 12 do not -> "ok": false events, training finishes, no
#                        partial step is left, and the resume takes step 4.
. "$(dirname "$0")/train_common.sh"
CASE=${3:-peer}
STEPS=12
dp2_plan "$WORK/dp2.json"
run() { # out-name [flags...]
    local out=$1
    shift
    timeout 120 $MPIRUN -np 2 "$AUTOHET" train --plan "$WORK/dp2.json" --data "$WORK/text.bin" --steps $STEPS \
        --quiet --metrics "$WORK/$out.jsonl" "$@" >"$WORK/$out.out" 2>"$WORK/$out.err" \
        || { cat "$WORK/$out.out" "$WORK/$out.err" >&2; fail "$out: autohet train failed"; }
}
# check OUT EXPECT: the resume from step 8 is bit-exact and its recover event satisfies EXPECT
# (a Python expression over r, the event).
check() {
    python3 - "$WORK/full.jsonl" "$WORK/$1.jsonl" "$2" <<'PY' || fail "$1"
import json, sys
ref = {o["step"]: o["loss"] for o in map(json.loads, open(sys.argv[1])) if "event" not in o}
lines = [json.loads(l) for l in open(sys.argv[2])]
r = [o for o in lines if o.get("event") == "recover"]
assert len(r) == 1 and r[0]["found"] and r[0]["step"] == 8, r
r = r[0]
got = [o for o in lines if "event" not in o]
assert [o["step"] for o in got] == list(range(8, 12)), got
for o in got:
    assert o["loss"] == ref[o["step"]], f"step {o['step']}: {o['loss']!r} vs {ref[o['step']]!r}"
assert eval(sys.argv[3]), f"recover event {r} fails: {sys.argv[3]}"
print(f"  {sys.argv[2].split('/')[-1]}: bit-exact; bytes {r['bytes']}, files {r['files']}, "
      f"seconds {r['tier_seconds']}, fallbacks {r['fallbacks']}")
PY
}
fresh() { rm -rf "$WORK/ck8"; cp -r "$WORK/ck" "$WORK/ck8" && rm -rf "$WORK"/ck8/*/step-00000012; }
corrupt() { # flips one byte in the middle of a file
    python3 -c 'import sys; p=sys.argv[1]; b=bytearray(open(p,"rb").read()); b[len(b)//2]^=0xff; open(p,"wb").write(b)' "$1"
}
S8=step-00000008
case $CASE in
peer)
    run full --ckpt-every 8 --local-root "$WORK/ck"
    fresh
    rm -rf "$WORK/ck8/n1"
    run peer --local-root "$WORK/ck8" --resume
    check peer 'r["files"] == {"local": 6, "peer": 6, "cloud": 0} and r["bytes"]["peer"] > 0 and r["fallbacks"] == 0'
    fresh
    corrupt "$WORK/ck8/n0/$S8/block-001.tp1-0.safetensors"
    run corrupt --local-root "$WORK/ck8" --resume
    check corrupt 'r["files"] == {"local": 11, "peer": 1, "cloud": 0} and r["fallbacks"] == 1 and "block-001" in r["last_fallback"]'
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
    check cloud 'r["files"] == {"local": 0, "peer": 0, "cloud": 12} and r["bytes"]["cloud"] > 0'
    # A corrupt copy on n0 and no n1 disk: both ranks take block 1 from the cloud (n0's rank
    # after its local copy fails the checksum, n1's after n0 refuses to send a corrupt copy); the
    # other shards come from n0's disk, locally or over MPI.
    fresh
    rm -rf "$WORK/ck8/n1"
    corrupt "$WORK/ck8/n0/$S8/block-001.tp1-0.safetensors"
    run mixed --local-root "$WORK/ck8" --resume "${CLOUD[@]}"
    check mixed 'r["files"] == {"local": 5, "peer": 5, "cloud": 2} and r["fallbacks"] == 2'
    # An unreachable endpoint: training finishes; the failed upload is reported, not fatal.
    run down --ckpt-every 4 --local-root "$WORK/ck-down" --cloud s3://ckpt/run2 --s3-endpoint http://127.0.0.1:1
    grep -q "cloud upload failed" "$WORK/down.err" || { cat "$WORK/down.err" >&2; fail "no upload failure reported"; }
    [ "$(grep -v '"event"' "$WORK/down.jsonl" | grep -c '"step"')" -eq 12 ] || fail "training did not finish with the cloud down"
    ;;
diskfull)
    mkdir -p "$WORK/small"
    if [ "$(id -u)" != 0 ] || ! mount -t tmpfs -o size=6m tmpfs "$WORK/small" 2>/dev/null; then
        echo "SKIP: needs root to mount a small tmpfs"
        exit 77
    fi
    trap 'umount "$WORK/small" 2>/dev/null; rm -rf "$WORK"' EXIT
    run full
    run fill --ckpt-every 4 --local-root "$WORK/small/ck"
    python3 - "$WORK/fill.jsonl" <<'PY' || fail "checkpoint events on a full disk"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
ev = [o for o in lines if o.get("event") == "checkpoint"]
assert [(e["step"], e["ok"]) for e in ev] == [(4, True), (8, False), (12, False)], ev
assert all("no space left" in e["error"] for e in ev[1:]), ev
assert len([o for o in lines if "event" not in o]) == 12
print("  full disk: step 4 saved; steps 8 and 12 failed with:", ev[1]["error"][:100])
PY
    for d in "$WORK"/small/ck/n*/step-*; do [ -e "$d/manifest.json" ] || fail "partial step left behind: $d"; done
    run resume4 --local-root "$WORK/small/ck" --resume
    python3 - "$WORK/full.jsonl" "$WORK/resume4.jsonl" <<'PY' || fail "resume after a full disk"
import json, sys
ref = {o["step"]: o["loss"] for o in map(json.loads, open(sys.argv[1]))}
lines = [json.loads(l) for l in open(sys.argv[2])]
assert [o["step"] for o in lines if o.get("event") == "recover"] == [4], lines[0]
got = [o for o in lines if "event" not in o]
assert [o["step"] for o in got] == list(range(4, 12)) and all(o["loss"] == ref[o["step"]] for o in got)
PY
    ;;
*) fail "unknown case $CASE" ;;
esac
echo PASS
