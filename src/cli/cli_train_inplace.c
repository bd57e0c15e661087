/* autohet train's in-place reconfiguration (runtime/reconfig.h; docs/elastic.md "In-place reconfiguration at a
 * notice"): at a step boundary some jobs leave, new jobs may be admitted ("join"), and the ranks of the new world
 * set up the request's plan in place, their state moved rank to rank over the old world (runtime/reconfig_move.h)
 * or, when it cannot be, resumed from the step just saved. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ckpt/host_memory.h"
#include "ckpt/policy.h"
#include "ckpt/test_hook.h"
#include "cli/cli.h"
#include "cli/cli_train.h"
#include "comm/comm.h"
#include "core/timing.h"
#include "runtime/protocol.h"
#include "runtime/host_check.h"
#include "runtime/reconfig_move.h"
#include "runtime/train_loop.h"

/* What the running world sends the jobs it admits (comm.h ah_comm_world_admit's payload). */
typedef struct {
    ah_reconfig_req_t req;
    int from; /* the running world's ranks before the change */
} late_msg_t;

bool ah_cli_train_reconfig_check(const ah_reconfig_req_t *req, int stay, void *ctx, char *why, size_t why_size) {
    const ah_cli_reconfig_ctx_t *c = ctx;
    args_t b = *c->a;
    b.plan = req->plan, b.resume = true, b.init_from = NULL;
    ah_plan_t p = {0};
    bool have = false;
    ah_error_t e = {0};
    const int in = ah_reconfig_incoming(req); /* joining jobs' and re-admitted ranks */
    ah_status_t s = b.local_root ? ah_cli_train_load_plan(&b, in ? -1 : stay, &p, &have, &e)
        : ah_error_set(&e, AH_ERR_USAGE, "the run has no --local-root to save step %lld to and resume from in place",
                       (long long)req->step);
    if (s == AH_OK) s = ah_ckpt_check_continues(c->tr, req->step, &p, &e); /* what the restore would refuse */
    if (s == AH_OK && in && ah_plan_device_count(&p) < stay + in)
        s = ah_error_set(&e, AH_ERR_USAGE, "%s has %d devices, fewer than the %d staying ranks and one a joining job "
                         "(%d) or a re-admitted rank (%d)", req->plan, ah_plan_device_count(&p), stay, req->join,
                         req->n_readmit);
    if (have) ah_plan_free(&p);
    if (s != AH_OK) snprintf(why, why_size, "%s", e.msg);
    return s == AH_OK;
}

/* Collective over the new world: rank 0's "recover" event for the moved state (the state's arrival, as a
 * resume's event says it: the agent takes its "seconds" as the recovery's transfer), "moved": true, no byte
 * from any tier, the bytes sent between processes and kept; "seconds" the slowest rank's move. */
static ah_status_t moved_event(const ah_reconfig_req_t *req, double move_s, const ah_reconfig_state_t *state,
                               FILE *metrics, const ah_trainer_t *tr, ah_error_t *err) {
    int64_t us = (int64_t)(move_s * 1e6);
    const ah_status_t s = ah_comm_allreduce_max_i64(ah_comm_world(), &us, 1, err);
    if (s != AH_OK || tr->rank != 0) return s;
    json_t *b = json_object(), *f = json_object(), *sec = json_object();
    for (int i = 0; i < AH_TIER_COUNT; i++) {
        json_object_set_new(b, ah_ckpt_tier_name((ah_ckpt_tier_t)i), json_integer(0));
        json_object_set_new(f, ah_ckpt_tier_name((ah_ckpt_tier_t)i), json_integer(0));
        json_object_set_new(sec, ah_ckpt_tier_name((ah_ckpt_tier_t)i), json_real(0));
    }
    ah_metrics_write_events(metrics, json_pack("{s:s, s:I, s:b, s:f, s:o, s:o, s:o, s:i, s:b, s:I, s:I, s:I}",
        AH_PROTO_EVENT, AH_PROTO_EV_RECOVER, AH_PROTO_STEP, (json_int_t)req->step, "found", 1, AH_PROTO_RECOVER_SECONDS,
        (double)us * 1e-6, AH_PROTO_RECOVER_BYTES, b, AH_PROTO_RECOVER_FILES, f, AH_PROTO_RECOVER_TIER_SECONDS, sec,
        "fallbacks", 0, "moved", 1, "moved_bytes", (json_int_t)state->moved_bytes, "kept_bytes",
        (json_int_t)state->kept_bytes, "data_position", (json_int_t)ah_trainer_data_position(tr, req->step)));
    return AH_OK;
}

