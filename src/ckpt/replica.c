/* In-memory peer replicas: where they live, who holds whom, what fits, retention (replica.h). */
#include "ckpt/replica.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ckpt/afile.h"
#include "ckpt/cloud.h"
#include "ckpt/restore.h"
#include "core/fs.h"
#include "core/hash.h"
#include "plan/ckpt_traffic.h"

int ah_replica_default_base(char *buf, size_t cap, const char *local_root) {
    char abs[AH_CKPT_PATH_MAX], cwd[AH_CKPT_PATH_MAX];
    if (local_root[0] == '/' || !getcwd(cwd, sizeof cwd)) snprintf(abs, sizeof abs, "%s", local_root);
    else if (snprintf(abs, sizeof abs, "%s/%s", cwd, local_root) >= (int)sizeof abs) return -1;
    const int n = snprintf(buf, cap, "/dev/shm/autohet/%016llx", (unsigned long long)ah_fnv1a64_str(abs));
    return n < 0 || (size_t)n >= cap ? -1 : n;
}

int ah_replica_holder_root(char *buf, size_t cap, const char *base, const char *node) {
    return ah_ckpt_join(buf, cap, base, node);
}

int ah_replica_source_root(char *buf, size_t cap, const char *holder_root, const char *source) {
    const int n = snprintf(buf, cap, "%s/" AH_REPLICA_SOURCE_PREFIX "%s", holder_root, source);
    return n < 0 || (size_t)n >= cap ? -1 : n;
}

bool ah_replica_partners(const ah_placement_t *pl, const char *const *zones, int *partner) {
    return ah_ckpt_partners(pl->n_nodes, pl->node_leader, zones, partner); /* the cost model's rule (plan/ckpt_traffic.h) */
}

void ah_replica_fit(int n_sources, const int *partner, const int *n_files, uint64_t *const *sizes, uint64_t budget,
                    int n_nodes, bool *const *fits, uint64_t *held) {
    for (int h = 0; h < n_nodes; h++) held[h] = 0;
    for (int s = 0; s < n_sources; s++)
        for (int i = 0; i < n_files[s]; i++) {
            const int h = partner[s];
            fits[s][i] = h >= 0 && h < n_nodes && sizes[s][i] <= budget - held[h];
            if (fits[s][i]) held[h] += sizes[s][i];
        }
}

/* Calls fn on each from-* root under holder_root (its source's name too). */
static void each_source(const char *holder_root, void (*fn)(void *ctx, const char *root, const char *source),
                        void *ctx) {
    DIR *d = opendir(holder_root);
    if (!d) return;
    const size_t pre = strlen(AH_REPLICA_SOURCE_PREFIX);
    for (struct dirent *e; (e = readdir(d));) {
        char root[AH_CKPT_PATH_MAX];
        if (strncmp(e->d_name, AH_REPLICA_SOURCE_PREFIX, pre) != 0 || !ah_ckpt_name_ok(e->d_name + pre)) continue;
        if (ah_replica_source_root(root, sizeof root, holder_root, e->d_name + pre) < 0) continue;
        fn(ctx, root, e->d_name + pre);
    }
    closedir(d);
}

typedef struct {
    ah_ckpt_manifest_t *ms;
    int n;
    ah_status_t st;
    ah_error_t *err;
} gather_t;

static void gather_one(void *ctx, const char *root, const char *source) {
    gather_t *g = ctx;
    ah_ckpt_manifest_t *ms;
    int n = 0;
    ah_error_t e2;
    (void)source;
    if (g->st != AH_OK || ah_ckpt_load_committed(root, &ms, &n, &e2) != AH_OK) return;
    ah_ckpt_manifest_t *grown = realloc(g->ms, (size_t)(g->n + n + 1) * sizeof *grown);
    if (!grown) {
        ah_ckpt_manifests_free(ms, n);
        g->st = ah_error_set(g->err, AH_ERR_OOM, "no host memory for the memory tier's manifests");
        return;
    }
    g->ms = grown;
    if (n > 0) memcpy(g->ms + g->n, ms, (size_t)n * sizeof *ms);
    g->n += n;
    free(ms); /* the entries moved */
}

