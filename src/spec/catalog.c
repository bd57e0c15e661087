/* The built-in GPU catalog and per-type helpers.
 *
 * Conventions for every entry:
 *  - memory_gib: the data-sheet capacity, read as GiB (HBM and GDDR parts are built from binary
 *    sizes). nvidia-smi shows a little less on some parts (ECC, firmware carve-outs); a user who
 *    runs close to the limit can override memory_gib in the cluster file.
 *  - tflops: DENSE peaks (NVIDIA data sheets quote tensor figures "with sparsity", i.e. 2x; we
 *    halve those). bf16/fp16 are tensor-core rates with fp32 accumulation, which is what
 *    mixed-precision training uses; fp32 is the non-tensor (CUDA core) rate, since the CPU-style
 *    fp32 path does not use TF32.
 *  - intra_node_gb_s: per-GPU bandwidth in ONE direction to its node peers. NVIDIA quotes NVLink
 *    as the bidirectional total (A100 600 GB/s = 300 each way); a ring all-reduce is bound by
 *    the one-way rate, so that is what the cost model wants. PCIe parts get the one-way rate of
 *    their slot (Gen4 x16 ~ 32 GB/s, Gen3 x16 ~ 16 GB/s).
 *  - efficiency: the ceiling of the GEMM curve (cost/kernel_time.h): the fraction of peak the
 *    type's largest bf16 matmuls sustain in a training step. It is MAMF x SUSTAINED:
 *    MAMF, the Maximum Achievable Matmul FLOPS a microbenchmark measures (S. Bekman,
 *    ml-engineering, compute/accelerator, "Maximum Achievable Matmul FLOPS comparison table",
 *    mamf-finder.py: the best torch.matmul over a sweep of M, N, K), A100 SXM 267.9 of 312
 *    TFLOP/s = 0.86 and H100 SXM 792.1 of 989 = 0.80 (taken for the H200, H800 and H20:
 *    the same Hopper SMs); judgements for the rest: 0.80 for the other datacenter parts, 0.65 for
 *    GeForce cards and the T4, whose power and clock limits (T4: 70 W) keep sustained tensor
 *    clocks well under boost. SUSTAINED = 0.82 is FITTED, the one constant of the time model
 *    chosen to fit published runs: what a training step keeps of a microbenchmark's best GEMM
 *    (clocks under sustained load of all GPUs, the library's kernel choice for each shape,
 *    launch gaps). Fitted to the rows of bench/published_runs.json that are not excluded
 *    (Narayanan et al. 2021, Tables 1 and 2; Korthikanti et al. 2022; all A100), each priced
 *    with the schedule it ran: two decimals, the value with the smallest worst
 *    |predicted/published - 1| (0.82: 9.9 %, the 7.5B row at 0.90; 0.81: 10.7 %; 0.83: 10.1 %;
 *    docs/cost-model.md). It was 0.84, fitted with the 76B row priced as 1F1B although it ran
 *    the interleaved schedule (v = 3); priced interleaved, that row was 1.11 at 0.84.
 *    The shape terms of the curve (tile and wave quantization over sm_count, the K saturation)
 *    come on top; `autohet profile` replaces all of it with measurements.
 *  - sm_count: streaming multiprocessors, from each part's architecture whitepaper (cited per
 *    entry); the wave quantization of the GEMM curve runs tiles in waves of one per SM.
 *  - reserved_gib: memory a device loses before the model allocates anything: the CUDA context
 *    with cuBLAS/cuDNN kernels loaded (~0.3-0.6 GiB on Ampere/Hopper), NCCL channel buffers
 *    (~0.2-0.4 GiB for 8 ranks) and caching-allocator fragmentation slack. 1.0 GiB for all.
 */
#include <math.h>
#include <string.h>
#include <strings.h>

#include "spec/cluster.h"

#define SUSTAINED 0.82 /* fitted, see above */
#define A100_MAMF (0.86 * SUSTAINED) /* GEMM ceilings, see above */
#define H100_MAMF (0.80 * SUSTAINED)
#define DC (0.80 * SUSTAINED)
#define CONSUMER (0.65 * SUSTAINED)
#define RESERVED 1.0

