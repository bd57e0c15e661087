// The CUDA backend's state, tables, error reporting, device memory and copies.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/common.cuh"

ah_cuda_state_t ah_cuda_g;

static void fill_tables(void);

void ah_cuda_fail(const char *what, const char *detail, const char *file, int line) {
    if (ah_cuda_g.status != AH_OK) return;
    ah_cuda_g.status = AH_ERR_INTERNAL;
    snprintf(ah_cuda_g.msg, sizeof ah_cuda_g.msg, "%s failed: %s (%s:%d)", what, detail, file, line);
}

int ah_cuda_device_count(void) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        (void)cudaGetLastError(); // clear the sticky "no driver" error
        return 0;
    }
    return n;
}

ah_status_t ah_cuda_init(int device, ah_error_t *err) {
    if (ah_cuda_g.ready) return AH_OK;
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {
        (void)cudaGetLastError();
        return ah_error_set(err, AH_ERR_INVALID,
                            "no usable CUDA device (%s); run on a machine with an NVIDIA GPU and "
                            "driver, or use the CPU backend",
                            e != cudaSuccess ? cudaGetErrorString(e) : "0 devices visible");
    }
    if (device >= n)
        return ah_error_set(err, AH_ERR_INVALID,
                            "CUDA device %d does not exist (%d visible); pick 0..%d", device, n,
                            n - 1);
    if (device >= 0 && (e = cudaSetDevice(device)) != cudaSuccess)
        return ah_error_set(err, AH_ERR_INVALID, "cudaSetDevice(%d): %s", device,
                            cudaGetErrorString(e));
    cudaGetDevice(&ah_cuda_g.device);
    if (cublasCreate(&ah_cuda_g.blas) != CUBLAS_STATUS_SUCCESS)
        return ah_error_set(err, AH_ERR_INVALID, "cuBLAS could not start on device %d",
                            ah_cuda_g.device);
    // fp32 matmuls stay true fp32 (no TF32): the backend is checked against the CPU at 1e-5.
    cublasSetMathMode(ah_cuda_g.blas, CUBLAS_DEFAULT_MATH);
    if ((e = cudaMalloc(&ah_cuda_g.partials, (AH_CUDA_REDUCE_BLOCKS + 1) * sizeof(double))) !=
        cudaSuccess) {
        cublasDestroy(ah_cuda_g.blas);
        return ah_error_set(err, AH_ERR_OOM, "device %d: no memory for the reduction workspace: %s",
                            ah_cuda_g.device, cudaGetErrorString(e));
    }
    fill_tables();
    ah_cuda_g.status = AH_OK;
    ah_cuda_g.ready = 1;
    return AH_OK;
}

void ah_cuda_device_name(char *buf, size_t len) {
    cudaDeviceProp p;
    int d = 0;
    if (cudaGetDevice(&d) != cudaSuccess || cudaGetDeviceProperties(&p, d) != cudaSuccess) {
        (void)cudaGetLastError();
        snprintf(buf, len, "no CUDA device");
        return;
    }
    snprintf(buf, len, "%s (sm_%d%d, %.1f GiB)", p.name, p.major, p.minor,
             (double)p.totalGlobalMem / (1024.0 * 1024.0 * 1024.0));
}

ah_status_t ah_cuda_check(ah_error_t *err) {
    cudaError_t e = cudaDeviceSynchronize();
    if (e != cudaSuccess) ah_cuda_fail("a CUDA kernel", cudaGetErrorString(e), __FILE__, __LINE__);
    if (ah_cuda_g.status == AH_OK) return AH_OK;
    ah_status_t s = ah_error_set(err, ah_cuda_g.status, "CUDA backend: %s", ah_cuda_g.msg);
    ah_cuda_g.status = AH_OK;
    ah_cuda_g.msg[0] = '\0';
    return s;
}

ah_status_t ah_cuda_synchronize(ah_error_t *err) { return ah_cuda_check(err); }

// Filled by assignment (nvcc's C++17 has no designated initializers). The bf16 and fp16 tables
// differ only in the matmuls (linear layers, the LM head among them).
static ah_kernels_t cuda_fp32, cuda_bf16, cuda_fp16;

