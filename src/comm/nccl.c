/* Device-buffer communication: NCCL when every rank of the group has its own GPU, MPI with host
 * staging otherwise (see nccl.h). Only this file of src/comm includes CUDA headers; it reaches
 * MPI through comm.h. */
#include "comm/nccl.h"

#include <cuda_runtime.h>
#include <nccl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/hash.h"

struct ah_dcomm {
    ah_comm_t *group;
    ncclComm_t nccl; /* NULL in the staged mode */
    float *host;     /* staging buffer (staged mode), grown to the largest transfer */
    size_t host_n;
};

struct ah_dcomm_event {
    cudaEvent_t ev;
};

/* The process's communication stream (non-blocking: nothing orders it against the compute stream
 * but the events below) and the event that marks the compute stream's work so far; made on first
 * use and kept until the process exits, as the backend's other device state. */
static cudaStream_t comm_stream;
static cudaEvent_t compute_mark;

/* FNV-1a of the host name: ranks with equal (host, device) share a GPU. */
static int64_t host_hash(void) {
    char name[256] = {0};
    gethostname(name, sizeof name - 1);
    return (int64_t)(ah_fnv1a64_str(name) >> 1);
}

static ah_status_t cuda_err(ah_error_t *err, cudaError_t e, const char *what) {
    return ah_error_set(err, AH_ERR_COMM, "%s: %s", what, cudaGetErrorString(e));
}

/* AH_OK when NCCL's call `what` returned r = ncclSuccess, else its error. */
static ah_status_t nccl_status(ah_error_t *err, ncclResult_t r, const char *what) {
    if (r == ncclSuccess) return AH_OK;
    return ah_error_set(err, AH_ERR_COMM, "%s: %s (set NCCL_DEBUG=WARN for NCCL's own reason)",
                        what, ncclGetErrorString(r));
}

/* Whether any two members share (host, device); collective. */
static ah_status_t shares_gpu(ah_comm_t *g, int device, int *shared, ah_error_t *err) {
    const int n = ah_comm_size(g);
    int64_t *ids = malloc(2 * (size_t)n * sizeof *ids);
    if (!ids) return ah_error_set(err, AH_ERR_OOM, "no host memory for %d device ids", n);
    ah_status_t s = ah_comm_allgather_i64(g, host_hash(), ids, err);
    if (s == AH_OK) s = ah_comm_allgather_i64(g, device, ids + n, err);
    *shared = 0;
    for (int i = 0; s == AH_OK && i < n; i++)
        for (int j = i + 1; j < n; j++)
            if (ids[i] == ids[j] && ids[n + i] == ids[n + j]) *shared = 1;
    free(ids);
    return s;
}

ah_status_t ah_dcomm_create(ah_comm_t *group, int device, int force_staged, ah_dcomm_t **out,
                            ah_error_t *err) {
    *out = NULL;
    ah_dcomm_t *dc = calloc(1, sizeof *dc);
    if (!dc) return ah_error_set(err, AH_ERR_OOM, "no host memory for a device communicator");
    dc->group = group;
    int shared = 0;
    ah_status_t s = shares_gpu(group, device, &shared, err);
    /* One decision for the whole group: every rank computed the same `shared`. */
    if (s == AH_OK && !shared && !force_staged && ah_comm_size(group) > 1) {
        ncclUniqueId id;
        ncclResult_t r = ncclSuccess;
        if (ah_comm_rank(group) == 0) r = ncclGetUniqueId(&id);
        s = nccl_status(err, r, "ncclGetUniqueId");
        s = ah_comm_agree(group, s, err);
        if (s == AH_OK) s = ah_comm_bcast(group, &id, sizeof id, 0, err);
        if (s == AH_OK) {
            cudaError_t e = cudaSetDevice(device);
            if (e != cudaSuccess)
                s = cuda_err(err, e, "cudaSetDevice");
            else
                s = nccl_status(err, ncclCommInitRank(&dc->nccl, ah_comm_size(group), id,
                                                      ah_comm_rank(group)), "ncclCommInitRank");
        }
    }
    if (s != AH_OK) {
        ah_dcomm_free(&dc);
        return s;
    }
    *out = dc;
    return AH_OK;
}

void ah_dcomm_free(ah_dcomm_t **dc) {
    if (!*dc) return;
    if ((*dc)->nccl) ncclCommDestroy((*dc)->nccl);
    cudaFreeHost((*dc)->host);
    free(*dc);
    *dc = NULL;
}

