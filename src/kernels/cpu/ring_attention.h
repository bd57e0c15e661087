/* Context parallelism's CPU pieces (issue 38; docs/runtime.md "Context parallelism"): the
 * kernels by position (rotary angles, position rows) and ring attention's: causal attention of a CP rank's query rows against one key/value block at a
 * time, the blocks arriving in any order (the ring), merged by the online softmax, and the
 * backward by block, recomputing the probabilities from the forward's per-row logsumexp.
 *
 * Layout as kernels/kernels.h's attention: the rank's qkv is (B, Tq, (Hl + 2 KVl) hd); a
 * key/value block is kv (B, Tk, 2 KVl hd): per token the KVl key heads, then the KVl value heads
 * (the part of a qkv row after its query heads, so ah_cpu_ring_kv_pack copies exactly what the
 * ring passes: only the KV heads under GQA). Causality is by global position: query row i
 * (position q_pos[i]) sees key j (position k_pos[j]) iff k_pos[j] <= q_pos[i]. Scale 1/sqrt(hd).
 *
 * Forward: ah_cpu_ring_attn_init, then ah_cpu_ring_attn_fwd_block once per block (any order,
 * its own block included), then ah_cpu_ring_attn_finish: out and lse (B, Hl, Tq), which the
 * backward takes. Backward: ah_cpu_ring_attn_bwd_block once per block: dq accumulates into the
 * rank's dqkv (its query part), dk and dv into dkv (B, Tk, 2 KVl hd), the block owner's to sum.
 * Every row has its own position among the keys of some block (its own), so no row ends empty.
 * Buffers are the caller's; scratch holds ah_cpu_ring_attn_scratch_floats(Tq, Tk) floats.
 * Deterministic: a fixed order on one thread. The math differs from ah_cpu_attention_fwd's
 * (an online merge of per-block maxima), so results agree to rounding, not bit for bit. */
#ifndef AH_KERNELS_CPU_RING_ATTENTION_H
#define AH_KERNELS_CPU_RING_ATTENTION_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/kernels.h"

size_t ah_cpu_ring_attn_scratch_floats(int Tq, int Tk);
/* acc (B, Tq, Hl hd) = 0; stats (B, Hl, Tq, 2): running maximum -inf, running sum 0. */
void ah_cpu_ring_attn_init(float *acc, float *stats, int B, int Tq, int Hl, int hd);
void ah_cpu_ring_attn_fwd_block(float *acc, float *stats, float *scratch, const float *qkv, const int *q_pos,
                                const float *kv, const int *k_pos, int B, int Tq, int Tk, int Hl, int KVl, int hd);
/* out = acc / sum per row; lse = max + log(sum). out may be acc. */
void ah_cpu_ring_attn_finish(float *out, float *lse, const float *acc, const float *stats, int B, int Tq, int Hl,
                             int hd);
/* dqkv's query part += dQ; dkv += (dK, dV) of this block. out and lse are the finished forward's. */
void ah_cpu_ring_attn_bwd_block(float *dqkv, float *dkv, float *scratch, const float *dout, const float *qkv,
                                const float *out, const float *lse, const int *q_pos, const float *kv,
                                const int *k_pos, int B, int Tq, int Tk, int Hl, int KVl, int hd);
/* The causal load balance: a sequence of T tokens cut into 2c chunks of T / (2c) (T a multiple
 * of 2c); CP rank i of c holds chunks i and 2c - 1 - i, so every rank does the same attention
 * work. pos (T / c) = the global positions of rank i's tokens, in its local order. */
void ah_cp_positions(int *pos, int T, int c, int i);
/* The one-process kernels (kernels/kernels.h) with row t of each sequence at position pos[t]
 * (pos: T entries) instead of t: a CP rank's rotary angles and GPT-2 position rows. pos NULL or
 * 0 .. T-1 is the one-process kernel, bit for bit (it is the same code). */
void ah_cpu_rope_fwd_at(float *x, const int *pos, int B, int T, int n_heads, int hd, int stride, ah_rope_t rope);
void ah_cpu_rope_bwd_at(float *dx, const int *pos, int B, int T, int n_heads, int hd, int stride, ah_rope_t rope);
void ah_cpu_embedding_fwd_at(float *out, const int32_t *tokens, const float *wte, const float *wpe, const int *pos,
                             int B, int T, int C, int v0, int Vl);
void ah_cpu_embedding_bwd_at(float *dwte, float *dwpe, const float *dout, const int32_t *tokens, const int *pos,
                             int B, int T, int C, int v0, int Vl);
/* kv (B, T, 2 KVl hd) = the key and value heads of qkv (B, T, (Hl + 2 KVl) hd). */
void ah_cpu_ring_kv_pack(float *kv, const float *qkv, int B, int T, int Hl, int KVl, int hd);

#endif
