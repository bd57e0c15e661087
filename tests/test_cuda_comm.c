/* Device-buffer communication (src/comm/nccl.c): all-reduce (also overlapped: on the communication
 * stream, ordered by events after a kernel and before a download), the sharded optimizer's uneven
 * reduce-scatter and all-gather, and send/recv of device buffers over the world group, each in
 * NCCL's mode (where every rank has a device of its own) and in the host-staged MPI mode. Under
 * ctest it is one rank; scripts/gpu-check.sh also runs it with `mpirun -np 2`, where on one GPU
 * the two ranks share it and take the staged path twice (on a GPU per rank, or on the CUDA
 * emulation's 8 devices, NCCL then staged). Exits 77 without a CUDA build or a GPU. */
#include <stdio.h>

#include "harness.h"

#ifndef AH_HAVE_CUDA
int main(void) {
    printf("SKIP: this build has no CUDA backend (configure with -DAH_CUDA=ON; docs/gpu.md)\n");
    return 77;
}
#else
#include <stdlib.h>

#include "backend/backend.h"
#include "comm/comm.h"
#include "comm/nccl.h"
#include "kernels/cuda/kernels_cuda.h"
#include "runtime/mem.h"

#define N 100003

int main(int argc, char **argv) {
    ah_error_t err;
    if (ah_cuda_device_count() == 0) {
        printf("SKIP: no usable CUDA device\n");
        return 77;
    }
    if (ah_comm_init(&argc, &argv, &err) != AH_OK) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    ah_comm_t *world = ah_comm_world();
    const int rank = ah_comm_rank(world), size = ah_comm_size(world);
    /* A device per rank where there are enough (NCCL), else ranks share one (host-staged MPI). */
    const int device = rank % ah_cuda_device_count();
    if (ah_cuda_init(device, &err) != AH_OK) {
        printf("SKIP: %s\n", err.msg);
        ah_comm_finalize();
        return 77;
    }
    ah_mem_t mem;
    ah_arena_t arena;
    ah_mem_init(&mem, 0, "comm test");
    mem.space = ah_backend_find("cuda")->space;
    ah_arena_init(&arena, &mem, "buffers");
    float *host = malloc(N * sizeof *host), *d = NULL;
    CHECK(ah_arena_floats(&arena, N, "all-reduce buffer", &d, &err) == AH_OK, "%s", err.msg);

    for (int force_staged = 0; force_staged <= 1; force_staged++) {
        ah_dcomm_t *dc = NULL;
        CHECK(ah_dcomm_create(world, device, force_staged, &dc, &err) == AH_OK, "create: %s", err.msg);
        if (!dc) break;
        if (rank == 0) printf("%d rank(s), mode %s\n", size, ah_dcomm_kind(dc));
        /* Small integers: the sum is exact in any order. */
        for (int i = 0; i < N; i++) host[i] = (float)(rank + 1) * (float)(i % 17);
        ah_cuda_upload(d, host, N * sizeof *host, &err);
        CHECK(ah_dcomm_allreduce_f32(dc, d, N, NULL, &err) == AH_OK, "allreduce: %s", err.msg);
        ah_cuda_download(host, d, N * sizeof *host, &err);
        const float ranks_sum = (float)size * (float)(size + 1) / 2.0f;
        int bad = 0;
        for (int i = 0; i < N; i++) bad += host[i] != ranks_sum * (float)(i % 17);
        CHECK(bad == 0, "all-reduce (%s): %d of %d wrong", ah_dcomm_kind(dc), bad, N);
        /* Overlapped (the DP sync's form): a kernel zeroes the first half on the compute stream, the
         * sum goes on the communication stream with an event, the compute stream waits for it: the
         * first half sums the zeros (the collective came after the kernel), the second the values
         * (the download came after the collective). */
        for (int i = 0; i < N; i++) host[i] = (float)(rank + 1) * (float)(i % 17);
        ah_cuda_upload(d, host, N * sizeof *host, &err);
        ah_dcomm_event_t *done = NULL;
        CHECK(ah_dcomm_event_create(&done, &err) == AH_OK, "event: %s", err.msg);
        ah_kernels_cuda()->zero(d, N / 2);
        CHECK(ah_dcomm_allreduce_f32(dc, d, N, done, &err) == AH_OK, "overlapped allreduce: %s", err.msg);
        CHECK(ah_dcomm_event_wait(done, &err) == AH_OK, "event wait: %s", err.msg);
        ah_cuda_download(host, d, N * sizeof *host, &err);
        bad = 0;
        for (int i = 0; i < N; i++) bad += host[i] != (i < N / 2 ? 0.0f : ranks_sum * (float)(i % 17));
        CHECK(bad == 0, "overlapped all-reduce (%s): %d of %d wrong", ah_dcomm_kind(dc), bad, N);
        ah_dcomm_event_free(&done);
        /* Uneven parts (rank k owns a part in proportion to k + 1, the last takes the rest):
         * reduce-scatter leaves each rank's part summed; all-gather then gives every rank all. */
        int64_t counts[64];
        int64_t at = 0, mine = 0;
        for (int k = 0; k < size && k < 64; k++) {
            counts[k] = k == size - 1 ? N - at : (int64_t)N * (k + 1) / (size * (size + 1) / 2);
            if (k < rank) mine += counts[k];
            at += counts[k];
        }
        for (int i = 0; i < N; i++) host[i] = (float)(rank + 1) * (float)(i % 13);
        ah_cuda_upload(d, host, N * sizeof *host, &err);
        CHECK(ah_dcomm_reduce_scatter_f32(dc, d, counts, NULL, &err) == AH_OK, "reduce-scatter: %s", err.msg);
        ah_cuda_download(host, d, N * sizeof *host, &err);
        bad = 0;
        for (int64_t i = mine; i < mine + counts[rank]; i++) bad += host[i] != ranks_sum * (float)(i % 13);
        CHECK(bad == 0, "reduce-scatter (%s): %d of %lld of its part wrong", ah_dcomm_kind(dc), bad,
              (long long)counts[rank]);
        for (int i = 0; i < N; i++) /* every part but its own garbage: the gather must overwrite it */
            if (i < mine || i >= mine + counts[rank]) host[i] = -1.0f;
        ah_cuda_upload(d, host, N * sizeof *host, &err);
        CHECK(ah_dcomm_allgather_f32(dc, d, counts, NULL, &err) == AH_OK, "all-gather: %s", err.msg);
        ah_cuda_download(host, d, N * sizeof *host, &err);
        bad = 0;
        for (int i = 0; i < N; i++) bad += host[i] != ranks_sum * (float)(i % 13);
        CHECK(bad == 0, "all-gather (%s): %d of %d wrong", ah_dcomm_kind(dc), bad, N);
        if (size >= 2 && rank < 2) { /* ranks 0 and 1 swap a buffer: 0 sends first */
            for (int i = 0; i < N; i++) host[i] = (float)(rank * 1000 + i % 101);
            ah_cuda_upload(d, host, N * sizeof *host, &err);
            ah_status_t s1, s2;
            if (rank == 0) {
                s1 = ah_dcomm_send_f32(dc, d, N, 1, 7, &err);
                s2 = ah_dcomm_recv_f32(dc, d, N, 1, 8, &err);
            } else {
                float *tmp = NULL;
                ah_arena_floats(&arena, N, "receive buffer", &tmp, &err);
                s1 = ah_dcomm_recv_f32(dc, tmp, N, 0, 7, &err);
                s2 = ah_dcomm_send_f32(dc, d, N, 0, 8, &err);
                d = tmp;
            }
            CHECK(s1 == AH_OK && s2 == AH_OK, "send/recv: %s", err.msg);
            CHECK(ah_cuda_check(&err) == AH_OK, "%s", err.msg);
            ah_cuda_download(host, d, N * sizeof *host, &err);
            bad = 0;
            for (int i = 0; i < N; i++) bad += host[i] != (float)((1 - rank) * 1000 + i % 101);
            CHECK(bad == 0, "send/recv (%s): %d of %d wrong", ah_dcomm_kind(dc), bad, N);
        }
        ah_dcomm_free(&dc);
    }
    CHECK(ah_cuda_check(&err) == AH_OK, "%s", err.msg);
    ah_arena_free(&arena);
    free(host);
    const int rc = ah_test_finish();
    ah_comm_finalize();
    return rc;
}
#endif
