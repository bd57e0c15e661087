#include "ckpt/restore.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "ckpt/afile.h"
#include "ckpt/cloud.h"
#include "core/fs.h"
#include "core/timing.h"

struct ah_ckpt_catalog {
    ah_ckpt_sources_t src;
    ah_ckpt_manifest_t *m[AH_TIER_COUNT];
    int n[AH_TIER_COUNT];
    char note[AH_TIER_COUNT][512];
};

ah_status_t ah_ckpt_load_committed(const char *root, ah_ckpt_manifest_t **out, int *n, ah_error_t *err) {
    ah_ckpt_step_info_t *info;
    int ns;
    *out = NULL;
    *n = 0;
    if (ah_ckpt_list(root, &info, &ns, err) != AH_OK) return err->code;
    *out = calloc(ns > 0 ? (size_t)ns : 1, sizeof **out);
    if (!*out) {
        free(info);
        return ah_error_set(err, AH_ERR_OOM, "out of memory");
    }
    for (int i = 0; i < ns; i++) {
        ah_error_t e2;
        if (info[i].committed && ah_ckpt_load(root, info[i].step, &(*out)[*n], &e2) == AH_OK) (*n)++;
    }
    free(info);
    return AH_OK;
}

/* The cloud's manifests, the listing tried src->cloud_tries times; the last error names the tries. */
static ah_status_t scan_cloud(const ah_ckpt_sources_t *src, ah_ckpt_manifest_t **m, int *n, ah_error_t *err) {
    const int tries = src->cloud_tries > 1 ? src->cloud_tries : 1;
    ah_status_t st = AH_OK;
    for (int k = 1; k <= tries; k++) {
        if ((st = ah_ckpt_cloud_scan(src->cloud, &src->cloud_url, m, n, NULL, NULL, err)) == AH_OK) return AH_OK;
        if (k == tries) break;
        const double wait_s = k * src->retry_wait_s;
        if (src->on_retry) src->on_retry(src->retry_ctx, k, tries - 1, wait_s, err->msg);
        if (wait_s > 0) nanosleep(&(struct timespec){.tv_sec = (time_t)wait_s,
                                                     .tv_nsec = (long)((wait_s - (double)(time_t)wait_s) * 1e9)}, NULL);
    }
    if (tries > 1) ah_error_prefix(err, "%d tries, the last", tries);
    return st;
}

ah_status_t ah_ckpt_catalog_open(const ah_ckpt_sources_t *src, ah_ckpt_catalog_t **out, ah_error_t *err) {
    *out = NULL;
    if ((src->peer || src->memory || src->cloud) && !src->staging_dir)
        return ah_error_set(err, AH_ERR_USAGE, "restore: a staging directory is needed for memory, peer or cloud copies");
    ah_ckpt_catalog_t *cat = calloc(1, sizeof *cat);
    if (!cat) return ah_error_set(err, AH_ERR_OOM, "out of memory for the restore catalog");
    cat->src = *src;
    int readable = 0, configured = 0;
    for (int t = 0; t < AH_TIER_COUNT; t++) {
        ah_error_t e2 = {0};
        ah_status_t st = AH_OK;
        if (t == AH_TIER_LOCAL && src->local_root) st = ah_ckpt_load_committed(src->local_root, &cat->m[t], &cat->n[t], &e2);
        else if (t == AH_TIER_PEER && src->peer) st = src->peer->manifests(src->peer->ctx, &cat->m[t], &cat->n[t], &e2);
        else if (t == AH_TIER_MEMORY && src->memory)
            st = src->memory->manifests(src->memory->ctx, &cat->m[t], &cat->n[t], &e2);
        else if (t == AH_TIER_CLOUD && src->cloud) st = scan_cloud(src, &cat->m[t], &cat->n[t], &e2);
        else continue;
        configured++;
        if (st == AH_OK) readable++;
        else snprintf(cat->note[t], sizeof cat->note[t], "%.500s", e2.msg);
    }
    if (configured == 0 || readable == 0) {
        char notes[4 * 520] = "";
        for (int t = 0; t < AH_TIER_COUNT; t++)
            if (cat->note[t][0]) {
                const size_t l = strlen(notes);
                snprintf(notes + l, sizeof notes - l, "; %s: %s", ah_ckpt_tier_name(t), cat->note[t]);
            }
        ah_error_set(err, AH_ERR_IO, "restore: no checkpoint tier could be read%s", notes);
        ah_ckpt_catalog_free(cat);
        return err->code;
    }
    *out = cat;
    return AH_OK;
}

