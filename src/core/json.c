#include "core/json.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core/fs.h"
#include "core/str.h"

static ah_status_t from_jansson_error(const json_error_t *je, const char *name, ah_error_t *err) {
    if (je->line <= 0)
        return ah_error_set(err, AH_ERR_PARSE, "%s: invalid JSON: %s", name, je->text);
    return ah_error_set(err, AH_ERR_PARSE, "%s:%d:%d: invalid JSON: %s", name, je->line,
                        je->column, je->text);
}

ah_status_t ah_json_load_file(const char *path, json_t **out, ah_error_t *err) {
    *out = NULL;
    if (ah_fs_is_dir(path))
        return ah_error_set(err, AH_ERR_IO, "%s: is a directory, not a JSON file", path);
    FILE *f = fopen(path, "rb");
    if (!f) return ah_error_set(err, AH_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    json_error_t je;
    *out = json_loadf(f, JSON_REJECT_DUPLICATES, &je);
    fclose(f);
    if (!*out) return from_jansson_error(&je, path, err);
    return AH_OK;
}

ah_status_t ah_json_load_string(const char *text, size_t len, const char *name, json_t **out,
                                ah_error_t *err) {
    json_error_t je;
    *out = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    if (!*out) return from_jansson_error(&je, name, err);
    return AH_OK;
}

ah_status_t ah_json_save_file(const json_t *doc, const char *path, ah_error_t *err) {
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid()) >= (int)sizeof tmp)
        return ah_error_set(err, AH_ERR_IO, "%s: path too long", path);
    if (json_dump_file(doc, tmp, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17)) != 0) {
        unlink(tmp);
        return ah_error_set(err, AH_ERR_IO, "%s: cannot write (%s)", path, strerror(errno));
    }
    if (rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        return ah_error_set(err, AH_ERR_IO, "%s: cannot write: %s", path, strerror(e));
    }
    return AH_OK;
}

ah_status_t ah_json_load_line(const char *text, size_t len, const char *path, int line, json_t **out,
                              ah_error_t *err) {
    json_error_t je;
    *out = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    if (*out) return AH_OK;
    if (je.line <= 0) return ah_error_set(err, AH_ERR_PARSE, "%s:%d: invalid JSON: %s", path, line, je.text);
    return ah_error_set(err, AH_ERR_PARSE, "%s:%d:%d: invalid JSON: %s", path, line, je.column, je.text);
}

const char *ah_json_type_name(const json_t *v) {
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a number";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    case JSON_NULL: return "null";
    }
    return "a value";
}

/* Short rendering of a value for messages ("-3", "\"A100\"", "an object"). */
static void describe(const json_t *v, char *buf, size_t cap) {
    if (json_is_integer(v)) snprintf(buf, cap, "%lld", (long long)json_integer_value(v));
    else if (json_is_real(v)) snprintf(buf, cap, "%g", json_real_value(v));
    else if (json_is_string(v)) snprintf(buf, cap, "\"%.60s\"", json_string_value(v));
    else if (json_is_boolean(v)) snprintf(buf, cap, "%s", json_is_true(v) ? "true" : "false");
    else snprintf(buf, cap, "%s", ah_json_type_name(v));
}

static ah_status_t missing(const char *where, const char *key, const char *what, ah_error_t *err) {
    return ah_error_set(err, AH_ERR_INVALID, "%s: missing field \"%s\" (%s)", where, key, what);
}

/* where.key holds v, which is not `what`. */
static ah_status_t wrong_type(const char *where, const char *key, const char *what, const json_t *v,
                              ah_error_t *err) {
    char got[96];
    describe(v, got, sizeof got);
    return ah_error_set(err, AH_ERR_INVALID, "%s.%s: expected %s, got %s", where, key, what, got);
}