/* Collective over the new world, its trainer and session set up: the moved state loaded (*moved_s its
 * seconds, added to the move's phase), the session told the step is there (ckpt_io.h ah_ckpt_session_adopt).
 * A rank that cannot load it fails the load on every rank, and the state is restored from the checkpoint
 * just saved instead (the resume; said). */
static ah_status_t load_moved(const ah_reconfig_req_t *req, const ah_reconfig_moved_t *mv, double *ph, double *moved_s,
                              ah_reconfig_state_t *state, FILE *metrics, ah_trainer_t *tr, ah_ckpt_session_t *ck,
                              int64_t *start, ah_error_t *err) {
    double t = ah_now_s();
    ah_status_t s = ah_comm_agree(ah_comm_world(), ah_reconfig_move_load(mv, tr, err), err);
    *moved_s = ah_now_s() - t;
    ph[AH_RECONFIG_PH_MOVE] += *moved_s;
    if (s == AH_OK) {
        *start = req->step;
        if (state->save_async) ah_ckpt_session_adopt(ck, state->kept_step, state->kept_step >= 0);
        else ah_ckpt_session_adopt(ck, req->step, state->committed);
        s = moved_event(req, ph[AH_RECONFIG_PH_MOVE], state, metrics, tr, err);
        /* the step written behind the next one (docs/elastic.md "Durability"): its snapshot here */
        return s == AH_OK && state->save_async ? ah_ckpt_session_save_behind(ck, req->step, err) : s;
    }
    if (tr->rank == 0)
        fprintf(stderr, "autohet train: warning: in-place change at step %lld: the moved state could not be loaded "
                "(%s): restoring %s\n", (long long)req->step, err->msg, state->save_async ? "the last committed step "
                "(this one was to be written behind)" : "it from the checkpoint just saved");
    state->moved = false;
    snprintf(state->why_not, sizeof state->why_not, "%s", err->msg);
    json_t *ev = NULL;
    bool found = false;
    t = ah_now_s();
    s = ah_ckpt_session_resume(ck, start, &found, &ev, err);
    ph[AH_RECONFIG_PH_LOAD] = ah_now_s() - t;
    ah_metrics_write_events(metrics, ev);
    return s;
}

/* What each node of the running plan holds in host memory besides the move, as the start-up's check counts it
 * (cli_train.c): its checkpoint snapshots and in-memory replicas; NULL when none (or it cannot be sized: not
 * checked). The caller frees it. */
static int64_t *held_bytes(const args_t *a, const ah_plan_t *plan) {
    const bool snapshots = a->local_root && a->ckpt_every > 0 && !a->ckpt_sync;
    const double replicas = a->local_root && a->ckpt_every > 0 ? a->replica_gb : 0;
    int64_t *held = snapshots || replicas > 0 ? calloc((size_t)plan->cluster.n_nodes + 1, sizeof *held) : NULL;
    ah_error_t err;
    if (held && ah_host_memory_node_bytes(plan, snapshots, replicas, held, &err) != AH_OK) {
        free(held);
        held = NULL;
    }
    return held;
}

/* Collective over the old world, its trainer still up: the state moved rank to rank to the next plan
 * (runtime/reconfig_move.h; a join's: what the staying ranks load, the joining ranks' packed for
 * move_to_joiners). NULL on a leaving rank, or on every rank when the move cannot be made (a rank cannot load
 * the plan, a sharded optimizer, ...: state->why_not says why, rank 0 says it on stderr: the restore from the
 * checkpoint just saved follows). */
