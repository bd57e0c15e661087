/* Whether a training rank runs on the host its plan gives it. Rank r of a plan (device order:
 * pipeline, stage, TP rank) belongs on node NODE of the plan's cluster, which on a real cluster is
 * a host name; mpirun puts it wherever its hostfile says, and a wrong hostfile would have ranks
 * read the wrong host's disk and open another host's GPU. The check compares this machine's host
 * name (gethostname, compared up to the first '.' when only one side has a domain) with the
 * node names:
 *   - equal to rank r's node: fine;
 *   - equal to another node of the plan: refused, naming both (the ranks were misplaced);
 *   - none of the plan's nodes: refused when `strict` (autohet train --check-host, which the ssh
 *     launcher passes: node names are host names there), else fine (an emulated cluster whose
 *     node names are labels, every rank on this one machine). */
#ifndef AH_RUNTIME_HOST_CHECK_H
#define AH_RUNTIME_HOST_CHECK_H

#include <stdbool.h>

#include "core/status.h"
#include "plan/plan.h"

ah_status_t ah_host_check(const ah_plan_t *plan, int rank, bool strict, ah_error_t *err);
/* This machine's host name (gethostname, NUL-terminated; "?" when it cannot be read). */
void ah_host_name(char *out, size_t cap);

#endif
