/* A test-only hook: a process stops at a named phase of a chosen step so that a test can kill
 * its host there, without sleeps (tests/test_cluster_hook.sh; docs/multi-host.md).
 *
 *   AH_TEST_HOOK="phase=P,step=N[,node=NAME],file=PATH"     (action=wait, the default)
 *   AH_TEST_HOOK="phase=P,step=N[,node=NAME],action=kill"
 *   (step=any: at every step, for a point whose step a test cannot know in advance: a notice's;
 *   step=N+: at the first time the point is reached at step N or later, for a step that may be
 *   skipped: an upload replaced by a newer step's before it began)
 *
 * P is one of
 *   step        mid-step: step N's (0-based, the metrics' "step") forward and backward are done,
 *               its gradient sync not started;
 *   ckpt-piece  mid-checkpoint: the first of this rank's shard files of checkpoint step N is
 *               written, the others not (ranks that write none never get here);
 *   ckpt-write  mid-checkpoint: this rank's shard files of checkpoint step N are written, the
 *               node's manifest not committed;
 * (with asynchronous checkpoints, ckpt-piece and ckpt-write are on the background writer's thread
 * while the rank trains on: ckpt/async.h)
 *   notice-snapshot  mid-notice-save with in-memory replicas (runtime/ckpt_notice.c): every rank's
 *               pieces of step N are in its own host's memory, committed there; not yet sent to a
 *               peer's memory nor written to a disk;
 *   notice-memory    mid-notice-save: step N is committed in peers' memory, its disk write not
 *               started;
 *   replica     mid-replication into peers' memory (runtime/ckpt_replica.c, periodic and notice saves
 *               alike): the holder node's first file of step N is received, its manifest of step N
 *               not written (node= names the holder);
 *   upload      mid-upload: the node leader's uploader has put checkpoint step N's shard objects
 *               in the cloud, not its manifest (so the cloud copy of step N does not count yet);
 *   notice-uploads  the notice at step N answered (saved or not), which uploads the exit drops not
 *               yet decided (runtime/ckpt_notice.c ah_ckpt_notice_uploads);
 *   reconfig-split  an in-place reconfiguration at step N (runtime/reconfig.h): a leaving rank has
 *               split the world and freed every communicator of the old one, not yet finalized;
 *   reconfig-save   an in-place reconfiguration at step N (a run with --local-root): a snapshot in flight
 *               committed, whether the step is written behind decided (runtime/ckpt_io.h
 *               ah_ckpt_session_change_begin), the save before the move (when made) and the move not started;
 *   reconfig-move   an in-place reconfiguration at step N, its save done: the state about to move rank to
 *               rank (runtime/reconfig_move.h); with action=fail (this point only) the process cannot take
 *               part in the move, as one that cannot load the next plan, and the change falls back to
 *               the restore from the checkpoint just saved; with action=nomem (this point only) the
 *               process's first buffer of a piece it sends is not allocated, as a map under RLIMIT_AS
 *               that fails, and the change falls back the same (no rank waits for its messages);
 *   reconfig-join   a join's request at step N (one with "join") read by rank 0, before the ranks learn
 *               whether one got a notice since the step boundary (a notice then goes first); with action=fail
 *               (refused there) the trainer refuses it, said, and trains on, as at any refused request (action=failonce:
 *               the process's first such request only, a later one taken); with
 *               action=nomem, in a joining job admitted at step N: its buffers for the pieces the staying ranks
 *               send it are not allocated (reconfig_move.h ah_reconfig_move_join), and the change falls back
 *               to the restore from the checkpoint just saved, agreed before any piece is sent;
 *   resume-list     a resume (runtime/ckpt_resume.c), step 0: the peers' manifests shared, this node's disk
 *               not yet listed for the catalog (a test changes the disk there: ranks that see different steps).
 * With node=NAME only the processes of the plan's node NAME stop (on a real cluster, that host).
 * A process that reaches the point creates PATH (its first line "PHASE STEP NODE PID", in PATH's
 * directory on its own host) and then waits there forever, signals keeping their default action:
 * the test kills it (its whole host) once PATH is there. With action=kill it kills itself there
 * (SIGKILL, as an OOM kill would: no error written), every time it gets there, so a relaunch that
 * trains the step again dies again: a deterministic crash. With action=pause it creates PATH and
 * waits until the test removes it, then goes on (the test acts at that point: rewrites a run file).
 * Unset or empty: nothing happens. A
 * malformed value is a bug in the test: the process prints what is wrong, naming the variable,
 * and exits 2. Never for production use; the cost when unset is one getenv.
 */
#ifndef AH_CKPT_TEST_HOOK_H
#define AH_CKPT_TEST_HOOK_H

#include <stdbool.h>
#include <stdint.h>

/* The hook point `phase` at `step` on plan node `node` (NULL: unknown, then a node= filter
 * never matches). Returns only when the hook does not match. */
void ah_test_hook(const char *phase, int64_t step, const char *node);
/* Whether the hook names this point with action=fail (ah_test_hook ignores such a hook). */
bool ah_test_hook_fails(const char *phase, int64_t step, const char *node);
/* Whether the hook names this point with action=nomem (ah_test_hook ignores such a hook). */
bool ah_test_hook_nomem(const char *phase, int64_t step, const char *node);

#endif
