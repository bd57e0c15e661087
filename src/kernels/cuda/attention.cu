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

// One attention call's operands: the queries in qkv (B, Tq, ldq), head h at h hd; the keys and
// values in kv (B, Tk, ldk), key head g at kofs + g hd, value head g at vofs + g hd (kv is qkv for
// one process's attention; a ring's key/value block otherwise); the rows' positions (kernels.h's
// ah_cp_at_t: query i at pos(qa, i) sees key j iff pos(ka, j) <= pos(qa, i)).
struct attn_ops {
    const float *qkv, *kv;
    int ldq, ldk, kofs, vofs, Tq, Tk, Hl, KVl, hd;
    ah_cp_at_t qa, ka;
    float scale;
};

static attn_ops one_process(const float *qkv, int T, int Hl, int KVl, int hd) {
    const int ld = (Hl + 2 * KVl) * hd;
    return {qkv, qkv, ld, ld, Hl * hd, (Hl + KVl) * hd, T, T, Hl, KVl, hd, ah_cp_at_identity(T),
            ah_cp_at_identity(T), 1.0f / sqrtf((float)hd)};
}

static attn_ops ring_block(const float *qkv, ah_cp_at_t qa, const float *kv, ah_cp_at_t ka, int Tq, int Tk,
                           int Hl, int KVl, int hd) {
    return {qkv, kv, (Hl + 2 * KVl) * hd, 2 * KVl * hd, 0, KVl * hd, Tq, Tk, Hl, KVl, hd, qa, ka,
            1.0f / sqrtf((float)hd)};
}

// The smallest and largest position of rows [lo, hi] (two increasing runs, split at T/2).
__device__ __forceinline__ int min_pos(ah_cp_at_t a, int T, int lo, int hi) {
    const int h = T / 2, p = ah_cuda_cp_pos(a, T, lo);
    return lo < h && hi >= h ? min(p, ah_cuda_cp_pos(a, T, h)) : p;
}
__device__ __forceinline__ int max_pos(ah_cp_at_t a, int T, int lo, int hi) {
    const int h = T / 2, p = ah_cuda_cp_pos(a, T, hi);
    return lo < h && hi >= h ? max(p, ah_cuda_cp_pos(a, T, h - 1)) : p;
}

// Head h's q, and k, v of the key/value head it reads, at row 0 of batch b.
struct head_views {
    const float *q, *k, *v;
};
__device__ __forceinline__ head_views views(const attn_ops &a, int b, int h) {
    const int g = h / (a.Hl / a.KVl);
    const float *kv0 = a.kv + (size_t)b * a.Tk * a.ldk;
    return {a.qkv + (size_t)b * a.Tq * a.ldq + (size_t)h * a.hd, kv0 + a.kofs + (size_t)g * a.hd,
            kv0 + a.vofs + (size_t)g * a.hd};
}

// A warp's query row in a grid of (ceil(Tq/WARPS), B*Hl) blocks: batch, head, index (row: < Tq),
// its position, the largest position among the block's rows, and the head's views.
struct query_row {
    int bh, b, h, warp, lane, i, qp, q_last;
    bool row;
    head_views hv;
};
__device__ __forceinline__ query_row query_row_of(const attn_ops &a) {
    query_row w;
    w.bh = blockIdx.y, w.b = w.bh / a.Hl, w.h = w.bh % a.Hl;
    w.warp = threadIdx.x >> 5, w.lane = threadIdx.x & 31;
    const int i0 = blockIdx.x * WARPS;
    w.i = i0 + w.warp, w.row = w.i < a.Tq;
    w.qp = w.row ? ah_cuda_cp_pos(a.qa, a.Tq, w.i) : 0;
    w.q_last = max_pos(a.qa, a.Tq, i0, min(a.Tq - 1, i0 + WARPS - 1));
    w.hv = views(a, w.b, w.h);
    return w;
}

