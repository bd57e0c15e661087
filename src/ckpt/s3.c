#include "ckpt/s3.h"

#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ckpt/afile.h"

struct ah_s3 {
    ah_s3_config_t cfg;
    CURL *curl;
    long http;
    atomic_bool cancelled; /* ah_s3_cancel: from another thread */
};

static pthread_once_t global_once = PTHREAD_ONCE_INIT;
static CURLcode global_rc;
static void global_init(void) { global_rc = curl_global_init(CURL_GLOBAL_DEFAULT); }

static void copy_env(char *dst, size_t cap, const char *name, const char *fallback) {
    const char *v = getenv(name);
    snprintf(dst, cap, "%s", v && *v ? v : fallback);
}

const char *ah_s3_env_region(void) {
    const char *r = getenv("AWS_REGION");
    if (!r || !*r) r = getenv("AWS_DEFAULT_REGION");
    return r && *r ? r : "us-east-1";
}

bool ah_s3_env_region_given(void) {
    const char *r = getenv("AWS_REGION"), *d = getenv("AWS_DEFAULT_REGION");
    return (r && *r) || (d && *d);
}

ah_status_t ah_s3_config_from_env(ah_s3_config_t *cfg, const char *endpoint, ah_error_t *err) {
    memset(cfg, 0, sizeof *cfg);
    copy_env(cfg->access_key, sizeof cfg->access_key, "AWS_ACCESS_KEY_ID", "");
    copy_env(cfg->secret_key, sizeof cfg->secret_key, "AWS_SECRET_ACCESS_KEY", "");
    copy_env(cfg->session_token, sizeof cfg->session_token, "AWS_SESSION_TOKEN", "");
    snprintf(cfg->region, sizeof cfg->region, "%s", ah_s3_env_region());
    if (endpoint && snprintf(cfg->endpoint, sizeof cfg->endpoint, "%s", endpoint) >= (int)sizeof cfg->endpoint)
        return ah_error_set(err, AH_ERR_USAGE, "--s3-endpoint is too long (at most %zu bytes)",
                            sizeof cfg->endpoint - 1);
    size_t n = strlen(cfg->endpoint);
    while (n > 0 && cfg->endpoint[n - 1] == '/') cfg->endpoint[--n] = '\0';
    if (n && strncmp(cfg->endpoint, "http://", 7) != 0 && strncmp(cfg->endpoint, "https://", 8) != 0)
        return ah_error_set(err, AH_ERR_USAGE,
                            "--s3-endpoint \"%s\" must start with http:// or https://", cfg->endpoint);
    if (!cfg->access_key[0] || !cfg->secret_key[0])
        return ah_error_set(err, AH_ERR_USAGE,
                            "cloud tier: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY must be set in "
                            "the environment");
    cfg->connect_timeout_s = 10;
    cfg->stall_timeout_s = 30;
    return AH_OK;
}

ah_status_t ah_s3_url_parse(const char *url, ah_s3_url_t *out, ah_error_t *err) {
    memset(out, 0, sizeof *out);
    if (strncmp(url, "s3://", 5) != 0)
        return ah_error_set(err, AH_ERR_USAGE, "cloud URL \"%s\" must look like s3://BUCKET/PREFIX", url);
    const char *b = url + 5, *slash = strchr(b, '/');
    size_t bl = slash ? (size_t)(slash - b) : strlen(b);
    /* S3 bucket rules: 3-63 characters of lower-case letters, digits, '.' and '-'. */
    bool ok = bl >= 3 && bl <= 63;
    for (size_t i = 0; ok && i < bl; i++)
        ok = (b[i] >= 'a' && b[i] <= 'z') || (b[i] >= '0' && b[i] <= '9') || b[i] == '.' || b[i] == '-';
    if (!ok)
        return ah_error_set(err, AH_ERR_USAGE,
                            "cloud URL \"%s\": bucket name must be 3-63 characters of a-z, 0-9, '.', '-'", url);
    memcpy(out->bucket, b, bl);
    const char *p = slash ? slash + 1 : "";
    while (*p == '/') p++;
    if (snprintf(out->prefix, sizeof out->prefix, "%s", p) >= (int)sizeof out->prefix)
        return ah_error_set(err, AH_ERR_USAGE, "cloud URL \"%.100s...\": prefix too long", url);
    size_t n = strlen(out->prefix);
    while (n > 0 && out->prefix[n - 1] == '/') out->prefix[--n] = '\0';
    return AH_OK;
}

