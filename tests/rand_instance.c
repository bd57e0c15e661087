/* Random small planner instances shared by the exactness tests: see rand_instance.h. */
#include "rand_instance.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng_state;

void ah_test_rnd_seed(uint64_t base, int instance) {
    rng_state = base ^ (uint64_t)(instance + 1) * 0x2545f4914f6cdd1dull;
}
uint64_t ah_test_rnd_state(void) { return rng_state; }
void ah_test_rnd_restore(uint64_t state) { rng_state = state; }

uint64_t ah_test_rnd(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}
int ah_test_rnd_int(int lo, int hi) { return lo + (int)(ah_test_rnd() % (uint64_t)(hi - lo + 1)); }
double ah_test_rnd_num(double lo, double hi) { return lo + (hi - lo) * (double)(ah_test_rnd() % 1000000) / 1e6; }

void ah_test_rand_model(const ah_test_model_range_t *r, const char *prefix, int instance, int L, ah_model_t *m,
                        ah_train_t *tr) {
    memset(m, 0, sizeof *m);
    snprintf(m->name, sizeof m->name, "%s-%d", prefix, instance);
    m->arch = ah_test_rnd() % 2 ? AH_ARCH_LLAMA : AH_ARCH_GPT2;
    m->n_layer = L;
    m->n_head = ah_test_rnd() % 2 ? r->heads : 2 * r->heads;
    m->d_model = m->n_head * 16 * (r->width_max > 1 ? ah_test_rnd_int(1, r->width_max) : 1);
    m->n_kv_head = m->arch == AH_ARCH_LLAMA ? (ah_test_rnd() % 2 ? m->n_head : m->n_head / 2) : m->n_head;
    m->d_ff = m->arch == AH_ARCH_GPT2 ? 4 * m->d_model : 8 * ah_test_rnd_int(4, 16);
    m->vocab = 128 * ah_test_rnd_int(r->vocab_lo, r->vocab_hi);
    m->max_pos = r->max_pos;
    m->tied = m->arch == AH_ARCH_GPT2 ? true : ah_test_rnd() % 2;
    m->norm_eps = 1e-5;
    tr->global_batch = ah_test_rnd_int(r->batch_lo, r->batch_hi);
    tr->seq_len = r->seq_unit * ah_test_rnd_int(1, 4);
    tr->micro_batch = ah_test_rnd() % 3 ? 0 : 1; /* mostly auto */
    tr->precision = ah_test_rnd() % 2 ? AH_PREC_BF16 : AH_PREC_FP32;
}

void ah_test_rand_gpu_type(ah_gpu_type_t *g, int k, double memory_gib, double tflops_lo, double tflops_hi,
                           double intra_lo) {
    snprintf(g->name, sizeof g->name, "G%d", k);
    g->memory_gib = memory_gib;
    g->tflops_bf16 = ah_test_rnd_num(tflops_lo, tflops_hi);
    g->tflops_fp16 = g->tflops_bf16;
    g->tflops_fp32 = g->tflops_bf16 / ah_test_rnd_num(2, 16);
    g->mem_bw_gb_s = ah_test_rnd_num(300, 3000);
    g->intra_node_gb_s = ah_test_rnd_num(intra_lo, 400);
    g->efficiency = ah_test_rnd_num(0.3, 0.9);
}

void ah_test_rand_nodes(ah_cluster_t *c, const int sizes[3], bool alternate, bool two_zones) {
    c->nodes = calloc((size_t)c->n_nodes, sizeof *c->nodes);
    if (!c->nodes) abort();
    int total = 0;
    for (int i = 0; i < c->n_nodes; i++) {
        ah_node_t *n = &c->nodes[i];
        snprintf(n->name, sizeof n->name, "n%d", i);
        n->type = alternate ? i % c->n_types : ah_test_rnd_int(0, c->n_types - 1);
        n->count = sizes[ah_test_rnd_int(0, 2)];
        if (total + n->count > 8) n->count = 8 - total;
        if (n->count == 0) { /* no room left: fewer nodes */
            c->n_nodes = i;
            break;
        }
        total += n->count;
        snprintf(n->zone, sizeof n->zone, "%s", two_zones && ah_test_rnd() % 3 == 0 ? "b" : "a");
        n->usd_per_gpu_hour = ah_test_rnd_num(0.5, 3);
    }
    c->net.inter_node_gb_s = ah_test_rnd_num(5, 50);
    c->net.inter_zone_gb_s = ah_test_rnd_num(1, 5);
    c->net.latency_us = ah_test_rnd_num(2, 20);
    c->net.inter_zone_latency_us = ah_test_rnd_num(20, 200);
    c->net.intra_latency_us = ah_test_rnd_num(1, 5);
    c->net.cloud_gb_s = 1;
}
