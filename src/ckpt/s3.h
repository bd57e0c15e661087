/* The cloud tier: S3-compatible object storage over libcurl, signed with CURLOPT_AWS_SIGV4.
 *
 * URLs are s3://BUCKET/PREFIX; requests go path-style to ENDPOINT/BUCKET/KEY (the endpoint of
 * any S3-compatible store, e.g. http://127.0.0.1:9000; empty means AWS: https://s3.REGION.amazonaws.com).
 * Credentials come from AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, optional AWS_SESSION_TOKEN, and
 * AWS_REGION (else AWS_DEFAULT_REGION, else us-east-1).
 *
 * libcurl 7.88 quirks handled here: the payload is declared "x-amz-content-sha256:
 * UNSIGNED-PAYLOAD" (libcurl cannot hash a streamed body), no "Expect:" header is added by us
 * (libcurl would sign the emptied header and the server would reject the signature), and query
 * strings are built already canonical (sorted keys, RFC 3986 percent-encoding, '/' as %2F)
 * because this libcurl signs them exactly as given.
 *
 * Errors name the URL and say what to do: HTTP 403 shows the S3 error Code (SignatureDoesNotMatch,
 * InvalidAccessKeyId, AccessDenied) and points at the credentials; NoSuchBucket names the bucket;
 * a refused connection or a timeout names the endpoint. ah_s3_last_http() gives the HTTP status of
 * the last request (0 when none came back), e.g. to tell a missing key (404) from other failures.
 *
 * Threads: one ah_s3_t per thread (it holds one curl handle and reuses its connection).
 */
#ifndef AH_CKPT_S3_H
#define AH_CKPT_S3_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

typedef struct ah_s3_config {
    char endpoint[512];
    char region[64];
    char access_key[256];
    char secret_key[256];
    char session_token[4096];
    int64_t max_send_bytes_per_s; /* 0: no cap. Caps model a slow cloud link. */
    int64_t max_recv_bytes_per_s;
    long connect_timeout_s;       /* default 10 */
    long stall_timeout_s;         /* abort when < 1 byte/s flows for this long; default 30 */
    int list_max_keys;            /* page size for LIST; 0: the server's default (1000) */
} ah_s3_config_t;

/* Fills cfg from the environment; endpoint may be NULL or "" for AWS. */
ah_status_t ah_s3_config_from_env(ah_s3_config_t *cfg, const char *endpoint, ah_error_t *err);
/* The region requests are signed for: AWS_REGION, else AWS_DEFAULT_REGION, else "us-east-1" (what
 * ah_s3_config_from_env takes; plan and evaluate take it as the bucket's region). */
const char *ah_s3_env_region(void);
/* Whether AWS_REGION or AWS_DEFAULT_REGION names the region (not the us-east-1 fallback). */
bool ah_s3_env_region_given(void);

typedef struct ah_s3_url {
    char bucket[64];
    char prefix[1024]; /* without leading or trailing '/'; may be empty */
} ah_s3_url_t;

ah_status_t ah_s3_url_parse(const char *url, ah_s3_url_t *out, ah_error_t *err);

typedef struct ah_s3 ah_s3_t;

ah_status_t ah_s3_open(const ah_s3_config_t *cfg, ah_s3_t **out, ah_error_t *err);
void ah_s3_close(ah_s3_t *s3);
/* Callable from any thread: the request in progress on s3 and every later one fail at once
 * ("cancelled"). For a process that must leave without finishing its transfers. */
void ah_s3_cancel(ah_s3_t *s3);
long ah_s3_last_http(const ah_s3_t *s3);

ah_status_t ah_s3_create_bucket(ah_s3_t *s3, const char *bucket, ah_error_t *err);
ah_status_t ah_s3_put_file(ah_s3_t *s3, const char *bucket, const char *key, const char *path,
                           ah_error_t *err);
ah_status_t ah_s3_put_buffer(ah_s3_t *s3, const char *bucket, const char *key, const void *data,
                             size_t len, ah_error_t *err);

/* GET streams the body into sink (called with successive pieces; a non-OK return aborts). */
typedef ah_status_t (*ah_s3_sink_fn)(void *ctx, const void *data, size_t n, ah_error_t *err);
ah_status_t ah_s3_get(ah_s3_t *s3, const char *bucket, const char *key, ah_s3_sink_fn sink, void *ctx,
                      uint64_t *bytes, ah_error_t *err);
/* GET into path atomically (temp + fsync + rename); bytes/crc32c of what arrived (may be NULL). */
ah_status_t ah_s3_get_file(ah_s3_t *s3, const char *bucket, const char *key, const char *path,
                           uint64_t *bytes, uint32_t *crc32c, ah_error_t *err);
/* GET into a malloc'ed buffer (NUL-terminated for convenience); more than max bytes is an error. */
ah_status_t ah_s3_get_buffer(ah_s3_t *s3, const char *bucket, const char *key, size_t max,
                             char **data, size_t *len, ah_error_t *err);
/* *exists false (and AH_OK) on 404. */
ah_status_t ah_s3_head(ah_s3_t *s3, const char *bucket, const char *key, bool *exists,
                       uint64_t *size, ah_error_t *err);
ah_status_t ah_s3_delete(ah_s3_t *s3, const char *bucket, const char *key, ah_error_t *err);

typedef struct ah_s3_object {
    char key[1024];
    uint64_t size;
} ah_s3_object_t;

/* Every object whose key starts with prefix (ListObjectsV2, all pages); *objs is malloc'ed. */
ah_status_t ah_s3_list(ah_s3_t *s3, const char *bucket, const char *prefix, ah_s3_object_t **objs,
                       int *n, ah_error_t *err);

/* One ListObjectsV2 response page (xml: len bytes, NUL-terminated): appends each <Contents>'s
 * Key and Size to *objs (*n used of *cap, grown with realloc; the caller frees *objs), sets *more
 * from <IsTruncated> and then token (cap token_cap) from <NextContinuationToken>. Errors name the
 * listing by `what` ("s3://BUCKET/PREFIX"). ah_s3_list calls it per page; exposed for the fuzzer. */
ah_status_t ah_s3_list_page(const char *xml, size_t len, const char *what, ah_s3_object_t **objs, int *n,
                            int *cap, bool *more, char *token, size_t token_cap, ah_error_t *err);

/* The text of <TAG>...</TAG> after *pos in xml, entity-decoded into out; advances *pos past it.
 * False when absent or longer than cap - 1. Exposed for tests. */
bool ah_s3_xml_next(const char *xml, const char **pos, const char *tag, char *out, size_t cap);

#endif
