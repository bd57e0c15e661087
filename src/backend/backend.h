/* A compute backend as one handle, and the registry of the backends this build has.
 *
 * A backend is what a training rank runs on: its kernel tables (kernels/kernels.h), the memory
 * space its tensors live in (mem_space.h), how a group of its ranks sums buffers of that memory
 * (a device communicator, or MPI on host buffers), and the per-step check of its asynchronous
 * errors. runtime/device.c picks one from the registry by device type (and AH_BACKEND) and calls
 * through the handle; no file above src/backend/ knows which backends were built.
 *
 * The registry: the CPU backend always (OpenBLAS kernels, host memory, MPI); the CUDA backend in
 * a build with -DAH_CUDA=ON (CUDA kernels, device memory, NCCL or host-staged MPI: comm/nccl.h).
 *
 * Layers: kernels/ and comm/ below, runtime/ above. Handles are static and never freed; opening
 * one starts process-wide state (CUDA: the device and cuBLAS), kept until the process exits.
 */
#ifndef AH_BACKEND_BACKEND_H
#define AH_BACKEND_BACKEND_H

#include <stdbool.h>
#include <stddef.h>

#include "backend/mem_space.h"
#include "comm/comm.h"
#include "comm/nccl.h" /* ah_dcomm_p2p_t (a plain C type; the functions are the CUDA build's) */
#include "core/status.h"
#include "kernels/kernels.h"

/* A backend's communicator over buffers of its memory, built over a group of comm.h, and the
 * event that marks an overlapped collective of it (comm/nccl.h "Overlap"). */
typedef struct ah_dcomm ah_dcomm_t;
typedef struct ah_dcomm_event ah_dcomm_event_t;
/* A checkpoint snapshot's copies from the backend's memory into page-locked host memory, on a
 * stream of their own (snap_* below). */
typedef struct ah_snap_copy ah_snap_copy_t;
/* One copy of a snapshot: bytes from src (the backend's memory) to dst (its snap_host_alloc). A
 * backend whose copies are the host's own (the CPU's memcpys) calls copy(dst, src, bytes, ctx)
 * instead where it is set (the caller's copy that also takes the bytes' checksum); one that copies
 * otherwise (a GPU's DMA) ignores it. */
typedef struct ah_snap_range {
    void *dst;
    const void *src;
    size_t bytes;
    void (*copy)(void *dst, const void *src, size_t bytes, void *ctx);
    void *ctx;
} ah_snap_range_t;

