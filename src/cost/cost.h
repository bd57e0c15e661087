/* Cost and memory model: pure functions, no I/O, no MPI.
 *
 * Three layers of detail, each built on the one before:
 *  1. accounting per layer kind (embedding, block, head) as a function of TP degree t:
 *     parameters, forward/backward FLOPs per micro-batch, activation bytes kept for backward;
 *  2. a stage (a TP group holding blocks [first, last), maybe the embedding and/or the head):
 *     seconds per micro-batch forward and backward (a profile's, else kernel by kernel on a GPU
 *     type with a known SM count, cost/kernel_time.h, else the flat roofline), bytes of memory
 *     per device;
 *  3. a whole plan (ah_evaluate in plan/evaluate.h, above plan.h): iteration time with its breakdown, per-device
 *     memory against capacity, the bottleneck.
 * Every formula is written down in docs/cost-model.md; keep the two in step.
 */
#ifndef AH_COST_COST_H
#define AH_COST_COST_H

#include <stdbool.h>
#include <stdint.h>

#include "spec/arch.h"
#include "spec/cluster.h"
#include "spec/model.h"

/* fp32: everything fp32. bf16 and fp16: mixed precision (16-bit weights, activations and
 * gradients; fp32 master weights and AdamW state), priced at the type's tflops.bf16 / tflops.fp16.
 * fp16 also needs dynamic loss scaling (runtime/loss_scale.h); bf16, with fp32's exponent, does not.
 * The values are the index of ah_gpu_peak_flops (spec/cluster.h). */
typedef enum { AH_PREC_FP32 = 0, AH_PREC_BF16 = 1, AH_PREC_FP16 = 2 } ah_precision_t;
#define AH_PRECISION_VALUES "fp32, bf16 or fp16" /* for messages and --help */

const char *ah_precision_name(ah_precision_t p);
/* "fp32" / "bf16" / "fp16" -> precision; false if unknown. */
bool ah_precision_parse(const char *s, ah_precision_t *out);
/* Bytes of one activation or gradient element: 4 for fp32, 2 for the 16-bit precisions. */
int64_t ah_precision_elt_bytes(ah_precision_t p);
/* Whether GPU type g runs precision p: the cluster gives its TFLOP/s for p (a type needs only the
 * rates of the precisions it is used with; one left out means it cannot run that precision). */
bool ah_gpu_runs(const ah_gpu_type_t *g, ah_precision_t p);

/* The checkpoint policy the traffic counts (plan/ckpt_traffic.h; docs/cost-model.md "Checkpoint
 * traffic"): what train and run take as --ckpt-every, --replica-memory-gb and --cloud, given to plan
 * and evaluate. Never in the plan file (a run's flags, not the plan's shape); zeroed: not given, and
 * checkpoint traffic is not counted (the verbs say so). */
typedef struct ah_ckpt_policy {
    int64_t every;                   /* a save every `every` iterations; 0: no interval given */
    double replica_gb;               /* in-memory replicas to partners, at most this many GB a host; 0: none */
    char cloud_region[AH_NAME_MAX];  /* the cloud tier's bucket's region; "": no cloud tier */
} ah_ckpt_policy_t;

typedef struct ah_train {
    int64_t global_batch; /* B: sequences per iteration */
    int64_t seq_len;      /* T */
    int64_t micro_batch;  /* m: sequences per micro-batch */
    ah_precision_t precision;
    /* The planner's assumption while it searches for plans that fit with a sharded optimizer
     * (plan/shard_choice.c): every device keeps 1/opt_shard_over of its AdamW state, rounded up
     * per data-parallel group (ah_stage_cost's state_bytes). 0 or 1: not sharded (plans, the
     * runtime and ah_evaluate price the plan's own optimizer_shards instead). */
    int64_t opt_shard_over;
    ah_ckpt_policy_t ckpt; /* what checkpoint traffic to count (not in the plan file) */
} ah_train_t;

/* ---- 1. accounting (per TP rank of a group of t) ---- */

/* Parameters held by one TP rank for one layer of that kind: ah_layer_params (spec/arch.h). The
 * embedding and the head are vocabulary-parallel: a rank holds Vp/t rows of the V x C matrix,
 * Vp = ah_vocab_padded(m, t), padding included. A tied head counts only its final norm there;
 * the copy of the tied matrix a separate last stage keeps is counted by the stage. */
/* Unique parameters of the model, no padding (published counts: GPT-2 124M = 124,439,808). */
int64_t ah_model_params_total(const ah_model_t *m);
/* Matmul FLOPs of one micro-batch of b sequences of T tokens, per TP rank (the head: 2 N C Vp/t,
 * padded rows included). Backward = 2 x forward (input and weight gradients). */
