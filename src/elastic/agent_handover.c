/* The next plan at a notice (issue 36; docs/elastic.md "The handover at a notice"). When the events
 * file preempts nodes of the running plan, the leaving nodes are known while every rank is alive: the
 * agent plans over the nodes that stay BEFORE it sends the notice, and writes that plan into the run
 * directory of every host of the job (runtime/protocol.h's next-plan.json). With in-memory replicas on,
 * the trainer's save at the notice hands each file of the step over to the memory of the node that
 * reads it under that plan (ckpt/handover.h), so that the relaunch reads everything on its own host.
 * At a join the plan the restart is for is written the same way (no handover: the trainer takes it as
 * which nodes the relaunch reads, runtime/ckpt_notice.c read_by_relaunch, and drops the uploads their
 * disks hold; a node of it preempted during the join's stop: the plan made again without it,
 * ah_agent_next_plan_again, which the trainers read again before they decide). The relaunch takes the
 * next plan when every node it uses is still up
 * (ah_agent_next_plan_holds: the re-plan is then done already, its time spent during the stop; a node
 * that joined during the stop is weighed at the relaunch's first step, agent_join.c); otherwise it
 * plans again, and the restore fetches what the handover did not put in place, as without it. A plan that fails or cannot
 * be written is said and skipped: the notice goes out regardless. With a joined launch (--in-place), a
 * best plan the change cannot reach in place gives way to the plan over exactly the staying ranks'
 * devices when the best does not pay for the relaunch by the join rule (prefer_staying, said). */
#include <stdlib.h>
#include <string.h>

#include "core/timing.h"
#include "elastic/agent_logic.h"
#include "elastic/agent_state.h"
#include "plan/plan_out.h"
#include "runtime/protocol.h"

void ah_agent_next_plan_free(agent_t *a) {
    if (a->have_next) ah_plan_result_free(&a->next);
    a->have_next = false;
    a->next_staying = false;
    free(a->next_up);
    a->next_up = NULL;
}

/* r, made over the nodes up now, as the next plan: written into the run directory of every host of the
 * job (a->next owns it from here; dropped, said, when it cannot be written). t0: when its planning
 * began; why: the stop it is for. */
static void put_next(agent_t *a, ah_plan_result_t *r, double t0, const char *why) {
    char path[700];
    snprintf(path, sizeof path, "%s/plan-next.json", a->work);
    ah_error_t e;
    a->next = *r;
    a->have_next = true;
    ah_status_t s = ah_plan_save(&a->next.plan, path, &e);
    if (s == AH_OK) s = a->launcher.put_run_file(a->launcher.ctx, AH_PROTO_NEXT_PLAN_FILE, path, &e);
    a->next_plan_s = ah_now_s() - t0;
    if (s == AH_OK && (a->next_up = malloc((size_t)a->cluster.n_nodes * sizeof *a->next_up)))
        memcpy(a->next_up, a->up, (size_t)a->cluster.n_nodes * sizeof *a->next_up);
    if (s != AH_OK || !a->next_up) {
        say(a, "note: no next plan for the hosts at this %s (%s); the relaunch plans after the stop", why,
            s != AH_OK ? e.msg : "out of host memory");
        ah_agent_next_plan_free(a);
        return;
    }
    say(a, "next plan, for the %s: %d devices, predicted %.4f s/iteration, planned and written to the hosts in %.3f s%s%s",
        why, ah_plan_device_count(&a->next.plan), a->next.eval.pred.iteration_s, a->next_plan_s,
        a->exposure_note[0] ? "; " : "", a->exposure_note);
}

/* The plan over exactly the staying ranks' devices: the running plan's nodes up and not leaving, each
 * with as many devices as its ranks hold (when they are the node's first ones, as the planner numbers
 * them; else an error). */
static ah_status_t plan_staying(agent_t *a, ah_plan_result_t *r, ah_error_t *err) {
    const ah_plan_t *cur = &a->cur.plan;
    const int w = ah_plan_device_count(cur);
    ah_cluster_t c;
    ah_status_t s = ah_cluster_copy(&a->cluster, &c, err);
    if (s != AH_OK) return s;
    int n = 0;
    for (int i = 0; s == AH_OK && i < a->cluster.n_nodes; i++) {
        int held = 0, top = -1;
        for (int k = 0; a->up[i] && !a->leaving[i] && k < w; k++) {
            const ah_device_ref_t *d = ah_plan_rank_device(cur, k);
            if (!d || strcmp(cur->cluster.nodes[d->node].name, a->cluster.nodes[i].name) != 0) continue;
            held++;
            top = d->index > top ? d->index : top;
        }
        if (held && top + 1 != held)
            s = ah_error_set(err, AH_ERR_INFEASIBLE, "the ranks on %s hold other devices than its first %d",
                             a->cluster.nodes[i].name, held);
        if (held) c.nodes[n] = a->cluster.nodes[i];
        if (held) c.nodes[n++].count = held;
    }
    c.n_nodes = n;
    if (s == AH_OK && n == 0) s = ah_error_set(err, AH_ERR_INFEASIBLE, "no rank stays");
    ah_planner_opts_t po;
    ah_agent_planner_opts(a, &po); /* under --objective cost, priced by every node held, as the best plan is */
    if (s == AH_OK) s = ah_planner_run_sharded(&a->model, &c, &po, false, r, err);
    if (s == AH_OK && (s = ah_plan_wan_check(&r->plan, a->o->allow_unencrypted_wan, err)) != AH_OK)
        ah_plan_result_free(r);
    ah_cluster_free(&c);
    return s;
}