static ah_reconfig_moved_t *move_state(const args_t *a, const ah_reconfig_req_t *req, ah_trainer_t *tr,
                                       double *ph, ah_reconfig_state_t *state) {
    ah_comm_t *w = ah_comm_world();
    const int n = ah_comm_size(w), mine = ah_reconfig_new_rank(req);
    int64_t *all = calloc((size_t)n, sizeof *all);
    int *to = calloc((size_t)n, sizeof *to), stay = 0;
    int64_t *held = held_bytes(a, tr->plan); /* the move's buffers come on top (joinmove (b)) */
    ah_error_t err;
    if (!all || !to) { /* the others are about to enter the collectives below */
        fprintf(stderr, "autohet train: rank %d: no host memory for the move's %d ranks\n", tr->rank, n);
        ah_comm_abort(ah_status_exit_code(AH_ERR_OOM));
    }
    const bool goes = ah_reconfig_leaving(req) || ah_reconfig_parking(req); /* hands over what it holds */
    ah_status_t s = ah_comm_allgather_i64(w, goes ? -1 : mine >= 0 ? mine : -2, all, &err);
    for (int r = 0; r < n; r++) stay += all[r] != -1;
    for (int r = 0, next = 0; r < n; r++) to[r] = all[r] == -2 ? next++ : (int)all[r]; /* no "ranks": world order */
    args_t b = *a;
    b.plan = req->plan, b.resume = true, b.init_from = NULL;
    ah_plan_t p = {0};
    bool have = false;
    ah_reconfig_moved_t *mv = NULL;
    ah_reconfig_move_stats_t ms = {0};
    if (s == AH_OK) {
        const bool in = ah_reconfig_incoming(req) > 0; /* new ranks: the move to the joiners follows */
        ah_status_t l = ah_cli_train_load_plan(&b, in ? -1 : stay, &p, &have, &err);
        const ah_device_ref_t me = ah_role_device(tr->plan, &tr->role);
        if (l == AH_OK && ah_test_hook_fails("reconfig-move", req->step, tr->plan->cluster.nodes[me.node].name))
            l = ah_error_set(&err, AH_ERR_IO, "test hook: this rank takes no part in the move");
        if ((s = ah_comm_agree(w, l, &err)) == AH_OK)
            s = ah_reconfig_move(tr, &p, to, in, req->step, held, &mv, &ms, &err);
    }
    if (have) ah_plan_free(&p);
    free(all);
    free(to);
    free(held);
    ph[AH_RECONFIG_PH_MOVE] = ms.seconds;
    *state = (ah_reconfig_state_t){.moved = s == AH_OK, .committed = state->committed, .moved_bytes = ms.moved_bytes,
                                   .kept_bytes = ms.kept_bytes};
    if (s != AH_OK) {
        snprintf(state->why_not, sizeof state->why_not, "%s", err.msg);
        if (tr->rank == 0)
            fprintf(stderr, "autohet train: warning: in-place change at step %lld: the state is not moved rank to rank "
                    "(%s): it is restored from the checkpoint just saved\n", (long long)req->step, err.msg);
    }
    return mv;
}

/* Collective over the new world after a join (req->join), its plan loaded: the joining ranks' pieces sent them
 * by the staying ranks that packed them (runtime/reconfig_move.h ah_reconfig_move_join); this rank's moved state
 * (mv in: a staying rank's from move_state), or NULL on every rank when the move is off (state->why_not says why,
 * rank 0 says it on stderr when it is not the old world's reason, said already). */
