/* A rank's pipeline transfers over MPI or NCCL (pipe_p2p.h). */
#include "runtime/pipe_p2p.h"

#include <stdlib.h>
#include <string.h>

#include "plan/replay.h"

#define TRY(call)                                 \
    do {                                          \
        ah_status_t s_ = (call);                  \
        if (s_ != AH_OK) return s_;               \
    } while (0)

enum { RECV_ACT = AH_P2P_RECV_ACT, SEND_GRAD = AH_P2P_SEND_GRAD, SEND_ACT = AH_P2P_SEND_ACT,
       RECV_GRAD = AH_P2P_RECV_GRAD, N_BUFS = 4 };

static float *buffer(const ah_p2p_chunk_t *x, int b) {
    float *const all[N_BUFS] = {x->recv_act, x->send_grad, x->send_act, x->recv_grad};
    return all[b];
}

/* The part of an (N, C) boundary this rank sends or receives: elements [return, return + *n); the
 * whole where the hops are whole (tr->p2p_parts NULL). */
static size_t part(const ah_trainer_t *tr, size_t *n) {
    if (!tr->p2p_parts) {
        *n = (size_t)(tr->stage.N * tr->stage.C);
        return 0;
    }
    size_t off = 0;
    for (int i = 0; i < tr->role.tp_rank; i++) off += (size_t)tr->p2p_parts[i];
    *n = (size_t)tr->p2p_parts[tr->role.tp_rank];
    return off;
}

/* Scatter-gather: the received buffer's other parts from the stage's TP group, in place (in order
 * on a GPU's compute stream, after the receive's event). */
static ah_status_t gather(ah_trainer_t *tr, float *buf, ah_error_t *err) {
    return tr->p2p_parts ? ah_group_allgather(&tr->tp, buf, tr->p2p_parts, NULL, err) : AH_OK;
}

ah_status_t ah_p2p_split(ah_trainer_t *tr, ah_error_t *err) {
    const ah_role_t r = tr->role;
    const int k = r.cp_rank * tr->plan->tp + r.tp_rank; /* the same CP and TP rank on every stage */
    /* named by the column's first device; ranked by the device's place in the pipeline */
    const int color = r.stride > 1 ? ah_layout_rank(&tr->layout, r.pipeline, 0, k) : -1;
    return ah_comm_split(ah_comm_world(), color, r.stage, &tr->pipe.c, err);
}

/* ---- the NCCL path's order: a replay of the pipeline's schedule, one transfer at a time ---- */

/* Channel (q, grad): the activations into stage q (grad false) or the gradients into it; one
 * receiving buffer each, micro-batches in order. */
typedef struct {
    int S, P, d;
    int64_t n;
    bool *produced, *done;  /* per channel and micro-batch: (2 q + grad) n + j */
    int64_t *ran_f, *ran_b; /* per stage and micro-batch: the device op index that ran it, -1 before */
    int64_t *next;          /* per channel: its first micro-batch not yet transferred */
    ah_p2p_xfer_t *order;   /* device d's transfers, in the order they complete */
    int64_t n_order;
} replay_t;

static size_t ch(const replay_t *m, int q, bool grad, int64_t j) { return (size_t)(2 * q + grad) * (size_t)m->n + (size_t)j; }
static size_t at(const replay_t *m, int q, int64_t j) { return (size_t)q * (size_t)m->n + (size_t)j; }

/* Whether op o can run: its input has landed and the buffer its output goes to is free. */
static bool ready(const replay_t *m, const ah_op_t *o) {
    const int q = o->stage, S = m->S;
    const int64_t j = o->mb;
    if (o->kind == AH_OP_F)
        return (q == 0 || m->done[ch(m, q, false, j)]) && (q == S - 1 || j == 0 || m->done[ch(m, q + 1, false, j - 1)]);
    if (o->kind == AH_OP_B)
        return (q == S - 1 || m->done[ch(m, q, true, j)]) && (q == 0 || j == 0 || m->done[ch(m, q - 1, true, j - 1)]);
    return true; /* zero-bubble's W: no transfer */
}

