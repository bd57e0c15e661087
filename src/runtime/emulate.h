/* Device emulation on a CPU rank: a compute phase is made to last slowdown x its compute seconds
 * (the typical ones, below), the rank sleeping for the rest, so it takes that long without
 * taking a core from the other ranks. The trainer and the profiler both go through an
 * ah_emulator_t, so a profile sees exactly the emulation that training sees (docs/runtime.md,
 * "Device emulation").
 *
 * A phase's compute seconds are its CPU seconds outside communication (comm/comm.h's
 * ah_comm_seconds), capped by its wall seconds outside communication (several threads can spend
 * more CPU than wall time); the process's CPU less its background threads' (ah_cpu_s: the
 * checkpoint writer's, which writes while the next phases compute, is not the device's work), less
 * the training thread's CPU inside its MPI calls. CPU time, not wall time: when ranks outnumber cores, a rank that waits
 * for a core loses wall time that an emulated device would not lose, and stretching that by the
 * slowdown made each loss count slowdown times. What the phase spent in communication is not
 * stretched: it passes once, as measured.
 *
 * A phase that meets its TP group inside (two all-reduces per block, three in a recomputing
 * backward) is stretched segment by
 * segment: the compute before each all-reduce is stretched before the rank enters it
 * (ah_emulator_split), as a device reaches the collective only when its kernels before it are
 * done. Stretched only at the phase's end, the compute ran at host speed between the meetings,
 * so a partner that had lost its core for a while was waited for at each all-reduce, and that
 * wait was the phase's, on top of the stretch: in a full job (6 ranks on 2 cores) a forward's
 * all-reduces waited 4.0 ms against 1.2 ms in the profile's lone group. Now a rank that lost its
 * core catches up inside its own sleep.
 *
 * The ranks of a TP group emulate one device type together and end each phase together: they
 * agree on the last segment's compute and wall seconds (their means, one small all-reduce), since
 * each stretching its own noise by the slowdown ended their phases apart, which the next phase's
 * first all-reduce then waited out. The all-reduces inside the phase line the segments up.
 *
 * A segment is stretched from its typical compute seconds, not from this one call's: the lower
 * quartile of the last AH_EMULATE_HISTORY calls of the same segment of the same kind of phase (a
 * rank repeats the same forward, backward and optimizer shapes every micro-batch and step). A
 * device runs a repeated kernel sequence in steady time; the emulating host does not. A
 * scheduler or hypervisor hiccup of a few ms counts as the process's CPU time (this VM reports
 * no steal time), and so does sharing a core: ranks that compute at the same moment on fewer
 * cores than ranks evict each other's caches and each spends 20-90 % more CPU on the same phase
 * (four emulated replicas that start every step together, on 2 cores). Stretched k-fold, either
 * made an emulated replica k x that late, and the slowest replica paced the whole data-parallel
 * step. Not the median: such contention hit a third of one plan's phases and moved the median
 * too. The lower quartile takes the rank's uncontended speed, which is what the profile (one
 * process alone) measures, and still follows a lasting change of the host's speed within 6
 * calls. */
#ifndef AH_RUNTIME_EMULATE_H
#define AH_RUNTIME_EMULATE_H

#include "comm/comm.h"

/* Clocks at a moment: wall and CPU seconds, and ah_comm_seconds. */
typedef struct ah_emulate_mark {
    double wall, cpu;
    double comm_wall, comm_cpu;
} ah_emulate_mark_t;

/* The last compute seconds of one segment of one kind of phase. */
#define AH_EMULATE_HISTORY 7
typedef struct ah_emulate_history {
    double seconds[AH_EMULATE_HISTORY];
    int n, next; /* values held, slot of the next one */
} ah_emulate_history_t;

/* A phase's kind: forward, backward (a split backward's B), a split backward's W, the optimizer. */
typedef enum { AH_EMULATE_FWD = 0, AH_EMULATE_BWD, AH_EMULATE_WGRAD, AH_EMULATE_OPT, AH_EMULATE_KINDS } ah_emulate_kind_t;

typedef struct ah_emulator {
    double slowdown;              /* > 1: emulated; otherwise phases are only measured */
    ah_comm_t *group;             /* the TP group, or NULL */
    int max_segments;             /* per phase; later segments share the last history */
    ah_emulate_history_t *history; /* [kind * max_segments + segment] */
    double slept;                 /* seconds slept in all, for clocks that leave the sleeps out */
    /* The phase in progress. */
    ah_emulate_kind_t kind;
    int segment;
    ah_emulate_mark_t phase_start, segment_start;
    double compute; /* compute seconds of its segments so far */
    double late;    /* how far its segments so far ended past their stretched length (a sleep's
                     * wake-up late on a loaded host, a segment's host compute past it): taken
                     * off the next segments' sleeps, so a phase cut into segments (at a TP
                     * all-reduce) lasts what it would whole */
    /* Called every PROGRESS_S of a stretch's sleep when set (the trainer's p2p transfers and
     * overlapped gradient sync: Open MPI moves a non-blocking transfer or collective only inside
     * MPI calls, and an emulated device's communication runs while it computes). */
    void (*progress)(void *ctx);
    void *progress_ctx;
} ah_emulator_t;

/* An emulator for a rank of the given slowdown and TP group (NULL for none) whose phases have at
 * most max_segments segments (an all-reduce inside a phase ends a segment). Fails only for lack of
 * memory. */
ah_status_t ah_emulator_init(ah_emulator_t *e, double slowdown, ah_comm_t *group, int max_segments,
                             ah_error_t *err);
void ah_emulator_free(ah_emulator_t *e);
/* Starts a phase of the given kind (nothing late yet). */
void ah_emulator_begin(ah_emulator_t *e, ah_emulate_kind_t kind);
/* Ends the phase's current segment, before a collective inside the phase: sleeps until the
 * segment's time reaches slowdown x its typical compute seconds, then starts the next one. */
void ah_emulator_split(ah_emulator_t *e);
/* Sleeps until the current segment's wall seconds outside communication reach slowdown x its
 * compute seconds so far, without ending it (no history: the segment's end stretches it whole
 * from its typical seconds, less what it already spent): before a wait inside the phase that the
 * device would reach only then (the overlapped weight all-gather, runtime/dp_groups.h). Not
 * emulated: nothing. */
void ah_emulator_catch_up(ah_emulator_t *e);
/* The wall clock at which the emulated device reaches the rank's present point of the phase,
 * which the host reaches earlier: the segment's start (less what the phase is late) plus its
 * communication's wall seconds and slowdown x its compute seconds so far. Not emulated: now. For
 * work the device would start there without the host stopping (the overlapped sync's buckets:
 * runtime/dp_groups.h), so the phase is not cut into segments. */
double ah_emulator_device_now(const ah_emulator_t *e);
/* Ends the phase: stretches its last segment (collective over the group, which agrees on it) and
 * gives in *compute the phase's own compute seconds (all its segments, unstretched). Fails only
 * when the group's all-reduce does. */
ah_status_t ah_emulator_end(ah_emulator_t *e, double *compute, ah_error_t *err);

#endif
