/* Which OpenBLAS kernel the CPU backend's matmuls run, and whether it is far below what the CPU
 * allows (blas_kernel.c says why it matters).
 *
 * The check is a pure function of a core name and a /proc/cpuinfo "flags" line, so it is tested
 * without depending on the machine; ah_cpu_blas_advice applies it to this process and CPU. It only
 * advises: autohet never sets OPENBLAS_CORETYPE itself (a forced kernel has computed wrong results
 * on some processors). */
#ifndef AH_KERNELS_CPU_BLAS_KERNEL_H
#define AH_KERNELS_CPU_BLAS_KERNEL_H

#include <stdbool.h>
#include <stddef.h>

/* The widest vector instructions a kernel uses: each tier's sgemm is several times the last's. */
enum { AH_BLAS_SSE = 0, AH_BLAS_AVX = 1, AH_BLAS_AVX2 = 2, AH_BLAS_AVX512 = 3 };

/* One line for people and for profiles: the kernel in use, and who chose it. */
void ah_cpu_blas_describe(char *buf, size_t n);

/* The tier of an OpenBLAS x86-64 core name (openblas_get_corename(), any case), or -1 for a name
 * it does not know (another architecture's: no advice then). */
int ah_blas_core_tier(const char *core);
/* The best OpenBLAS core name for a CPU with these flags (space-separated, as /proc/cpuinfo's
 * "flags" line: avx512f+cd+bw+dq+vl -> "SkylakeX", with avx512_bf16 -> "Cooperlake"; avx2+fma ->
 * "Haswell"; avx -> "Sandybridge"), its tier in *tier (may be NULL); NULL (tier -1) when the
 * flags allow nothing above SSE or flags is NULL. */
const char *ah_blas_core_for_flags(const char *flags, int *tier);
/* Whether kernel `core` is of a lower tier than the flags allow; if so, writes one line into buf
 * naming the kernel, what the flags allow and what to set (OPENBLAS_CORETYPE=NAME). `forced` is
 * OPENBLAS_CORETYPE's value (NULL or "" when unset). */
bool ah_blas_kernel_advice(const char *core, const char *flags, const char *forced, char *buf, size_t n);
/* ah_blas_kernel_advice for this process's kernel and this machine's first "flags" line of
 * /proc/cpuinfo (false where there is none). */
bool ah_cpu_blas_advice(char *buf, size_t n);

#endif
