// Causal attention as fused, memory-efficient kernels (flash-attention style): the forward keeps
// a running max and sum per query row (online softmax) over tiles of KT keys and stores only the
// row's logsumexp; the backward recomputes the probabilities tile by tile from it. Nothing of
// size T x T exists at any time.
//
// Work split: a block has WARPS warps, one query row (forward, dq) or one key row (dk, dv) per
// warp; the tile of KT = 32 keys (or queries) it sweeps is staged in shared memory, lane l owns
// key l of the tile for the dot products, and the accumulators (hd values) are spread over the
// lanes, hd/32 per lane. dq and dk/dv are separate kernels so that no gradient needs atomics:
// with grouped-query heads (kernels/kernels.h) a dk/dv block owns one key/value head and sweeps
// the query heads of its group in order, adding their contributions in registers.
// Rows of shared tiles are padded to hd + 1 floats, so lane l reading row l hits bank l.
#include <math.h>

#include "kernels/cuda/common.cuh"

#define KT 32
#define WARPS 4
#define MAX_HD 128
#define MAX_R (MAX_HD / 32)
#define FULL 0xffffffffu
#define ROWS_D 8 /* rows (warps) per block of the D kernel */

static bool hd_ok(int hd) {
    if (hd >= 1 && hd <= MAX_HD) return true;
    ah_cuda_fail("attention", "head dimension above 128 is not supported by the fused kernel",
                 __FILE__, __LINE__);
    return false;
}

// Dot product of a row of shared memory with another (both hd long).
__device__ __forceinline__ float dot_smem(const float *a, const float *b, int hd) {
    float s = 0.0f;
    for (int d = 0; d < hd; d++) s += a[d] * b[d];
    return s;
}

// acc (this lane's hd/32 accumulators) += sum over the tile's first nk rows jj of x from lane jj
// times row jj of tile: a probability (or its gradient) per key, weighting that key's row.
__device__ __forceinline__ void acc_rows(float *acc, float x, const float *tile, int nk, int hp, int hd,
                                         int lane) {
    for (int jj = 0; jj < nk; jj++) {
        const float xj = __shfl_sync(FULL, x, jj);
#pragma unroll
        for (int r = 0; r < MAX_R; r++) {
            const int d = lane + 32 * r;
            if (d < hd) acc[r] += xj * tile[jj * hp + d];
        }
    }
}

// Loads rows [r0, r0 + KT) of a (T, ld) strided head view into a padded tile (zeros past T).
__device__ __forceinline__ void load_tile(float *tile, const float *src, int r0, int T, int ld,
                                          int hd) {
    const int hp = hd + 1;
    for (int e = threadIdx.x; e < KT * hd; e += blockDim.x) {
        const int rr = e / hd, d = e % hd, r = r0 + rr;
        tile[rr * hp + d] = r < T ? src[(size_t)r * ld + d] : 0.0f;
    }
}

// Head h's q, and k, v of the key/value head it reads, at row 0 of batch b of qkv.
struct head_views {
    const float *q, *k, *v;
};
__device__ __forceinline__ head_views views(const float *qkv, int b, int h, int T, int Hl,
                                            int KVl, int hd) {
    const int ld = (Hl + 2 * KVl) * hd, g = h / (Hl / KVl);
    const float *row0 = qkv + (size_t)b * T * ld;
    return {row0 + (size_t)h * hd, row0 + (size_t)(Hl + g) * hd, row0 + (size_t)(Hl + KVl + g) * hd};
}

