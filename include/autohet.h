/* autohet public API: the module headers a program embedding autohet needs.
 *
 *   spec/model.h, spec/cluster.h   what is trained, and on what
 *   cost/cost.h, plan/evaluate.h   what a layout costs in seconds and bytes
 *   plan/plan.h                    the plan file: read, write, validate
 *
 * Every function that can fail returns ah_status_t and fills an ah_error_t (core/status.h).
 */
#ifndef AUTOHET_H
#define AUTOHET_H

#include "core/status.h"
#include "cost/cost.h"
#include "plan/evaluate.h"
#include "plan/plan.h"
#include "spec/arch.h"
#include "spec/cluster.h"
#include "spec/model.h"

#endif
