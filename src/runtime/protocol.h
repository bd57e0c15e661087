/* The protocol between the elastic agent (src/elastic/, the reader) and the trainer (src/runtime/,
 * the writer): the files in a launch's run directory, the exit status after a notice and the
 * metrics JSONL schema. Names only (no code): both sides include this header and neither depends
 * on the other. docs/elastic.md describes the whole exchange.
 *
 * Run directory (autohet train --run-dir RUN_DIR; the agent gives every launch its own):
 *   RUN_DIR/rank-R.json     {"rank", "pid", "node", "index", "host"}: written atomically by rank R
 *                           at start-up; the agent learns from it where rank R runs (node name, device
 *                           index on the node, the host name the rank found itself on) and which
 *                           process to signal.
 *   RUN_DIR/preempted.json  {"step", "saved", "nodes"}: written atomically by rank 0 after a
 *                           preemption notice, before every rank exits with
 *                           AH_PROTO_EXIT_PREEMPTED. "step": steps done at the stop; "saved":
 *                           whether a checkpoint of that step was committed; "nodes": the names of
 *                           the nodes some rank of which got the notice.
 *   RUN_DIR/failed.json     {"rank", "class", "message"}: written atomically, before it exits, by
 *                           the rank that stops the job on an error ("rank"; rank 0 for an error all
 *                           ranks agreed on, such as a refused start-up, whose message names the
 *                           rank it came from): "class" is ah_status_key's word for the error
 *                           ("invalid", "io", "comm", ...), "message" what the rank printed (a
 *                           non-UTF-8 byte as '?'). The agent labels the failed job by it.
 *   RUN_DIR/metrics.jsonl   where the agent asks each launch to write its metrics (--metrics).
 *   RUN_DIR/next-plan.json  the plan the agent will relaunch with, written by the agent on every host of
 *                           the job before it sends a notice from its events file (the leaving nodes
 *                           known): with in-memory replicas on, the notice's save hands each file over
 *                           to the memory of the node that reads it under that plan (ckpt/handover.h).
 *   RUN_DIR/reconfigure.json {"step", "leave", "plan"}: an in-place reconfiguration's request, read by
 *                           rank 0 at every step boundary of a world of joined jobs (runtime/reconfig.h).
 *
 * Metrics JSONL (autohet train --metrics FILE; rank 0 writes it, one JSON object a line, appended
 * to after a --resume):
 *   step lines   {"step", "loss", "lr", "grad_norm", "tokens", "seconds", "memory_high_bytes": [per
 *                rank][, "dp_sync_hidden"][, "val_loss"]}: iteration "step" (0-based) finished;
 *                "tokens" trained in it (the global batch's); "seconds" its wall time (without the
 *                validation); "dp_sync_hidden": [H, N] with data parallelism on CPU ranks: of the N
 *                DP sync bucket collectives (summed over the ranks), H were complete when the sync
 *                began to wait, i.e. hidden behind the backward (0 without overlap); "val_loss"
 *                after a validation (--val-data). "loss" and "grad_norm" are null when not
 *                finite. A line without "event" is a step line.
 *   event lines  {"event": NAME, ...}:
 *     "checkpoint" {"step", "seconds", "ok", "files", "bytes": {TIER: n}[, "cloud_step", "error",
 *                  "data_kept": false (the data's shard list could not be kept with it)]}; with a
 *                  cloud "cloud_step" (the newest step complete in the cloud, -1 none), and
 *                  "cloud_behind": true, "cloud_error" when so (runtime/ckpt_io.h)
 *     "cloud"      {"step" (the disk's newest), "cloud_step", "seconds" (the wait for the last
 *                  uploads)[, "cloud_behind", "cloud_error"]}: the end of a run with a cloud
 *     "preempt"    {"step", "seconds" (since the first notice), "saved", "nodes"}
 *     "reconfigure" {"step", "resumed_step", "plan", "leave", "join", "ranks_from", "ranks_to", "pids",
 *                  "seconds": {"save", "split", "teardown", "init", "load"}, "save": "async"|"sync"|
 *                  "none" (to be written behind, the move failed: the last committed step restored,
 *                  "resumed_step", and "redone" steps trained again), "committed" (step committed at
 *                  the change: false when written behind, when the sync save failed, or without
 *                  --local-root)}: an in-place reconfiguration
 *                  (runtime/reconfig.h), written by the new world's rank 0
 *     "recover"    {"step" (resumed from; 0 when nothing found), "found", "seconds" (the restore),
 *                  "bytes", "files", "tier_seconds": {TIER: x} for TIER in local, peer, cloud
 *                  (ah_ckpt_tier_name), "fallbacks"[, "tp_from", "tp_to", "data_position",
 *                  "same_plan", "last_fallback", "repaired": ["rank R: NAME (WHY): the TIER tier's
 *                  copy used; ..."] (ranks whose copy of a file was rejected and another tier's
 *                  taken), "skipped": [{"step", "why"}] (newer steps no tier restored)] or, when
 *                  nothing was found, "note" (why)}
 *     "nonfinite"  {"step", "what", "rank", "loss", "grad_norm" (null when not finite), "skipped",
 *                  "skips_left"}: the step's loss or gradient norm was not finite; no update was
 *                  applied; skipped (its step line follows, with nulls) or the run stopped
 *     "overflow"   {"step", "loss_scale" (the new scale), "overflows" (so far)}: fp16, a step whose
 *                  gradients overflowed, skipped
 * The agent merges every launch's lines into its own metrics file, adding "launch": K, and adds
 * its own events (elastic/agent.h). */
