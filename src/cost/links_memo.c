/* A memo of DP groups' links (ah_dp_links_of) for the many plans a search prices on one cluster
 * (contract in cost/cost.h ah_dp_links_memo_t). ah_dp_links_of reads of a group only, per kind of
 * member (a node's type, zone and region: all ah_link_of and ah_cluster_domains read of a node
 * besides whether two nodes are one): how many members the kind has (its domain's count), whether
 * a node holds two of them (its intra-node link), whether they are on two nodes or more (its
 * inter-node link), and the links between kinds; and the flows. Those, the group's signature, key
 * the memo; its figures are ah_dp_links_of's for the first group found with it (fmin and fmax over
 * the same links in another order give the same figures). */
#include <stdlib.h>
#include <string.h>

#include "core/hash.h"
#include "cost/cost.h"

typedef struct {
    uint64_t hash;
    size_t at;  /* the signature's first word in sig */
    int len;    /* its words; 0: the slot is free */
    ah_dp_links_t links;
} memo_slot_t;

struct ah_dp_links_memo {
    const ah_node_t *nodes; /* the cluster's (its nodes' array), n_nodes of them */
    int n_nodes, n_kinds;
    int *kind_of;           /* [n_nodes]: the node's kind */
    unsigned gen;           /* the group being keyed: node_at, kind_at equal to it are its */
    unsigned *node_at, *kind_at;
    int *count, *present;   /* [n_kinds]: the group's members of the kind; the kinds it has */
    uint8_t *flags;         /* [n_kinds]: 1 a node holds two, 2 two nodes or more */
    int64_t *key;           /* [n_kinds + 1]: the signature being built */
    memo_slot_t *slots;     /* open addressing, cap a power of two */
    size_t cap, used;
    int64_t *sig;           /* every stored signature's words */
    size_t sig_len, sig_cap;
};

/* A memo past this many groups stops storing (each further group found afresh). */
#define MEMO_MAX_GROUPS ((size_t)1 << 16)

static bool same_kind(const ah_node_t *x, const ah_node_t *y) {
    return x->type == y->type && strcmp(x->zone, y->zone) == 0 && strcmp(x->region, y->region) == 0;
}

/* Numbers the nodes' kinds into m->kind_of (a hash of the type, zone and region names; each
 * node compared with the kinds of its slot's chain). false without memory. */
static bool number_kinds(ah_dp_links_memo_t *m) {
    size_t cap = 16;
    while (cap < 2 * (size_t)m->n_nodes) cap *= 2;
    int *rep = malloc(cap * sizeof *rep); /* a kind's first node, -1: free */
    if (!rep) return false;
    for (size_t i = 0; i < cap; i++) rep[i] = -1;
    for (int i = 0; i < m->n_nodes; i++) {
        const ah_node_t *x = &m->nodes[i];
        const uint64_t h = ah_fnv1a64_mix(ah_fnv1a64_mix(ah_fnv1a64_str(x->zone), ah_fnv1a64_str(x->region)),
                                          (uint64_t)x->type);
        size_t s = h & (cap - 1);
        while (rep[s] >= 0 && !same_kind(&m->nodes[rep[s]], x)) s = (s + 1) & (cap - 1);
        if (rep[s] < 0) {
            rep[s] = i;
            m->kind_of[i] = m->n_kinds++;
        } else m->kind_of[i] = m->kind_of[rep[s]];
    }
    free(rep);
    return true;
}

ah_dp_links_memo_t *ah_dp_links_memo_new(const ah_cluster_t *c) {
    ah_dp_links_memo_t *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    m->nodes = c->nodes;
    m->n_nodes = c->n_nodes;
    const size_t n = (size_t)(c->n_nodes > 0 ? c->n_nodes : 1);
    m->kind_of = malloc(n * sizeof *m->kind_of);
    m->node_at = calloc(n, sizeof *m->node_at);
    m->kind_at = calloc(n, sizeof *m->kind_at);
    m->count = malloc(n * sizeof *m->count);
    m->present = malloc(n * sizeof *m->present);
    m->flags = malloc(n * sizeof *m->flags);
    m->key = malloc((n + 1) * sizeof *m->key);
    m->cap = 256;
    m->slots = calloc(m->cap, sizeof *m->slots);
    if (!m->kind_of || !m->node_at || !m->kind_at || !m->count || !m->present || !m->flags || !m->key ||
        !m->slots || !number_kinds(m)) {
        ah_dp_links_memo_free(m);
        return NULL;
    }
    return m;
}