ah_status_t ah_s3_open(const ah_s3_config_t *cfg, ah_s3_t **out, ah_error_t *err) {
    *out = NULL;
    pthread_once(&global_once, global_init);
    if (global_rc != CURLE_OK)
        return ah_error_set(err, AH_ERR_COMM, "libcurl initialisation failed: %s", curl_easy_strerror(global_rc));
    ah_s3_t *s3 = calloc(1, sizeof *s3);
    if (!s3) return ah_error_set(err, AH_ERR_OOM, "out of memory for an S3 client");
    s3->cfg = *cfg;
    atomic_init(&s3->cancelled, false);
    if (!s3->cfg.endpoint[0])
        snprintf(s3->cfg.endpoint, sizeof s3->cfg.endpoint, "https://s3.%s.amazonaws.com", cfg->region);
    s3->curl = curl_easy_init();
    if (!s3->curl) {
        free(s3);
        return ah_error_set(err, AH_ERR_COMM, "curl_easy_init failed");
    }
    *out = s3;
    return AH_OK;
}

void ah_s3_close(ah_s3_t *s3) {
    if (!s3) return;
    curl_easy_cleanup(s3->curl);
    free(s3);
}

long ah_s3_last_http(const ah_s3_t *s3) { return s3->http; }

/* RFC 3986 percent-encoding; '/' kept when keep_slash (object keys in paths). */
static bool encode(const char *s, bool keep_slash, char *out, size_t cap) {
    size_t n = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        bool plain = (*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
                     *p == '-' || *p == '_' || *p == '.' || *p == '~' || (keep_slash && *p == '/');
        if (n + 4 > cap) return false;
        if (plain) out[n++] = (char)*p;
        else n += (size_t)snprintf(out + n, cap - n, "%%%02X", *p);
    }
    out[n] = '\0';
    return true;
}

/* ---- XML (S3 responses): flat tag lookup, entities decoded, bounded. ---------------------------- */

/* Span of the content of the first <tag>...</tag> in [from, end). */
static bool find_tag(const char *from, const char *end, const char *tag, const char **s, const char **e) {
    char open[80], close[80];
    if (snprintf(open, sizeof open, "<%s>", tag) >= (int)sizeof open ||
        snprintf(close, sizeof close, "</%s>", tag) >= (int)sizeof close)
        return false;
    size_t ol = strlen(open), cl = strlen(close);
    for (const char *p = from; p + ol <= end; p++) {
        if (memcmp(p, open, ol) != 0) continue;
        for (const char *q = p + ol; q + cl <= end; q++)
            if (memcmp(q, close, cl) == 0) {
                *s = p + ol;
                *e = q;
                return true;
            }
        return false;
    }
    return false;
}

static bool decode(const char *s, const char *e, char *out, size_t cap) {
    static const struct {
        const char *ent;
        char c;
    } ENT[] = {{"&amp;", '&'}, {"&lt;", '<'}, {"&gt;", '>'}, {"&quot;", '"'}, {"&apos;", '\''}};
    size_t n = 0;
    while (s < e) {
        if (n + 1 >= cap) return false;
        char c = *s;
        if (c == '&') {
            bool done = false;
            for (size_t k = 0; k < sizeof ENT / sizeof ENT[0] && !done; k++) {
                size_t l = strlen(ENT[k].ent);
                if ((size_t)(e - s) >= l && memcmp(s, ENT[k].ent, l) == 0) {
                    out[n++] = ENT[k].c;
                    s += l;
                    done = true;
                }
            }
            /* Numeric references to ASCII (&#47; &#x2F;); anything else stays as is. */
            if (!done && e - s >= 4 && s[1] == '#') {
                char *stop;
                bool hex = s[2] == 'x';
                long v = strtol(s + (hex ? 3 : 2), &stop, hex ? 16 : 10);
                if (stop < e && *stop == ';' && v > 0 && v < 128) {
                    out[n++] = (char)v;
                    s = stop + 1;
                    done = true;
                }
            }
            if (done) continue;
        }
        out[n++] = c;
        s++;
    }
    out[n] = '\0';
    return true;
}

bool ah_s3_xml_next(const char *xml, const char **pos, const char *tag, char *out, size_t cap) {
    const char *s, *e;
    const char *from = *pos ? *pos : xml;
    if (!find_tag(from, from + strlen(from), tag, &s, &e) || !decode(s, e, out, cap)) return false;
    *pos = e;
    return true;
}

