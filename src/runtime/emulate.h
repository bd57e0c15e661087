/* Device emulation on a CPU rank: a compute phase is made to last slowdown x its compute seconds
 * (the typical ones of its kind, below), the rank sleeping for the rest, so it takes that long
 * without taking a core from the other ranks. The trainer and the profiler both go through these calls, so a profile sees exactly the
 * emulation that training sees (docs/runtime.md, "Device emulation").
 *
 * A phase's compute seconds are its CPU seconds outside communication (comm/comm.h's
 * ah_comm_seconds), capped by its wall seconds outside communication (several threads can spend
 * more CPU than wall time). CPU time, not wall time: when ranks outnumber cores, a rank that waits
 * for a core loses wall time that an emulated device would not lose, and stretching that by the
 * slowdown made each loss count slowdown times. What the phase spent in communication (the TP
 * all-reduces inside a block) is not stretched: it passes once, as measured.
 *
 * The ranks of a TP group emulate one device type together and meet at every all-reduce, so they
 * agree on one compute time per phase, the mean of theirs (and on the mean wall time already
 * spent), and end the phase together: each rank's CPU seconds vary by a few per cent from call to
 * call, and stretched by the slowdown that noise ended the ranks' phases apart (12 x 1 ms at
 * slowdown 12), which the next phase's first all-reduce then waited out.
 *
 * A phase is stretched from its kind's typical compute seconds, not from this one call's: the
 * lower quartile of the last AH_EMULATE_HISTORY calls of the same kind (a rank repeats the same
 * forward, backward and optimizer shapes every micro-batch and step). A device runs a repeated
 * kernel sequence in steady time; the emulating host does not. A scheduler or hypervisor hiccup
 * of a few ms counts as the process's CPU time (this VM reports no steal time), and so does
 * sharing a core: ranks that compute at the same moment on fewer cores than ranks evict each
 * other's caches and each spends 20-90 % more CPU on the same phase (four emulated replicas that
 * start every step together, on 2 cores). Stretched k-fold, either made an emulated replica k x
 * that late, and the slowest replica paced the whole data-parallel step. Not the median: such
 * contention hit a third of one plan's phases and moved the median too. The lower quartile
 * takes the rank's uncontended speed, which is what the profile (one process alone) measures,
 * and still follows a lasting change of the host's speed within 6 calls. */
#ifndef AH_RUNTIME_EMULATE_H
#define AH_RUNTIME_EMULATE_H

#include "comm/comm.h"

typedef struct ah_emulate_phase {
    double wall, cpu;           /* clocks at the start */
    double comm_wall, comm_cpu; /* ah_comm_seconds at the start */
} ah_emulate_phase_t;

/* The last compute seconds of one kind of phase; zero-initialise. */
#define AH_EMULATE_HISTORY 7
typedef struct ah_emulate_history {
    double seconds[AH_EMULATE_HISTORY];
    int n, next; /* values held, slot of the next one */
} ah_emulate_history_t;

/* Starts a phase. */
void ah_emulate_begin(ah_emulate_phase_t *ph);
/* Ends the phase begun with ah_emulate_begin: with slowdown > 1, adds its compute seconds to
 * `kind` (the history of phases of its kind) and sleeps until its time outside communication
 * reaches slowdown x the lower quartile of that history (at once when it already has), the mean
 * of the members' quartiles when `group` is not NULL (collective over the group). `kind` must not
 * be NULL when slowdown > 1. *compute gets this call's own compute seconds. Fails only when the
 * group's all-reduce does. */
ah_status_t ah_emulate_end(const ah_emulate_phase_t *ph, double slowdown, ah_comm_t *group,
                           ah_emulate_history_t *kind, double *compute, ah_error_t *err);

#endif
