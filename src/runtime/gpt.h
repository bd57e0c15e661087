/* A model shard, GPT-2 or LLaMA: the blocks of one device's pipeline stages on one
 * tensor-parallel rank, plus the embedding (stage 0) and/or the final norm + LM head (last stage);
 * the head tied to the embedding or a tensor of its own (lm_head.weight), as the model says.
 *
 * Chunks: one stage holds one block range [first, last), or under an interleaved schedule several
 * (its virtual stages, ascending and disjoint: the chunks); the embedding goes before chunk 0's
 * blocks, the head after the last chunk's. The tensors stay one flat buffer in the table's order
 * (a chunk's blocks are adjacent, and so is every DP segment's), so the DP sync, the sharded
 * optimizer, checkpoints and dumps see one stage whatever its chunk count. Each chunk keeps its
 * own activation slots; a slot number (the stage's, chunk after chunk) names the chunk, so a
 * forward or backward of a slot runs that chunk's blocks (and the embedding or head it has).
 *
 * The tensors, their names ("wte", "h.3.attn.qkv.weight", "h.0.mlp.gate.weight", "norm.weight"),
 * shapes, Megatron TP splits, initialisation and weight decay are the architecture's table
 * (spec/arch.h); the block code (runtime/gpt_block.h: block_gpt2.c, block_llama.c) reads a block's
 * tensors by their position in that table and ah_gpt_stage_create checks every position's name,
 * and a block's saved activations are the table's list, carved in its order. Initialisation is
 * plan-independent: element (r, c) of a full tensor is a function of (seed, tensor name,
 * r * cols + c) only, and a rank fills just its shard (ah_gpt_init_params).
 *
 * Vocabulary parallelism (both architectures): a TP rank holds Vl = ah_vocab_padded(m, t) / t
 * rows [v0, v0 + Vl) of the embedding and of the head matrix, nvalid of them real tokens. The
 * embedding's forward looks up the rank's rows (0 elsewhere; GPT-2's positions added on TP rank
 * 0) and sums over the TP group; the head computes its (N, Vl) logits, and the cross-entropy takes
 * a group maximum of N floats and a group sum of 2N (kernels/kernels.h xent_*), never gathering the
 * logits; its backward sums dx over the group.
 *
 * Memory (docs/runtime.md "Memory", the same list as docs/cost-model.md): every buffer comes from
 * the caller's ah_mem_t through arenas, sized from the model shapes:
 *   "parameters": weights + gradients (the stage's parameter count each, fp32);
 *   "optimizer":  AdamW m and v;
 *   "activations": per in-flight slot, per block the tensors its backward reads (x_in only when
 *                 recomputing), token ids on stage 0, the head's tensors and (N, Vl) logits on
 *                 the last;
 *   "workspace":  one block's activation set of scratch (the backward's temporaries, and the
 *                 targets during the head's forward), and, when recomputing, a second one that
 *                 the backward redoes each block's forward into;
 *   "weight-gradient inputs": a split backward's (zero-bubble's) W sets (cfg.wsets), per set and
 *                 block each linear layer's output gradient and, when recomputing, its input.
 * Nothing is allocated after ah_gpt_stage_create. The stage owns its arenas; ah_gpt_stage_free
 * returns them. The arenas are in the budget's memory space (the device's on a GPU rank), so every
 * buffer of the stage is a pointer of the backend: host code reads or writes one only through
 * runtime/mem.h's host access (free on the CPU).
 *
 * Gradients accumulate over micro-batches (ah_gpt_zero_grads at the start of an iteration). All
 * compute goes through the ah_kernels_t table; the TP all-reduces (2 in forward, 2 in backward per
 * block; 1 in the embedding's forward, 2 in the head's forward and 1 in its backward) go through
 * the TP group (runtime/device.h: MPI, or the device communicator on a GPU). Row-parallel layers
 * add their replicated bias on TP rank 0 only, before the sum, which equals adding it after.
 */
#ifndef AH_RUNTIME_GPT_H
#define AH_RUNTIME_GPT_H

#include <stdbool.h>
#include <stdint.h>

#include "comm/comm.h"
#include "kernels/kernels.h"
#include "runtime/device.h"
#include "runtime/mem.h"
#include "spec/arch.h"
#include "spec/model.h"

