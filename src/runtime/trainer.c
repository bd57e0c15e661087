/* One rank's training loop: its pipeline's schedule (1F1B, interleaved or zero-bubble) over
 * non-blocking p2p, layer-wise DP sync, clipping, AdamW; its communicators and data-parallel groups
 * are runtime/dp_groups.c's. */
#include "runtime/trainer.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "ckpt/test_hook.h"
#include "runtime/gpt_block.h"
#include "core/json.h"
#include "core/timing.h"
#include "runtime/dp_groups.h"
#include "runtime/dp_hier.h"
#include "runtime/emulate.h"
#include "runtime/pipe_p2p.h"

#define TRY(call)                                 \
    do {                                          \
        ah_status_t s_ = (call);                  \
        if (s_ != AH_OK) return s_;               \
    } while (0)


void ah_train_opts_default(ah_train_opts_t *o) {
    memset(o, 0, sizeof *o);
    o->steps = 20;
    o->lr = 1e-3;
    o->warmup = 10;
    o->weight_decay = 0.1;
    o->grad_clip = 1.0;
    o->beta1 = 0.9;
    o->beta2 = 0.95;
    o->eps = 1e-8;
    o->seed = 1337;
    o->dump_step = -1;
}

double ah_train_lr(const ah_train_opts_t *o, int64_t step) {
    if (step < o->warmup) return o->lr * (double)(step + 1) / (double)o->warmup;
    const double lr_min = 0.1 * o->lr;
    const int64_t span = o->steps - o->warmup;
    const double p = span > 0 ? (double)(step - o->warmup) / (double)span : 1.0;
    return lr_min + (o->lr - lr_min) * 0.5 * (1.0 + cos(3.141592653589793 * (p > 1 ? 1 : p)));
}

/* The p2p buffers of each chunk (per neighbour one to send and one to receive, (N, C) each), the
 * host copies MPI sends from and receives into, the boundary's parts under scatter-gather and a
 * GPU's staging of token ids. */
static ah_status_t alloc_p2p(ah_trainer_t *tr, ah_error_t *err) {
    ah_status_t s;
    const int64_t NC = tr->stage.N * tr->stage.C;
    ah_arena_init(&tr->a_p2p, &tr->mem, "p2p buffers");
    for (int c = 0; c < tr->n_chunks; c++) {
        ah_p2p_chunk_t *x = &tr->chunks[c];
        if (x->prev >= 0 && ((s = ah_arena_floats(&tr->a_p2p, NC, "activation receive buffer", &x->recv_act, err)) != AH_OK ||
                             (s = ah_arena_floats(&tr->a_p2p, NC, "gradient send buffer", &x->send_grad, err)) != AH_OK))
            return s;
        if (x->next >= 0 && ((s = ah_arena_floats(&tr->a_p2p, NC, "activation send buffer", &x->send_act, err)) != AH_OK ||
                             (s = ah_arena_floats(&tr->a_p2p, NC, "gradient receive buffer", &x->recv_grad, err)) != AH_OK))
            return s;
        float *const p2p[4] = {x->recv_act, x->send_grad, x->send_act, x->recv_grad};
        float **const host[4] = {&x->h_recv_act, &x->h_send_grad, &x->h_send_act, &x->h_recv_grad};
        for (int i = 0; i < 4; i++)
            if (p2p[i] && (s = ah_mem_host_view(&tr->mem, p2p[i], (size_t)NC * sizeof(float), false,
                                                (void **)host[i], err)) != AH_OK)
                return s;
    }
    if (tr->plan->tp > 1 && tr->plan->p2p == AH_P2P_SCATTER_GATHER) {
        const int t = tr->plan->tp;
        if (!(tr->p2p_parts = malloc((size_t)t * sizeof *tr->p2p_parts)))
            return ah_error_set(err, AH_ERR_OOM, "no host memory for the p2p parts of %d TP ranks", t);
        for (int i = 0; i < t; i++) tr->p2p_parts[i] = NC / t + (i < NC % t ? 1 : 0);
    }
    if (tr->mem.space != &ah_mem_host && (tr->stage.cfg.has_embed || tr->stage.cfg.has_head) &&
        !(tr->h_tokens = malloc((size_t)tr->stage.N * sizeof *tr->h_tokens)))
        return ah_error_set(err, AH_ERR_OOM, "no host memory to stage token ids");
    return AH_OK;
}