static void run(replay_t *m, const ah_op_t *o, int64_t k) {
    const int q = o->stage;
    if (o->kind == AH_OP_F) {
        m->ran_f[at(m, q, o->mb)] = k;
        if (q < m->S - 1) m->produced[ch(m, q + 1, false, o->mb)] = true;
    } else if (o->kind == AH_OP_B) {
        m->ran_b[at(m, q, o->mb)] = k;
        if (q > 0) m->produced[ch(m, q - 1, true, o->mb)] = true;
    }
}

/* Transfers micro-batch j of channel (q, grad) if its data is produced and the receiving buffer has
 * been read (the op that used j - 1 ran); device d's side of it joins d's order. */
static bool transfer(replay_t *m, int q, bool grad, int64_t j) {
    const int64_t *ran = grad ? m->ran_b : m->ran_f;
    if (!m->produced[ch(m, q, grad, j)] || (j > 0 && ran[at(m, q, j - 1)] < 0)) return false;
    m->done[ch(m, q, grad, j)] = true;
    const int from = grad ? q + 1 : q - 1;
    if (from % m->P == m->d) /* issued once the op producing it ran */
        m->order[m->n_order++] = (ah_p2p_xfer_t){ran[at(m, from, j)] + 1, from / m->P, grad ? SEND_GRAD : SEND_ACT};
    if (q % m->P == m->d) /* issued once the op using the previous one ran */
        m->order[m->n_order++] = (ah_p2p_xfer_t){j > 0 ? ran[at(m, q, j - 1)] + 1 : 0, q / m->P, grad ? RECV_GRAD : RECV_ACT};
    return true;
}

/* Replays every device's ops (ops: P x per, ah_sched_order's) until all ran; false when stuck. */
static bool replay(replay_t *m, const ah_op_t *ops, int64_t per) {
    int64_t *pos = calloc((size_t)m->P, sizeof *pos), left = (int64_t)m->P * per;
    bool moved = pos != NULL;
    while (moved && left > 0) {
        moved = false;
        for (int d = 0; d < m->P; d++)
            for (; pos[d] < per && ready(m, &ops[d * per + pos[d]]); pos[d]++, left--, moved = true)
                run(m, &ops[d * per + pos[d]], pos[d]);
        for (int q = 0; q < m->S; q++)
            for (int g = 0; g < 2; g++) {
                const bool grad = g == 1;
                if ((grad ? q == m->S - 1 : q == 0) || m->next[2 * q + g] >= m->n) continue;
                if (transfer(m, q, grad, m->next[2 * q + g])) {
                    m->next[2 * q + g]++;
                    moved = true;
                }
            }
    }
    free(pos);
    return left == 0;
}

ah_status_t ah_p2p_order(ah_schedule_t sched, int S, int P, int64_t n, int d, const int *extra, ah_p2p_xfer_t **out,
                         int64_t *n_out, ah_error_t *err) {
    const int64_t per = ah_sched_ops_per_device(sched, S, P, n);
    replay_t m = {.S = S, .P = P, .d = d, .n = n};
    const size_t cells = (size_t)S * (size_t)n;
    ah_op_t *ops = malloc((size_t)P * (size_t)per * sizeof *ops);
    m.produced = calloc(2 * cells, sizeof *m.produced);
    m.done = calloc(2 * cells, sizeof *m.done);
    m.ran_f = malloc(cells * sizeof *m.ran_f);
    m.ran_b = malloc(cells * sizeof *m.ran_b);
    m.next = calloc(2 * (size_t)S, sizeof *m.next);
    m.order = malloc(2 * (size_t)per * sizeof *m.order);
    ah_status_t s = AH_OK;
    if (!ops || !m.produced || !m.done || !m.ran_f || !m.ran_b || !m.next || !m.order) {
        s = ah_error_set(err, AH_ERR_OOM, "no host memory to order the pipeline's transfers");
    } else {
        for (size_t c = 0; c < cells; c++) m.ran_f[c] = m.ran_b[c] = -1;
        for (int k = 0; k < P; k++) ah_sched_order_warm(sched, S, P, n, k, extra, ops + k * per);
        if (!replay(&m, ops, per))
            s = ah_error_set(err, AH_ERR_INTERNAL, "the schedule's transfers (%d stages on %d devices, %lld "
                             "micro-batches) cannot be ordered for NCCL with one buffer per direction; run with "
                             "AH_P2P=staged", S, P, (long long)n);
    }
    *out = s == AH_OK ? m.order : NULL;
    *n_out = s == AH_OK ? m.n_order : 0;
    if (s == AH_OK) m.order = NULL;
    free(ops);
    free(m.produced);
    free(m.done);
    free(m.ran_f);
    free(m.ran_b);
    free(m.next);
    free(m.order);
    return s;
}

