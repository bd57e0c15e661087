/* Clocks and the median of a set of timings: one definition for every module that times work. */
#ifndef AH_CORE_TIMING_H
#define AH_CORE_TIMING_H

/* Seconds on the monotonic clock (wall time; one clock for every process of this machine). */
double ah_now_s(void);

/* CPU seconds this process has used, all its threads but the CPU of those marked as background work
 * while they were (ah_cpu_background_begin): the computation's CPU, which device emulation stretches
 * (runtime/emulate.h), without the checkpoint writer's
 * or the uploader's, which on a GPU host run on cores the device's work does not use. Counted in
 * before session 18, the writer's CPU in a phase was stretched by the emulated slowdown as if the
 * device had computed it (docs/runtime.md "Device emulation"). */
double ah_cpu_s(void);

/* CPU seconds the calling thread has used: one clock read where ah_cpu_s reads one more per
 * background thread (communication times every MPI call with it: comm/comm.c). */
double ah_cpu_thread_s(void);

/* Marks the calling thread as background work (its CPU left out of ah_cpu_s from now on) until it
 * calls ah_cpu_background_end, which it must before it exits. Thread-safe. At most
 * AH_CPU_BACKGROUND_MAX threads at once; more are counted as usual (their CPU stays in). */
#define AH_CPU_BACKGROUND_MAX 16
void ah_cpu_background_begin(void);
void ah_cpu_background_end(void);
/* CPU seconds a thread not marked spent on background work inline (the asynchronous checkpoint's
 * copy into its snapshot, made inside AdamW's loop: runtime/ckpt_fuse.c), left out of ah_cpu_s
 * from now on, as a background thread's would be. Thread-safe. */
void ah_cpu_background_add(double seconds);

/* Sleeps `seconds` (<= 0: returns at once), resumed after signals. The first call sets the calling
 * thread's timer slack to 1 ns: with Linux's default 50 us slack a short sleep overshot by about
 * 100 us on this machine's VM, 40-80 us with 1 ns. */
void ah_sleep_s(double seconds);

/* Returns at `deadline` (ah_now_s's clock) as exactly as it can without burning the core: sleeps
 * until AH_SLEEP_SPIN_S before it, then spins. Device emulation ends its phases this way, since a
 * late wake-up lengthens every emulated phase. */
#define AH_SLEEP_SPIN_S 100e-6
void ah_sleep_until(double deadline);

/* The median of x[0, n), n >= 1; sorts x in place. */
double ah_median(double *x, int n);

#endif
