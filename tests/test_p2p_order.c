/* The NCCL path's transfer order (runtime/pipe_p2p.h ah_p2p_order) for every schedule on small
 * pipelines (1F1B and zero-bubble on 2-6 stages with 1-8 micro-batches, and with 1-10 and five
 * patterns of extra warm-up, plan/replay.h; interleaved on 2-4 devices with 2 and 3 chunks): each device sends and receives every message once; each pair of devices
 * lists their messages in the same order; and an independent run of the whole pipeline, each
 * device's transfers one at a time in its order (a transfer completes only when both sides have it
 * next and issuable, as NCCL may run them), its ops once their input has landed and their output
 * buffer is free, finishes; and no receive is issued before the op that read its buffer's previous
 * message. */
#include <stdio.h>
#include <stdlib.h>

#include "harness.h"
#include "plan/replay.h"
#include "runtime/pipe_p2p.h"

typedef struct {
    ah_p2p_xfer_t *seq;
    int64_t n_seq, k;      /* its transfers; the next one */
    ah_op_t *ops;          /* its ops (ah_sched_order) */
    int64_t i;             /* ops done */
    int64_t *mb;           /* per seq entry: the message's micro-batch (count per chunk and buffer) */
    int64_t done[8][4];    /* transfers completed per chunk and buffer */
} pipe_dev_t;

/* A transfer's message: (gradient?, receiving stage, micro-batch), and its peer device. */
static void message(int d, int P, const ah_p2p_xfer_t *t, int64_t mb, int64_t msg[3], int *peer) {
    const int q = d + t->chunk * P;
    const bool grad = t->buf == AH_P2P_SEND_GRAD || t->buf == AH_P2P_RECV_GRAD;
    const bool up = t->buf == AH_P2P_RECV_ACT || t->buf == AH_P2P_SEND_GRAD; /* with stage q - 1 */
    msg[0] = grad;
    msg[1] = t->buf == AH_P2P_SEND_ACT ? q + 1 : t->buf == AH_P2P_SEND_GRAD ? q - 1 : q;
    msg[2] = mb;
    *peer = (up ? q - 1 : q + 1) % P;
}

/* Whether op o of device d can run: its received input complete, its send buffer free. */
static bool op_ready(const pipe_dev_t *v, int P, int S, const ah_op_t *o) {
    const int c = o->stage / P;
    if (o->kind == AH_OP_F)
        return (o->stage == 0 || v->done[c][AH_P2P_RECV_ACT] > o->mb) &&
               (o->stage == S - 1 || v->done[c][AH_P2P_SEND_ACT] >= o->mb);
    if (o->kind == AH_OP_B)
        return (o->stage == S - 1 || v->done[c][AH_P2P_RECV_GRAD] > o->mb) &&
               (o->stage == 0 || v->done[c][AH_P2P_SEND_GRAD] >= o->mb);
    return true;
}

