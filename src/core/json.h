/* JSON helpers on top of Jansson (chosen because it reports line and column of syntax errors).
 *
 * Loading: ah_json_load_file / ah_json_load_string / ah_json_load_line (one line of a JSON-lines
 * file) give "FILE:LINE:COLUMN: what" on bad syntax.
 * Reading fields: the ah_json_get_* functions check presence, type and range and name the
 * field by its path in the message ("cluster.json: nodes[2].count: expected an integer >= 1,
 * got -3"). `where` is the file name plus the JSON path of `obj`, e.g. "cluster.json: nodes[2]".
 * Unknown keys are rejected with ah_json_check_keys so that a misspelt field is not ignored.
 */
#ifndef AH_CORE_JSON_H
#define AH_CORE_JSON_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/status.h"

/* New reference on success. */
ah_status_t ah_json_load_file(const char *path, json_t **out, ah_error_t *err);
ah_status_t ah_json_load_string(const char *text, size_t len, const char *name, json_t **out,
                                ah_error_t *err);
/* Line `line` of a JSON-lines file `path`: errors say "PATH:LINE:COLUMN: what". */
ah_status_t ah_json_load_line(const char *text, size_t len, const char *path, int line, json_t **out,
                              ah_error_t *err);

/* Writes pretty JSON to path atomically (temp file + rename). */
ah_status_t ah_json_save_file(const json_t *doc, const char *path, ah_error_t *err);

/* Field readers. `required` false: a missing field leaves *out unchanged and returns AH_OK. */
ah_status_t ah_json_get_int(const json_t *obj, const char *where, const char *key, bool required,
                            int64_t min, int64_t max, int64_t *out, ah_error_t *err);
ah_status_t ah_json_get_num(const json_t *obj, const char *where, const char *key, bool required,
                            double min, double max, double *out, ah_error_t *err);
ah_status_t ah_json_get_bool(const json_t *obj, const char *where, const char *key, bool required,
                             bool *out, ah_error_t *err);
/* Copies at most cap-1 bytes; a longer string is an error, not a truncation. */
ah_status_t ah_json_get_str(const json_t *obj, const char *where, const char *key, bool required,
                            char *out, size_t cap, ah_error_t *err);
/* Borrowed reference to an object/array member of the given type (JSON_OBJECT/JSON_ARRAY). */
ah_status_t ah_json_get_typed(const json_t *obj, const char *where, const char *key,
                              json_type type, bool required, json_t **out, ah_error_t *err);

/* An error unless v, at `where`, is an object: "WHERE: expected an object, got a string". */
ah_status_t ah_json_expect_object(const json_t *v, const char *where, ah_error_t *err);
/* Fails on any key of obj not in the NULL-terminated list `allowed`, naming it. */
ah_status_t ah_json_check_keys(const json_t *obj, const char *where, const char *const *allowed,
                               ah_error_t *err);

/* The number at key, or NAN when it is absent or not a number (for lenient readers of files this
 * program wrote, such as a trainer's metrics lines). */
double ah_json_num_or_nan(const json_t *obj, const char *key);
/* "a number", "a string", ... for messages. */
const char *ah_json_type_name(const json_t *v);

#endif
