/* The timelines one evaluation has already replayed (timeline_memo.h). */
#include "plan/timeline_memo.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "plan/replay.h"

bool ah_timeline_memo_init(ah_timeline_memo_t *m, const ah_plan_t *p) {
    int most = 1;
    for (int i = 0; i < p->n_pipelines; i++) most = p->pipelines[i].n_stages > most ? p->pipelines[i].n_stages : most;
    for (m->cap = 4; m->cap < 2 * p->n_pipelines;) m->cap *= 2;
    m->slot = malloc(sizeof(int) * (size_t)m->cap);
    m->hop = malloc(sizeof(double) * (size_t)most);
    m->hop_n = -1;
    m->pace = 0;
    for (int k = 0; m->slot && k < m->cap; k++) m->slot[k] = -1;
    if (m->slot && m->hop) return true;
    ah_timeline_memo_free(m);
    return false;
}

void ah_timeline_memo_free(ah_timeline_memo_t *m) {
    free(m->slot);
    free(m->hop);
    m->slot = NULL;
    m->hop = NULL;
}

/* Whether pipelines a and b have the same stage times and hops (so the same timeline). */
static bool same_schedule(const ah_pipeline_eval_t *a, const ah_pipeline_eval_t *b, int S) {
    for (int s = 0; s < S; s++)
        if (a->stages[s].fwd_s != b->stages[s].fwd_s || a->stages[s].bwd_s != b->stages[s].bwd_s ||
            a->stages[s].p2p_s != b->stages[s].p2p_s || a->stages[s].wgrad_s != b->stages[s].wgrad_s ||
            a->stages[s].p2p_wire_s != b->stages[s].p2p_wire_s || a->stages[s].warmup_extra != b->stages[s].warmup_extra)
            return false;
    return true;
}

static uint64_t mix_word(uint64_t h, uint64_t w) {
    h = (h ^ w) * 0x9E3779B97F4A7C15ULL;
    return h ^ (h >> 29);
}

static uint64_t mix_double(uint64_t h, double x) {
    uint64_t w;
    memcpy(&w, &x, sizeof w);
    return mix_word(h, w);
}

static uint64_t timeline_hash(const ah_pipeline_t *pl, int P, const ah_pipeline_eval_t *pe) {
    uint64_t h = mix_word(mix_word(mix_word((uint64_t)pl->n_stages, (uint64_t)pl->micro_batches), (uint64_t)pl->schedule),
                          (uint64_t)P);
    for (int s = 0; s < pl->n_stages; s++) {
        const ah_stage_eval_t *st = &pe->stages[s];
        h = mix_double(mix_double(mix_double(mix_double(mix_double(h, st->fwd_s), st->bwd_s), st->p2p_s), st->wgrad_s),
                       st->p2p_wire_s);
    }
    return h;
}

int *ah_timeline_memo_find(const ah_timeline_memo_t *m, const ah_plan_t *p, const ah_eval_t *out, int i, int P,
                           bool *found) {
    const ah_pipeline_t *pl = &p->pipelines[i];
    const ah_pipeline_eval_t *pe = &out->pipelines[i];
    *found = false;
    for (uint64_t k = timeline_hash(pl, P, pe);; k++) {
        int *slot = &m->slot[k & (uint64_t)(m->cap - 1)];
        if (*slot < 0) return slot;
        const ah_pipeline_t *ql = &p->pipelines[*slot];
        if (ql->n_stages == pl->n_stages && ql->micro_batches == pl->micro_batches && ql->schedule == pl->schedule &&
            ah_pipeline_groups(ql) == P && same_schedule(pe, &out->pipelines[*slot], pl->n_stages))
            return *found = true, slot;
    }
}

double ah_timeline_memo_pace(ah_timeline_memo_t *m, const ah_stage_eval_t *st, int S) {
    bool same_hops = m->hop_n == S - 1;
    for (int s = 0; s + 1 < S; s++) {
        same_hops = same_hops && m->hop[s] == st[s].p2p_s;
        m->hop[s] = st[s].p2p_s;
    }
    if (!same_hops) m->pace = ah_p2p_pace(m->hop, S);
    m->hop_n = S - 1;
    return m->pace;
}