static ah_reconfig_moved_t *move_to_joiners(bool joining, const ah_plan_t *plan, ah_reconfig_moved_t *mv, double *ph,
                                            ah_reconfig_state_t *state) {
    ah_reconfig_move_stats_t ms;
    ah_error_t err;
    const bool said = !joining && !mv; /* the old world's move failed: its rank 0 said why */
    /* the joining ranks learn from the staying ones whether step S is written behind, and C (the resume point) */
    int64_t v[2] = {joining ? INT64_MIN : state->save_async, joining ? INT64_MIN : state->kept_step};
    if (ah_comm_allreduce_max_i64(ah_comm_world(), v, 2, &err) != AH_OK) ah_comm_abort(ah_cli_fail("train", &err));
    state->save_async = v[0] > 0, state->kept_step = v[1];
    if (ah_reconfig_move_join(&mv, joining, plan, &state->committed, state->why_not, &ms, &err) == AH_OK) {
        ph[AH_RECONFIG_PH_MOVE] = ms.seconds;
        state->moved = true, state->moved_bytes = ms.moved_bytes, state->kept_bytes = ms.kept_bytes;
        state->why_not[0] = 0;
        return mv;
    }
    if (!said && ah_comm_rank(ah_comm_world()) == 0)
        fprintf(stderr, "autohet train: warning: in-place join: the state is not moved to the joining ranks (%s): it is "
                "restored from %s\n", err.msg, state->save_async ? "the last committed step (this one was to be "
                "written behind)" : "the checkpoint just saved");
    state->moved = false, state->moved_bytes = state->kept_bytes = 0;
    snprintf(state->why_not, sizeof state->why_not, "%s", err.msg);
    return NULL;
}

/* The new world's every rank (the ranks that stayed and the ones admitted, joining): req's plan set up on it, its
 * state the moved one (mv, the same on every rank whether NULL: taken, then freed) or resumed from req->step;
 * -1 with *start the step restored, or the exit code of a failure (agreed as at the start). */
static int set_up_new(args_t *a, const ah_reconfig_req_t *req, int from, bool joining, double *ph,
                      ah_reconfig_state_t *state, ah_reconfig_moved_t *mv, ah_plan_t *plan, ah_dataset_t *data, ah_dataset_t *val, FILE **metrics,
                      ah_trainer_t *tr, bool *have_tr, ah_ckpt_session_t **ck, int64_t *start) {
    ah_comm_t *world = ah_comm_world();
    const double t = ah_now_s();
    const int rank = ah_comm_rank(world), ranks = ah_comm_size(world);
    bool have_plan = false;
    ah_error_t err;
    ah_plan_free(plan);
    memset(plan, 0, sizeof *plan);
    static char plan_path[PATH_MAX]; /* a->plan from now on */
    snprintf(plan_path, sizeof plan_path, "%s", req->plan);
    a->plan = plan_path;
    a->resume = true;      /* the state is the checkpoint just saved */
    a->init_from = NULL;
    ah_dataset_close(data);
    ah_dataset_close(val);
    ah_status_t s = ah_comm_agree(world, ah_cli_train_load_plan(a, ranks, plan, &have_plan, &err), &err);
    if (s == AH_OK) s = ah_comm_agree(world, ah_host_check(plan, rank, a->check_host, &err), &err);
    if (s == AH_OK) s = ah_comm_agree(world, ah_cli_train_open_data(a, plan, data, val, &err), &err);
    if (s == AH_OK && rank == 0 && a->metrics && !*metrics && !(*metrics = fopen(a->metrics, "a")))
        fprintf(stderr, "autohet train: warning: %s: cannot append to the metrics file: %s\n", a->metrics,
                strerror(errno));
    if (s == AH_OK && ah_reconfig_incoming(req) > 0) mv = move_to_joiners(joining, plan, mv, ph, state);
    a->moved_in = mv != NULL;
    if (s == AH_OK)
        s = ah_cli_train_set_up(a, plan, data, *metrics, tr, have_tr, ck, start, &ph[AH_RECONFIG_PH_LOAD], &err);
    a->moved_in = false;
    double moved_s = 0;
    if (s == AH_OK && mv) s = load_moved(req, mv, ph, &moved_s, state, *metrics, tr, *ck, start, &err);
    ah_reconfig_moved_free(mv);
    /* the step written behind, the state not moved: the restore read C, the last committed step, and the steps
     * C..S-1 are trained again (said); the same on every rank: the resume agrees on its step */
    const bool redo = s == AH_OK && state->save_async && state->kept_step >= 0 && *start == state->kept_step &&
                      *start < req->step;
    if (redo) state->redone = req->step - *start; /* S never written: the event says "save": "none", "redone" */
    if (redo && rank == 0)
        fprintf(stderr, "autohet train: warning: in-place change at step %lld: restored step %lld, %lld step%s trained "
                "again (step %lld was to be written behind, not written)\n", (long long)req->step, (long long)*start,
                (long long)state->redone, state->redone == 1 ? "" : "s", (long long)req->step);
    if (s == AH_OK && *start != req->step && !redo)
        s = ah_error_set(&err, AH_ERR_IO, "in-place reconfiguration at step %lld: the new world's ranks resumed from "
                         "step %lld, not the step just %s", (long long)req->step, (long long)*start, state->save_async ?
                         "moved (it was to be written behind; the moved state could not be loaded), nor the last "
                         "committed one: a relaunch resumes from the last committed step" : "saved (a piece of it was "
                         "held only by the leaving jobs, or is out of a new rank's reach: keep --replica-memory-gb or "
                         "--cloud on)");
    if (s != AH_OK) return rank == 0 ? ah_cli_train_fail(a, rank, &err) : ah_status_exit_code(s);
    if (rank == 0) ah_reconfig_retire(a->run_dir);
    ph[AH_RECONFIG_PH_INIT] = ah_now_s() - t - ph[AH_RECONFIG_PH_LOAD] - moved_s;
    ah_reconfig_say(a->run_dir, req, from, ph, *start, state, *metrics);
    if (rank == 0 && !a->quiet) ah_cli_train_say_start(a, plan, ranks);
    return -1;
}