const char *ah_dcomm_kind(const ah_dcomm_t *dc) { return dc->nccl ? "nccl" : "mpi-staged"; }

/* The communication stream, after the compute (legacy default) stream's work issued so far. */
static ah_status_t comm_stream_after_compute(ah_error_t *err) {
    cudaError_t e = cudaSuccess;
    if (!comm_stream) e = cudaStreamCreateWithFlags(&comm_stream, cudaStreamNonBlocking);
    if (e == cudaSuccess && !compute_mark) e = cudaEventCreateWithFlags(&compute_mark, cudaEventDisableTiming);
    if (e == cudaSuccess) e = cudaEventRecord(compute_mark, 0);
    if (e == cudaSuccess) e = cudaStreamWaitEvent(comm_stream, compute_mark, 0);
    return e == cudaSuccess ? AH_OK : cuda_err(err, e, "the communication stream");
}

ah_status_t ah_dcomm_event_create(ah_dcomm_event_t **out, ah_error_t *err) {
    *out = calloc(1, sizeof **out);
    if (!*out) return ah_error_set(err, AH_ERR_OOM, "no host memory for a communication event");
    const cudaError_t e = cudaEventCreateWithFlags(&(*out)->ev, cudaEventDisableTiming);
    if (e == cudaSuccess) return AH_OK;
    free(*out);
    *out = NULL;
    return cuda_err(err, e, "cudaEventCreate (communication event)");
}

void ah_dcomm_event_free(ah_dcomm_event_t **ev) {
    if (!*ev) return;
    cudaEventDestroy((*ev)->ev);
    free(*ev);
    *ev = NULL;
}

ah_status_t ah_dcomm_event_wait(ah_dcomm_event_t *ev, ah_error_t *err) {
    const cudaError_t e = cudaStreamWaitEvent(0, ev->ev, 0);
    return e == cudaSuccess ? AH_OK : cuda_err(err, e, "cudaStreamWaitEvent (communication event)");
}

/* The stream a collective is issued on: the compute stream (done NULL, or the staged mode, which
 * is synchronous: it first waits for the communication stream's work, which may be an earlier
 * phase on the same bytes, as a blocking copy does not), else the communication stream after the
 * compute so far. */
static ah_status_t issue_stream(const ah_dcomm_t *dc, const ah_dcomm_event_t *done, cudaStream_t *st,
                                ah_error_t *err) {
    *st = 0;
    if (!done) return AH_OK;
    if (!dc->nccl) {
        const cudaError_t e = comm_stream ? cudaStreamSynchronize(comm_stream) : cudaSuccess;
        return e == cudaSuccess ? AH_OK : cuda_err(err, e, "cudaStreamSynchronize (the communication stream)");
    }
    ah_status_t s = comm_stream_after_compute(err);
    if (s == AH_OK) *st = comm_stream;
    return s;
}

/* Records done (if any) after a collective issued on st. */
static ah_status_t record(ah_status_t s, ah_dcomm_event_t *done, cudaStream_t st, ah_error_t *err) {
    if (s != AH_OK || !done) return s;
    const cudaError_t e = cudaEventRecord(done->ev, st);
    return e == cudaSuccess ? AH_OK : cuda_err(err, e, "cudaEventRecord (communication event)");
}

/* The pinned staging buffer for n floats. */
static ah_status_t staging(ah_dcomm_t *dc, size_t n, ah_error_t *err) {
    if (n <= dc->host_n) return AH_OK;
    cudaFreeHost(dc->host);
    dc->host = NULL;
    dc->host_n = 0;
    cudaError_t e = cudaMallocHost((void **)&dc->host, n * sizeof(float));
    if (e != cudaSuccess) return cuda_err(err, e, "cudaMallocHost (staging buffer)");
    dc->host_n = n;
    return AH_OK;
}

static ah_status_t copy(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind,
                        ah_error_t *err) {
    cudaError_t e = cudaMemcpy(dst, src, n * sizeof(float), kind);
    return e == cudaSuccess ? AH_OK : cuda_err(err, e, "cudaMemcpy (staging)");
}