/* {name, memory_gib, bf16, fp16, fp32, mem_bw_gb_s, intra_node_gb_s, efficiency, reserved_gib,
 *  emulate_slowdown, emulate_memory_mib, sm_count, attention_unfused} */
static const ah_gpu_type_t CATALOG[] = {
    /* NVIDIA A100 Tensor Core GPU data sheet (2021), SXM4 columns: BF16/FP16 tensor 312 dense
     * (624 sparse), FP32 19.5, HBM2 1,555 GB/s (40 GB) and HBM2e 2,039 GB/s (80 GB),
     * NVLink 3 600 GB/s bidirectional -> 300 each way. NVIDIA A100 Tensor Core GPU Architecture
     * whitepaper (2020): 108 SMs. */
    {"A100-40G", 40, 312, 312, 19.5, 1555, 300, A100_MAMF, RESERVED, 0, 0, 108, false},
    {"A100-80G", 80, 312, 312, 19.5, 2039, 300, A100_MAMF, RESERVED, 0, 0, 108, false},
    /* NVIDIA H100 Tensor Core GPU Architecture whitepaper (2022), Table 3, H100 SXM5: BF16/FP16
     * tensor 989.4 dense (1,978.9 sparse), FP32 66.9; H100 data sheet: 80 GB HBM3 3.35 TB/s,
     * NVLink 4 900 GB/s -> 450 each way; 132 SMs (whitepaper, H100 SXM5). "H100" is accepted as an
     * alias. */
    {"H100-SXM", 80, 989.4, 989.4, 66.9, 3350, 450, H100_MAMF, RESERVED, 0, 0, 132, false},
    /* NVIDIA H200 Tensor Core GPU data sheet (2024), SXM: 141 GB HBM3e 4.8 TB/s, same Hopper
     * compute as the H100 SXM (132 SMs), NVLink 900 GB/s. The driver exposes ~140 GiB, which we use. */
    {"H200", 140, 989.4, 989.4, 66.9, 4800, 450, H100_MAMF, RESERVED, 0, 0, 132, false},
    /* NVIDIA H800 SXM5 product brief (China-market H100): H100 SXM compute and memory, NVLink
     * cut to 400 GB/s bidirectional -> 200 each way (and FP64 cut, irrelevant here); 132 SMs. */
    {"H800", 80, 989.4, 989.4, 66.9, 3350, 200, H100_MAMF, RESERVED, 0, 0, 132, false},
    /* NVIDIA H20 product brief (2024, China market; figures as published by OEMs and the
     * AutoHet paper): 96 GB HBM3 4.0 TB/s, BF16/FP16 tensor 148 dense (296 sparse), FP32 44,
     * NVLink 900 GB/s -> 450 each way; 78 SMs as OEMs report it (no NVIDIA whitepaper). */
    {"H20", 96, 148, 148, 44, 4000, 450, H100_MAMF, RESERVED, 0, 0, 78, false},
    /* NVIDIA L40S data sheet (2023): 48 GB GDDR6 864 GB/s, BF16/FP16 tensor 362.05 dense
     * (733 sparse), FP32 91.6; no NVLink, PCIe Gen4 x16 64 GB/s bidirectional -> 32; 142 SMs (Ada whitepaper, AD102). */
    {"L40S", 48, 362.05, 362.05, 91.6, 864, 32, DC, RESERVED, 0, 0, 142, false},
    /* A10G is AWS's variant of the A10 (GA102) and has no NVIDIA data sheet of its own; AWS
     * quotes 24 GB and 250 INT8 TOPS, matching the NVIDIA A10 data sheet, whose figures we use:
     * BF16/FP16 tensor 125 dense (250 sparse), FP32 31.2, GDDR6 600 GB/s; PCIe Gen4 x16 -> 32.
     * Reported sustained tensor throughput is lower than on the A10; profile if it matters. 72 SMs
     * (A10 data sheet, GA102). */
    {"A10G", 24, 125, 125, 31.2, 600, 32, DC, RESERVED, 0, 0, 72, false},
    /* NVIDIA V100 Tensor Core GPU data sheet (2020), V100 SXM2 column: Tensor Performance 125
     * TFLOPS (the Volta whitepaper, 2017: "mixed-precision FP16/FP32", i.e. fp16 products with
     * fp32 accumulation, dense: Volta has no sparsity), FP32 15.7, 16 GB HBM2 900 GB/s, NVLink 2
     * 300 GB/s bidirectional -> 150. No bf16 rate: Volta has no bf16 tensor cores (bf16 arrived
     * with Ampere), so the type cannot run bf16 and trains fp16 with loss scaling instead. NVIDIA
     * Tesla V100 GPU Architecture whitepaper (2017): 80 SMs. */
    {"V100-16G", 16, 0, 125, 15.7, 900, 150, DC, RESERVED, 0, 0, 80, false},
    /* NVIDIA T4 Tensor Core GPU data sheet (2019): Mixed Precision (FP16/FP32) 65 TFLOPS (dense:
     * Turing has no sparsity), Single Precision (FP32) 8.1, 16 GB GDDR6 320 GB/s, PCIe Gen3 x16
     * 32 GB/s bidirectional -> 16. No bf16 rate: Turing has no bf16 tensor cores either. NVIDIA
     * Turing GPU Architecture whitepaper (2018), Tesla T4: 40 SMs. */
    {"T4", 16, 0, 65, 8.1, 320, 16, CONSUMER, RESERVED, 0, 0, 40, false},
    /* NVIDIA Ada Lovelace GPU Architecture whitepaper (2022), Appendix A, GeForce RTX 4090:
     * FP16/BF16 tensor with FP32 accumulate 165.2 dense (GeForce runs fp32 accumulation at half
     * the fp16-accumulate rate of 330.3), FP32 82.6, GDDR6X 1,008 GB/s; PCIe Gen4 x16 -> 32,
     * no NVLink; 128 SMs. */
    {"RTX-4090", 24, 165.2, 165.2, 82.6, 1008, 32, CONSUMER, RESERVED, 0, 0, 128, false},
    /* NVIDIA Ampere GA102 GPU Architecture whitepaper (2020), Table 9, GeForce RTX 3090:
     * FP16/BF16 tensor with FP32 accumulate 71 dense (142 with fp16 accumulate), FP32 35.6,
     * GDDR6X 936 GB/s; PCIe Gen4 x16 -> 32 (its NVLink bridge pairs only two cards, so a node
     * of them talks over PCIe); 82 SMs. */
    {"RTX-3090", 24, 71, 71, 35.6, 936, 32, CONSUMER, RESERVED, 0, 0, 82, false},
};
#define N_CATALOG ((int)(sizeof CATALOG / sizeof CATALOG[0]))

