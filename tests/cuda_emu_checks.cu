// The CUDA emulation's protections, one subcommand each (tests/test_cuda_emu.sh runs them and
// checks what they print and return). Built only with -DAH_CUDA_EMU=ON.
//   race      a block sum whose __syncthreads is missing: ThreadSanitizer reports a data race
//   barrier   the same with its __syncthreads: correct, no race
//   stale     reads an asynchronous copy's result before cudaStreamSynchronize: stale, exits 1
//   synced    the same after the synchronisation: exits 0
//   host_read host code dereferences a device pointer: dies naming the allocation
//   bad_ld    cublasSgemm with lda < m: CUBLAS_STATUS_INVALID_VALUE, naming the argument
//   config    launches with 2048 threads and with 64 KiB of dynamic shared memory: the errors
//             CUDA gives, not sticky (a good launch afterwards works)
//   diverged  a full-warp shuffle reached by half the warp: the launch fails (sticky), naming
//             the kernel, block and thread
//   past_end  a kernel writing 4 KiB past an allocation: dies naming the kernel
//   nccl_unordered  an NCCL all-reduce on a non-blocking stream (as comm/nccl.c's overlapped
//             collectives) without events: it reduces its input as it was before the kernel queued
//             to write it, and a copy on the legacy stream reads its output as before the
//             all-reduce: both stale, exits 1
//   nccl_ordered    the same with the events (the stream waits for the kernel's, the legacy
//             stream for the all-reduce's): both see the writes, exits 0
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>
#include <stdio.h>
#include <string.h>

#define THREADS 64

__global__ void block_sum(int *out, bool with_barrier) {
    __shared__ int part[THREADS];
    part[threadIdx.x] = (int)threadIdx.x + 1;
    if (with_barrier) __syncthreads();
    if (threadIdx.x == 0) {
        int s = 0;
        for (int i = 0; i < THREADS; i++) s += part[i];
        *out = s;
    }
}

__global__ void write_value(int *p, int v) { *p = v; }

__global__ void half_warp_shuffle(float *out) {
    float v = (float)threadIdx.x;
    if (threadIdx.x < 16) v = __shfl_xor_sync(0xffffffffu, v, 1);
    out[threadIdx.x] = v;
}

__global__ void write_past(float *p, int n) { p[n + 1024] = 1.0f; }

static int block_sum_check(bool with_barrier) {
    int *d = nullptr, got = 0;
    cudaMalloc(&d, sizeof(int));
    AH_LAUNCH(block_sum, 1, THREADS, 0, 0)(d, with_barrier);
    cudaMemcpy(&got, d, sizeof got, cudaMemcpyDeviceToHost);
    const int want = THREADS * (THREADS + 1) / 2;
    printf("block sum %d (want %d)\n", got, want);
    return got == want ? 0 : 1;
}

static int stale_check(bool sync_first) {
    int *d = nullptr, *h = nullptr;
    cudaMalloc(&d, sizeof(int));
    cudaMallocHost(&h, sizeof(int));
    *h = 0;
    AH_LAUNCH(write_value, 1, 1, 0, 0)(d, 42);
    cudaMemcpyAsync(h, d, sizeof(int), cudaMemcpyDeviceToHost, 0);
    if (sync_first) cudaStreamSynchronize(0);
    const int seen = *h;
    printf("read %s the synchronisation: %d (the kernel wrote 42)\n", sync_first ? "after" : "before", seen);
    return seen == 42 ? 0 : 1;
}

static int host_read(void) {
    float *d = nullptr;
    cudaMalloc(&d, 1000 * sizeof(float));
    printf("reading device memory from the host...\n");
    fflush(stdout);
    volatile float x = d[10];
    printf("read %g: the host read was not caught\n", (double)x);
    return 0;
}

static int bad_ld(void) {
    cublasHandle_t h;
    cublasCreate(&h);
    float *a, *b, *c;
    cudaMalloc(&a, 64 * sizeof(float));
    cudaMalloc(&b, 64 * sizeof(float));
    cudaMalloc(&c, 64 * sizeof(float));
    const float one = 1.0f, zero = 0.0f;
    // C (4 x 4) = A (4 x 4) B (4 x 4), but A's leading dimension given as 3.
    cublasStatus_t s = cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 4, 4, 4, &one, a, 3, b, 4, &zero, c, 4);
    printf("cublasSgemm with lda 3 < m 4: %s\n", cublasGetStatusString(s));
    s = cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 4, 4, 4, &one, a, 4, b, 4, &zero, c, 4);
    printf("cublasSgemm with lda 4: %s\n", cublasGetStatusString(s));
    return s == CUBLAS_STATUS_SUCCESS ? 0 : 1;
}