/* ---- requests ---------------------------------------------------------------------------------- */

typedef struct {
    ah_s3_t *s3;
    ah_s3_sink_fn sink;
    void *ctx;
    uint64_t bytes;
    char errbody[8192]; /* an error response's XML, for its Code and Message */
    size_t errlen;
    ah_error_t sink_err;
    bool sink_failed;
} rx_t;

static size_t on_body(char *data, size_t size, size_t nmemb, void *p) {
    rx_t *rx = p;
    size_t n = size * nmemb;
    long code = 0;
    curl_easy_getinfo(rx->s3->curl, CURLINFO_RESPONSE_CODE, &code);
    if (code >= 300 || !rx->sink) {
        size_t room = sizeof rx->errbody - 1 - rx->errlen;
        size_t take = n < room ? n : room;
        memcpy(rx->errbody + rx->errlen, data, take);
        rx->errlen += take;
        rx->errbody[rx->errlen] = '\0';
        return n;
    }
    if (rx->sink(rx->ctx, data, n, &rx->sink_err) != AH_OK) {
        rx->sink_failed = true;
        return 0; /* aborts the transfer */
    }
    rx->bytes += n;
    return n;
}

typedef struct {
    FILE *f;
    const char *buf;
    size_t len, off;
} tx_t;

static size_t on_read(char *dst, size_t size, size_t nmemb, void *p) {
    tx_t *tx = p;
    size_t cap = size * nmemb;
    if (tx->f) {
        size_t r = fread(dst, 1, cap, tx->f);
        if (r == 0 && ferror(tx->f)) return CURL_READFUNC_ABORT;
        return r;
    }
    size_t left = tx->len - tx->off, take = left < cap ? left : cap;
    memcpy(dst, tx->buf + tx->off, take);
    tx->off += take;
    return take;
}

/* Progress callback: a non-zero return makes curl abort the transfer (ah_s3_cancel). */
static int on_progress(void *p, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal, curl_off_t ulnow) {
    (void)dltotal, (void)dlnow, (void)ultotal, (void)ulnow;
    return atomic_load(&((ah_s3_t *)p)->cancelled) ? 1 : 0;
}

void ah_s3_cancel(ah_s3_t *s3) { atomic_store(&s3->cancelled, true); }

typedef enum { GET, PUT, HEAD, DEL } method_t;
static const char *const METHOD[] = {"GET", "PUT", "HEAD", "DELETE"};

/* One signed request. `query` must already be canonical. On HTTP >= 300 the error names the S3
 * error Code from the body. */
