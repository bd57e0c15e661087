/* The in-place reconfiguration's request (reconfig.h). */
#include "runtime/reconfig.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt/test_hook.h"
#include "comm/comm.h"
#include "runtime/preempt.h"
#include "runtime/protocol.h"
#include "runtime/train_loop.h"

/* Rank 0: the version of the request file last read (inode, size, modification time) and whether that
 * version was refused (so it is said once, not at every step). */
static char g_stamp[96], g_refused[96];
/* Rank 0: the refusal said since the last ah_reconfig_refusal, as its metrics event (NULL: none). */
static json_t *g_refusal;

/* Rank 0: the request version read (g_stamp) refused, for `step` (-1: it could not be read), why (said once). */
static void refuse(int64_t step, const char *why) {
    snprintf(g_refused, sizeof g_refused, "%s", g_stamp);
    json_decref(g_refusal);
    g_refusal = json_pack("{s:s, s:I, s:s}", AH_PROTO_EVENT, AH_PROTO_EV_RECONFIGURE_REFUSED, AH_PROTO_STEP,
                          (json_int_t)step, "why", why);
}

json_t *ah_reconfig_refusal(void) {
    json_t *ev = g_refusal;
    g_refusal = NULL;
    return ev;
}

/* The optional "ranks" (NULL: none): integers >= -1, at most AH_RECONFIG_RANKS_MAX. */
static ah_status_t parse_ranks(const json_t *ranks, ah_reconfig_req_t *req, ah_error_t *err) {
    if (!ranks) return AH_OK;
    if (!json_is_array(ranks) || !json_array_size(ranks) || json_array_size(ranks) > AH_RECONFIG_RANKS_MAX)
        return ah_error_set(err, AH_ERR_INVALID, "\"ranks\" must be an array of 1 to %d ranks (one a rank of the "
                            "running world)", AH_RECONFIG_RANKS_MAX);
    for (size_t i = 0; i < json_array_size(ranks); i++) {
        const json_t *r = json_array_get(ranks, i);
        if (!json_is_integer(r) || json_integer_value(r) < -1 || json_integer_value(r) >= AH_RECONFIG_RANKS_MAX)
            return ah_error_set(err, AH_ERR_INVALID, "\"ranks\"[%zu] is not a rank of the new world or -1 (leaves)", i);
        req->ranks[req->n_ranks++] = (int)json_integer_value(r);
    }
    return AH_OK;
}

/* The optional "readmit" (NULL: none): objects {"job", "rank", "to"} of integers >= 0. */
static ah_status_t parse_readmit(const json_t *list, ah_reconfig_req_t *req, ah_error_t *err) {
    if (!list) return AH_OK;
    if (!json_is_array(list) || !json_array_size(list) || json_array_size(list) > AH_RECONFIG_LEAVE_MAX)
        return ah_error_set(err, AH_ERR_INVALID, "\"readmit\" must be an array of 1 to %d parked ranks",
                            AH_RECONFIG_LEAVE_MAX);
    for (size_t i = 0; i < json_array_size(list); i++) {
        const json_t *o = json_array_get(list, i), *j = json_object_get(o, "job"), *l = json_object_get(o, "rank"),
                     *t = json_object_get(o, "to");
        if (!json_is_object(o) || json_object_size(o) != 3 || !json_is_integer(j) || !json_is_integer(l) ||
            !json_is_integer(t) || json_integer_value(j) < 0 || json_integer_value(j) > INT_MAX ||
            json_integer_value(l) < 0 || json_integer_value(l) > INT_MAX || json_integer_value(t) < 0 ||
            json_integer_value(t) >= AH_RECONFIG_RANKS_MAX)
            return ah_error_set(err, AH_ERR_INVALID, "\"readmit\"[%zu] must be {\"job\": J, \"rank\": L, \"to\": R} "
                                "(a parked rank: its job, its rank in the job, its rank in the new world)", i);
        req->readmit[req->n_readmit].job = (int)json_integer_value(j);
        req->readmit[req->n_readmit].rank = (int)json_integer_value(l);
        req->readmit[req->n_readmit++].to = (int)json_integer_value(t);
    }
    if (!req->n_ranks)
        return ah_error_set(err, AH_ERR_INVALID, "\"readmit\" needs \"ranks\" (the staying ranks' new ranks)");
    return AH_OK;
}

