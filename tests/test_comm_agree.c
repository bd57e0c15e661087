/* ah_comm_agree over 3 real MPI ranks: the message every rank gets, and which rank it names. Run
 * alone (as CTest does), it starts itself under `mpirun -np 3` and passes when that run does. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "comm/comm.h"
#include "core/timing.h"
#include "elastic/launcher.h"
#include "harness.h"

/* Agrees over c on this rank's status (fails with msg when `fails`) and checks what comes back. */
static void expect(ah_comm_t *c, bool fails, const char *msg, ah_status_t code, const char *want,
                   const char *what) {
    ah_error_t err = {0};
    ah_status_t local = fails ? ah_error_set(&err, AH_ERR_IO, "%s", msg) : AH_OK;
    ah_status_t s = ah_comm_agree(c, local, &err);
    CHECK(s == code, "%s: status %d, expected %d", what, (int)s, (int)code);
    if (code != AH_OK) CHECK(strcmp(err.msg, want) == 0, "%s: \"%s\", expected \"%s\"", what, err.msg, want);
}

static int run_ranks(void) {
    ah_error_t err;
    const int me = ah_comm_rank(ah_comm_world());
    ah_comm_t *world = ah_comm_world();
    expect(world, false, "", AH_OK, "", "nobody fails");
    expect(world, me == 1, "disk full", AH_ERR_IO, "rank 1: disk full", "rank 1 alone fails");
    expect(world, me >= 1, "disk full", AH_ERR_IO, "rank 1: disk full", "ranks 1 and 2 fail");
    expect(world, true, "no such file", AH_ERR_IO, "no such file", "every rank fails alike");
    char mine[32];
    snprintf(mine, sizeof mine, "cannot open f%d", me);
    expect(world, true, mine, AH_ERR_IO, "rank 0: cannot open f0", "every rank fails its own way");
    /* A group of ranks 1 and 2, as a node's group: rank 2 is its member 1 but world rank 2. */
    ah_comm_t *node = NULL;
    CHECK(ah_comm_split(world, me == 0 ? -1 : 1, me, &node, &err) == AH_OK, "split: %s", err.msg);
    if (node) expect(node, me == 2, "write failed", AH_ERR_IO, "rank 2: write failed", "named by world rank");
    /* Nested: the group agrees first, then the world on the group leader's status, as a
     * checkpoint's node commit does; the rank is named once. */
    ah_error_t e = {0};
    ah_status_t ns = AH_OK;
    if (node) ns = ah_comm_agree(node, me == 2 ? ah_error_set(&e, AH_ERR_IO, "write failed") : AH_OK, &e);
    ah_status_t ws = ah_comm_agree(world, me == 1 ? ns : AH_OK, &e);
    CHECK(ws == AH_ERR_IO && strcmp(e.msg, "rank 2: write failed") == 0, "nested: \"%s\"", e.msg);
    ah_comm_free(&node);
    return ah_test_finish();
}

int main(int argc, char **argv) {
    if (ah_test_mpirun_self(3, "")) return ah_test_finish(); /* not under mpirun */
    ah_error_t err;
    if (ah_comm_init(&argc, &argv, &err) != AH_OK) {
        fprintf(stderr, "test_comm_agree: %s\n", err.msg);
        return 1;
    }
    const int rc = run_ranks();
    /* The finalize's wait for the job's last rank (comm.c job_end_barrier) sleeps under AH_COMM_WAIT=poll too:
     * ranks 1 and 2 finalize 1 s after rank 0, whose CPU meanwhile stays well under its wall time (MPI_Wait spun
     * it: 0.3-1 s of CPU, by the core it got). */
    ah_comm_set_wait(AH_COMM_WAIT_POLL);
    const int me = ah_comm_rank(ah_comm_world());
    if (me != 0) ah_sleep_s(1.0);
    struct timespec c0, c1;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
    const double w0 = ah_now_s();
    ah_comm_finalize();
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
    const double cpu = (double)(c1.tv_sec - c0.tv_sec) + 1e-9 * (double)(c1.tv_nsec - c0.tv_nsec), wall = ah_now_s() - w0;
    if (me == 0) {
        CHECK(wall > 0.5 && cpu < 0.15, "rank 0's finalize under AH_COMM_WAIT=poll: %.3f s of CPU in %.3f s", cpu, wall);
        printf("finalize under poll: rank 0 %.3f s of CPU in %.3f s\n", cpu, wall);
    }
    return rc ? rc : ah_test_finish();
}
