/* Internal to src/backend/: the CUDA backend's asynchronous checkpoint snapshots (backend.h's snap_*
 * entries; cuda_snapshot.c). Built with -DAH_CUDA=ON (or its emulation) only. */
#ifndef AH_BACKEND_CUDA_SNAPSHOT_H
#define AH_BACKEND_CUDA_SNAPSHOT_H

#include "backend/backend.h"

void *ah_cuda_snap_host_alloc(size_t bytes, char *why, size_t why_len);
void ah_cuda_snap_host_free(void *p);
ah_status_t ah_cuda_snap_create(int device, ah_snap_copy_t **out, ah_error_t *err);
void ah_cuda_snap_free(ah_snap_copy_t **c);
ah_status_t ah_cuda_snap_copy(ah_snap_copy_t *c, const ah_snap_range_t *ranges, int n, ah_error_t *err);
ah_status_t ah_cuda_snap_wait(ah_snap_copy_t *c, double *seconds, ah_error_t *err);
ah_status_t ah_cuda_snap_fence(ah_snap_copy_t *c, ah_error_t *err);

#endif