ah_status_t ah_p2p_attach(ah_trainer_t *tr, ah_error_t *err) {
    /* AH_P2P=staged (for comparison): the MPI path on a GPU too; agreed on by every rank, since
     * the attach below is collective */
    const char *env = getenv("AH_P2P");
    double staged = env && strcmp(env, "staged") == 0 ? 1 : 0;
    TRY(ah_comm_allreduce_f64(ah_comm_world(), &staged, 1, err));
    if (staged > 0) return AH_OK;
    TRY(ah_group_attach(&tr->dev, &tr->pipe, err));
    const ah_backend_t *be = tr->dev.backend;
    /* one path per pipeline: NCCL only where every TP and CP column of it has NCCL (a column whose
     * devices share a GPU takes MPI, and then so do the others) */
    const int n_pl = tr->plan->n_pipelines;
    double *staged_cols = calloc((size_t)n_pl, sizeof *staged_cols);
    if (!staged_cols) return ah_error_set(err, AH_ERR_OOM, "no host memory for %d pipelines' flags", n_pl);
    if (tr->pipe.c && !(tr->pipe.dc && strcmp(be->dcomm_kind(tr->pipe.dc), "nccl") == 0))
        staged_cols[tr->role.pipeline] = 1;
    const ah_status_t s = ah_comm_allreduce_f64(ah_comm_world(), staged_cols, (size_t)n_pl, err);
    tr->p2p_nccl = s == AH_OK && tr->pipe.dc && staged_cols[tr->role.pipeline] == 0;
    free(staged_cols);
    if (s != AH_OK || !tr->p2p_nccl) return s;
    for (int c = 0; c < tr->n_chunks; c++)
        for (int b = 0; b < N_BUFS; b++)
            if ((b == RECV_ACT || b == SEND_GRAD ? tr->chunks[c].prev : tr->chunks[c].next) >= 0)
                TRY(be->dcomm_event_create(&tr->chunks[c].ev[b], err));
    const ah_pipeline_t *pl = &tr->plan->pipelines[tr->role.pipeline];
    int *extra = ah_pipeline_warmup(pl);
    if (!extra) return ah_error_set(err, AH_ERR_OOM, "no host memory for the pipeline's warm-up counts");
    const ah_status_t o = ah_p2p_order(pl->schedule, tr->S, tr->role.stride, tr->n_mb, tr->role.stage, extra,
                                       &tr->p2p_order, &tr->n_p2p_order, err);
    free(extra);
    return o == AH_OK ? AH_OK : ah_error_prefix(err, "pipelines[%d]", tr->role.pipeline);
}

const char *ah_p2p_kind(const ah_trainer_t *tr) { return tr->p2p_nccl ? "nccl" : "mpi"; }

/* ---- the MPI path ---- */

/* Posts chunk x's receive of its next activation (grad false) or gradient. */
static ah_status_t post_recv(const ah_trainer_t *tr, ah_p2p_chunk_t *x, bool grad, ah_error_t *err) {
    size_t n;
    const size_t off = part(tr, &n);
    return grad ? ah_comm_irecv_f32(ah_comm_world(), x->h_recv_grad + off, n, x->next, ah_p2p_tag(x->stage, true), &x->r_grad, err)
                : ah_comm_irecv_f32(ah_comm_world(), x->h_recv_act + off, n, x->prev, ah_p2p_tag(x->stage, false), &x->r_act, err);
}

void ah_p2p_progress(ah_trainer_t *tr) {
    for (int c = 0; c < tr->n_chunks; c++) {
        ah_p2p_chunk_t *x = &tr->chunks[c];
        ah_comm_req_t *const reqs[4] = {&x->r_act, &x->r_grad, &x->s_act, &x->s_grad};
        for (int i = 0; i < 4; i++) ah_comm_test(reqs[i], NULL, NULL);
    }
}

/* ---- the NCCL path ---- */