ah_status_t ah_reconfig_parse(const char *text, ah_reconfig_req_t *req, ah_error_t *err) {
    json_error_t je;
    json_t *o = json_loads(text, 0, &je);
    memset(req, 0, sizeof *req);
    if (!o || !json_is_object(o)) {
        json_decref(o);
        return ah_error_set(err, AH_ERR_INVALID, "not a JSON object (%s)", o ? "another JSON value" : je.text);
    }
    const char *key;
    json_t *v;
    ah_status_t st = AH_OK;
    json_object_foreach(o, key, v) {
        if (strcmp(key, "step") && strcmp(key, "leave") && strcmp(key, "plan") && strcmp(key, "ranks") &&
            strcmp(key, "join") && strcmp(key, "join_first") && strcmp(key, "join_admit_s") &&
            strcmp(key, "readmit")) {
            st = ah_error_set(err, AH_ERR_INVALID, "unknown key \"%s\" (expected step, leave, plan, ranks, join, "
                              "join_first, join_admit_s, readmit)", key);
            break;
        }
    }
    const json_t *step = json_object_get(o, "step"), *leave = json_object_get(o, "leave"), *plan = json_object_get(o, "plan");
    if (st == AH_OK && (!json_is_integer(step) || json_integer_value(step) < 1))
        st = ah_error_set(err, AH_ERR_INVALID, "\"step\" must be an integer >= 1 (the updates done at the change)");
    else if (st == AH_OK && (!json_is_array(leave) || json_array_size(leave) > AH_RECONFIG_LEAVE_MAX))
        st = ah_error_set(err, AH_ERR_INVALID, "\"leave\" must be an array of at most %d job numbers",
                          AH_RECONFIG_LEAVE_MAX);
    else if (st == AH_OK && (!json_is_string(plan) || !json_string_length(plan) ||
                             json_string_length(plan) >= sizeof req->plan))
        st = ah_error_set(err, AH_ERR_INVALID, "\"plan\" must be a plan file's path");
    for (size_t i = 0; st == AH_OK && i < json_array_size(leave); i++) {
        const json_t *j = json_array_get(leave, i);
        if (!json_is_integer(j) || json_integer_value(j) < 0 || json_integer_value(j) > INT_MAX)
            st = ah_error_set(err, AH_ERR_INVALID, "\"leave\"[%zu] is not a job number (AH_WORLD_JOIN's JOB)", i);
        else
            req->leave[req->n_leave++] = (int)json_integer_value(j);
    }
    if (st == AH_OK) st = parse_ranks(json_object_get(o, "ranks"), req, err);
    const json_t *join = json_object_get(o, "join");
    if (st == AH_OK && join && (!json_is_integer(join) || json_integer_value(join) < 0 ||
                                json_integer_value(join) > AH_RECONFIG_LEAVE_MAX))
        st = ah_error_set(err, AH_ERR_INVALID, "\"join\" must be the number of new jobs, 0 to %d", AH_RECONFIG_LEAVE_MAX);
    if (st == AH_OK && join) req->join = (int)json_integer_value(join);
    const json_t *first = json_object_get(o, "join_first");
    if (st == AH_OK && first && (!json_is_integer(first) || json_integer_value(first) < 0 ||
                                 json_integer_value(first) > 1000000))
        st = ah_error_set(err, AH_ERR_INVALID, "\"join_first\" must be a job number, 0 to 1000000");
    if (st == AH_OK && first) req->join_first = (int)json_integer_value(first);
    const json_t *admit = json_object_get(o, "join_admit_s");
    if (st == AH_OK && admit && (!json_is_number(admit) || !(json_number_value(admit) > 0) ||
                                 json_number_value(admit) > 86400))
        st = ah_error_set(err, AH_ERR_INVALID, "\"join_admit_s\" must be the admission's wait in seconds, > 0 and at "
                          "most 86400");
    if (st == AH_OK && admit) req->join_admit_s = json_number_value(admit);
    if (st == AH_OK) st = parse_readmit(json_object_get(o, "readmit"), req, err);
    if (st == AH_OK) {
        req->step = json_integer_value(step);
        snprintf(req->plan, sizeof req->plan, "%s", json_string_value(plan));
    }
    json_decref(o);
    return st;
}