#ifndef AH_RUNTIME_PROTOCOL_H
#define AH_RUNTIME_PROTOCOL_H

/* The trainer's exit status after a preemption notice (BSD EX_TEMPFAIL: try again). */
#define AH_PROTO_EXIT_PREEMPTED 75

/* ---- run directory files ---- */
#define AH_PROTO_RANK_FILE_FMT "rank-%d.json" /* printf format; the argument: the rank */
#define AH_PROTO_PREEMPTED_FILE "preempted.json"
#define AH_PROTO_FAILED_FILE "failed.json"
#define AH_PROTO_METRICS_FILE "metrics.jsonl"
#define AH_PROTO_NEXT_PLAN_FILE "next-plan.json"
#define AH_PROTO_RECONFIG_FILE "reconfigure.json" /* the in-place reconfiguration's request (reconfig.h) */

/* rank-R.json */
#define AH_PROTO_RANK_RANK "rank"
#define AH_PROTO_RANK_PID "pid"
#define AH_PROTO_RANK_NODE "node"
#define AH_PROTO_RANK_INDEX "index"
#define AH_PROTO_RANK_HOST "host"

/* preempted.json */
#define AH_PROTO_PREEMPTED_STEP "step"
#define AH_PROTO_PREEMPTED_SAVED "saved"
#define AH_PROTO_PREEMPTED_NODES "nodes"

/* failed.json */
#define AH_PROTO_FAILED_RANK "rank"
#define AH_PROTO_FAILED_CLASS "class"
#define AH_PROTO_FAILED_MESSAGE "message"

/* ---- metrics JSONL ---- */
#define AH_PROTO_EVENT "event" /* present on event lines only */

/* step lines */
#define AH_PROTO_STEP "step"
#define AH_PROTO_STEP_LOSS "loss"
#define AH_PROTO_STEP_LR "lr"
#define AH_PROTO_STEP_GRAD_NORM "grad_norm"
#define AH_PROTO_STEP_TOKENS "tokens"
#define AH_PROTO_STEP_SECONDS "seconds"
#define AH_PROTO_STEP_MEMORY_HIGH "memory_high_bytes"
#define AH_PROTO_STEP_VAL_LOSS "val_loss" /* optional: after a validation (--val-data) */
#define AH_PROTO_STEP_DP_HIDDEN "dp_sync_hidden" /* optional: [complete before the wait, buckets] */

/* event names */
#define AH_PROTO_EV_CHECKPOINT "checkpoint"
#define AH_PROTO_EV_PREEMPT "preempt"
#define AH_PROTO_EV_RECOVER "recover"
#define AH_PROTO_EV_NONFINITE "nonfinite"
#define AH_PROTO_EV_OVERFLOW "overflow" /* fp16: a skipped step; "step", "loss_scale", "overflows" */
#define AH_PROTO_EV_CLOUD "cloud"       /* the cloud at the end of the run (ckpt_io.h) */
#define AH_PROTO_EV_RECONFIGURE "reconfigure" /* an in-place reconfiguration (reconfig.h) */
#define AH_PROTO_EV_RECONFIGURE_REFUSED "reconfigure_refused" /* its request not taken: "step", "why" (reconfig.h) */

/* fields of the recover event the agent reads ("step" as above) */
#define AH_PROTO_RECOVER_SECONDS "seconds"
#define AH_PROTO_RECOVER_BYTES "bytes"
#define AH_PROTO_RECOVER_FILES "files"
#define AH_PROTO_RECOVER_TIER_SECONDS "tier_seconds"
#define AH_PROTO_RECOVER_NOTE "note"
#define AH_PROTO_RECOVER_REPAIRED "repaired"

#endif
