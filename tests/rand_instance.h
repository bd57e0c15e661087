/* Random small planner instances for the exactness tests (tests/test_planner_exact.c,
 * tests/test_planner_exact_cp.c): a xorshift generator seeded per instance, and the draws the two
 * tests share (a model and its training, nodes, the network), each within the caller's ranges.
 * One global generator (tests are single-threaded); the draws take numbers from it in a fixed
 * order, so a seed gives the same instance on every run. Allocations (the cluster's nodes) are the
 * caller's, freed with ah_cluster_free. */
#ifndef AH_TESTS_RAND_INSTANCE_H
#define AH_TESTS_RAND_INSTANCE_H

#include <stdbool.h>
#include <stdint.h>

#include "cost/cost.h"
#include "spec/cluster.h"
#include "spec/model.h"

/* The generator: seeded from base and the instance's index; its state saved and set again (to draw
 * one instance again with other sizes). */
void ah_test_rnd_seed(uint64_t base, int instance);
uint64_t ah_test_rnd_state(void);
void ah_test_rnd_restore(uint64_t state);
uint64_t ah_test_rnd(void);
int ah_test_rnd_int(int lo, int hi);         /* in [lo, hi] */
double ah_test_rnd_num(double lo, double hi); /* in [lo, hi), in steps of 1e-6 of the range */

/* The ranges of a model and its training. */
typedef struct {
    int heads;              /* n_head: heads or 2 x heads */
    int width_max;          /* d_model: n_head x 16 x [1, width_max] (1: no draw) */
    int vocab_lo, vocab_hi; /* vocab: 128 x [vocab_lo, vocab_hi] */
    int max_pos;
    int batch_lo, batch_hi; /* the global batch */
    int seq_unit;           /* seq_len: seq_unit x [1, 4] */
} ah_test_model_range_t;

/* A Llama or GPT-2 model of L layers named "<prefix>-<instance>", and its training (micro-batch
 * mostly auto, bf16 or fp32). */
void ah_test_rand_model(const ah_test_model_range_t *r, const char *prefix, int instance, int L, ah_model_t *m,
                        ah_train_t *tr);

/* GPU type k, "G<k>", of memory_gib: bf16 (and fp16) TFLOPS in [tflops_lo, tflops_hi), fp32 2-16x
 * less, memory bandwidth 300-3000 GB/s, intra-node links from intra_lo to 400 GB/s, efficiency 0.3-0.9. */
void ah_test_rand_gpu_type(ah_gpu_type_t *g, int k, double memory_gib, double tflops_lo, double tflops_hi,
                           double intra_lo);

/* c->n_nodes nodes (c->nodes allocated) of 8 GPUs at most in all, each sizes[0..2] GPUs (the last
 * ones left out where 8 are reached), of a random type or (alternate) types in turn, in zone "a" or
 * (two_zones) a third of them in "b"; then the network. */
void ah_test_rand_nodes(ah_cluster_t *c, const int sizes[3], bool alternate, bool two_zones);

#endif
