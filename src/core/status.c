#include "core/status.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "core/str.h"

ah_status_t ah_error_set(ah_error_t *err, ah_status_t code, const char *fmt, ...) {
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        err->code = code;
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
    }
    return code;
}

ah_status_t ah_error_prefix(ah_error_t *err, const char *fmt, ...) {
    if (!err) return AH_ERR_INTERNAL;
    char prefix[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    char old[AH_ERROR_MSG_MAX];
    memcpy(old, err->msg, sizeof old);
    /* A long prefix truncates the message, never overflows it. */
    int n = snprintf(err->msg, sizeof err->msg, "%s: ", prefix);
    if (n > 0 && (size_t)n < sizeof err->msg)
        snprintf(err->msg + n, sizeof err->msg - (size_t)n, "%.*s", (int)(sizeof err->msg - (size_t)n - 1), old);
    return err->code;
}

const char *ah_status_name(ah_status_t code) {
    switch (code) {
    case AH_OK: return "ok";
    case AH_ERR_USAGE: return "usage error";
    case AH_ERR_IO: return "I/O error";
    case AH_ERR_PARSE: return "parse error";
    case AH_ERR_INVALID: return "invalid input";
    case AH_ERR_INFEASIBLE: return "infeasible";
    case AH_ERR_OOM: return "out of memory";
    case AH_ERR_COMM: return "communication error";
    case AH_ERR_INTERNAL: return "internal error";
    case AH_ERR_INTERRUPTED: return "interrupted";
    }
    return "unknown error";
}

static const char *const KEYS[] = {
    [AH_OK] = "ok", [AH_ERR_USAGE] = "usage", [AH_ERR_IO] = "io", [AH_ERR_PARSE] = "parse",
    [AH_ERR_INVALID] = "invalid", [AH_ERR_INFEASIBLE] = "infeasible", [AH_ERR_OOM] = "oom",
    [AH_ERR_COMM] = "comm", [AH_ERR_INTERNAL] = "internal", [AH_ERR_INTERRUPTED] = "interrupted"};

const char *ah_status_key(ah_status_t code) {
    return (unsigned)code < sizeof KEYS / sizeof *KEYS ? KEYS[code] : "internal";
}

ah_status_t ah_status_of_key(const char *key) {
    const int i = key ? ah_str_index(key, KEYS, (int)(sizeof KEYS / sizeof *KEYS)) : -1;
    return i >= 0 ? (ah_status_t)i : AH_ERR_INTERNAL;
}

int ah_status_exit_code(ah_status_t code) {
    if (code == AH_OK) return 0;
    if (code == AH_ERR_USAGE) return 2;
    if (code == AH_ERR_INTERRUPTED) return 130;
    return 1;
}