/* Device emulation's sleeps move the p2p transfers in flight and the DP sync's started buckets on,
 * as a device's copy engines would while it computes: Open MPI moves a transfer of rendezvous size
 * only while both ranks are inside MPI. */
static void progress(void *ctx) {
    ah_trainer_t *tr = ctx;
    ah_p2p_progress(tr);
    ah_dp_progress(tr);
}

/* The schedule of this rank's device and its chunks' stages and slots: tr->ops, tr->chunks and the
 * stage config's chunks (blocks, slots, embedding, head, recomputation). */
static ah_status_t plan_chunks(ah_trainer_t *tr, ah_gpt_config_t *cfg, ah_error_t *err) {
    const ah_role_t r = tr->role;
    const ah_pipeline_t *pl = &tr->plan->pipelines[r.pipeline];
    const int v = r.chunks;
    if (v > AH_GPT_MAX_CHUNKS)
        return ah_error_set(err, AH_ERR_USAGE, "[schedule] pipelines[%d]: %d stages per device; the runtime "
                            "holds at most %d", r.pipeline, v, AH_GPT_MAX_CHUNKS);
    tr->n_ops = ah_sched_ops_per_device(pl->schedule, tr->S, r.stride, tr->n_mb);
    tr->ops = malloc((size_t)tr->n_ops * sizeof *tr->ops);
    tr->chunks = calloc((size_t)v, sizeof *tr->chunks);
    int64_t slots[AH_GPT_MAX_CHUNKS];
    int *extra = ah_pipeline_warmup(pl);
    const bool built = tr->ops && tr->chunks && extra &&
                       ah_sched_build(pl->schedule, tr->S, r.stride, r.stage, tr->n_mb, extra, tr->ops, slots, &cfg->wsets);
    free(extra);
    if (!built) return ah_error_set(err, AH_ERR_OOM, "no host memory for the trainer's tables");
    tr->n_chunks = v;
    cfg->n_chunks = v;
    for (int c = 0; c < v; c++) {
        const int q = r.stage + c * r.stride;
        const ah_stage_t *st = &pl->stages[q];
        cfg->chunks[c] = (ah_gpt_chunk_t){st->first, st->last, slots[c], st->recompute};
        cfg->recompute = cfg->recompute || st->recompute;
        tr->chunks[c] = (ah_p2p_chunk_t){.stage = q, .prev = -1, .next = -1};
    }
    cfg->has_embed = r.stage == 0;
    cfg->has_head = r.stage + (v - 1) * r.stride == tr->S - 1;
    return AH_OK;
}

