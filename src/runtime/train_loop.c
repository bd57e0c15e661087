/* The step loop and the metrics JSONL writer (train_loop.h). */
#include "runtime/train_loop.h"

#include <stdlib.h>

#include "runtime/protocol.h"

/* elapsed: the seconds of the steps this process ran, from `start` (after a --resume, not 0). */
static void progress(FILE *f, const ah_step_metrics_t *m, int64_t start, int64_t steps, double elapsed) {
    const double tps = m->seconds > 0 ? (double)m->tokens / m->seconds : 0;
    const double eta = elapsed / (double)(m->step + 1 - start) * (double)(steps - m->step - 1);
    fprintf(f, "step %4lld/%lld | loss %.6f | lr %.3e | grad norm %.4f | %8.0f tok/s | %.3f s | ETA %.0f s\n",
            (long long)m->step + 1, (long long)steps, m->loss, m->lr, m->grad_norm, tps, m->seconds, eta);
    fflush(f);
}

/* One step line (flushed). */
static void metrics_write_step(FILE *f, const ah_step_metrics_t *m) {
    fprintf(f, "{\"" AH_PROTO_STEP "\": %lld, \"" AH_PROTO_STEP_LOSS "\": %.9g, \"" AH_PROTO_STEP_LR "\": %.9g, \""
            AH_PROTO_STEP_GRAD_NORM "\": %.9g, \"" AH_PROTO_STEP_TOKENS "\": %lld, \"" AH_PROTO_STEP_SECONDS
            "\": %.6f, \"" AH_PROTO_STEP_MEMORY_HIGH "\": [",
            (long long)m->step, m->loss, m->lr, m->grad_norm, (long long)m->tokens, m->seconds);
    for (int r = 0; r < m->n_ranks; r++) fprintf(f, "%s%lld", r ? ", " : "", (long long)m->memory_high[r]);
    fprintf(f, "]}\n");
    fflush(f);
}

void ah_metrics_write_events(FILE *f, json_t *ev) {
    if (!f || !ev) {
        json_decref(ev);
        return;
    }
    for (size_t i = 0; i < (json_is_array(ev) ? json_array_size(ev) : 1); i++) {
        char *t = json_dumps(json_is_array(ev) ? json_array_get(ev, i) : ev, JSON_COMPACT | JSON_PRESERVE_ORDER);
        if (t) fprintf(f, "%s\n", t);
        free(t);
    }
    fflush(f);
    json_decref(ev);
}

ah_status_t ah_train_loop(ah_trainer_t *tr, const ah_train_loop_opts_t *o, ah_ckpt_session_t *ck, int64_t start,
                          int64_t *preempted_at, ah_error_t *err) {
    ah_step_metrics_t m;
    double elapsed = 0;
    ah_status_t s = AH_OK;
    *preempted_at = -1;
    for (int64_t i = start; i <= o->steps; i++) {
        if (o->dump_dir && i == o->dump_step && (s = ah_trainer_dump(tr, o->dump_dir, false, err)) != AH_OK) return s;
        if (i == o->steps) return AH_OK;
        if ((s = ah_trainer_step(tr, i, &m, err)) != AH_OK) return s;
        if (o->grads_dir && i == o->dump_step && (s = ah_trainer_dump(tr, o->grads_dir, true, err)) != AH_OK)
            return s;
        elapsed += m.seconds;
        if (o->progress) progress(o->progress, &m, start, o->steps, elapsed);
        if (o->metrics) metrics_write_step(o->metrics, &m);
        json_t *events = NULL;
        bool stop = false;
        if (ck && (s = ah_ckpt_session_step_done(ck, i + 1, &events, &stop, err)) != AH_OK) return s;
        ah_metrics_write_events(o->metrics, events);
        if (stop) {
            *preempted_at = i + 1;
            return AH_OK;
        }
    }
    return AH_OK;
}