/* The parked rank woken (park): msg the running world's (len bytes), whose "readmit" names this rank: merged into
 * the world (comm.h ah_comm_world_readmit), the request's new jobs admitted with the world, then set up as a joining rank (set_up_new: the staying ranks send it
 * its pieces). Its result (-1, *start the step). */
static int readmitted(args_t *a, const late_msg_t *msg, size_t len, double wall, double cpu, ah_plan_t *plan,
                      ah_dataset_t *data, ah_dataset_t *val, FILE **metrics, ah_trainer_t *tr, bool *have_tr,
                      ah_ckpt_session_t **ck, int64_t *start) {
    const ah_reconfig_req_t *req = &msg->req;
    ah_comm_parked_t who[AH_RECONFIG_LEAVE_MAX];
    int me = -1;
    for (int k = 0; len == sizeof *msg && k < req->n_readmit; k++) {
        who[k] = (ah_comm_parked_t){req->readmit[k].job, req->readmit[k].rank};
        if (who[k].job == ah_comm_world_job() && who[k].rank == ah_comm_job_rank()) me = k;
    }
    if (me < 0) { /* another build's world, or a request that does not name it: it cannot take part */
        fprintf(stderr, "autohet train: pid %d: woken with a request of %zu bytes that does not re-admit it\n",
                (int)getpid(), len);
        ah_comm_abort(ah_status_exit_code(AH_ERR_USAGE));
    }
    printf("autohet train: job %d (pid %d) parked %.3f s (CPU %.3f s): re-admitted at step %lld as rank %d under %s\n",
           ah_comm_world_job(), (int)getpid(), wall, cpu, (long long)req->step, req->readmit[me].to, req->plan);
    fflush(stdout);
    ah_error_t err;
    const int to = req->readmit[me].to;
    if (ah_comm_world_readmit(who, req->n_readmit, me, to, msg, sizeof *msg, &err) != AH_OK ||
        (req->join > 0 && ah_comm_world_admit(req->join, req->join_first, to, req->join_admit_s, msg, sizeof *msg, &err) != AH_OK))
        ah_comm_abort(ah_cli_fail("train", &err)); /* the request's new jobs admitted with it (reconfigure) */
    double ph[AH_RECONFIG_N_PH] = {0};
    ah_reconfig_state_t state = {.committed = false};
    return set_up_new(a, req, msg->from, true, ph, &state, NULL, plan, data, val, metrics, tr, have_tr, ck, start);
}