/* Rank 0: the request to take after `done` updates (its step), or -1: none, an old or a later one, or one
 * that cannot be read (said once). */
static int64_t read_request(const char *run_dir, int64_t done, int64_t after, ah_reconfig_req_t *req) {
    char path[PATH_MAX];
    struct stat sb;
    if (snprintf(path, sizeof path, "%s/%s", run_dir, AH_PROTO_RECONFIG_FILE) >= (int)sizeof path || stat(path, &sb))
        return -1;
    snprintf(g_stamp, sizeof g_stamp, "%llu:%lld:%lld.%09ld", (unsigned long long)sb.st_ino, (long long)sb.st_size,
             (long long)sb.st_mtim.tv_sec, sb.st_mtim.tv_nsec);
    if (!strcmp(g_stamp, g_refused)) return -1;
    ah_error_t e = {0};
    char *text = NULL;
    FILE *f = fopen(path, "r");
    ah_status_t st = f ? AH_OK : ah_error_set(&e, AH_ERR_IO, "cannot open it");
    if (st == AH_OK && (sb.st_size > 65536 || !(text = calloc(1, (size_t)sb.st_size + 1)) ||
                        fread(text, 1, (size_t)sb.st_size, f) != (size_t)sb.st_size))
        st = ah_error_set(&e, AH_ERR_IO, "cannot read it (%lld bytes)", (long long)sb.st_size);
    if (f) fclose(f);
    if (st == AH_OK) st = ah_reconfig_parse(text, req, &e);
    free(text);
    if (st != AH_OK) {
        fprintf(stderr, "autohet train: warning: %s: %s; the reconfiguration is not taken, training goes on\n", path,
                e.msg);
        refuse(-1, e.msg);
        return -1;
    }
    return req->step > after && req->step <= done ? req->step : -1;
}

/* Whether job j is among req's leaving jobs. */
static bool job_leaves(const ah_reconfig_req_t *req, int64_t j) {
    for (int k = 0; k < req->n_leave; k++)
        if (req->leave[k] == j) return true;
    return false;
}

bool ah_reconfig_bad_ranks(const ah_reconfig_req_t *req, const int64_t *jobs, int n, int stay, char *why, size_t cap) {
    if (!req->n_ranks) return false;
    if (req->n_ranks != n)
        return snprintf(why, cap, "\"ranks\" has %d entries, the world %d ranks", req->n_ranks, n), true;
    bool *seen = calloc(AH_RECONFIG_RANKS_MAX, sizeof *seen), bad = !seen; /* "join": new ranks up to the max */
    if (bad) snprintf(why, cap, "no host memory to check \"ranks\"");
    for (int r = 0; !bad && r < n; r++) {
        const int to = req->ranks[r]; /* -1 in a staying job: the rank parks (ah_reconfig_parking) */
        if ((bad = job_leaves(req, jobs[r]) && to >= 0))
            snprintf(why, cap, "\"ranks\"[%d] is %d but rank %d's job %lld leaves (-1)", r, to, r, (long long)jobs[r]);
        else if (to >= 0 && (bad = (!req->join && to >= stay + req->n_readmit) || seen[to]))
            snprintf(why, cap, req->join ? "\"ranks\"[%d] is %d: the staying ranks' are not distinct"
                     : "\"ranks\"[%d] is %d: the staying ranks' are not a permutation of 0..%d", r, to,
                     stay + req->n_readmit - 1);
        else if (to >= 0)
            seen[to] = true;
    }
    for (int k = 0; !bad && k < req->n_readmit; k++) { /* with the staying ranks', a permutation of 0..stay+n-1 */
        const int to = req->readmit[k].to;
        if ((bad = (!req->join && to >= stay + req->n_readmit) || seen[to]))
            snprintf(why, cap, req->join ? "\"readmit\"[%d]'s \"to\" is %d: not distinct from the staying ranks'"
                     : "\"readmit\"[%d]'s \"to\" is %d: with the staying ranks' not a permutation of 0..%d", k, to,
                     stay + req->n_readmit - 1);
        else
            seen[to] = true;
    }
    free(seen);
    return bad;
}

