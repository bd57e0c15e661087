/* The backend of one training rank: its kernel table, the memory its tensors live in, and how its
 * groups sum device buffers (docs/gpu.md "Runtime integration"). The backends themselves are
 * handles of backend/backend.h's registry; this file picks one for the rank and starts it.
 *
 * The plan's device type picks the backend. A CPU type (one with an "emulate" block, or a name
 * starting with "cpu") runs on the registry's CPU backend: OpenBLAS kernels, host memory, MPI.
 * Any other type is a GPU and runs on its GPU backend, CUDA: CUDA kernels, device memory (the
 * arenas' high-water mark is then the device's), NCCL or host-staged MPI for the group sums; that
 * needs a build with -DAH_CUDA=ON. train.precision picks the table: fp32 anywhere, bf16 and fp16 where
 * the backend trains in them (CUDA only; fp16 with dynamic loss scaling, runtime/loss_scale.h).
 *
 * AH_BACKEND=cuda in the environment forces the GPU backend for a plan of CPU types (so the CPU
 * plans' equivalence tests run on a GPU; emulation still stretches compute as the type says);
 * unset, empty or "auto" picks by device type. One job runs one backend: a plan that mixes CPU and
 * GPU types is refused.
 *
 * Host code never dereferences the rank's tensors directly: it goes through runtime/mem.h's host
 * access (ah_mem_host_view, ah_mem_upload, ah_mem_download), which costs nothing on the CPU.
 */
#ifndef AH_RUNTIME_DEVICE_H
#define AH_RUNTIME_DEVICE_H

#include "backend/backend.h"
#include "comm/comm.h"
#include "core/status.h"
#include "kernels/kernels.h"
#include "plan/plan.h"
#include "runtime/mem.h"

/* A rank's started backend. */
typedef struct ah_device {
    const ah_backend_t *backend;
    const ah_kernels_t *k;       /* the table of the plan's precision */
    int index;                   /* the backend's device; -1 on the CPU backend */
} ah_device_t;

/* Whether device type t runs on the CPU backend (an "emulate" block, or a name starting with "cpu"). */
bool ah_device_type_is_cpu(const ah_gpu_type_t *t);

/* The backend of device type `type`, from the plan alone (so every rank reaches the same verdict
 * without communicating): checks that this build has it, that it runs the plan's precision, and
 * that the plan uses one backend. */
ah_status_t ah_device_select(const ah_plan_t *plan, int type, const ah_backend_t **backend,
                             ah_error_t *err);
/* Starts the backend chosen by ah_device_select. `index` is the device's index in its node; a
 * node with fewer GPUs than ranks shares them (index modulo the visible devices). */
ah_status_t ah_device_open(ah_device_t *d, const ah_plan_t *plan, const ah_backend_t *backend,
                           int index, ah_error_t *err);
/* The first asynchronous error of the backend since the last call (CUDA: also synchronises the
 * device); AH_OK on the CPU. Once per step. */
ah_status_t ah_device_check(const ah_device_t *d, ah_error_t *err);

/* A group of ranks that sums buffers of the rank's backend: MPI on host buffers, or on a GPU
 * rank the backend's device communicator over the same ranks. */
typedef struct ah_group {
    ah_comm_t *c;                /* NULL: this rank is not a member */
    ah_dcomm_t *dc;              /* GPU ranks: the device communicator over c */
    const ah_backend_t *backend; /* dc's */
} ah_group_t;

/* Collective over the group's members: on a GPU rank, builds the device communicator over g->c
 * (CUDA: NCCL, or MPI with host staging where members share a GPU). Nothing on the CPU or for a
 * non-member. */
ah_status_t ah_group_attach(const ah_device_t *d, ah_group_t *g, ah_error_t *err);
/* In-place sum / maximum of n floats of the backend's memory over the group. `done` (sum,
 * reduce-scatter, all-gather; NULL: in order with the compute): on a GPU rank, the collective goes
 * on the backend's communication stream and is recorded in done (backend.h dcomm_event_*); a
 * group without a device communicator takes NULL only. */
ah_status_t ah_group_sum(ah_group_t *g, float *buf, size_t n, ah_dcomm_event_t *done, ah_error_t *err);
ah_status_t ah_group_max(ah_group_t *g, float *buf, size_t n, ah_error_t *err);
/* The sharded optimizer's in-place uneven reduce-scatter and all-gather of buffers of the backend's
 * memory (comm.h's ah_comm_reduce_scatter_f32 / ah_comm_allgather_f32 contract). */
ah_status_t ah_group_reduce_scatter(ah_group_t *g, float *buf, const int64_t *counts, ah_dcomm_event_t *done,
                                    ah_error_t *err);
ah_status_t ah_group_allgather(ah_group_t *g, float *buf, const int64_t *counts, ah_dcomm_event_t *done,
                               ah_error_t *err);
void ah_group_free(ah_group_t *g);

#endif