/* Issues, in the order, every transfer issuable once ops [0, done) are: batches of one NCCL group. */
static ah_status_t pump(ah_trainer_t *tr, int64_t done, ah_error_t *err) {
    enum { BATCH = 8 };
    size_t n;
    const size_t off = part(tr, &n);
    const int P = tr->role.stride;
    while (tr->p2p_next < tr->n_p2p_order && tr->p2p_order[tr->p2p_next].after <= done) {
        ah_dcomm_p2p_t ops[BATCH];
        int k = 0;
        for (; k < BATCH && tr->p2p_next < tr->n_p2p_order && tr->p2p_order[tr->p2p_next].after <= done; k++) {
            const ah_p2p_xfer_t *t = &tr->p2p_order[tr->p2p_next++];
            ah_p2p_chunk_t *x = &tr->chunks[t->chunk];
            const int peer_stage = t->buf == RECV_ACT || t->buf == SEND_GRAD ? x->stage - 1 : x->stage + 1;
            ops[k] = (ah_dcomm_p2p_t){buffer(x, t->buf) + off, n, peer_stage % P, t->buf == RECV_ACT || t->buf == RECV_GRAD,
                                      x->ev[t->buf]};
            x->issued[t->buf]++;
        }
        TRY(tr->dev.backend->dcomm_p2p(tr->pipe.dc, ops, k, 0, err));
    }
    return AH_OK;
}

/* The compute stream waits for buffer b's last transfer; a receive must have been issued for
 * micro-batch mb. */
static ah_status_t wait_buf(ah_trainer_t *tr, ah_p2p_chunk_t *x, int b, int64_t mb, ah_error_t *err) {
    if ((b == RECV_ACT || b == RECV_GRAD) && x->issued[b] <= mb)
        return ah_error_set(err, AH_ERR_INTERNAL, "pipeline transfers: stage %d needs the %s of micro-batch %lld "
                            "before the order issued its receive (runtime/pipe_p2p.c)", x->stage,
                            b == RECV_ACT ? "activation" : "gradient", (long long)mb);
    return tr->dev.backend->dcomm_event_wait(x->ev[b], err);
}

/* ---- both ---- */

ah_status_t ah_p2p_begin(ah_trainer_t *tr, ah_error_t *err) {
    if (tr->p2p_nccl) {
        tr->p2p_next = 0;
        for (int c = 0; c < tr->n_chunks; c++) memset(tr->chunks[c].issued, 0, sizeof tr->chunks[c].issued);
        return pump(tr, 0, err);
    }
    /* Receives are posted one micro-batch ahead, so data arrives while this stage computes. */
    for (int c = 0; c < tr->n_chunks; c++) {
        ah_p2p_chunk_t *x = &tr->chunks[c];
        if (x->prev >= 0) TRY(post_recv(tr, x, false, err));
        if (x->next >= 0) TRY(post_recv(tr, x, true, err));
    }
    return AH_OK;
}

/* This rank's part of the boundary (activation, or its gradient) for micro-batch mb has arrived
 * (NCCL: waited on its event; MPI: the receive done and its part uploaded), then the TP group's
 * all-gather makes the whole boundary. */
static ah_status_t receive_part(ah_trainer_t *tr, ah_p2p_chunk_t *x, bool grad, int64_t mb, ah_error_t *err) {
    size_t n;
    const size_t off = part(tr, &n);
    float *buf = grad ? x->recv_grad : x->recv_act;
    if (tr->p2p_nccl) TRY(wait_buf(tr, x, grad ? RECV_GRAD : RECV_ACT, mb, err));
    else {
        TRY(ah_comm_wait(grad ? &x->r_grad : &x->r_act, err));
        TRY(ah_mem_upload(&tr->mem, buf + off, (grad ? x->h_recv_grad : x->h_recv_act) + off, n * sizeof(float), err));
    }
    return gather(tr, buf, err);
}

ah_status_t ah_p2p_input(ah_trainer_t *tr, const ah_sched_op_t *op, ah_error_t *err) {
    ah_p2p_chunk_t *x = &tr->chunks[op->chunk];
    if (op->kind == AH_OP_F && x->prev >= 0) {
        TRY(receive_part(tr, x, false, op->mb, err));
        ah_p2p_copy(tr->stage.k, ah_gpt_input(&tr->stage, op->slot), x->recv_act, (size_t)(tr->stage.N * tr->stage.C));
        if (!tr->p2p_nccl && op->mb + 1 < tr->n_mb) TRY(post_recv(tr, x, false, err));
    }
    if (op->kind == AH_OP_B && x->next >= 0) TRY(receive_part(tr, x, true, op->mb, err));
    return AH_OK;
}