const char *ah_ckpt_catalog_note(const ah_ckpt_catalog_t *cat, ah_ckpt_tier_t t) {
    return (unsigned)t < AH_TIER_COUNT ? cat->note[t] : "";
}

void ah_ckpt_catalog_forget_tier(ah_ckpt_catalog_t *cat, ah_ckpt_tier_t t, const char *why) {
    if ((unsigned)t >= AH_TIER_COUNT) return;
    ah_ckpt_manifests_free(cat->m[t], cat->n[t]);
    cat->m[t] = NULL;
    cat->n[t] = 0;
    snprintf(cat->note[t], sizeof cat->note[t], "%.500s", why);
}

const ah_ckpt_file_t *ah_ckpt_manifests_find(const ah_ckpt_manifest_t *ms, int n, int64_t step, const char *name) {
    for (int i = 0; i < n; i++) {
        const ah_ckpt_file_t *f;
        if (ms[i].meta.step == step && (f = ah_ckpt_manifest_find(&ms[i], name))) return f;
    }
    return NULL;
}

/* Tiers a search reads: all, or one (ah_ckpt_catalog_newest_in). */
#define ALL_TIERS ((1u << AH_TIER_COUNT) - 1)

/* The manifest of tier t at step listing name, or NULL (and its entry in *f). */
static const ah_ckpt_manifest_t *lookup(const ah_ckpt_catalog_t *cat, int t, int64_t step, const char *name,
                                        const ah_ckpt_file_t **f) {
    for (int i = 0; i < cat->n[t]; i++) {
        const ah_ckpt_manifest_t *m = &cat->m[t][i];
        if (m->meta.step != step) continue;
        if ((*f = ah_ckpt_manifest_find(m, name))) return m;
    }
    return NULL;
}

static ah_status_t newest(const ah_ckpt_catalog_t *cat, unsigned tiers, const char *const *needed, int n,
                          int64_t *step, ah_ckpt_meta_t *meta, ah_error_t *err);

ah_status_t ah_ckpt_catalog_newest(const ah_ckpt_catalog_t *cat, const char *const *needed, int n,
                                   int64_t *step, ah_ckpt_meta_t *meta, ah_error_t *err) {
    return newest(cat, ALL_TIERS, needed, n, step, meta, err);
}

ah_status_t ah_ckpt_catalog_newest_in(const ah_ckpt_catalog_t *cat, ah_ckpt_tier_t t, const char *const *needed,
                                      int n, int64_t *step, ah_ckpt_meta_t *meta, ah_error_t *err) {
    return newest(cat, (unsigned)t < AH_TIER_COUNT ? 1u << t : 0, needed, n, step, meta, err);
}

static ah_status_t newest(const ah_ckpt_catalog_t *cat, unsigned tiers, const char *const *needed, int n,
                          int64_t *step, ah_ckpt_meta_t *meta, ah_error_t *err) {
    *step = -1;
    int64_t best = -1, newest_any = -1;
    char missing[AH_CKPT_NAME_MAX] = "";
    /* Candidates: every step some tier has committed, newest first. */
    for (;;) {
        int64_t cand = -1;
        for (int t = 0; t < AH_TIER_COUNT; t++)
            for (int i = 0; (tiers >> t & 1) && i < cat->n[t]; i++) {
                int64_t s = cat->m[t][i].meta.step;
                if (s > cand && (best < 0 ? true : s < best)) cand = s;
            }
        if (cand < 0) break;
        if (newest_any < 0) newest_any = cand;
        int k = 0;
        for (; k < n; k++) {
            const ah_ckpt_file_t *f;
            bool found = false;
            for (int t = 0; t < AH_TIER_COUNT && !found; t++)
                found = (tiers >> t & 1) && lookup(cat, t, cand, needed[k], &f) != NULL;
            if (!found) break;
        }
        if (k == n) {
            *step = cand;
            break;
        }
        if (cand == newest_any) snprintf(missing, sizeof missing, "%s", needed[k]);
        best = cand;
    }
    if (*step < 0) {
        if (newest_any < 0)
            return ah_error_set(err, AH_ERR_INFEASIBLE, "no committed checkpoint in any tier");
        return ah_error_set(err, AH_ERR_INFEASIBLE,
                            "no committed step holds all %d needed shards in any tier (the newest, "
                            "step %lld, lacks %s)",
                            n, (long long)newest_any, missing);
    }
    /* Every manifest of the chosen step must describe the same training state. */
    const ah_ckpt_manifest_t *first = NULL;
    for (int t = 0; t < AH_TIER_COUNT; t++)
        for (int i = 0; (tiers >> t & 1) && i < cat->n[t]; i++) {
            const ah_ckpt_manifest_t *m = &cat->m[t][i];
            if (m->meta.step != *step) continue;
            if (!first) {
                first = m;
                continue;
            }
            if (m->meta.data_position != first->meta.data_position || m->meta.seq_len != first->meta.seq_len ||
                m->meta.rng_len != first->meta.rng_len || memcmp(m->meta.rng, first->meta.rng, (size_t)m->meta.rng_len) != 0)
                return ah_error_set(err, AH_ERR_INVALID,
                                    "step %lld: manifests of nodes \"%s\" and \"%s\" disagree on the data "
                                    "position, sequence length or RNG state (%lld vs %lld); the checkpoint is inconsistent",
                                    (long long)*step, first->meta.node, m->meta.node,
                                    (long long)first->meta.data_position, (long long)m->meta.data_position);
        }
    if (meta) *meta = first->meta;
    return AH_OK;
}

