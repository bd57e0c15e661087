/* Internal to src/backend/: the registry's entries, one file each (registry.c lists them). */
#ifndef AH_BACKEND_ENTRIES_H
#define AH_BACKEND_ENTRIES_H

#include "backend/backend.h"

extern const ah_backend_t ah_backend_cpu;  /* cpu.c */
extern const ah_backend_t ah_backend_cuda; /* cuda.c, built with -DAH_CUDA=ON only */

#endif