ah_status_t ah_replica_load_committed(const char *holder_root, ah_ckpt_manifest_t **out, int *n, ah_error_t *err) {
    gather_t g = {.ms = calloc(1, sizeof(ah_ckpt_manifest_t)), .err = err};
    if (!g.ms) return ah_error_set(err, AH_ERR_OOM, "no host memory for the memory tier's manifests");
    each_source(holder_root, gather_one, &g);
    if (g.st != AH_OK) {
        ah_ckpt_manifests_free(g.ms, g.n);
        g.ms = NULL;
        g.n = 0;
    }
    *out = g.ms;
    *n = g.n;
    return g.st;
}

typedef struct {
    int64_t step;
    const char *source;
} prune_t;

static void prune_one(void *ctx, const char *root, const char *source) {
    const prune_t *p = ctx;
    ah_ckpt_step_info_t *info;
    int n;
    ah_error_t e2;
    if (ah_ckpt_list(root, &info, &n, &e2) != AH_OK) return;
    for (int i = 0; i < n; i++)
        if (info[i].step < p->step || (info[i].step == p->step && p->source && strcmp(source, p->source) == 0))
            ah_ckpt_remove_step(root, info[i].step, &e2);
    free(info);
}

void ah_replica_prune(const char *holder_root, int64_t step, const char *source) {
    prune_t p = {.step = step, .source = source};
    each_source(holder_root, prune_one, &p);
}

typedef struct {
    int64_t step;
    uint64_t bytes;
} held_t;

static void held_one(void *ctx, const char *root, const char *source) {
    held_t *h = ctx;
    ah_ckpt_step_info_t *info;
    int n;
    ah_error_t e2;
    (void)source;
    if (ah_ckpt_list(root, &info, &n, &e2) != AH_OK) return;
    for (int i = 0; i < n; i++)
        if (info[i].step != h->step) h->bytes += info[i].bytes;
    free(info);
}

uint64_t ah_replica_held_bytes(const char *holder_root, int64_t step) {
    held_t h = {.step = step};
    each_source(holder_root, held_one, &h);
    return h.bytes;
}

bool ah_replica_alone_nodes(const ah_placement_t *pl, int n_nodes, bool *alone) {
    bool *alive = malloc((size_t)(pl->n_nodes > 0 ? pl->n_nodes : 1) * sizeof *alive);
    ah_shard_group_t *gs = malloc((size_t)(pl->max_groups > 0 ? pl->max_groups : 1) * sizeof *gs);
    const bool ok = alive && gs;
    for (int y = 0; y < n_nodes; y++) alone[y] = false;
    for (int r = 0; ok && r < pl->n_ranks; r++) {
        const int y = pl->ranks[r].node, n = ah_placement_groups(pl, r, false, gs);
        if (y < 0 || y >= n_nodes || alone[y]) continue;
        for (int x = 0; x < pl->n_nodes; x++) alive[x] = x != y;
        for (int i = 0; i < n && !alone[y]; i++) alone[y] = !ah_placement_survives(pl, gs[i], pl->ranks[r].tp_index, alive);
    }
    free(alive);
    free(gs);
    return ok;
}

bool ah_replica_pays(const ah_placement_t *pl, bool *pays) {
    bool *alone = malloc((size_t)(pl->n_nodes > 0 ? pl->n_nodes : 1) * sizeof *alone);
    const bool ok = alone && ah_replica_alone_nodes(pl, pl->n_nodes, alone);
    *pays = false;
    for (int y = 0; ok && y < pl->n_nodes; y++) *pays = *pays || alone[y];
    free(alone);
    return ok;
}