static ah_status_t request(ah_s3_t *s3, method_t m, const char *bucket, const char *key,
                           const char *query, tx_t *tx, int64_t tx_len, rx_t *rx, ah_error_t *err) {
    char ekey[3200], url[4096 + 512], shown[1400];
    s3->http = 0;
    if (!encode(key ? key : "", true, ekey, sizeof ekey))
        return ah_error_set(err, AH_ERR_INVALID, "s3 key too long: %.100s...", key);
    int un = snprintf(url, sizeof url, "%s/%s%s%s%s%s", s3->cfg.endpoint, bucket, key ? "/" : "", ekey,
                      query ? "?" : "", query ? query : "");
    if (un < 0 || (size_t)un >= sizeof url) return ah_error_set(err, AH_ERR_INVALID, "s3 URL too long");
    snprintf(shown, sizeof shown, "s3://%s/%.1000s", bucket, key ? key : "");
    if (atomic_load(&s3->cancelled)) return ah_error_set(err, AH_ERR_IO, "%s: cancelled", shown);
    CURL *c = s3->curl;
    curl_easy_reset(c);
    char sigv4[128], ebuf[CURL_ERROR_SIZE] = "";
    snprintf(sigv4, sizeof sigv4, "aws:amz:%s:s3", s3->cfg.region);
    struct curl_slist *h = curl_slist_append(NULL, "x-amz-content-sha256: UNSIGNED-PAYLOAD");
    if (s3->cfg.session_token[0]) {
        char tok[4200];
        snprintf(tok, sizeof tok, "x-amz-security-token: %s", s3->cfg.session_token);
        h = curl_slist_append(h, tok);
    }
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_AWS_SIGV4, sigv4);
    curl_easy_setopt(c, CURLOPT_USERNAME, s3->cfg.access_key);
    curl_easy_setopt(c, CURLOPT_PASSWORD, s3->cfg.secret_key);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, ebuf);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, s3->cfg.connect_timeout_s > 0 ? s3->cfg.connect_timeout_s : 10L);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, s3->cfg.stall_timeout_s > 0 ? s3->cfg.stall_timeout_s : 30L);
    if (s3->cfg.max_send_bytes_per_s > 0)
        curl_easy_setopt(c, CURLOPT_MAX_SEND_SPEED_LARGE, (curl_off_t)s3->cfg.max_send_bytes_per_s);
    if (s3->cfg.max_recv_bytes_per_s > 0)
        curl_easy_setopt(c, CURLOPT_MAX_RECV_SPEED_LARGE, (curl_off_t)s3->cfg.max_recv_bytes_per_s);
    curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(c, CURLOPT_XFERINFODATA, s3);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, rx);
    switch (m) {
    case PUT:
        curl_easy_setopt(c, CURLOPT_UPLOAD, 1L);
        curl_easy_setopt(c, CURLOPT_READFUNCTION, on_read);
        curl_easy_setopt(c, CURLOPT_READDATA, tx);
        curl_easy_setopt(c, CURLOPT_INFILESIZE_LARGE, (curl_off_t)tx_len);
        break;
    case HEAD: curl_easy_setopt(c, CURLOPT_NOBODY, 1L); break;
    case DEL: curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, "DELETE"); break;
    case GET: break;
    }
    CURLcode rc = curl_easy_perform(c);
    curl_slist_free_all(h);
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &s3->http);
    if (rx->sink_failed) {
        *err = rx->sink_err;
        return ah_error_prefix(err, "%s %s", METHOD[m], shown);
    }
    if (rc != CURLE_OK) {
        const char *why = ebuf[0] ? ebuf : curl_easy_strerror(rc);
        switch (rc) {
        case CURLE_ABORTED_BY_CALLBACK: return ah_error_set(err, AH_ERR_IO, "%s %s: cancelled", METHOD[m], shown);
        case CURLE_COULDNT_CONNECT:
        case CURLE_COULDNT_RESOLVE_HOST:
            return ah_error_set(err, AH_ERR_COMM,
                                "%s %s: cannot reach the S3 endpoint %s (%s): check --s3-endpoint and "
                                "that the store is running and reachable",
                                METHOD[m], shown, s3->cfg.endpoint, why);
        case CURLE_OPERATION_TIMEDOUT:
            return ah_error_set(err, AH_ERR_COMM,
                                "%s %s: timed out talking to %s (%s): the link or the store is down "
                                "or too slow",
                                METHOD[m], shown, s3->cfg.endpoint, why);
        default:
            return ah_error_set(err, AH_ERR_COMM, "%s %s at %s: %s (curl error %d)", METHOD[m], shown,
                                s3->cfg.endpoint, why, (int)rc);
        }
    }
    if (s3->http >= 200 && s3->http < 300) return AH_OK;
    char code[128] = "", msg[512] = "";
    const char *pos = NULL;
    ah_s3_xml_next(rx->errbody, &pos, "Code", code, sizeof code);
    pos = NULL;
    ah_s3_xml_next(rx->errbody, &pos, "Message", msg, sizeof msg);
    const char *hint = "";
    if (s3->http == 403 || strcmp(code, "SignatureDoesNotMatch") == 0 || strcmp(code, "InvalidAccessKeyId") == 0)
        hint = ": check AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY (AWS_SESSION_TOKEN), AWS_REGION and "
               "the bucket's permissions";
    else if (strcmp(code, "NoSuchBucket") == 0)
        hint = ": create the bucket or fix the bucket in --cloud";
    if (strcmp(code, "NoSuchBucket") == 0)
        return ah_error_set(err, AH_ERR_IO, "%s %s: HTTP %ld NoSuchBucket: bucket \"%s\" does not exist at %s%s",
                            METHOD[m], shown, s3->http, bucket, s3->cfg.endpoint, hint);
    return ah_error_set(err, s3->http == 404 ? AH_ERR_IO : AH_ERR_COMM, "%s %s: HTTP %ld %s%s%s%s",
                        METHOD[m], shown, s3->http, code[0] ? code : "(no S3 error code)",
                        msg[0] ? ": " : "", msg, hint);
}

ah_status_t ah_s3_create_bucket(ah_s3_t *s3, const char *bucket, ah_error_t *err) {
    rx_t rx = {.s3 = s3};
    tx_t tx = {0};
    return request(s3, PUT, bucket, NULL, NULL, &tx, 0, &rx, err);
}

