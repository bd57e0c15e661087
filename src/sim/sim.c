/* The replay: one policy over one availability timeline (rules in sim.h, docs/simulator.md), its
 * events in time order and its timeline; the plans are plans.c's, the (re)starts' costs recovery.c's
 * (sim/replay.h). */
#include "sim/sim.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/str.h"
#include "core/timing.h"
#include "core/vec.h"
#include "elastic/join_rule.h"
#include "sim/replay.h"

void ah_sim_opts_default(ah_sim_opts_t *o) {
    memset(o, 0, sizeof *o);
    o->train = (ah_train_t){.global_batch = 512, .seq_len = 2048, .precision = AH_PREC_BF16};
    o->ckpt_every_s = 1800;
    o->restart_s = 60;
    o->handover = true;
    o->replan_s = -1;
    o->on_demand_factor = 2.5;
    o->disk_gb_s = 8; /* an 8-GPU cloud node's local NVMe SSDs (p4d: 8 x 1 TB), about 1 GB/s each */
    o->grace_s = 120;
    o->snapshot_gb_s = AH_SIM_SNAPSHOT_GB_S;
    o->ckpt_snapshot_gb_s = AH_SIM_CKPT_SNAPSHOT_GB_S;
    o->change_snapshot_gb_s = AH_SIM_CHANGE_SNAPSHOT_GB_S;
}

double ah_sim_on_demand_price(const ah_cluster_t *c, int node, const ah_sim_opts_t *o) {
    const ah_node_t *n = &c->nodes[node];
    if (!n->spot) return n->usd_per_gpu_hour;
    for (int any_region = 0; any_region < 2; any_region++) /* prices differ by region: its own first */
        for (int i = 0; i < c->n_nodes; i++) {
            const ah_node_t *d = &c->nodes[i];
            if (!d->spot && d->type == n->type && (any_region || strcmp(d->region, n->region) == 0))
                return d->usd_per_gpu_hour;
        }
    return n->usd_per_gpu_hour * o->on_demand_factor;
}

ah_status_t ah_sim_confined_region(const ah_cluster_t *c, const ah_sim_opts_t *o, char *region, ah_error_t *err) {
    double best = INFINITY;
    char have[512];
    ah_str_t s = ah_str_fixed(have, sizeof have);
    for (int i = 0; i < c->n_nodes; i++) {
        const char *r = c->nodes[i].region;
        bool first = true;
        for (int j = 0; j < i && first; j++) first = strcmp(c->nodes[j].region, r) != 0;
        if (!first) continue;
        ah_str_appendf(&s, "%s%s", s.len ? ", " : "", r);
        if (o->region[0]) {
            if (strcmp(r, o->region) == 0) {
                snprintf(region, AH_NAME_MAX, "%s", r);
                return AH_OK;
            }
            continue;
        }
        double usd = 0, gpus = 0;
        for (int j = i; j < c->n_nodes; j++)
            if (strcmp(c->nodes[j].region, r) == 0) {
                usd += c->nodes[j].usd_per_gpu_hour * c->nodes[j].count;
                gpus += c->nodes[j].count;
            }
        if (gpus > 0 && usd / gpus < best) {
            best = usd / gpus;
            snprintf(region, AH_NAME_MAX, "%s", r);
        }
    }
    if (!o->region[0] && best < INFINITY) return AH_OK;
    return ah_error_set(err, AH_ERR_USAGE, "--region \"%s\": no node of the cluster is in it; its regions are %s",
                        o->region, s.len ? have : "none");
}

double ah_sim_horizon_s(const ah_sim_avail_t *a, const ah_sim_opts_t *o) {
    if (o->hours > 0) return o->hours * 3600.0;
    return a->end_s > 1 ? a->end_s : 1;
}

