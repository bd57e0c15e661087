# Plan equivalence with the hierarchical DP sync (issue 39; see test_train_equivalence.sh): each
# plan over two regions (train_common.sh two_regions: pipelines alternate between east and west),
# "dp_sync": "hierarchical", so every DP group reduce-scatters inside each region, all-reduces
# the pieces across and all-gathers inside: pure DP (2 + 2), asymmetric pipelines with a
# recomputing stage and the tied embedding's group (2 + 1: the west member holds every piece)
# with the optimizer sharded unevenly, and TP 2 x asymmetric PP x DP with it sharded evenly. Then:
# asym over two regions takes the hierarchical path (train's start-up line) and gives the same
# losses with --no-overlap-grad-sync (the buckets after the backward); "hierarchical" on a plan inside one zone is
# harmless (the ring: no such line), and over two zones of one region the zones are the domains
# (the ring's losses within 1e-5).
. "$(dirname "$0")/train_common.sh"
bash "$SRC/tests/test_train_equivalence.sh" "$BUILD" "$SRC" dp4@hier asym@hier:uneven tp2-asym@hier:even ||
    fail "a plan with the hierarchical sync differs from one process"
spec_plan asym@hier
out=$(timeout 120 $MPIRUN -np 6 "$AUTOHET" train --plan "$SPEC_PLAN" --data "$WORK/text.bin" --steps 2 \
      --metrics "$WORK/overlap.jsonl" 2>&1) || { echo "$out" >&2; fail "asym@hier: autohet train failed"; }
grep -q "DP sync: hierarchical in 7 of this rank's 7 DP groups, across up to 2 regions" <<<"$out" ||
    { echo "$out" >&2; fail "asym@hier: rank 0's groups did not take the hierarchical sync"; }
timeout 120 $MPIRUN -np 6 "$AUTOHET" train --plan "$SPEC_PLAN" --data "$WORK/text.bin" --steps 2 --quiet \
    --no-overlap-grad-sync --metrics "$WORK/serial.jsonl" 2>"$WORK/serial.err" ||
    { cat "$WORK/serial.err" >&2; fail "asym@hier --no-overlap-grad-sync: autohet train failed"; }
cmp -s <(cut -d, -f1-2 "$WORK/overlap.jsonl") <(cut -d, -f1-2 "$WORK/serial.jsonl") ||
    fail "asym@hier: the losses with --no-overlap-grad-sync differ from the overlapped sync's"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); d["dp_sync"]="hierarchical"; json.dump(d, open(sys.argv[2],"w"))' \
    "$PLANS/train-dp4.json" "$WORK/one-zone.json" || fail "dp4 with dp_sync hierarchical"
out=$(timeout 120 $MPIRUN -np 4 "$AUTOHET" train --plan "$WORK/one-zone.json" --data "$WORK/text.bin" --steps 2 \
      --metrics "$WORK/one-zone.jsonl" 2>&1) || { echo "$out" >&2; fail "dp4 in one zone, hierarchical: autohet train failed"; }
! grep -q "DP sync: hierarchical" <<<"$out" || fail "dp4 in one zone took the hierarchical sync: $out"
# one region, two zones: the zones are the domains
python3 - "$WORK/one-zone.json" "$WORK/two-zones.json" <<'PY' || fail "dp4 over two zones"
import json, sys
d = json.load(open(sys.argv[1]))
proto = d["cluster"]["nodes"][0]
d["cluster"]["nodes"] = [dict(proto, name=f"z{i}", count=2, zone="east-" + "ab"[i], region="east") for i in range(2)]
for i, p in enumerate(d["pipelines"]):
    p["stages"][0]["devices"] = [{"node": f"z{i % 2}", "index": i // 2}]
json.dump(d, open(sys.argv[2], "w"))
PY
out=$(timeout 120 $MPIRUN -np 4 "$AUTOHET" train --plan "$WORK/two-zones.json" --data "$WORK/text.bin" --steps 2 \
      --metrics "$WORK/two-zones.jsonl" 2>&1) || { echo "$out" >&2; fail "dp4 over two zones, hierarchical: autohet train failed"; }
grep -q "DP sync: hierarchical in 4 of this rank's 4 DP groups, across up to 2 regions or zones" <<<"$out" ||
    fail "dp4 over two zones of one region did not sum by zone: $out"
python3 - "$WORK/one-zone.jsonl" "$WORK/two-zones.jsonl" <<'PY' || fail "dp4 over two zones differs from the ring's losses"
import json, sys
a, b = ([json.loads(l)["loss"] for l in open(f)] for f in sys.argv[1:])
assert len(a) == len(b) == 2 and all(abs(x - y) <= 1e-5 * abs(x) for x, y in zip(a, b)), (a, b)
PY
echo PASS
