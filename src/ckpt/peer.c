/* The peer tier: manifests all-gathered, files moved between nodes over MPI (peer.h); the memory
 * tier the same over the hosts' in-memory replicas (replica.h), a host's own read in place. */
#include "ckpt/peer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt/afile.h"
#include "ckpt/cloud.h"
#include "ckpt/replica.h"
#include "comm/transfer.h"
#include "core/json.h"

enum { TAG_PEER = 7100 };

/* A file the exchange moved to this rank (or failed to). */
typedef struct {
    char name[AH_CKPT_NAME_MAX];
    bool ok;
    char why[512];
} moved_t;

struct ah_ckpt_peer_tier {
    const ah_placement_t *pl;
    bool memory;            /* the memory tier: node_root is the node's replica root (replica.h) */
    int rank, my_node;
    char node_root[AH_CKPT_PATH_MAX];
    ah_ckpt_manifest_t *ms; /* every node's committed manifests, this node's included */
    int *node_of;           /* per manifest: its node */
    int n;
    moved_t *moved;         /* the last exchange's requests of this rank */
    int n_moved;
};

/* Committed manifests of a node root (of its replica root: memory) as one JSON array text ("" when
 * none). */
static char *manifests_text(const char *root, bool memory) {
    ah_ckpt_manifest_t *ms;
    int n = 0;
    ah_error_t e2;
    json_t *arr = json_array();
    if (arr && (memory ? ah_replica_load_committed(root, &ms, &n, &e2) : ah_ckpt_load_committed(root, &ms, &n, &e2)) == AH_OK) {
        for (int i = 0; i < n; i++) json_array_append_new(arr, ah_ckpt_manifest_to_json(&ms[i]));
        ah_ckpt_manifests_free(ms, n);
    }
    char *text = arr && json_array_size(arr) ? json_dumps(arr, JSON_COMPACT) : strdup("");
    json_decref(arr);
    return text;
}

/* Appends the manifests in text (a JSON array from world rank r) as node `node`'s. */
static ah_status_t add_manifests(ah_ckpt_peer_tier_t *p, const char *text, size_t len, int r, int node,
                                 ah_error_t *err) {
    json_t *doc;
    char where[64];
    snprintf(where, sizeof where, "manifests of rank %d", r);
    ah_status_t st = ah_json_load_string(text, len, where, &doc, err);
    if (st != AH_OK) return st;
    for (size_t i = 0; st == AH_OK && i < json_array_size(doc); i++) {
        ah_ckpt_manifest_t m;
        if ((st = ah_ckpt_manifest_from_json(json_array_get(doc, i), where, &m, err)) != AH_OK) break;
        ah_ckpt_manifest_t *g = realloc(p->ms, (size_t)(p->n + 1) * sizeof *g);
        if (g) p->ms = g;
        int *gn = g ? realloc(p->node_of, (size_t)(p->n + 1) * sizeof *gn) : NULL;
        if (gn) p->node_of = gn;
        if (!gn) {
            ah_ckpt_manifest_free(&m);
            st = ah_error_set(err, AH_ERR_OOM, "no host memory for the manifests");
            break;
        }
        gn[p->n] = node;
        g[p->n++] = m;
    }
    json_decref(doc);
    return st;
}

static ah_status_t open_tier(const ah_placement_t *pl, int rank, const char *node_root, bool share, bool memory,
                             ah_ckpt_peer_tier_t **out, ah_error_t *err) {
    *out = NULL;
    ah_ckpt_peer_tier_t *p = calloc(1, sizeof *p);
    char *mine = share ? manifests_text(node_root, memory) : strdup("");
    size_t *lens = malloc((size_t)pl->n_ranks * sizeof *lens);
    char *all = NULL;
    ah_status_t st = p && mine && lens ? AH_OK : ah_error_set(err, AH_ERR_OOM, "no host memory for the manifests");
    if (p) {
        p->pl = pl;
        p->memory = memory;
        p->rank = rank;
        p->my_node = pl->ranks[rank].node;
        snprintf(p->node_root, sizeof p->node_root, "%s", node_root ? node_root : "");
    }
    st = ah_comm_agree(ah_comm_world(), st, err);
    if (st == AH_OK) st = ah_comm_allgather_bytes(ah_comm_world(), mine, strlen(mine), &all, lens, err);
    size_t off = 0;
    for (int r = 0; st == AH_OK && r < pl->n_ranks; off += lens[r], r++)
        if (lens[r] > 0) st = add_manifests(p, all + off, lens[r], r, pl->ranks[r].node, err);
    free(all);
    free(lens);
    free(mine);
    if (st != AH_OK) {
        ah_ckpt_peer_close(p);
        return st;
    }
    *out = p;
    return AH_OK;
}