ah_status_t ah_sim_check_horizon(const ah_sim_avail_t *a, const ah_sim_opts_t *o, ah_error_t *err) {
    if (o->hours <= 0 && a->end_s <= 0)
        return ah_error_set(err, AH_ERR_USAGE, "nothing to replay: no --trace, or its rows are all at time 0; give "
                            "--hours H");
    const double H = ah_sim_horizon_s(a, o), max_h = AH_SIM_MAX_HOURS;
    if (H > max_h * 3600)
        return ah_error_set(err, AH_ERR_USAGE, "a horizon of %.4g h (%s) is past the %.0f h (%.0f years) simulate "
                            "replays; check the trace's time unit (,unit=s|h|ms) or give a shorter --hours",
                            H / 3600, o->hours > 0 ? "--hours" : "the latest trace end", max_h, max_h / 8766);
    if (o->ckpt_every_s > 0 && H / o->ckpt_every_s > AH_SIM_MAX_CHECKPOINTS)
        return ah_error_set(err, AH_ERR_USAGE, "--ckpt-every-s %g over a horizon of %.4g h is %.3g checkpoints, more "
                            "than the %.0e simulate replays; raise --ckpt-every-s", o->ckpt_every_s, H / 3600,
                            H / o->ckpt_every_s, (double)AH_SIM_MAX_CHECKPOINTS);
    return AH_OK;
}

/* ---- timeline and events ---- */

void ah_sim_seg_open(ah_sim_replay_t *x, ah_sim_phase_t phase, const char *fmt, const char *arg) {
    ah_sim_result_t *r = x->r;
    const int n_types = x->c->n_types;
    if (r->n_segs > 0) {
        ah_sim_segment_t *prev = &r->segs[r->n_segs - 1];
        prev->end_s = x->t;
        if (prev->end_s <= prev->start_s) { /* zero length: replace it */
            free(prev->gpus);
            r->n_segs--;
        }
    }
    if (!ah_grow(&r->segs, &x->cap_segs, r->n_segs + 1, sizeof *r->segs)) {
        x->oom = true;
        return;
    }
    ah_sim_segment_t *s = &r->segs[r->n_segs];
    memset(s, 0, sizeof *s);
    s->gpus = calloc((size_t)n_types + 1, sizeof(int));
    if (!s->gpus) {
        x->oom = true;
        return;
    }
    r->n_segs++;
    s->start_s = s->end_s = x->t;
    s->phase = phase;
    if (phase == AH_PHASE_TRAIN) s->tokens_per_s = x->run->tokens_per_s;
    if (phase != AH_PHASE_STALLED && x->run) memcpy(s->gpus, x->run->gpus, sizeof(int) * (size_t)n_types);
    snprintf(s->event, sizeof s->event, fmt, arg);
}

void ah_sim_mark(ah_sim_replay_t *x, bool replan) {
    ah_sim_result_t *r = x->r;
    if (!ah_grow(&r->markers, &x->cap_markers, r->n_markers + 1, sizeof *r->markers)) {
        x->oom = true;
        return;
    }
    r->markers[r->n_markers++] = (ah_sim_marker_t){x->t, replan};
}

/* dt seconds of training on the running plan */
void ah_sim_train(ah_sim_replay_t *x, double dt) {
    x->now.tokens += x->run->tokens_per_s * dt;
    x->now.train_s += dt;
    x->r->egress_usd += x->run->egress_usd_per_s * dt; /* also in usd */
    x->r->usd += x->run->egress_usd_per_s * dt;
}

void ah_sim_pay_ckpt_egress(ah_sim_replay_t *x, double usd, double bytes_across_regions) {
    x->r->ckpt_egress_usd += usd;
    x->r->egress_usd += usd; /* also in usd */
    x->r->usd += usd;
    x->r->ckpt_bytes_across_regions += bytes_across_regions;
}

/* The upload of checkpoint p saved by plan e starts at t: its egress is paid now. */
static void upload_start(ah_sim_replay_t *x, ah_sim_progress_t p, const ah_sim_entry_t *e, double t) {
    x->uploading = p;
    x->uploading_by = e;
    x->upload_end = t + e->upload_s;
    x->has_uploading = true;
    ah_sim_pay_ckpt_egress(x, e->upload_usd, e->upload_wan_bytes);
}

void ah_sim_uploads_settle(ah_sim_replay_t *x) {
    while (x->has_uploading && x->t >= x->upload_end) {
        x->at_cloud = x->uploading;
        x->has_uploading = false;
        if (x->has_upload_next) upload_start(x, x->upload_next, x->upload_next_by, x->upload_end);
        x->has_upload_next = false;
    }
}

void ah_sim_upload_submit(ah_sim_replay_t *x) {
    ah_sim_uploads_settle(x);
    if (!x->has_uploading) {
        upload_start(x, x->now, x->run, x->t);
        return;
    }
    x->upload_next = x->now;
    x->upload_next_by = x->run;
    x->has_upload_next = true;
}

