/* The parked ranks the agent can take back in place (agent_state.h "parked ranks"; docs/elastic.md "Parked
 * ranks", re-admission): the launch's processes by device, which of them are parked, and the request's
 * "readmit" for a next plan that wants a parked process's device again (runtime/reconfig.h "readmit"). A rank
 * parked through an in-place join is not taken back: the world it would rejoin holds the joined job's processes,
 * which it never connected to (re-admission's MPI_Intercomm_create spans them: Open MPI 4.1 may hang or abort). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "elastic/agent_logic.h"
#include "elastic/agent_state.h"

void ah_agent_procs_free(agent_t *a) {
    free(a->procs);
    a->procs = NULL;
    a->n_procs = 0;
}

void ah_agent_procs_launch(agent_t *a, const ah_plan_t *plan) {
    ah_agent_procs_free(a);
    const int n = ah_plan_device_count(plan);
    int *next = calloc((size_t)a->n_jobs + 1, sizeof *next); /* each job's ranks so far */
    if (!next || !(a->procs = calloc((size_t)n + 1, sizeof *a->procs))) {
        free(next);
        return; /* none listed: nothing is re-admitted (a plan that wants a parked device relaunches) */
    }
    for (int r = 0; r < n; r++) {
        const ah_device_ref_t *d = ah_plan_rank_device(plan, r);
        const char *host = d ? plan->cluster.nodes[d->node].name : "?";
        int j = 0;
        while (j < a->n_jobs && strcmp(a->jobs[j].host, host) != 0) j++;
        if (j == a->n_jobs || !d) continue;
        ah_agent_proc_t *p = &a->procs[a->n_procs++];
        snprintf(p->node, sizeof p->node, "%s", host);
        p->index = d->index, p->job = j, p->rank = next[j]++, p->parked = p->spent = false;
    }
    free(next);
}

/* Whether plan p has a rank on device node:index. */
static bool uses_device(const ah_plan_t *p, const char *node, int index) {
    for (int q = 0; q < ah_plan_device_count(p); q++) {
        const ah_device_ref_t *e = ah_plan_rank_device(p, q);
        if (e && e->index == index && strcmp(p->cluster.nodes[e->node].name, node) == 0) return true;
    }
    return false;
}

void ah_agent_procs_changed(agent_t *a, const json_t *ev) {
    const bool admitted = json_integer_value(json_object_get(ev, "join")) > 0;
    for (int k = 0; k < a->n_procs; k++) {
        ah_agent_proc_t *p = &a->procs[k];
        p->parked = !a->job_left[p->job] && !uses_device(&a->cur.plan, p->node, p->index);
        p->spent = p->spent || (p->parked && admitted); /* parked through the admission */
    }
}

int ah_agent_parked_on(const agent_t *a, const char *node, int index) {
    for (int k = 0; k < a->n_procs; k++) {
        const ah_agent_proc_t *p = &a->procs[k];
        if (p->parked && !p->spent && p->index == index && strcmp(p->node, node) == 0) {
            for (int i = 0; i < a->cluster.n_nodes; i++)
                if (strcmp(a->cluster.nodes[i].name, node) == 0 && a->leaving[i]) return -1;
            return k;
        }
    }
    return -1;
}

json_t *ah_agent_readmit(const agent_t *a, const ah_plan_t *next, const int *ranks, int *n) {
    const int w = ah_plan_device_count(&a->cur.plan), m = ah_plan_device_count(next);
    json_t *list = json_array();
    *n = 0;
    for (int q = 0; list && q < m; q++) {
        bool taken = false;
        for (int r = 0; r < w && !taken; r++) taken = ranks[r] == q;
        const ah_device_ref_t *e = ah_plan_rank_device(next, q);
        const int k = taken || !e ? -1 : ah_agent_parked_on(a, next->cluster.nodes[e->node].name, e->index);
        if (k < 0) continue;
        json_array_append_new(list, json_pack("{s:i, s:i, s:i}", "job", a->procs[k].job, "rank", a->procs[k].rank,
                                              "to", q));
        (*n)++;
    }
    return list;
}