typedef struct ah_backend {
    const char *name;  /* "cpu", "cuda" */
    const char *title; /* for messages, which say "the <title>": "CPU backend" */
    bool gpu;          /* runs the GPU device types; otherwise the CPU (emulated) ones */
    bool half;         /* trains in bf16 and fp16 too; every backend trains in fp32 */
    const ah_mem_space_t *space; /* where a rank's tensors live */

    /* Starts the backend for a rank on device `index` of its node (a node with fewer devices
     * than ranks shares them: index modulo the visible devices) and gives the kernel table of
     * the precision (0 fp32, 1 bf16, 2 fp16: the values of cost/cost.h's ah_precision_t; 1 and 2
     * only where `half`) and the device it took (-1: none). May fail on one rank alone (no
     * usable device): the caller agrees on the outcome with the others. */
    ah_status_t (*open)(int index, int precision, const ah_kernels_t **kernels, int *device,
                        ah_error_t *err);
    /* The first asynchronous error since the last call (and a device synchronisation); NULL
     * where the backend has none (the CPU: its kernels are synchronous and cannot fail). */
    ah_status_t (*check)(ah_error_t *err);

    /* Device communication; NULL where the space is host memory and groups sum with MPI.
     * dcomm_create is collective over `group`; `device` is what open gave. dcomm_sum and
     * dcomm_max are an in-place sum and maximum of n floats of the space over the group. */
    ah_status_t (*dcomm_create)(ah_comm_t *group, int device, ah_dcomm_t **out, ah_error_t *err);
    ah_status_t (*dcomm_sum)(ah_dcomm_t *dc, float *buf, size_t n, ah_dcomm_event_t *done, ah_error_t *err);
    ah_status_t (*dcomm_max)(ah_dcomm_t *dc, float *buf, size_t n, ah_error_t *err);
    /* The sharded optimizer's in-place uneven reduce-scatter and all-gather (comm.h's contract). */
    ah_status_t (*dcomm_reduce_scatter)(ah_dcomm_t *dc, float *buf, const int64_t *counts, ah_dcomm_event_t *done,
                                        ah_error_t *err);
    ah_status_t (*dcomm_allgather)(ah_dcomm_t *dc, float *buf, const int64_t *counts, ah_dcomm_event_t *done,
                                   ah_error_t *err);
    void (*dcomm_free)(ah_dcomm_t **dc);
    /* A batch of point-to-point transfers (context parallelism's ring step, the pipeline's sends
     * and receives), each op's `done` recorded after it (overlapped where the communicator can:
     * comm/nccl.h's ah_dcomm_p2p_f32). dcomm_kind names how the communicator moves data ("nccl"). */
    ah_status_t (*dcomm_p2p)(ah_dcomm_t *dc, const ah_dcomm_p2p_t *ops, int n_ops, int tag, ah_error_t *err);
    const char *(*dcomm_kind)(const ah_dcomm_t *dc);
    /* Overlap: dcomm_sum, dcomm_reduce_scatter and dcomm_allgather with a `done` event run on a
     * communication stream after the compute issued so far and return at once (done NULL: in
     * order on the compute stream); dcomm_event_wait orders the compute after the collective
     * recorded in the event. Events are made and freed here (free: NULL-safe). */
    ah_status_t (*dcomm_event_create)(ah_dcomm_event_t **out, ah_error_t *err);
    ah_status_t (*dcomm_event_wait)(ah_dcomm_event_t *ev, ah_error_t *err);
    void (*dcomm_event_free)(ah_dcomm_event_t **ev);

    /* Asynchronous checkpoint snapshots (runtime/ckpt_async.c). On the CPU (cpu_snapshot.c) the
     * copies are memcpys made by the first thread that waits for them (the background writer, or
     * the fence), not by snap_copy, and the fence is a host wait; its snap_host_* are NULL.
     * snap_host_alloc / snap_host_free: page-locked host memory for the snapshot buffer (CUDA:
     *   cudaHostAlloc), so the copies into it are DMA, asynchronous; NULL with the reason in why
     *   (NULL entries: the caller mallocs the buffer).
     * snap_copy_create: the side stream and the two events one snapshot's copies use (made once,
     *   kept); snap_copy_free waits for its copies first (NULL-safe).
     * snap_copy: n copies on the side stream, after an event recorded on the compute stream (they
     *   read the buffers as the compute issued so far leaves them), then an event recorded after
     *   them; returns at once. The buffers must not be written before snap_copy_fence.
     * snap_copy_wait: the host blocks until those copies are done (CUDA: cudaEventSynchronize);
     *   any thread may call it (the background writer does); *seconds: how long they took on the
     *   device, from the compute stream's event to the last copy's end.
     * snap_copy_fence: the compute stream's later work waits for the copies (CUDA:
     *   cudaStreamWaitEvent; no host wait; the CPU: the calling thread makes what is left and
     *   waits): the trainer calls it before the next AdamW. */
    void *(*snap_host_alloc)(size_t bytes, char *why, size_t why_len);
    void (*snap_host_free)(void *p);
    ah_status_t (*snap_copy_create)(int device, ah_snap_copy_t **out, ah_error_t *err);
    void (*snap_copy_free)(ah_snap_copy_t **c);
    ah_status_t (*snap_copy)(ah_snap_copy_t *c, const ah_snap_range_t *ranges, int n, ah_error_t *err);
    ah_status_t (*snap_copy_wait)(ah_snap_copy_t *c, double *seconds, ah_error_t *err);
    ah_status_t (*snap_copy_fence)(ah_snap_copy_t *c, ah_error_t *err);
} ah_backend_t;

/* The registry, CPU first: backends 0 .. ah_backend_count() - 1. */
int ah_backend_count(void);
const ah_backend_t *ah_backend_at(int i);
/* The backend named `name`, NULL when this build has none. */
const ah_backend_t *ah_backend_find(const char *name);

#endif