ah_status_t ah_trainer_setup(ah_trainer_t *tr, const ah_plan_t *plan, const ah_dataset_t *data,
                             const ah_train_opts_t *opts, ah_error_t *err) {
    memset(tr, 0, sizeof *tr);
    tr->plan = plan;
    tr->data = data;
    tr->opts = *opts;
    tr->rank = ah_comm_rank(ah_comm_world());
    tr->n_ranks = ah_comm_size(ah_comm_world());
    ah_status_t s = ah_layout_build(plan, &tr->layout, err);
    if (s != AH_OK) return s;
    if (tr->layout.n_ranks != tr->n_ranks) {
        ah_trainer_free(tr);
        return ah_error_set(err, AH_ERR_USAGE, "the plan has %d devices but the job has %d ranks; "
                            "run one rank per device: mpirun -np %d autohet train ...",
                            ah_plan_device_count(plan), tr->n_ranks, ah_plan_device_count(plan));
    }
    const ah_role_t r = tr->layout.roles[tr->rank];
    tr->role = r;
    const ah_pipeline_t *pl = &plan->pipelines[r.pipeline];
    const ah_stage_t *st = &pl->stages[r.stage];
    tr->S = pl->n_stages;
    tr->n_mb = pl->micro_batches;
    for (int q = 0; q < r.pipeline; q++)
        tr->sample_base += plan->pipelines[q].micro_batches * plan->train.micro_batch;
    const ah_gpu_type_t *gt = &plan->cluster.types[st->type];
    const ah_device_ref_t dev = ah_role_device(plan, &r);
    /* The backend, decided from the plan alone: every rank reaches the same verdict, so none is
     * left waiting in a split below. */
    const ah_backend_t *backend = NULL;
    if ((s = ah_device_select(plan, st->type, &backend, err)) != AH_OK) {
        ah_trainer_free(tr);
        return s;
    }
    char name[96];
    snprintf(name, sizeof name, "device %.32s:%d (%.32s)",
             plan->cluster.nodes[dev.node].name, dev.index, gt->name);
    ah_mem_init(&tr->mem, gt->emulate_memory_mib > 0 ? (int64_t)(gt->emulate_memory_mib * 1048576.0) : 0,
                name);
    tr->memory_high = calloc((size_t)tr->n_ranks, sizeof *tr->memory_high);
    tr->seg = calloc((size_t)tr->layout.n_segments, sizeof *tr->seg);
    tr->seg_shard = calloc((size_t)tr->layout.n_segments, sizeof *tr->seg_shard);
    tr->hier = calloc((size_t)ah_dp_group_count(tr), sizeof *tr->hier);
    if (!tr->memory_high || !tr->seg || !tr->seg_shard || !tr->hier) {
        ah_trainer_free(tr);
        return ah_error_set(err, AH_ERR_OOM, "no host memory for the trainer's tables");
    }
    const int t = plan->tp, cp = ah_pipeline_cp(pl);
    ah_gpt_config_t cfg = {.model = &plan->model, .t = t, .tp_rank = r.tp_rank,
                           .micro_batch = plan->train.micro_batch, .seq_len = plan->train.seq_len / cp,
                           .cp_ring = cp > 1 ? &tr->cp_ring : NULL};
    ah_gpt_run_t *runs = NULL;
    int *keys = malloc((size_t)ah_dp_group_count(tr) * sizeof *keys);
    s = keys ? plan_chunks(tr, &cfg, err) : ah_error_set(err, AH_ERR_OOM, "no host memory for the trainer's tables");
    if (s == AH_OK) s = ah_dp_plan_shards(tr, &cfg, keys, &runs, &cfg.n_opt_runs, err);
    cfg.opt_runs = runs;
    /* agreed on before the splits, which every rank must reach */
    if ((s = ah_comm_agree(ah_comm_world(), s, err)) == AH_OK) s = ah_dp_open_groups(tr, backend, dev.index, keys, err);
    free(keys);
    if (s == AH_OK)
        s = ah_gpt_stage_create(&tr->stage, &cfg, tr->dev.k, t > 1 ? &tr->tp : NULL, &tr->mem, err);
    free(runs);
    if (s == AH_OK && cp > 1)
        s = ah_cp_ring_init(&tr->cp_ring, &tr->cp, tr->dev.k, &tr->mem, (int)plan->train.micro_batch,
                            (int)plan->train.seq_len, (int)tr->stage.Hl, (int)tr->stage.KVl, (int)tr->stage.hd, err);
    if (s == AH_OK && cp > 1 && (tr->stage.cfg.has_embed || tr->stage.cfg.has_head) &&
        !(tr->cp_tokens = malloc((size_t)(plan->train.micro_batch * plan->train.seq_len) * sizeof *tr->cp_tokens)))
        s = ah_error_set(err, AH_ERR_OOM, "no host memory for a micro-batch's sequences");
    if (s != AH_OK) goto fail;
    if ((s = ah_emulator_init(&tr->emu, gt->emulate_slowdown, tr->tp.c, ah_gpt_phase_segments(&tr->stage), err)) != AH_OK)
        goto fail;
    tr->stage.emu = &tr->emu;
    tr->emu.progress = progress;
    tr->emu.progress_ctx = tr;
    if ((s = ah_dp_plan_buckets(tr, err)) != AH_OK) goto fail;
    if ((s = alloc_p2p(tr, err)) != AH_OK) goto fail;
    if (!opts->defer_init && (s = ah_gpt_init_params(&tr->stage, opts->seed, err)) != AH_OK) goto fail;
    return AH_OK;
fail:
    ah_trainer_free(tr);
    return s;
}

ah_status_t ah_trainer_init_params(ah_trainer_t *tr, ah_error_t *err) {
    return ah_gpt_init_params(&tr->stage, tr->opts.seed, err);
}