ah_status_t ah_s3_put_file(ah_s3_t *s3, const char *bucket, const char *key, const char *path,
                           ah_error_t *err) {
    tx_t tx = {.f = fopen(path, "rb")};
    if (!tx.f) return ah_error_set(err, AH_ERR_IO, "%s: cannot open for upload: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fileno(tx.f), &sb) != 0) {
        fclose(tx.f);
        return ah_error_set(err, AH_ERR_IO, "%s: cannot stat: %s", path, strerror(errno));
    }
    rx_t rx = {.s3 = s3};
    ah_status_t st = request(s3, PUT, bucket, key, NULL, &tx, (int64_t)sb.st_size, &rx, err);
    fclose(tx.f);
    return st;
}

ah_status_t ah_s3_put_buffer(ah_s3_t *s3, const char *bucket, const char *key, const void *data,
                             size_t len, ah_error_t *err) {
    tx_t tx = {.buf = data, .len = len};
    rx_t rx = {.s3 = s3};
    return request(s3, PUT, bucket, key, NULL, &tx, (int64_t)len, &rx, err);
}

ah_status_t ah_s3_get(ah_s3_t *s3, const char *bucket, const char *key, ah_s3_sink_fn sink, void *ctx,
                      uint64_t *bytes, ah_error_t *err) {
    rx_t rx = {.s3 = s3, .sink = sink, .ctx = ctx};
    ah_status_t st = request(s3, GET, bucket, key, NULL, NULL, 0, &rx, err);
    if (bytes) *bytes = rx.bytes;
    return st;
}

static ah_status_t file_sink(void *ctx, const void *data, size_t n, ah_error_t *err) {
    return ah_afile_write(ctx, data, n, err);
}

ah_status_t ah_s3_get_file(ah_s3_t *s3, const char *bucket, const char *key, const char *path,
                           uint64_t *bytes, uint32_t *crc32c, ah_error_t *err) {
    ah_afile_t f;
    if (ah_afile_open(&f, path, err) != AH_OK) return err->code;
    if (ah_s3_get(s3, bucket, key, file_sink, &f, NULL, err) != AH_OK) {
        ah_afile_abort(&f);
        return err->code;
    }
    if (bytes) *bytes = f.bytes;
    if (crc32c) *crc32c = f.crc;
    return ah_afile_commit(&f, true, err);
}

typedef struct {
    char *data;
    size_t len, cap, max;
} membuf_t;

static ah_status_t mem_sink(void *ctx, const void *data, size_t n, ah_error_t *err) {
    membuf_t *b = ctx;
    if (b->len + n > b->max)
        return ah_error_set(err, AH_ERR_INVALID, "object is larger than the %zu bytes allowed", b->max);
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n + 1) cap *= 2;
        char *g = realloc(b->data, cap);
        if (!g) return ah_error_set(err, AH_ERR_OOM, "out of memory for a %zu-byte object", b->len + n);
        b->data = g;
        b->cap = cap;
    }
    memcpy(b->data + b->len, data, n);
    b->len += n;
    b->data[b->len] = '\0';
    return AH_OK;
}

ah_status_t ah_s3_get_buffer(ah_s3_t *s3, const char *bucket, const char *key, size_t max,
                             char **data, size_t *len, ah_error_t *err) {
    membuf_t b = {.max = max};
    *data = NULL;
    *len = 0;
    if (ah_s3_get(s3, bucket, key, mem_sink, &b, NULL, err) != AH_OK) {
        free(b.data);
        return err->code;
    }
    if (!b.data) b.data = calloc(1, 1); /* empty object */
    if (!b.data) return ah_error_set(err, AH_ERR_OOM, "out of memory");
    *data = b.data;
    *len = b.len;
    return AH_OK;
}

ah_status_t ah_s3_head(ah_s3_t *s3, const char *bucket, const char *key, bool *exists,
                       uint64_t *size, ah_error_t *err) {
    rx_t rx = {.s3 = s3};
    *exists = false;
    ah_status_t st = request(s3, HEAD, bucket, key, NULL, NULL, 0, &rx, err);
    if (st != AH_OK && s3->http == 404) return AH_OK; /* HEAD has no body: no code to tell more */
    if (st != AH_OK) return st;
    curl_off_t cl = -1;
    curl_easy_getinfo(s3->curl, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &cl);
    *exists = true;
    if (size) *size = cl >= 0 ? (uint64_t)cl : 0;
    return AH_OK;
}