void ah_ckpt_catalog_drop(ah_ckpt_catalog_t *cat, int64_t step) {
    for (int t = 0; t < AH_TIER_COUNT; t++) {
        int kept = 0;
        for (int i = 0; i < cat->n[t]; i++) {
            if (cat->m[t][i].meta.step == step) ah_ckpt_manifest_free(&cat->m[t][i]);
            else cat->m[t][kept++] = cat->m[t][i];
        }
        cat->n[t] = kept;
    }
}

static ah_status_t mkdir_step_staging(const char *staging, int64_t step, char *dir, size_t cap, ah_error_t *err) {
    if (ah_ckpt_step_dir(dir, cap, staging, step) < 0)
        return ah_error_set(err, AH_ERR_IO, "%s: path too long", staging);
    return ah_fs_mkdirs(dir, err);
}

/* Obtains and verifies one copy from tier t into path. */
static ah_status_t from_tier(const ah_ckpt_catalog_t *cat, int t, int64_t step, const char *name,
                             const ah_ckpt_file_t *want, char *path, ah_error_t *err) {
    char dir[AH_CKPT_PATH_MAX];
    if (t == AH_TIER_LOCAL) {
        ah_ckpt_step_dir(dir, sizeof dir, cat->src.local_root, step);
    } else if (mkdir_step_staging(cat->src.staging_dir, step, dir, sizeof dir, err) != AH_OK) {
        return err->code;
    }
    if (ah_ckpt_join(path, AH_CKPT_PATH_MAX, dir, name) < 0)
        return ah_error_set(err, AH_ERR_IO, "%s/%s: path too long", dir, name);
    if (t == AH_TIER_PEER || t == AH_TIER_MEMORY) {
        const ah_ckpt_peer_t *h = t == AH_TIER_PEER ? cat->src.peer : cat->src.memory;
        if (h->fetch(h->ctx, step, name, path, err) != AH_OK) return err->code;
    } else if (t == AH_TIER_CLOUD) {
        char key[2048];
        if (ah_ckpt_cloud_key(key, sizeof key, &cat->src.cloud_url, step, name) < 0)
            return ah_error_set(err, AH_ERR_INVALID, "cloud key too long for %s", name);
        if (ah_s3_get_file(cat->src.cloud, cat->src.cloud_url.bucket, key, path, NULL, NULL, err) != AH_OK)
            return err->code;
    }
    return ah_ckpt_verify_file(path, want, err);
}

/* Tries tier t for needed[k]: a verified copy into paths[k], recorded in stats; else why[k] and
 * a fallback. Returns whether it got one. */
static bool try_tier(const ah_ckpt_catalog_t *cat, int t, int64_t step, const char *name, char *path, char *why,
                     size_t why_cap, ah_ckpt_restore_stats_t *stats) {
    const ah_ckpt_file_t *want;
    if (!lookup(cat, t, step, name, &want)) return false;
    ah_error_t e2;
    const double t0 = ah_now_s();
    if (from_tier(cat, t, step, name, want, path, &e2) == AH_OK) {
        stats->bytes[t] += want->bytes;
        stats->seconds[t] += ah_now_s() - t0;
        stats->files[t]++;
        return true;
    }
    stats->fallbacks++;
    snprintf(stats->last_fallback, sizeof stats->last_fallback, "%s: %.490s", ah_ckpt_tier_name(t), e2.msg);
    size_t l = strlen(why);
    snprintf(why + l, why_cap - l, "%s%s: %.300s", l ? "; " : "", ah_ckpt_tier_name(t), e2.msg);
    return false;
}