void ah_trainer_free(ah_trainer_t *tr) {
    ah_error_t ignored = {0};
    (void)ah_dp_gather_wait(tr, &ignored); /* MPI writes into the weights until then */
    ah_dp_free_buckets(tr);
    if (tr->stage.params) ah_gpt_stage_free(&tr->stage);
    ah_emulator_free(&tr->emu);
    for (int c = 0; tr->chunks && c < tr->n_chunks; c++) {
        const ah_p2p_chunk_t *x = &tr->chunks[c];
        ah_mem_host_done(x->recv_act, x->h_recv_act);
        ah_mem_host_done(x->send_grad, x->h_send_grad);
        ah_mem_host_done(x->send_act, x->h_send_act);
        ah_mem_host_done(x->recv_grad, x->h_recv_grad);
    }
    ah_p2p_free(tr);
    free(tr->chunks);
    free(tr->h_tokens);
    free(tr->cp_tokens);
    ah_cp_ring_free(&tr->cp_ring);
    ah_group_free(&tr->cp);
    if (tr->a_p2p.mem) ah_arena_free(&tr->a_p2p);
    ah_group_free(&tr->tp);
    for (int g = 0; tr->seg && g < tr->layout.n_segments; g++) ah_group_free(&tr->seg[g]);
    free(tr->seg);
    for (int g = 0; tr->seg_shard && g < tr->layout.n_segments; g++) free(tr->seg_shard[g].counts);
    free(tr->seg_shard);
    for (int id = 0; tr->hier && id < ah_dp_group_count(tr); id++) ah_dp_hier_close(&tr->hier[id]);
    free(tr->hier);
    free(tr->first_shard.counts);
    free(tr->last_shard.counts);
    free(tr->wte_shard.counts);
    ah_group_free(&tr->first_group);
    ah_group_free(&tr->last_group);
    ah_group_free(&tr->wte_group);
    free(tr->ops);
    free(tr->memory_high);
    ah_layout_free(&tr->layout);
    memset(tr, 0, sizeof *tr);
}

/* One micro-batch's token ids (stage 0) or targets (last stage) of data into dst, a buffer of the
 * backend: written in place on the CPU, staged on the host and uploaded on a GPU. */
static ah_status_t put_tokens(ah_trainer_t *tr, const ah_dataset_t *data, int64_t first_sample, int32_t *dst,
                              bool targets, ah_error_t *err) {
    const int64_t m = tr->plan->train.micro_batch, T = tr->stage.cfg.seq_len;
    int32_t *h = tr->h_tokens ? tr->h_tokens : dst, *whole = tr->cp_tokens ? tr->cp_tokens : h;
    TRY(ah_dataset_batch(data, first_sample, m, targets ? NULL : whole, targets ? whole : NULL, err));
    if (tr->cp_tokens) { /* context parallelism: this rank's positions of each sequence */
        const int *pos = ah_gpt_positions(&tr->stage);
        const int64_t full = tr->plan->train.seq_len;
        for (int64_t b = 0; b < m; b++)
            for (int64_t k = 0; k < T; k++) h[b * T + k] = whole[b * full + pos[k]];
    }
    return ah_mem_upload(&tr->mem, dst, h, (size_t)(m * T) * sizeof *h, err);
}

/* The pipeline's schedule for this rank's chunks (1F1B, interleaved, or zero-bubble with its W ops),
 * its transfers runtime/pipe_p2p.h's; *loss_sum gets its summed token losses. */