ah_status_t ah_s3_delete(ah_s3_t *s3, const char *bucket, const char *key, ah_error_t *err) {
    rx_t rx = {.s3 = s3};
    return request(s3, DEL, bucket, key, NULL, NULL, 0, &rx, err);
}

ah_status_t ah_s3_list_page(const char *xml, size_t len, const char *what, ah_s3_object_t **objs, int *n,
                            int *cap, bool *more, char *token, size_t token_cap, ah_error_t *err) {
    const char *end = xml + len, *s, *e, *at = xml;
    *more = false;
    while (find_tag(at, end, "Contents", &s, &e)) {
        char size[32];
        const char *ks, *ke, *ss, *se;
        if (*n == *cap) {
            int grown_cap = *cap ? 2 * *cap : 64;
            ah_s3_object_t *g = realloc(*objs, (size_t)grown_cap * sizeof *g);
            if (!g) return ah_error_set(err, AH_ERR_OOM, "out of memory listing %s", what);
            *objs = g;
            *cap = grown_cap;
        }
        ah_s3_object_t *o = &(*objs)[*n];
        if (!find_tag(s, e, "Key", &ks, &ke) || !decode(ks, ke, o->key, sizeof o->key) ||
            !find_tag(s, e, "Size", &ss, &se) || !decode(ss, se, size, sizeof size))
            return ah_error_set(err, AH_ERR_PARSE,
                                "listing %s: malformed <Contents> in the response (no Key/Size or too long)", what);
        /* Digits only: strtoull would take "-5" as 2^64 - 5. */
        char *stop;
        errno = 0;
        unsigned long long sz = strtoull(size, &stop, 10);
        if (size[0] < '0' || size[0] > '9' || errno || *stop || sz > INT64_MAX)
            return ah_error_set(err, AH_ERR_PARSE, "listing %s: bad <Size> \"%s\" (expected bytes, 0..2^63-1)",
                                what, size);
        o->size = sz;
        (*n)++;
        at = e;
    }
    char trunc[16] = "";
    const char *pos = NULL;
    ah_s3_xml_next(xml, &pos, "IsTruncated", trunc, sizeof trunc);
    *more = strcmp(trunc, "true") == 0;
    pos = NULL;
    /* An empty token would ask for the first page again, for ever. */
    if (*more && (!ah_s3_xml_next(xml, &pos, "NextContinuationToken", token, token_cap) || !token[0]))
        return ah_error_set(err, AH_ERR_PARSE,
                            "listing %s: truncated page without a continuation token (or one too long)", what);
    return AH_OK;
}

ah_status_t ah_s3_list(ah_s3_t *s3, const char *bucket, const char *prefix, ah_s3_object_t **objs,
                       int *n, ah_error_t *err) {
    *objs = NULL;
    *n = 0;
    int cap = 0;
    char token[2048] = "";
    ah_status_t st = AH_OK;
    while (st == AH_OK) {
        /* Canonical form: keys in byte order, values RFC 3986-encoded. */
        char etok[6200], epre[3200], query[10000], maxk[32] = "";
        if (!encode(token, false, etok, sizeof etok) || !encode(prefix, false, epre, sizeof epre)) {
            st = ah_error_set(err, AH_ERR_INVALID, "s3 list: prefix or token too long");
            break;
        }
        if (s3->cfg.list_max_keys > 0) snprintf(maxk, sizeof maxk, "&max-keys=%d", s3->cfg.list_max_keys);
        snprintf(query, sizeof query, "%s%s%slist-type=2%s&prefix=%s", token[0] ? "continuation-token=" : "",
                 etok, token[0] ? "&" : "", maxk, epre);
        membuf_t b = {.max = 64u << 20};
        rx_t rx = {.s3 = s3, .sink = mem_sink, .ctx = &b};
        st = request(s3, GET, bucket, NULL, query, NULL, 0, &rx, err);
        if (st != AH_OK) {
            free(b.data);
            ah_error_prefix(err, "listing s3://%s/%s", bucket, prefix);
            break;
        }
        bool more = false;
        char what[1200];
        snprintf(what, sizeof what, "s3://%s/%s", bucket, prefix);
        st = ah_s3_list_page(b.data ? b.data : "", b.len, what, objs, n, &cap, &more, token, sizeof token, err);
        free(b.data);
        if (!more) break;
    }
    if (st != AH_OK) {
        free(*objs);
        *objs = NULL;
        *n = 0;
    }
    return st;
}
