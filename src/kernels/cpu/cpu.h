/* The CPU backend's kernels, one function per ah_kernels_t entry (see kernels/kernels.h for the
 * contract of each); backend.c gathers them into the table. Internal to src/kernels/cpu/. */
#ifndef AH_KERNELS_CPU_CPU_H
#define AH_KERNELS_CPU_CPU_H

#include "kernels/kernels.h"

void ah_cpu_zero(float *x, size_t n);

void ah_cpu_matmul_fwd(float *out, const float *inp, const float *w, const float *bias, int N,
                       int IC, int OC);
void ah_cpu_matmul_bwd(float *dinp, float *dw, float *dbias, const float *dout, const float *inp,
                       const float *w, int N, int IC, int OC);

void ah_cpu_layernorm_fwd(float *out, float *mean, float *rstd, const float *inp,
                          const float *weight, const float *bias, int N, int C, float eps);
void ah_cpu_layernorm_bwd(float *dinp, float *dweight, float *dbias, const float *dout,
                          const float *inp, const float *weight, const float *mean,
                          const float *rstd, int N, int C);
void ah_cpu_gelu_fwd(float *out, const float *inp, size_t n);
void ah_cpu_gelu_bwd(float *dinp, const float *dout, const float *inp, size_t n);
void ah_cpu_residual_fwd(float *out, const float *a, const float *b, size_t n);
void ah_cpu_residual_bwd(float *da, float *db, const float *dout, size_t n);
void ah_cpu_embedding_fwd(float *out, const int32_t *tokens, const float *wte, const float *wpe,
                          int B, int T, int C);
void ah_cpu_embedding_bwd(float *dwte, float *dwpe, const float *dout, const int32_t *tokens,
                          int B, int T, int C);

void ah_cpu_attention_fwd(float *out, float *probs, const float *qkv, int B, int T, int Hl,
                          int hd);
void ah_cpu_attention_bwd(float *dqkv, float *scratch, const float *dout, const float *qkv,
                          const float *probs, int B, int T, int Hl, int hd);
size_t ah_cpu_attention_scratch_floats(int B, int T, int Hl, int hd);

double ah_cpu_head_loss(float *dx, float *dwte, float *logits, const float *x, const float *wte,
                        const int32_t *targets, float scale, int N, int C, int V);
void ah_cpu_adamw(float *param, const float *grad, float *m, float *v, size_t n,
                  const ah_adamw_hparams_t *hp, float grad_scale, int64_t t);
double ah_cpu_sum_squares(const float *x, size_t n);

#endif
