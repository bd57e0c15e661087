/* Ring attention's CPU kernels against what the cost model charged a CP rank before the profile
 * measured them: one CP rank's forward and backward at CP c (ah_profile_measure_attention, the
 * profile's own figures: least thread CPU seconds over repeats) against 1/c of the one-process
 * causal attention at the whole T (what the profile's block, divided by c, gives attention).
 * Every CP rank does the same work (the causal load balance).
 *
 * usage: bench_ring_kernels [MODEL [T [REPS]]]   (default demo-gpt2 512 200: bench/bench_cp.sh's
 * shape) Never run by CTest. */
#include <stdio.h>
#include <stdlib.h>

#include "kernels/kernels.h"
#include "runtime/profile.h"

int main(int argc, char **argv) {
    const char *name = argc > 1 ? argv[1] : "demo-gpt2";
    const int64_t T = argc > 2 ? atoll(argv[2]) : 512;
    const int reps = argc > 3 ? atoi(argv[3]) : 200;
    ah_model_t m;
    ah_error_t err = {0};
    if (argc > 4 || T < 2 || reps < 1 || ah_model_load(name, &m, &err) != AH_OK) {
        fprintf(stderr, "usage: %s [MODEL [T [REPS]]] %s\n", argv[0], err.msg);
        return 2;
    }
    const ah_profile_req_t req = {.model = &m, .gpu = "cpu", .seq_len = T, .tp = 1, .micro_batch = 1, .reps = reps};
    ah_profile_entry_t e = {0};
    ah_profile_measure_attention(&req, ah_kernels_cpu(), &e);
    if (!e.attention.present) {
        fprintf(stderr, "bench_ring_kernels: out of host memory\n");
        return 1;
    }
    printf("bench_ring_kernels: %s, T=%lld, micro-batch 1, CPU ms of one thread (least of %d)\n", m.name, (long long)T,
           reps);
    printf("one process at T: attention fwd %.3f, bwd %.3f\n", e.attention.fwd_s * 1e3, e.attention.bwd_s * 1e3);
    printf("%-3s %-10s %12s %14s %8s\n", "cp", "pass", "ring rank", "1/cp of it", "ratio");
    for (int k = 1; k < 4; k++) {
        if (!e.ring[k].present) continue;
        const int c = 1 << k;
        printf("%-3d %-10s %12.3f %14.3f %8.2f\n", c, "forward", e.ring[k].fwd_s * 1e3, e.attention.fwd_s / c * 1e3,
               e.ring[k].fwd_s / (e.attention.fwd_s / c));
        printf("%-3d %-10s %12.3f %14.3f %8.2f\n", c, "backward", e.ring[k].bwd_s * 1e3, e.attention.bwd_s / c * 1e3,
               e.ring[k].bwd_s / (e.attention.bwd_s / c));
    }
    return 0;
}