/* The staying ranks, after the split: req's parked ranks woken and merged into the world ("readmit"; comm.h
 * ah_comm_world_readmit), each sent the request (m); key this rank's new rank. */
static void readmit_parked(const ah_reconfig_req_t *req, const late_msg_t *m, int key) {
    ah_comm_parked_t who[AH_RECONFIG_LEAVE_MAX];
    for (int k = 0; k < req->n_readmit; k++) who[k] = (ah_comm_parked_t){req->readmit[k].job, req->readmit[k].rank};
    ah_error_t err;
    if (ah_comm_world_readmit(who, req->n_readmit, -1, key, m, sizeof *m, &err) != AH_OK)
        ah_comm_abort(ah_cli_fail("train", &err));
}

/* A rank the new plan does not use while its job goes on (runtime/reconfig.h "ranks" -1, docs/elastic.md
 * "Parked ranks"), out of the world, its trainer and session freed: its data closed, then asleep until its
 * job ends (comm.h ah_comm_park), said with the wait's CPU seconds: 0 (it then only finalizes); or until a later
 * request re-admits it ("readmit"): it then enters the new world as a joining rank does (set_up_new) and returns
 * its result (-1, *start the step). */
static int park(args_t *a, const ah_reconfig_req_t *req, ah_plan_t *plan, ah_dataset_t *data, ah_dataset_t *val,
                FILE **metrics, ah_trainer_t *tr, bool *have_tr, ah_ckpt_session_t **ck, int64_t *start) {
    ah_dataset_close(data);
    ah_dataset_close(val);
    printf("autohet train: job %d (pid %d) parks at step %lld: the other ranks go on in place under %s; it waits for "
           "its job's end\n", ah_comm_world_job(), (int)getpid(), (long long)req->step, req->plan);
    fflush(stdout);
    static late_msg_t msg; /* the request outlives set_up_new */
    double cpu = 0, wall = 0;
    size_t len = 0;
    bool woken = false;
    ah_error_t err;
    if (ah_comm_park(&cpu, &wall, &msg, sizeof msg, &len, &woken, &err) != AH_OK) ah_comm_abort(ah_cli_fail("train", &err));
    if (!woken) {
        printf("autohet train: pid %d parked %.3f s (CPU %.3f s): its job ends\n", (int)getpid(), wall, cpu);
        fflush(stdout);
        return 0;
    }
    return readmitted(a, &msg, len, wall, cpu, plan, data, val, metrics, tr, have_tr, ck, start);
}

/* Collective over the old world: the change's save of step S before the move, as at a notice (*ph's save phase;
 * its events written); a failure ends the job. */
static void save_now(args_t *a, const ah_reconfig_req_t *req, ah_trainer_t *tr, ah_ckpt_session_t *ck, bool leaving,
                     FILE *metrics, double *ph) {
    const double t = ah_now_s();
    json_t *events = NULL;
    ah_error_t err;
    if (ah_ckpt_session_save_leaving(ck, req->step, leaving, &events, &err) != AH_OK)
        ah_comm_abort(ah_cli_train_fail(a, tr->rank, &err));
    ah_metrics_write_events(metrics, events);
    ph[AH_RECONFIG_PH_SAVE] += ah_now_s() - t;
}

/* Collective over the old world, its trainer still up: the save of step S and the move (move_state). The save
 * is taken off the path when the session allows it (ckpt_io.h ah_ckpt_session_change_begin: the last committed
 * step survives the change) and the state moves: the new world then writes S behind (load_moved); else it is
 * made before the move, as before, or after a move that could not be made (the restore reads it), rank 0
 * saying why on stderr. The same on every rank; *state the move's and the save's outcome. */
