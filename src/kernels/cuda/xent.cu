// Softmax cross-entropy over a vocabulary range (kernels/kernels.h: xent_max, xent_stats,
// xent_grad): one block per row, rows r = blockIdx.x, blockIdx.x + gridDim.x, ... so any N fits
// the grid. Every reduction is a fixed tree over the block, and the loss a fixed-grid sum of one
// double partial per block, so results are bitwise repeatable on the same device.
#include <float.h>
#include <math.h>

#include "kernels/cuda/common.cuh"

// Block-wide max and double sum, broadcast to every thread.
__device__ float block_max_all(float v) {
    __shared__ float part[32];
    __shared__ float result;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = ah_warp_max(v);
    __syncthreads();
    if (lane == 0) part[warp] = v;
    __syncthreads();
    if (threadIdx.x == 0) {
        float m = part[0];
        for (int w = 1; w < nw; w++) m = fmaxf(m, part[w]);
        result = m;
    }
    __syncthreads();
    return result;
}

__device__ double block_sum_all(double v) {
    __shared__ double result;
    v = ah_block_sum_d(v);
    if (threadIdx.x == 0) result = v;
    __syncthreads();
    return result;
}

// Whether target `tgt` is one of this rank's valid columns [v0, v0 + nvalid).
__device__ __forceinline__ bool holds(int tgt, int nvalid, int v0) {
    return tgt >= v0 && tgt - v0 < nvalid;
}

static unsigned row_blocks(int N) {
    return (unsigned)(N < 1 ? 1 : N < 65535 ? N : 65535);
}

__global__ void xent_max_kernel(float *rowmax, const float *logits, int N, int Vl, int nvalid) {
    for (int r = blockIdx.x; r < N; r += gridDim.x) {
        const float *row = logits + (size_t)r * Vl;
        float mx = -FLT_MAX;
        for (int j = threadIdx.x; j < nvalid; j += blockDim.x) mx = fmaxf(mx, row[j]);
        mx = block_max_all(mx);
        if (threadIdx.x == 0) rowmax[r] = mx;
    }
}

void ah_cuda_xent_max(float *rowmax, const float *logits, int N, int Vl, int nvalid) {
    if (N <= 0) return;
    AH_LAUNCH(xent_max_kernel, row_blocks(N), AH_CUDA_THREADS, 0, 0)(rowmax, logits, N, Vl, nvalid);
    AH_CUDA_LAUNCHED();
}

__global__ void xent_stats_kernel(float *stats, const float *logits, const float *rowmax,
                                  const int32_t *targets, int N, int Vl, int nvalid, int v0) {
    for (int r = blockIdx.x; r < N; r += gridDim.x) {
        const float *row = logits + (size_t)r * Vl;
        const float mx = rowmax[r];
        double s = 0.0;
        for (int j = threadIdx.x; j < nvalid; j += blockDim.x) s += (double)expf(row[j] - mx);
        s = block_sum_all(s);
        if (threadIdx.x == 0) {
            const int tgt = targets[r];
            stats[r] = (float)s;
            stats[N + r] = holds(tgt, nvalid, v0) ? row[tgt - v0] - mx : 0.0f;
        }
    }
}

void ah_cuda_xent_stats(float *stats, const float *logits, const float *rowmax,
                        const int32_t *targets, int N, int Vl, int nvalid, int v0) {
    if (N <= 0) return;
    AH_LAUNCH(xent_stats_kernel, row_blocks(N), AH_CUDA_THREADS, 0, 0)(stats, logits, rowmax, targets, N, Vl,
                                                          nvalid, v0);
    AH_CUDA_LAUNCHED();
}

// Each block sums its rows' losses in row order into partials[blockIdx.x].
__global__ void xent_grad_kernel(double *partials, float *logits, const float *rowmax,
                                 const float *stats, const int32_t *targets, float scale, int N,
                                 int Vl, int nvalid, int v0) {
    double loss = 0.0;
    for (int r = blockIdx.x; r < N; r += gridDim.x) {
        float *row = logits + (size_t)r * Vl;
        const float mx = rowmax[r], sum = stats[r];
        const int tgt = holds(targets[r], nvalid, v0) ? targets[r] - v0 : -1;
        if (threadIdx.x == 0) loss += log((double)sum) - (double)stats[N + r];
        const float p_scale = (1.0f / sum) * scale;
        for (int j = threadIdx.x; j < Vl; j += blockDim.x) {
            const float p = j < nvalid ? expf(row[j] - mx) * p_scale : 0.0f;
            row[j] = j == tgt ? p - scale : p;
        }
    }
    if (threadIdx.x == 0) partials[blockIdx.x] = loss;
}

double ah_cuda_xent_grad(float *logits, const float *rowmax, const float *stats,
                         const int32_t *targets, float scale, int N, int Vl, int nvalid, int v0) {
    if (N <= 0) return 0.0;
    const int blocks = N < AH_CUDA_REDUCE_BLOCKS ? N : AH_CUDA_REDUCE_BLOCKS;
    AH_LAUNCH(xent_grad_kernel, blocks, AH_CUDA_THREADS, 0, 0)(ah_cuda_g.partials, logits, rowmax, stats,
                                                  targets, scale, N, Vl, nvalid, v0);
    AH_CUDA_LAUNCHED();
    return ah_cuda_finish_reduction(blocks);
}
