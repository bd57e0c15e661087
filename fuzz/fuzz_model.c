/* libFuzzer harness: a Hugging Face config.json, as `--model FILE` reads it.
 *
 * Input: the bytes of the file. Beyond "no crash, no leak, no undefined behaviour", it checks two
 * properties on every config the parser accepts: the model survives the plan-file form
 * (to_json -> from_json gives an equal model), and the accounting a user sees first
 * (`autohet model`: parameter count, TP splits) runs without overflow on it.
 * Seeds: tests/corpus/model/. Run: scripts/run-fuzzers.sh or build-fuzz/fuzz_model DIR.
 */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/json.h"
#include "cost/cost.h"
#include "plan/plan.h"
#include "spec/model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ah_error_t err;
    json_t *doc = NULL;
    if (ah_json_load_string((const char *)data, size, "config.json", &doc, &err) != AH_OK) return 0;

    ah_model_t m;
    if (ah_model_from_hf_json(doc, "config.json", &m, &err) == AH_OK) {
        json_t *obj = ah_model_to_json(&m);
        ah_model_t back;
        if (!obj || ah_model_from_json(obj, "plan.json: model", &back, &err) != AH_OK ||
            !ah_model_equal(&m, &back)) {
            fprintf(stderr, "model did not survive to_json/from_json: %s\n",
                    obj ? err.msg : "to_json returned NULL");
            abort();
        }
        json_decref(obj);
        if (ah_model_params_total(&m) <= 0) {
            fprintf(stderr, "accepted model has %lld parameters\n",
                    (long long)ah_model_params_total(&m));
            abort();
        }
        for (int t = 1; t <= AH_MAX_TP; t *= 2) (void)ah_model_check_tp(&m, t, &err);
    }
    json_decref(doc);
    return 0;
}
