# The preamble of a bench on the emulated CPU cluster (bench_cp.sh, bench_interleaved.sh,
# bench_zero_bubble.sh), sourced with the bench's BUILD_DIR as $1 and STEPS, WARMUP (and SLOW for
# emu_cluster) set: BUILD (absolute), AH (the binary), WORK (removed at exit; kept and named with
# KEEP=1), WORK/text.bin (the GPL-3 tokenized), MPIRUN (one machine, ranks yielding when idle), the
# MPI environment, and a line of the cores and the load at the start; then
#   emu_cluster FILE COUNT        writes a cluster of one node n0 of COUNT devices of the emulated
#                                 type cpu-emu (SLOW times slower than this CPU's roofline);
#   train_median NP PLAN TAG      trains PLAN on NP ranks for WARMUP + STEPS steps (metrics and
#                                 stderr in WORK/TAG.*) and prints the median step seconds after
#                                 the warm-up; exits on a failed run, its stderr shown.
BUILD=$(cd "${1:?usage: $0 BUILD_DIR}" && pwd)
AH=$BUILD/autohet
WORK=$(mktemp -d)
[ -n "${KEEP:-}" ] && echo "(work files kept in $WORK)" || trap 'rm -rf "$WORK"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
MPIRUN="mpirun --oversubscribe --bind-to none --mca mpi_yield_when_idle 1 --mca plm isolated -x OPENBLAS_NUM_THREADS"
echo "(cores: $(nproc), load average at the start: $(cut -d' ' -f1-3 /proc/loadavg))"
"$AH" tokenize /usr/share/common-licenses/GPL-3 -o "$WORK/text.bin" >/dev/null

emu_cluster() {
    cat >"$1" <<JSON
{"gpu_types": {"cpu-emu": {"tflops": {"bf16": 0.0125, "fp16": 0.0125, "fp32": 0.0125}, "mem_bw_gb_s": 2.5,
               "intra_node_gb_s": 5, "emulate": {"slowdown": $SLOW, "memory_mib": 512}}},
 "nodes": [{"name": "n0", "gpu": "cpu-emu", "count": $2, "usd_per_gpu_hour": 0.3}],
 "network": {"inter_node_gb_s": 1, "cloud_gb_s": 0.1}}
JSON
}

train_median() {
    $MPIRUN -np "$1" "$AH" train --plan "$2" --data "$WORK/text.bin" --steps $((WARMUP + STEPS)) --quiet \
        --metrics "$WORK/$3.jsonl" 2>"$WORK/$3.err" || { cat "$WORK/$3.err" >&2; exit 1; }
    python3 -c 'import json, statistics, sys; print(statistics.median([json.loads(l)["seconds"] for l in open(sys.argv[1]) if "\"loss\"" in l][int(sys.argv[2]):]))' "$WORK/$3.jsonl" "$WARMUP"
}
