/* autohet train's in-place reconfiguration (runtime/reconfig.h; docs/elastic.md "In-place reconfiguration at a
 * notice"): at a step boundary some jobs leave, new jobs may be admitted ("join"), and the ranks of the new world
 * set up the request's plan in place and resume from the step just saved. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ckpt/test_hook.h"
#include "cli/cli.h"
#include "cli/cli_train.h"
#include "comm/comm.h"
#include "core/timing.h"
#include "runtime/host_check.h"
#include "runtime/train_loop.h"

/* What the running world sends the jobs it admits (comm.h ah_comm_world_admit's payload). */
typedef struct {
    ah_reconfig_req_t req;
    int from; /* the running world's ranks before the change */
} late_msg_t;

bool ah_cli_train_reconfig_check(const ah_reconfig_req_t *req, int stay, void *ctx, char *why, size_t why_size) {
    args_t b = *(const args_t *)ctx;
    b.plan = req->plan, b.resume = true, b.init_from = NULL;
    ah_plan_t p = {0};
    bool have = false;
    ah_error_t e = {0};
    ah_status_t s = b.local_root ? ah_cli_train_load_plan(&b, req->join ? -1 : stay, &p, &have, &e)
        : ah_error_set(&e, AH_ERR_USAGE, "the run has no --local-root to save step %lld to and resume from in place",
                       (long long)req->step);
    if (s == AH_OK && req->join && ah_plan_device_count(&p) < stay + req->join)
        s = ah_error_set(&e, AH_ERR_USAGE, "%s has %d devices, fewer than the %d staying ranks and one a joining job "
                         "(%d)", req->plan, ah_plan_device_count(&p), stay, req->join);
    if (have) ah_plan_free(&p);
    if (s != AH_OK) snprintf(why, why_size, "%s", e.msg);
    return s == AH_OK;
}

/* The new world's every rank (the ranks that stayed and the ones admitted): req's plan set up on it, resumed
 * from req->step; -1 with *start the step restored, or the exit code of a failure (agreed as at the start). */
static int set_up_new(args_t *a, const ah_reconfig_req_t *req, int from, double *ph, ah_plan_t *plan,
                      ah_dataset_t *data, ah_dataset_t *val, FILE **metrics, ah_trainer_t *tr, bool *have_tr,
                      ah_ckpt_session_t **ck, int64_t *start) {
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
    if (s == AH_OK)
        s = ah_cli_train_set_up(a, plan, data, *metrics, tr, have_tr, ck, start, &ph[AH_RECONFIG_PH_LOAD], &err);
    if (s == AH_OK && *start != req->step) /* the same on every rank: the resume agrees on its step */
        s = ah_error_set(&err, AH_ERR_IO, "in-place reconfiguration at step %lld: the new world's ranks resumed from "
                         "step %lld, not the step just saved (a piece of it was held only by the leaving jobs, or "
                         "is out of a new rank's reach: keep --replica-memory-gb or --cloud on)",
                         (long long)req->step, (long long)*start);
    if (s != AH_OK) return rank == 0 ? ah_cli_train_fail(a, rank, &err) : ah_status_exit_code(s);
    if (rank == 0) ah_reconfig_retire(a->run_dir);
    ph[AH_RECONFIG_PH_INIT] = ah_now_s() - t - ph[AH_RECONFIG_PH_LOAD];
    ah_reconfig_say(a->run_dir, req, from, ph, *start, *metrics);
    if (rank == 0 && !a->quiet) ah_cli_train_say_start(a, plan, ranks);
    return -1;
}

/* The boundary req->step of an in-place reconfiguration (runtime/reconfig.h), on every rank of the old
 * world: the save, the old runtime freed, the world split, the new jobs admitted ("join"). A leaving rank
 * returns 0 (it then only finalizes); a staying one sets up req's plan on the new world (set_up_new). */
static int reconfigure(args_t *a, const ah_reconfig_req_t *req, ah_plan_t *plan, ah_dataset_t *data, ah_dataset_t *val,
                       FILE **metrics, ah_trainer_t *tr, bool *have_tr, ah_ckpt_session_t **ck, int64_t *start) {
    ah_comm_t *world = ah_comm_world();
    const int from = ah_comm_size(world), job = ah_comm_world_job();
    const bool leaving = ah_reconfig_leaving(req);
    double ph[AH_RECONFIG_N_PH] = {0}, t = ah_now_s();
    json_t *events = NULL;
    ah_error_t err;
    if (ah_ckpt_session_save_leaving(*ck, req->step, leaving, &events, &err) != AH_OK)
        ah_comm_abort(ah_cli_train_fail(a, tr->rank, &err));
    ah_metrics_write_events(*metrics, events);
    ph[AH_RECONFIG_PH_SAVE] = ah_now_s() - t;
    t = ah_now_s();
    if (ah_ckpt_session_close(*ck, &err) != AH_OK)
        fprintf(stderr, "autohet train: warning: rank %d: cloud upload failed: %s\n", tr->rank, err.msg);
    *ck = NULL;
    ah_trainer_free(tr);
    *have_tr = false;
    ph[AH_RECONFIG_PH_TEARDOWN] = ah_now_s() - t;
    t = ah_now_s();
    const int new_rank = ah_reconfig_new_rank(req);
    if (*metrics && (leaving || new_rank > 0)) { /* rank 0 of the new world appends to it from now on */
        fclose(*metrics);
        *metrics = NULL;
    }
    if (ah_comm_world_shrink(!leaving, new_rank, &err) != AH_OK) ah_comm_abort(ah_cli_fail("train", &err));
    if (!leaving && req->join > 0) { /* the new jobs in, by their turns (comm/join.c), sent the request */
        late_msg_t m = {.req = *req, .from = from};
        const int key = new_rank >= 0 ? new_rank : ah_comm_rank(world);
        if (ah_comm_world_admit(req->join, key, &m, sizeof m, &err) != AH_OK) ah_comm_abort(ah_cli_fail("train", &err));
    }
    ph[AH_RECONFIG_PH_SPLIT] = ah_now_s() - t;
    if (leaving) {
        ah_test_hook("reconfig-split", req->step, NULL);
        printf("autohet train: job %d (pid %d) leaves at step %lld: its checkpoint is saved, the other jobs go on in "
               "place under %s\n", job, (int)getpid(), (long long)req->step, req->plan);
        fflush(stdout);
        return 0;
    }
    return set_up_new(a, req, from, ph, plan, data, val, metrics, tr, have_tr, ck, start);
}

int ah_cli_train_in_place(args_t *a, ah_plan_t *plan, ah_dataset_t *data, ah_dataset_t *val, FILE **metrics,
                          ah_trainer_t *tr, bool *have_tr, ah_ckpt_session_t **ck, int64_t start) {
    ah_reconfig_req_t req;
    for (int64_t after = start;; after = req.step) {
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
    const int rc = set_up_new(a, &msg.req, msg.from, ph, plan, data, val, metrics, tr, have_tr, ck, &start);
    return rc >= 0 ? rc : ah_cli_train_in_place(a, plan, data, val, metrics, tr, have_tr, ck, start);
}
