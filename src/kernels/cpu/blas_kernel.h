/* Which OpenBLAS kernel the CPU backend's matmuls run (blas_kernel.c says why it matters). */
#ifndef AH_KERNELS_CPU_BLAS_KERNEL_H
#define AH_KERNELS_CPU_BLAS_KERNEL_H

#include <stddef.h>

/* One line for people and for profiles: the kernel in use, and who chose it. */
void ah_cpu_blas_describe(char *buf, size_t n);

#endif
