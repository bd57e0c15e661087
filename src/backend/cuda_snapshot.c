/* The CUDA backend's asynchronous checkpoint snapshots (backend.h snap_*, cuda_snapshot.h): the
 * snapshot buffer is page-locked host memory (cudaHostAlloc), so its device-to-host copies are
 * asynchronous DMA; they run on a non-blocking side stream of their own, ordered against the
 * compute (legacy default) stream by two events and nothing else:
 *
 *   compute stream:  ... AdamW(N) | record `marked` | next step's forward, backward ... | wait `copied` | AdamW(N+1)
 *   side stream:                    wait `marked` | copy, copy, ... | record `copied`
 *   writer thread:                                                   cudaEventSynchronize(`copied`), then the files
 *
 * `marked` makes the copies read the buffers as the compute issued before the snapshot left them
 * (the step's AdamW, and a sharded optimizer's weight all-gather, which the caller has made the
 * compute stream wait for); `copied` makes the next AdamW, the first thing that writes the weights
 * and moments again, wait until the copies have read them (ah_cuda_snap_fence, called by the
 * trainer: runtime/trainer.c). Plain C over the CUDA runtime API (no kernel), like comm/nccl.c. */
#include "backend/cuda_snapshot.h"

#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

struct ah_snap_copy {
    int device;         /* the rank's device (-1: the current one): a waiting thread selects it */
    cudaStream_t side;  /* non-blocking: no implicit order with the legacy default stream */
    cudaEvent_t marked; /* on the compute stream, before the copies (timed: the copies' duration */
    cudaEvent_t copied; /* on the side stream, after them            is the time between the two) */
};

static ah_status_t fail(ah_error_t *err, cudaError_t e, const char *what) {
    (void)cudaGetLastError(); /* not sticky: clear it */
    return ah_error_set(err, AH_ERR_INTERNAL, "CUDA backend: checkpoint snapshot: %s: %s", what,
                        cudaGetErrorString(e));
}

void *ah_cuda_snap_host_alloc(size_t bytes, char *why, size_t why_len) {
    void *p = NULL;
    const cudaError_t e = cudaHostAlloc(&p, bytes ? bytes : 1, cudaHostAllocDefault);
    if (e == cudaSuccess) return p;
    (void)cudaGetLastError();
    snprintf(why, why_len, "cudaHostAlloc of %zu bytes of page-locked host memory: %s", bytes,
             cudaGetErrorString(e));
    return NULL;
}

void ah_cuda_snap_host_free(void *p) {
    if (p) cudaFreeHost(p);
}

ah_status_t ah_cuda_snap_create(int device, ah_snap_copy_t **out, ah_error_t *err) {
    ah_snap_copy_t *c = calloc(1, sizeof *c);
    if (!c) return ah_error_set(err, AH_ERR_OOM, "no host memory for a checkpoint snapshot's stream");
    c->device = device;
    cudaError_t e = cudaStreamCreateWithFlags(&c->side, cudaStreamNonBlocking);
    if (e == cudaSuccess) e = cudaEventCreate(&c->marked);
    if (e == cudaSuccess) e = cudaEventCreate(&c->copied);
    if (e != cudaSuccess) {
        ah_cuda_snap_free(&c);
        return fail(err, e, "creating its side stream and events");
    }
    *out = c;
    return AH_OK;
}

void ah_cuda_snap_free(ah_snap_copy_t **c) {
    if (!*c) return;
    if ((*c)->side) cudaStreamSynchronize((*c)->side); /* its copies write a buffer freed after this */
    if ((*c)->copied) cudaEventDestroy((*c)->copied);
    if ((*c)->marked) cudaEventDestroy((*c)->marked);
    if ((*c)->side) cudaStreamDestroy((*c)->side);
    free(*c);
    *c = NULL;
}

ah_status_t ah_cuda_snap_copy(ah_snap_copy_t *c, const ah_snap_range_t *ranges, int n, ah_error_t *err) {
    cudaError_t e = cudaEventRecord(c->marked, 0);
    if (e == cudaSuccess) e = cudaStreamWaitEvent(c->side, c->marked, 0); /* after the compute so far */
    for (int i = 0; i < n && e == cudaSuccess; i++)
        e = cudaMemcpyAsync(ranges[i].dst, ranges[i].src, ranges[i].bytes, cudaMemcpyDeviceToHost, c->side);
    if (e == cudaSuccess) e = cudaEventRecord(c->copied, c->side);
    return e == cudaSuccess ? AH_OK : fail(err, e, "issuing its copies on the side stream");
}

ah_status_t ah_cuda_snap_wait(ah_snap_copy_t *c, double *seconds, ah_error_t *err) {
    int current = -1;
    float ms = 0.0f;
    cudaError_t e = cudaGetDevice(&current); /* the device is per host thread: the writer's may differ */
    if (e == cudaSuccess && c->device >= 0 && current != c->device) e = cudaSetDevice(c->device);
    if (e == cudaSuccess) e = cudaEventSynchronize(c->copied);
    if (e == cudaSuccess) e = cudaEventElapsedTime(&ms, c->marked, c->copied);
    *seconds = (double)ms * 1e-3;
    return e == cudaSuccess ? AH_OK : fail(err, e, "waiting for its copies");
}

ah_status_t ah_cuda_snap_fence(ah_snap_copy_t *c, ah_error_t *err) {
    const cudaError_t e = cudaStreamWaitEvent(0, c->copied, 0);
    return e == cudaSuccess ? AH_OK : fail(err, e, "the compute stream's wait for its copies");
}