static void fill_tables(void) {
#define CUDA_ENTRY(prefix, entry) cuda_fp32.entry = prefix##_##entry;
    AH_KERNEL_ENTRIES(CUDA_ENTRY, ah_cuda)
    cuda_fp32.name = "cuda";
    cuda_bf16 = cuda_fp32;
    cuda_bf16.name = "cuda-bf16";
    cuda_bf16.matmul_fwd = ah_cuda_matmul_fwd_bf16;
    cuda_bf16.matmul_bwd = ah_cuda_matmul_bwd_bf16;
    cuda_fp16 = cuda_fp32;
    cuda_fp16.name = "cuda-fp16";
    cuda_fp16.matmul_fwd = ah_cuda_matmul_fwd_fp16;
    cuda_fp16.matmul_bwd = ah_cuda_matmul_bwd_fp16;
}

const ah_kernels_t *ah_kernels_cuda(void) {
    return ah_cuda_init(-1, NULL) == AH_OK ? &cuda_fp32 : NULL;
}

const ah_kernels_t *ah_kernels_cuda_bf16(void) {
    return ah_cuda_init(-1, NULL) == AH_OK ? &cuda_bf16 : NULL;
}

const ah_kernels_t *ah_kernels_cuda_fp16(void) {
    return ah_cuda_init(-1, NULL) == AH_OK ? &cuda_fp16 : NULL;
}

// ---- reductions ----

__global__ void finish_reduction_kernel(double *partials, int n) {
    double v = 0.0;
    for (int i = threadIdx.x; i < n; i += blockDim.x) v += partials[i];
    v = ah_block_sum_d(v);
    if (threadIdx.x == 0) partials[n] = v;
}

double ah_cuda_finish_reduction(int n) {
    AH_LAUNCH(finish_reduction_kernel, 1, AH_CUDA_THREADS, 0, 0)(ah_cuda_g.partials, n);
    AH_CUDA_LAUNCHED();
    double out = 0.0;
    AH_CUDA_CALL(cudaMemcpy(&out, ah_cuda_g.partials + n, sizeof out, cudaMemcpyDeviceToHost));
    return out;
}

// ---- memory ----

static double mib(int64_t b) { return (double)b / (1024.0 * 1024.0); }

void *ah_cuda_alloc(size_t bytes, char *why, size_t why_len) {
    void *p = NULL;
    const size_t n = bytes ? bytes : 256;
    cudaError_t e = cudaMalloc(&p, n);
    if (e == cudaSuccess && (e = cudaMemset(p, 0, n)) == cudaSuccess) return p;
    (void)cudaGetLastError();
    if (p) cudaFree(p);
    int64_t used = 0, total = 0;
    ah_cuda_device_memory(&used, &total, NULL);
    snprintf(why, why_len, "cudaMalloc/cudaMemset: %s; the device has %.2f of %.2f MiB in use",
             cudaGetErrorString(e), mib(used), mib(total));
    return NULL;
}

void ah_cuda_free(void *p) { cudaFree(p); }

static ah_status_t copy(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind,
                        ah_error_t *err) {
    cudaError_t e = cudaMemcpy(dst, src, bytes, kind);
    if (e != cudaSuccess)
        return ah_error_set(err, AH_ERR_INTERNAL, "cudaMemcpy of %zu bytes (%s): %s", bytes,
                            kind == cudaMemcpyHostToDevice ? "to the device" : "from the device",
                            cudaGetErrorString(e));
    return AH_OK;
}

ah_status_t ah_cuda_upload(void *dst_dev, const void *src_host, size_t bytes, ah_error_t *err) {
    return copy(dst_dev, src_host, bytes, cudaMemcpyHostToDevice, err);
}

ah_status_t ah_cuda_download(void *dst_host, const void *src_dev, size_t bytes, ah_error_t *err) {
    return copy(dst_host, src_dev, bytes, cudaMemcpyDeviceToHost, err);
}

ah_status_t ah_cuda_device_memory(int64_t *used_bytes, int64_t *total_bytes, ah_error_t *err) {
    size_t free_b = 0, total_b = 0;
    cudaError_t e = cudaMemGetInfo(&free_b, &total_b);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return ah_error_set(err, AH_ERR_INTERNAL, "cudaMemGetInfo: %s", cudaGetErrorString(e));
    }
    *used_bytes = (int64_t)(total_b - free_b);
    *total_bytes = (int64_t)total_b;
    return AH_OK;
}
