/* The in-place reconfiguration's request (reconfig.h). */
#include "runtime/reconfig.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "comm/comm.h"
#include "runtime/protocol.h"

/* Rank 0: the version of the request file last read (inode, size, modification time) and whether that
 * version was refused (so it is said once, not at every step). */
static char g_stamp[96], g_refused[96];

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
        if (strcmp(key, "step") && strcmp(key, "leave") && strcmp(key, "plan")) {
            st = ah_error_set(err, AH_ERR_INVALID, "unknown key \"%s\" (expected step, leave, plan)", key);
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
        snprintf(g_refused, sizeof g_refused, "%s", g_stamp);
        return -1;
    }
    return req->step > after && req->step <= done ? req->step : -1;
}

/* Every rank: whether req names only jobs of the world and leaves one (*stay: the ranks staying); rank 0
 * warns when not. */
static ah_status_t check_jobs(const ah_reconfig_req_t *req, bool *ok, int *stay, ah_error_t *err) {
    ah_comm_t *w = ah_comm_world();
    const int n = ah_comm_size(w);
    int64_t *jobs = malloc((size_t)n * sizeof *jobs);
    if (!jobs) return ah_error_set(err, AH_ERR_OOM, "no host memory for %d job numbers", n);
    ah_status_t st = ah_comm_allgather_i64(w, ah_comm_world_job(), jobs, err);
    int missing = -1, stays = 0;
    for (int k = 0; st == AH_OK && k < req->n_leave; k++) {
        bool there = false;
        for (int r = 0; r < n; r++) there = there || jobs[r] == req->leave[k];
        if (!there && missing < 0) missing = req->leave[k];
    }
    for (int r = 0; st == AH_OK && r < n; r++) {
        bool leaves = false;
        for (int k = 0; k < req->n_leave; k++) leaves = leaves || jobs[r] == req->leave[k];
        stays += !leaves;
    }
    free(jobs);
    *stay = stays;
    *ok = st == AH_OK && missing < 0 && stays > 0 && (req->n_leave == 0 || ah_comm_world_job() >= 0);
    if (st == AH_OK && !*ok && ah_comm_rank(w) == 0) {
        fprintf(stderr, "autohet train: warning: %s's request at step %lld is not taken: ", AH_PROTO_RECONFIG_FILE,
                (long long)req->step);
        if (ah_comm_world_job() < 0) fprintf(stderr, "jobs can leave only a world of joined jobs (AH_WORLD_JOIN)");
        else if (missing >= 0) fprintf(stderr, "job %d is not in the world", missing);
        else fprintf(stderr, "no job would stay");
        fprintf(stderr, "; training goes on\n");
        snprintf(g_refused, sizeof g_refused, "%s", g_stamp);
    }
    return st;
}

ah_status_t ah_reconfig_poll(const char *run_dir, int64_t done, int64_t after, ah_reconfig_check_fn check, void *ctx,
                             ah_reconfig_req_t *req, bool *due, ah_error_t *err) {
    ah_comm_t *w = ah_comm_world();
    int64_t at = ah_comm_rank(w) == 0 ? read_request(run_dir, done, after, req) : -1;
    int stay = 0;
    *due = false;
    ah_status_t st = ah_comm_bcast(w, &at, sizeof at, 0, err);
    if (st != AH_OK || at < 0) return st;
    if ((st = ah_comm_bcast(w, req, sizeof *req, 0, err)) != AH_OK || (st = check_jobs(req, due, &stay, err)) != AH_OK ||
        !*due || !check)
        return st;
    /* the caller's check on rank 0, before anything is saved or torn down (a plan that cannot be loaded
     * found after the old world is gone would end the run) */
    int64_t ok = 1;
    char why[512] = "";
    if (ah_comm_rank(w) == 0 && !check(req, stay, ctx, why, sizeof why)) {
        ok = 0;
        fprintf(stderr, "autohet train: warning: %s's request at step %lld is not taken: %s; training goes on\n",
                AH_PROTO_RECONFIG_FILE, (long long)req->step, why);
        snprintf(g_refused, sizeof g_refused, "%s", g_stamp);
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
    for (int k = 0; job >= 0 && k < req->n_leave; k++)
        if (req->leave[k] == job) return true;
    return false;
}
