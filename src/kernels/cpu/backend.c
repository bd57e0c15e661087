/* The CPU backend's table. */
#include <string.h>

#include "kernels/cpu/cpu.h"

void ah_cpu_zero(float *x, size_t n) { memset(x, 0, n * sizeof *x); }

static const ah_kernels_t cpu_kernels = {
    .name = "cpu",
    .zero = ah_cpu_zero,
    .matmul_fwd = ah_cpu_matmul_fwd,
    .matmul_bwd = ah_cpu_matmul_bwd,
    .layernorm_fwd = ah_cpu_layernorm_fwd,
    .layernorm_bwd = ah_cpu_layernorm_bwd,
    .gelu_fwd = ah_cpu_gelu_fwd,
    .gelu_bwd = ah_cpu_gelu_bwd,
    .attention_fwd = ah_cpu_attention_fwd,
    .attention_bwd = ah_cpu_attention_bwd,
    .attention_scratch_floats = ah_cpu_attention_scratch_floats,
    .attention_state_floats = ah_cpu_attention_state_floats,
    .residual_fwd = ah_cpu_residual_fwd,
    .residual_bwd = ah_cpu_residual_bwd,
    .embedding_fwd = ah_cpu_embedding_fwd,
    .embedding_bwd = ah_cpu_embedding_bwd,
    .head_loss = ah_cpu_head_loss,
    .adamw = ah_cpu_adamw,
    .sum_squares = ah_cpu_sum_squares,
};

const ah_kernels_t *ah_kernels_cpu(void) { return &cpu_kernels; }