// out (B,T,Hl*hd) and, if lse is not NULL, lse (B,Hl,T). grid (ceil(T/WARPS), B*Hl).
__global__ void flash_fwd_kernel(float *out, float *lse, const float *qkv, int T, int Hl, int KVl,
                                 int hd, float scale) {
    AH_DYNAMIC_SHARED(float, sm);
    const int hp = hd + 1, Cl = Hl * hd, ld = (Hl + 2 * KVl) * hd;
    float *Ks = sm, *Vs = Ks + KT * hp, *Qs = Vs + KT * hp;
    const int bh = blockIdx.y, b = bh / Hl, h = bh % Hl;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int i0 = blockIdx.x * WARPS, i = i0 + warp, last = min(T - 1, i0 + WARPS - 1);
    const head_views hv = views(qkv, b, h, T, Hl, KVl, hd);
    const float *q_g = hv.q;
    float *q = Qs + warp * hd;
    if (i < T)
        for (int d = lane; d < hd; d += 32) q[d] = q_g[(size_t)i * ld + d];
    float acc[MAX_R] = {0.0f};
    float m = -INFINITY, l = 0.0f;
    for (int j0 = 0; j0 <= last; j0 += KT) {
        __syncthreads(); // every warp is done with the previous tile (and q is written)
        load_tile(Ks, hv.k, j0, T, ld, hd);
        load_tile(Vs, hv.v, j0, T, ld, hd);
        __syncthreads();
        if (i >= T || j0 > i) continue; // warp-uniform
        const int j = j0 + lane;
        const float s = j <= i ? dot_smem(q, Ks + lane * hp, hd) * scale : -INFINITY;
        // j0 <= i, so key j0 is valid and m_new is finite.
        const float m_new = fmaxf(m, ah_warp_max(s));
        const float p = j <= i ? expf(s - m_new) : 0.0f;
        const float corr = expf(m - m_new); // 0 on the first tile (m = -inf)
        l = l * corr + ah_warp_sum(p);
#pragma unroll
        for (int r = 0; r < MAX_R; r++) acc[r] *= corr;
        acc_rows(acc, p, Vs, min(KT, i - j0 + 1), hp, hd, lane);
        m = m_new;
    }
    if (i >= T) return;
    const float inv = 1.0f / l;
    float *o = out + ((size_t)b * T + i) * Cl + (size_t)h * hd;
#pragma unroll
    for (int r = 0; r < MAX_R; r++) {
        const int d = lane + 32 * r;
        if (d < hd) o[d] = acc[r] * inv;
    }
    if (lse && lane == 0) lse[(size_t)bh * T + i] = m + logf(l);
}

// D[b,h,i] = dO_i . O_i (the softmax backward's row term sum_j P_ij dP_ij). One warp per row.
__global__ void flash_bwd_d_kernel(float *D, const float *dout, const float *out, int B, int T,
                                   int Hl, int hd) {
    const size_t row = (size_t)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    const int lane = threadIdx.x & 31;
    if (row >= (size_t)B * Hl * T) return;
    // row = (b*Hl + h)*T + i
    const int i = (int)(row % T), bh = (int)(row / T), b = bh / Hl, h = bh % Hl;
    const size_t off = ((size_t)b * T + i) * Hl * hd + (size_t)h * hd;
    float s = 0.0f;
    for (int d = lane; d < hd; d += 32) s += dout[off + d] * out[off + d];
    s = ah_warp_sum(s);
    if (lane == 0) D[row] = s;
}

