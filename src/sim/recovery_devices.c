/* The device rules of a change in place (sim/replay.h; split from recovery.c in session 24): whether a plan runs on
 * the devices the running, parked or free nodes' ranks hold at a notice, whether it gains a node or re-admits a
 * parked rank, and whether a join can be in place. */
#include <stdint.h>
#include <string.h>

#include "sim/replay.h"

/* Whether plan e can follow plan run in place at a notice (elastic/agent_inplace.c map_ranks, with parked
 * ranks since session 23, 8a69e6c): e uses only devices (node, GPU index) that run's ranks on the nodes
 * still up hold, and at least one of each such node's (a staying host's job keeps a rank in the world);
 * run's staying ranks whose device e leaves out park (*parked: how many). Until session 23: exactly run's
 * staying devices. A device parked since the last relaunch (launched: its plan, NULL none) counts as held
 * (session 24, agent_parked.c: the parked rank re-admitted); until then a plan that wanted one relaunched. */
static bool has_device(const ah_sim_entry_t *p, int node, int index, bool any_index) {
    for (int i = 0; p && i < p->place.n_ranks; i++)
        if (p->place.ranks[i].node == node && (any_index || p->place.ranks[i].index == index)) return true;
    return false;
}

/* Whether q's device is parked and can come back (elastic/agent_parked.c): a device of the last relaunch's plan
 * that run leaves out on a node it uses, not spent (spent[node] bit index, NULL none: its rank parked through an
 * in-place join, or its node's launched job gone at a change in place; a joined rank is never one: the agent
 * lists the launch's ranks only, and a node that left and came back runs a job the launch did not start). */
static bool parked_device(const ah_sim_entry_t *run, const ah_sim_entry_t *launched, const uint64_t *spent,
                          const ah_shard_holder_t *q) {
    const bool gone = spent && (q->index < 0 || q->index >= 64 || (spent[q->node] >> q->index & 1));
    return !gone && has_device(launched, q->node, q->index, false) && has_device(run, q->node, 0, true) &&
           !has_device(run, q->node, q->index, false);
}

bool ah_sim_gains_node(const ah_sim_entry_t *run, const ah_sim_entry_t *e) {
    for (int j = 0; j < e->place.n_ranks; j++)
        if (!has_device(run, e->place.ranks[j].node, 0, true)) return true;
    return false;
}

bool ah_sim_devices_kept(const bool *up, const ah_sim_entry_t *run, const ah_sim_entry_t *launched,
                         const uint64_t *spent, const ah_sim_entry_t *e, int *parked) {
    *parked = 0;
    for (int j = 0; j < e->place.n_ranks; j++) {
        const ah_shard_holder_t *q = &e->place.ranks[j];
        /* held: by a running or parked rank, or on a free node (up, run does not use it: its job joins with the
         * change, session 24, elastic/agent_inplace_join.c) */
        const bool held = up[q->node] && (has_device(run, q->node, q->index, false) ||
                                          parked_device(run, launched, spent, q) || !has_device(run, q->node, 0, true));
        if (!held) return false; /* a device no running (or parked) rank holds */
    }
    for (int i = 0; i < run->place.n_ranks; i++) {
        const ah_shard_holder_t *o = &run->place.ranks[i];
        if (!up[o->node]) continue; /* leaving */
        bool same = false, host = false;
        for (int j = 0; j < e->place.n_ranks && !same; j++) {
            host = host || e->place.ranks[j].node == o->node;
            same = e->place.ranks[j].node == o->node && e->place.ranks[j].index == o->index;
        }
        if (!host) return false; /* a staying host's job would keep no rank */
        *parked += !same;
    }
    return true;
}

/* Whether a join onto plan e can be in place (elastic/agent_inplace_join.c map_join): e has a rank on every
 * device a rank of plan run holds, and its other ranks on nodes run does not use (a running host's job
 * cannot gain ranks) or on devices parked since the last relaunch (launched; re-admitted in the same change,
 * session 24: the measured join's share holds, docs/elastic.md "Parked ranks": 0.16-0.25 against 0.228). */
bool ah_sim_join_kept(const ah_sim_replay_t *x, const ah_sim_entry_t *run, const ah_sim_entry_t *e) {
    int kept = 0;
    for (int i = 0; i < run->place.n_ranks; i++) {
        const ah_shard_holder_t *o = &run->place.ranks[i];
        bool found = false;
        for (int j = 0; j < e->place.n_ranks && !found; j++)
            found = e->place.ranks[j].node == o->node && e->place.ranks[j].index == o->index;
        if (!found) return false;
        kept++;
    }
    for (int j = 0; j < e->place.n_ranks; j++)
        if (run->uses[e->place.ranks[j].node] && !parked_device(run, x->launched, x->spent, &e->place.ranks[j])) kept--;
    return kept == 0;
}

/* Whether plan e re-admits a parked rank (a rank on a device parked since the last relaunch): the runtime's
 * change with incoming ranks saves its step before the move when no step is committed (cli_train_inplace.c: a
 * joiner's or re-admitted rank's fallback restores the last committed one), else writes it behind as any change. */
bool ah_sim_readmits(const ah_sim_entry_t *run, const ah_sim_entry_t *launched, const uint64_t *spent,
                     const ah_sim_entry_t *e) {
    for (int j = 0; j < e->place.n_ranks; j++)
        if (parked_device(run, launched, spent, &e->place.ranks[j])) return true;
    return false;
}

/* The parked ranks that can come back after a change onto e (agent_parked.c): a relaunch's (afresh) none, its
 * plan the launched one; at a join in place the launched ranks not in e are spent (parked through it); at another
 * change in place a node not up has lost its launched job (a later one there is not the launch's). */
void ah_sim_spend(ah_sim_replay_t *x, const ah_sim_entry_t *e, bool afresh, bool join) {
    if (afresh) {
        x->launched = e;
        memset(x->spent, 0, sizeof *x->spent * (size_t)x->c->n_nodes);
        return;
    }
    for (int i = 0; join && x->launched && i < x->launched->place.n_ranks; i++) {
        const ah_shard_holder_t *q = &x->launched->place.ranks[i];
        if (q->index >= 0 && q->index < 64 && !has_device(e, q->node, q->index, false))
            x->spent[q->node] |= (uint64_t)1 << q->index;
    }
    for (int n = 0; !join && n < x->c->n_nodes; n++)
        if (!x->up[n]) x->spent[n] = ~(uint64_t)0;
}
