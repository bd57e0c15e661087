/* Clocks and the median of a set of timings: one definition for every module that times work. */
#ifndef AH_CORE_TIMING_H
#define AH_CORE_TIMING_H

/* Seconds on the monotonic clock (wall time; one clock for every process of this machine). */
double ah_now_s(void);

/* CPU seconds this process has used, all its threads. */
double ah_cpu_s(void);

/* The median of x[0, n), n >= 1; sorts x in place. */
double ah_median(double *x, int n);

#endif
