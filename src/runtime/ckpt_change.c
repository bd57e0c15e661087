/* The save at an in-place change taken off the critical path (runtime/ckpt_io.h ah_ckpt_session_change_begin,
 * ah_ckpt_session_save_behind; docs/elastic.md "Durability"): the move already puts every piece of the change's
 * step S in the survivors' memory, so S is written behind the next step from the moved state, in the new plan's
 * layout, and committed the usual way (ckpt_async.c); until then the resume point is the last committed step C,
 * which must stay restorable from what survives the change: every file of C is checked to be on a staying node's
 * disk or in its host's memory (the memory tier), or C complete in the cloud, before the change goes on without
 * the save. The save before
 * the move, when it is made (ah_ckpt_session_save_leaving), is here too: a notice's (ckpt_notice.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt/replica.h"
#include "ckpt/restore.h"
#include "ckpt/cloud.h"
#include "core/hash.h"
#include "runtime/ckpt_session.h"

/* A name's 52-bit hash, exact as a double (the all-gather's type); 0 is "no name". */
static double name_key(const char *name) {
    return (double)((ah_fnv1a64_str(name) & ((1ULL << 52) - 1)) | 1);
}

/* The keys of step's files in root's committed manifests (memory: a replica holder's root) appended to
 * keys (grown); *n their count. A root that cannot be listed holds nothing. */
static ah_status_t root_keys(const char *root, bool memory, int64_t step, double **keys, int *n, ah_error_t *err) {
    ah_ckpt_manifest_t *ms = NULL;
    int nm = 0;
    ah_error_t e2;
    if ((memory ? ah_replica_load_committed(root, &ms, &nm, &e2) : ah_ckpt_load_committed(root, &ms, &nm, &e2)) !=
        AH_OK)
        return AH_OK;
    ah_status_t st = AH_OK;
    for (int i = 0; st == AH_OK && i < nm; i++) {
        if (ms[i].meta.step != step) continue;
        double *k = realloc(*keys, (size_t)(*n + ms[i].n_files + 1) * sizeof *k);
        if (!k) {
            st = ah_error_set(err, AH_ERR_OOM, "no host memory for step %lld's file list", (long long)step);
            break;
        }
        *keys = k;
        for (int f = 0; f < ms[i].n_files; f++) k[(*n)++] = name_key(ms[i].files[f].name);
    }
    ah_ckpt_manifests_free(ms, nm);
    return st;
}

/* Collective: whether every file of step c listed on any node (its disk or its host's memory) is held by a
 * node that stays (s->hit: the leaving ones); why names what is not. Each node's leader lists its keys; one
 * all-gather of the counts, one of the keys (padded to the longest list). */
static ah_status_t survives_nodes(ah_ckpt_session_t *s, int64_t c, bool *ok, char *why, size_t cap, ah_error_t *err) {
    double *keys = NULL;
    int n = 0;
    ah_status_t st = AH_OK;
    if (s->node_rank == 0) st = root_keys(s->node_root, false, c, &keys, &n, err);
    if (st == AH_OK && s->node_rank == 0 && s->replica_budget > 0) st = root_keys(s->replica_root, true, c, &keys, &n, err);
    const int world = ah_comm_size(ah_comm_world());
    int64_t most = st == AH_OK ? n : -1;
    ah_status_t rs = ah_comm_allreduce_max_i64(ah_comm_world(), &most, 1, err);
    double *mine = rs == AH_OK && most >= 0 ? calloc((size_t)most + 2, sizeof *mine) : NULL;
    double *all = mine ? calloc((size_t)world * ((size_t)most + 2), sizeof *all) : NULL;
    st = ah_comm_agree(ah_comm_world(), rs != AH_OK ? rs : st != AH_OK ? st : all ? AH_OK
                       : ah_error_set(err, AH_ERR_OOM, "no host memory for step %lld's file lists", (long long)c), err);
    if (st == AH_OK) {
        mine[0] = s->hit[s->my_node] ? 0 : 1, mine[1] = n;
        if (n) memcpy(mine + 2, keys, (size_t)n * sizeof *keys); /* keys NULL on a node that lists nothing */
        st = ah_comm_allgather_f64(ah_comm_world(), mine, (int)most + 2, all, err);
    }
    *ok = true;
    const size_t row = (size_t)most + 2;
    for (int r = 0; st == AH_OK && *ok && r < world; r++) { /* each file a leaving node lists, kept by a staying one */
        const double *a = all + (size_t)r * row;
        for (int i = 0; !a[0] && i < (int)a[1]; i++) {
            bool held = false;
            for (int q = 0; !held && q < world; q++) {
                const double *b = all + (size_t)q * row;
                for (int j = 0; b[0] && !held && j < (int)b[1]; j++) held = b[2 + j] == a[2 + i];
            }
            if (held) continue;
            *ok = false;
            snprintf(why, cap, "step %lld, the last committed, has a file only the leaving nodes hold (no "
                     "--replica-memory-gb copy on a staying host)", (long long)c);
            break;
        }
    }
    free(keys);
    free(mine);
    free(all);
    return st;
}