static ah_reconfig_moved_t *save_and_move(args_t *a, const ah_reconfig_req_t *req, ah_trainer_t *tr,
                                          ah_ckpt_session_t *ck, bool leaving, FILE *metrics, double *ph,
                                          ah_reconfig_state_t *state) {
    const double t = ah_now_s();
    json_t *events = NULL;
    ah_error_t err;
    char why[sizeof state->why_sync] = "";
    bool defer = false;
    if (ah_ckpt_session_change_begin(ck, req->step, leaving, &events, &defer, why, sizeof why, &err) != AH_OK)
        ah_comm_abort(ah_cli_train_fail(a, tr->rank, &err));
    ah_metrics_write_events(metrics, events);
    if (ck) ah_test_hook("reconfig-save", req->step, tr->plan->cluster.nodes[ah_role_device(tr->plan, &tr->role).node].name);
    ph[AH_RECONFIG_PH_SAVE] = ah_now_s() - t;
    if (defer && ah_reconfig_incoming(req) > 0 && ah_ckpt_session_last_saved(ck) < 0) {
        /* a joiner's fallback restores the last committed step C (set_up_new): with none, the step is saved first */
        defer = false;
        snprintf(why, sizeof why, "a join%s with no step committed yet: a joining rank that cannot take the moved "
                 "state restores the step", req->join ? "" : " (parked ranks re-admitted)");
    }
    if (!defer) save_now(a, req, tr, ck, leaving, metrics, ph);
    state->committed = ah_ckpt_session_last_saved(ck) == req->step;
    ah_reconfig_moved_t *mv = move_state(a, req, tr, ph, state);
    if (defer && !state->moved) { /* the restore that follows reads step S: saved now, the old stage still up */
        defer = false;
        snprintf(why, sizeof why, "the state is not moved: the restore reads the step");
        save_now(a, req, tr, ck, leaving, metrics, ph);
        state->committed = ah_ckpt_session_last_saved(ck) == req->step;
    }
    state->save_async = defer;
    state->kept_step = ah_ckpt_session_last_saved(ck);
    snprintf(state->why_sync, sizeof state->why_sync, "%s", why);
    if (!defer && why[0] && tr->rank == 0 && ck)
        fprintf(stderr, "autohet train: in-place change at step %lld: the step is saved before the move, not written "
                "behind (%s)\n", (long long)req->step, why);
    return mv;
}

/* The boundary req->step of an in-place reconfiguration (runtime/reconfig.h), on every rank of the old
 * world: the save, the old runtime freed, the world split, the new jobs admitted ("join"). A leaving rank
 * returns 0 (it then only finalizes), a parking one parks (park); a staying one sets up req's plan on the
 * new world (set_up_new). */