/* A tensor held by a stage: its definition and its place in the stage's flat buffers. */
typedef struct ah_gpt_param {
    ah_tensor_t def;
    int64_t offset, n;  /* into params / grads / m / v */
} ah_gpt_param_t;

/* A range of the stage's flat buffers whose AdamW state the stage keeps: elements [off, off + n)
 * of w and g, at [mv, mv + n) of m and v. */
typedef struct ah_gpt_run {
    int64_t off, n, mv;
} ah_gpt_run_t;

/* One block range of a stage (a virtual stage under an interleaved schedule). */
typedef struct ah_gpt_chunk {
    int first, last;         /* blocks [first, last), at least one */
    int64_t slots;           /* its micro-batches in flight (runtime/schedule.h's slots) */
    bool recompute;          /* its blocks keep only their input and redo the forward in the backward */
} ah_gpt_chunk_t;

#define AH_GPT_MAX_CHUNKS 16

/* What the stage holds and how it runs. */
typedef struct ah_gpt_config {
    const ah_model_t *model;
    int n_chunks;            /* 1 .. AH_GPT_MAX_CHUNKS */
    ah_gpt_chunk_t chunks[AH_GPT_MAX_CHUNKS]; /* ascending, disjoint */
    bool has_embed, has_head;/* before chunk 0's blocks; after the last chunk's */
    bool recompute;          /* some chunk recomputes (the stage has the recompute buffer) */
    int t, tp_rank;
    int64_t micro_batch, seq_len; /* seq_len: the tokens of a sequence this rank holds (T / cp) */
    struct ah_cp_ring *cp_ring;   /* context parallelism (runtime/cp_ring.h): attention over the CP
                                   * group, this rank's rows at ah_gpt_positions; NULL: none */
    int64_t wsets;           /* a split backward's W sets (schedule.h; 0: the backward is whole) */
    /* The sharded optimizer: the flat ranges whose AdamW state this stage keeps and updates,
     * sorted and disjoint (mv ignored); NULL: all of them. Copied at create. */
    const ah_gpt_run_t *opt_runs;
    int n_opt_runs;
} ah_gpt_config_t;

typedef struct ah_block_act ah_block_act_t;   /* gpt.c: one block's saved tensors */
typedef struct ah_block_keep ah_block_keep_t; /* gpt_block.h: one block's W inputs */

/* The parts of a stage whose time ah_gpt_forward / ah_gpt_backward account separately. */
typedef enum { AH_GPT_PART_EMBED = 0, AH_GPT_PART_BLOCKS, AH_GPT_PART_HEAD, AH_GPT_N_PARTS } ah_gpt_part_t;

