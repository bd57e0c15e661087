/* The CPU backend's table. */
#include <string.h>

#include "kernels/cpu/cpu.h"

void ah_cpu_zero(float *x, size_t n) { memset(x, 0, n * sizeof *x); }

AH_KERNELS_DEFINE_PLAIN(ah_cpu)

#define CPU_ENTRY(prefix, entry) .entry = prefix##_##entry,
static const ah_kernels_t cpu_kernels = {.name = "cpu", AH_KERNEL_ENTRIES(CPU_ENTRY, ah_cpu)};

const ah_kernels_t *ah_kernels_cpu(void) { return &cpu_kernels; }