static int reconfigure(args_t *a, const ah_reconfig_req_t *req, ah_plan_t *plan, ah_dataset_t *data, ah_dataset_t *val,
                       FILE **metrics, ah_trainer_t *tr, bool *have_tr, ah_ckpt_session_t **ck, int64_t *start) {
    ah_comm_t *world = ah_comm_world();
    const int from = ah_comm_size(world), job = ah_comm_world_job();
    const bool leaving = ah_reconfig_leaving(req), parking = ah_reconfig_parking(req);
    double ph[AH_RECONFIG_N_PH] = {0}, t;
    ah_error_t err;
    ah_reconfig_state_t state = {0};
    ah_reconfig_moved_t *mv = save_and_move(a, req, tr, *ck, leaving, *metrics, ph, &state);
    t = ah_now_s();
    if (!leaving && !parking) ah_ckpt_session_keep_snapshot(*ck); /* the next session's first save: no new one */
    if (ah_ckpt_session_close(*ck, &err) != AH_OK)
        fprintf(stderr, "autohet train: warning: rank %d: cloud upload failed: %s\n", tr->rank, err.msg);
    *ck = NULL;
    ah_trainer_free(tr);
    *have_tr = false;
    ph[AH_RECONFIG_PH_TEARDOWN] = ah_now_s() - t;
    t = ah_now_s();
    const int new_rank = ah_reconfig_new_rank(req);
    if (*metrics && (leaving || parking || new_rank > 0)) { /* rank 0 of the new world appends to it from now on */
        fclose(*metrics);
        *metrics = NULL;
    }
    if (ah_comm_world_shrink(!leaving && !parking, new_rank, &err) != AH_OK) ah_comm_abort(ah_cli_fail("train", &err));
    if (!leaving && !parking && ah_reconfig_incoming(req) > 0) { /* sent the request: */
        static late_msg_t m; /* (its "ranks" is 32 KB) */
        m = (late_msg_t){.req = *req, .from = from};
        const int key = new_rank >= 0 ? new_rank : ah_comm_rank(world);
        if (req->n_readmit > 0) readmit_parked(req, &m, key); /* the parked ranks back, first: they take part in */
        if (req->join > 0 && ah_comm_world_admit(req->join, req->join_first, key, req->join_admit_s, &m, sizeof m, &err) != AH_OK)
            ah_comm_abort(ah_cli_fail("train", &err)); /* the admission of the new jobs, by their turns (comm/join.c) */
    }
    ph[AH_RECONFIG_PH_SPLIT] = ah_now_s() - t;
    if (leaving) {
        ah_test_hook("reconfig-split", req->step, NULL);
        printf("autohet train: job %d (pid %d) leaves at step %lld: %s, the other jobs go on in place under %s\n",
               job, (int)getpid(), (long long)req->step, state.save_async ? "its state handed over (the step is "
               "written behind by the others)" : "its checkpoint is saved", req->plan);
        fflush(stdout);
        return 0;
    }
    if (parking) return park(a, req, plan, data, val, metrics, tr, have_tr, ck, start);
    return set_up_new(a, req, from, false, ph, &state, mv, plan, data, val, metrics, tr, have_tr, ck, start);
}

int ah_cli_train_in_place(args_t *a, ah_plan_t *plan, ah_dataset_t *data, ah_dataset_t *val, FILE **metrics,
                          ah_trainer_t *tr, bool *have_tr, ah_ckpt_session_t **ck, int64_t start) {
    ah_reconfig_req_t req;
    for (int64_t after = start;; after = start) { /* a change's step (a parked rank's: the step re-admitted at) */
        bool due = false;
        int rc = ah_cli_train_run_steps(tr, a, val, *metrics, *ck, start, after, &req, &due);
        if (!due) return rc;
        if ((rc = reconfigure(a, &req, plan, data, val, metrics, tr, have_tr, ck, &start)) >= 0) return rc;
    }
}

int ah_cli_train_late(args_t *a, ah_plan_t *plan, ah_dataset_t *data, ah_dataset_t *val, FILE **metrics,
                      ah_trainer_t *tr, bool *have_tr, ah_ckpt_session_t **ck) {
    size_t len = 0;
    const late_msg_t *m = ah_comm_world_late(&len);
    static late_msg_t msg; /* the request outlives the payload's reads below */
    if (len != sizeof msg) { /* another build's world: its request cannot be read */
        fprintf(stderr, "autohet train: rank %d: the running world sent a request of %zu bytes, not %zu (another "
                "autohet's?)\n", ah_comm_rank(ah_comm_world()), len, sizeof msg);
        ah_comm_abort(ah_status_exit_code(AH_ERR_USAGE));
    }
    msg = *m;
    printf("autohet train: job %d (pid %d) joins the running world at step %lld under %s\n", ah_comm_world_job(),
               (int)getpid(), (long long)msg.req.step, msg.req.plan);
    fflush(stdout);
    double ph[AH_RECONFIG_N_PH] = {0};
    int64_t start = 0;
    ah_reconfig_state_t state = {.committed = false};
    const int rc = set_up_new(a, &msg.req, msg.from, true, ph, &state, NULL, plan, data, val, metrics, tr, have_tr, ck,
                              &start);
    return rc >= 0 ? rc : ah_cli_train_in_place(a, plan, data, val, metrics, tr, have_tr, ck, start);
}