typedef struct ah_gpt_stage {
    ah_gpt_config_t cfg;
    const ah_kernels_t *k;
    ah_group_t *tp;           /* TP group; NULL when t = 1 */
    struct ah_emulator *emu;  /* device emulation, split before each TP all-reduce; may be NULL */
    const struct ah_block_ops *ops; /* the architecture's block code (runtime/gpt_block.h) */
    int64_t N, C, Cl, Fl, Hl, KVl, hd, QKVl; /* QKVl = (Hl + 2 KVl) hd */
    int64_t Vl, v0, nvalid;   /* vocabulary rows held, the first's index, how many are real */

    int n_params;
    ah_gpt_param_t *params;   /* the stage's tensors, in flat-buffer order */
    int first_block_param;    /* index in params of the first held block's first tensor */
    int64_t n_elems;          /* total parameter elements */
    float *w, *g;             /* (n_elems) each: weights, gradients */
    float *m, *v;             /* (opt_elems) each: AdamW moments of the elements of opt_runs */
    ah_gpt_run_t *opt_runs;   /* the runs AdamW updates (cfg's, or one over all) */
    int n_opt_runs;
    int64_t opt_elems;

    int n_blocks;             /* blocks held, over the chunks */
    int64_t n_slots;          /* the chunks' slots */
    int *slot_chunk;          /* [slot] its chunk */
    int64_t *slot_act;        /* [slot] index in act of its chunk's first block */
    ah_block_act_t *act;      /* per slot, its chunk's blocks in order */
    int32_t **ids;            /* [slot] (N) token ids, chunk 0's slots on stage 0 only */
    float **head_in, **head_out, **head_stats, **logits; /* [slot], the last chunk's slots on the
                                                           * last stage only: (N, C), (N, C),
                                                           * (norm_stats N), (N, Vl) */
    float *work;              /* one block's activation set of scratch */
    int64_t work_floats;
    ah_block_act_t *recomp;   /* recompute buffer views, or NULL */
    ah_block_keep_t *keep;    /* [wset][held block]: a split backward's W inputs, or NULL */

    ah_arena_t a_params, a_opt, a_act, a_work, a_keep;
    /* Seconds spent so far per part, [part][0] forward, [part][1] backward (a split backward's
     * B), [part][2] a split backward's W (the blocks' only), TP all-reduces included, device emulation's sleeps not (gpt.c's part_clock); the profiler times each
     * layer kind directly with them. The blocks' part also takes the gradient copies in and out
     * of a stage without the head / the embedding. */
    double part_s[AH_GPT_N_PARTS][3];
    /* Called by ah_gpt_backward (a split backward: by ah_gpt_backward_weights) as parts of the stage's gradients become final for this
     * micro-batch (NULL: none): AH_GPT_GRADS_HEAD after the head's part, the block's index after
     * each block, AH_GPT_GRADS_END at the end of a backward with the embedding (after its part).
     * The overlapped gradient sync (runtime/dp_groups.h) starts a bucket's collective there. */
    ah_status_t (*on_grads)(void *ctx, int event, ah_error_t *err);
    void *on_grads_ctx;
    /* Called by ah_gpt_forward before it reads a part of the weights (NULL: none), with on_grads'
     * events and context: AH_GPT_GRADS_END before the embedding, the block's index before each
     * block, AH_GPT_GRADS_HEAD before the head. The overlapped all-gather of a sharded optimizer's
     * updated weights (runtime/dp_groups.h) waits there for the part's bucket. */
    ah_status_t (*on_weights)(void *ctx, int event, ah_error_t *err);
} ah_gpt_stage_t;

enum { AH_GPT_GRADS_HEAD = -1, AH_GPT_GRADS_END = -2 };

/* The stage's tensors for cfg, in flat-buffer order (the table's: embedding, its blocks, the head,
 * then the head's own copy of the tied matrix when the embedding lives on another stage), with
 * their offsets: out has room for ah_model_tensor_count + 1 entries. Returns the count (-1: no
 * host memory); *first_block_param gets the index of the first block's first tensor. */
int ah_gpt_param_list(const ah_gpt_config_t *cfg, ah_gpt_param_t *out, int *first_block_param);
/* Builds the shard and allocates everything it will use. tp may be NULL when t = 1. */
ah_status_t ah_gpt_stage_create(ah_gpt_stage_t *st, const ah_gpt_config_t *cfg,
                                const ah_kernels_t *k, ah_group_t *tp, ah_mem_t *mem, ah_error_t *err);
void ah_gpt_stage_free(ah_gpt_stage_t *st);
/* The most segments one forward or backward of the stage has for device emulation: the TP
 * all-reduces inside it, plus one (runtime/emulate.h). */
int ah_gpt_phase_segments(const ah_gpt_stage_t *st);

/* Deterministic, plan-independent initialisation (see the file comment); zeroes m and v. On a
 * device the weights are filled on the host and uploaded (the only failure). */
ah_status_t ah_gpt_init_params(ah_gpt_stage_t *st, uint64_t seed, ah_error_t *err);
void ah_gpt_zero_grads(ah_gpt_stage_t *st);
/* One AdamW step (number t, from 1) over every tensor of the stage, the gradients scaled by
 * grad_scale; hp's weight decay applies to the tensors the table decays. */
void ah_gpt_adamw(ah_gpt_stage_t *st, const ah_adamw_hparams_t *hp, float grad_scale, int64_t t);
/* A hook on AdamW (the asynchronous checkpoint's, runtime/ckpt_fuse.c: the update writes the new w, m
 * and v into the snapshot buffer as well). fn runs the update of tensor `param`'s elements [lo, lo + n)
 * of w and g, [mv, mv + n) of m and v where ah_gpt_adamw calls the kernel: st->k->adamw over them with
 * the same arguments, in as many pieces as it likes (the update is elementwise). ready: the trainer's,
 * before its optimizer phase (runtime/trainer.h). */