bool ah_reconfig_bad_readmit(const ah_reconfig_req_t *req, const int64_t *jobs, const int64_t *at, int n, char *why,
                             size_t cap) {
    for (int k = 0; k < req->n_readmit; k++) {
        const int job = req->readmit[k].job, rank = req->readmit[k].rank;
        int64_t size = -1;
        bool in = false, twice = false, keeps = false;
        for (int r = 0; r < n; r++)
            if (jobs[r] == job) {
                size = at[r] >> 20, in = in || (at[r] & ((1 << 20) - 1)) == rank;
                keeps = keeps || req->n_ranks != n || req->ranks[r] >= 0; /* a rank of the new world wakes it */
            }
        for (int i = 0; i < k; i++) twice = twice || (req->readmit[i].job == job && req->readmit[i].rank == rank);
        const char *no = size < 0 ? "its job is not in the world" : job_leaves(req, job) ? "its job leaves"
            : rank >= size ? "its job has fewer ranks" : in ? "it is in the world, not parked" : twice ? "named twice"
            : !keeps ? "its job keeps no rank in the world to wake it (its ranks there park)" : NULL;
        if (no) return snprintf(why, cap, "\"readmit\"[%d] (job %d's rank %d): %s", k, job, rank, no), true;
    }
    return false;
}

/* Every rank: whether req names only jobs of the world, leaves one and its "ranks" fits (*stay: the ranks
 * staying); rank 0 warns when not. */
static ah_status_t check_jobs(const ah_reconfig_req_t *req, bool *ok, int *stay, ah_error_t *err) {
    ah_comm_t *w = ah_comm_world();
    const int n = ah_comm_size(w);
    int64_t *jobs = malloc((size_t)n * sizeof *jobs);
    if (!jobs) return ah_error_set(err, AH_ERR_OOM, "no host memory for %d job numbers", n);
    ah_status_t st = ah_comm_allgather_i64(w, ah_comm_world_job(), jobs, err);
    int64_t *at = req->n_readmit && st == AH_OK ? malloc((size_t)n * sizeof *at) : NULL; /* the same on every rank */
    if (req->n_readmit && st == AH_OK)
        st = at ? ah_comm_allgather_i64(w, (int64_t)ah_comm_job_size() << 20 | ah_comm_job_rank(), at, err)
                : ah_error_set(err, AH_ERR_OOM, "no host memory for %d ranks", n);
    int missing = -1, stays = 0;
    for (int k = 0; st == AH_OK && k < req->n_leave; k++) {
        bool there = false;
        for (int r = 0; r < n; r++) there = there || jobs[r] == req->leave[k];
        if (!there && missing < 0) missing = req->leave[k];
    }
    for (int r = 0; st == AH_OK && r < n; r++) /* the ranks that go on: not leaving, not parking */
        stays += !job_leaves(req, jobs[r]) && (req->n_ranks != n || req->ranks[r] >= 0);
    char why[256] = "";
    if (st == AH_OK) {
        if (ah_comm_world_job() < 0 && (req->n_leave > 0 || req->join > 0))
            snprintf(why, sizeof why, "jobs can leave or join only a world of joined jobs (AH_WORLD_JOIN)");
        else if (missing >= 0)
            snprintf(why, sizeof why, "job %d is not in the world", missing);
        else if (!stays)
            snprintf(why, sizeof why, "no job would stay");
        else if (!ah_reconfig_bad_ranks(req, jobs, n, stays, why, sizeof why) && req->n_readmit)
            ah_reconfig_bad_readmit(req, jobs, at, n, why, sizeof why);
    }
    free(jobs);
    free(at);
    *stay = stays;
    *ok = st == AH_OK && !why[0];
    if (st == AH_OK && !*ok && ah_comm_rank(w) == 0) {
        fprintf(stderr, "autohet train: warning: %s's request at step %lld is not taken: %s; training goes on\n",
                AH_PROTO_RECONFIG_FILE, (long long)req->step, why);
        refuse(req->step, why);
    }
    return st;
}

