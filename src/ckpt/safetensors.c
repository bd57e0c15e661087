#include "ckpt/safetensors.h"

#include "core/json.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors data is little-endian; this writer copies host memory as is"
#endif

static const struct {
    const char *name;
    size_t size;
} DTYPES[] = {
    [AH_DTYPE_F32] = {"F32", 4},
    [AH_DTYPE_F16] = {"F16", 2},
    [AH_DTYPE_BF16] = {"BF16", 2},
};
enum { N_DTYPES = sizeof DTYPES / sizeof DTYPES[0] };

size_t ah_dtype_size(ah_dtype_t d) { return (unsigned)d < N_DTYPES ? DTYPES[d].size : 0; }
const char *ah_dtype_name(ah_dtype_t d) { return (unsigned)d < N_DTYPES ? DTYPES[d].name : "?"; }

static bool dtype_parse(const char *s, ah_dtype_t *out) {
    for (int i = 0; i < N_DTYPES; i++)
        if (strcmp(s, DTYPES[i].name) == 0) {
            *out = (ah_dtype_t)i;
            return true;
        }
    return false;
}

/* Bytes of a tensor of this shape, false on overflow or a negative dimension. */
static bool shape_bytes(const int64_t *shape, int ndim, ah_dtype_t d, uint64_t *out) {
    uint64_t n = ah_dtype_size(d);
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0 || __builtin_mul_overflow(n, (uint64_t)shape[i], &n)) return false;
    }
    *out = n;
    return true;
}

static void shape_str(const int64_t *shape, int ndim, char *buf, size_t cap) {
    size_t len = (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < ndim && len < cap; i++)
        len += (size_t)snprintf(buf + len, cap - len, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (len < cap) snprintf(buf + len, cap - len, "]");
}

static ah_status_t check_metadata(const json_t *md, const char *where, ah_error_t *err) {
    if (!json_is_object(md))
        return ah_error_set(err, AH_ERR_INVALID, "%s: __metadata__ must be an object of strings, got %s",
                            where, ah_json_type_name(md));
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)md, k, v) {
        if (!json_is_string(v))
            return ah_error_set(err, AH_ERR_INVALID,
                                "%s: __metadata__.%s must be a string, got %s", where, k,
                                ah_json_type_name(v));
    }
    return AH_OK;
}