typedef struct ah_gpt_adamw_tap {
    void (*fn)(void *ctx, const ah_gpt_stage_t *st, int param, int64_t lo, int64_t mv, size_t n,
               const ah_adamw_hparams_t *hp, float grad_scale, int64_t t);
    ah_status_t (*ready)(void *ctx, ah_error_t *err);
    void *ctx;
} ah_gpt_adamw_tap_t;
/* ah_gpt_adamw through tap (NULL: the kernel alone). */
void ah_gpt_adamw_tapped(ah_gpt_stage_t *st, const ah_adamw_hparams_t *hp, float grad_scale, int64_t t,
                         const ah_gpt_adamw_tap_t *tap);
/* Host access to one of the stage's flat buffers (st->w, g, m or v: n_elems floats each) for code
 * outside the kernels (initialisation, dumps, checkpoints): on the CPU the buffer itself, no copy;
 * on a device a host copy, downloaded when `read`. ah_gpt_host_done uploads the copy back when
 * `write_back`, then frees it. */
ah_status_t ah_gpt_host_view(const ah_gpt_stage_t *st, float *buf, bool read, float **host, ah_error_t *err);
ah_status_t ah_gpt_host_done(const ah_gpt_stage_t *st, float *buf, float *host, bool write_back,
                             ah_error_t *err);
/* The sharded optimizer's moments between the stage's own (m, v: opt_elems, its runs) and full
 * host arrays laid out like the weights (n_elems each): to_full writes the runs' elements, from_full
 * reads them (through host copies on a GPU). */
ah_status_t ah_gpt_moments_to_full(const ah_gpt_stage_t *st, float *m_full, float *v_full, ah_error_t *err);
ah_status_t ah_gpt_moments_from_full(ah_gpt_stage_t *st, const float *m_full, const float *v_full, ah_error_t *err);
/* The stage's tensor by name, or NULL. */
const ah_gpt_param_t *ah_gpt_find(const ah_gpt_stage_t *st, const char *name);
/* Flat range [*offset, *offset + *n) of the stage's tensors of blocks [first, last), all held by
 * one of its chunks. */
void ah_gpt_block_range(const ah_gpt_stage_t *st, int first, int last, int64_t *offset, int64_t *n);

/* Where the caller puts a micro-batch before ah_gpt_forward: token ids (chunk 0 of stage 0, kept
 * for the backward), the input activation (N, C) (the other chunks), the targets (the head's; read by the
 * forward only, stored in the workspace). Pointers of the backend's memory (ah_mem_upload). */
int32_t *ah_gpt_ids(ah_gpt_stage_t *st, int64_t slot);
float *ah_gpt_input(ah_gpt_stage_t *st, int64_t slot);
int32_t *ah_gpt_targets(ah_gpt_stage_t *st);

/* Forward of the micro-batch in `slot` through the slot's chunk. out (N, C) receives the chunk's
 * output on a chunk without the head. With the head it runs too: *loss_sum gets the summed token
 * losses and the head's gradient is scaled by loss_scale (1 / (B*T) of the global batch). */
ah_status_t ah_gpt_forward(ah_gpt_stage_t *st, int64_t slot, float *out, float loss_scale,
                           double *loss_sum, ah_error_t *err);
/* Backward of the micro-batch in `slot` through the slot's chunk: dout (N, C) is the gradient of
 * the chunk's output (NULL with the head); dinp (N, C) receives the gradient of its input (NULL
 * with the embedding).
 * Parameter gradients accumulate into st->g: all of them when wset is -1; else (zero-bubble's B)
 * all but the blocks' linear-layer weights, whose inputs go to W set `wset` for
 * ah_gpt_backward_weights. The rule: B computes what the input gradient needs and what is cheap
 * beside it (biases, norms, the embedding's scatter-add, the head's norm; the head matrix's
 * gradient is computed in the forward), W the blocks' weight-gradient GEMMs. */
ah_status_t ah_gpt_backward(ah_gpt_stage_t *st, int64_t slot, const float *dout, float *dinp, int64_t wset,
                            ah_error_t *err);
/* Zero-bubble's W of the micro-batch whose B kept its inputs in W set `wset` (its activations
 * still in `slot`): the blocks' weight gradients accumulate into st->g, and on_grads is called as
 * in a whole backward. */
ah_status_t ah_gpt_backward_weights(ah_gpt_stage_t *st, int64_t slot, int64_t wset, ah_error_t *err);

#endif
