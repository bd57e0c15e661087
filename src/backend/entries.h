/* Internal to src/backend/: the registry's entries, one file each (registry.c lists them). */
#ifndef AH_BACKEND_ENTRIES_H
#define AH_BACKEND_ENTRIES_H

#include "backend/backend.h"

extern const ah_backend_t ah_backend_cpu;  /* cpu.c */
extern const ah_backend_t ah_backend_cuda; /* cuda.c, built with -DAH_CUDA=ON only */

/* cpu_snapshot.c: the CPU backend's snap_copy_* (backend.h), made by the thread that waits first. */
ah_status_t ah_cpu_snap_create(int device, ah_snap_copy_t **out, ah_error_t *err);
void ah_cpu_snap_free(ah_snap_copy_t **c);
ah_status_t ah_cpu_snap_copy(ah_snap_copy_t *c, const ah_snap_range_t *ranges, int n, ah_error_t *err);
ah_status_t ah_cpu_snap_wait(ah_snap_copy_t *c, double *seconds, ah_error_t *err);
ah_status_t ah_cpu_snap_fence(ah_snap_copy_t *c, ah_error_t *err);

#endif
