/* The availability the agent follows (agent_state.h): the events file's preemptions, removals and
 * joins as they fall due (agent_logic.h ah_agent_event_action decides what each one does), the
 * notices they and a join that pays start, the next plan made first. Part of the elastic agent. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "core/json.h"
#include "core/timing.h"
#include "elastic/agent_logic.h"
#include "elastic/agent_state.h"

void ah_agent_begin_stop(agent_t *a, ah_agent_cause_t cause, const char *node) {
    if (!a->stopping) {
        a->stopping = true;
        a->forced = false;
        a->cause = cause;
        a->notice_t = ah_now_s();
        a->recovery_t = 0;
    }
    const int sent = a->launcher.notice(a->launcher.ctx, node);
    say(a, "notice: SIGTERM to the ranks of %s (%d now, any still starting when their rank file appears); "
        "grace period %.1f s", node ? node : "every node", sent, a->o->grace_s);
}

/* A trace may be fed while the agent runs (e.g. a benchmark that preempts once a checkpoint is in
 * the cloud): when the event file has grown, it is read again and the events not yet due are
 * taken from the new reading. A reading that fails (a line half written) is tried again later. */
static void reread_events(agent_t *a) {
    struct stat sb;
    if (!a->o->events || stat(a->o->events, &sb) != 0 || sb.st_size <= a->ev_size) return;
    ah_agent_events_t ev;
    ah_error_t e;
    if (ah_agent_events_load(a->o->events, &a->cluster, &ev, &e) != AH_OK) return;
    if (ev.n < a->next_ev) {
        ah_agent_events_free(&ev);
        return;
    }
    ah_agent_events_free(&a->ev);
    a->ev = ev;
    a->ev_size = sb.st_size;
}

/* The notices of the nodes the events file preempted in one reading: the next plan first, made over
 * the nodes that stay and written to the hosts (agent_handover.c), then the notice, its clock started
 * before that plan. */
static void notice_leaving(agent_t *a, const bool *noticed) {
    bool any = false;
    for (int i = 0; i < a->cluster.n_nodes; i++) any = any || noticed[i];
    if (!any) return;
    /* a join in place asked for and not made: withdrawn, this notice's own path (in place or its stop) follows */
    if (ah_agent_inplace_join_withdraw(a, "a notice came before it", "the notice goes first, the join decided again"))
        a->join_pending = true;
    ah_agent_inplace_fallback(a, "another notice came before it"); /* a change in place asked for and not made */
    const bool first = !a->stopping;
    const double t = ah_now_s();
    bool next_uses = false; /* a node the next plan uses, noticed now */
    for (int i = 0; a->have_next && i < a->cluster.n_nodes; i++)
        next_uses = next_uses || (noticed[i] && ah_agent_plan_uses(&a->next.plan, a->cluster.nodes[i].name));
    if (first) a->planning_notice_t = t;
    if (first) ah_agent_next_plan(a);
    else if (ah_agent_replan_in_stop(a->cause, next_uses)) ah_agent_next_plan_again(a);
    const bool in_place = first && ah_agent_inplace_begin(a, noticed, t);
    a->planning_notice_t = 0;
    if (in_place) return; /* --in-place: the survivors keep their processes */
    for (int i = 0; i < a->cluster.n_nodes; i++)
        if (noticed[i]) ah_agent_begin_stop(a, a->stopping ? a->cause : AH_CAUSE_EVENT, a->cluster.nodes[i].name);
    if (first) a->notice_t = t;
}

void ah_agent_apply_events(agent_t *a) {
    reread_events(a);
    ah_agent_churn_tick(a);
    const double now = since_start(a);
    bool *noticed = calloc((size_t)a->cluster.n_nodes, sizeof *noticed);
    if (!noticed) return; /* out of host memory: the events wait for the next poll */
    bool joined = false; /* a join in this reading: decided once for all of them */
    while (a->next_ev < a->ev.n && a->ev.ev[a->next_ev].t_s <= now) {
        const ah_agent_event_t *e = &a->ev.ev[a->next_ev++];
        const char *name = a->cluster.nodes[e->node].name;
        if (e->add && a->inplace == 1 && a->leaving[e->node]) { /* as at a relaunch: a new machine, the plan kept */
            char why[128];
            snprintf(why, sizeof why, "%s came back before it", name);
            ah_agent_inplace_fallback(a, why);
        }
        const bool uses = !e->add && a->running && ah_agent_plan_uses(&a->cur.plan, name);
        const ah_event_action_t act = ah_agent_event_action(e->add, a->up[e->node], a->running, a->stopping, uses);
        if (act == AH_EVENT_NOTHING) continue;
        if (!e->add && e->t_s > 0) ah_agent_churn_removed(a, e->node, e->t_s); /* the join rule's (t 0: the start) */
        /* A node back before the relaunch is planned with again; if it was preempted it is a new
         * machine, so its disk is still dropped (leaving[] stays set). */
        a->up[e->node] = e->add;
        if (e->add) {
            a->unanswered[e->node] = false; /* up by the event: no ask and no backoff to wait for */
            emit(a, json_pack("{s:s, s:f, s:[s]}", "event", "join", "t_s", now, "nodes", name));
        }
        if (act == AH_EVENT_JOIN_AT_CHECKPOINT) {
            a->join_pending = joined = true;
            say(a, "%s joined; taken in when a restart pays (at once, or at the next join, checkpoint or first step)",
                name);
        } else if (act == AH_EVENT_JOIN) {
            say(a, "%s joined", name);
        } else if (act == AH_EVENT_PREEMPT) {
            a->leaving[e->node] = true;
            noticed[e->node] = true;
            say(a, "preemption of %s (from the events file)", name);
        } else {
            if (a->running) say(a, "%s left; the running plan does not use it", name);
            else say(a, "%s is down%s", name, a->have_cur ? " (between two launches)" : " at the start");
            ah_agent_drop_disk(a, e->node);
        }
    }
    notice_leaving(a, noticed);
    free(noticed);
    if (joined) ah_agent_join_if_pays(a, "nodes joined");
}

/* Joins pending: the restart onto the plan with them when it pays (agent_join.c). */
void ah_agent_join_if_pays(agent_t *a, const char *when) {
    if (a->inplace == 1 || a->join_req) return; /* a change in place asked for: the joins stay pending until it is made */
    const ah_agent_launch_t *L = a->res->n_launches > 0 ? &a->res->launches[a->res->n_launches - 1] : NULL;
    if (a->join_pending && a->running && !a->stopping && L && L->first_step >= 0 && L->end_step + 1 >= a->o->steps) {
        /* a join (in place or not) would take the job at its last step or after it: none */
        say(a, "%s; the run ends first (step %lld of %lld): no join", when, (long long)L->end_step, (long long)a->o->steps);
        a->join_pending = false;
        return;
    }
    if (ah_agent_consider_join(a, when) && !ah_agent_inplace_join_begin(a)) ah_agent_begin_stop(a, AH_CAUSE_JOIN, NULL);
}
