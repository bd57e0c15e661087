/* A checkpoint session's cloud side (runtime/ckpt_io.h: the contract; ckpt_session.h: the state):
 * how far the cloud is, agreed by every rank, for the checkpoint events and the end of the run; and
 * the resume's rule for a cloud that cannot be listed (not an empty cloud). */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "core/timing.h"
#include "runtime/ckpt_session.h"
#include "runtime/protocol.h"

/* The newest step every uploading node finished: each node's newest up to a bound, the smallest of
 * them the next bound, until every node has it (a node may have skipped a step another finished).
 * Nodes that upload nothing (their shards are another node's share) do not count. Before this run
 * finished an upload, the cloud's newest complete step at the resume (s->cloud_base). Collective. */
static ah_status_t newest_complete(const ah_ckpt_session_t *s, int64_t *out, ah_error_t *err) {
    const bool uploads = s->up && s->cloud_share > 0;
    int64_t bound = INT64_MAX;
    for (int round = 0; round <= AH_CKPT_UPLOAD_HISTORY; round++) {
        int64_t v = uploads ? -ah_ckpt_uploader_newest_upto(s->up, bound) : INT64_MIN; /* max of -x: min x */
        ah_status_t st = ah_comm_allreduce_max_i64(ah_comm_world(), &v, 1, err);
        if (st != AH_OK) return st;
        const int64_t c = v == INT64_MIN ? -1 : -v;
        if (c < 0 || c == bound) {
            *out = c > s->cloud_base ? c : s->cloud_base;
            return AH_OK;
        }
        bound = c;
    }
    *out = s->cloud_base; /* not reached: each round lowers the bound to a step some node finished */
    return AH_OK;
}

ah_status_t ah_ckpt_cloud_check(ah_ckpt_session_t *s, ah_ckpt_cloud_state_t *c, ah_error_t *err) {
    memset(c, 0, sizeof *c);
    c->step = -1;
    ah_status_t st = newest_complete(s, &c->step, err);
    if (st != AH_OK) return st;
    /* each node's first failure since the last check; the lowest failing rank's said everywhere */
    ah_error_t up = {0};
    const ah_status_t mine = s->up ? ah_ckpt_uploader_take_error(s->up, &up) : AH_OK;
    c->failed = ah_comm_agree(ah_comm_world(), mine, &up) != AH_OK;
    if (c->failed) snprintf(c->error, sizeof c->error, "%s", up.msg);
    c->behind = s->cloud_disk_step >= 0 && c->step < s->cloud_disk_step;
    s->cloud_disk_step = s->last_saved;
    return AH_OK;
}

ah_status_t ah_ckpt_cloud_holds(ah_ckpt_session_t *s, int64_t step, double wait_s, bool *held, ah_error_t *err) {
    *held = false;
    if (!s->cloud) return AH_OK;
    const double until = ah_now_s() + wait_s;
    while (s->up && s->cloud_share > 0 && ah_ckpt_uploader_newest_upto(s->up, step) != step &&
           ah_ckpt_uploader_pending_step(s->up) == step && ah_now_s() < until)
        ah_sleep_s(0.01);
    int64_t c = -1;
    const ah_status_t st = newest_complete(s, &c, err);
    *held = st == AH_OK && c == step;
    return st;
}

void ah_ckpt_cloud_event(const ah_ckpt_cloud_state_t *c, json_t *ev) {
    json_object_set_new(ev, "cloud_step", json_integer(c->step));
    if (c->behind) json_object_set_new(ev, "cloud_behind", json_true());
    if (c->failed) json_object_set_new(ev, "cloud_error", json_string(c->error));
}

ah_status_t ah_ckpt_session_finish(ah_ckpt_session_t *s, json_t **event, ah_error_t *err) {
    if (event) *event = NULL;
    if (!s || !s->cloud) return AH_OK;
    const double t0 = ah_now_s();
    if (s->up) ah_ckpt_uploader_drain(s->up); /* a failure stays for the check to take */
    int64_t waited = (int64_t)((ah_now_s() - t0) * 1e6);
    ah_status_t st = ah_comm_allreduce_max_i64(ah_comm_world(), &waited, 1, err);
    ah_ckpt_cloud_state_t c;
    if (st == AH_OK) st = ah_ckpt_cloud_check(s, &c, err);
    if (st == AH_OK) st = ah_ckpt_cloud_retain(s, err); /* --keep in the cloud, done before the uploader stops */
    if (st != AH_OK || s->tr->rank != 0 || !event) return st;
    *event = json_pack("{s:s, s:I, s:f}", AH_PROTO_EVENT, AH_PROTO_EV_CLOUD, AH_PROTO_STEP, (json_int_t)s->last_saved,
                       "seconds", (double)waited * 1e-6);
    if (*event) ah_ckpt_cloud_event(&c, *event);
    return AH_OK;
}

/* ---- resume -------------------------------------------------------------------------------- */

static void say_retry(void *ctx, int retry, int tries, double wait_s, const char *why) {
    const ah_ckpt_session_t *s = ctx;
    if (s->tr->rank != 0) return;
    fprintf(stderr, "autohet train: warning: the cloud tier %s cannot be listed (%s); retry %d of %d in %.0f s "
            "(--cloud-retries, --cloud-timeout)\n", s->o.cloud, why, retry, tries, wait_s);
    fflush(stderr);
}

void ah_ckpt_cloud_sources(ah_ckpt_session_t *s, ah_ckpt_sources_t *src) {
    src->cloud_tries = s->o.cloud_retries + 1;
    src->retry_wait_s = 1;
    src->on_retry = say_retry;
    src->retry_ctx = s;
}

void ah_ckpt_cloud_agree_listed(ah_ckpt_session_t *s, ah_ckpt_catalog_t *cat, char *unread, size_t cap) {
    unread[0] = '\0';
    if (!s->cloud) return;
    const char *note = ah_ckpt_catalog_note(cat, AH_TIER_CLOUD);
    ah_error_t e = {0};
    const ah_status_t mine = note[0] ? ah_error_set(&e, AH_ERR_COMM, "%s", note) : AH_OK;
    if (ah_comm_agree(ah_comm_world(), mine, &e) == AH_OK) return;
    snprintf(unread, cap, "the cloud tier %s (endpoint %s) cannot be listed: %s", s->o.cloud, s->s3cfg.endpoint, e.msg);
    ah_ckpt_catalog_forget_tier(cat, AH_TIER_CLOUD, unread);
}

ah_status_t ah_ckpt_cloud_unread(const ah_ckpt_session_t *s, const char *unread, char *why, size_t cap,
                                 ah_error_t *err) {
    if (!s->o.start_over_if_unreadable)
        return ah_error_set(err, AH_ERR_COMM, "--resume: %s; no other tier holds a checkpoint, and the cloud may hold "
                            "this run's: not starting from scratch (a run from step 0 would save its steps beside "
                            "them). Fix --cloud or --s3-endpoint, or bring the store back, and rerun; or give "
                            "--start-over-if-unreadable to train from step 0 anyway", unread);
    snprintf(why, cap, "%s; --start-over-if-unreadable", unread);
    if (s->tr->rank == 0)
        fprintf(stderr, "autohet train: warning: %s and no other tier holds a checkpoint: starting from step 0 as "
                "--start-over-if-unreadable asks; this run's steps go to %s beside whatever it holds\n", unread,
                s->o.cloud);
    return AH_OK;
}