/* The file's first 8 + *padded bytes (length and header, padded to 8) in a malloc'ed *out. */
static ah_status_t build_header(const char *where, const ah_st_tensor_t *t, int n, const json_t *metadata,
                                char **out, size_t *padded_len, ah_error_t *err) {
    if (metadata && check_metadata(metadata, where, err) != AH_OK) return err->code;
    json_t *hdr = json_object();
    if (!hdr) return ah_error_set(err, AH_ERR_OOM, "%s: out of memory for the header", where);
    if (metadata) json_object_set(hdr, "__metadata__", (json_t *)metadata);
    uint64_t off = 0;
    for (int i = 0; i < n; i++) {
        const char *name = t[i].name;
        uint64_t nb = 0;
        char sh[256];
        shape_str(t[i].shape, t[i].ndim > 0 ? t[i].ndim : 0, sh, sizeof sh);
        if (!name || !name[0] || strlen(name) >= AH_ST_NAME_MAX || strcmp(name, "__metadata__") == 0) {
            json_decref(hdr);
            return ah_error_set(err, AH_ERR_INVALID,
                                "%s: tensor %d: name \"%.64s\" must be 1..%d bytes and not __metadata__",
                                where, i, name ? name : "(null)", AH_ST_NAME_MAX - 1);
        }
        if (json_object_get(hdr, name)) {
            json_decref(hdr);
            return ah_error_set(err, AH_ERR_INVALID, "%s: tensor \"%s\" given twice", where, name);
        }
        if ((unsigned)t[i].dtype >= N_DTYPES || t[i].ndim < 0 || t[i].ndim > AH_ST_MAX_DIMS ||
            !shape_bytes(t[i].shape, t[i].ndim, t[i].dtype, &nb) ||
            __builtin_add_overflow(off, nb, &(uint64_t){0})) {
            json_decref(hdr);
            return ah_error_set(err, AH_ERR_INVALID,
                                "%s: tensor \"%s\": bad dtype (%d) or shape %s (at most %d dims, "
                                "each >= 0, total bytes must fit 64 bits)",
                                where, name, (int)t[i].dtype, sh, AH_ST_MAX_DIMS);
        }
        json_t *shape = json_array();
        for (int d = 0; d < t[i].ndim; d++) json_array_append_new(shape, json_integer(t[i].shape[d]));
        json_t *e = json_pack("{s:s, s:o, s:[I, I]}", "dtype", ah_dtype_name(t[i].dtype), "shape",
                              shape, "data_offsets", (json_int_t)off, (json_int_t)(off + nb));
        if (!e || json_object_set_new(hdr, name, e) != 0) {
            json_decref(hdr);
            return ah_error_set(err, AH_ERR_OOM, "%s: out of memory for the header", where);
        }
        off += nb;
    }
    char *text = json_dumps(hdr, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(hdr);
    if (!text) return ah_error_set(err, AH_ERR_OOM, "%s: out of memory for the header", where);
    size_t len = strlen(text);
    size_t padded = (len + 7) & ~(size_t)7; /* data section starts 8-byte aligned */
    char *buf = malloc(8 + padded);
    if (!buf) {
        free(text);
        return ah_error_set(err, AH_ERR_OOM, "%s: out of memory for the header", where);
    }
    for (int b = 0; b < 8; b++) buf[b] = (char)(((uint64_t)padded >> (8 * b)) & 0xFF);
    memcpy(buf + 8, text, len);
    memset(buf + 8 + len, ' ', padded - len);
    free(text);
    *out = buf;
    *padded_len = padded;
    return AH_OK;
}

ah_status_t ah_st_size(const ah_st_tensor_t *t, int n, const json_t *metadata, uint64_t *bytes, ah_error_t *err) {
    char *buf;
    size_t padded;
    if (build_header("safetensors size", t, n, metadata, &buf, &padded, err) != AH_OK) return err->code;
    free(buf);
    uint64_t total = 8 + padded;
    for (int i = 0; i < n; i++) {
        uint64_t nb = 0;
        shape_bytes(t[i].shape, t[i].ndim, t[i].dtype, &nb);
        total += nb;
    }
    *bytes = total;
    return AH_OK;
}

ah_status_t ah_st_write(ah_afile_t *f, const ah_st_tensor_t *t, int n, const json_t *metadata,
                        ah_error_t *err) {
    const char *where = f->path;
    char *buf;
    size_t padded;
    if (build_header(where, t, n, metadata, &buf, &padded, err) != AH_OK) return err->code;
    ah_status_t st = ah_afile_write(f, buf, 8 + padded, err);
    free(buf);
    for (int i = 0; i < n && st == AH_OK; i++) {
        uint64_t nb = 0;
        shape_bytes(t[i].shape, t[i].ndim, t[i].dtype, &nb);
        if (nb > 0 && !t[i].data)
            return ah_error_set(err, AH_ERR_INVALID, "%s: tensor \"%s\" has no data pointer", where,
                                t[i].name);
        st = t[i].crc_known ? ah_afile_write_crc(f, t[i].data, (size_t)nb, t[i].crc32c, err)
                            : ah_afile_write_kept(f, t[i].data, (size_t)nb, err);
    }
    return st;
}

ah_status_t ah_st_save(const char *path, const ah_st_tensor_t *tensors, int n,
                       const json_t *metadata, uint64_t *bytes, uint32_t *crc, ah_error_t *err) {
    ah_afile_t f;
    if (ah_afile_open(&f, path, err) != AH_OK) return err->code;
    if (ah_st_write(&f, tensors, n, metadata, err) != AH_OK) {
        ah_afile_abort(&f);
        return err->code;
    }
    if (bytes) *bytes = f.bytes;
    if (crc) *crc = f.crc;
    return ah_afile_commit(&f, true, err);
}

static int cmp_entry(const void *a, const void *b) {
    const ah_st_entry_t *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return 0;
}

/* Reads a non-negative integer array of at most `max` elements; false if anything is off. */
static bool get_uints(const json_t *arr, int64_t *out, int max, int *n) {
    if (!json_is_array(arr) || json_array_size(arr) > (size_t)max) return false;
    for (size_t i = 0; i < json_array_size(arr); i++) {
        const json_t *v = json_array_get(arr, i);
        if (!json_is_integer(v) || json_integer_value(v) < 0) return false;
        out[i] = json_integer_value(v);
    }
    *n = (int)json_array_size(arr);
    return true;
}

/* One tensor entry "key": {"dtype", "shape", "data_offsets"} of the header, checked against
 * itself and the data section's size, into *e. */
static ah_status_t parse_entry(const char *key, const json_t *v, const char *where, uint64_t data_size,
                               ah_st_entry_t *e, ah_error_t *err) {
    static const char *const FIELDS[] = {"dtype", "shape", "data_offsets", NULL};
    char tw[AH_CKPT_PATH_MAX + 300];
    snprintf(tw, sizeof tw, "%s: tensor \"%.256s\"", where, key);
    if (!key[0] || strlen(key) >= AH_ST_NAME_MAX)
        return ah_error_set(err, AH_ERR_INVALID, "%s: name must be 1..%d bytes", tw, AH_ST_NAME_MAX - 1);
    if (ah_json_expect_object(v, tw, err) != AH_OK || ah_json_check_keys(v, tw, FIELDS, err) != AH_OK)
        return err->code;
    snprintf(e->name, sizeof e->name, "%s", key);
    char dtype[16];
    if (ah_json_get_str(v, tw, "dtype", true, dtype, sizeof dtype, err) != AH_OK) return err->code;
    if (!dtype_parse(dtype, &e->dtype))
        return ah_error_set(err, AH_ERR_INVALID, "%s: dtype \"%s\" is not supported (F32, F16, BF16)", tw,
                            dtype);
    int64_t offs[2];
    int n_offs = 0;
    if (!get_uints(json_object_get(v, "shape"), e->shape, AH_ST_MAX_DIMS, &e->ndim))
        return ah_error_set(err, AH_ERR_INVALID,
                            "%s: shape must be an array of at most %d non-negative integers", tw,
                            AH_ST_MAX_DIMS);
    if (!get_uints(json_object_get(v, "data_offsets"), offs, 2, &n_offs) || n_offs != 2 || offs[0] > offs[1])
        return ah_error_set(err, AH_ERR_INVALID, "%s: data_offsets must be [begin, end] with 0 <= begin <= end",
                            tw);
    e->begin = (uint64_t)offs[0];
    e->end = (uint64_t)offs[1];
    uint64_t nb = 0;
    char sh[256];
    shape_str(e->shape, e->ndim, sh, sizeof sh);
    if (!shape_bytes(e->shape, e->ndim, e->dtype, &nb))
        return ah_error_set(err, AH_ERR_INVALID, "%s: shape %s of %s overflows 64 bits", tw, sh, dtype);
    if (nb != e->end - e->begin)
        return ah_error_set(err, AH_ERR_INVALID,
                            "%s: data_offsets [%llu, %llu] hold %llu bytes but shape %s of %s needs %llu",
                            tw, (unsigned long long)e->begin, (unsigned long long)e->end,
                            (unsigned long long)(e->end - e->begin), sh, dtype, (unsigned long long)nb);
    if (e->end > data_size)
        return ah_error_set(err, AH_ERR_INVALID,
                            "%s: data_offsets end %llu is past the data section (%llu bytes): file "
                            "truncated?",
                            tw, (unsigned long long)e->end, (unsigned long long)data_size);
    return AH_OK;
}

/* The sorted ranges must tile [0, data_size): no gap hides unchecked bytes, no overlap lets two
 * tensors alias. Sorts out->entries by offset. */
static ah_status_t check_tiling(ah_st_file_t *out, uint64_t data_size, const char *where, ah_error_t *err) {
    qsort(out->entries, (size_t)out->n, sizeof *out->entries, cmp_entry);
    uint64_t at = 0;
    for (int i = 0; i < out->n; i++) {
        const ah_st_entry_t *e = &out->entries[i];
        if (e->begin != at)
            return ah_error_set(err, AH_ERR_INVALID,
                                "%s: tensor \"%s\" starts at byte %llu of the data section but the "
                                "previous tensor ends at %llu (%s)",
                                where, e->name, (unsigned long long)e->begin, (unsigned long long)at,
                                e->begin < at ? "overlap" : "gap");
        at = e->end;
    }
    if (at != data_size)
        return ah_error_set(err, AH_ERR_INVALID,
                            "%s: tensors cover %llu bytes but the data section has %llu (%s)", where,
                            (unsigned long long)at, (unsigned long long)data_size,
                            at < data_size ? "trailing bytes" : "truncated");
    return AH_OK;
}

/* Validates header JSON text against a data section of data_size bytes and fills out. */
static ah_status_t parse_header(const char *text, size_t len, uint64_t data_size, ah_st_file_t *out,
                                ah_error_t *err) {
    const char *where = out->path;
    json_t *hdr = NULL;
    if (ah_json_load_string(text, len, where, &hdr, err) != AH_OK)
        return ah_error_prefix(err, "safetensors header");
    if (!json_is_object(hdr)) {
        ah_error_set(err, AH_ERR_PARSE, "%s: safetensors header must be a JSON object, got %s",
                     where, ah_json_type_name(hdr));
        json_decref(hdr);
        return err->code;
    }
    size_t cap = json_object_size(hdr);
    out->entries = calloc(cap ? cap : 1, sizeof *out->entries);
    if (!out->entries) {
        json_decref(hdr);
        return ah_error_set(err, AH_ERR_OOM, "%s: out of memory for %zu header entries", where, cap);
    }
    const char *key;
    json_t *v;
    ah_status_t st = AH_OK;
    json_object_foreach(hdr, key, v) {
        if (strcmp(key, "__metadata__") == 0) {
            if ((st = check_metadata(v, where, err)) != AH_OK) break;
            out->metadata = json_incref(v);
            continue;
        }
        if ((st = parse_entry(key, v, where, data_size, &out->entries[out->n], err)) != AH_OK) break;
        out->n++;
    }
    json_decref(hdr);
    if (st == AH_OK) st = check_tiling(out, data_size, where, err);
    if (st != AH_OK) ah_st_close(out);
    return st;
}

static ah_status_t check_header_len(uint64_t n, uint64_t size, const char *where, ah_error_t *err) {
    if (n < 2 || n > AH_ST_HEADER_MAX || n > size - 8)
        return ah_error_set(err, AH_ERR_PARSE,
                            "%s: header length %llu is not valid for a %llu-byte file (must be "
                            "2..%llu and fit the file): not a safetensors file, or truncated",
                            where, (unsigned long long)n, (unsigned long long)size,
                            (unsigned long long)AH_ST_HEADER_MAX);
    return AH_OK;
}

static uint64_t le64(const unsigned char *p) {
    uint64_t n = 0;
    for (int b = 7; b >= 0; b--) n = n << 8 | p[b];
    return n;
}

static void init_file(ah_st_file_t *out, const char *name) {
    memset(out, 0, sizeof *out);
    snprintf(out->path, sizeof out->path, "%s", name);
}

ah_status_t ah_st_parse(const void *buf, size_t size, const char *name, ah_st_file_t *out,
                        ah_error_t *err) {
    init_file(out, name);
    if (size < 8)
        return ah_error_set(err, AH_ERR_PARSE, "%s: %zu bytes is too short for a safetensors file", name, size);
    uint64_t n = le64(buf);
    if (check_header_len(n, size, name, err) != AH_OK) return err->code;
    out->data_start = 8 + n;
    out->file_size = size;
    return parse_header((const char *)buf + 8, (size_t)n, size - 8 - n, out, err);
}

/* pread of exactly len bytes at off; a short file is an error. */
static ah_status_t pread_all(int fd, void *dst, size_t len, uint64_t off, const char *where,
                             ah_error_t *err) {
    char *p = dst;
    while (len > 0) {
        ssize_t r = pread(fd, p, len, (off_t)off);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return ah_error_set(err, AH_ERR_IO, "%s: cannot read: %s", where, strerror(errno));
        if (r == 0) return ah_error_set(err, AH_ERR_IO, "%s: file ended early (truncated?)", where);
        p += r;
        len -= (size_t)r;
        off += (uint64_t)r;
    }
    return AH_OK;
}

ah_status_t ah_st_open(const char *path, ah_st_file_t *out, ah_error_t *err) {
    init_file(out, path);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return ah_error_set(err, AH_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    unsigned char len8[8];
    char *text = NULL;
    ah_status_t st;
    if (fstat(fd, &sb) != 0) {
        st = ah_error_set(err, AH_ERR_IO, "%s: cannot stat: %s", path, strerror(errno));
        goto done;
    }
    if ((uint64_t)sb.st_size < 8) {
        st = ah_error_set(err, AH_ERR_PARSE, "%s: %lld bytes is too short for a safetensors file",
                          path, (long long)sb.st_size);
        goto done;
    }
    if ((st = pread_all(fd, len8, 8, 0, path, err)) != AH_OK) goto done;
    uint64_t n = le64(len8);
    if ((st = check_header_len(n, (uint64_t)sb.st_size, path, err)) != AH_OK) goto done;
    text = malloc((size_t)n);
    if (!text) {
        st = ah_error_set(err, AH_ERR_OOM, "%s: out of memory for a %llu-byte header", path,
                          (unsigned long long)n);
        goto done;
    }
    if ((st = pread_all(fd, text, (size_t)n, 8, path, err)) != AH_OK) goto done;
    out->data_start = 8 + n;
    out->file_size = (uint64_t)sb.st_size;
    st = parse_header(text, (size_t)n, (uint64_t)sb.st_size - 8 - n, out, err);
done:
    free(text);
    close(fd);
    return st;
}

const ah_st_entry_t *ah_st_find(const ah_st_file_t *f, const char *name) {
    for (int i = 0; i < f->n; i++)
        if (strcmp(f->entries[i].name, name) == 0) return &f->entries[i];
    return NULL;
}

ah_status_t ah_st_read(const ah_st_file_t *f, const char *name, void *dst, size_t cap,
                       ah_error_t *err) {
    const ah_st_entry_t *e = ah_st_find(f, name);
    if (!e) return ah_error_set(err, AH_ERR_INVALID, "%s: no tensor \"%s\" in this file", f->path, name);
    uint64_t nb = e->end - e->begin;
    if (nb > cap)
        return ah_error_set(err, AH_ERR_INVALID,
                            "%s: tensor \"%s\" has %llu bytes but the destination holds %zu",
                            f->path, name, (unsigned long long)nb, cap);
    int fd = open(f->path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return ah_error_set(err, AH_ERR_IO, "%s: cannot open: %s", f->path, strerror(errno));
    char where[AH_CKPT_PATH_MAX + 300];
    snprintf(where, sizeof where, "%s: tensor \"%s\"", f->path, name);
    ah_status_t st = pread_all(fd, dst, (size_t)nb, f->data_start + e->begin, where, err);
    close(fd);
    return st;
}

ah_status_t ah_st_read_range(const ah_st_file_t *f, const ah_st_entry_t *e, uint64_t off, void *dst, size_t len,
                             ah_error_t *err) {
    const uint64_t nb = e->end - e->begin;
    if (off > nb || len > nb - off)
        return ah_error_set(err, AH_ERR_INTERNAL, "%s: tensor \"%s\": bytes [%llu, %llu) are outside its %llu",
                            f->path, e->name, (unsigned long long)off, (unsigned long long)(off + len),
                            (unsigned long long)nb);
    int fd = open(f->path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return ah_error_set(err, AH_ERR_IO, "%s: cannot open: %s", f->path, strerror(errno));
    char where[AH_CKPT_PATH_MAX + 300];
    snprintf(where, sizeof where, "%s: tensor \"%s\"", f->path, e->name);
    ah_status_t st = pread_all(fd, dst, len, f->data_start + e->begin + off, where, err);
    close(fd);
    return st;
}

void ah_st_close(ah_st_file_t *f) {
    free(f->entries);
    f->entries = NULL;
    f->n = 0;
    json_decref(f->metadata);
    f->metadata = NULL;
}
