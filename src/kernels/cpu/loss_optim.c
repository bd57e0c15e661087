/* Fused tied LM head + softmax cross-entropy, AdamW, and the sum of squares for the gradient
 * norm. */
#include <cblas.h>
#include <math.h>

#include "kernels/cpu/cpu.h"

AH_CPU_CLONES double ah_cpu_head_loss(float *dx, float *dwte, float *logits, const float *x, const float *wte,
                        const int32_t *targets, float scale, int N, int C, int V) {
    const int backward = dx || dwte;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, V, C, 1.0f, x, C, wte, C, 0.0f, logits,
                V);
    double loss = 0.0;
    for (int n = 0; n < N; n++) {
        float *row = logits + (size_t)n * V;
        const int tgt = targets[n];
        float mx = row[0];
        for (int j = 1; j < V; j++) mx = row[j] > mx ? row[j] : mx;
        const float shifted_tgt = row[tgt] - mx;
        /* The partition sum runs over the whole vocabulary: accumulate it in double. */
        for (int j = 0; j < V; j++) row[j] = ah_cpu_expf(row[j] - mx);
        double sum = 0.0;
        for (int j = 0; j < V; j++) sum += row[j];
        loss += log(sum) - (double)shifted_tgt;
        if (!backward) continue;
        const float p_scale = (float)(1.0 / sum) * scale;
        for (int j = 0; j < V; j++) row[j] *= p_scale;
        row[tgt] -= scale;
    }
    if (dx) /* (N, V) @ (V, C) */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, C, V, 1.0f, logits, V, wte, C,
                    1.0f, dx, C);
    if (dwte) /* (V, N) @ (N, C) */
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, V, C, N, 1.0f, logits, V, x, C, 1.0f,
                    dwte, C);
    return loss;
}

AH_CPU_CLONES void ah_cpu_adamw(float *param, const float *grad, float *m, float *v, size_t n,
                  const ah_adamw_hparams_t *hp, float grad_scale, int64_t t) {
    /* Scalars in double, then fp32 element math in torch.optim.AdamW's order (torch 1.13,
     * single-tensor path), so results agree with it to rounding. */
    const double bc1 = 1.0 - pow((double)hp->beta1, (double)t);
    const double bc2 = 1.0 - pow((double)hp->beta2, (double)t);
    const float decay = (float)(1.0 - (double)hp->lr * hp->weight_decay);
    const float step_size = (float)((double)hp->lr / bc1);
    const float bc2_sqrt = (float)sqrt(bc2);
    const float b1 = hp->beta1, b2 = hp->beta2, one_m_b1 = 1.0f - b1, one_m_b2 = 1.0f - b2;
    for (size_t i = 0; i < n; i++) {
        const float g = grad[i] * grad_scale;
        const float mi = m[i] * b1 + g * one_m_b1;
        const float vi = v[i] * b2 + one_m_b2 * g * g;
        const float denom = sqrtf(vi) / bc2_sqrt + hp->eps;
        param[i] = param[i] * decay - step_size * (mi / denom);
        m[i] = mi;
        v[i] = vi;
    }
}

double ah_cpu_sum_squares(const float *x, size_t n) {
    /* Eight interleaved partial sums, combined in a fixed order: deterministic, and short
     * enough dependency chains to keep the FPU busy. */
    double acc[8] = {0};
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++) acc[k] += (double)x[i + k] * x[i + k];
    for (; i < n; i++) acc[i % 8] += (double)x[i] * x[i];
    return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}
