# Backend selection of autohet train (src/runtime/device.c, docs/gpu.md "Runtime integration"):
# which plans each build refuses, with a message naming the device type and the fix, the whole
# job exiting non-zero without a hang. Runs in every build and needs no GPU:
#   any build:      bf16 or fp16 on a CPU (emulated) type; a plan mixing CPU and GPU types; a bad AH_BACKEND
#   CPU-only build: a GPU type, and AH_BACKEND=cuda, both naming -DAH_CUDA=ON
#   CUDA build, no GPU visible: a GPU type fails at start-up with the driver's reason
# On a GPU the CUDA training itself is checked by scripts/gpu-check.sh.
. "$(dirname "$0")/train_common.sh"
PLAN=$PLANS/train-dp4.json
CUDA_BUILD=0
grep -q '^AH_CUDA:BOOL=ON' "$BUILD/CMakeCache.txt" 2>/dev/null && CUDA_BUILD=1
python3 - "$PLAN" "$WORK" <<'PY'
import json, sys
src, w = sys.argv[1:]
d = json.load(open(src))
for prec in ("bf16", "fp16"):
    d["train"]["precision"] = prec
    json.dump(d, open(f"{w}/{prec}.json", "w"))
# Every device on a GPU type of the catalog.
g = json.load(open(src))
g["cluster"]["gpu_types"] = {"H100-SXM": {}}
for n in g["cluster"]["nodes"]:
    n["gpu"] = "H100-SXM"
for p in g["pipelines"]:
    for s in p["stages"]:
        s["gpu"] = "H100-SXM"
json.dump(g, open(f"{w}/gpu.json", "w"))
# Pipelines 2 and 3 on GPUs of node n1, pipelines 0 and 1 on the emulated CPUs of node n0.
m = json.load(open(src))
m["cluster"]["gpu_types"]["H100-SXM"] = {}
m["cluster"]["nodes"][1]["gpu"] = "H100-SXM"
for i, p in enumerate(m["pipelines"][2:]):
    p["stages"][0].update(gpu="H100-SXM", devices=[{"node": "n1", "index": i}])
json.dump(m, open(f"{w}/mixed.json", "w"))
PY
expect() { # pattern AH_BACKEND plan
    local pat=$1 backend=$2 plan=$3
    AH_BACKEND=$backend timeout 60 $MPIRUN -x AH_BACKEND -np 4 "$AUTOHET" train --quiet --plan "$plan" \
        --data "$WORK/text.bin" --steps 1 >"$WORK/out" 2>&1
    local rc=$?
    [ $rc -ne 0 ] || fail "expected a failure for $plan (AH_BACKEND=$backend)"
    [ $rc -ne 124 ] || fail "hung (killed by timeout): $plan (AH_BACKEND=$backend)"
    grep -q -- "$pat" "$WORK/out" || { cat "$WORK/out" >&2; fail "no \"$pat\" for $plan (AH_BACKEND=$backend)"; }
    [ "$(grep -c "^autohet train: " "$WORK/out")" = 1 ] || { cat "$WORK/out" >&2; fail "expected one message (rank 0)"; }
    echo "ok (rc $rc): $(grep "^autohet train: " "$WORK/out" | cut -c1-160)"
}
expect "train.precision is bf16, but device type cpu runs on the CPU backend, which trains in fp32 only" "" "$WORK/bf16.json"
expect "train.precision is fp16, but device type cpu runs on the CPU backend, which trains in fp32 only" "" "$WORK/fp16.json"
expect "mixes CPU device type cpu and GPU device type H100-SXM" "" "$WORK/mixed.json"
expect 'AH_BACKEND=gpu: expected "cuda"' gpu "$PLAN"
if [ $CUDA_BUILD = 0 ]; then
    expect "device type H100-SXM is a GPU and needs the CUDA backend, but this build has none: configure with -DAH_CUDA=ON" "" "$WORK/gpu.json"
    expect "device type cpu is forced (AH_BACKEND=cuda) onto the CUDA backend, but this build has none" cuda "$PLAN"
elif ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
    expect "CUDA backend: no usable CUDA device" "" "$WORK/gpu.json"
    expect "CUDA backend: no usable CUDA device" cuda "$PLAN"
else
    echo "a GPU is visible: the start-up failure case does not apply (gpu-check.sh trains on it)"
fi
echo "PASS"