// Key tile j0 for a warp's query row: staged in shared memory (keys and values) once every warp is
// done with the previous tile (and has written its query row), unless no row of the thread block
// sees a key of it (a block-uniform skip, before the barriers); true when the warp's own row sees
// one (warp-uniform), so that the tile's first key is visible to it.
__device__ __forceinline__ bool kv_tile_seen(float *Ks, float *Vs, const query_row &w, int j0, const attn_ops &a) {
    const int k_first = min_pos(a.ka, a.Tk, j0, min(a.Tk, j0 + KT) - 1);
    if (k_first > w.q_last) return false;
    __syncthreads();
    load_tile(Ks, w.hv.k, j0, a.Tk, a.ldk, a.hd);
    load_tile(Vs, w.hv.v, j0, a.Tk, a.ldk, a.hd);
    __syncthreads();
    return w.row && k_first <= w.qp;
}

// grid (ceil(Tq/WARPS), B*Hl). stats NULL: a whole attention, out (B,Tq,Hl*hd) normalised and, if
// lse is not NULL, lse (B,Hl,Tq). stats (B,Hl,Tq,2) not NULL: one block of a ring, out the running
// accumulator and stats the running (max, sum), read and written back. A tile of keys no row of
// the block sees is skipped by the block, one no row of a warp sees by the warp.
__global__ void flash_fwd_kernel(float *out, float *lse, float *stats, attn_ops a) {
    AH_DYNAMIC_SHARED(float, sm);
    const int hd = a.hd, hp = hd + 1, Cl = a.Hl * hd;
    float *Ks = sm, *Vs = Ks + KT * hp, *Qs = Vs + KT * hp;
    const query_row w = query_row_of(a);
    const int bh = w.bh, b = w.b, h = w.h, warp = w.warp, lane = w.lane, i = w.i, qp = w.qp;
    const bool row = w.row;
    const head_views hv = w.hv;
    float *q = Qs + warp * hd, *o = out + ((size_t)b * a.Tq + (row ? i : 0)) * Cl + (size_t)h * hd;
    float *st = stats ? stats + 2 * ((size_t)bh * a.Tq + (row ? i : 0)) : NULL;
    float acc[MAX_R] = {0.0f};
    float m = -INFINITY, l = 0.0f;
    if (row) {
        for (int d = lane; d < hd; d += 32) q[d] = hv.q[(size_t)i * a.ldq + d];
        if (st) {
            m = st[0], l = st[1];
#pragma unroll
            for (int r = 0; r < MAX_R; r++)
                if (lane + 32 * r < hd) acc[r] = o[lane + 32 * r];
        }
    }
    for (int j0 = 0; j0 < a.Tk; j0 += KT) {
        if (!kv_tile_seen(Ks, Vs, w, j0, a)) continue;
        const int j = j0 + lane, j_end = min(a.Tk, j0 + KT);
        const bool seen = j < a.Tk && ah_cuda_cp_pos(a.ka, a.Tk, j) <= qp;
        const float s = seen ? dot_smem(q, Ks + lane * hp, hd) * a.scale : -INFINITY;
        // the tile's first key is seen (kv_tile_seen), so m_new is finite
        const float m_new = fmaxf(m, ah_warp_max(s));
        const float p = seen ? expf(s - m_new) : 0.0f;
        const float corr = expf(m - m_new); // 0 while m = -inf
        l = l * corr + ah_warp_sum(p);
#pragma unroll
        for (int r = 0; r < MAX_R; r++) acc[r] *= corr;
        acc_rows(acc, p, Vs, j_end - j0, hp, hd, lane); // unseen keys add p = 0
        m = m_new;
    }
    if (!row) return;
    __syncwarp(); // every lane has read st (a row that saw no tile exchanged nothing) before lane 0 writes it
    const float inv = st ? 1.0f : 1.0f / l;
#pragma unroll
    for (int r = 0; r < MAX_R; r++) {
        const int d = lane + 32 * r;
        if (d < hd) o[d] = acc[r] * inv;
    }
    if (st && lane == 0) st[0] = m, st[1] = l;
    if (!st && lse && lane == 0) lse[(size_t)bh * a.Tq + i] = m + logf(l);
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

// dq_i += scale * sum_j dS_ij k_j, dS_ij = P_ij (dO_i . v_j - D_i), into dqkv (qkv's layout). One
// warp per query row; tiles skipped as the forward's.
__global__ void flash_bwd_dq_kernel(float *dqkv, const float *dout, const float *lse, const float *D,
                                    attn_ops a) {
    AH_DYNAMIC_SHARED(float, sm);
    const int hd = a.hd, hp = hd + 1, Cl = a.Hl * hd;
    float *Ks = sm, *Vs = Ks + KT * hp, *Qs = Vs + KT * hp, *dOs = Qs + WARPS * hd;
    const query_row w = query_row_of(a);
    const int bh = w.bh, b = w.b, h = w.h, warp = w.warp, lane = w.lane, i = w.i, qp = w.qp;
    const bool row = w.row;
    const head_views hv = w.hv;
    float *q = Qs + warp * hd, *dO = dOs + warp * hd;
    float Li = 0.0f, Di = 0.0f;
    if (row) {
        const float *dO_g = dout + ((size_t)b * a.Tq + i) * Cl + (size_t)h * hd;
        for (int d = lane; d < hd; d += 32) {
            q[d] = hv.q[(size_t)i * a.ldq + d];
            dO[d] = dO_g[d];
        }
        Li = lse[(size_t)bh * a.Tq + i];
        Di = D[(size_t)bh * a.Tq + i];
    }
    float acc[MAX_R] = {0.0f};
    for (int j0 = 0; j0 < a.Tk; j0 += KT) {
        if (!kv_tile_seen(Ks, Vs, w, j0, a)) continue;
        const int j = j0 + lane, j_end = min(a.Tk, j0 + KT);
        float ds = 0.0f;
        if (j < a.Tk && ah_cuda_cp_pos(a.ka, a.Tk, j) <= qp) {
            const float p = expf(dot_smem(q, Ks + lane * hp, hd) * a.scale - Li);
            ds = p * (dot_smem(dO, Vs + lane * hp, hd) - Di) * a.scale;
        }
        acc_rows(acc, ds, Ks, j_end - j0, hp, hd, lane); // unseen keys add ds = 0
    }
    if (!row) return;
    float *dq = dqkv + (hv.q - a.qkv) + (size_t)i * a.ldq;
#pragma unroll
    for (int r = 0; r < MAX_R; r++) {
        const int d = lane + 32 * r;
        if (d < hd) dq[d] += acc[r];
    }
}

// dv_j += sum_i P_ij dO_i ; dk_j += scale * sum_i dS_ij q_i over the queries i that see key j, of
// every query head of the key/value head's group, in head order, into dkv (kv's layout). One warp
// per key row; the block sweeps tiles of KT queries of each head, skipping a tile whose queries
// all precede its keys (the block's, or a warp's key). grid (ceil(Tk/WARPS), B*KVl).
__global__ void flash_bwd_dkv_kernel(float *dkv, const float *dout, const float *lse, const float *D,
                                     attn_ops a) {
    AH_DYNAMIC_SHARED(float, sm);
    const int hd = a.hd, hp = hd + 1, Cl = a.Hl * hd, group = a.Hl / a.KVl;
    float *Qs = sm, *dOs = Qs + KT * hp, *Ls = dOs + KT * hp, *Ds = Ls + KT;
    float *Kw = Ds + KT, *Vw = Kw + WARPS * hd;
    const int b = blockIdx.y / a.KVl, g = blockIdx.y % a.KVl;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int j0b = blockIdx.x * WARPS, j = j0b + warp, j_last = min(a.Tk - 1, j0b + WARPS - 1);
    const head_views kv = views(a, b, g * group);
    const bool key = j < a.Tk;
    const int kp = key ? ah_cuda_cp_pos(a.ka, a.Tk, j) : 0, k_first = min_pos(a.ka, a.Tk, j0b, j_last);
    float *k = Kw + warp * hd, *v = Vw + warp * hd;
    if (key)
        for (int d = lane; d < hd; d += 32) {
            k[d] = kv.k[(size_t)j * a.ldk + d];
            v[d] = kv.v[(size_t)j * a.ldk + d];
        }
    float dk[MAX_R] = {0.0f}, dv[MAX_R] = {0.0f};
    for (int h = g * group; h < (g + 1) * group; h++) {
        const int bh = b * a.Hl + h;
        const float *q_g = a.qkv + (size_t)b * a.Tq * a.ldq + (size_t)h * hd;
        const float *dO_g = dout + (size_t)b * a.Tq * Cl + (size_t)h * hd;
        for (int it0 = 0; it0 < a.Tq; it0 += KT) {
            const int i_end = min(a.Tq, it0 + KT), q_max = max_pos(a.qa, a.Tq, it0, i_end - 1);
            if (q_max < k_first) continue; // block-uniform
            __syncthreads();
            load_tile(Qs, q_g, it0, a.Tq, a.ldq, hd);
            load_tile(dOs, dO_g, it0, a.Tq, Cl, hd);
            for (int e = threadIdx.x; e < KT; e += blockDim.x) {
                const int i = it0 + e;
                Ls[e] = i < a.Tq ? lse[(size_t)bh * a.Tq + i] : 0.0f;
                Ds[e] = i < a.Tq ? D[(size_t)bh * a.Tq + i] : 0.0f;
            }
            __syncthreads();
            if (!key || q_max < kp) continue; // warp-uniform
            const int i = it0 + lane;
            float p = 0.0f, ds = 0.0f;
            if (i < a.Tq && ah_cuda_cp_pos(a.qa, a.Tq, i) >= kp) {
                p = expf(dot_smem(Qs + lane * hp, k, hd) * a.scale - Ls[lane]);
                ds = p * (dot_smem(dOs + lane * hp, v, hd) - Ds[lane]) * a.scale;
            }
            for (int ii = 0; ii < i_end - it0; ii++) { // queries that do not see key j add 0
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
    if (!key) return;
    float *dk_g = dkv + (kv.k - a.kv) + (size_t)j * a.ldk, *dv_g = dkv + (kv.v - a.kv) + (size_t)j * a.ldk;
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

static void attention_fwd(float *out, float *lse, float *stats, const attn_ops &a, int B) {
    if (!hd_ok(a.hd)) return;
    const dim3 grid((a.Tq + WARPS - 1) / WARPS, B * a.Hl);
    AH_LAUNCH(flash_fwd_kernel, grid, 32 * WARPS, fwd_smem(a.hd), 0)(out, lse, stats, a);
    AH_CUDA_LAUNCHED();
}

// dq into dqkv, dk and dv into dkv (a.kv's layout); D (B*Hl*Tq floats) the scratch.
static void attention_bwd(float *dqkv, float *dkv, float *D, const float *dout, const float *out,
                          const float *lse, const attn_ops &a, int B) {
    if (!hd_ok(a.hd)) return;
    const size_t rows = (size_t)B * a.Hl * a.Tq;
    AH_LAUNCH(flash_bwd_d_kernel, (unsigned)((rows + ROWS_D - 1) / ROWS_D), 32 * ROWS_D, 0, 0)(D, dout, out, B,
                                                                                    a.Tq, a.Hl, a.hd);
    AH_CUDA_LAUNCHED();
    AH_LAUNCH(flash_bwd_dq_kernel, dim3((a.Tq + WARPS - 1) / WARPS, B * a.Hl), 32 * WARPS, dq_smem(a.hd), 0)(
        dqkv, dout, lse, D, a);
    AH_CUDA_LAUNCHED();
    AH_LAUNCH(flash_bwd_dkv_kernel, dim3((a.Tk + WARPS - 1) / WARPS, B * a.KVl), 32 * WARPS, dkv_smem(a.hd), 0)(
        dkv, dout, lse, D, a);
    AH_CUDA_LAUNCHED();
}

void ah_cuda_attention_fwd(float *out, float *lse, float *scratch, const float *qkv, int B, int T,
                           int Hl, int KVl, int hd) {
    (void)scratch; // the fused kernel needs none
    attention_fwd(out, lse, NULL, one_process(qkv, T, Hl, KVl, hd), B);
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
    attention_bwd(dqkv, dqkv, scratch, dout, out, lse, one_process(qkv, T, Hl, KVl, hd), B);
}

// ---- ring attention (kernels.h's context-parallel entries): the kernels above on a key/value
// block at the blocks' positions, the forward's running state in acc and stats between blocks ----

size_t ah_cuda_ring_attn_scratch_floats(int B, int Tq, int Tk, int Hl, int KVl, int hd) {
    (void)Tk, (void)KVl, (void)hd;
    return (size_t)B * Hl * Tq; // D
}

// acc = 0 (n_acc floats), stats rows = (-inf, 0).
__global__ void ring_init_kernel(float *acc, float *stats, size_t n_acc, size_t rows) {
    GRID_STRIDE(e, n_acc > rows ? n_acc : rows) {
        if (e < n_acc) acc[e] = 0.0f;
        if (e < rows) stats[2 * e] = -INFINITY, stats[2 * e + 1] = 0.0f;
    }
}

void ah_cuda_ring_attn_init(float *acc, float *stats, int B, int Tq, int Hl, int hd) {
    const size_t rows = (size_t)B * Hl * Tq, n_acc = rows * hd;
    AH_LAUNCH(ring_init_kernel, ah_cuda_blocks(n_acc, AH_CUDA_THREADS), AH_CUDA_THREADS, 0, 0)(acc, stats, n_acc,
                                                                                               rows);
    AH_CUDA_LAUNCHED();
}

void ah_cuda_ring_attn_fwd_block(float *acc, float *stats, float *scratch, const float *qkv, ah_cp_at_t q_at,
                                 const float *kv, ah_cp_at_t k_at, int B, int Tq, int Tk, int Hl, int KVl, int hd) {
    (void)scratch;
    attention_fwd(acc, NULL, stats, ring_block(qkv, q_at, kv, k_at, Tq, Tk, Hl, KVl, hd), B);
}

// out = acc / sum, lse = max + log(sum): one thread per element of out (B, Tq, Hl hd).
__global__ void ring_finish_kernel(float *out, float *lse, const float *acc, const float *stats, int Tq, int Hl,
                                   int hd, size_t n) {
    GRID_STRIDE(e, n) {
        const size_t bi = e / ((size_t)Hl * hd);
        const int h = (int)(e % ((size_t)Hl * hd)) / hd, d = (int)(e % hd), i = (int)(bi % Tq), b = (int)(bi / Tq);
        const size_t r = ((size_t)b * Hl + h) * Tq + i;
        out[e] = acc[e] * (1.0f / stats[2 * r + 1]);
        if (d == 0) lse[r] = stats[2 * r] + logf(stats[2 * r + 1]);
    }
}

void ah_cuda_ring_attn_finish(float *out, float *lse, const float *acc, const float *stats, int B, int Tq, int Hl,
                              int hd) {
    const size_t n = (size_t)B * Tq * Hl * hd;
    AH_LAUNCH_1D(ring_finish_kernel, n)(out, lse, acc, stats, Tq, Hl, hd, n);
    AH_CUDA_LAUNCHED();
}

void ah_cuda_ring_attn_bwd_block(float *dqkv, float *dkv, float *scratch, const float *dout, const float *qkv,
                                 const float *out, const float *lse, ah_cp_at_t q_at, const float *kv,
                                 ah_cp_at_t k_at, int B, int Tq, int Tk, int Hl, int KVl, int hd) {
    attention_bwd(dqkv, dkv, scratch, dout, out, lse, ring_block(qkv, q_at, kv, k_at, Tq, Tk, Hl, KVl, hd), B);
}

// Between the key/value heads of qkv rows (w = 2 KVl hd floats after the Hl hd query values, rows
// ld apart) and a block (rows of w): to_block, dst (the block) = src's heads; else dst's heads +=
// src (the block).
__global__ void ring_kv_kernel(float *dst, const float *src, int q_off, int ld, int w, bool to_block, size_t n) {
    GRID_STRIDE(e, n) {
        const size_t x = (e / w) * ld + q_off + e % w;
        if (to_block) dst[e] = src[x];
        else dst[x] += src[e];
    }
}

void ah_cuda_ring_kv_pack(float *kv, const float *qkv, int B, int T, int Hl, int KVl, int hd) {
    const size_t n = (size_t)B * T * 2 * KVl * hd;
    AH_LAUNCH_1D(ring_kv_kernel, n)(kv, qkv, Hl * hd, (Hl + 2 * KVl) * hd, 2 * KVl * hd, true, n);
    AH_CUDA_LAUNCHED();
}

void ah_cuda_ring_kv_add(float *dqkv, const float *dkv, int B, int T, int Hl, int KVl, int hd) {
    const size_t n = (size_t)B * T * 2 * KVl * hd;
    AH_LAUNCH_1D(ring_kv_kernel, n)(dqkv, dkv, Hl * hd, (Hl + 2 * KVl) * hd, 2 * KVl * hd, false, n);
    AH_CUDA_LAUNCHED();
}
