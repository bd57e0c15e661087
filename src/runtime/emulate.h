/* Device emulation on a CPU rank: a compute phase is made to last slowdown x its compute seconds,
 * the rank sleeping for the rest, so it takes that long without taking a core from the other
 * ranks. The trainer and the profiler both go through these calls, so a profile sees exactly the
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
 * slowdown 12), which the next phase's first all-reduce then waited out. */
#ifndef AH_RUNTIME_EMULATE_H
#define AH_RUNTIME_EMULATE_H

#include "comm/comm.h"

typedef struct ah_emulate_phase {
    double wall, cpu;           /* clocks at the start */
    double comm_wall, comm_cpu; /* ah_comm_seconds at the start */
} ah_emulate_phase_t;

/* Starts a phase. */
void ah_emulate_begin(ah_emulate_phase_t *ph);
/* Ends the phase begun with ah_emulate_begin: with slowdown > 1, sleeps until its time outside
 * communication reaches slowdown x its compute seconds (at once when it already has), those of
 * `group` when not NULL (collective over the group: the mean of its members'). *compute gets
 * this rank's own compute seconds. Fails only when the group's all-reduce does. */
ah_status_t ah_emulate_end(const ah_emulate_phase_t *ph, double slowdown, ah_comm_t *group,
                           double *compute, ah_error_t *err);

#endif
