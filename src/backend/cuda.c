/* The CUDA backend (backend.h): kernels/cuda's tables, device memory, and comm/nccl.h's device
 * communicators for the group sums. Built with -DAH_CUDA=ON only; plain C (no CUDA header). */
#include "backend/cuda_snapshot.h"
#include "backend/entries.h"
#include "comm/nccl.h"
#include "kernels/cuda/kernels_cuda.h"

/* precision: 0 fp32, 1 bf16, 2 fp16 (backend.h). */
static ah_status_t cuda_open(int index, int precision, const ah_kernels_t **kernels, int *device,
                             ah_error_t *err) {
    const int n = ah_cuda_device_count();
    ah_status_t s = ah_cuda_init(n > 0 ? index % n : 0, err);
    if (s != AH_OK) return s;
    *kernels = precision == 1 ? ah_kernels_cuda_bf16() : precision == 2 ? ah_kernels_cuda_fp16() : ah_kernels_cuda();
    *device = index % n;
    return AH_OK;
}

/* NCCL where every member has its own GPU, host-staged MPI where members share one. */
static ah_status_t cuda_dcomm_create(ah_comm_t *group, int device, ah_dcomm_t **out,
                                     ah_error_t *err) {
    return ah_dcomm_create(group, device, 0, out, err);
}

static const ah_mem_space_t cuda_space = {"CUDA device", ah_cuda_alloc, ah_cuda_free,
                                          ah_cuda_upload, ah_cuda_download};

const ah_backend_t ah_backend_cuda = {
    .name = "cuda",
    .title = "CUDA backend",
    .gpu = true,
    .half = true,
    .space = &cuda_space,
    .open = cuda_open,
    .check = ah_cuda_check,
    /* comm/nccl.h's device communicators: collectives, point-to-point batches, and their events */
    .dcomm_create = cuda_dcomm_create, .dcomm_free = ah_dcomm_free, .dcomm_kind = ah_dcomm_kind,
    .dcomm_sum = ah_dcomm_allreduce_f32, .dcomm_max = ah_dcomm_allreduce_max_f32,
    .dcomm_reduce_scatter = ah_dcomm_reduce_scatter_f32, .dcomm_allgather = ah_dcomm_allgather_f32,
    .dcomm_p2p = ah_dcomm_p2p_f32,
    .dcomm_event_create = ah_dcomm_event_create, .dcomm_event_wait = ah_dcomm_event_wait,
    .dcomm_event_free = ah_dcomm_event_free,
    /* asynchronous checkpoint snapshots: pinned host memory, a side stream (cuda_snapshot.c) */
    .snap_host_alloc = ah_cuda_snap_host_alloc, .snap_host_free = ah_cuda_snap_host_free,
    .snap_copy_create = ah_cuda_snap_create, .snap_copy_free = ah_cuda_snap_free, .snap_copy = ah_cuda_snap_copy,
    .snap_copy_wait = ah_cuda_snap_wait, .snap_copy_fence = ah_cuda_snap_fence,
};