double ah_layer_fwd_flops(const ah_model_t *m, ah_layer_kind_t kind, int t, int64_t b, int64_t T);
/* Its attention part (a block's QK^T and AV over the full T x T square): 4 b T^2 C / t. */
double ah_attention_fwd_flops(const ah_model_t *m, int t, int64_t b, int64_t T);
double ah_layer_bwd_flops(const ah_model_t *m, ah_layer_kind_t kind, int t, int64_t b, int64_t T);
/* The weight-gradient GEMMs' part of ah_layer_bwd_flops (dW = X^T dY of every weight matmul, the
 * forward's weight-matmul FLOPs again; attention's score matmuls have no weights, so all of their
 * backward is the input gradient's). */
double ah_layer_wgrad_flops(const ah_model_t *m, ah_layer_kind_t kind, int t, int64_t b, int64_t T);
/* Bytes kept from forward to backward for one micro-batch, per TP rank. With recompute, a block
 * keeps only its input. fp32 = the CPU runtime's layout (attention probabilities kept);
 * bf16, fp16 = a GPU with a fused attention kernel (softmax statistics instead of the T x T matrix). */
int64_t ah_layer_act_bytes(const ah_model_t *m, ah_layer_kind_t kind, int t, int64_t b, int64_t T,
                           ah_precision_t p, bool recompute);
/* The same per CP rank of a context-parallel group of cp (cp <= 1: ah_layer_act_bytes): the rank
 * holds T / cp tokens of each sequence (the causal load balance's two chunks), so every tensor is
 * 1/cp of the unsplit one, and attention keeps ring attention's logsumexp per query row
 * (b x H/t x T/cp fp32) instead of the probabilities. */
int64_t ah_layer_act_bytes_cp(const ah_model_t *m, ah_layer_kind_t kind, int t, int64_t b, int64_t T, int cp,
                              ah_precision_t p, bool recompute);
/* Ring attention's buffers on one CP rank (runtime/cp_ring.h), held once per device whatever its
 * layers, fp32 in every precision (the runtime's ring keeps its blocks fp32, as the activations
 * they are cut from: design-changes 57): the key/value block in use and the one arriving, and
 * their two gradient accumulators (4 x b x T/cp x 2 KV/t x hd fp32), the online softmax's
 * accumulator (b x H/t x T/cp x hd fp32) and statistics (2 fp32 per row), and the kernels'
 * scratch: in fp32 the CPU kernel's (2 (T/cp)^2 fp32), in bf16 and fp16 (a CUDA backend's) the
 * backward's D (one fp32 per row, b x H/t x T/cp). 0 for cp <= 1. */
int64_t ah_cp_ring_bytes(const ah_model_t *m, int t, int64_t b, int64_t T, int cp, ah_precision_t p);
/* One key/value block, what a ring step sends to the next CP rank: b x T/cp x 2 KV/t x hd fp32
 * in every precision (only the KV heads under GQA). 0 for cp <= 1. */
int64_t ah_cp_ring_block_bytes(const ah_model_t *m, int t, int64_t b, int64_t T, int cp);
/* Bytes one block keeps from a split backward's B to its W for one micro-batch, per TP rank, besides
 * its activation slot: the attention output's and the MLP output's output gradients (C + C per
 * token; the qkv and MLP-in gradients go into the slot's qkv and pre-activation, which B no longer
 * reads); with recompute, whose slot is only the block's input, every linear layer's output
 * gradient ((H + 2 KV) hd / t + C + F/t (GPT-2) or 2 F/t (LLaMA's gate and up) + C per token) and
 * its input (C + C/t + C + F/t). The runtime's runtime/gpt_split.c. */
int64_t ah_layer_wgrad_keep_bytes(const ah_model_t *m, int t, int64_t b, int64_t T, ah_precision_t p,
                                  bool recompute);
/* Bytes per parameter for weight + gradient + optimizer state (AdamW m, v; bf16 and fp16 add fp32
 * master weights): 16 for every precision. */
int64_t ah_param_state_bytes(ah_precision_t p);
/* The part of it that is AdamW's state, which a sharded optimizer splits over its group: m and v
 * (fp32: 8), plus the fp32 master weights under bf16 / fp16 (12). */
int64_t ah_optimizer_state_bytes(ah_precision_t p);

/* ---- 2. a stage ---- */

typedef struct ah_profile ah_profile_t; /* measured timings (cost/profile.h); NULL = roofline */

typedef struct ah_cost_ctx {
    const ah_model_t *model;
    const ah_cluster_t *cluster;
    const ah_train_t *train;
    int t;                        /* TP degree */
    const ah_profile_t *profile;  /* may be NULL */
    int cp;                       /* the pipeline's context-parallel degree; 0 or 1: none */
    double cp_bw, cp_latency_s;   /* the ring's slowest hop between the stage's CP ranks (bytes/s
                                     per flow, s); cp_bw 0: the type's intra-node link */
    bool p2p_whole;               /* a hop sends the whole boundary from every TP rank (plan "p2p":
                                     "whole"); false: scatter-gather (plan/plan.h ah_p2p_split_t) */
} ah_cost_ctx_t;