static ah_status_t run_schedule(ah_trainer_t *tr, int64_t step, double *loss_sum, ah_error_t *err) {
    ah_gpt_stage_t *st = &tr->stage;
    const ah_plan_t *p = tr->plan;
    const int64_t m = p->train.micro_batch, B = p->train.global_batch;
    /* The loss gradient, scaled by the loss scale under fp16 (so every gradient is; the step
     * divides it out again). */
    const float scale = (float)((tr->loss_scale > 0 ? tr->loss_scale : 1.0) / ((double)B * (double)p->train.seq_len));
    TRY(ah_p2p_begin(tr, err));
    *loss_sum = 0;
    tr->compute_s = 0;
    for (int64_t i = 0; i < tr->n_ops; i++) {
        const ah_sched_op_t op = tr->ops[i];
        const ah_p2p_chunk_t *x = &tr->chunks[op.chunk];
        const int64_t first_sample = tr->sample_shift + step * B + tr->sample_base + op.mb * m;
        tr->last_bwd = op.grads_final; /* the overlapped sync starts its buckets in it */
        if (op.kind == AH_OP_F) {
            if (x->prev < 0) TRY(put_tokens(tr, tr->data, first_sample, ah_gpt_ids(st, op.slot), false, err));
            if (x->next < 0) TRY(put_tokens(tr, tr->data, first_sample, ah_gpt_targets(st), true, err));
        }
        TRY(ah_p2p_input(tr, &op, err));
        TRY(ah_p2p_output_free(tr, &op, err)); /* the send buffer is free again */
        if (op.kind == AH_OP_F) {
            double ls = 0;
            ah_emulator_begin(&tr->emu, AH_EMULATE_FWD); /* device emulation stretches the phase */
            TRY(ah_gpt_forward(st, op.slot, x->send_act, scale, &ls, err));
            *loss_sum += ls;
        } else if (op.kind == AH_OP_B) {
            ah_emulator_begin(&tr->emu, AH_EMULATE_BWD);
            TRY(ah_gpt_backward(st, op.slot, x->recv_grad, x->send_grad, op.wset, err));
            TRY(ah_p2p_read(tr, &op, err));
        } else { /* zero-bubble's W: no communication */
            ah_emulator_begin(&tr->emu, AH_EMULATE_WGRAD);
            TRY(ah_gpt_backward_weights(st, op.slot, op.wset, err));
        }
        tr->last_bwd = false;
        /* Only compute is stretched, segment by segment (runtime/emulate.h): the TP
         * all-reduces inside the phase include waiting for the group's other ranks, which are
         * stretching their own compute; stretching that wait too would feed each rank's sleep
         * into the next one's. */
        double compute;
        TRY(ah_emulator_end(&tr->emu, &compute, err));
        tr->compute_s += compute;
        /* The phase's output leaves when the emulated device has produced it, after the
         * stretch: sent before it, the next stage started k times too early and an emulated
         * pipeline filled and drained almost for free. */
        TRY(ah_p2p_after(tr, i, err));
    }
    return ah_p2p_end(tr, err);
}

ah_status_t ah_trainer_eval(ah_trainer_t *tr, const ah_dataset_t *val, int64_t batches, double *loss,
                            ah_error_t *err) {
    ah_gpt_stage_t *st = &tr->stage;
    const ah_plan_t *p = tr->plan;
    const int64_t m = p->train.micro_batch, T = p->train.seq_len, B = p->train.global_batch;
    const size_t NC = (size_t)(st->N * st->C);
    const size_t bytes = NC * sizeof(float);
    ah_comm_t *world = ah_comm_world();
    double sum = 0;
    for (int64_t b = 0; b < batches; b++)
        for (int64_t mb = 0; mb < tr->n_mb; mb++)
            for (int c = 0, slot = 0; c < tr->n_chunks; slot += (int)st->cfg.chunks[c++].slots) {
                const ah_p2p_chunk_t *x = &tr->chunks[c];
                const int64_t first_sample = b * B + tr->sample_base + mb * m;
                ah_comm_req_t req = {0};
                if (x->prev < 0) TRY(put_tokens(tr, val, first_sample, ah_gpt_ids(st, slot), false, err));
                if (x->next < 0) TRY(put_tokens(tr, val, first_sample, ah_gpt_targets(st), true, err));
                if (x->prev >= 0) {
                    TRY(ah_comm_irecv_f32(world, x->h_recv_act, NC, x->prev, ah_p2p_tag(x->stage, false), &req, err));
                    TRY(ah_comm_wait(&req, err));
                    TRY(ah_mem_upload(&tr->mem, x->recv_act, x->h_recv_act, bytes, err));
                    ah_p2p_copy(st->k, ah_gpt_input(st, slot), x->recv_act, NC);
                }
                double ls = 0, compute;
                ah_emulator_begin(&tr->emu, AH_EMULATE_FWD);
                TRY(ah_gpt_forward(st, slot, x->send_act, 1.0f, &ls, err));
                TRY(ah_emulator_end(&tr->emu, &compute, err));
                if (x->next < 0 && tr->role.tp_rank == 0) sum += ls;
                if (x->next >= 0) {
                    TRY(ah_mem_download(&tr->mem, x->h_send_act, x->send_act, bytes, err));
                    TRY(ah_comm_isend_f32(world, x->h_send_act, NC, x->next, ah_p2p_tag(x->stage + 1, false), &req, err));
                    TRY(ah_comm_wait(&req, err));
                }
            }
    TRY(ah_comm_allreduce_f64(world, &sum, 1, err));
    *loss = sum / ((double)batches * (double)B * (double)T);
    return AH_OK;
}