/* An in-place all-reduce by NCCL's op on stream st, or by the group's MPI call with host staging. */
static ah_status_t allreduce(ah_dcomm_t *dc, float *dev_buf, size_t n, ncclRedOp_t op, cudaStream_t st,
                             ah_error_t *err) {
    if (ah_comm_size(dc->group) == 1 || n == 0) return AH_OK;
    if (dc->nccl)
        return nccl_status(err, ncclAllReduce(dev_buf, dev_buf, n, ncclFloat32, op, dc->nccl, st),
                           "ncclAllReduce");
    ah_status_t s = staging(dc, n, err);
    if (s == AH_OK) s = copy(dc->host, dev_buf, n, cudaMemcpyDeviceToHost, err);
    if (s == AH_OK)
        s = op == ncclMax ? ah_comm_allreduce_max_f32(dc->group, dc->host, n, err)
                          : ah_comm_allreduce_f32(dc->group, dc->host, n, err);
    if (s == AH_OK) s = copy(dev_buf, dc->host, n, cudaMemcpyHostToDevice, err);
    return s;
}

ah_status_t ah_dcomm_allreduce_f32(ah_dcomm_t *dc, float *dev_buf, size_t n, ah_dcomm_event_t *done,
                                   ah_error_t *err) {
    cudaStream_t st;
    ah_status_t s = issue_stream(dc, done, &st, err);
    if (s == AH_OK) s = allreduce(dc, dev_buf, n, ncclSum, st, err);
    return record(s, done, st, err);
}

ah_status_t ah_dcomm_allreduce_max_f32(ah_dcomm_t *dc, float *dev_buf, size_t n, ah_error_t *err) {
    return allreduce(dc, dev_buf, n, ncclMax, 0, err);
}

/* Parts of a sharded collective: their total, one part at a time as a reduce to (or a broadcast
 * from) its owner, in one NCCL group call. */
static ah_status_t by_parts(ah_dcomm_t *dc, float *dev_buf, const int64_t *counts, int reduce, cudaStream_t st,
                           ah_error_t *err) {
    ncclResult_t r = ncclGroupStart();
    size_t off = 0;
    for (int k = 0; r == ncclSuccess && k < ah_comm_size(dc->group); off += (size_t)counts[k], k++)
        r = reduce ? ncclReduce(dev_buf + off, dev_buf + off, (size_t)counts[k], ncclFloat32, ncclSum, k, dc->nccl, st)
                   : ncclBroadcast(dev_buf + off, dev_buf + off, (size_t)counts[k], ncclFloat32, k, dc->nccl, st);
    const ncclResult_t end = ncclGroupEnd();
    return nccl_status(err, r != ncclSuccess ? r : end, reduce ? "ncclReduce (reduce-scatter)" : "ncclBroadcast (all-gather)");
}

static size_t total_of(const ah_dcomm_t *dc, const int64_t *counts) {
    size_t n = 0;
    for (int k = 0; k < ah_comm_size(dc->group); k++) n += (size_t)counts[k];
    return n;
}

/* The reduce-scatter (reduce) or all-gather: NCCL by parts on stream st, or the whole buffer
 * through the host. */
static ah_status_t sharded(ah_dcomm_t *dc, float *dev_buf, const int64_t *counts, int reduce, cudaStream_t st,
                           ah_error_t *err) {
    const size_t n = total_of(dc, counts);
    if (ah_comm_size(dc->group) == 1 || n == 0) return AH_OK;
    if (dc->nccl) return by_parts(dc, dev_buf, counts, reduce, st, err);
    ah_status_t s = staging(dc, n, err);
    if (s == AH_OK) s = copy(dc->host, dev_buf, n, cudaMemcpyDeviceToHost, err);
    if (s == AH_OK)
        s = reduce ? ah_comm_reduce_scatter_f32(dc->group, dc->host, counts, err)
                   : ah_comm_allgather_f32(dc->group, dc->host, counts, err);
    if (s == AH_OK) s = copy(dev_buf, dc->host, n, cudaMemcpyHostToDevice, err);
    return s;
}

/* A sharded collective (reduce: the reduce-scatter), on the stream `done` asks for. */
static ah_status_t sharded_on(ah_dcomm_t *dc, float *dev_buf, const int64_t *counts, int reduce,
                              ah_dcomm_event_t *done, ah_error_t *err) {
    cudaStream_t st;
    ah_status_t s = issue_stream(dc, done, &st, err);
    if (s == AH_OK) s = sharded(dc, dev_buf, counts, reduce, st, err);
    return record(s, done, st, err);
}