/* ctx's CP degree, at least 1. */
static inline int ah_cost_cp(const ah_cost_ctx_t *ctx) { return ctx->cp > 1 ? ctx->cp : 1; }

typedef struct ah_stage_cost {
    double fwd_s;            /* one micro-batch forward, compute + TP all-reduces (the blocks';
                                the embedding's output on the first stage; the head's softmax
                                statistics on the last) */
    double bwd_s;            /* one micro-batch backward (+ recomputation), compute + TP comm
                                (the blocks'; the head's input gradient on the last stage) */
    double tp_comm_fwd_s;    /* the TP all-reduce part of fwd_s */
    double tp_comm_bwd_s;    /* the TP all-reduce part of bwd_s */
    double cp_comm_fwd_s;    /* context parallelism: the ring's transfers not hidden behind the
                                attention compute, part of fwd_s */
    double cp_comm_bwd_s;    /* the same in bwd_s (the recomputed forward's ring included) */
    int64_t params;          /* parameters held by one device of the group */
    int64_t state_bytes;     /* params x ah_param_state_bytes */
    int64_t act_bytes_per_mb;/* activations per in-flight micro-batch */
    int64_t fixed_bytes;     /* buffers not per micro-batch: workspace, recompute buffer,
                                p2p buffers, and the type's reserved constant */
    int64_t shared_bytes;    /* the part of fixed_bytes a device holds once however many (virtual)
                                stages it holds: workspace, recompute buffer, reserved constant */
    double wgrad_s;          /* the part of bwd_s that is the weight-gradient pass (W of a split
                                backward, zero-bubble's): the blocks' backward compute times its
                                weight-gradient share of their matmul FLOPs (ah_layer_wgrad_flops /
                                ah_layer_bwd_flops); recomputation, TP comm, the embedding's and
                                the head's backward stay in B, the input-gradient pass, as the
                                runtime runs them */
    int64_t wgrad_keep_bytes;/* a split backward's W inputs for one micro-batch (its blocks'
                                ah_layer_wgrad_keep_bytes), held from its B to its W */
} ah_stage_cost_t;

/* Stage on GPU type `type` (index into ctx->cluster->types) holding blocks [first, last), plus the
 * embedding when has_embed and the head when has_head. */
void ah_stage_cost(const ah_cost_ctx_t *ctx, int type, int first, int last, bool has_embed,
                   bool has_head, bool recompute, ah_stage_cost_t *out);

/* Micro-batches in flight on stage s (from 0) of S under 1F1B with n micro-batches: min(S-s, n). */
int64_t ah_inflight(int S, int s, int64_t n);
/* Peak bytes on one device of the stage with `inflight` micro-batches in flight. */
int64_t ah_stage_memory_bytes(const ah_stage_cost_t *c, int64_t inflight);

/* ---- links ---- */

/* The link classes, slowest last (cost/links.c; docs/cost-model.md "Links"). A class is a kind;
 * the link between two given nodes (ah_link_of) is the class's figures or a "links" override. */
typedef enum {
    AH_LINK_INTRA = 0,
    AH_LINK_INTER_NODE = 1,
    AH_LINK_INTER_ZONE = 2,
    AH_LINK_INTER_REGION = 3
} ah_link_t;
#define AH_N_LINK_CLASSES 4
const char *ah_link_class_name(ah_link_t link); /* "intra-node", ..., "inter-region" */

/* The link between node a (of GPU type type_a) and node b: what every transfer is priced on. */
typedef struct ah_link_info {
    ah_link_t cls;
    double bw;          /* bytes/s per GPU */
    double latency_s;   /* per message */
    double usd_per_gb;  /* egress $ per 10^9 bytes crossing it; 0 inside a zone or when unpriced */
    double total_bw;    /* bytes/s the pair's flows share at once (total_gb_s); 0: no such cap */
    bool private_link;  /* marked "private" (a VPN or peering); intra-zone links count as private */
    int override;       /* index into cluster->net.links, or -1: the class's figures */
} ah_link_info_t;
ah_link_info_t ah_link_of(const ah_cluster_t *c, int node_a, int node_b, int type_a, int type_b);
/* The class only (ah_link_of(...).cls). */
ah_link_t ah_link_between(const ah_cluster_t *c, int node_a, int node_b);
/* Bandwidth (bytes/s) and latency (s) of a class's own figures (no override); intra uses the
 * slower type's link. */