static int config(void) {
    int *d = nullptr;
    cudaMalloc(&d, sizeof(int));
    AH_LAUNCH(write_value, 1, 2048, 0, 0)(d, 1);
    cudaError_t e = cudaGetLastError();
    printf("2048 threads: %s\n", cudaGetErrorName(e));
    AH_LAUNCH(write_value, 1, 32, 64 * 1024, 0)(d, 1);
    cudaError_t e2 = cudaGetLastError();
    printf("64 KiB of dynamic shared memory: %s\n", cudaGetErrorName(e2));
    AH_LAUNCH(write_value, 1, 1, 0, 0)(d, 7);
    int got = 0;
    cudaError_t e3 = cudaMemcpy(&got, d, sizeof got, cudaMemcpyDeviceToHost);
    printf("then a good launch: %s, wrote %d\n", cudaGetErrorName(e3), got);
    return e == cudaErrorInvalidConfiguration && e2 == cudaErrorInvalidValue && e3 == cudaSuccess && got == 7 ? 0 : 1;
}

static int diverged(void) {
    float *d = nullptr;
    cudaMalloc(&d, 32 * sizeof(float));
    AH_LAUNCH(half_warp_shuffle, 1, 32, 0, 0)(d);
    cudaError_t e = cudaDeviceSynchronize();
    printf("synchronize: %s\n", cudaGetErrorName(e));
    void *more = nullptr;
    cudaError_t e2 = cudaMalloc(&more, 16);
    printf("a later cudaMalloc: %s\n", cudaGetErrorName(e2));
    return e == cudaErrorLaunchFailure && e2 == cudaErrorLaunchFailure ? 1 : 0;
}

static int past_end(void) {
    float *d = nullptr;
    cudaMalloc(&d, 100 * sizeof(float));
    AH_LAUNCH(write_past, 1, 1, 0, 0)(d, 100);
    cudaDeviceSynchronize();
    printf("the write past the end was not caught\n");
    return 0;
}

// One rank's NCCL communicator; an all-reduce of in (written by a kernel on the legacy stream
// just before) into out on a non-blocking stream, then out read back on the legacy stream, with
// or without the events that order the two streams.
static int nccl_order(int argc, char **argv, bool with_events) {
    MPI_Init(&argc, &argv);
    ncclUniqueId id;
    ncclComm_t comm;
    cudaStream_t comm_stream;
    cudaEvent_t written, reduced;
    int *in = nullptr, *out = nullptr, seen_in = -1, seen_out = -1;
    cudaMalloc(&in, sizeof(int));
    cudaMalloc(&out, sizeof(int));
    cudaMemset(in, 0, sizeof(int));
    cudaMemset(out, 0, sizeof(int));
    cudaDeviceSynchronize();
    if (ncclGetUniqueId(&id) != ncclSuccess || ncclCommInitRank(&comm, 1, id, 0) != ncclSuccess) return 2;
    cudaStreamCreateWithFlags(&comm_stream, cudaStreamNonBlocking);
    cudaEventCreateWithFlags(&written, cudaEventDisableTiming);
    cudaEventCreateWithFlags(&reduced, cudaEventDisableTiming);
    AH_LAUNCH(write_value, 1, 1, 0, 0)(in, 42);
    if (with_events) {
        cudaEventRecord(written, 0);
        cudaStreamWaitEvent(comm_stream, written, 0);
    }
    ncclAllReduce(in, out, 1, ncclInt32, ncclSum, comm, comm_stream);
    if (with_events) {
        cudaEventRecord(reduced, comm_stream);
        cudaStreamWaitEvent(0, reduced, 0);
    }
    cudaMemcpy(&seen_out, out, sizeof(int), cudaMemcpyDeviceToHost); // the legacy stream
    cudaDeviceSynchronize();
    cudaMemcpy(&seen_in, out, sizeof(int), cudaMemcpyDeviceToHost); // what was reduced, once done
    printf("all-reduce %s events: reduced %d (the kernel wrote 42); the legacy stream read %d before the device synchronisation\n",
           with_events ? "with" : "without", seen_in, seen_out);
    ncclCommDestroy(comm);
    MPI_Finalize();
    return seen_in == 42 && seen_out == 42 ? 0 : 1;
}

int main(int argc, char **argv) {
    const char *c = argc > 1 ? argv[1] : "";
    if (!strcmp(c, "nccl_unordered")) return nccl_order(argc, argv, false);
    if (!strcmp(c, "nccl_ordered")) return nccl_order(argc, argv, true);
    if (!strcmp(c, "race")) return block_sum_check(false);
    if (!strcmp(c, "barrier")) return block_sum_check(true);
    if (!strcmp(c, "stale")) return stale_check(false);
    if (!strcmp(c, "synced")) return stale_check(true);
    if (!strcmp(c, "host_read")) return host_read();
    if (!strcmp(c, "bad_ld")) return bad_ld();
    if (!strcmp(c, "config")) return config();
    if (!strcmp(c, "diverged")) return diverged();
    if (!strcmp(c, "past_end")) return past_end();
    fprintf(stderr, "usage: cuda_emu_checks race|barrier|stale|synced|host_read|bad_ld|config|diverged|past_end\n");
    return 2;
}
