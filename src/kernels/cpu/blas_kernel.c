/* Which of OpenBLAS's kernels the CPU backend's matmuls run. A DYNAMIC_ARCH OpenBLAS (Debian's)
 * picks them when it loads, from the CPU or from OPENBLAS_CORETYPE, and the choice moves step
 * times a lot: on this project's Zen 5 machine a one-thread 1024^3 sgemm runs at about 105
 * GFLOP/s with the AVX2 "Haswell" kernel and 195 with the AVX-512 ones (bench_sgemm_peak); on an
 * AVX-512 Xeon VM whose CPU model OpenBLAS 0.3.21 does not know ("Intel(R) Xeon(R) Processor") it
 * picks the SSE3 "Prescott" kernel, 16-30 GFLOP/s against 154 with Cooperlake. So a run and a
 * profile say which one they ran with, and warn when it is below what the CPU's flags allow. */
#include <cblas.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "kernels/cpu/blas_kernel.h"

void ah_cpu_blas_describe(char *buf, size_t n) {
    const char *forced = getenv("OPENBLAS_CORETYPE");
    if (forced && *forced)
        snprintf(buf, n, "OpenBLAS %s kernel (OPENBLAS_CORETYPE=%s)", openblas_get_corename(), forced);
    else
        snprintf(buf, n, "OpenBLAS %s kernel (OpenBLAS's own choice for this CPU)", openblas_get_corename());
}

/* OpenBLAS's x86-64 core names (DYNAMIC_ARCH, 0.3.21-0.3.28) by the widest vector instructions
 * their sgemm kernels use. Bulldozer to Excavator run AVX/FMA4 kernels, Zen the Haswell ones. */
static const struct {
    const char *core;
    int tier;
} CORES[] = {
    {"Katmai", AH_BLAS_SSE},         {"Coppermine", AH_BLAS_SSE},   {"Northwood", AH_BLAS_SSE},
    {"Prescott", AH_BLAS_SSE},       {"Banias", AH_BLAS_SSE},       {"Atom", AH_BLAS_SSE},
    {"Core2", AH_BLAS_SSE},          {"Penryn", AH_BLAS_SSE},       {"Dunnington", AH_BLAS_SSE},
    {"Nehalem", AH_BLAS_SSE},        {"Athlon", AH_BLAS_SSE},       {"Opteron", AH_BLAS_SSE},
    {"Opteron_SSE3", AH_BLAS_SSE},   {"Barcelona", AH_BLAS_SSE},    {"Nano", AH_BLAS_SSE},
    {"Bobcat", AH_BLAS_SSE},         {"Sandybridge", AH_BLAS_AVX},  {"Bulldozer", AH_BLAS_AVX},
    {"Piledriver", AH_BLAS_AVX},     {"Steamroller", AH_BLAS_AVX},  {"Excavator", AH_BLAS_AVX},
    {"Haswell", AH_BLAS_AVX2},       {"Zen", AH_BLAS_AVX2},         {"SkylakeX", AH_BLAS_AVX512},
    {"Cooperlake", AH_BLAS_AVX512},  {"SapphireRapids", AH_BLAS_AVX512},
};

static const char *const TIER_NAMES[] = {"SSE", "AVX", "AVX2", "AVX-512"};

int ah_blas_core_tier(const char *core) {
    for (size_t i = 0; core && i < sizeof CORES / sizeof *CORES; i++)
        if (strcasecmp(core, CORES[i].core) == 0) return CORES[i].tier;
    return -1;
}

/* Whether `word` is one of the space-separated words of flags. */
static bool has_flag(const char *flags, const char *word) {
    const size_t n = strlen(word);
    for (const char *p = flags; (p = strstr(p, word)) != NULL; p += n)
        if ((p == flags || p[-1] == ' ' || p[-1] == '\t') && (p[n] == 0 || p[n] == ' ' || p[n] == '\t' || p[n] == '\n'))
            return true;
    return false;
}

const char *ah_blas_core_for_flags(const char *flags, int *tier) {
    const char *core = NULL;
    int t = -1;
    /* OpenBLAS's own tests for its AVX-512 kernels: F, CD, BW, DQ and VL; BF16 for Cooperlake. */
    if (flags && has_flag(flags, "avx512f") && has_flag(flags, "avx512cd") && has_flag(flags, "avx512bw") &&
        has_flag(flags, "avx512dq") && has_flag(flags, "avx512vl"))
        core = has_flag(flags, "avx512_bf16") ? "Cooperlake" : "SkylakeX", t = AH_BLAS_AVX512;
    else if (flags && has_flag(flags, "avx2") && has_flag(flags, "fma"))
        core = "Haswell", t = AH_BLAS_AVX2;
    else if (flags && has_flag(flags, "avx"))
        core = "Sandybridge", t = AH_BLAS_AVX;
    if (tier) *tier = t;
    return core;
}

bool ah_blas_kernel_advice(const char *core, const char *flags, const char *forced, char *buf, size_t n) {
    int best_tier;
    const char *best = ah_blas_core_for_flags(flags, &best_tier);
    const int tier = ah_blas_core_tier(core);
    if (!best || tier < 0 || tier >= best_tier) return false;
    if (forced && *forced)
        snprintf(buf, n,
                 "OPENBLAS_CORETYPE=%s runs OpenBLAS's %s kernel (%s), far below this CPU, whose flags allow %s "
                 "(%s): matmuls may run several times slower; unset OPENBLAS_CORETYPE or set "
                 "OPENBLAS_CORETYPE=%s",
                 forced, core, TIER_NAMES[tier], best, TIER_NAMES[best_tier], best);
    else
        snprintf(buf, n,
                 "OpenBLAS chose its %s kernel (%s), far below this CPU, whose flags allow %s (%s): matmuls may "
                 "run several times slower (OpenBLAS does not know this CPU model, as on some VMs); set "
                 "OPENBLAS_CORETYPE=%s",
                 core, TIER_NAMES[tier], best, TIER_NAMES[best_tier], best);
    return true;
}

bool ah_cpu_blas_advice(char *buf, size_t n) {
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return false;
    char line[8192];
    bool found = false;
    while (!found && fgets(line, sizeof line, f))
        found = strncmp(line, "flags", 5) == 0 && strchr(line, ':');
    fclose(f);
    return found && ah_blas_kernel_advice(openblas_get_corename(), strchr(line, ':') + 1,
                                          getenv("OPENBLAS_CORETYPE"), buf, n);
}