// dq_i += scale * sum_j dS_ij k_j, dS_ij = P_ij (dO_i . v_j - D_i). One warp per query row.
__global__ void flash_bwd_dq_kernel(float *dqkv, const float *qkv, const float *dout,
                                    const float *lse, const float *D, int T, int Hl, int KVl,
                                    int hd, float scale) {
    AH_DYNAMIC_SHARED(float, sm);
    const int hp = hd + 1, Cl = Hl * hd, ld = (Hl + 2 * KVl) * hd;
    float *Ks = sm, *Vs = Ks + KT * hp, *Qs = Vs + KT * hp, *dOs = Qs + WARPS * hd;
    const int bh = blockIdx.y, b = bh / Hl, h = bh % Hl;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int i0 = blockIdx.x * WARPS, i = i0 + warp, last = min(T - 1, i0 + WARPS - 1);
    const head_views hv = views(qkv, b, h, T, Hl, KVl, hd);
    const float *q_g = hv.q;
    float *q = Qs + warp * hd, *dO = dOs + warp * hd;
    float Li = 0.0f, Di = 0.0f;
    if (i < T) {
        const float *dO_g = dout + ((size_t)b * T + i) * Cl + (size_t)h * hd;
        for (int d = lane; d < hd; d += 32) {
            q[d] = q_g[(size_t)i * ld + d];
            dO[d] = dO_g[d];
        }
        Li = lse[(size_t)bh * T + i];
        Di = D[(size_t)bh * T + i];
    }
    float acc[MAX_R] = {0.0f};
    for (int j0 = 0; j0 <= last; j0 += KT) {
        __syncthreads();
        load_tile(Ks, hv.k, j0, T, ld, hd);
        load_tile(Vs, hv.v, j0, T, ld, hd);
        __syncthreads();
        if (i >= T || j0 > i) continue;
        const int j = j0 + lane;
        float ds = 0.0f;
        if (j <= i) {
            const float p = expf(dot_smem(q, Ks + lane * hp, hd) * scale - Li);
            ds = p * (dot_smem(dO, Vs + lane * hp, hd) - Di) * scale;
        }
        acc_rows(acc, ds, Ks, min(KT, i - j0 + 1), hp, hd, lane);
    }
    if (i >= T) return;
    float *dq = dqkv + (hv.q - qkv) + (size_t)i * ld;
#pragma unroll
    for (int r = 0; r < MAX_R; r++) {
        const int d = lane + 32 * r;
        if (d < hd) dq[d] += acc[r];
    }
}

// dv_j += sum_i P_ij dO_i ; dk_j += scale * sum_i dS_ij q_i over queries i >= j of every query
// head of the key/value head's group, in head order. One warp per key row; the block sweeps
// tiles of KT queries of each head. grid (ceil(T/WARPS), B*KVl).
__global__ void flash_bwd_dkv_kernel(float *dqkv, const float *qkv, const float *dout,
                                     const float *lse, const float *D, int T, int Hl, int KVl,
                                     int hd, float scale) {
    AH_DYNAMIC_SHARED(float, sm);
    const int hp = hd + 1, Cl = Hl * hd, ld = (Hl + 2 * KVl) * hd, group = Hl / KVl;
    float *Qs = sm, *dOs = Qs + KT * hp, *Ls = dOs + KT * hp, *Ds = Ls + KT;
    float *Kw = Ds + KT, *Vw = Kw + WARPS * hd;
    const int b = blockIdx.y / KVl, g = blockIdx.y % KVl;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int j0b = blockIdx.x * WARPS, j = j0b + warp;
    const head_views kv = views(qkv, b, g * group, T, Hl, KVl, hd);
    float *k = Kw + warp * hd, *v = Vw + warp * hd;
    if (j < T)
        for (int d = lane; d < hd; d += 32) {
            k[d] = kv.k[(size_t)j * ld + d];
            v[d] = kv.v[(size_t)j * ld + d];
        }
    float dk[MAX_R] = {0.0f}, dv[MAX_R] = {0.0f};
    for (int h = g * group; h < (g + 1) * group; h++) {
        const int bh = b * Hl + h;
        const float *q_g = qkv + (size_t)b * T * ld + (size_t)h * hd;
        const float *dO_g = dout + (size_t)b * T * Cl + (size_t)h * hd;
        for (int it0 = j0b - j0b % KT; it0 < T; it0 += KT) {
            __syncthreads();
            load_tile(Qs, q_g, it0, T, ld, hd);
            load_tile(dOs, dO_g, it0, T, Cl, hd);
            for (int e = threadIdx.x; e < KT; e += blockDim.x) {
                const int i = it0 + e;
                Ls[e] = i < T ? lse[(size_t)bh * T + i] : 0.0f;
                Ds[e] = i < T ? D[(size_t)bh * T + i] : 0.0f;
            }
            __syncthreads();
            if (j >= T || it0 + KT <= j) continue; // every query of the tile is before key j
            const int i = it0 + lane;
            float p = 0.0f, ds = 0.0f;
            if (i < T && i >= j) {
                p = expf(dot_smem(Qs + lane * hp, k, hd) * scale - Ls[lane]);
                ds = p * (dot_smem(dOs + lane * hp, v, hd) - Ds[lane]) * scale;
            }
            const int first = max(0, j - it0), end = min(KT, T - it0);
            for (int ii = first; ii < end; ii++) {
                const float pi = __shfl_sync(FULL, p, ii), dsi = __shfl_sync(FULL, ds, ii);
#pragma unroll
                for (int r = 0; r < MAX_R; r++) {
                    const int d = lane + 32 * r;
                    if (d < hd) {
                        dv[r] += pi * dOs[ii * hp + d];
                        dk[r] += dsi * Qs[ii * hp + d];
                    }
                }
            }
        }
    }
    if (j >= T) return;
    float *dk_g = dqkv + (kv.k - qkv) + (size_t)j * ld, *dv_g = dqkv + (kv.v - qkv) + (size_t)j * ld;
#pragma unroll
    for (int r = 0; r < MAX_R; r++) {
        const int d = lane + 32 * r;
        if (d < hd) {
            dk_g[d] += dk[r];
            dv_g[d] += dv[r];
        }
    }
}