double ah_link_bw(const ah_cluster_t *c, ah_link_t link, int type_a, int type_b);
double ah_link_latency(const ah_cluster_t *c, ah_link_t link);
/* The fastest a link between two zones can be: the best bandwidth and the least latency among the
 * inter-zone class, the inter-region one where the nodes are in two regions or more, and every
 * "links" override (for lower bounds). */
ah_link_info_t ah_link_best_across_zones(const ah_cluster_t *c, int type_a, int type_b);
/* Per-GPU bandwidth of l when `flows` flows cross it at once: min(bw, total_bw / flows). */
double ah_link_shared_bw(const ah_link_info_t *l, int flows);
/* Seconds of one micro-batch's hop (its boundary activation, b x T/cp x C) between stages of types
 * type_a and type_b over the link l (l->bw per flow): the whole boundary per flow, or under
 * scatter-gather at t > 1 (ctx->p2p_whole false) its 1/t part per flow and then the receiving TP
 * group's ring all-gather of it over the slower type's intra-node link (docs/cost-model.md "Pipeline
 * p2p"). The same both ways: the gradient's hop is priced as the activation's. */
double ah_p2p_seconds_on(const ah_cost_ctx_t *ctx, const ah_link_info_t *l, int type_a, int type_b);
/* The part of that hop the link itself is busy: each flow's bytes over l->bw (no latency, no
 * all-gather). A stage's next send on the hop queues behind it (plan/replay.h). */
double ah_p2p_wire_seconds_on(const ah_cost_ctx_t *ctx, const ah_link_info_t *l);
/* The same over a link class's own figures. */
double ah_p2p_seconds(const ah_cost_ctx_t *ctx, ah_link_t link, int type_a, int type_b);
/* The parts a hop's boundary is cut into: ctx->t under scatter-gather, else 1. */
static inline int ah_p2p_parts(const ah_cost_ctx_t *ctx) { return ctx->p2p_whole || ctx->t < 1 ? 1 : ctx->t; }
/* Ring all-reduce of `bytes` over `n` members on a link of bandwidth bw (bytes/s), latency lat. */
double ah_allreduce_seconds(double bytes, int n, double bw, double lat);
/* A DP group's links for its hierarchical sum (plan "dp_sync": hierarchical; docs/cost-model.md
 * "Hierarchical DP sync"): its members' domains (regions, else zones: ah_cluster_domains), the
 * slowest link between two members of one domain and between two domains, each shared
 * (ah_link_shared_bw) by `flows` groups summing at once, times a domain's members across; and
 * the group's own flat ring (what a group inside one domain runs, and a sharded group's weight
 * all-gather): the slowest link between any two members, shared by `flows`. */
typedef struct ah_dp_links {
    int domains;              /* k; below 2 the members share one zone: no hierarchy */
    int r_min, r_max;         /* the fewest and the most members a domain has */
    double in_bw, in_lat;     /* inside a domain (bw 0: every domain has one member) */
    double x_bw, x_lat;       /* across two domains */
    double ring_bw, ring_lat; /* the flat ring's (bw 0: fewer than two members, or no memory to find them) */
} ah_dp_links_t;
/* The links of the group whose members are on nodes[0 .. n) (indices into c->nodes). */
void ah_dp_links_of(const ah_cluster_t *c, const int *nodes, int n, int flows, ah_dp_links_t *out);
/* A memo of ah_dp_links_of for the groups of many plans on one cluster (cost/links_memo.c): a
 * group's figures found once per signature (its members' kinds of node, by type, zone and region,
 * how many members each has, whether a node holds two, whether a kind spans two nodes; and the
 * flows), the same figures ah_dp_links_of gives. Ownership: the caller's, ah_dp_links_memo_free;
 * valid while c's nodes are (a cluster with another nodes array is found afresh); NULL when out of
 * host memory. Not for use by two threads at once. */
typedef struct ah_dp_links_memo ah_dp_links_memo_t;
ah_dp_links_memo_t *ah_dp_links_memo_new(const ah_cluster_t *c);
void ah_dp_links_memo_free(ah_dp_links_memo_t *m);
/* ah_dp_links_of through m (NULL: found afresh). */
void ah_dp_links_memo_of(ah_dp_links_memo_t *m, const ah_cluster_t *c, const int *nodes, int n, int flows,
                         ah_dp_links_t *out);
/* Seconds of the hierarchical sum of `bytes` over l: the largest domain's ring reduce-scatter and
 * all-gather inside (an all-reduce's bytes), then the all-reduce across the k domains of the pieces
 * a member of the smallest domain holds: bytes / r_min in P / r_min pieces (P = r_max), each its
 * own all-reduce (its latency each). */
double ah_dp_hier_seconds(const ah_dp_links_t *l, double bytes);
/* Optimizer step seconds for `params` parameters on a device of that type (memory-bound). */
double ah_optimizer_seconds(const ah_cost_ctx_t *ctx, int type, int64_t params);

#endif
