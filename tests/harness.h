/* A minimal test harness: CHECK records a failure with file and line and goes on; a test's
 * main returns ah_test_finish(), which prints "N passed, N failed" and is non-zero on failure. */
#ifndef AH_TESTS_HARNESS_H
#define AH_TESTS_HARNESS_H

#include <stdbool.h>
#include <stdint.h>

void ah_test_check(bool ok, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
int ah_test_finish(void);
/* Runs a test of wall-clock timing up to `tries` times: the checks that fail in an attempt before
 * the last are printed, not counted, and the test runs again; the last attempt counts as usual.
 * For timings a loaded machine can miss now and then; a broken mechanism misses every attempt. */
void ah_test_retry(void (*test)(void), int tries, const char *what);
/* An MPI test's start: not under mpirun, runs this program as np ranks of `mpirun EXTRA -np NP`
 * on this machine, records whether they succeeded and returns true (main then returns
 * ah_test_finish()); under mpirun returns false (the caller is one of the ranks). */
bool ah_test_mpirun_self(int np, const char *extra);
/* Path of a file under the source tree (AH_SOURCE_DIR, or the current directory). */
const char *ah_test_src_path(const char *rel);
/* A cluster from JSON text, named "c.json" in messages (spec/cluster.h ah_cluster_from_json). */
#include "spec/cluster.h"
ah_status_t ah_test_parse_cluster(const char *text, ah_cluster_t *c, ah_error_t *err);

#define CHECK(cond, ...) ah_test_check((cond), __FILE__, __LINE__, __VA_ARGS__)
#define CHECK_EQ_I64(a, b)                                                                     \
    do {                                                                                       \
        long long a_ = (long long)(a), b_ = (long long)(b);                                    \
        ah_test_check(a_ == b_, __FILE__, __LINE__, "%s == %s: %lld != %lld", #a, #b, a_, b_); \
    } while (0)
#define CHECK_NEAR(a, b, rel)                                                                  \
    do {                                                                                       \
        double a_ = (double)(a), b_ = (double)(b);                                             \
        double d_ = a_ > b_ ? a_ - b_ : b_ - a_;                                               \
        double s_ = (a_ > 0 ? a_ : -a_) > (b_ > 0 ? b_ : -b_) ? (a_ > 0 ? a_ : -a_)            \
                                                              : (b_ > 0 ? b_ : -b_);           \
        ah_test_check(d_ <= (rel) * s_ || d_ == 0, __FILE__, __LINE__,                         \
                      "%s ~ %s: %.17g vs %.17g (rel %g)", #a, #b, a_, b_, (double)(rel));      \
    } while (0)
/* The status is `want` and the message contains `needle`. */
#define CHECK_ERR(status, want, err, needle) \
    ah_test_check_err((status), (want), (err).msg, (needle), __FILE__, __LINE__)
void ah_test_check_err(int status, int want, const char *msg, const char *needle, const char *file,
                       int line);

#endif
