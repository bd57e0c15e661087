/* The handover at a notice (issue 36; docs/checkpoints.md "The handover at a notice"): which files of
 * a step each node of the NEXT plan reads, so that the job stopping at a notice, every rank still
 * alive, can move each file into the memory of the host that will read it and the relaunch reads
 * everything on its own host. Pure: two plans in, names out; no MPI, no files.
 *
 * Nodes are the old plan's (its cluster's indices); a node of the next plan is matched to the old
 * one by name (a node the old plan's cluster lacks reads nothing through the handover: the restore
 * fetches its files as usual). A next-plan rank reads, for each group it loads (ckpt/placement.h,
 * with the embedding on a last stage), the pieces ckpt/reshard.h names at the old TP degree T: its
 * own TP index when the degree stays, every piece of a split layer when it changes.
 *
 * Ownership: ah_handover_needs allocates; ah_handover_needs_free frees (a zeroed one is fine). */
#ifndef AH_CKPT_HANDOVER_H
#define AH_CKPT_HANDOVER_H

#include <stdbool.h>

#include "ckpt/ckpt.h"
#include "plan/plan.h"

typedef struct ah_handover_needs {
    int n_nodes;                       /* the old plan's cluster's nodes */
    int *n_names;                      /* [n_nodes]: how many files the node's next ranks read */
    char (**names)[AH_CKPT_NAME_MAX];  /* [n_nodes][n_names]: their names, each once */
    bool *in_next;                     /* [n_nodes]: the next plan has ranks there */
} ah_handover_needs_t;

/* What each of old_cluster's nodes reads under next, its pieces saved at TP degree T. A next plan
 * on another model is refused (AH_ERR_INVALID, naming both). */
ah_status_t ah_handover_needs(const ah_plan_t *next, const ah_cluster_t *old_cluster, const ah_model_t *model, int T,
                              ah_handover_needs_t *out, ah_error_t *err);
/* Whether node reads the file name under the next plan. */
bool ah_handover_reads(const ah_handover_needs_t *h, int node, const char *name);
void ah_handover_needs_free(ah_handover_needs_t *h);

#endif