/* Collective: whether step c survives the change: every file on a staying node (survives_nodes) or c complete
 * in the cloud, which the leaving nodes do not take with them (its upload in flight waited for up to the last
 * save's seconds, about what the save of the change's step it spares would take; at least 2 s). */
static ah_status_t survives(ah_ckpt_session_t *s, int64_t c, bool *ok, char *why, size_t cap, ah_error_t *err) {
    ah_status_t st = survives_nodes(s, c, ok, why, cap, err);
    if (st != AH_OK || *ok || !s->cloud) return st;
    st = ah_ckpt_cloud_holds(s, c, s->last_save_s > 2 ? s->last_save_s : 2, ok, err);
    if (st == AH_OK && *ok) snprintf(why, cap, "%s", "");
    else if (st == AH_OK) snprintf(why + strlen(why), cap - strlen(why), "%s", ", nor is it complete in the cloud");
    return st;
}

/* Collective: the nodes of the ranks that pass leaving count as the noticed ones (s->hit), then a periodic
 * snapshot in flight is committed (its event appended to arr, rank 0's). */
static ah_status_t mark_leaving(ah_ckpt_session_t *s, bool leaving, json_t *arr, ah_error_t *err) {
    int64_t *hit = calloc((size_t)s->n_nodes, sizeof *hit);
    ah_status_t st = ah_comm_agree(ah_comm_world(), hit ? AH_OK
                                   : ah_error_set(err, AH_ERR_OOM, "no host memory for %d nodes", s->n_nodes), err);
    if (st == AH_OK) {
        hit[s->my_node] = leaving;
        st = ah_comm_allreduce_max_i64(ah_comm_world(), hit, (size_t)s->n_nodes, err);
    }
    for (int n = 0; st == AH_OK && n < s->n_nodes; n++) s->hit[n] = (int)hit[n];
    free(hit);
    return st == AH_OK ? ah_ckpt_async_collect(s, true, arr, err) : st;
}

ah_status_t ah_ckpt_session_change_begin(ah_ckpt_session_t *s, int64_t done, bool leaving, json_t **events,
                                         bool *defer, char *why, size_t cap, ah_error_t *err) {
    *events = NULL;
    *defer = false;
    snprintf(why, cap, "%s", "");
    if (!s) return AH_OK;
    json_t *arr = s->tr->rank == 0 ? json_array() : NULL;
    /* a periodic snapshot in flight is committed here, whatever follows: C is the step it commits */
    ah_status_t st = mark_leaving(s, leaving, arr, err);
    if (st == AH_OK && s->o.local_root && s->last_saved != done) {
        if (s->o.sync)
            snprintf(why, cap, "--ckpt-sync: every save is written before the next step");
        else if (s->last_saved < 0)
            *defer = true; /* nothing committed yet: a kill in the window starts over, as before the change */
        else if ((st = survives(s, s->last_saved, defer, why, cap, err)) != AH_OK)
            *defer = false;
    }
    if (st != AH_OK) {
        json_decref(arr);
        return st;
    }
    *events = arr;
    return AH_OK;
}

ah_status_t ah_ckpt_session_save_behind(ah_ckpt_session_t *s, int64_t step, ah_error_t *err) {
    if (!s || !s->o.local_root) return AH_OK;
    ah_status_t st = s->writer ? AH_OK : ah_ckpt_async_start(&s->writer, err); /* a run without --ckpt-every */
    st = ah_comm_agree(ah_comm_world(), st, err);
    return st == AH_OK ? ah_ckpt_save_begin(s, step, err) : st;
}

ah_status_t ah_ckpt_session_save_leaving(ah_ckpt_session_t *s, int64_t done, bool leaving, json_t **events,
                                         ah_error_t *err) {
    *events = NULL;
    if (!s) return AH_OK;
    json_t *arr = s->tr->rank == 0 ? json_array() : NULL;
    /* a periodic snapshot of this very step in flight is committed here; an older one first */
    ah_status_t st = mark_leaving(s, leaving, arr, err);
    if (st == AH_OK && s->o.local_root && s->last_saved != done) {
        bool save_anyway; /* the rule sets the memory-first choice; the save is not optional here */
        json_t *ev = NULL;
        ah_ckpt_snap_t *none = NULL;
        st = ah_ckpt_notice_rule(s, done, 0, &save_anyway, err);
        if (st == AH_OK && s->writer) st = ah_ckpt_async_wait(s->writer, &none, err);
        ah_ckpt_snap_free(none);
        if (st == AH_OK) st = ah_ckpt_notice_save(s, done, &ev, err);
        if (arr && ev) json_array_append_new(arr, ev);
        else json_decref(ev);
    }
    if (st != AH_OK) {
        json_decref(arr);
        return st;
    }
    *events = arr;
    return AH_OK;
}