ah_status_t ah_ckpt_peer_open(const ah_placement_t *pl, int rank, const char *node_root, bool share,
                              ah_ckpt_peer_tier_t **out, ah_error_t *err) {
    return open_tier(pl, rank, node_root, share, false, out, err);
}

ah_status_t ah_ckpt_peer_open_memory(const ah_placement_t *pl, int rank, const char *replica_root, bool share,
                                     ah_ckpt_peer_tier_t **out, ah_error_t *err) {
    return open_tier(pl, rank, replica_root, share, true, out, err);
}

void ah_ckpt_peer_close(ah_ckpt_peer_tier_t *p) {
    if (!p) return;
    ah_ckpt_manifests_free(p->ms, p->n);
    free(p->node_of);
    free(p->moved);
    free(p);
}

/* The index of node nd's manifest listing name at step (the same answer on every rank), or -1. */
static int node_manifest(const ah_ckpt_peer_tier_t *p, int nd, int64_t step, const char *name) {
    for (int i = 0; i < p->n; i++)
        if (p->node_of[i] == nd && p->ms[i].meta.step == step && ah_ckpt_manifest_find(&p->ms[i], name)) return i;
    return -1;
}

static bool node_lists(const ah_ckpt_peer_tier_t *p, int nd, int64_t step, const char *name) {
    return node_manifest(p, nd, step, name) >= 0;
}

/* Where this node keeps the copy manifest i lists: its disk's step directory, or the step directory
 * of the replica root of the manifest's node (memory). -1 when too long. */
static int copy_path(const ah_ckpt_peer_tier_t *p, int i, const char *name, char *path, size_t cap) {
    char root[AH_CKPT_PATH_MAX], dir[AH_CKPT_PATH_MAX];
    if (p->memory ? ah_replica_source_root(root, sizeof root, p->node_root, p->ms[i].meta.node) < 0
                  : snprintf(root, sizeof root, "%s", p->node_root) >= (int)sizeof root)
        return -1;
    if (ah_ckpt_step_dir(dir, sizeof dir, root, p->ms[i].meta.step) < 0) return -1;
    return ah_ckpt_join(path, cap, dir, name);
}

static ah_status_t peer_manifests(void *ctx, ah_ckpt_manifest_t **out, int *n, ah_error_t *err) {
    const ah_ckpt_peer_tier_t *p = ctx;
    *out = calloc((size_t)(p->n > 0 ? p->n : 1), sizeof **out);
    *n = 0;
    if (!*out) return ah_error_set(err, AH_ERR_OOM, "no host memory for the peer manifests");
    for (int i = 0; i < p->n; i++) {
        if (!p->memory && p->node_of[i] == p->my_node) continue; /* the local tier's (memory: a replica here) */
        const ah_ckpt_manifest_t *src = &p->ms[i];
        ah_ckpt_manifest_t *dst = &(*out)[*n];
        *dst = *src;
        dst->files = malloc((size_t)(src->n_files > 0 ? src->n_files : 1) * sizeof *dst->files);
        if (!dst->files) return ah_error_set(err, AH_ERR_OOM, "no host memory for a manifest copy");
        if (src->n_files > 0) memcpy(dst->files, src->files, (size_t)src->n_files * sizeof *dst->files);
        (*n)++; /* counted once whole: the caller frees what is counted */
    }
    return AH_OK;
}