ah_status_t ah_p2p_output_free(ah_trainer_t *tr, const ah_sched_op_t *op, ah_error_t *err) {
    ah_p2p_chunk_t *x = &tr->chunks[op->chunk];
    if (op->kind == AH_OP_F && x->next >= 0)
        return tr->p2p_nccl ? wait_buf(tr, x, SEND_ACT, op->mb, err) : ah_comm_wait(&x->s_act, err);
    if (op->kind == AH_OP_B && x->prev >= 0)
        return tr->p2p_nccl ? wait_buf(tr, x, SEND_GRAD, op->mb, err) : ah_comm_wait(&x->s_grad, err);
    return AH_OK;
}

ah_status_t ah_p2p_after(ah_trainer_t *tr, int64_t i, ah_error_t *err) {
    if (tr->p2p_nccl) return pump(tr, i + 1, err);
    const ah_sched_op_t *op = &tr->ops[i];
    ah_p2p_chunk_t *x = &tr->chunks[op->chunk];
    size_t n;
    const size_t off = part(tr, &n), bytes = n * sizeof(float);
    ah_comm_t *world = ah_comm_world();
    if (op->kind == AH_OP_F && x->next >= 0) {
        TRY(ah_mem_download(&tr->mem, x->h_send_act + off, x->send_act + off, bytes, err));
        TRY(ah_comm_isend_f32(world, x->h_send_act + off, n, x->next, ah_p2p_tag(x->stage + 1, false), &x->s_act, err));
    }
    if (op->kind == AH_OP_B && x->prev >= 0) {
        TRY(ah_mem_download(&tr->mem, x->h_send_grad + off, x->send_grad + off, bytes, err));
        TRY(ah_comm_isend_f32(world, x->h_send_grad + off, n, x->prev, ah_p2p_tag(x->stage - 1, true), &x->s_grad, err));
    }
    return AH_OK;
}

ah_status_t ah_p2p_read(ah_trainer_t *tr, const ah_sched_op_t *op, ah_error_t *err) {
    ah_p2p_chunk_t *x = &tr->chunks[op->chunk];
    if (tr->p2p_nccl || op->kind != AH_OP_B || x->next < 0 || op->mb + 1 >= tr->n_mb) return AH_OK;
    return post_recv(tr, x, true, err);
}

ah_status_t ah_p2p_end(ah_trainer_t *tr, ah_error_t *err) {
    if (tr->p2p_nccl) {
        TRY(pump(tr, tr->n_ops, err));
        if (tr->p2p_next != tr->n_p2p_order)
            return ah_error_set(err, AH_ERR_INTERNAL, "pipeline transfers: %lld of %lld left after the schedule",
                                (long long)(tr->n_p2p_order - tr->p2p_next), (long long)tr->n_p2p_order);
        for (int c = 0; c < tr->n_chunks; c++) /* every send done before the buffers' next step */
            for (int b = 0; b < N_BUFS; b++)
                if (tr->chunks[c].ev[b]) TRY(tr->dev.backend->dcomm_event_wait(tr->chunks[c].ev[b], err));
        return AH_OK;
    }
    for (int c = 0; c < tr->n_chunks; c++) {
        TRY(ah_comm_wait(&tr->chunks[c].s_act, err));
        TRY(ah_comm_wait(&tr->chunks[c].s_grad, err));
    }
    return AH_OK;
}

void ah_p2p_free(ah_trainer_t *tr) {
    for (int c = 0; tr->chunks && c < tr->n_chunks; c++)
        for (int b = 0; b < N_BUFS; b++)
            if (tr->chunks[c].ev[b]) tr->dev.backend->dcomm_event_free(&tr->chunks[c].ev[b]);
    free(tr->p2p_order);
    tr->p2p_order = NULL;
    free(tr->p2p_parts);
    tr->p2p_parts = NULL;
    ah_group_free(&tr->pipe);
}