/* Other names users write for a catalog type. */
static const struct {
    const char *alias, *name;
} ALIASES[] = {{"H100", "H100-SXM"}};

int ah_gpu_catalog_count(void) { return N_CATALOG; }

const ah_gpu_type_t *ah_gpu_catalog_get(int i) {
    return (i >= 0 && i < N_CATALOG) ? &CATALOG[i] : NULL;
}

/* Case-insensitive, so "a100-80g" works on a command line; the result carries the canonical
 * spelling. */
const ah_gpu_type_t *ah_gpu_catalog_find(const char *name) {
    for (size_t a = 0; a < sizeof ALIASES / sizeof ALIASES[0]; a++)
        if (strcasecmp(name, ALIASES[a].alias) == 0) name = ALIASES[a].name;
    for (int i = 0; i < N_CATALOG; i++)
        if (strcasecmp(name, CATALOG[i].name) == 0) return &CATALOG[i];
    return NULL;
}

int64_t ah_gpu_capacity_bytes(const ah_gpu_type_t *g) {
    if (g->emulate_memory_mib > 0) return (int64_t)llround(g->emulate_memory_mib * 1048576.0);
    return (int64_t)llround(g->memory_gib * 1073741824.0);
}

double ah_gpu_peak_flops(const ah_gpu_type_t *g, int precision) {
    const double tflops[] = {g->tflops_fp32, g->tflops_bf16, g->tflops_fp16};
    return precision >= 0 && precision < 3 ? tflops[precision] * 1e12 : 0;
}