ah_status_t ah_reconfig_poll(const char *run_dir, int64_t done, int64_t after, ah_reconfig_check_fn check, void *ctx,
                             ah_reconfig_req_t *req, bool *due, ah_error_t *err) {
    ah_comm_t *w = ah_comm_world();
    /* one max-reduce: rank 0's request step (-1 elsewhere) and whether a rank got a notice since the
     * step boundary's preemption poll (the agent's fallback SIGTERM: the stop goes first, the request
     * is not taken) */
    int64_t v[2] = {ah_comm_rank(w) == 0 ? read_request(run_dir, done, after, req) : -1, 0};
    if (v[0] >= 0 && req->join > 0) ah_test_hook("reconfig-join", req->step, NULL); /* test-only: a join's request */
    v[1] = ah_preempt_noticed();
    int stay = 0;
    *due = false;
    ah_status_t st = ah_comm_allreduce_max_i64(w, v, 2, err);
    if (st == AH_OK && v[0] >= 0 && v[1] && ah_comm_rank(w) == 0)
        fprintf(stderr, "autohet train: warning: %s's request at step %lld is not taken: a rank got a notice; the "
                "notice's stop goes first\n", AH_PROTO_RECONFIG_FILE, (long long)req->step);
    if (st != AH_OK || v[0] < 0 || v[1]) return st;
    if ((st = ah_comm_bcast(w, req, sizeof *req, 0, err)) != AH_OK || (st = check_jobs(req, due, &stay, err)) != AH_OK ||
        !*due || !check)
        return st;
    /* the caller's check on rank 0, before anything is saved or torn down (a plan that cannot be loaded
     * found after the old world is gone would end the run) */
    int64_t ok = 1;
    char why[512] = "";
    if (ah_comm_rank(w) == 0 && req->join > 0 && ah_test_hook_fails("reconfig-join", req->step, NULL))
        snprintf(why, sizeof why, "AH_TEST_HOOK phase reconfig-join action=fail (test-only)");
    if (ah_comm_rank(w) == 0 && (why[0] || !check(req, stay, ctx, why, sizeof why))) {
        ok = 0;
        fprintf(stderr, "autohet train: warning: %s's request at step %lld is not taken: %s; training goes on\n",
                AH_PROTO_RECONFIG_FILE, (long long)req->step, why);
        refuse(req->step, why);
    }
    if ((st = ah_comm_bcast(w, &ok, sizeof ok, 0, err)) == AH_OK) *due = ok != 0;
    return st;
}

void ah_reconfig_retire(const char *run_dir) {
    char from[PATH_MAX], to[PATH_MAX];
    if (snprintf(from, sizeof from, "%s/%s", run_dir, AH_PROTO_RECONFIG_FILE) >= (int)sizeof from ||
        snprintf(to, sizeof to, "%s/reconfigure.done.json", run_dir) >= (int)sizeof to)
        return;
    if (rename(from, to))
        fprintf(stderr, "autohet train: warning: cannot rename %s to %s (%s): a later start with this run "
                "directory may take the request again\n", from, to, strerror(errno));
}

bool ah_reconfig_leaving(const ah_reconfig_req_t *req) {
    const int job = ah_comm_world_job();
    return job >= 0 && job_leaves(req, job);
}

bool ah_reconfig_parking(const ah_reconfig_req_t *req) {
    return req->n_ranks > 0 && !ah_reconfig_leaving(req) && ah_reconfig_new_rank(req) < 0;
}

int ah_reconfig_new_rank(const ah_reconfig_req_t *req) {
    const int r = ah_comm_rank(ah_comm_world());
    return r >= 0 && r < req->n_ranks ? req->ranks[r] : -1;
}