/* The exchange of tier peer (the peer or the memory tier) of the names not done yet (called even
 * when there are none, or when this rank failed: it is collective); *seconds gets its duration. */
static ah_status_t exchange(const ah_ckpt_catalog_t *cat, const ah_ckpt_peer_t *peer, int64_t step,
                            const char *const *needed, int n, const bool *done, ah_status_t st, double *seconds,
                            ah_error_t *err) {
    const char **left = st == AH_OK ? calloc((size_t)n + 1, sizeof *left) : NULL;
    char dir[AH_CKPT_PATH_MAX] = "";
    int n_left = 0;
    if (st == AH_OK && !left) st = ah_error_set(err, AH_ERR_OOM, "no host memory for the peer requests");
    if (st == AH_OK) st = mkdir_step_staging(cat->src.staging_dir, step, dir, sizeof dir, err);
    for (int k = 0; st == AH_OK && k < n; k++)
        if (!done[k]) left[n_left++] = needed[k];
    const double t0 = ah_now_s();
    ah_error_t e2;
    const ah_status_t xs = peer->exchange(peer->ctx, step, left, st == AH_OK ? n_left : 0, dir, &e2);
    *seconds = ah_now_s() - t0;
    free(left);
    if (st == AH_OK && xs != AH_OK) {
        *err = e2;
        st = xs;
    }
    return st;
}

/* name's copy that another tier replaced, said in stats->repaired (restore.h). */
static void note_repair(ah_ckpt_restore_stats_t *stats, const char *name, const char *why, int t) {
    const size_t l = strlen(stats->repaired), cap = sizeof stats->repaired;
    const int n = snprintf(stats->repaired + l, cap - l, "%s%s (%s): the %s tier's copy used", l ? "; " : "", name, why,
                           ah_ckpt_tier_name(t));
    if (n >= (int)(cap - l)) memcpy(stats->repaired + cap - 4, "...", 4);
}

ah_status_t ah_ckpt_catalog_fetch(const ah_ckpt_catalog_t *cat, int64_t step, const char *const *needed,
                                  int n, char (*paths)[AH_CKPT_PATH_MAX], ah_ckpt_restore_stats_t *stats,
                                  ah_error_t *err) {
    ah_ckpt_restore_stats_t local_stats = {0};
    if (!stats) stats = &local_stats;
    enum { WHY = 1200 };
    char (*why)[WHY] = calloc((size_t)n + 1, sizeof *why);
    bool *done = calloc((size_t)n + 1, sizeof *done);
    ah_status_t st = why && done ? AH_OK : ah_error_set(err, AH_ERR_OOM, "no host memory for the restore");
    /* Tier by tier, cheapest first; a file is taken from the first tier whose copy verifies. The
     * time of a tier's exchange counts for it when it brought a file. */
    for (int i = 0; i < AH_TIER_COUNT; i++) {
        const ah_ckpt_tier_t t = AH_TIER_ORDER[i];
        const ah_ckpt_peer_t *x = t == AH_TIER_PEER ? cat->src.peer : t == AH_TIER_MEMORY ? cat->src.memory : NULL;
        const int files_before = stats->files[t];
        double exchange_s = 0;
        if (x && x->exchange) st = exchange(cat, x, step, needed, n, done, st, &exchange_s, err);
        for (int k = 0; st == AH_OK && k < n; k++)
            if (!done[k] && (done[k] = try_tier(cat, t, step, needed[k], paths[k], why[k], WHY, stats)) && why[k][0])
                note_repair(stats, needed[k], why[k], t);
        if (stats->files[t] > files_before) stats->seconds[t] += exchange_s;
    }
    for (int k = 0; st == AH_OK && k < n; k++)
        if (!done[k])
            st = ah_error_set(err, AH_ERR_INVALID, "step %lld: no tier has an intact copy of %s (%s)", (long long)step,
                              needed[k], why[k][0] ? why[k] : "listed nowhere");
    free(why);
    free(done);
    return st;
}

void ah_ckpt_catalog_free(ah_ckpt_catalog_t *cat) {
    if (!cat) return;
    for (int t = 0; t < AH_TIER_COUNT; t++) ah_ckpt_manifests_free(cat->m[t], cat->n[t]);
    free(cat);
}
