/* The agent's dealings with its hosts (agent_state.h): who answers, dropping disks, what the disks
 * hold after a forced stop, a hang. Every host is reached through the launcher. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "ckpt/ckpt.h"
#include "elastic/agent_state.h"

/* Whether each of hosts (n) answers into verdict (launcher.h AH_REACH_*), errs naming why not: asked at once
 * when the launcher can (reachable_many, timeout_s each try), else one at a time. */
static void ask_hosts(agent_t *a, const char *const *hosts, int n, double timeout_s, int *verdict, ah_error_t *errs) {
    if (a->launcher.reachable_many) {
        a->launcher.reachable_many(a->launcher.ctx, hosts, n, timeout_s, verdict, errs);
        return;
    }
    for (int k = 0; k < n; k++)
        verdict[k] = a->launcher.reachable(a->launcher.ctx, hosts[k], &errs[k]) == AH_OK ? AH_REACH_YES : AH_REACH_NO;
}

bool ah_agent_drop_unreachable(agent_t *a, bool in_plan, bool keep_unknown, const char *what) {
    if (!a->launcher.reachable) return false;
    int nn = a->cluster.n_nodes;
    const char **hosts = calloc((size_t)nn + 1, sizeof *hosts);
    int *idx = calloc((size_t)nn + 1, sizeof *idx), *verdict = calloc((size_t)nn + 1, sizeof *verdict), n = 0;
    ah_error_t *errs = calloc((size_t)nn + 1, sizeof *errs);
    if (!hosts || !idx || !verdict || !errs) {
        say(a, "warning: out of host memory: the hosts not asked whether they answer");
        nn = 0;
    }
    for (int i = 0; i < nn; i++)
        if (a->up[i] && (!in_plan || ah_agent_plan_uses(&a->cur.plan, a->cluster.nodes[i].name))) {
            hosts[n] = a->cluster.nodes[i].name;
            idx[n++] = i;
        }
    ask_hosts(a, hosts, n, AH_AGENT_ANSWER_S, verdict, errs);
    bool any = false;
    for (int k = 0; k < n; k++) {
        const int i = idx[k];
        if (verdict[k] == AH_REACH_YES) continue;
        if (verdict[k] == AH_REACH_UNKNOWN && keep_unknown) { /* a slow or hung ssh is not a host gone */
            say(a, "%s? %s: unknown, kept (the step timeout decides)", what, errs[k].msg);
            continue;
        }
        a->up[i] = false;
        a->unanswered[i] = true;
        a->reask[i] = (ah_reask_t){0}; /* a new loss: asked again at the next checkpoint */
        a->leaving[i] = in_plan;
        any = true;
        say(a, "%s: %s", what, errs[k].msg);
        emit(a, json_pack("{s:s, s:s, s:s}", "event", "unreachable", "node", hosts[k], "error", errs[k].msg));
    }
    free(hosts);
    free(idx);
    free(verdict);
    free(errs);
    return any;
}

/* Hosts down because they did not answer, asked again once their backoff has passed: those that
 * answer are up again, a join event each; the others are said, with when they are asked next. */
bool ah_agent_answer_again(agent_t *a) {
    bool any = false;
    for (int i = 0; a->launcher.reachable && i < a->cluster.n_nodes; i++) {
        ah_error_t e;
        const char *name = a->cluster.nodes[i].name;
        if (a->up[i] || !a->unanswered[i] || !ah_reask_due(&a->reask[i], ah_now_s())) continue;
        if (a->launcher.reachable(a->launcher.ctx, name, &e) != AH_OK) {
            say(a, "host %s still not answering; next ask in %.0f s", name, ah_reask_failed(&a->reask[i], ah_now_s()));
            continue;
        }
        a->up[i] = true;
        a->unanswered[i] = false;
        any = true;
        say(a, "host %s answers again; it is taken in at this checkpoint", name);
        emit(a, json_pack("{s:s, s:f, s:[s], s:s}", "event", "join", "t_s", since_start(a), "nodes", name, "why",
                          "answers again"));
    }
    return any;
}

void ah_agent_drop_disk(agent_t *a, int node) {
    ah_error_t e;
    if (a->launcher.drop_disk(a->launcher.ctx, a->cluster.nodes[node].name, &e) != AH_OK) say(a, "warning: %s", e.msg);
}

/* After a kill: every disk's step directories that a killed write left uncommitted (for the
 * metrics: where the kill landed) and whether each disk's newest committed step still verifies
 * (a rank killed while writing must never damage it). Returns false when one does not. */
bool ah_agent_check_disks(agent_t *a, json_t *interrupted) {
    bool ok = true;
    for (int i = 0; i < a->cluster.n_nodes; i++) {
        const char *host = a->cluster.nodes[i].name;
        ah_ckpt_step_info_t *steps = NULL;
        int n = 0;
        ah_error_t e;
        if (a->launcher.list_steps(a->launcher.ctx, host, &steps, &n, &e) != AH_OK) continue;
        int64_t latest = -1;
        for (int k = 0; k < n; k++)
            if (steps[k].committed) latest = steps[k].step;
        for (int k = 0; k < n; k++)
            if (!steps[k].committed && steps[k].step > latest) {
                char what[AH_CKPT_PATH_MAX];
                ah_ckpt_step_dir(what, sizeof what, host, steps[k].step);
                json_array_append_new(interrupted, json_string(what));
            }
        free(steps);
        int bad = 0;
        if (latest >= 0 && (a->launcher.verify_step(a->launcher.ctx, host, latest, &bad, &e) != AH_OK || bad)) {
            say(a, "DAMAGED: step %lld on %s: %s", (long long)latest, host, e.msg);
            ok = false;
        }
    }
    return ok;
}

