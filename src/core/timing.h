/* Clocks and the median of a set of timings: one definition for every module that times work. */
#ifndef AH_CORE_TIMING_H
#define AH_CORE_TIMING_H

/* Seconds on the monotonic clock (wall time; one clock for every process of this machine). */
double ah_now_s(void);

/* CPU seconds this process has used, all its threads. */
double ah_cpu_s(void);

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