static size_t fwd_smem(int hd) { return (size_t)(2 * KT * (hd + 1) + WARPS * hd) * sizeof(float); }
static size_t dq_smem(int hd) { return (size_t)(2 * KT * (hd + 1) + 2 * WARPS * hd) * sizeof(float); }
static size_t dkv_smem(int hd) {
    return (size_t)(2 * KT * (hd + 1) + 2 * KT + 2 * WARPS * hd) * sizeof(float);
}

void ah_cuda_attention_fwd(float *out, float *lse, float *scratch, const float *qkv, int B, int T,
                           int Hl, int KVl, int hd) {
    (void)scratch; // the fused kernel needs none
    if (!hd_ok(hd)) return;
    const dim3 grid((T + WARPS - 1) / WARPS, B * Hl);
    AH_LAUNCH(flash_fwd_kernel, grid, 32 * WARPS, fwd_smem(hd), 0)(out, lse, qkv, T, Hl, KVl, hd,
                                                         1.0f / sqrtf((float)hd));
    AH_CUDA_LAUNCHED();
}

// The state: one logsumexp per query row.
size_t ah_cuda_attention_state_floats(int B, int T, int Hl, int hd) {
    (void)hd;
    return (size_t)B * Hl * T;
}

size_t ah_cuda_attention_scratch_floats(int B, int T, int Hl, int KVl, int hd) {
    (void)KVl, (void)hd;
    return (size_t)B * Hl * T; // D
}

void ah_cuda_attention_bwd(float *dqkv, float *scratch, const float *dout, const float *qkv,
                           const float *out, const float *lse, int B, int T, int Hl, int KVl,
                           int hd) {
    if (!hd_ok(hd)) return;
    const float scale = 1.0f / sqrtf((float)hd);
    float *D = scratch;
    const size_t rows = (size_t)B * Hl * T;
    AH_LAUNCH(flash_bwd_d_kernel, (unsigned)((rows + ROWS_D - 1) / ROWS_D), 32 * ROWS_D, 0, 0)(D, dout, out, B,
                                                                                    T, Hl, hd);
    AH_CUDA_LAUNCHED();
    const unsigned row_tiles = (T + WARPS - 1) / WARPS;
    AH_LAUNCH(flash_bwd_dq_kernel, dim3(row_tiles, B * Hl), 32 * WARPS, dq_smem(hd), 0)(
        dqkv, qkv, dout, lse, D, T, Hl, KVl, hd, scale);
    AH_CUDA_LAUNCHED();
    AH_LAUNCH(flash_bwd_dkv_kernel, dim3(row_tiles, B * KVl), 32 * WARPS, dkv_smem(hd), 0)(
        dqkv, qkv, dout, lse, D, T, Hl, KVl, hd, scale);
    AH_CUDA_LAUNCHED();
}
