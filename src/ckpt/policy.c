/* The recovery tiers' names and the save-at-notice rule (policy.h). */
#include "ckpt/policy.h"

const ah_ckpt_tier_t AH_TIER_ORDER[AH_TIER_COUNT] = {AH_TIER_LOCAL, AH_TIER_MEMORY, AH_TIER_PEER, AH_TIER_CLOUD};

const char *ah_ckpt_tier_name(ah_ckpt_tier_t t) {
    static const char *const N[] = {"local", "peer", "cloud", "memory"};
    return (unsigned)t < AH_TIER_COUNT ? N[t] : "?";
}

/* Whether a save committing in d seconds (< 0: unknown, 1 s) fits what is left of the grace period. */
static bool fits(const ah_ckpt_notice_t *n, double d) {
    return n->elapsed_s + 1.5 * (d >= 0 ? d : 1.0) + 0.5 <= n->grace_s;
}

bool ah_ckpt_notice_memory_first(const ah_ckpt_notice_t *n) {
    return n->memory && (n->memory_s < 0 || n->save_s < 0 || n->memory_s < n->save_s);
}

bool ah_ckpt_notice_handover(const ah_ckpt_notice_t *n) {
    if (!n->memory || !n->handover) return false;
    if (n->memory_s < 0 || n->save_s < 0) return true;
    /* sooner than the disks plus the relaunch's fetch, and not where it misses the grace period the
     * disks would fit */
    return n->memory_s < n->save_s + (n->fetch_s > 0 ? n->fetch_s : 0) && (fits(n, n->memory_s) || !fits(n, n->save_s));
}

bool ah_ckpt_save_at_notice(const ah_ckpt_notice_t *n) {
    /* what commits the step: the memory tier's snapshot + replication (or handover), else the save to
     * the disks */
    const bool memory = ah_ckpt_notice_memory_first(n) || ah_ckpt_notice_handover(n);
    const double d = memory && n->memory_s >= 0 ? n->memory_s : n->save_s;
    if (!fits(n, d)) return false;
    if (n->every_node || d < 0 || n->redo_s < 0) return true;
    return d < n->redo_s;
}
