# Memory truth with the optimizer sharded (issue 21; see test_train_memory.sh): the runtime's
# high-water mark equals the prediction to the byte on sharded plans (even over 4 replicas; uneven
# over asymmetric pipelines with the tied group; uneven on TP 2 x asymmetric PP; LLaMA on TP 2),
# every rank of a sharded group holds less than unsharded, and a plan that fits only sharded (each
# device capped between the two) is refused unsharded, naming the device and the bytes it lacks,
# and trains sharded.
. "$(dirname "$0")/train_common.sh"
# Under AH_CLUSTER_SHORT=1 (CI's sanitizer stage): two of the four plans.
SPECS=(dp4:even asym:uneven tp2-asym:uneven llama-tp2-asym:even)
[ "${AH_CLUSTER_SHORT:-0}" = 1 ] && SPECS=(asym:uneven llama-tp2-asym:even)
for spec in "${SPECS[@]}"; do
    name=${spec%%:*} shard=${spec#*:}
    plan=$PLANS/train-$name.json
    check_memory "$plan"
    cp "$WORK/memory_high" "$WORK/unsharded"
    "$AUTOHET" evaluate --plan "$plan" --shard-optimizer even -o "$WORK/$name.sharded.json" >/dev/null || fail "shard $name"
    [ "$shard" = even ] || shard_uneven "$WORK/$name.sharded.json"
    check_memory "$WORK/$name.sharded.json"
    python3 - "$WORK/unsharded" "$WORK/memory_high" <<'PY' || fail "$name: sharding saved nothing on some rank"
import sys
a, b = (list(map(int, open(f).read().split())) for f in sys.argv[1:])
assert all(y < x for x, y in zip(a, b)), list(zip(a, b))
print(f"  sharded: {min(x - y for x, y in zip(a, b))} to {max(x - y for x, y in zip(a, b))} bytes less per rank")
PY
done

# dp4 with every device capped at 3.4 MiB: unsharded it needs 4.1 MiB per device, sharded 2.9.
python3 - "$PLANS/train-dp4.json" "$WORK/capped.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
t = d["cluster"]["gpu_types"]["cpu"]
t["memory_gib"] = 3.4 / 1024
t["emulate"]["memory_mib"] = 3.4
json.dump(d, open(sys.argv[2], "w"))
PY
if timeout 60 $MPIRUN -np 4 "$AUTOHET" train --plan "$WORK/capped.json" --data "$WORK/text.bin" --steps 1 --quiet \
    2>"$WORK/err"; then fail "the unsharded plan trained on devices too small for it"; fi
grep -q "n0:0" "$WORK/err" && grep -qi "bytes\|MiB\|GiB" "$WORK/err" || { cat "$WORK/err" >&2; fail "the refusal does not name the device and the bytes"; }
echo "unsharded refused: $(grep -m1 -o 'n0:0.*' "$WORK/err" | cut -c1-160)"
"$AUTOHET" evaluate --plan "$WORK/capped.json" --shard-optimizer even -o "$WORK/capped.sharded.json" >/dev/null ||
    fail "the sharded plan does not fit"
timeout 60 $MPIRUN -np 4 "$AUTOHET" train --plan "$WORK/capped.sharded.json" --data "$WORK/text.bin" --steps 3 \
    --quiet --metrics "$WORK/capped.jsonl" 2>"$WORK/err" || { cat "$WORK/err" >&2; fail "the sharded plan did not train"; }
[ "$(wc -l <"$WORK/capped.jsonl")" = 3 ] || fail "the sharded plan did not train 3 steps"
echo "PASS"
