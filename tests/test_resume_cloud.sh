# Resume from the cloud tier (a real S3 server on loopback): test_resume_tiers.sh's cloud case; then
#  - the end of a run says the cloud's newest complete step (the "cloud" event, after the last uploads);
#  - a cloud that cannot be listed at a resume is not an empty cloud: with no local copy, a wrong
#    port, a wrong bucket and the store paused (SIGSTOP) each stop the resume non-zero, naming the
#    tier and the error, after the retries said on the console, nothing trained; with the local
#    disk there it resumes from it, saying the cloud was left out; --start-over-if-unreadable
#    trains from step 0;
#  - the store paused mid-run: the checkpoint events give the newest complete cloud step (not -1),
#    a warning says the cloud falls behind while training goes on, and the end says it again.
bash "$(dirname "$0")/test_resume_tiers.sh" "$1" "$2" cloud || exit 1
. "$(dirname "$0")/train_common.sh"
start_moto
trap 'kill -CONT $MOTO 2>/dev/null; kill $MOTO 2>/dev/null; wait $MOTO 2>/dev/null; rm -rf "$WORK"' EXIT # paused or not
dp2_plan "$WORK/dp2.json"
# train OUT STEPS [flags...]: the two-rank job; its exit status in $WORK/OUT.rc.
train() {
    local out=$1 steps=$2
    shift 2
    timeout 120 $MPIRUN -np 2 "$AUTOHET" train --plan "$WORK/dp2.json" --data "$WORK/text.bin" --steps "$steps" \
        --quiet --metrics "$WORK/$out.jsonl" "$@" >"$WORK/$out.out" 2>"$WORK/$out.err"
    echo $? >"$WORK/$out.rc"
}
rc() { cat "$WORK/$1.rc"; }
steps_trained() { [ -f "$WORK/$1.jsonl" ] && grep -vc '"event"' "$WORK/$1.jsonl" || echo 0; }
CLOUD=(--cloud s3://ckpt/run --s3-endpoint "$EP")

# A run saved in the cloud; its end says the cloud holds its last step.
train saved 12 --ckpt-every 4 --local-root "$WORK/ck" "${CLOUD[@]}"
[ "$(rc saved)" = 0 ] || { cat "$WORK/saved.err"; fail "the cloud run failed"; }
python3 - "$WORK/saved.jsonl" <<'PY' || { cat "$WORK/saved.err"; fail "the end-of-run cloud event"; }
import json, sys
ev = [o for o in map(json.loads, open(sys.argv[1])) if o.get("event") in ("checkpoint", "cloud")]
assert [(e["event"], e["step"]) for e in ev] == [("checkpoint", 4), ("checkpoint", 8), ("checkpoint", 12), ("cloud", 12)], ev
assert ev[-1]["cloud_step"] == 12 and "cloud_error" not in ev[-1], ev[-1]
assert ev[1]["cloud_step"] in (-1, 4), ev[1]  # step 4's upload, done or not by then; 8's in flight
print("  end of run: cloud_step", ev[-1]["cloud_step"], "after", ev[-1]["seconds"], "s")
PY
grep -q "cloud tier s3://ckpt/run: newest complete step 12" "$WORK/saved.err" || { cat "$WORK/saved.err"; fail "no end line"; }

# Resumed from the cloud (an empty disk; step 12 taken out of the cloud): the first checkpoint event
# after it says the step the resume read (8, or 4 where a loaded machine made the uploader skip step
# 8 because it fell behind), not -1 while this run's first upload is in flight.
curl -sf --aws-sigv4 "aws:amz:$AWS_REGION:s3" --user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY" -X DELETE \
    "$EP/ckpt/run/step-00000012/manifest-n0.json" || fail "cannot delete the cloud's step 12"
train again 12 --ckpt-every 4 --local-root "$WORK/empty-again" --resume "${CLOUD[@]}"
[ "$(rc again)" = 0 ] || { cat "$WORK/again.err"; fail "the resume from the cloud failed"; }
python3 - "$WORK/again.jsonl" <<'PY' || { cat "$WORK/again.err"; fail "cloud_step after a resume from the cloud"; }
import json, sys
ev = [o for o in map(json.loads, open(sys.argv[1])) if o.get("event") in ("checkpoint", "cloud")]
resumed = 12 - 4 * (len(ev) - 1)  # checkpoints at 12 only, or at 8 and 12
assert resumed in (4, 8), ev
assert [(e["event"], e["step"]) for e in ev] == [("checkpoint", s) for s in range(resumed + 4, 13, 4)] + [("cloud", 12)], ev
assert ev[0]["cloud_step"] >= resumed and ev[-1]["cloud_step"] == 12, ev
print("  resumed from the cloud's step", resumed, "; first checkpoint says cloud_step", ev[0]["cloud_step"])
PY

# refused NAME WHAT FLAGS...: a resume from an empty disk whose cloud cannot be listed stops non-zero,
# naming the tier and WHAT (the error), after its retry said on the console; nothing trained.
refused() {
    local name=$1 what=$2
    shift 2
    local t0=$SECONDS
    train "$name" 8 --local-root "$WORK/empty-$name" --resume --cloud-retries 1 --cloud-timeout 1 "$@"
    [ "$(rc "$name")" != 0 ] || { cat "$WORK/$name.out" "$WORK/$name.err"; fail "$name: the resume started over (exit 0)"; }
    grep -q "cannot be listed" "$WORK/$name.err" && grep -q -- "$what" "$WORK/$name.err" &&
        grep -q "retry 1 of 1" "$WORK/$name.err" && grep -q -- "--start-over-if-unreadable" "$WORK/$name.err" ||
        { cat "$WORK/$name.out" "$WORK/$name.err"; fail "$name: the refusal does not name the tier, $what and the way out"; }
    ! grep -q "starting from" "$WORK/$name.out" || fail "$name: $(cat "$WORK/$name.out")"
    [ "$(steps_trained "$name")" = 0 ] || fail "$name: steps were trained"
    echo "  $name: exit $(rc "$name") after $((SECONDS - t0)) s: $(grep -v retry "$WORK/$name.err" | grep -m1 'cannot be listed' | cut -c1-220)"
}
refused port "cannot reach the S3 endpoint" --cloud s3://ckpt/run --s3-endpoint http://127.0.0.1:1
refused bucket "NoSuchBucket" --cloud s3://ckpt-typo/run --s3-endpoint "$EP"
kill -STOP "$MOTO"
refused paused "timed out" "${CLOUD[@]}"
kill -CONT "$MOTO"
# The local disk holds step 8: it is restored, the cloud said left out.
mkdir -p "$WORK/ck4" && cp -r "$WORK/ck"/* "$WORK/ck4/" && rm -rf "$WORK"/ck4/*/step-00000012
train local4 12 --local-root "$WORK/ck4" --resume --cloud-retries 0 --cloud s3://ckpt/run --s3-endpoint http://127.0.0.1:1
[ "$(rc local4)" = 0 ] && grep -q "resumed from step 8" "$WORK/local4.out" && grep -q "resuming from step 8 of the other tiers" \
    "$WORK/local4.err" || { cat "$WORK/local4.out" "$WORK/local4.err"; fail "local4: no resume from the disk with the cloud left out"; }
# Starting over, asked for.
train over 8 --local-root "$WORK/empty-over" --resume --cloud-retries 0 --start-over-if-unreadable \
    --cloud s3://ckpt/run --s3-endpoint http://127.0.0.1:1
[ "$(rc over)" = 0 ] && [ "$(steps_trained over)" = 8 ] && grep -q "starting from step 0 as --start-over-if-unreadable asks" \
    "$WORK/over.err" || { cat "$WORK/over.out" "$WORK/over.err"; fail "--start-over-if-unreadable did not train from step 0"; }
train usage 8 --local-root "$WORK/u" --start-over-if-unreadable "${CLOUD[@]}"
[ "$(rc usage)" = 2 ] && grep -q -- "--start-over-if-unreadable needs --resume" "$WORK/usage.err" || fail "usage: $(cat "$WORK/usage.err")"
train usage2 8 --local-root "$WORK/u" --cloud-timeout 5
[ "$(rc usage2)" = 2 ] && grep -q -- "--cloud-timeout and --cloud-retries need --cloud" "$WORK/usage2.err" || fail "usage2: $(cat "$WORK/usage2.err")"
"$AUTOHET" run --model tiny-gpt2 --cluster cpu-hetero --data "$WORK/text.bin" --cloud-retries 1 >"$WORK/usage3.out" 2>&1
[ $? = 2 ] && grep -q -- "--cloud-retries needs --cloud" "$WORK/usage3.out" || fail "run usage: $(cat "$WORK/usage3.out")"

# The store paused mid-run: steps slowed so that the run goes on well after the pause.
dp2_plan "$WORK/dp2.json" 30
train paused-run 12 --ckpt-every 2 --local-root "$WORK/ckp" --cloud s3://ckpt/paused --s3-endpoint "$EP" --cloud-timeout 1 &
TRAIN=$!
committed() { # the committed cloud steps of s3://ckpt/paused, as a Python list
    "$AUTOHET" ckpt ls --cloud s3://ckpt/paused --s3-endpoint "$EP" --json 2>/dev/null |
        python3 -c 'import json,sys; print([s["step"] for s in json.load(sys.stdin) if s.get("committed")])' 2>/dev/null
}
# paused as soon as step 2's manifest is in the cloud (a signed HEAD: cheap enough to poll)
for _ in $(seq 1000); do
    curl -sf -o /dev/null -I --aws-sigv4 "aws:amz:$AWS_REGION:s3" --user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY" \
        "$EP/ckpt/paused/step-00000002/manifest-n0.json" && break
    sleep 0.02
done
kill -STOP "$MOTO"
wait $TRAIN
kill -CONT "$MOTO"
sleep 1
C=$(committed)
[ "$(rc paused-run)" = 0 ] || { cat "$WORK/paused-run.err"; fail "paused-run failed"; }
python3 - "$WORK/paused-run.jsonl" "$C" <<'PY' || { cat "$WORK/paused-run.err"; fail "the paused cloud's events"; }
import json, sys
ev = [o for o in map(json.loads, open(sys.argv[1])) if o.get("event") in ("checkpoint", "cloud")]
committed = json.loads(sys.argv[2])
assert committed, "nothing committed in the cloud before the pause"
end = ev[-1]
assert end["event"] == "cloud" and end["step"] == 12, end
assert end["cloud_step"] == max(committed), f"end says cloud step {end['cloud_step']}, the cloud has {committed}"
assert "cloud_error" in end or any("cloud_error" in e for e in ev), "no upload failure in any event"
assert end["seconds"] < 10, f"waited {end['seconds']} s for uploads after the last step"
said = [e for e in ev if e["event"] == "checkpoint" and e["cloud_step"] >= 0]
assert said, f"every checkpoint event says cloud_step -1: {ev}"
behind = [e["step"] for e in ev if e["event"] == "checkpoint" and (e.get("cloud_behind") or "cloud_error" in e)]
assert behind and min(behind) < 12, f"no checkpoint event says the cloud fell behind before the end: {ev}"
print(f"  paused: committed {committed}; events say cloud_step {[e['cloud_step'] for e in ev]}; behind at {behind}; "
      f"end waited {end['seconds']:.1f} s")
PY
grep "falls behind at step" "$WORK/paused-run.err" | grep -qv "at step 12:" ||
    { cat "$WORK/paused-run.err"; fail "no console warning while training that the cloud falls behind"; }
grep -q "cloud tier s3://ckpt/paused is behind" "$WORK/paused-run.err" || { cat "$WORK/paused-run.err"; fail "no end line"; }
echo PASS