void ah_sim_uploads_cut(ah_sim_replay_t *x) {
    ah_sim_uploads_settle(x);
    if (x->has_uploading && x->uploading_by->upload_s > 0) { /* paid in full at its start: back what it did not send */
        const ah_sim_entry_t *e = x->uploading_by;
        const double unsent = fmin(1, (x->upload_end - x->t) / e->upload_s);
        ah_sim_pay_ckpt_egress(x, -e->upload_usd * unsent, -e->upload_wan_bytes * unsent);
    }
    x->has_uploading = x->has_upload_next = false;
}

double ah_sim_uploads_drain(ah_sim_replay_t *x, double limit_s) {
    const double t = x->t;
    ah_sim_uploads_settle(x); /* those ended by now */
    while (x->has_uploading && x->upload_end <= t + limit_s) { /* each that ends in time: the cloud holds it */
        x->t = x->upload_end;
        ah_sim_uploads_settle(x);
    }
    if (x->has_uploading) x->t = t + limit_s;
    ah_sim_uploads_cut(x); /* the rest: killed at the grace period's end */
    const double waited = x->t - t;
    x->t = t;
    return waited;
}

void ah_sim_replicated(ah_sim_replay_t *x) {
    if (x->run && x->run->holder) ah_sim_pay_ckpt_egress(x, x->run->replicate_usd, x->run->replicate_wan_bytes);
}

/* (Re)starts on what is up now; stalls when no plan fits. */
static void try_start(ah_sim_replay_t *x, const char *label, const char *arg) {
    ah_sim_entry_t *e = ah_sim_plan_choose(x);
    if (!e) {
        x->oom = true;
        return;
    }
    if (!e->ok) {
        /* a recovery under way is cut short (until session 25 its record stayed finished: its whole terms counted in
         * the breakdown, more than the time it had) */
        if (x->phase == AH_PHASE_RECOVER && x->r->n_recs > 0) x->r->recs[x->r->n_recs - 1].interrupted = true;
        x->run = NULL;
        x->phase = AH_PHASE_STALLED;
        if (!x->r->note[0]) snprintf(x->r->note, sizeof x->r->note, "stalled at %.2f h: %.200s", x->t / 3600, e->why);
        ah_sim_seg_open(x, AH_PHASE_STALLED, "stalled: no plan fits what is up", "");
        return;
    }
    ah_sim_begin_recovery(x, e, false, label, arg);
}

double ah_sim_held_usd_per_s(const ah_sim_replay_t *x, double *gpus) {
    double usd = 0;
    *gpus = 0;
    for (int i = 0; i < x->c->n_nodes; i++) {
        const ah_node_t *n = &x->c->nodes[i];
        if (!(x->pol == AH_POLICY_ON_DEMAND || x->up[i]) || (x->region && strcmp(n->region, x->region) != 0)) continue;
        usd += (x->pol == AH_POLICY_ON_DEMAND ? ah_sim_on_demand_price(x->c, i, x->o) : n->usd_per_gpu_hour) * n->count;
        *gpus += n->count;
    }
    return usd / 3600.0;
}

static void advance(ah_sim_replay_t *x, double tn) {
    const double dt = tn - x->t;
    if (dt > 0 && x->phase == AH_PHASE_TRAIN && x->run) { /* not while a periodic checkpoint holds it */
        const double held = fmin(tn, x->stall_until) - x->t;
        ah_sim_train(x, held > 0 ? dt - held : dt);
        if (held > 0) x->r->ckpt_stall_s += held;
    }
    if (dt > 0 && x->o->release_idle && x->phase != AH_PHASE_STALLED && x->run) { /* the plan's nodes only */
        x->r->usd += x->run->usd_per_s * dt;
        int gpus = 0;
        for (int ty = 0; ty < x->c->n_types; ty++) gpus += x->run->gpus[ty];
        x->r->gpu_hours += gpus * dt / 3600.0;
    } else if (dt > 0 && !x->o->release_idle) { /* every node held, whether a plan uses it or not (rule 2) */
        double gpus;
        x->r->usd += ah_sim_held_usd_per_s(x, &gpus) * dt;
        x->r->gpu_hours += gpus * dt / 3600.0;
    }
    if (dt > 0 && x->phase == AH_PHASE_RECOVER) x->r->recovery_s += dt;
    for (int i = 0; dt > 0 && i < x->c->n_nodes; i++)
        if (x->up[i] && x->c->nodes[i].spot) x->spot_node_s[x->c->nodes[i].type] += dt;
    x->t = tn;
}

