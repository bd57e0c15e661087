#!/usr/bin/env bash
# Pipeline schedules from the command line (issue 35, plan side): `autohet evaluate` prices a plan
# with an interleaved pipeline and a zero-bubble one (examples/plans/cpu-hetero-schedules.json),
# says each schedule, writes it back with -o (the "schedule" fields kept, 1f1b left out), draws
# their timelines (--svg: one lane per device, W passes); the same plan under 1F1B replays slower;
# `autohet train` refuses it, naming the pipeline and the schedule, before anything starts; an
# invalid placement is refused naming the rule and the place.
# Usage: bash tests/test_schedules_cli.sh BUILD_DIR SOURCE_DIR
set -u
BUILD=$(cd "$1" && pwd)
SRC=$(cd "$2" && pwd)
AH="$BUILD/autohet"
PLAN="$SRC/examples/plans/cpu-hetero-schedules.json"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

"$AH" evaluate --plan "$PLAN" --svg "$TMP/s.svg" -o "$TMP/out.json" >"$TMP/human" 2>&1 || fail "evaluate: $(cat "$TMP/human")"
cat "$TMP/human"
grep -q "4 stages, on 2 devices, interleaved 1F1B (2 per device)" "$TMP/human" || fail "no interleaved line"
grep -q "zero-bubble ZB-H1" "$TMP/human" || fail "no zero-bubble line"
grep -q ", 4 devices" "$TMP/human" || fail "the plan's devices are its distinct devices (4), not its 6 stages"
"$AH" evaluate --plan "$PLAN" --json >"$TMP/e.json" || fail "evaluate --json"
/usr/bin/python3 - "$TMP/e.json" "$TMP/out.json" "$TMP/s.svg" "$PLAN" <<'PY' || exit 1
import json, sys, xml.etree.ElementTree as ET
e, out, svg, src = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), sys.argv[3], json.load(open(sys.argv[4]))
assert [p["schedule"] for p in e["pipelines"]] == ["interleaved", "zero-bubble"], e["pipelines"]
assert len(e["devices"]) == 4, e["devices"]
st = e["pipelines"][0]["stages"]
assert st[0]["memory_bytes"] == st[2]["memory_bytes"] and st[1]["memory_bytes"] == st[3]["memory_bytes"], st
zb = e["pipelines"][1]["stages"]
assert all(0 < s["wgrad_s"] < s["bwd_s"] for s in zb), zb
assert [p.get("schedule") for p in out["pipelines"]] == ["interleaved", "zero-bubble"], out["pipelines"]
assert abs(out["predicted"]["iteration_s"] - e["iteration_s"]) <= 1e-12 * e["iteration_s"]
text = open(svg).read()
assert "interleaved 1F1B" in text and "zero-bubble ZB-H1" in text and ">device 1<" in text, "svg labels"
assert "each pipeline's schedule" in text and "weight-gradient pass W" in text, "svg title"
ET.parse(svg)
# the same plan with both pipelines 1F1B (pipeline 0: two stages, one per device)
src["pipelines"][0] = {"micro_batches": 2, "stages": [
    {"layers": [0, 2], "gpu": "cpu-fast", "devices": [{"node": "fast-0", "index": 0}]},
    {"layers": [2, 4], "gpu": "cpu-fast", "devices": [{"node": "fast-0", "index": 1}]}]}
del src["pipelines"][1]["schedule"]
json.dump(src, open(sys.argv[2] + ".1f1b", "w"))
print("interleaved", e["pipelines"][0]["time_s"], "zero-bubble", e["pipelines"][1]["time_s"])
PY
"$AH" evaluate --plan "$TMP/out.json.1f1b" --json >"$TMP/b.json" || fail "evaluate of the 1F1B plan"
/usr/bin/python3 - "$TMP/e.json" "$TMP/b.json" <<'PY' || exit 1
import json, sys
s, b = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
t = [p["time_s"] for p in s["pipelines"]]
u = [p["time_s"] for p in b["pipelines"]]
print("1F1B", u)
assert t[1] < u[1], f"zero-bubble {t[1]} not below 1F1B {u[1]}"
PY

# an uneven placement: device 0 on stages 0 and 1
/usr/bin/python3 - "$PLAN" "$TMP/bad.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
st = d["pipelines"][0]["stages"]
st[1]["devices"], st[2]["devices"] = st[0]["devices"], [{"node": "fast-0", "index": 1}]
json.dump(d, open(sys.argv[2], "w"))
PY
"$AH" evaluate --plan "$TMP/bad.json" >"$TMP/bad" 2>&1 && fail "evaluate accepted an uneven interleaved placement"
grep -q '\[schedule\] pipelines\[0\].stages\[1\]: fast-0 GPU 0 holds stages 0 and 1' "$TMP/bad" ||
    fail "the refusal does not name the rule and the place: $(cat "$TMP/bad")"
echo "PASS"
