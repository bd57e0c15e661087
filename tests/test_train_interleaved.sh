# The interleaved 1F1B schedule (issue 35) beyond equivalence:
# - memory: each rank's high-water mark equals the cost model's prediction to the byte (each chunk
#   keeps its own activation slots and p2p buffers; one copy of the tied matrix on a device that
#   holds both the embedding and the head; il-mixed with its optimizer sharded; il-p3, whose
#   devices recompute one of their two stages);
# - resume across schedules: a 1F1B checkpoint resumes under interleaved and an interleaved one
#   under 1F1B; bit-exact where the layers' placement is unchanged (single, one device with every
#   layer, resumed as il-1dev, its 4 stages interleaved on that device), within 1e-4 relative
#   elsewhere (il2 on 2 devices -> pp4 on 4).
# Under AH_CLUSTER_SHORT=1 (CI's sanitizer stage): the memory of il3 and the sharded il-mixed, and
# the bit-exact resume.
. "$(dirname "$0")/train_common.sh"
SHORT=${AH_CLUSTER_SHORT:-0}
MEMORY_PLANS=(il2 il3 llama-il-tp2 il-1dev il-p3)
[ "$SHORT" = 1 ] && MEMORY_PLANS=(il3)
for plan in "${MEMORY_PLANS[@]}"; do check_memory "$PLANS/train-$plan.json"; done
"$AUTOHET" evaluate --plan "$PLANS/train-il-mixed.json" --shard-optimizer even -o "$WORK/il-mixed-sharded.json" >/dev/null ||
    fail "evaluate --shard-optimizer even on il-mixed"
check_memory "$WORK/il-mixed-sharded.json"
STEPS=8
run() { # plan-name out-name [extra flags...]
    local plan=$1 out=$2 n
    shift 2
    n=$(plan_ranks "$PLANS/train-$plan.json")
    timeout 120 $MPIRUN -np "$n" "$AUTOHET" train --plan "$PLANS/train-$plan.json" --data "$WORK/text.bin" \
        --steps $STEPS --quiet --metrics "$WORK/$out.jsonl" "$@" >"$WORK/$out.out" 2>"$WORK/$out.err" ||
        { cat "$WORK/$out.out" "$WORK/$out.err" >&2; fail "$out: autohet train failed"; }
}
# resume SAVER RESUMER TOL: SAVER saves at steps 4 and 8; RESUMER resumes from step 4 and its losses
# of steps 4 .. 7 match SAVER's (TOL 0: bit-identical as printed).
resume() {
    rm -rf "$WORK/ck"
    run "$1" "$1-full" --ckpt-every 4 --local-root "$WORK/ck"
    rm -rf "$WORK"/ck/*/step-00000008
    run "$2" "$2-from-$1" --local-root "$WORK/ck" --resume
    python3 - "$WORK/$1-full.jsonl" "$WORK/$2-from-$1.jsonl" "$3" <<'PY' || fail "$2 does not continue $1"
import json, sys
ref = {o["step"]: o["loss"] for o in map(json.loads, open(sys.argv[1])) if "event" not in o}
lines = [json.loads(l) for l in open(sys.argv[2])]
rec = [o for o in lines if o.get("event") == "recover"]
assert len(rec) == 1 and rec[0]["found"] and rec[0]["step"] == 4, rec
got = {o["step"]: o["loss"] for o in lines if "event" not in o}
assert sorted(got) == [4, 5, 6, 7], sorted(got)
tol = float(sys.argv[3])
worst = max(abs(got[s] - ref[s]) / abs(ref[s]) for s in got)
assert worst <= tol, f"losses within {worst:.2e}, not {tol}: {got} vs {ref}"
print(f"  {sys.argv[2].split('/')[-1]}: steps 4..7 within {worst:.1e} of the saver's")
PY
}
resume single il-1dev 0
[ "$SHORT" = 1 ] || resume il2 pp4 1e-4
echo PASS