/* What a checkpoint of plan e holds training for (a periodic one; a change in place's written behind:
 * recovery.c), as the runtime's asynchronous save does (runtime/ckpt_async.c, ckpt_io.c): a sharded plan's
 * all-gather of the moments and their copy into the snapshot on the trainer's thread (they are assembled
 * in host memory: 8 of a parameter's AH_SIM_CKPT_BYTES_PER_PARAM bytes); the copies of the rest off the
 * trainer's thread, overlapping the next step (a GPU's on a side stream into page-locked memory,
 * backend/cuda_snapshot.c; the CPU's on the writer thread, backend/cpu_snapshot.c), which waits only before
 * its AdamW for what is not copied yet: max(0, copy - iteration_s), the step's optimizer counted in its
 * overlap; each device's copy at gb_s, in parallel (sim.h AH_SIM_CKPT_SNAPSHOT_GB_S,
 * AH_SIM_CHANGE_SNAPSHOT_GB_S: calibrated so that this gives the runtime's measured holds); and with the memory tier the
 * replication of each held node's checkpoint to its partner (its bytes over the node's inter-node link, or
 * the link to a partner in another zone or region: memory.c), which the commit runs on the trainer's
 * thread. The disks and the upload go on in the background. */
double ah_sim_ckpt_hold_s(const ah_sim_entry_t *e, double gb_s) {
    double copy = 0;
    for (int r = 0; r < e->place.n_ranks; r++) copy = fmax(copy, (double)e->ckpt_bytes[r] / (gb_s * 1e9));
    const double on_thread = e->sharded ? copy * 8 / AH_SIM_CKPT_BYTES_PER_PARAM : 0;
    return e->gather_s + on_thread + fmax(0, copy - on_thread - e->iteration_s) +
           (e->holder && !e->periodic_off ? e->replicate_s : 0);
}

double ah_sim_join_key(const ah_sim_replay_t *x, const ah_sim_entry_t *e) {
    if (!e->ok || !(e->tokens_per_s > 0)) return INFINITY;
    return (x->o->objective == AH_OBJECTIVE_COST ? ah_sim_weighed_usd_per_s(x, e) : 1.0) / e->tokens_per_s;
}

double ah_sim_weighed_usd_per_s(const ah_sim_replay_t *x, const ah_sim_entry_t *e) {
    double gpus;
    return (x->o->release_idle ? e->usd_per_s : ah_sim_held_usd_per_s(x, &gpus)) + e->egress_usd_per_s;
}

/* Joins pending while training (sim.h's rule): autohet and autohet-region restart onto the plan with
 * them as the agent does, when the join rule says it pays (the exposure's recovery:
 * ah_sim_recovery_cost_s, the agent's own mean; decided at the join, at a recovery's end and at a
 * checkpoint), wait while it is better but does not pay, and drop them when it is not better; the
 * baselines restart at a checkpoint when the plan is faster. */
static void consider_join(ah_sim_replay_t *x, const char *label) {
    const bool agent = ah_sim_agent_policy(x->pol), at_ckpt = strcmp(label, "join at checkpoint") == 0;
    if (!x->pending_join || x->phase != AH_PHASE_TRAIN || (!agent && !at_ckpt)) return;
    ah_sim_entry_t *e = ah_sim_plan_choose(x);
    x->pending_join = false;
    if (!e) x->oom = true;
    if (!e || !e->ok || e == x->run) return;
    if (!agent) {
        if (e->tokens_per_s > x->run->tokens_per_s) ah_sim_begin_recovery(x, e, true, label, "");
        return;
    }
    const double now = ah_sim_join_key(x, x->run), joined = ah_sim_join_key(x, e);
    if (!ah_join_pays(now, joined, INFINITY, 0, NULL)) return; /* not better */
    const double hit = ah_sim_hit_rate(x, e), stay = ah_join_stay_s(hit, x->o->join_horizon_s);
    /* and since session 25 the training the restart would undo: its save at the join not fitting the grace
     * period (a slow disk), the run goes back to the disks' newest step (ah_sim_restart_rollback_s); at a
     * checkpoint that is nothing, so such a join waits for the next one */
    const double cost = ah_sim_join_cost_s(x) +
                        ah_join_exposure_s(ah_sim_hit_rate(x, x->run), hit, stay, ah_sim_recovery_cost_s(x)) +
                        ah_sim_restart_rollback_s(x, e, true, x->run);
    if (ah_join_pays(now, joined, stay, cost, NULL))
        ah_sim_begin_recovery(x, e, true, label, "");
    else
        x->pending_join = true; /* waits for the next join, recovery's end or checkpoint */
}

