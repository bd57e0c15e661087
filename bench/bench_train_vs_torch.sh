#!/usr/bin/env bash
# Single-rank training step: `autohet train` vs the same GPT-2 or LLaMA (--model llama) in PyTorch
# (bench/torch_step.py), same shapes, same batch, same thread count (OPENBLAS_NUM_THREADS /
# torch.set_num_threads), at 1 and 2 threads, for two model sizes, measured side by side in one run.
# Prints the step times, the ratio (torch / autohet, > 1 = autohet faster), autohet's achieved
# GFLOP/s (model FLOPs from `autohet model --json`: matmuls, full T x T attention) against
# OpenBLAS's sgemm peak (1024^3) measured before each round (the median over rounds of each round's
# GFLOP/s over its own peak; the peaks' median and range are printed, and the kernel the peaks ran,
# with a warning when it is far below what the CPU's flags allow), and which OpenBLAS kernel autohet ran and which BLAS
# library PyTorch loaded (Debian's python3-torch loads the same OpenBLAS, so with the same
# environment it runs the same kernel). Each cell runs ROUNDS (5) rounds, autohet and PyTorch
# alternating, and compares the median of each side's steps pooled over all its rounds (PyTorch's
# own step moves 0.17-0.45 s within one process and its per-process median 0.18-0.25 s, so one
# round's median is a noisy estimate); each round's ratio of medians is printed too. Column "alone":
# the step's own sgemm calls (logged from one step by the LD_PRELOAD shim bench/sgemm_log.c), each
# timed on its own with hot caches by bench_sgemm_calls in every round after the peak: the model's
# FLOPs over their summed time, against that round's peak (median over rounds), i.e. the bound a step
# made of these matmuls could reach were everything else free. Env: STEPS (8), ROUNDS, ONLY (config
# names, space-separated: run only those). Never run by CTest; never fails on a timing.
# Usage: bash bench/bench_train_vs_torch.sh [--model gpt2|llama] BUILD_DIR [SOURCE_DIR]   (a Release build)
# --model llama: LLaMA's configurations (RMSNorm, rotary, SwiGLU, untied head): one with as many
# key/value heads as query heads (d 256), one with grouped-query attention (d 512, 8 query heads
# over 2), and one at LLaMA's own head dim of 128 (d 1024, 8 query heads over 2, as LLaMA-3-8B's
# 32 over 8).
# Where the environment forces an OpenBLAS kernel (OPENBLAS_CORETYPE, OPENBLAS_L2_SIZE), run it
# also with OpenBLAS's own choice: env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE bash bench/...
# (docs/benchmarks.md).
set -euo pipefail
ARCH=gpt2
if [ "${1:-}" = --model ]; then ARCH=${2:?--model gpt2|llama}; shift 2; fi
[[ $ARCH = gpt2 || $ARCH = llama ]] || { echo "bench: --model gpt2 or llama, not $ARCH" >&2; exit 1; }
BUILD=$(cd "${1:?usage: $0 [--model gpt2|llama] BUILD_DIR [SOURCE_DIR]}" && pwd)
SRC=$(cd "${2:-$(dirname "$0")/..}" && pwd)
AH=$BUILD/autohet
PY=/usr/bin/python3 # Debian's python3-torch
STEPS=${STEPS:-8}
ROUNDS=${ROUNDS:-5}
[[ $ROUNDS =~ ^[1-9][0-9]*$ && $STEPS =~ ^[1-9][0-9]*$ ]] || { echo "bench: STEPS and ROUNDS must be whole numbers >= 1" >&2; exit 1; }
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
"$PY" -c 'import torch' || { echo "bench: $PY cannot import torch (apt-get install python3-torch)" >&2; exit 1; }
"$AH" tokenize /usr/share/common-licenses/GPL-3 -o "$WORK/text.bin" >/dev/null

# config: name L C H KV FF T B V (GPT-2: KV = H, FF = 4 C; LLaMA: d_ff about 8/3 C, a multiple of 16)
if [ $ARCH = gpt2 ]; then
    CONFIGS=("small 4 256 4 4 1024 128 8 512" "large 6 512 8 8 2048 256 8 512")
