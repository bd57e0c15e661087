/* libFuzzer harness: a profile (`autohet profile -o FILE` writes it, `--profile FILE` reads it;
 * cost/profile.h).
 *
 * Input: the bytes of the file. Beyond "no crash, no leak, no undefined behaviour", it checks on
 * every profile the parser accepts: each entry's key finds that entry (keys are unique), its
 * figures are finite and >= 0, and its written form reads back and writes out the same (a fixed
 * point: no field dropped between save and load). A refusal names the file.
 * Seeds: tests/corpus/profile/. Run: scripts/run-fuzzers.sh profile.
 */
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"
#include "cost/profile.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fail(const char *what, const char *detail) {
    fprintf(stderr, "fuzz_profile: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
    abort();
}

static bool fig_ok(double x) { return isfinite(x) && x >= 0; }

static char *dump(const ah_profile_t *p) {
    json_t *doc = ah_profile_to_json(p);
    char *text = doc ? json_dumps(doc, JSON_SORT_KEYS | JSON_COMPACT) : NULL;
    json_decref(doc);
    if (!text) fail("profile_to_json failed", NULL);
    return text;
}

static void check_entries(const ah_profile_t *p) {
    for (int i = 0; i < ah_profile_count(p); i++) {
        const ah_profile_entry_t *e = ah_profile_get(p, i);
        if (ah_profile_find(p, e->gpu, e->tp, e->micro_batch, e->seq_len, e->precision) != e)
            fail("an entry's key does not find it", e->gpu);
        if (!fig_ok(e->optimizer_s_per_param)) fail("optimizer figure not finite and >= 0", e->gpu);
        for (int k = 0; k < 3; k++)
            if (e->layer[k].present && (!fig_ok(e->layer[k].fwd_s) || !fig_ok(e->layer[k].bwd_s) ||
                                        e->layer[k].act_bytes < 0))
                fail("layer figure not finite and >= 0", e->gpu);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ah_error_t err;
    json_t *doc = NULL;
    if (ah_json_load_string((const char *)data, size, "profile.json", &doc, &err) != AH_OK) return 0;
    ah_profile_t *p = NULL;
    if (ah_profile_from_json(doc, "profile.json", &p, &err) != AH_OK) {
        if (!strstr(err.msg, "profile.json")) fail("refusal does not name the file", err.msg);
        json_decref(doc);
        return 0;
    }
    json_decref(doc);
    check_entries(p);
    char *first = dump(p);
    json_t *again = json_loads(first, 0, NULL);
    ah_profile_t *back = NULL;
    if (!again || ah_profile_from_json(again, "written profile", &back, &err) != AH_OK)
        fail("the written profile does not read back", again ? err.msg : first);
    char *second = dump(back);
    if (strcmp(first, second) != 0) fail("save/load is not a fixed point", second);
    free(first);
    free(second);
    json_decref(again);
    ah_profile_free(back);
    ah_profile_free(p);
    return 0;
}