static ah_status_t afile_sink(void *ctx, const void *data, size_t n, ah_error_t *err) {
    return ah_afile_write(ctx, data, n, err);
}

/* This rank's request: receives name from server into dir (the outcome goes to p->moved). */
static ah_status_t receive(ah_ckpt_peer_tier_t *p, int64_t step, const char *name, int server, const char *dir,
                           ah_error_t *err) {
    moved_t *mv = &p->moved[p->n_moved++];
    snprintf(mv->name, sizeof mv->name, "%s", name);
    if (server < 0) {
        snprintf(mv->why, sizeof mv->why, "no other node lists %s at step %lld", name, (long long)step);
        return AH_OK;
    }
    char path[AH_CKPT_PATH_MAX];
    ah_afile_t af;
    ah_error_t e2;
    if ((ah_ckpt_join(path, sizeof path, dir, name) < 0 && ah_error_set(&e2, AH_ERR_IO, "%s/%s: path too long", dir, name)) ||
        ah_afile_open(&af, path, &e2) != AH_OK) {
        /* The sender is committed to this exchange: receive into nowhere, then fail. */
        snprintf(mv->why, sizeof mv->why, "%.500s", e2.msg);
        return ah_comm_recv_file(ah_comm_world(), server, TAG_PEER, NULL, NULL, NULL, &e2) == AH_ERR_COMM
                   ? ah_error_set(err, AH_ERR_COMM, "%s", e2.msg) : AH_OK;
    }
    ah_status_t rs = ah_comm_recv_file(ah_comm_world(), server, TAG_PEER, afile_sink, &af, NULL, &e2);
    if (rs == AH_OK) rs = ah_afile_commit(&af, false, &e2);
    else ah_afile_abort(&af);
    mv->ok = rs == AH_OK;
    if (!mv->ok) snprintf(mv->why, sizeof mv->why, "%.500s", e2.msg);
    return rs == AH_ERR_COMM ? ah_error_set(err, AH_ERR_COMM, "%s", e2.msg) : AH_OK;
}

/* A copy this rank's own host holds in memory (memory tier): read in place into dir, no transfer. */
static void copy_own(ah_ckpt_peer_tier_t *p, int64_t step, const char *name, const char *dir) {
    moved_t *mv = &p->moved[p->n_moved++];
    snprintf(mv->name, sizeof mv->name, "%s", name);
    char src[AH_CKPT_PATH_MAX], dst[AH_CKPT_PATH_MAX], buf[1 << 16];
    ah_error_t e2;
    const int i = node_manifest(p, p->my_node, step, name);
    FILE *f = NULL;
    ah_afile_t af;
    if (copy_path(p, i, name, src, sizeof src) < 0 || ah_ckpt_join(dst, sizeof dst, dir, name) < 0) {
        snprintf(mv->why, sizeof mv->why, "memory: %s: path too long", name);
        return;
    }
    if (!(f = fopen(src, "rb"))) {
        snprintf(mv->why, sizeof mv->why, "%.400s: cannot be read (this host's memory copy is gone)", src);
        return;
    }
    ah_status_t st = ah_afile_open(&af, dst, &e2);
    const bool opened = st == AH_OK;
    for (size_t got; st == AH_OK && (got = fread(buf, 1, sizeof buf, f)) > 0;) st = ah_afile_write(&af, buf, got, &e2);
    if (st == AH_OK && ferror(f)) st = ah_error_set(&e2, AH_ERR_IO, "%s: read error", src);
    fclose(f);
    if (st == AH_OK) st = ah_afile_commit(&af, false, &e2);
    else if (opened) ah_afile_abort(&af);
    mv->ok = st == AH_OK;
    if (!mv->ok) snprintf(mv->why, sizeof mv->why, "%.500s", e2.msg);
}