ah_status_t ah_dcomm_reduce_scatter_f32(ah_dcomm_t *dc, float *dev_buf, const int64_t *counts,
                                        ah_dcomm_event_t *done, ah_error_t *err) {
    return sharded_on(dc, dev_buf, counts, 1, done, err);
}

ah_status_t ah_dcomm_allgather_f32(ah_dcomm_t *dc, float *dev_buf, const int64_t *counts, ah_dcomm_event_t *done,
                                   ah_error_t *err) {
    return sharded_on(dc, dev_buf, counts, 0, done, err);
}

/* The batch on stream st: NCCL's sends and receives as one group call, or through the host (the
 * staging buffer holds every op's floats, one after another) and the group's MPI isend/irecv. */
static ah_status_t p2p(ah_dcomm_t *dc, const ah_dcomm_p2p_t *ops, int n_ops, int tag, cudaStream_t st, ah_error_t *err) {
    if (dc->nccl) {
        ncclResult_t r = ncclGroupStart();
        for (int k = 0; r == ncclSuccess && k < n_ops; k++)
            r = ops[k].recv ? ncclRecv(ops[k].buf, ops[k].n, ncclFloat32, ops[k].peer, dc->nccl, st)
                            : ncclSend(ops[k].buf, ops[k].n, ncclFloat32, ops[k].peer, dc->nccl, st);
        const ncclResult_t end = ncclGroupEnd();
        return nccl_status(err, r != ncclSuccess ? r : end, "ncclSend/ncclRecv (point-to-point batch)");
    }
    if (n_ops <= 0) return AH_OK;
    size_t total = 0;
    for (int k = 0; k < n_ops; k++) total += ops[k].n;
    ah_comm_req_t *req = calloc((size_t)n_ops, sizeof *req);
    if (!req) return ah_error_set(err, AH_ERR_OOM, "no host memory for %d transfer requests", n_ops);
    ah_status_t s = staging(dc, total, err);
    size_t off = 0;
    for (int k = 0; s == AH_OK && k < n_ops; off += ops[k++].n) {
        if (!ops[k].recv) s = copy(dc->host + off, ops[k].buf, ops[k].n, cudaMemcpyDeviceToHost, err);
        if (s == AH_OK)
            s = ops[k].recv ? ah_comm_irecv_f32(dc->group, dc->host + off, ops[k].n, ops[k].peer, tag, &req[k], err)
                            : ah_comm_isend_f32(dc->group, dc->host + off, ops[k].n, ops[k].peer, tag, &req[k], err);
    }
    for (int k = 0; k < n_ops; k++) { /* every one, even after a failure: MPI still writes into the buffer until then */
        const ah_status_t w = ah_comm_wait(&req[k], err);
        if (s == AH_OK) s = w;
    }
    free(req);
    off = 0;
    for (int k = 0; s == AH_OK && k < n_ops; off += ops[k++].n)
        if (ops[k].recv) s = copy(ops[k].buf, dc->host + off, ops[k].n, cudaMemcpyHostToDevice, err);
    return s;
}

ah_status_t ah_dcomm_p2p_f32(ah_dcomm_t *dc, const ah_dcomm_p2p_t *ops, int n_ops, int tag, ah_error_t *err) {
    const ah_dcomm_event_t *overlap = NULL; /* any op's event puts the batch on the communication stream */
    for (int k = 0; k < n_ops && !overlap; k++) overlap = ops[k].done;
    cudaStream_t st;
    ah_status_t s = issue_stream(dc, overlap, &st, err);
    if (s == AH_OK) s = p2p(dc, ops, n_ops, tag, st, err);
    for (int k = 0; k < n_ops; k++) s = record(s, ops[k].done, st, err);
    return s;
}

ah_status_t ah_dcomm_send_f32(ah_dcomm_t *dc, const float *dev_buf, size_t n, int peer, int tag,
                              ah_error_t *err) {
    const ah_dcomm_p2p_t op = {(float *)dev_buf, n, peer, false, NULL};
    return ah_dcomm_p2p_f32(dc, &op, 1, tag, err);
}

ah_status_t ah_dcomm_recv_f32(ah_dcomm_t *dc, float *dev_buf, size_t n, int peer, int tag,
                              ah_error_t *err) {
    const ah_dcomm_p2p_t op = {dev_buf, n, peer, true, NULL};
    return ah_dcomm_p2p_f32(dc, &op, 1, tag, err);
}