/* r, the best plan over the nodes up: when the change onto it cannot be in place (a joined launch) and
 * the plan over exactly the staying ranks' devices can, that plan instead, unless the best pays for the
 * relaunch by the join rule (ah_agent_join_weigh: its gain over the expected stay against this run's
 * mean recovery and its extra exposure); said either way. */
static void prefer_staying(agent_t *a, ah_plan_result_t *r) {
    char why[512], why2[512];
    if (!ah_agent_inplace_askable(a) || ah_agent_inplace_fits(a, &r->plan, why, sizeof why)) return;
    ah_plan_result_t st;
    ah_error_t e;
    if (plan_staying(a, &st, &e) != AH_OK) {
        say(a, "next plan: the best cannot change in place (%s) and there is no plan over the staying ranks' devices "
            "(%s): the best kept", why, e.msg);
        return;
    }
    if (!ah_agent_inplace_fits(a, &st.plan, why2, sizeof why2)) {
        say(a, "next plan: the best cannot change in place (%s), nor the plan over the staying ranks' devices (%s): "
            "the best kept", why, why2);
        ah_plan_result_free(&st);
        return;
    }
    ah_join_weighed_t w;
    const bool relaunch = ah_agent_join_weigh(a, &st, r, &w);
    say(a, "next plan: the best (%d devices, %.4f s/iteration) cannot change in place (%s); the plan over the staying "
        "ranks' devices (%d devices, %.4f s/iteration) can. By the join rule the best would gain %.3g s of training "
        "over the expected stay of %.4g s (%s) against the relaunch's cost of %.3g s (this run's mean recovery %.3g s "
        "+ expected preemptions %.3g s): %s", ah_plan_device_count(&r->plan), r->eval.pred.iteration_s, why,
        ah_plan_device_count(&st.plan), st.eval.pred.iteration_s, w.gain_s, w.stay_s,
        a->o->join_horizon_s > 0 ? "--join-horizon-s" : "the removals seen", w.cost_s, w.restart_s, w.exposure_s,
        relaunch ? "the best taken (the notice's stop and relaunch)" : "the staying ranks' plan taken (in place)");
    if (relaunch) {
        ah_plan_result_free(&st);
        return;
    }
    ah_plan_result_free(r);
    *r = st;
    a->next_staying = true;
}

void ah_agent_next_plan(agent_t *a) {
    ah_agent_next_plan_free(a);
    if (!a->launcher.put_run_file || a->o->no_handover) return;
    const double t = ah_now_s();
    ah_error_t e;
    ah_plan_result_t r;
    if (ah_agent_plan_up(a, &r, &e) != AH_OK) {
        say(a, "note: no next plan for the handover at this notice (%s); the relaunch plans after the stop", e.msg);
        return;
    }
    prefer_staying(a, &r); /* --in-place */
    put_next(a, &r, t, a->next_staying ? "handover at the notice, over the staying ranks' devices" :
                                          "handover at the notice");
}

void ah_agent_next_plan_join(agent_t *a, ah_plan_result_t *r, double t0) {
    ah_agent_next_plan_free(a);
    if (!a->launcher.put_run_file) { /* --no-handover too: no handover is made at a join */
        ah_plan_result_free(r);
        return;
    }
    put_next(a, r, t0, "restart at the join");
}

void ah_agent_next_plan_again(agent_t *a) {
    ah_agent_next_plan_free(a);
    if (!a->launcher.put_run_file) return;
    const double t = ah_now_s();
    ah_error_t e;
    ah_plan_result_t r;
    if (ah_agent_plan_up(a, &r, &e) != AH_OK) { /* the hosts keep the join's: the trainers may drop its uploads */
        say(a, "warning: no plan without the node preempted during the join's stop (%s); the hosts keep the join's "
            "next plan", e.msg);
        return;
    }
    put_next(a, &r, t, "join's stop, without the node preempted in it");
}

bool ah_agent_take_next_plan(agent_t *a, ah_plan_result_t *out) {
    const bool holds = a->have_next && a->next_up && ah_agent_next_plan_holds(&a->next.plan, &a->cluster, a->up);
    bool joined = false;
    for (int i = 0; holds && i < a->cluster.n_nodes; i++) joined = joined || (a->up[i] && !a->next_up[i]);
    /* A node back or joined during the stop: a plan over every node up is taken when it uses every
     * node of the next plan (those the trainers counted on when they dropped uploads: a node back at
     * once keeps the running plan); else the next plan, the others weighed at its first step (agent_join.c). */
    ah_plan_result_t fresh;
    ah_error_t e;
    if (joined && ah_agent_plan_up(a, &fresh, &e) == AH_OK) {
        if (!ah_agent_plan_leaves_out(&a->next.plan, &fresh.plan)) {
            *out = fresh;
            ah_agent_next_plan_free(a);
            return true;
        }
        ah_plan_result_free(&fresh);
    }
    if (holds) {
        *out = a->next;
        a->have_next = false; /* moved out */
        for (int i = 0; joined && i < a->cluster.n_nodes; i++)
            if (a->up[i] && !a->next_up[i]) { /* joined during the stop: weighed at the first step */
                a->join_pending = true;
                say(a, "%s joined during the stop; it is weighed at the relaunch's first step", a->cluster.nodes[i].name);
            }
        /* the staying ranks' plan, taken for a change in place that was not made: a node up it leaves out too */
        for (int i = 0; a->next_staying && i < a->cluster.n_nodes; i++)
            if (a->up[i] && a->next_up[i] && !ah_agent_plan_uses(&out->plan, a->cluster.nodes[i].name)) {
                a->join_pending = true;
                say(a, "%s is up and the staying ranks' plan leaves it out; it is weighed at the relaunch's first step",
                    a->cluster.nodes[i].name);
            }
    }
    ah_agent_next_plan_free(a);
    return holds;
}