/* Another rank's request this rank serves: its own copy, verified, or a refusal. */
static ah_status_t serve(const ah_ckpt_peer_tier_t *p, int64_t step, const char *name, int requester, ah_error_t *err) {
    const int i = node_manifest(p, p->my_node, step, name);
    const ah_ckpt_file_t *f = ah_ckpt_manifest_find(&p->ms[i], name);
    char path[AH_CKPT_PATH_MAX];
    ah_error_t e2;
    ah_status_t vs = copy_path(p, i, name, path, sizeof path) < 0
                         ? ah_error_set(&e2, AH_ERR_IO, "%s: path too long", name)
                         : ah_ckpt_verify_file(path, f, &e2);
    if (vs == AH_OK) vs = ah_comm_send_file(ah_comm_world(), path, requester, TAG_PEER, NULL, &e2);
    else vs = ah_comm_send_refusal(ah_comm_world(), requester, TAG_PEER, e2.msg, &e2);
    return vs == AH_ERR_COMM ? ah_error_set(err, AH_ERR_COMM, "%s", e2.msg) : AH_OK;
}

static ah_status_t peer_exchange(void *ctx, int64_t step, const char *const *names, int n, const char *dir,
                                 ah_error_t *err) {
    ah_ckpt_peer_tier_t *p = ctx;
    const ah_placement_t *pl = p->pl;
    char *req = calloc((size_t)n + 1, AH_CKPT_NAME_MAX + 1);
    size_t *lens = malloc((size_t)pl->n_ranks * sizeof *lens);
    free(p->moved);
    p->n_moved = 0;
    p->moved = calloc((size_t)n + 1, sizeof *p->moved);
    ah_status_t st = req && lens && p->moved ? AH_OK : ah_error_set(err, AH_ERR_OOM, "no host memory for peer requests");
    for (int i = 0; st == AH_OK && i < n; i++) {
        strcat(req, names[i]);
        strcat(req, "\n");
    }
    st = ah_comm_agree(ah_comm_world(), st, err);
    char *all = NULL;
    if (st == AH_OK) st = ah_comm_allgather_bytes(ah_comm_world(), req, strlen(req), &all, lens, err);
    free(req);
    size_t off = 0;
    for (int r = 0; st == AH_OK && r < pl->n_ranks; off += lens[r], r++) {
        for (char *q = all + off; st == AH_OK && q < all + off + lens[r];) {
            char *nl = memchr(q, '\n', (size_t)(all + off + lens[r] - q));
            if (!nl) break;
            *nl = '\0';
            const char *name = q;
            q = nl + 1;
            /* memory: a copy on the requester's own host is read there, no transfer */
            int server = p->memory && node_lists(p, pl->ranks[r].node, step, name) ? r : -1;
            for (int nd = 0; nd < pl->n_nodes && server < 0; nd++)
                if (nd != pl->ranks[r].node && pl->node_leader[nd] >= 0 && node_lists(p, nd, step, name))
                    server = pl->node_leader[nd];
            if (r == p->rank && server == r) copy_own(p, step, name, dir);
            else if (r == p->rank) st = receive(p, step, name, server, dir, err);
            else if (server == p->rank) st = serve(p, step, name, r, err);
        }
    }
    free(all);
    free(lens);
    return st;
}

/* The exchange moved the copies before the catalog asks; this says how that went for name. */
static ah_status_t peer_fetch(void *ctx, int64_t step, const char *name, const char *dest_path, ah_error_t *err) {
    const ah_ckpt_peer_tier_t *p = ctx;
    (void)dest_path;
    for (int i = 0; i < p->n_moved; i++)
        if (strcmp(p->moved[i].name, name) == 0)
            return p->moved[i].ok ? AH_OK : ah_error_set(err, AH_ERR_IO, "%s", p->moved[i].why);
    return ah_error_set(err, AH_ERR_IO, "step %lld: %s was not requested from a peer", (long long)step, name);
}

ah_ckpt_peer_t ah_ckpt_peer_hooks(ah_ckpt_peer_tier_t *p) {
    return (ah_ckpt_peer_t){.manifests = peer_manifests, .fetch = peer_fetch, .ctx = p, .exchange = peer_exchange};
}