static void on_internal(ah_sim_replay_t *x) {
    if (x->phase == AH_PHASE_RECOVER) { /* the first step after it finished: its tokens count */
        ah_sim_train(x, x->run->iteration_s);
        /* a hold in progress at the notice was waited for there (recovery.c stop_at_notice); a relaunch
         * without one (a baseline's, a restart cut short) ended the job and its snapshot: from here on only a
         * change in place's save written behind holds (recovery.c) */
        x->stall_until = x->t + x->hold_after_s;
        x->hold_after_s = 0;
        x->phase = AH_PHASE_TRAIN;
        x->state = x->run;
        x->fresh = false;
        for (int i = 0; i < x->c->n_nodes; i++) x->holds[i] = x->run->uses[i];
        /* the schedule counts training time since the last checkpoint (0 after a rollback to it) */
        x->ckpt_due = fmax(x->t, x->t + x->o->ckpt_every_s - (x->now.train_s - x->at_ckpt.train_s));
        ah_sim_seg_open(x, AH_PHASE_TRAIN, "training", "");
        consider_join(x, "join at first step");
        return;
    }
    /* a checkpoint, uploaded to the cloud tier in the background (its time and egress: transfer.c) */
    x->at_ckpt = x->at_disk = x->now;
    if (!x->run->periodic_off) { /* replicated after its commit */
        x->at_mem = x->now;
        ah_sim_replicated(x);
    }
    ah_sim_upload_submit(x);
    x->stall_until = x->t + ah_sim_ckpt_hold_s(x->run, x->o->ckpt_snapshot_gb_s);
    x->ckpt_due = x->stall_until + x->o->ckpt_every_s;
    consider_join(x, "join at checkpoint");
}

/* Whether a change in changes[from, to) removes a spot node of type ty (any number of types). */
static bool spot_type_removed(const ah_cluster_t *c, const ah_sim_avail_t *a, int from, int to, int ty) {
    for (int k = from; k < to; k++) {
        const ah_sim_change_t *ch = &a->changes[k];
        if (!ch->up && c->nodes[ch->node].spot && c->nodes[ch->node].type == ty) return true;
    }
    return false;
}

/* Applies every change at time changes[*ci].t_s. */
static void on_changes(ah_sim_replay_t *x, const ah_sim_avail_t *a, int *ci) {
    const double t = a->changes[*ci].t_s;
    const char *hit_name = NULL;
    bool added = false;
    const int first = *ci;
    for (; *ci < a->n_changes && a->changes[*ci].t_s == t; (*ci)++) {
        const ah_sim_change_t *ch = &a->changes[*ci];
        x->up[ch->node] = ch->up;
        if (!ch->up && x->c->nodes[ch->node].spot) {
            const int ty = x->c->nodes[ch->node].type;
            if (!spot_type_removed(x->c, a, first, *ci, ty)) x->spot_removal_events[ty]++; /* one event a type */
            x->spot_removals[ty]++;
        }
        if (ch->up) {
            added = true;
            continue;
        }
        bool hit = (x->run && x->phase != AH_PHASE_STALLED && x->run->uses[ch->node]) || x->holds[ch->node];
        x->holds[ch->node] = false;
        if (hit && !hit_name) hit_name = x->c->nodes[ch->node].name;
    }
    if (hit_name && x->phase != AH_PHASE_STALLED) {
        x->r->preemptions++;
        ah_sim_mark(x, false);
        try_start(x, "preempt %s", hit_name);
    } else if (added && x->phase == AH_PHASE_STALLED)
        try_start(x, "nodes up", "");
    else if (added) {
        x->pending_join = true;
        consider_join(x, "join");
    }
}

void ah_sim_result_free(ah_sim_result_t *r) {
    if (!r) return;
    for (int i = 0; i < r->n_segs; i++) free(r->segs[i].gpus);
    free(r->segs);
    free(r->markers);
    free(r->recs);
    memset(r, 0, sizeof *r);
}