/* Elements [*lo, *hi) of parameter i this rank counts in global sums (norm, dump): each unique
 * element once — TP rank 0 for TP-replicated tensors; then a sharded group's part on its owner,
 * else pipeline 0 for DP copies and stage 0 for the tied matrix. Empty (lo == hi) when none. */
static void counted_range(const ah_trainer_t *tr, int i, int64_t *lo, int64_t *hi) {
    const ah_gpt_param_t *x = &tr->stage.params[i];
    ah_dp_valid_range(tr, i, lo, hi);
    bool counted = x->def.spec->split != AH_SPLIT_REPL || tr->role.tp_rank == 0;
    if (!ah_dp_shard(tr, ah_dp_group_id(tr, &x->def))->counts)
        counted = counted && tr->role.pipeline == 0 && tr->role.cp_rank == 0 && (!ah_tensor_tied(&x->def, &tr->plan->model) || tr->stage.cfg.has_embed);
    if (!counted) *hi = *lo;
}

/* Collective, after a step whose loss or gradient norm is not finite: the lowest rank holding a
 * non-finite loss (a last stage), else the lowest holding a non-finite gradient and which one
 * first in its stage order, into
 * out->nonfinite_rank and out->nonfinite_what. */
static ah_status_t find_nonfinite(ah_trainer_t *tr, double loss_sum, ah_step_metrics_t *out, ah_error_t *err) {
    const ah_gpt_stage_t *st = &tr->stage;
    int64_t code = -1; /* -1: none; 0: the loss; i + 1: parameter i's gradient */
    if (tr->stage.cfg.has_head && !isfinite(loss_sum)) code = 0;
    for (int i = 0; code < 0 && i < st->n_params; i++) {
        int64_t lo, hi;
        ah_dp_valid_range(tr, i, &lo, &hi);
        if (!isfinite(st->k->sum_squares(st->g + lo, (size_t)(hi - lo)))) code = i + 1;
    }
    int64_t *all = malloc((size_t)tr->n_ranks * sizeof *all);
    if (!all) return ah_error_set(err, AH_ERR_OOM, "no host memory to find the non-finite tensor");
    ah_status_t s = ah_comm_allgather_i64(ah_comm_world(), code, all, err);
    /* The loss comes before any gradient (the forward before the backward); then ranks in order. */
    int first = -1;
    for (int r = 0; s == AH_OK && r < tr->n_ranks && first < 0; r++)
        if (all[r] == 0) first = r;
    for (int r = 0; s == AH_OK && r < tr->n_ranks && first < 0; r++)
        if (all[r] > 0) first = r;
    free(all);
    if (s != AH_OK) return s;
    snprintf(out->nonfinite_what, sizeof out->nonfinite_what, "the gradient norm");
    if (first == tr->rank && code == 0) snprintf(out->nonfinite_what, sizeof out->nonfinite_what, "the loss");
    else if (first == tr->rank)
        snprintf(out->nonfinite_what, sizeof out->nonfinite_what, "the gradient of %s", st->params[code - 1].def.name);
    out->nonfinite_rank = first;
    return first < 0 ? AH_OK : ah_comm_bcast(ah_comm_world(), out->nonfinite_what, sizeof out->nonfinite_what,
                                               first, err);
}