static void check_pipeline(ah_schedule_t sched, int S, int P, int64_t n, const int *extra) {
    const int64_t per = ah_sched_ops_per_device(sched, S, P, n);
    pipe_dev_t *dev = calloc((size_t)P, sizeof *dev);
    ah_error_t err = {0};
    bool ok = true;
    for (int d = 0; d < P && ok; d++) {
        ok = ah_p2p_order(sched, S, P, n, d, extra, &dev[d].seq, &dev[d].n_seq, &err) == AH_OK;
        CHECK(ok, "schedule %d, S %d, P %d, n %lld, device %d: %s", (int)sched, S, P, (long long)n, d, err.msg);
        if (!ok) break;
        dev[d].ops = malloc((size_t)per * sizeof *dev[d].ops);
        dev[d].mb = malloc((size_t)(dev[d].n_seq + 1) * sizeof *dev[d].mb);
        ah_sched_order_warm(sched, S, P, n, d, extra, dev[d].ops);
        int64_t count[8][4] = {{0}}, want = 0, early = 0;
        for (int64_t k = 0; k < dev[d].n_seq; k++) {
            const ah_p2p_xfer_t *t = &dev[d].seq[k];
            const int64_t j = dev[d].mb[k] = count[t->chunk][t->buf]++;
            if (j == 0 || (t->buf != AH_P2P_RECV_ACT && t->buf != AH_P2P_RECV_GRAD)) continue;
            /* a receive lands in its buffer only after the op that read the previous message */
            const ah_op_kind_t use = t->buf == AH_P2P_RECV_ACT ? AH_OP_F : AH_OP_B;
            int64_t i = 0;
            while (i < per && !(dev[d].ops[i].kind == use && dev[d].ops[i].stage == d + t->chunk * P &&
                                dev[d].ops[i].mb == j - 1))
                i++;
            early += t->after <= i;
        }
        CHECK(early == 0, "S %d, P %d, n %lld, device %d: %lld receives issued before the op that read their buffer's "
              "previous message", S, P, (long long)n, d, (long long)early);
        for (int c = 0; c < S / P; c++) {
            const int q = d + c * P;
            for (int b = 0; b < 4; b++) {
                const bool exists = b == AH_P2P_RECV_ACT || b == AH_P2P_SEND_GRAD ? q > 0 : q < S - 1;
                want += exists ? n : 0;
                ok = ok && count[c][b] == (exists ? n : 0);
            }
        }
        CHECK(ok && dev[d].n_seq == want, "S %d, P %d, n %lld, device %d: %lld transfers, want %lld, each once",
              S, P, (long long)n, d, (long long)dev[d].n_seq, (long long)want);
    }
    /* the one-at-a-time run */
    for (bool moved = ok; moved;) {
        moved = false;
        for (int d = 0; d < P; d++)
            for (pipe_dev_t *v = &dev[d]; v->i < per && op_ready(v, P, S, &v->ops[v->i]); v->i++) moved = true;
        for (int a = 0; a < P; a++) {
            pipe_dev_t *v = &dev[a];
            if (v->k >= v->n_seq || v->seq[v->k].after > v->i) continue;
            int64_t ma[3], mb[3];
            int pa, pb;
            message(a, P, &v->seq[v->k], v->mb[v->k], ma, &pa);
            pipe_dev_t *w = &dev[pa];
            if (w->k >= w->n_seq || w->seq[w->k].after > w->i) continue;
            message(pa, P, &w->seq[w->k], w->mb[w->k], mb, &pb);
            if (pb != a || ma[0] != mb[0] || ma[1] != mb[1] || ma[2] != mb[2]) continue;
            v->done[v->seq[v->k].chunk][v->seq[v->k].buf]++;
            w->done[w->seq[w->k].chunk][w->seq[w->k].buf]++;
            v->k++;
            w->k++;
            moved = true;
        }
    }
    for (int d = 0; d < P && ok; d++)
        CHECK(dev[d].i == per && dev[d].k == dev[d].n_seq, "S %d, P %d, n %lld (schedule %d): device %d stuck at op "
              "%lld of %lld, transfer %lld of %lld", S, P, (long long)n, (int)sched, d, (long long)dev[d].i,
              (long long)per, (long long)dev[d].k, (long long)dev[d].n_seq);
    for (int d = 0; d < P; d++) {
        free(dev[d].seq);
        free(dev[d].ops);
        free(dev[d].mb);
    }
    free(dev);
}

int main(void) {
    int cases = 0;
    for (int S = 2; S <= 6; S++)
        for (int64_t n = 1; n <= 8; n++, cases += 2) {
            check_pipeline(AH_SCHED_1F1B, S, S, n, NULL);
            check_pipeline(AH_SCHED_ZERO_BUBBLE, S, S, n, NULL);
        }
    /* extra warm-up above a hop (plan/replay.h), nonincreasing down the pipeline */
    static const int extras[][6] = {{1, 1, 0, 0, 0, 0}, {2, 2, 0, 0, 0, 0}, {3, 2, 1, 0, 0, 0}, {2, 2, 2, 2, 2, 2}, {4, 4, 4, 1, 1, 0}};
    for (int e = 0; e < 5; e++)
        for (int S = 2; S <= 6; S++)
            for (int64_t n = 1; n <= 10; n++, cases += 2) {
                check_pipeline(AH_SCHED_1F1B, S, S, n, extras[e]);
                check_pipeline(AH_SCHED_ZERO_BUBBLE, S, S, n, extras[e]);
            }
    for (int P = 2; P <= 4; P++)
        for (int v = 2; v <= 3; v++)
            for (int64_t n = P; n <= 3 * P; n += P, cases++) check_pipeline(AH_SCHED_INTERLEAVED, v * P, P, n, NULL);
    printf("%d pipelines ordered\n", cases);
    return ah_test_finish();
}
