/* The backend of one training rank: its kernel table, the memory its tensors live in, and how its
 * groups sum device buffers (docs/gpu.md "Runtime integration").
 *
 * The plan's device type picks the backend. A CPU type (one with an "emulate" block, or a name
 * starting with "cpu") runs on the CPU backend: OpenBLAS kernels, host memory, MPI. Any other
 * type is a GPU and runs on the CUDA backend: CUDA kernels, device memory (the arenas' high-water
 * mark is then the device's), NCCL or host-staged MPI for the group sums; that needs a build with
 * -DAH_CUDA=ON. train.precision picks the table: fp32 anywhere, bf16 on CUDA only.
 *
 * AH_BACKEND=cuda in the environment forces the CUDA backend for a plan of CPU types (so the CPU
 * plans' equivalence tests run on a GPU; emulation still stretches compute as the type says);
 * unset, empty or "auto" picks by device type. One job runs one backend: a plan that mixes CPU and
 * GPU types is refused.
 *
 * Host code never dereferences the rank's tensors directly: it goes through runtime/mem.h's host
 * access (ah_mem_host_view, ah_mem_upload, ah_mem_download), which costs nothing on the CPU.
 */
#ifndef AH_RUNTIME_DEVICE_H
#define AH_RUNTIME_DEVICE_H

#include "comm/comm.h"
#include "comm/nccl.h"
#include "core/status.h"
#include "kernels/kernels.h"
#include "plan/plan.h"
#include "runtime/mem.h"

typedef struct ah_device {
    const ah_kernels_t *k;
    const ah_mem_space_t *space; /* &ah_mem_host on the CPU backend */
    int cuda;                    /* the rank's CUDA device; -1 on the CPU backend */
} ah_device_t;

/* Whether device type t runs on the CPU backend (an "emulate" block, or a name starting with "cpu"). */
bool ah_device_type_is_cpu(const ah_gpu_type_t *t);

/* Checks, from the plan alone (so every rank reaches the same verdict without communicating),
 * that the backend of device type `type` exists in this build and runs the plan's precision,
 * and that the plan uses one backend. Sets *cuda. */
ah_status_t ah_device_select(const ah_plan_t *plan, int type, bool *cuda, ah_error_t *err);
/* Starts the backend chosen by ah_device_select. `index` is the device's index in its node; a
 * node with fewer GPUs than ranks shares them (index modulo the visible devices). */
ah_status_t ah_device_open(ah_device_t *d, const ah_plan_t *plan, bool cuda, int index, ah_error_t *err);
/* The first asynchronous error of the backend since the last call (CUDA: also synchronises the
 * device); AH_OK on the CPU. Once per step. */
ah_status_t ah_device_check(const ah_device_t *d, ah_error_t *err);

/* A group of ranks that sums buffers of the rank's backend: MPI on host buffers, or on a CUDA
 * rank the device communicator over the same ranks. */
typedef struct ah_group {
    ah_comm_t *c;   /* NULL: this rank is not a member */
    ah_dcomm_t *dc; /* CUDA ranks: the device communicator over c */
} ah_group_t;

/* Collective over the group's members: on a CUDA rank, builds the device communicator over g->c
 * (NCCL, or MPI with host staging where members share a GPU). Nothing on the CPU or for a
 * non-member. */
ah_status_t ah_group_attach(const ah_device_t *d, ah_group_t *g, ah_error_t *err);
/* In-place sum of n floats of the backend's memory over the group. */
ah_status_t ah_group_sum(ah_group_t *g, float *buf, size_t n, ah_error_t *err);
void ah_group_free(ah_group_t *g);

#endif