else
    CONFIGS=("small 4 256 4 4 688 128 8 512" "gqa 6 512 8 2 1376 256 8 512" "hd128 4 1024 8 2 2816 256 4 512")
fi
kernel_reported=0
for cfg in "${CONFIGS[@]}"; do
    read -r name L C H KV FF T B V <<<"$cfg"
    [[ -z ${ONLY:-} || " $ONLY " == *" $name "* ]] || continue
    # The model as a HF config, and a one-stage plan with one micro-batch of B sequences.
    if [ $ARCH = gpt2 ]; then
        printf '{"model_type": "gpt2", "n_layer": %d, "n_embd": %d, "n_head": %d, "vocab_size": %d, "n_positions": %d}\n' \
            "$L" "$C" "$H" "$V" "$T" >"$WORK/$name.config.json"
        shape="L$L C$C H$H T$T B$B V$V"
    else
        printf '{"model_type": "llama", "num_hidden_layers": %d, "hidden_size": %d, "num_attention_heads": %d, "num_key_value_heads": %d, "intermediate_size": %d, "vocab_size": %d, "max_position_embeddings": %d, "rms_norm_eps": 1e-5, "tie_word_embeddings": false}\n' \
            "$L" "$C" "$H" "$KV" "$FF" "$V" "$T" >"$WORK/$name.config.json"
        shape="L$L C$C H$H/$KV F$FF T$T B$B V$V"
    fi
    "$AH" model --model "$WORK/$name.config.json" --seq-len "$T" --micro-batch "$B" --precision fp32 --json >"$WORK/$name.model.json"
    python3 - "$WORK/$name.model.json" "$WORK/$name.plan.json" "$B" "$T" "$L" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
B, T, L = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
cpu = {"memory_gib": 64, "tflops": {"bf16": 0.1, "fp16": 0.1, "fp32": 0.1}, "mem_bw_gb_s": 10,
       "intra_node_gb_s": 5, "emulate": {"slowdown": 1}, "reserved_gib": 0}
plan = {"version": 1, "model": m["model"],
        "train": {"global_batch": B, "seq_len": T, "micro_batch": B, "precision": "fp32"}, "tp": 1,
        "pipelines": [{"micro_batches": 1, "stages": [{"layers": [0, L], "gpu": "cpu", "recompute": False,
                                                       "devices": [{"node": "n0", "index": 0}]}]}],
        "cluster": {"gpu_types": {"cpu": cpu}, "nodes": [{"name": "n0", "gpu": "cpu", "count": 1}],
                    "network": {"inter_node_gb_s": 1}}}
json.dump(plan, open(sys.argv[2], "w"))
PY
    # the step's sgemm calls, once (the same at any thread count)
    AH_SGEMM_LOG="$WORK/$name.calls" LD_PRELOAD="$BUILD/libsgemm_log.so" OPENBLAS_NUM_THREADS=1 "$AH" train \
        --plan "$WORK/$name.plan.json" --data "$WORK/text.bin" --steps 1 --quiet >/dev/null 2>&1
    [ -s "$WORK/$name.calls" ] || { echo "bench: no sgemm call logged ($BUILD/libsgemm_log.so)" >&2; exit 1; }
    flops=$(python3 -c 'import json,sys; m=json.load(open(sys.argv[1])); print(sum(l["count"]*(l["fwd_flops_per_mb"]+l["bwd_flops_per_mb"]) for l in m["layers"]))' "$WORK/$name.model.json")
    if [ $kernel_reported = 0 ]; then # the trainer's start-up line names the kernel
        "$AH" train --plan "$WORK/$name.plan.json" --data "$WORK/text.bin" --steps 1 2>/dev/null | grep "CPU matmuls" ||
            echo "(autohet's OpenBLAS kernel: unknown, no start-up line)"
        "$PY" -c 'import torch; torch.mm(torch.ones(64, 64), torch.ones(64, 64))