ah_status_t ah_sim_run(const ah_model_t *model, const ah_sim_avail_t *a, const ah_sim_opts_t *o,
                       ah_policy_t policy, ah_sim_result_t *out, ah_error_t *err) {
    memset(out, 0, sizeof *out);
    if (o->ckpt_every_s <= 0 || o->restart_s < 0 || o->on_demand_factor <= 0 || o->disk_gb_s <= 0 || o->grace_s < 0 ||
        o->replica_memory_gb < 0 || o->snapshot_gb_s <= 0 || !(o->ckpt_snapshot_gb_s > 0) ||
        !(o->change_snapshot_gb_s > 0))
        return ah_error_set(err, AH_ERR_USAGE,
                            "simulate: --ckpt-every-s %g must be > 0, --restart-s %g >= 0, --on-demand-factor %g > 0, "
                            "--disk-gb-s %g > 0, --grace-s %g >= 0, --replica-memory-gb %g >= 0, --snapshot-gb-s %g > 0, "
                            "the checkpoint snapshots' %g and %g GB/s > 0",
                            o->ckpt_every_s, o->restart_s, o->on_demand_factor, o->disk_gb_s, o->grace_s,
                            o->replica_memory_gb, o->snapshot_gb_s, o->ckpt_snapshot_gb_s, o->change_snapshot_gb_s);
    ah_status_t hs = ah_sim_check_horizon(a, o, err);
    if (hs != AH_OK) return hs;
    const double t_start = ah_now_s();
    const ah_cluster_t *c = a->cluster;
    ah_sim_replay_t x = {.model = model, .c = c, .o = o, .pol = policy, .r = out, .fresh = true};
    out->policy = policy;
    if ((hs = ah_sim_cloud_node(c, o, &x.bucket, err)) != AH_OK) return hs;
    if (policy == AH_POLICY_AUTOHET_REGION) {
        if ((hs = ah_sim_confined_region(c, o, out->region, err)) != AH_OK) return hs;
        x.region = out->region;
    }
    x.up = malloc(sizeof(bool) * (size_t)(c->n_nodes + 1));
    x.holds = calloc((size_t)c->n_nodes + 1, sizeof(bool));
    x.spent = calloc((size_t)c->n_nodes + 1, sizeof *x.spent);
    x.spot_removals = calloc((size_t)c->n_types + 1, sizeof(double));
    x.spot_node_s = calloc((size_t)c->n_types + 1, sizeof(double));
    x.spot_removal_events = calloc((size_t)c->n_types + 1, sizeof(double));
    if (!x.up || !x.holds || !x.spent || !x.spot_removals || !x.spot_node_s || !x.spot_removal_events) x.oom = true;
    else memcpy(x.up, a->up0, sizeof(bool) * (size_t)c->n_nodes);
    const double H = ah_sim_horizon_s(a, o);
    const bool replay = policy != AH_POLICY_ON_DEMAND;
    int ci = 0;
    x.phase = AH_PHASE_STALLED;
    if (!x.oom) try_start(&x, "start", "");
    while (!x.oom && x.t < H) {
        const double t_change = replay && ci < a->n_changes ? a->changes[ci].t_s : INFINITY;
        const double t_int = x.phase == AH_PHASE_RECOVER ? x.recover_end
                             : x.phase == AH_PHASE_TRAIN ? x.ckpt_due
                                                         : INFINITY;
        const double tn = fmin(fmin(t_change, t_int), H);
        advance(&x, tn);
        if (tn >= H) break;
        if (t_int <= t_change) on_internal(&x);
        else on_changes(&x, a, &ci);
    }
    if (!x.oom) {
        ah_sim_seg_open(&x, x.phase, "end", ""); /* closes the last segment at H */
        if (out->n_segs > 0) {            /* drop the zero-length "end" marker segment */
            free(out->segs[out->n_segs - 1].gpus);
            out->n_segs--;
        }
    }
    out->tokens = x.now.tokens;
    out->wall_s = H;
    for (int i = 0; i < x.n_cache; i++) ah_sim_entry_free(x.cache[i]);
    free(x.cache);
    free(x.up);
    free(x.holds);
    free(x.spent);
    free(x.spot_removals);
    free(x.spot_node_s);
    free(x.spot_removal_events);
    out->sim_wall_s = ah_now_s() - t_start;
    if (x.oom) {
        ah_sim_result_free(out);
        return ah_error_set(err, AH_ERR_INTERNAL, "simulate: out of host memory during the %s replay",
                            ah_policy_name(policy));
    }
    return AH_OK;
}