void ah_reconfig_say(const char *run_dir, const ah_reconfig_req_t *req, int from, const double *ph, int64_t start,
                     const ah_reconfig_state_t *state, FILE *metrics) {
    ah_comm_t *world = ah_comm_world();
    const int n = ah_comm_size(world);
    int64_t us[AH_RECONFIG_N_PH], *pids = calloc((size_t)n, sizeof *pids);
    ah_error_t err;
    if (!pids) { /* the others are about to enter the collectives below */
        fprintf(stderr, "autohet train: rank %d: no host memory for %d pids\n", ah_comm_rank(world), n);
        ah_comm_abort(ah_status_exit_code(AH_ERR_OOM));
    }
    for (int k = 0; k < AH_RECONFIG_N_PH; k++) us[k] = (int64_t)(ph[k] * 1e6);
    if (ah_comm_allreduce_max_i64(world, us, AH_RECONFIG_N_PH, &err) != AH_OK ||
        ah_comm_allgather_i64(world, (int64_t)getpid(), pids, &err) != AH_OK || ah_comm_rank(world) != 0) {
        free(pids);
        return;
    }
    double s[AH_RECONFIG_N_PH];
    for (int k = 0; k < AH_RECONFIG_N_PH; k++) s[k] = (double)us[k] * 1e-6;
    json_t *pl = json_array(), *lv = json_array();
    for (int r = 0; r < n; r++) json_array_append_new(pl, json_integer(pids[r]));
    for (int k = 0; k < req->n_leave; k++) json_array_append_new(lv, json_integer(req->leave[k]));
    json_t *ev = json_pack("{s:s, s:I, s:I, s:s, s:o, s:i, s:i, s:i, s:o, s:{s:f, s:f, s:f, s:f, s:f, s:f}, s:s, s:I, "
        "s:I}", AH_PROTO_EVENT, AH_PROTO_EV_RECONFIGURE, AH_PROTO_STEP, (json_int_t)req->step, "resumed_step",
        (json_int_t)start, "plan", req->plan, "leave", lv, "join", req->join, "ranks_from", from, "ranks_to", n, "pids",
        pl, "seconds", "save", s[AH_RECONFIG_PH_SAVE], "split", s[AH_RECONFIG_PH_SPLIT], "teardown",
        s[AH_RECONFIG_PH_TEARDOWN], "init", s[AH_RECONFIG_PH_INIT], "load", s[AH_RECONFIG_PH_LOAD], "move",
        s[AH_RECONFIG_PH_MOVE], "state", state->moved ? "moved" : "restored", "moved_bytes",
        (json_int_t)state->moved_bytes, "kept_bytes", (json_int_t)state->kept_bytes);
    if (ev && state->why_not[0]) json_object_set_new(ev, "not_moved", json_string(state->why_not));
    /* "none": S was to be written behind, the move failed: C restored in place, "redone" steps trained again */
    if (ev) json_object_set_new(ev, "save", json_string(state->redone ? "none" : state->save_async ? "async" : "sync"));
    if (ev && state->redone) json_object_set_new(ev, "redone", json_integer(state->redone));
    /* whether step S is committed at the change (a "sync" save that failed, or a run without a checkpoint
     * root, committed nothing; "async" commits it behind the next step) */
    if (ev) json_object_set_new(ev, "committed", json_boolean(state->committed && !state->save_async));
    if (ev && req->n_readmit) json_object_set_new(ev, "readmit", json_integer(req->n_readmit));
    if (ev && state->why_sync[0]) json_object_set_new(ev, "save_sync_why", json_string(state->why_sync));
    ah_metrics_write_events(metrics, ev);
    char save[96] = "";
    if (state->redone)
        snprintf(save, sizeof save, " (the step not written: restored step %lld, %lld step%s trained again)",
                 (long long)start, (long long)state->redone, state->redone == 1 ? "" : "s");
    else if (state->save_async)
        snprintf(save, sizeof save, " (the step written behind)");
    printf("autohet train: reconfigured in place at step %lld: %d -> %d ranks under %s, resumed from step %lld "
           "(save %.3f s%s, teardown %.3f s, split %.3f s, init %.3f s, load %.3f s, move %.3f s: %s",
           (long long)req->step, from, n, req->plan, (long long)start, s[AH_RECONFIG_PH_SAVE], save,
           s[AH_RECONFIG_PH_TEARDOWN], s[AH_RECONFIG_PH_SPLIT], s[AH_RECONFIG_PH_INIT], s[AH_RECONFIG_PH_LOAD],
           s[AH_RECONFIG_PH_MOVE], state->moved ? "the state moved rank to rank, " : "the state restored from the "
           "checkpoint");
    if (state->moved) printf("%lld bytes sent, %lld kept", (long long)state->moved_bytes, (long long)state->kept_bytes);
    printf("); the processes kept:");
    for (int r = 0; r < n; r++) printf(" %lld", (long long)pids[r]);
    printf("\n");
    fflush(stdout);
    for (int r = n; run_dir && r < from; r++) { /* the old world's rank files past the new one's */
        char path[PATH_MAX], name[32];
        snprintf(name, sizeof name, AH_PROTO_RANK_FILE_FMT, r);
        if (snprintf(path, sizeof path, "%s/%s", run_dir, name) < (int)sizeof path) unlink(path);
    }
    free(pids);
}
