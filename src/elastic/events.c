/* Availability events for the agent: an Oobleck event file resolved onto a cluster's nodes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/names.h"
#include "core/str.h"
#include "elastic/agent.h"
#include "spec/trace.h"

void ah_agent_events_free(ah_agent_events_t *e) {
    if (!e) return;
    free(e->ev);
    memset(e, 0, sizeof *e);
}

/* The number of a trace id in the documented form, "node" then 1 to 9 digits ("node12" -> 12);
 * -1 for anything else ("fast-3", "gpu7", "node", "node-1"). */
static long id_number(const char *id) {
    if (strncmp(id, "node", 4) != 0) return -1;
    const char *d = id + 4;
    const size_t n = strlen(d);
    if (n == 0 || n > 9 || strspn(d, "0123456789") != n) return -1;
    return strtol(d, NULL, 10);
}

/* "fast-0, slow-0, slow-1", runs summarised ("h0..h511"), at most 8 items then a count. */
static void node_names(const ah_cluster_t *c, char *out, size_t cap) {
    ah_str_t s = ah_str_fixed(out, cap);
    const char **names = malloc((size_t)(c->n_nodes + 1) * sizeof *names);
    if (!names) return;
    for (int i = 0; i < c->n_nodes; i++) names[i] = c->nodes[i].name;
    ah_names_append(&s, names, c->n_nodes, ", ", 8);
    free(names);
}

ah_status_t ah_agent_events_load(const char *path, const ah_cluster_t *c, ah_agent_events_t *out,
                                 ah_error_t *err) {
    memset(out, 0, sizeof *out);
    ah_trace_t t;
    ah_status_t s = ah_trace_load(path, AH_UNIT_AUTO, &t, err);
    if (s != AH_OK) return s;
    if (t.kind != AH_TRACE_EVENTS) {
        ah_trace_free(&t);
        return ah_error_set(err, AH_ERR_INVALID, "%s: is a %s; --events takes an event file, one "
                            "`time_ms,add|remove,NODE` a line", path, t.format);
    }
    /* Each id -> node index: a node name as is; other ids in natural order of their number onto
     * the spot nodes in cluster order (-1 when none is left: the id's events are ignored). */
    int *node_of = malloc((size_t)(t.n_ids ? t.n_ids : 1) * sizeof *node_of);
    int *order = malloc((size_t)(t.n_ids ? t.n_ids : 1) * sizeof *order);
    out->ev = malloc((size_t)(t.n_events ? t.n_events : 1) * sizeof *out->ev);
    if (!node_of || !order || !out->ev) {
        s = ah_error_set(err, AH_ERR_INTERNAL, "%s: out of host memory", path);
        goto done;
    }
    int n_named = 0, n_other = 0;
    for (int i = 0; i < t.n_ids; i++) {
        node_of[i] = ah_cluster_find_node(c, t.ids[i]);
        if (node_of[i] >= 0) {
            n_named++;
            continue;
        }
        if (id_number(t.ids[i]) < 0) {
            char names[300];
            node_names(c, names, sizeof names);
            s = ah_error_set(err, AH_ERR_INVALID, "%s: node id \"%s\" is neither a node of the cluster "
                             "nor nodeN; use a node name of the cluster (%s) or trace ids \"node\" then a "
                             "number, like node1, node2 (mapped onto the spot nodes in order)", path, t.ids[i],
                             names);
            goto done;
        }
        /* insertion into order[] by number (ids are few) */
        int k = n_other++;
        while (k > 0 && id_number(t.ids[order[k - 1]]) > id_number(t.ids[i])) {
            order[k] = order[k - 1];
            k--;
        }
        order[k] = i;
    }
    if (n_named && n_other) {
        s = ah_error_set(err, AH_ERR_INVALID, "%s: mixes node names and nodeN ids; use one kind", path);
        goto done;
    }
    int spot = 0;
    ah_str_t mapping = ah_str_fixed(out->mapping, sizeof out->mapping);
    for (int k = 0; k < n_other; k++) {
        while (spot < c->n_nodes && !c->nodes[spot].spot) spot++;
        const int i = order[k];
        node_of[i] = spot < c->n_nodes ? spot++ : -1;
        ah_str_appendf(&mapping, "%s%s -> %s", k ? ", " : "", t.ids[i],
                       node_of[i] >= 0 ? c->nodes[node_of[i]].name : "(no spot node left)");
    }
    for (int e = 0; e < t.n_events; e++) {
        const int node = node_of[t.events[e].id];
        if (node < 0) {
            out->ignored++;
            continue;
        }
        out->ev[out->n++] = (ah_agent_event_t){t.events[e].t_s, node, t.events[e].add};
    }
done:
    free(node_of);
    free(order);
    ah_trace_free(&t);
    if (s != AH_OK) ah_agent_events_free(out);
    return s;
}
