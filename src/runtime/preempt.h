/* Preemption notices (a cloud's "this VM goes away in N seconds"), as the elastic agent sends
 * them: SIGTERM to the ranks of the node that goes.
 *
 * The handler only sets a flag and notes the time. At a step boundary every rank calls
 * ah_preempt_poll (one all-reduce), so all ranks learn together which nodes got a notice and how
 * long ago the first one came; the trainer then saves if the grace period allows (the rule of
 * ckpt/policy.h, which the simulator shares), writes RUN_DIR/preempted.json and exits with
 * AH_PROTO_EXIT_PREEMPTED (src/runtime/protocol.h).
 * Start-up files for the agent: RUN_DIR/rank-R.json {"rank", "pid", "node", "index", "host"}; a failed
 * job's RUN_DIR/failed.json.
 */
#ifndef AH_RUNTIME_PREEMPT_H
#define AH_RUNTIME_PREEMPT_H

#include <stdbool.h>
#include <stdint.h>

#include "comm/comm.h"
#include "core/status.h"

/* Installs the SIGTERM handler and ignores SIGPIPE (idempotent; preempt.c says why). */
ah_status_t ah_preempt_install(ah_error_t *err);

/* Under mpirun (OMPI_COMM_WORLD_SIZE set): this process is SIGKILLed when the one that started it (mpirun, or
 * Open MPI's daemon on another host) dies, as a rank of a host that died; a singleton is left alone. Called first
 * thing in `autohet train`. preempt.c says why. */
void ah_preempt_die_with_launcher(void);

/* Whether this rank got a notice (SIGTERM) since it started; not collective. */
bool ah_preempt_noticed(void);

/* Collective over c: node_hit[i] (n_nodes entries) becomes 1 for every node some rank of which
 * got a notice (this rank reports its own node my_node); *elapsed_s gets the seconds since the
 * earliest notice anywhere (0 when none). Returns *any. */
ah_status_t ah_preempt_poll(ah_comm_t *c, int my_node, int n_nodes, int *node_hit, bool *any,
                            double *elapsed_s, ah_error_t *err);

/* RUN_DIR/rank-R.json, atomically. */
ah_status_t ah_preempt_write_rank_file(const char *run_dir, int rank, const char *node, int index,
                                       ah_error_t *err);
/* RUN_DIR/preempted.json {"step", "saved", "nodes"}, atomically. */
ah_status_t ah_preempt_write_report(const char *run_dir, int64_t step, bool saved,
                                    const char *const *nodes, int n_nodes, ah_error_t *err);
/* RUN_DIR/failed.json {"rank", "class", "message"} of `failure`, atomically. */
ah_status_t ah_preempt_write_failure(const char *run_dir, int rank, const ah_error_t *failure, ah_error_t *err);

#endif
