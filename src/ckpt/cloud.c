#include "ckpt/cloud.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ckpt/afile.h"
#include "ckpt/test_hook.h"
#include "core/json.h"
#include "core/timing.h"

int ah_ckpt_cloud_key(char *buf, size_t cap, const ah_s3_url_t *url, int64_t step, const char *name) {
    int n = snprintf(buf, cap, "%s%sstep-%08lld/%s", url->prefix, url->prefix[0] ? "/" : "",
                     (long long)step, name);
    return n < 0 || (size_t)n >= cap ? -1 : n;
}

ah_status_t ah_ckpt_cloud_upload_step(ah_s3_t *s3, const ah_s3_url_t *url, const char *local_root,
                                      int64_t step, const char *const *names, int n_names,
                                      uint64_t *bytes, ah_error_t *err) {
    ah_ckpt_manifest_t local, up = {0};
    if (bytes) *bytes = 0;
    if (ah_ckpt_load(local_root, step, &local, err) != AH_OK)
        return ah_error_prefix(err, "cannot upload step %lld", (long long)step);
    ah_status_t st = AH_OK;
    int n = names ? n_names : local.n_files;
    up.meta = local.meta;
    if (!up.meta.node[0]) snprintf(up.meta.node, sizeof up.meta.node, "node");
    up.files = calloc(n > 0 ? (size_t)n : 1, sizeof *up.files);
    if (!up.files) st = ah_error_set(err, AH_ERR_OOM, "out of memory");
    char dir[AH_CKPT_PATH_MAX];
    ah_ckpt_step_dir(dir, sizeof dir, local_root, step);
    for (int i = 0; i < n && st == AH_OK; i++) {
        const ah_ckpt_file_t *f = names ? ah_ckpt_manifest_find(&local, names[i]) : &local.files[i];
        char path[AH_CKPT_PATH_MAX], key[2048];
        if (!f) {
            st = ah_error_set(err, AH_ERR_INVALID, "%s: \"%s\" is not in the committed step, cannot upload it",
                              dir, names[i]);
            break;
        }
        if (ah_ckpt_join(path, sizeof path, dir, f->name) < 0 ||
            ah_ckpt_cloud_key(key, sizeof key, url, step, f->name) < 0) {
            st = ah_error_set(err, AH_ERR_INVALID, "%s/%s: path or key too long", dir, f->name);
            break;
        }
        if ((st = ah_ckpt_verify_file(path, f, err)) != AH_OK) {
            ah_error_prefix(err, "not uploading a damaged file");
            break;
        }
        if ((st = ah_s3_put_file(s3, url->bucket, key, path, err)) != AH_OK) break;
        up.files[up.n_files++] = *f;
        if (bytes) *bytes += f->bytes;
    }
    if (st == AH_OK) ah_test_hook("upload", step, up.meta.node); /* test-only: mid-upload */
    /* The manifest goes last: until it lands, the cloud copy of this step does not count. */
    if (st == AH_OK) {
        char mname[AH_CKPT_NAME_MAX + 16], key[2048];
        snprintf(mname, sizeof mname, "manifest-%s.json", up.meta.node);
        json_t *doc = ah_ckpt_manifest_to_json(&up);
        char *text = doc ? json_dumps(doc, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
        json_decref(doc);
        if (!text) st = ah_error_set(err, AH_ERR_OOM, "out of memory serialising the cloud manifest");
        else if (ah_ckpt_cloud_key(key, sizeof key, url, step, mname) < 0)
            st = ah_error_set(err, AH_ERR_INVALID, "cloud key too long");
        else st = ah_s3_put_buffer(s3, url->bucket, key, text, strlen(text), err);
        free(text);
    }
    free(up.files);
    ah_ckpt_manifest_free(&local);
    return st;
}

void ah_ckpt_manifests_free(ah_ckpt_manifest_t *m, int n) {
    for (int i = 0; i < n; i++) ah_ckpt_manifest_free(&m[i]);
    free(m);
}

static int cmp_info(const void *a, const void *b) {
    int64_t x = ((const ah_ckpt_step_info_t *)a)->step, y = ((const ah_ckpt_step_info_t *)b)->step;
    return x < y ? -1 : x > y;
}

static ah_ckpt_step_info_t *info_for(ah_ckpt_step_info_t **steps, int *n, int *cap, int64_t step) {
    for (int i = 0; i < *n; i++)
        if ((*steps)[i].step == step) return &(*steps)[i];
    if (*n == *cap) {
        int c = *cap ? 2 * *cap : 16;
        ah_ckpt_step_info_t *g = realloc(*steps, (size_t)c * sizeof *g);
        if (!g) return NULL;
        *steps = g;
        *cap = c;
    }
    ah_ckpt_step_info_t *s = &(*steps)[(*n)++];
    memset(s, 0, sizeof *s);
    s->step = step;
    snprintf(s->note, sizeof s->note, "no cloud manifest");
    return s;
}

/* The step of object key rel (relative to the prefix: "step-N/NAME"), with *name its NAME; -1
 * for objects outside step directories. */
static int64_t key_step(const char *rel, const char **name) {
    const char *slash = strchr(rel, '/');
    char dname[64];
    if (!slash || (size_t)(slash - rel) >= sizeof dname) return -1;
    snprintf(dname, sizeof dname, "%.*s", (int)(slash - rel), rel);
    *name = slash + 1;
    return ah_ckpt_parse_step_dir(dname);
}

static bool is_manifest_name(const char *name) {
    const size_t nl = strlen(name);
    return strncmp(name, "manifest-", 9) == 0 && nl >= 14 && strcmp(name + nl - 5, ".json") == 0;
}

/* The manifest object key of step into *m. A damaged one is a note (*why), not an error: its files
 * are untrusted, the listing goes on. Errors: the download (the cloud is unreachable). */
static ah_status_t load_manifest(ah_s3_t *s3, const ah_s3_url_t *url, const char *key, int64_t step,
                                 ah_ckpt_manifest_t *m, bool *ok, ah_error_t *why, ah_error_t *err) {
    char *text;
    size_t len;
    *ok = false;
    if (ah_s3_get_buffer(s3, url->bucket, key, 16u << 20, &text, &len, err) != AH_OK) return err->code;
    char where[1200];
    snprintf(where, sizeof where, "s3://%s/%.1000s", url->bucket, key);
    json_t *doc;
    *ok = ah_json_load_string(text, len, where, &doc, why) == AH_OK;
    free(text);
    if (*ok) {
        *ok = ah_ckpt_manifest_from_json(doc, where, m, why) == AH_OK;
        json_decref(doc);
    }
    if (*ok && m->meta.step != step) {
        ah_error_set(why, AH_ERR_INVALID, "%s: says step %lld", where, (long long)m->meta.step);
        ah_ckpt_manifest_free(m);
        *ok = false;
    }
    return AH_OK;
}

ah_status_t ah_ckpt_cloud_scan(ah_s3_t *s3, const ah_s3_url_t *url, ah_ckpt_manifest_t **manifests,
                               int *n_manifests, ah_ckpt_step_info_t **steps_out, int *n_steps,
                               ah_error_t *err) {
    char lp[1100];
    snprintf(lp, sizeof lp, "%s%sstep-", url->prefix, url->prefix[0] ? "/" : "");
    size_t base = strlen(lp) - strlen("step-");
    ah_s3_object_t *objs;
    int n_objs;
    if (ah_s3_list(s3, url->bucket, lp, &objs, &n_objs, err) != AH_OK) return err->code;
    ah_ckpt_manifest_t *ms = NULL;
    int nm = 0, cm = 0, ns = 0, cs = 0;
    ah_ckpt_step_info_t *steps = NULL;
    ah_status_t st = AH_OK;
    /* Pass 1: manifests. */
    for (int i = 0; i < n_objs && st == AH_OK; i++) {
        const char *name;
        const int64_t step = key_step(objs[i].key + base, &name);
        if (step < 0 || !is_manifest_name(name)) continue;
        ah_ckpt_manifest_t m;
        ah_error_t why;
        bool ok;
        if ((st = load_manifest(s3, url, objs[i].key, step, &m, &ok, &why, err)) != AH_OK) break;
        ah_ckpt_step_info_t *info = info_for(&steps, &ns, &cs, step);
        if (!info) {
            if (ok) ah_ckpt_manifest_free(&m);
            st = ah_error_set(err, AH_ERR_OOM, "out of memory");
            break;
        }
        if (!ok) {
            if (!info->committed) snprintf(info->note, sizeof info->note, "%.250s", why.msg);
            continue;
        }
        if (nm == cm) {
            cm = cm ? 2 * cm : 16;
            ah_ckpt_manifest_t *g = realloc(ms, (size_t)cm * sizeof *g);
            if (!g) {
                ah_ckpt_manifest_free(&m);
                st = ah_error_set(err, AH_ERR_OOM, "out of memory");
                break;
            }
            ms = g;
        }
        ms[nm++] = m;
        info->committed = true;
        info->note[0] = '\0';
        info->n_files += m.n_files;
        for (int k = 0; k < m.n_files; k++) info->bytes += m.files[k].bytes;
    }
    /* Pass 2: objects of steps no manifest commits. */
    for (int i = 0; i < n_objs && st == AH_OK; i++) {
        const char *name;
        const int64_t step = key_step(objs[i].key + base, &name);
        if (step < 0 || strncmp(name, "manifest-", 9) == 0) continue;
        ah_ckpt_step_info_t *info = info_for(&steps, &ns, &cs, step);
        if (!info) {
            st = ah_error_set(err, AH_ERR_OOM, "out of memory");
            break;
        }
        if (!info->committed) {
            info->n_files++;
            info->bytes += objs[i].size;
        }
    }
    free(objs);
    if (st != AH_OK) {
        ah_ckpt_manifests_free(ms, nm);
        free(steps);
        return st;
    }
    if (ns > 1) qsort(steps, (size_t)ns, sizeof *steps, cmp_info);
    if (manifests) {
        *manifests = ms;
        *n_manifests = nm;
    } else {
        ah_ckpt_manifests_free(ms, nm);
    }
    if (steps_out) {
        *steps_out = steps;
        *n_steps = ns;
    } else {
        free(steps);
    }
    return AH_OK;
}

ah_status_t ah_ckpt_cloud_prune(ah_s3_t *s3, const ah_s3_url_t *url, const char *node, int64_t below, int *removed,
                                ah_error_t *err) {
    char lp[1100], mname[AH_CKPT_NAME_MAX + 16];
    snprintf(lp, sizeof lp, "%s%sstep-", url->prefix, url->prefix[0] ? "/" : "");
    snprintf(mname, sizeof mname, "manifest-%s.json", node);
    const size_t base = strlen(lp) - strlen("step-");
    ah_s3_object_t *objs;
    int n_objs;
    if (removed) *removed = 0;
    if (ah_s3_list(s3, url->bucket, lp, &objs, &n_objs, err) != AH_OK) return err->code;
    ah_status_t st = AH_OK;
    for (int i = 0; i < n_objs && st == AH_OK; i++) {
        const char *name;
        const int64_t step = key_step(objs[i].key + base, &name);
        if (step < 0 || step >= below || strcmp(name, mname) != 0) continue;
        ah_ckpt_manifest_t m;
        bool ok;
        ah_error_t why;
        if ((st = load_manifest(s3, url, objs[i].key, step, &m, &ok, &why, err)) != AH_OK) break;
        /* uncommitted first (the manifest), then the files it listed; a damaged manifest alone */
        st = ah_s3_delete(s3, url->bucket, objs[i].key, err);
        for (int k = 0; ok && st == AH_OK && k < m.n_files; k++) {
            char key[1200];
            if (ah_ckpt_cloud_key(key, sizeof key, url, step, m.files[k].name) >= 0)
                st = ah_s3_delete(s3, url->bucket, key, err);
        }
        if (ok) ah_ckpt_manifest_free(&m);
        if (st == AH_OK && removed) (*removed)++;
    }
    free(objs);
    return st;
}

/* ---- background uploader ----------------------------------------------------------------------- */

typedef struct job {
    char root[AH_CKPT_PATH_MAX];
    int64_t step;
    int n_names; /* -1: all files */
    char (*names)[AH_CKPT_NAME_MAX];
} job_t;

struct ah_ckpt_uploader {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    ah_s3_t *s3;
    ah_s3_url_t url;
    job_t *pending; /* at most one waiting job: the newest */
    int64_t busy_step; /* the step being uploaded, -1 when idle */
    bool busy, stop;
    ah_error_t first_err;
    bool failed;
    ah_ckpt_upload_stats_t stats;
    int64_t done[AH_CKPT_UPLOAD_HISTORY]; /* the steps finished last, a ring */
    int n_done;                           /* finished so far (the ring holds the last of them) */
    /* retention (ah_ckpt_uploader_prune): this node's steps below prune_below go, once no upload waits */
    int64_t prune_below, pruned_below;
    char prune_node[AH_CKPT_NAME_MAX];
};

static void job_free(job_t *j) {
    if (!j) return;
    free(j->names);
    free(j);
}

/* Retention's deletions, on the uploader's thread (its connection), with u->mu held (released while
 * the store is asked). A failure is the uploader's failure, as an upload's. */
static void prune_now(ah_ckpt_uploader_t *u) {
    const int64_t below = u->prune_below;
    char node[AH_CKPT_NAME_MAX];
    snprintf(node, sizeof node, "%s", u->prune_node);
    u->busy = true;
    pthread_mutex_unlock(&u->mu);
    ah_error_t err;
    const ah_status_t st = ah_ckpt_cloud_prune(u->s3, &u->url, node, below, NULL, &err);
    pthread_mutex_lock(&u->mu);
    u->pruned_below = below;
    if (st != AH_OK && !u->failed) {
        u->failed = true;
        ah_error_set(&u->first_err, st, "cloud retention (--keep): removing node %s's steps before %lld: %s", node,
                     (long long)below, err.msg);
    }
    u->busy = false;
    pthread_cond_broadcast(&u->cv);
}

static void *uploader_main(void *arg) {
    ah_ckpt_uploader_t *u = arg;
    ah_cpu_background_begin(); /* not the rank's computation (core/timing.h) */
    pthread_mutex_lock(&u->mu);
    for (;;) {
        while (!u->pending && u->prune_below <= u->pruned_below && !u->stop) pthread_cond_wait(&u->cv, &u->mu);
        if (!u->pending && u->prune_below > u->pruned_below) { /* retention once no upload waits */
            prune_now(u);
            continue;
        }
        if (!u->pending) break; /* stop requested and nothing left */
        job_t *j = u->pending;
        u->pending = NULL;
        u->busy = true;
        u->busy_step = j->step;
        pthread_mutex_unlock(&u->mu);

        const char **names = NULL;
        ah_error_t err;
        ah_status_t st = AH_OK;
        if (j->n_names >= 0) {
            names = calloc(j->n_names > 0 ? (size_t)j->n_names : 1, sizeof *names);
            if (!names) st = ah_error_set(&err, AH_ERR_OOM, "out of memory");
            for (int i = 0; names && i < j->n_names; i++) names[i] = j->names[i];
        }
        uint64_t bytes = 0;
        double t0 = ah_now_s();
        if (st == AH_OK)
            st = ah_ckpt_cloud_upload_step(u->s3, &u->url, j->root, j->step, names, j->n_names, &bytes, &err);
        double dt = ah_now_s() - t0;
        free(names);

        pthread_mutex_lock(&u->mu);
        u->stats.bytes += bytes;
        u->stats.seconds += dt;
        if (st == AH_OK) {
            u->stats.steps++;
            if (j->step > u->stats.last_step) u->stats.last_step = j->step;
            u->done[u->n_done++ % AH_CKPT_UPLOAD_HISTORY] = j->step;
        } else if (!u->failed) {
            u->failed = true;
            u->first_err = err;
        }
        job_free(j);
        u->busy = false;
        u->busy_step = -1;
        pthread_cond_broadcast(&u->cv);
    }
    pthread_mutex_unlock(&u->mu);
    ah_cpu_background_end();
    return NULL;
}

ah_status_t ah_ckpt_uploader_start(const ah_s3_config_t *cfg, const ah_s3_url_t *url,
                                   ah_ckpt_uploader_t **out, ah_error_t *err) {
    *out = NULL;
    ah_ckpt_uploader_t *u = calloc(1, sizeof *u);
    if (!u) return ah_error_set(err, AH_ERR_OOM, "out of memory for the uploader");
    u->url = *url;
    u->stats.last_step = -1;
    u->busy_step = -1;
    u->prune_below = u->pruned_below = -1;
    if (ah_s3_open(cfg, &u->s3, err) != AH_OK) {
        free(u);
        return err->code;
    }
    pthread_mutex_init(&u->mu, NULL);
    pthread_cond_init(&u->cv, NULL);
    if (pthread_create(&u->thread, NULL, uploader_main, u) != 0) {
        ah_s3_close(u->s3);
        pthread_mutex_destroy(&u->mu);
        pthread_cond_destroy(&u->cv);
        free(u);
        return ah_error_set(err, AH_ERR_INTERNAL, "cannot start the upload thread");
    }
    *out = u;
    return AH_OK;
}

ah_status_t ah_ckpt_uploader_submit(ah_ckpt_uploader_t *u, const char *local_root, int64_t step,
                                    const char *const *names, int n_names, ah_error_t *err) {
    job_t *j = calloc(1, sizeof *j);
    if (!j) return ah_error_set(err, AH_ERR_OOM, "out of memory for an upload job");
    if (snprintf(j->root, sizeof j->root, "%s", local_root) >= (int)sizeof j->root) {
        free(j);
        return ah_error_set(err, AH_ERR_INVALID, "%.200s...: path too long", local_root);
    }
    j->step = step;
    j->n_names = names ? n_names : -1;
    if (names) {
        j->names = calloc(n_names > 0 ? (size_t)n_names : 1, sizeof *j->names);
        if (!j->names) {
            free(j);
            return ah_error_set(err, AH_ERR_OOM, "out of memory for an upload job");
        }
        for (int i = 0; i < n_names; i++) {
            if (!ah_ckpt_name_ok(names[i])) {
                job_free(j);
                return ah_error_set(err, AH_ERR_INVALID, "upload: \"%s\" is not a valid file name", names[i]);
            }
            snprintf(j->names[i], sizeof j->names[i], "%s", names[i]);
        }
    }
    pthread_mutex_lock(&u->mu);
    if (u->pending) { /* superseded before it started */
        job_free(u->pending);
        u->stats.skipped++;
    }
    u->pending = j;
    pthread_cond_broadcast(&u->cv);
    pthread_mutex_unlock(&u->mu);
    return AH_OK;
}

void ah_ckpt_uploader_prune(ah_ckpt_uploader_t *u, const char *node, int64_t below) {
    pthread_mutex_lock(&u->mu);
    if (below > u->prune_below) {
        u->prune_below = below;
        snprintf(u->prune_node, sizeof u->prune_node, "%s", node);
        pthread_cond_broadcast(&u->cv);
    }
    pthread_mutex_unlock(&u->mu);
}

void ah_ckpt_uploader_drain(ah_ckpt_uploader_t *u) {
    pthread_mutex_lock(&u->mu);
    while (u->pending || u->busy || u->prune_below > u->pruned_below) pthread_cond_wait(&u->cv, &u->mu);
    pthread_mutex_unlock(&u->mu);
}

ah_status_t ah_ckpt_uploader_wait(ah_ckpt_uploader_t *u, ah_error_t *err) {
    ah_ckpt_uploader_drain(u);
    return ah_ckpt_uploader_take_error(u, err);
}

int ah_ckpt_uploader_done(ah_ckpt_uploader_t *u, int64_t *steps, int cap) {
    pthread_mutex_lock(&u->mu);
    int n = u->n_done < AH_CKPT_UPLOAD_HISTORY ? u->n_done : AH_CKPT_UPLOAD_HISTORY;
    if (n > cap) n = cap;
    memcpy(steps, u->done, (size_t)n * sizeof *steps);
    pthread_mutex_unlock(&u->mu);
    return n;
}

int64_t ah_ckpt_uploader_newest_upto(ah_ckpt_uploader_t *u, int64_t bound) {
    pthread_mutex_lock(&u->mu);
    int64_t best = -1;
    const int n = u->n_done < AH_CKPT_UPLOAD_HISTORY ? u->n_done : AH_CKPT_UPLOAD_HISTORY;
    for (int i = 0; i < n; i++)
        if (u->done[i] <= bound && u->done[i] > best) best = u->done[i];
    pthread_mutex_unlock(&u->mu);
    return best;
}

ah_status_t ah_ckpt_uploader_take_error(ah_ckpt_uploader_t *u, ah_error_t *err) {
    pthread_mutex_lock(&u->mu);
    ah_status_t st = AH_OK;
    if (u->failed) {
        if (err) *err = u->first_err;
        st = u->first_err.code;
        u->failed = false;
    }
    pthread_mutex_unlock(&u->mu);
    return st;
}

int64_t ah_ckpt_uploader_busy_step(ah_ckpt_uploader_t *u) {
    pthread_mutex_lock(&u->mu);
    const int64_t step = u->busy_step;
    pthread_mutex_unlock(&u->mu);
    return step;
}

int64_t ah_ckpt_uploader_pending_step(ah_ckpt_uploader_t *u) {
    pthread_mutex_lock(&u->mu);
    const int64_t step = u->pending ? u->pending->step : u->busy_step;
    pthread_mutex_unlock(&u->mu);
    return step;
}

ah_ckpt_upload_stats_t ah_ckpt_uploader_stats(ah_ckpt_uploader_t *u) {
    pthread_mutex_lock(&u->mu);
    ah_ckpt_upload_stats_t s = u->stats;
    pthread_mutex_unlock(&u->mu);
    return s;
}

void ah_ckpt_uploader_cancel(ah_ckpt_uploader_t *u) {
    if (!u) return;
    pthread_mutex_lock(&u->mu);
    if (u->pending) {
        job_free(u->pending);
        u->pending = NULL;
        u->stats.skipped++;
    }
    u->prune_below = u->pruned_below; /* no retention either */
    pthread_mutex_unlock(&u->mu);
    ah_s3_cancel(u->s3); /* the upload in flight fails before its manifest: its step never counts */
    ah_ckpt_uploader_stop(u);
}

void ah_ckpt_uploader_stop(ah_ckpt_uploader_t *u) {
    if (!u) return;
    pthread_mutex_lock(&u->mu);
    u->stop = true;
    pthread_cond_broadcast(&u->cv);
    pthread_mutex_unlock(&u->mu);
    pthread_join(u->thread, NULL);
    ah_s3_close(u->s3);
    pthread_mutex_destroy(&u->mu);
    pthread_cond_destroy(&u->cv);
    free(u);
}