ah_status_t ah_trainer_step(ah_trainer_t *tr, int64_t step, ah_step_metrics_t *out, ah_error_t *err) {
    ah_gpt_stage_t *st = &tr->stage;
    const ah_plan_t *p = tr->plan;
    const double t0 = ah_now_s();
    ah_gpt_zero_grads(st);
    double loss_sum = 0;
    TRY(run_schedule(tr, step, &loss_sum, err));
    const ah_device_ref_t me = ah_role_device(p, &tr->role);
    ah_test_hook("step", step, p->cluster.nodes[me.node].name); /* test-only: mid-step */
    TRY(ah_dp_sync(tr, err));
    /* One all-reduce for the loss (last stages, TP rank 0), the squared gradient norm, with
     * loss scaling the ranks that hold an overflowed (inf or nan) gradient of their own, and the
     * DP sync's bucket counts (ah_step_metrics_t). */
    const bool scaling = tr->loss_scale > 0;
    double sums[5] = {tr->stage.cfg.has_head && tr->role.tp_rank == 0 ? loss_sum : 0, 0, 0, tr->dp_hidden,
                      tr->dev.backend->gpu ? 0 : tr->n_buckets};
    for (int i = 0; i < st->n_params; i++) {
        int64_t lo, hi, c_lo, c_hi;
        ah_dp_valid_range(tr, i, &lo, &hi);
        counted_range(tr, i, &c_lo, &c_hi);
        if (c_lo == c_hi && !scaling) continue;
        const double ss = st->k->sum_squares(st->g + lo, (size_t)(hi - lo));
        if (c_lo < c_hi) sums[1] += c_lo == lo && c_hi == hi ? ss : st->k->sum_squares(st->g + c_lo, (size_t)(c_hi - c_lo));
        if (!isfinite(ss)) sums[2] = 1;
    }
    TRY(ah_comm_allreduce_f64(ah_comm_world(), sums, 5, err));
    const double norm = sqrt(sums[1]) / (scaling ? tr->loss_scale : 1.0); /* of the unscaled gradients */
    out->overflow = scaling && isfinite(sums[0]) && (sums[2] > 0 || !isfinite(norm));
    out->nonfinite = !out->overflow && (!isfinite(sums[0]) || !isfinite(norm));
    out->nonfinite_rank = -1;
    out->nonfinite_what[0] = 0;
    if (out->nonfinite) TRY(find_nonfinite(tr, loss_sum, out, err));
    const double clip = tr->opts.grad_clip > 0 ? tr->opts.grad_clip / (norm + 1e-6) : 1.0;
    /* AdamW's gradient factor: the clip, and the loss scale divided out */
    const double unscale = (clip < 1.0 ? clip : 1.0) / (scaling ? tr->loss_scale : 1.0);
    const double lr = ah_train_lr(&tr->opts, step);
    /* AdamW writing the checkpoint snapshot too: the buffer's previous snapshot written first (a wait
     * outside the emulated optimizer phase: not the device's work) */
    const ah_gpt_adamw_tap_t *tap = tr->adamw_tap;
    tr->adamw_tap = NULL;
    if (tap && tap->ready) TRY(tap->ready(tap->ctx, err));
    ah_emulator_begin(&tr->emu, AH_EMULATE_OPT);
    const ah_adamw_hparams_t hp = {(float)lr, (float)tr->opts.beta1, (float)tr->opts.beta2,
                                   (float)tr->opts.eps, (float)tr->opts.weight_decay};
    /* A checkpoint snapshot's copies (backend.h snap_copy) may still be reading w, m and v on the
     * side stream, overlapped with this step's forward and backward: AdamW, the first thing to write
     * them again, waits for them (on the device; the host goes on). */
    if (tr->snap_fence) {
        TRY(tr->dev.backend->snap_copy_fence(tr->snap_fence, err));
        tr->snap_fence = NULL;
    }
    if (!out->nonfinite && !out->overflow) ah_gpt_adamw_tapped(st, &hp, (float)unscale, step + 1, tap);
    /* The backend's asynchronous errors of this step (a CUDA kernel fault, a bad launch): it waits
     * for the device, so before the weights' all-gather, which overlaps the next step's forward
     * (its own errors show in the next step's check). */
    TRY(ah_device_check(&tr->dev, err));
    if (!out->nonfinite && !out->overflow) TRY(ah_dp_gather_weights(tr, err));
    double compute;
    TRY(ah_emulator_end(&tr->emu, &compute, err));
    tr->compute_s += compute;
    TRY(ah_comm_allgather_i64(ah_comm_world(), tr->mem.high, tr->memory_high, err));
    out->step = step;
    out->loss = sums[0] / ((double)p->train.global_batch * (double)p->train.seq_len);
    out->dp_buckets_hidden = (int64_t)sums[3];
    out->dp_buckets = (int64_t)sums[4];
    out->lr = lr;
    out->grad_norm = norm;
    out->tokens = p->train.global_batch * p->train.seq_len;
    out->seconds = ah_now_s() - t0;
    out->n_ranks = tr->n_ranks;
    out->memory_high = tr->memory_high;
    return AH_OK;
}

