#include "plan_check.h"

#include <string.h>

#include "harness.h"
#include "plan/plan.h"

void ah_test_expect_plan(json_t *doc, int want, const char *n1, const char *n2, const char *file, int line) {
    ah_plan_t p;
    ah_error_t err = {0};
    ah_status_t s = ah_plan_from_json(doc, "plan.json", NULL, &p, &err);
    if (s == AH_OK) {
        s = ah_plan_validate(&p, &err);
        ah_plan_free(&p);
    }
    json_decref(doc);
    ah_test_check((int)s == want && (!n1 || strstr(err.msg, n1)) && (!n2 || strstr(err.msg, n2)), file, line,
                  "want status %d with \"%s\" and \"%s\", got %d: %s", want, n1 ? n1 : "", n2 ? n2 : "", s,
                  s == AH_OK ? "(ok)" : err.msg);
}