/* The launcher's ranks that stopped progressing (launcher.h stalled, the local launcher): their
 * nodes leave as lost, each said with the rank and a "stalled" event. True when there was one. */
static bool drop_stalled(agent_t *a, const char *what) {
    enum { CAP = 16 };
    char hosts[CAP][64], ranks[1024];
    const int n = a->launcher.stalled(a->launcher.ctx, hosts, CAP, ranks, sizeof ranks);
    if (n == 0) return false;
    if (n == 1 && !hosts[0][0]) { /* no rank's node: a stopped mpirun, every rank idle (launch_local.c) */
        say(a, "%s: %s; the job is stopped and relaunched on the same nodes, a retry of the failure policy", what,
            ranks);
        snprintf(a->hung_why, sizeof a->hung_why, "%s", ranks); /* after_exit counts it against --max-restarts */
    } else
        say(a, "%s: %s; the job is stopped, and the nodes of %s leave as lost", what, ranks,
            n == 1 ? "that rank" : "those ranks");
    for (int k = 0; k < n && k < CAP; k++) {
        const int i = ah_cluster_find_node(&a->cluster, hosts[k]);
        if (i < 0 || !a->up[i]) continue;
        a->up[i] = false;
        a->leaving[i] = true;
        emit(a, json_pack("{s:s, s:s, s:s}", "event", "stalled", "node", hosts[k], "error", ranks));
    }
    return true;
}

/* The plan's hosts that do not answer leave as lost (what: how it is said), or the launcher's jobs whose
 * processes are gone on a host that answers (joined launches: launcher.h dead_jobs) end the job as failed.
 * True when either was found: the watchdog is then disarmed (and the job stopped for the former). */
static bool probe_hosts(agent_t *a, const char *what, double quiet, bool keep_unknown) {
    if ((a->hung = ah_agent_drop_unreachable(a, true, keep_unknown, what))) {
        a->dog.last_t = -1;
        a->launcher.stop(a->launcher.ctx);
        return true;
    }
    char dead[512];
    if (!a->launcher.dead_jobs || a->launcher.dead_jobs(a->launcher.ctx, dead, sizeof dead) == 0) return false;
    /* a joined launch: the next poll reads that job's end, a failure of the job (agent_exit.c) */
    say(a, "no metrics line for %.1f s: every host of the plan answers, but the job's processes on %s are gone",
        quiet, dead);
    a->dog.last_t = -1;
    return true;
}

void ah_agent_probe_quiet(agent_t *a) {
    const ah_watchdog_t *w = &a->dog;
    if (!a->joined || !a->launcher.dead_jobs || !a->launcher.reachable || w->last_t < 0 || a->probed_t == w->last_t)
        return;
    const double quiet = ah_now_s() - w->last_t;
    if (quiet <= fmax(AH_AGENT_PROBE_FLOOR_S, AH_AGENT_PROBE_FACTOR * fmax(w->predicted_s, w->max_gap_s))) return;
    a->probed_t = w->last_t;
    probe_hosts(a, "host lost without notice", quiet, true);
}

/* No metrics line for longer than the step timeout: the plan's hosts that do not answer hung (with
 * the local launcher: the ranks that stopped progressing) and leave as lost once the job, stopped
 * now, has ended. With every host answering (every rank running) the job is only slow (a long
 * checkpoint write, say): said, and timed again from now. */
void ah_agent_on_hang(agent_t *a) {
    const double quiet = ah_now_s() - a->dog.last_t, limit = ah_watchdog_timeout(&a->dog);
    char what[160];
    /* a change in place or a join this agent asked for is waited for until its own deadline: the trainers may
     * wait idle in it (a join's admission waits for the joining job's turn), which is no hang of theirs; its
     * deadline's fallback governs (before, the local launcher named the idle ranks and their nodes left as lost,
     * their disks dropped: scripts/chaos-run.sh joinkill, session 25) */
    const double until = a->join_req == 1 ? a->join_deadline : a->inplace == 1 ? a->inplace_deadline : -1;
    if (until > ah_now_s()) {
        say(a, "no metrics line for %.1f s (step timeout %.1f s) while the %s asked for is waited for, until %.1f s: "
            "waiting on", quiet, limit, a->join_req == 1 ? "join in place" : "change in place", until - a->t0);
        a->dog.last_t = ah_now_s();
        return;
    }
    snprintf(what, sizeof what, "%s (no metrics line for %.1f s, over the step timeout of %.1f s)",
             a->launcher.reachable ? "host hung" : "rank stopped progressing", quiet, limit);
    if (a->launcher.reachable) {
        if (probe_hosts(a, what, quiet, false)) return;
    } else if ((a->hung = drop_stalled(a, what))) {
        a->dog.last_t = -1;
        a->launcher.stop(a->launcher.ctx);
        return;
    }
    say(a, "no metrics line for %.1f s (step timeout %.1f s), but %s: waiting on", quiet, limit,
        a->launcher.reachable ? "every host of the plan answers" : "every rank is running");
    a->dog.last_t = ah_now_s();
}