ah_status_t ah_trainer_dump(ah_trainer_t *tr, const char *dir, bool grads, ah_error_t *err) {
    const ah_model_t *m = &tr->plan->model;
    const int n = ah_model_tensor_count(m);
    ah_tensor_t *all = malloc((size_t)n * sizeof *all);
    int64_t *offs = malloc((size_t)(n + 1) * sizeof *offs);
    if (!all || !offs) {
        free(all);
        free(offs);
        return ah_error_set(err, AH_ERR_OOM, "no host memory for the parameter dump");
    }
    ah_model_tensors(m, all);
    offs[0] = 0;
    for (int i = 0; i < n; i++) offs[i + 1] = offs[i] + all[i].rows * all[i].cols;
    /* Debug output, outside the device's accounting: a full-model buffer where each rank writes
     * the unique elements it holds; a sum over the world then assembles the model exactly. */
    float *full = calloc((size_t)offs[n], sizeof *full);
    ah_status_t s = AH_OK;
    if (!full) {
        s = ah_error_set(err, AH_ERR_OOM, "no host memory for the parameter dump");
        goto done;
    }
    const ah_gpt_stage_t *st = &tr->stage;
    float *const buf = grads ? st->g : st->w;
    const char *stem = grads ? "grads" : "params";
    float *src; /* host copy of buf (buf itself on the CPU) */
    if ((s = ah_dp_gather_wait(tr, err)) != AH_OK) goto done;
    if ((s = ah_gpt_host_view(st, buf, true, &src, err)) != AH_OK) goto done;
    for (int i = 0; i < st->n_params; i++) {
        const ah_gpt_param_t *x = &st->params[i];
        int64_t lo, hi;
        counted_range(tr, i, &lo, &hi);
        int j = 0;
        while (strcmp(all[j].name, x->def.name) != 0) j++;
        for (int64_t e = lo - x->offset; e < hi - x->offset; e++) {
            const int64_t f = ah_tensor_full_index(&x->def, tr->plan->tp, tr->role.tp_rank, e);
            if (f >= 0) full[offs[j] + f] = src[x->offset + e]; /* -1: vocabulary padding */
        }
    }
    ah_gpt_host_done(st, buf, src, false, NULL);
    if ((s = ah_comm_allreduce_f32(ah_comm_world(), full, (size_t)offs[n], err)) != AH_OK) goto done;
    if (tr->rank != 0) goto done;
    if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
        s = ah_error_set(err, AH_ERR_IO, "%s: cannot create the dump directory: %s", dir, strerror(errno));
        goto done;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.bin", dir, stem);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(full, sizeof *full, (size_t)offs[n], f) != (size_t)offs[n] || fclose(f) != 0) {
        if (f) fclose(f);
        s = ah_error_set(err, AH_ERR_IO, "%s: cannot write: %s", path, strerror(errno));
        goto done;
    }
    json_t *doc = json_object(), *arr = json_array();
    for (int i = 0; i < n; i++)
        json_array_append_new(arr, json_pack("{s:s, s:[I,I], s:I}", "name", all[i].name, "shape",
                                             (json_int_t)all[i].rows, (json_int_t)all[i].cols,
                                             "offset", (json_int_t)offs[i]));
    json_object_set_new(doc, "tensors", arr);
    json_object_set_new(doc, "dtype", json_string("float32"));
    snprintf(path, sizeof path, "%s/%s.json", dir, stem);
    s = ah_json_save_file(doc, path, err);
    json_decref(doc);
done:
    free(full);
    free(all);
    free(offs);
    return s;
}

ah_status_t ah_trainer_gather_moments(ah_trainer_t *tr, float *m_full, float *v_full, ah_error_t *err) {
    TRY(ah_gpt_moments_to_full(&tr->stage, m_full, v_full, err));
    TRY(ah_dp_gather_shards(tr, m_full, true, err));
    return ah_dp_gather_shards(tr, v_full, true, err);
}

int64_t ah_trainer_data_position(const ah_trainer_t *tr, int64_t step) {
    return tr->sample_shift + step * tr->plan->train.global_batch;
}

void ah_trainer_set_data_position(ah_trainer_t *tr, int64_t step, int64_t data_position) {
    tr->sample_shift = data_position - step * tr->plan->train.global_batch;
}
