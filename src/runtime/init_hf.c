/* A stage's weights from a Hugging Face directory (init_hf.h). */
#include "runtime/init_hf.h"

#include "ckpt/import_hf.h"

ah_status_t ah_gpt_init_from_hf(ah_gpt_stage_t *st, const char *dir, int *loaded, int *skipped, ah_error_t *err) {
    ah_hf_import_t h;
    ah_status_t s = ah_hf_import_open(dir, st->cfg.model, &h, err);
    if (s != AH_OK) return s;
    float *w = NULL; /* host view of the weights: every element is written, so none is read */
    s = ah_gpt_host_view(st, st->w, false, &w, err);
    int n = 0;
    for (int i = 0; s == AH_OK && i < st->n_params; i++, n++) {
        const ah_gpt_param_t *p = &st->params[i];
        s = ah_hf_import_shard(&h, &p->def, st->cfg.t, st->cfg.tp_rank, w + p->offset, p->n, err);
    }
    if (w) {
        const ah_status_t u = ah_gpt_host_done(st, st->w, w, s == AH_OK, err);
        if (s == AH_OK) s = u;
    }
    if (s == AH_OK) {
        st->k->zero(st->m, (size_t)st->opt_elems);
        st->k->zero(st->v, (size_t)st->opt_elems);
        if (loaded) *loaded = n;
        if (skipped) *skipped = h.skipped;
    }
    ah_hf_import_close(&h);
    return s;
}
