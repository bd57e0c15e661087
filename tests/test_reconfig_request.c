/* The in-place reconfiguration's request file (runtime/reconfig.h ah_reconfig_parse): a good request's
 * fields, and each malformed one refused naming what is wrong. */
#include <string.h>

#include "harness.h"
#include "runtime/reconfig.h"

static void refused(const char *text, const char *needle) {
    ah_reconfig_req_t r;
    ah_error_t err = {0};
    CHECK_ERR(ah_reconfig_parse(text, &r, &err), AH_ERR_INVALID, err, needle);
}

int main(void) {
    ah_reconfig_req_t r;
    ah_error_t err = {0};
    CHECK(ah_reconfig_parse("{\"step\": 3, \"leave\": [2, 0], \"plan\": \"/x/dp2.json\"}", &r, &err) == AH_OK, "%s",
          err.msg);
    CHECK_EQ_I64(r.step, 3);
    CHECK_EQ_I64(r.n_leave, 2);
    CHECK(r.leave[0] == 2 && r.leave[1] == 0, "leave %d %d", r.leave[0], r.leave[1]);
    CHECK(!strcmp(r.plan, "/x/dp2.json"), "plan %s", r.plan);
    CHECK(ah_reconfig_parse("{\"step\": 1, \"leave\": [], \"plan\": \"p.json\"}", &r, &err) == AH_OK, "%s", err.msg);
    CHECK_EQ_I64(r.n_leave, 0);
    refused("{\"step\": 3, \"leave\": [2]", "not a JSON object");
    refused("[1]", "not a JSON object");
    refused("{\"step\": 0, \"leave\": [], \"plan\": \"p\"}", "\"step\" must be an integer >= 1");
    refused("{\"step\": \"3\", \"leave\": [], \"plan\": \"p\"}", "\"step\" must be an integer >= 1");
    refused("{\"step\": 3, \"plan\": \"p\"}", "\"leave\" must be an array");
    refused("{\"step\": 3, \"leave\": [-1], \"plan\": \"p\"}", "\"leave\"[0] is not a job number");
    refused("{\"step\": 3, \"leave\": [1, \"a\"], \"plan\": \"p\"}", "\"leave\"[1] is not a job number");
    refused("{\"step\": 3, \"leave\": [], \"plan\": \"\"}", "\"plan\" must be a plan file's path");
    refused("{\"step\": 3, \"leave\": [], \"plan\": \"p\", \"at\": 1}", "unknown key \"at\"");
    return ah_test_finish();
}