ah_status_t ah_json_get_int(const json_t *obj, const char *where, const char *key, bool required,
                            int64_t min, int64_t max, int64_t *out, ah_error_t *err) {
    const json_t *v = json_object_get(obj, key);
    char what[96];
    snprintf(what, sizeof what, "an integer in [%lld, %lld]", (long long)min, (long long)max);
    if (!v) return required ? missing(where, key, what, err) : AH_OK;
    int64_t x;
    if (json_is_integer(v)) {
        x = json_integer_value(v);
    } else if (json_is_real(v) && floor(json_real_value(v)) == json_real_value(v) &&
               fabs(json_real_value(v)) < 9e15) {
        x = (int64_t)json_real_value(v); /* 4.0 is accepted as 4 */
    } else {
        return wrong_type(where, key, what, v, err);
    }
    if (x < min || x > max)
        return ah_error_set(err, AH_ERR_INVALID, "%s.%s: expected %s, got %lld", where, key, what,
                            (long long)x);
    *out = x;
    return AH_OK;
}

ah_status_t ah_json_get_num(const json_t *obj, const char *where, const char *key, bool required,
                            double min, double max, double *out, ah_error_t *err) {
    const json_t *v = json_object_get(obj, key);
    char what[96];
    snprintf(what, sizeof what, "a number in [%g, %g]", min, max);
    if (!v) return required ? missing(where, key, what, err) : AH_OK;
    if (!json_is_number(v)) return wrong_type(where, key, what, v, err);
    double x = json_number_value(v);
    if (!(x >= min && x <= max))
        return ah_error_set(err, AH_ERR_INVALID, "%s.%s: expected %s, got %g", where, key, what, x);
    *out = x;
    return AH_OK;
}

ah_status_t ah_json_get_bool(const json_t *obj, const char *where, const char *key, bool required,
                             bool *out, ah_error_t *err) {
    const json_t *v = json_object_get(obj, key);
    if (!v) return required ? missing(where, key, "true or false", err) : AH_OK;
    if (!json_is_boolean(v)) return wrong_type(where, key, "true or false", v, err);
    *out = json_is_true(v);
    return AH_OK;
}

ah_status_t ah_json_get_str(const json_t *obj, const char *where, const char *key, bool required,
                            char *out, size_t cap, ah_error_t *err) {
    const json_t *v = json_object_get(obj, key);
    if (!v) return required ? missing(where, key, "a string", err) : AH_OK;
    if (!json_is_string(v)) return wrong_type(where, key, "a string", v, err);
    size_t n = json_string_length(v);
    if (n + 1 > cap)
        return ah_error_set(err, AH_ERR_INVALID, "%s.%s: string of %zu bytes is too long (at most %zu)",
                            where, key, n, cap - 1);
    if (strlen(json_string_value(v)) != n)
        return ah_error_set(err, AH_ERR_INVALID, "%s.%s: string contains a NUL byte", where, key);
    memcpy(out, json_string_value(v), n + 1);
    return AH_OK;
}

ah_status_t ah_json_get_typed(const json_t *obj, const char *where, const char *key,
                              json_type type, bool required, json_t **out, ah_error_t *err) {
    json_t *v = json_object_get(obj, key);
    const char *want = type == JSON_OBJECT ? "an object" : type == JSON_ARRAY ? "an array" : "a value";
    if (!v) return required ? missing(where, key, want, err) : AH_OK;
    if (json_typeof(v) != type)
        return ah_error_set(err, AH_ERR_INVALID, "%s.%s: expected %s, got %s", where, key, want,
                            ah_json_type_name(v));
    *out = v;
    return AH_OK;
}

ah_status_t ah_json_check_keys(const json_t *obj, const char *where, const char *const *allowed,
                               ah_error_t *err) {
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)obj, key, v) {
        bool ok = false;
        for (const char *const *a = allowed; *a; a++)
            if (strcmp(*a, key) == 0) { ok = true; break; }
        if (!ok) {
            char list[512];
            ah_str_t s = ah_str_fixed(list, sizeof list);
            for (const char *const *a = allowed; *a; a++) ah_str_appendf(&s, "%s%s", a == allowed ? "" : ", ", *a);
            return ah_error_set(err, AH_ERR_INVALID, "%s: unknown field \"%s\" (allowed: %s)", where,
                                key, list);
        }
    }
    (void)v;
    return AH_OK;
}

double ah_json_num_or_nan(const json_t *obj, const char *key) {
    const json_t *v = json_object_get(obj, key);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

ah_status_t ah_json_expect_object(const json_t *v, const char *where, ah_error_t *err) {
    if (json_is_object(v)) return AH_OK;
    return ah_error_set(err, AH_ERR_INVALID, "%s: expected an object, got %s", where, ah_json_type_name(v));
}