print("PyTorch BLAS: " + ", ".join(sorted({l.split()[-1] for l in open("/proc/self/maps") if "blas" in l.lower()})))'
        echo "(OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE-unset} OPENBLAS_L2_SIZE=${OPENBLAS_L2_SIZE-unset})"
        # the peak's kernel, and on stderr its warning when far below the CPU's flags
        echo "sgemm peak: $(OPENBLAS_NUM_THREADS=1 "$BUILD/bench_sgemm_peak" 256 | cut -d' ' -f2-)"
        kernel_reported=1
        echo "model: $ARCH"
        printf '%-6s %-30s %3s | %11s %11s %7s | %9s %10s %6s %6s | %s\n' config shape thr "autohet s" "torch s" "torch/ah" "ah GF/s" "sgemm GF/s" "/peak" "alone" "torch/ah per round | sgemm peak range | kernel"
    fi
    for thr in 1 2; do
        for ((r = 0; r < ROUNDS; r++)); do # the two sides alternate, so a slow spell hits both
            OPENBLAS_NUM_THREADS=$thr "$BUILD/bench_sgemm_peak" >"$WORK/peak.$r" 2>/dev/null # this round's peak, its kernel
            OPENBLAS_NUM_THREADS=$thr "$BUILD/bench_sgemm_calls" "$WORK/$name.calls" >"$WORK/alone.$r"
            OPENBLAS_NUM_THREADS=$thr "$AH" train --plan "$WORK/$name.plan.json" --data "$WORK/text.bin" \
                --steps $((STEPS + 1)) --quiet --metrics "$WORK/m.jsonl" 2>/dev/null
            python3 -c 'import json,sys; print(" ".join(str(json.loads(l)["seconds"]) for l in open(sys.argv[1]).readlines()[1:]))' \
                "$WORK/m.jsonl" >"$WORK/ah.$r"
            OMP_NUM_THREADS=$thr OPENBLAS_NUM_THREADS=$thr "$PY" "$SRC/bench/torch_step.py" --arch $ARCH --kv-heads "$KV" --d-ff "$FF" --layers "$L" --d "$C" --heads "$H" \
                --seq-len "$T" --batch "$B" --vocab "$V" --threads "$thr" --steps "$STEPS" |
                python3 -c 'import json,sys; print(" ".join(map(str, json.load(sys.stdin)["step_s"])))' >"$WORK/pt.$r"
        done
        python3 - "$name" "$shape" "$thr" "$flops" "$WORK" "$ROUNDS" <<'PY'
import statistics, sys
name, shape, thr = sys.argv[1:4]
flops, work, rounds = float(sys.argv[4]), sys.argv[5], int(sys.argv[6])
ah_rounds, pt_rounds = ([list(map(float, open(f"{work}/{side}.{r}").read().split())) for r in range(rounds)]
                        for side in ("ah", "pt"))
peak_lines = [open(f"{work}/peak.{r}").read().split() for r in range(rounds)]
peaks = [float(p[0]) for p in peak_lines]
kernels = "/".join(sorted({p[2] for p in peak_lines}))  # "154.21 OpenBLAS Cooperlake kernel (...)"
alone_s = [float(open(f"{work}/alone.{r}").read().split()[3]) for r in range(rounds)]
ah, pt = (statistics.median([x for steps in side for x in steps]) for side in (ah_rounds, pt_rounds))
gf = flops / ah / 1e9
# Each round's GFLOP/s against the peak measured just before it (the VM's speed drifts by up to
# 20 % within minutes, so a peak measured once per cell can belong to another spell); the median.
of_peak = statistics.median(flops / statistics.median(a) / 1e9 / p for a, p in zip(ah_rounds, peaks))
alone = statistics.median(flops / s / 1e9 / p for s, p in zip(alone_s, peaks))
ratios = [statistics.median(p) / statistics.median(a) for a, p in zip(ah_rounds, pt_rounds)]
print(f"{name:<6} {shape:<30} {thr:>3} | {ah:11.4f} {pt:11.4f} {pt / ah:7.2f}x | {gf:9.1f} {statistics.median(peaks):10.1f} {of_peak:6.2f} {alone:6.2f} | "
      + " ".join(f"{r:.2f}" for r in ratios) + f" | peaks {min(peaks):.0f}-{max(peaks):.0f} | {kernels}")
PY
    done
done
echo "(each side: the median of its $STEPS steps after one warm-up step in each of $ROUNDS rounds, pooled; the rounds alternate; load average now: $(cut -d' ' -f1-3 /proc/loadavg))"
