/* libFuzzer harness: a plan file, as `autohet evaluate PLAN` and `autohet train` read it.
 *
 * Input: the bytes of the file. Each input is read twice: with the cluster the plan carries, and
 * with a fixed built-in cluster given as the override (`--cluster mixed-32`). A plan that reads
 * is validated; a valid one is checked and evaluated. Beyond "no crash, no leak, no undefined
 * behaviour" it checks: a valid plan's written form reads back valid and writes out the same
 * (a fixed point); evaluation covers every device; its times are finite and non-negative; and
 * `feasible` agrees with ah_plan_check (the memory rule is one rule, not two).
 * Seeds: tests/corpus/plan/. Run: scripts/run-fuzzers.sh or build-fuzz/fuzz_plan DIR.
 */
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/json.h"
#include "plan/evaluate.h"
#include "plan/plan.h"
#include "spec/cluster.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Lives for the whole run (reachable, so LeakSanitizer does not count it). */
static ah_cluster_t g_override;

static void fail(const char *what, const char *detail) {
    fprintf(stderr, "fuzz_plan: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
    abort();
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    ah_error_t err;
    if (ah_cluster_builtin("mixed-32", &g_override, &err) != AH_OK) fail("built-in cluster", err.msg);
    return 0;
}

static bool finite_nonneg(double x) { return isfinite(x) && x >= 0; }

static void check_eval(const ah_plan_t *p) {
    ah_error_t err;
    ah_eval_t e;
    if (ah_evaluate(p, NULL, &e, &err) != AH_OK) return; /* a clear refusal is allowed */
    if (e.n_devices != ah_plan_device_count(p)) fail("evaluation skipped devices", NULL);
    const ah_prediction_t *r = &e.pred;
    const ah_breakdown_t *b = &r->breakdown;
    if (!finite_nonneg(r->iteration_s) || !finite_nonneg(r->tokens_per_s) ||
        !finite_nonneg(b->compute_s) || !finite_nonneg(b->bubble_s) || !finite_nonneg(b->p2p_s) ||
        !finite_nonneg(b->tp_comm_s) || !finite_nonneg(b->dp_sync_s) ||
        !finite_nonneg(b->optimizer_s) || r->memory_bytes < 0)
        fail("prediction not finite and non-negative", NULL);
    bool fits = ah_plan_check(p, NULL, &err) == AH_OK;
    if (fits != e.feasible)
        fail(e.feasible ? "evaluate says feasible, ah_plan_check refuses"
                        : "evaluate says infeasible, ah_plan_check accepts",
             fits ? NULL : err.msg);
    ah_eval_free(&e);
}

static void check_round_trip(const ah_plan_t *p) {
    ah_error_t err;
    json_t *j1 = ah_plan_to_json(p);
    if (!j1) fail("to_json returned NULL", NULL);
    ah_plan_t back = {0};
    if (ah_plan_from_json(j1, "written plan", NULL, &back, &err) != AH_OK)
        fail("written form of a valid plan does not read", err.msg);
    if (ah_plan_validate(&back, &err) != AH_OK) fail("written form of a valid plan is invalid", err.msg);
    json_t *j2 = ah_plan_to_json(&back);
    if (!j2 || !json_equal(j1, j2)) fail("written form changes on a round trip", NULL);
    json_decref(j1);
    json_decref(j2);
    ah_plan_free(&back);
}

static void one(const json_t *doc, const ah_cluster_t *override) {
    ah_error_t err;
    /* On failure the reader must leave nothing allocated: no free here, LeakSanitizer checks. */
    ah_plan_t p = {0};
    if (ah_plan_from_json(doc, "plan.json", override, &p, &err) != AH_OK) return;
    if (ah_plan_validate(&p, &err) == AH_OK) {
        check_round_trip(&p);
        check_eval(&p);
    }
    ah_plan_free(&p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ah_error_t err;
    json_t *doc = NULL;
    if (ah_json_load_string((const char *)data, size, "plan.json", &doc, &err) != AH_OK) return 0;
    one(doc, NULL);
    one(doc, &g_override);
    json_decref(doc);
    return 0;
}
