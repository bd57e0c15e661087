/* Plan-file checks shared by the plan tests (tests/test_plan.c, tests/test_schedules.c): a plan
 * document read and validated as `autohet train --plan` would, its status and message checked. */
#ifndef AH_TESTS_PLAN_CHECK_H
#define AH_TESTS_PLAN_CHECK_H

#include <jansson.h>

/* Reads `doc` (consumed) with ah_plan_from_json, then validates it; the status must be `want` and
 * the message must contain n1 and n2 (NULL: no needle). A failure names the caller's line. */
void ah_test_expect_plan(json_t *doc, int want, const char *n1, const char *n2, const char *file, int line);
#define EXPECT(doc, want, n1, n2) ah_test_expect_plan((doc), (want), (n1), (n2), __FILE__, __LINE__)

#endif