void ah_dp_links_memo_free(ah_dp_links_memo_t *m) {
    if (!m) return;
    void *owned[] = {m->kind_of, m->node_at, m->kind_at, m->count, m->present, m->flags, m->key, m->slots, m->sig};
    for (size_t i = 0; i < sizeof owned / sizeof owned[0]; i++) free(owned[i]);
    free(m);
}

/* The group's signature into m->key (the flows, 0 where no link of c has a total to share, then per
 * kind it has, by kind: the kind, its members and flags); returns its words. */
static int signature(ah_dp_links_memo_t *m, const ah_cluster_t *c, const int *nodes, int n, int flows) {
    if (++m->gen == 0) { /* the stamps wrapped: none is the new group's */
        memset(m->node_at, 0, (size_t)m->n_nodes * sizeof *m->node_at);
        memset(m->kind_at, 0, (size_t)m->n_nodes * sizeof *m->kind_at);
        m->gen = 1;
    }
    int k = 0;
    for (int i = 0; i < n; i++) {
        const int node = nodes[i], kd = m->kind_of[node];
        if (m->kind_at[kd] != m->gen) {
            m->kind_at[kd] = m->gen;
            m->count[kd] = 0;
            m->flags[kd] = 0;
            int j = k++; /* m->present kept sorted */
            for (; j > 0 && m->present[j - 1] > kd; j--) m->present[j] = m->present[j - 1];
            m->present[j] = kd;
        } else if (m->node_at[node] == m->gen) m->flags[kd] |= 1;
        else m->flags[kd] |= 2;
        m->node_at[node] = m->gen;
        m->count[kd]++;
    }
    m->key[0] = flows;
    bool shared = false; /* flows matter only to a link with a total (ah_link_shared_bw) */
    for (int i = 0; i < c->net.n_links && !shared; i++) shared = c->net.links[i].total_gb_s > 0;
    if (!shared) m->key[0] = 0;
    for (int j = 0; j < k; j++) {
        const int kd = m->present[j];
        m->key[j + 1] = (int64_t)kd << 32 | (int64_t)m->count[kd] << 2 | m->flags[kd];
    }
    return k + 1;
}

/* Stores links under key (len words, hash h) when there is room. */
static void store(ah_dp_links_memo_t *m, uint64_t h, int len, const ah_dp_links_t *links) {
    if (m->used >= MEMO_MAX_GROUPS) return;
    if (2 * (m->used + 1) > m->cap) { /* grow: rehash the slots */
        memo_slot_t *slots = calloc(2 * m->cap, sizeof *slots);
        if (!slots) return;
        for (size_t i = 0; i < m->cap; i++) {
            if (m->slots[i].len == 0) continue;
            size_t s = m->slots[i].hash & (2 * m->cap - 1);
            while (slots[s].len != 0) s = (s + 1) & (2 * m->cap - 1);
            slots[s] = m->slots[i];
        }
        free(m->slots);
        m->slots = slots;
        m->cap *= 2;
    }
    if (m->sig_len + (size_t)len > m->sig_cap) {
        size_t cap = m->sig_cap ? 2 * m->sig_cap : 1024;
        while (cap < m->sig_len + (size_t)len) cap *= 2;
        int64_t *sig = realloc(m->sig, cap * sizeof *sig);
        if (!sig) return;
        m->sig = sig;
        m->sig_cap = cap;
    }
    memcpy(m->sig + m->sig_len, m->key, (size_t)len * sizeof *m->key);
    size_t s = h & (m->cap - 1);
    while (m->slots[s].len != 0) s = (s + 1) & (m->cap - 1);
    m->slots[s] = (memo_slot_t){.hash = h, .at = m->sig_len, .len = len, .links = *links};
    m->sig_len += (size_t)len;
    m->used++;
}

void ah_dp_links_memo_of(ah_dp_links_memo_t *m, const ah_cluster_t *c, const int *nodes, int n, int flows,
                         ah_dp_links_t *out) {
    if (!m || n < 2 || c->nodes != m->nodes || c->n_nodes != m->n_nodes) {
        ah_dp_links_of(c, nodes, n, flows, out);
        return;
    }
    const int len = signature(m, c, nodes, n, flows);
    uint64_t h = AH_FNV1A64_OFFSET;
    for (int i = 0; i < len; i++) h = ah_fnv1a64_mix(h, (uint64_t)m->key[i]);
    for (size_t s = h & (m->cap - 1); m->slots[s].len != 0; s = (s + 1) & (m->cap - 1)) {
        const memo_slot_t *e = &m->slots[s];
        if (e->hash == h && e->len == len && memcmp(m->sig + e->at, m->key, (size_t)len * sizeof *m->key) == 0) {
            *out = e->links;
            return;
        }
    }
    ah_dp_links_of(c, nodes, n, flows, out);
    store(m, h, len, out);
}
