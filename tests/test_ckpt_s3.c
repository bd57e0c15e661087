/* The cloud tier against a real S3 server on loopback (moto_server, started here on a free port
 * and stopped at exit): put/get/head/list/delete round trips, signatures checked by the server,
 * faults (wrong credentials, unreachable endpoint, missing bucket), the background uploader, and
 * tiered restore with fallback on missing, truncated and corrupt shards; then `autohet ckpt`. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ckpt/cloud.h"
#include "ckpt/crc32c.h"
#include "ckpt/restore.h"
#include "ckpt/s3.h"
#include "harness.h"

static pid_t server = -1;
static char endpoint[64];
static char tmp_buf[] = "/tmp/ah_test_s3_XXXXXX";
static const char *tmp;

static void stop_server(void) {
    if (server > 0) {
        kill(server, SIGTERM);
        waitpid(server, NULL, 0);
        server = -1;
    }
    if (tmp) {
        char cmd[300];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
        if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmp);
    }
}

static void on_signal(int sig) {
    if (server > 0) kill(server, SIGTERM);
    signal(sig, SIG_DFL);
    raise(sig);
}

/* A port nothing listens on right now (the kernel's choice for an ephemeral bind). */
static int free_port(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || getsockname(fd, (struct sockaddr *)&a, &len) != 0)
        return -1;
    close(fd);
    return ntohs(a.sin_port);
}

static bool port_open(int port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    bool ok = connect(fd, (struct sockaddr *)&a, sizeof a) == 0;
    close(fd);
    return ok;
}

static bool start_server(void) {
    int port = free_port();
    if (port <= 0) return false;
    snprintf(endpoint, sizeof endpoint, "http://127.0.0.1:%d", port);
    char ps[16];
    snprintf(ps, sizeof ps, "%d", port);
    server = fork();
    if (server == 0) {
        prctl(PR_SET_PDEATHSIG, SIGTERM); /* never outlive the test, even if it is killed */
        if (!freopen("/dev/null", "w", stdout) || !freopen("/dev/null", "w", stderr)) _exit(127);
        execlp("moto_server", "moto_server", "-H", "127.0.0.1", "-p", ps, (char *)NULL);
        _exit(127);
    }
    atexit(stop_server);
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    for (int i = 0; i < 300; i++) { /* up to 30 s */
        int status;
        if (waitpid(server, &status, WNOHANG) == server) {
            server = -1;
            return false;
        }
        if (port_open(port)) return true;
        nanosleep(&(struct timespec){0, 100000000}, NULL);
    }
    return false;
}

static ah_s3_config_t config(const char *ak, const char *sk) {
    ah_s3_config_t c;
    ah_error_t err;
    setenv("AWS_ACCESS_KEY_ID", ak, 1);
    setenv("AWS_SECRET_ACCESS_KEY", sk, 1);
    unsetenv("AWS_SESSION_TOKEN");
    setenv("AWS_REGION", "us-east-1", 1);
    if (ah_s3_config_from_env(&c, endpoint, &err) != AH_OK) fprintf(stderr, "config: %s\n", err.msg);
    c.connect_timeout_s = 3;
    c.stall_timeout_s = 10;
    return c;
}

static void test_xml(void) {
    const char *xml = "<Error><Code>NoSuchKey</Code><Message>a &lt;b&gt; &amp; &#47;c</Message></Error>";
    char out[64];
    const char *pos = NULL;
    CHECK(ah_s3_xml_next(xml, &pos, "Code", out, sizeof out) && strcmp(out, "NoSuchKey") == 0, "Code");
    pos = NULL;
    CHECK(ah_s3_xml_next(xml, &pos, "Message", out, sizeof out) && strcmp(out, "a <b> & /c") == 0,
          "entities decoded: %s", out);
    pos = NULL;
    CHECK(!ah_s3_xml_next(xml, &pos, "Message", out, 5), "too long for the buffer is refused");
    pos = NULL;
    CHECK(!ah_s3_xml_next("<Code>open", &pos, "Code", out, sizeof out), "unterminated tag");
    ah_s3_url_t u;
    ah_error_t err;
    CHECK(ah_s3_url_parse("s3://my-bucket/runs/a/", &u, &err) == AH_OK && strcmp(u.bucket, "my-bucket") == 0 &&
              strcmp(u.prefix, "runs/a") == 0, "url parse");
    CHECK_ERR(ah_s3_url_parse("s3://B/x", &u, &err), AH_ERR_USAGE, err, "bucket name");
    CHECK_ERR(ah_s3_url_parse("http://x/y", &u, &err), AH_ERR_USAGE, err, "s3://BUCKET/PREFIX");
}

static ah_status_t gather(ah_s3_t *s3, const char *bucket, const char *key, char **buf, size_t *n, ah_error_t *err) {
    return ah_s3_get_buffer(s3, bucket, key, 64u << 20, buf, n, err);
}

static void test_round_trips(void) {
    ah_s3_config_t c = config("test", "test");
    ah_s3_t *s3;
    ah_error_t err;
    CHECK(ah_s3_open(&c, &s3, &err) == AH_OK, "open: %s", err.msg);
    CHECK(ah_s3_create_bucket(s3, "bkt", &err) == AH_OK, "create bucket: %s", err.msg);
    const char *keys[] = {"run/a.txt", "run/b c+d.txt", "run/sub/e~f.txt", "run/g", "run/h", "other/x"};
    for (int i = 0; i < 6; i++)
        CHECK(ah_s3_put_buffer(s3, "bkt", keys[i], keys[i], strlen(keys[i]), &err) == AH_OK, "put %s: %s", keys[i], err.msg);
    char *buf;
    size_t n;
    CHECK(gather(s3, "bkt", "run/b c+d.txt", &buf, &n, &err) == AH_OK && n == 13 && memcmp(buf, "run/b c+d.txt", 13) == 0,
          "get round trip (key with space and plus): %s", err.msg);
    free(buf);
    bool exists = false;
    uint64_t size = 0;
    CHECK(ah_s3_head(s3, "bkt", "run/sub/e~f.txt", &exists, &size, &err) == AH_OK && exists && size == 15, "head");
    CHECK(ah_s3_head(s3, "bkt", "run/none", &exists, &size, &err) == AH_OK && !exists, "head of a missing key");
    ah_s3_object_t *objs;
    int no;
    c.list_max_keys = 2; /* forces three pages */
    ah_s3_t *paged;
    ah_s3_open(&c, &paged, &err);
    CHECK(ah_s3_list(paged, "bkt", "run/", &objs, &no, &err) == AH_OK && no == 5, "list (paged): %d, %s", no, err.msg);
    bool saw_space = false;
    for (int i = 0; i < no; i++) saw_space |= strcmp(objs[i].key, "run/b c+d.txt") == 0 && objs[i].size == 13;
    CHECK(saw_space, "listing decodes keys and sizes");
    free(objs);
    ah_s3_close(paged);
    CHECK(ah_s3_delete(s3, "bkt", "run/g", &err) == AH_OK, "delete: %s", err.msg);
    CHECK(ah_s3_head(s3, "bkt", "run/g", &exists, &size, &err) == AH_OK && !exists, "deleted");
    CHECK_ERR(gather(s3, "bkt", "run/g", &buf, &n, &err), AH_ERR_IO, err, "NoSuchKey");
    CHECK_EQ_I64(ah_s3_last_http(s3), 404);

    /* A 3 MiB file through put_file/get_file (libcurl adds Expect: 100-continue itself here). */
    char src[300], dst[300];
    snprintf(src, sizeof src, "%s/big.bin", tmp);
    snprintf(dst, sizeof dst, "%s/big.out", tmp);
    FILE *f = fopen(src, "wb");
    uint32_t want = 0;
    unsigned x = 12345;
    for (int i = 0; i < 3 << 18; i++) {
        x = x * 1103515245u + 12345u;
        fwrite(&x, 4, 1, f);
        want = ah_crc32c(want, &x, 4);
    }
    fclose(f);
    CHECK(ah_s3_put_file(s3, "bkt", "big/big.bin", src, &err) == AH_OK, "put_file: %s", err.msg);
    uint64_t bytes;
    uint32_t crc;
    CHECK(ah_s3_get_file(s3, "bkt", "big/big.bin", dst, &bytes, &crc, &err) == AH_OK && bytes == 3u << 20 && crc == want,
          "get_file round trip: %s", err.msg);

    /* Bandwidth cap: 2 MiB/s makes a 3 MiB download take about 1.5 s (less the first burst,
     * which libcurl lets through before it starts pacing). */
    ah_s3_config_t slow = c;
    slow.max_recv_bytes_per_s = 2 << 20;
    ah_s3_t *s3slow;
    ah_s3_open(&slow, &s3slow, &err);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    CHECK(ah_s3_get_file(s3slow, "bkt", "big/big.bin", dst, &bytes, &crc, &err) == AH_OK, "capped get: %s", err.msg);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double dt = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    printf("capped download: 3 MiB at 2 MiB/s took %.2f s\n", dt);
    CHECK(dt > 0.6, "the receive cap slows the download (%.2f s)", dt);
    ah_s3_close(s3slow);

    /* Faults. */
    CHECK_ERR(gather(s3, "no-such-bucket", "k", &buf, &n, &err), AH_ERR_IO, err, "NoSuchBucket");
    CHECK(strstr(err.msg, "no-such-bucket") != NULL, "bucket named: %s", err.msg);
    CHECK_ERR(ah_s3_list(s3, "no-such-bucket", "x", &objs, &no, &err), AH_ERR_IO, err, "NoSuchBucket");
    ah_s3_config_t dead = c;
    snprintf(dead.endpoint, sizeof dead.endpoint, "http://127.0.0.1:%d", free_port());
    ah_s3_t *s3dead;
    ah_s3_open(&dead, &s3dead, &err);
    CHECK_ERR(ah_s3_put_buffer(s3dead, "bkt", "k", "x", 1, &err), AH_ERR_COMM, err, "cannot reach the S3 endpoint");
    CHECK(strstr(err.msg, dead.endpoint) != NULL, "endpoint named: %s", err.msg);
    ah_s3_close(s3dead);
    ah_s3_close(s3);
}

/* Runs a shell command and returns its stdout (static buffer). */
static const char *sh(const char *cmd) {
    static char out[8192];
    out[0] = '\0';
    FILE *p = popen(cmd, "r");
    if (!p) return out;
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = '\0';
    pclose(p);
    return out;
}

/* Turns on moto's signature checking, with one real IAM user allowed s3:*. The IAM calls go
 * through the curl CLI while moto still lets 3 unauthenticated actions through. */
static bool enable_auth(char *ak, char *sk) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "curl -s -X POST -H 'Content-Type: text/plain' --data-binary 3 %s/moto-api/reset-auth", endpoint);
    sh(cmd);
    const char *iam = "curl -s --aws-sigv4 aws:amz:us-east-1:iam -u x:y -H 'x-amz-content-sha256: UNSIGNED-PAYLOAD'";
    snprintf(cmd, sizeof cmd, "%s %s/ -d Action=CreateUser -d UserName=ah -d Version=2010-05-08", iam, endpoint);
    sh(cmd);
    snprintf(cmd, sizeof cmd, "%s %s/ -d Action=CreateAccessKey -d UserName=ah -d Version=2010-05-08", iam, endpoint);
    const char *xml = sh(cmd), *pos = NULL;
    bool ok = ah_s3_xml_next(xml, &pos, "AccessKeyId", ak, 128);
    pos = NULL;
    ok = ok && ah_s3_xml_next(xml, &pos, "SecretAccessKey", sk, 128);
    snprintf(cmd, sizeof cmd,
             "%s %s/ -d Action=PutUserPolicy -d UserName=ah -d PolicyName=s3 -d Version=2010-05-08 "
             "--data-urlencode 'PolicyDocument={\"Version\":\"2012-10-17\",\"Statement\":[{\"Effect\":"
             "\"Allow\",\"Action\":\"s3:*\",\"Resource\":\"*\"}]}'",
             iam, endpoint);
    sh(cmd);
    return ok;
}

static void disable_auth(void) {
    char cmd[300];
    snprintf(cmd, sizeof cmd, "curl -s -X POST -H 'Content-Type: text/plain' --data-binary inf %s/moto-api/reset-auth", endpoint);
    sh(cmd);
}

static void test_credentials(void) {
    char ak[128], sk[128];
    bool ok = enable_auth(ak, sk);
    CHECK(ok, "moto IAM user created");
    if (!ok) return;
    ah_error_t err;
    ah_s3_t *s3;
    ah_s3_config_t c = config(ak, sk);
    ah_s3_open(&c, &s3, &err);
    /* The server recomputes every signature now: these pass only if ours are right. */
    CHECK(ah_s3_put_buffer(s3, "bkt", "auth/x.bin", "signed", 6, &err) == AH_OK, "signed put: %s", err.msg);
    char *buf;
    size_t n;
    CHECK(gather(s3, "bkt", "auth/x.bin", &buf, &n, &err) == AH_OK && n == 6, "signed get: %s", err.msg);
    if (n == 6) free(buf);
    bool exists;
    uint64_t size;
    CHECK(ah_s3_head(s3, "bkt", "auth/x.bin", &exists, &size, &err) == AH_OK && exists, "signed head: %s", err.msg);
    CHECK(ah_s3_delete(s3, "bkt", "auth/x.bin", &err) == AH_OK, "signed delete: %s", err.msg);
    ah_s3_close(s3);

    c = config(ak, "wrong-secret");
    ah_s3_open(&c, &s3, &err);
    CHECK_ERR(ah_s3_put_buffer(s3, "bkt", "auth/y", "x", 1, &err), AH_ERR_COMM, err, "HTTP 403 SignatureDoesNotMatch");
    CHECK(strstr(err.msg, "AWS_SECRET_ACCESS_KEY") != NULL, "says what to check: %s", err.msg);
    ah_s3_close(s3);
    c = config("AKIANOTAREALKEY00000", sk);
    ah_s3_open(&c, &s3, &err);
    CHECK_ERR(gather(s3, "bkt", "auth/y", &buf, &n, &err), AH_ERR_COMM, err, "InvalidAccessKeyId");
    ah_s3_close(s3);
    disable_auth();
}

/* ---- checkpoints in the cloud ---------------------------------------------------------------- */

static void write_step(const char *root, const char *node, int64_t step, int first, int last) {
    ah_ckpt_writer_t *w;
    ah_error_t err;
    CHECK(ah_ckpt_writer_begin(root, step, &w, &err) == AH_OK, "begin: %s", err.msg);
    float v[256];
    for (int b = first; b < last; b++) {
        for (int i = 0; i < 256; i++) v[i] = (float)(step + b) + (float)i * 0.5f;
        ah_st_tensor_t t[] = {{"w", AH_DTYPE_F32, 2, {16, 16}, v, false, 0}};
        char name[128];
        ah_ckpt_shard_name(name, sizeof name, AH_SHARD_BLOCK, b, 1, 0);
        CHECK(ah_ckpt_write_shard(w, name, t, 1, NULL, &err) == AH_OK, "shard: %s", err.msg);
    }
    CHECK(ah_ckpt_writer_finish_part(w, 0, &err) == AH_OK, "part: %s", err.msg);
    ah_ckpt_writer_free(w);
    ah_ckpt_meta_t m = {.step = step, .data_position = step * 8};
    snprintf(m.node, sizeof m.node, "%s", node);
    CHECK(ah_ckpt_commit(root, &m, 1, &err) == AH_OK, "commit: %s", err.msg);
}

/* The peer tier as the trainer will provide it, backed here by another node's directory. */
static ah_status_t peer_manifests(void *ctx, ah_ckpt_manifest_t **out, int *n, ah_error_t *err) {
    ah_ckpt_step_info_t *info;
    int ns;
    if (ah_ckpt_list(ctx, &info, &ns, err) != AH_OK) return err->code;
    *out = calloc((size_t)ns + 1, sizeof **out);
    *n = 0;
    for (int i = 0; i < ns; i++)
        if (info[i].committed && ah_ckpt_load(ctx, info[i].step, &(*out)[*n], err) == AH_OK) (*n)++;
    free(info);
    return AH_OK;
}

static ah_status_t peer_fetch(void *ctx, int64_t step, const char *name, const char *dest, ah_error_t *err) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "cp '%s/step-%08lld/%s' '%s' 2>/dev/null", (const char *)ctx, (long long)step, name, dest);
    if (system(cmd) != 0) return ah_error_set(err, AH_ERR_IO, "peer has no copy of %s", name);
    return AH_OK;
}

static void corrupt(const char *root, int64_t step, const char *name, bool truncate_it) {
    char p[600];
    snprintf(p, sizeof p, "%s/step-%08lld/%s", root, (long long)step, name);
    if (truncate_it) {
        CHECK(truncate(p, 64) == 0, "truncate %s", p);
        return;
    }
    FILE *f = fopen(p, "r+b");
    CHECK(f != NULL, "open %s", p);
    if (!f) return;
    fseek(f, -10, SEEK_END);
    fputc(0x7F, f);
    fclose(f);
}

/* on_retry: ctx counts the retries told and keeps the last one's number (each within tries). */
static void count_retry(void *ctx, int retry, int tries, double wait_s, const char *why) {
    int *n = ctx;
    CHECK(retry == n[0] + 1 && tries == 2 && wait_s == 0 && strstr(why, "cannot reach"), "retry %d of %d: %s", retry,
          tries, why);
    n[0]++;
    n[1] = retry;
}

static void test_upload_and_restore(void) {
    char ra[300], rb[300], rc[300], stage[300];
    snprintf(ra, sizeof ra, "%s/node-a", tmp);
    snprintf(rb, sizeof rb, "%s/node-b", tmp);
    snprintf(rc, sizeof rc, "%s/node-c", tmp);
    snprintf(stage, sizeof stage, "%s/staging", tmp);
    /* Node a holds blocks 0-1, node b blocks 2-3; a also has a newer step 300 never uploaded. */
    write_step(ra, "node-a", 100, 0, 2);
    write_step(ra, "node-a", 200, 0, 2);
    write_step(rb, "node-b", 200, 2, 4);
    write_step(ra, "node-a", 300, 0, 2);

    ah_error_t err;
    ah_s3_config_t c = config("test", "test");
    ah_s3_url_t url;
    ah_s3_url_parse("s3://bkt/runs/r1", &url, &err);
    ah_ckpt_uploader_t *ua, *ub;
    CHECK(ah_ckpt_uploader_start(&c, &url, &ua, &err) == AH_OK, "uploader: %s", err.msg);
    CHECK(ah_ckpt_uploader_start(&c, &url, &ub, &err) == AH_OK, "uploader: %s", err.msg);
    CHECK(ah_ckpt_uploader_submit(ua, ra, 200, NULL, 0, &err) == AH_OK, "submit a");
    const char *b_names[] = {"block-002.tp1-0.safetensors", "block-003.tp1-0.safetensors"};
    CHECK(ah_ckpt_uploader_submit(ub, rb, 200, b_names, 2, &err) == AH_OK, "submit b");
    CHECK(ah_ckpt_uploader_wait(ua, &err) == AH_OK, "upload a: %s", err.msg);
    CHECK(ah_ckpt_uploader_wait(ub, &err) == AH_OK, "upload b: %s", err.msg);
    ah_ckpt_upload_stats_t us = ah_ckpt_uploader_stats(ua);
    CHECK(us.last_step == 200 && us.steps == 1 && us.bytes > 0, "uploader stats: step %lld", (long long)us.last_step);
    ah_ckpt_uploader_stop(ua);
    ah_ckpt_uploader_stop(ub);

    ah_s3_t *s3;
    ah_s3_open(&c, &s3, &err);
    /* Files of step 400 uploaded without a manifest (an upload cut short): never trusted. */
    char key[600], src[600];
    ah_ckpt_cloud_key(key, sizeof key, &url, 400, "block-000.tp1-0.safetensors");
    snprintf(src, sizeof src, "%s/step-00000200/block-000.tp1-0.safetensors", ra);
    CHECK(ah_s3_put_file(s3, "bkt", key, src, &err) == AH_OK, "partial upload: %s", err.msg);
    ah_ckpt_step_info_t *steps;
    ah_ckpt_manifest_t *ms;
    int ns, nm;
    CHECK(ah_ckpt_cloud_scan(s3, &url, &ms, &nm, &steps, &ns, &err) == AH_OK, "scan: %s", err.msg);
    CHECK(nm == 2 && ns == 2, "2 cloud manifests, 2 steps (got %d, %d)", nm, ns);
    CHECK(ns == 2 && steps[0].step == 200 && steps[0].committed && steps[0].n_files == 4 && steps[1].step == 400 &&
              !steps[1].committed && steps[1].n_files == 1, "cloud step 200 committed with 4 files, 400 not");
    free(steps);
    ah_ckpt_manifests_free(ms, nm);

    const char *need[] = {"block-000.tp1-0.safetensors", "block-001.tp1-0.safetensors",
                          "block-002.tp1-0.safetensors", "block-003.tp1-0.safetensors"};
    char(*paths)[AH_CKPT_PATH_MAX] = calloc(4, sizeof *paths);
    /* A fresh node: only the cloud. */
    ah_ckpt_sources_t src_c = {.local_root = rc, .cloud = s3, .cloud_url = url, .staging_dir = stage};
    ah_ckpt_catalog_t *cat;
    int64_t step;
    ah_ckpt_meta_t meta;
    ah_ckpt_restore_stats_t st = {0};
    CHECK(ah_ckpt_catalog_open(&src_c, &cat, &err) == AH_OK, "catalog: %s", err.msg);
    CHECK(ah_ckpt_catalog_newest(cat, need, 4, &step, &meta, &err) == AH_OK && step == 200 && meta.data_position == 1600,
          "newest complete step is 200: %s", err.msg);
    CHECK(ah_ckpt_catalog_fetch(cat, 200, need, 4, paths, &st, &err) == AH_OK, "cloud fetch: %s", err.msg);
    CHECK(st.files[AH_TIER_CLOUD] == 4 && st.files[AH_TIER_LOCAL] == 0 && st.bytes[AH_TIER_CLOUD] > 0, "all 4 from the cloud");
    /* one tier's search: the cloud alone holds step 200 complete; the local tier (empty) none */
    CHECK(ah_ckpt_catalog_newest_in(cat, AH_TIER_CLOUD, need, 4, &step, NULL, &err) == AH_OK && step == 200,
          "the cloud alone: step 200, got %lld: %s", (long long)step, err.msg);
    CHECK_ERR(ah_ckpt_catalog_newest_in(cat, AH_TIER_LOCAL, need, 4, &step, NULL, &err), AH_ERR_INFEASIBLE, err,
              "no committed checkpoint");
    ah_ckpt_catalog_free(cat);

    /* Node a after node b died: local first, then the peer (b's disk survives), then the cloud. */
    ah_ckpt_peer_t peer = {.manifests = peer_manifests, .fetch = peer_fetch, .ctx = rb};
    ah_ckpt_sources_t src_a = {.local_root = ra, .peer = &peer, .cloud = s3, .cloud_url = url, .staging_dir = stage};
    memset(&st, 0, sizeof st);
    CHECK(ah_ckpt_catalog_open(&src_a, &cat, &err) == AH_OK, "catalog: %s", err.msg);
    CHECK(ah_ckpt_catalog_newest(cat, need, 4, &step, NULL, &err) == AH_OK && step == 200,
          "step 300 lacks blocks 2-3, so 200: %lld", (long long)step);
    CHECK(ah_ckpt_catalog_fetch(cat, 200, need, 4, paths, &st, &err) == AH_OK, "tiered fetch: %s", err.msg);
    CHECK(st.files[AH_TIER_LOCAL] == 2 && st.files[AH_TIER_PEER] == 2 && st.files[AH_TIER_CLOUD] == 0 && st.fallbacks == 0,
          "2 local + 2 peer, got %d/%d/%d", st.files[0], st.files[1], st.files[2]);
    CHECK(strstr(paths[0], ra) == paths[0], "local copy used in place: %s", paths[0]);
    const char *only3[] = {"block-003.tp1-0.safetensors"};
    CHECK(ah_ckpt_catalog_newest(cat, only3, 1, &step, NULL, &err) == AH_OK && step == 200, "block 3 newest at 200");
    const char *nowhere[] = {"block-009.tp1-0.safetensors"};
    CHECK_ERR(ah_ckpt_catalog_newest(cat, nowhere, 1, &step, NULL, &err), AH_ERR_INFEASIBLE, err, "lacks block-009");
    ah_ckpt_catalog_free(cat);

    /* Damage: a's block 0 corrupt (-> cloud), b's block 2 truncated (-> cloud). */
    corrupt(ra, 200, "block-000.tp1-0.safetensors", false);
    corrupt(rb, 200, "block-002.tp1-0.safetensors", true);
    memset(&st, 0, sizeof st);
    CHECK(ah_ckpt_catalog_open(&src_a, &cat, &err) == AH_OK, "catalog: %s", err.msg);
    CHECK(ah_ckpt_catalog_fetch(cat, 200, need, 4, paths, &st, &err) == AH_OK, "fetch with fallbacks: %s", err.msg);
    CHECK(st.files[AH_TIER_LOCAL] == 1 && st.files[AH_TIER_PEER] == 1 && st.files[AH_TIER_CLOUD] == 2 && st.fallbacks == 2,
          "1 local + 1 peer + 2 cloud after 2 fallbacks, got %d/%d/%d, %d", st.files[0], st.files[1], st.files[2],
          st.fallbacks);
    ah_ckpt_file_t want;
    ah_ckpt_manifest_t mb;
    ah_ckpt_load(rb, 200, &mb, &err);
    want = *ah_ckpt_manifest_find(&mb, "block-002.tp1-0.safetensors");
    ah_ckpt_manifest_free(&mb);
    CHECK(ah_ckpt_verify_file(paths[2], &want, &err) == AH_OK && strstr(paths[2], stage) == paths[2],
          "block 2 restored intact from the cloud into staging: %s", err.msg);
    printf("restore after damage: local %d files %.3f s, peer %d, cloud %d files %llu B %.3f s; last fallback: %s\n",
           st.files[0], st.seconds[0], st.files[1], st.files[2], (unsigned long long)st.bytes[2], st.seconds[2],
           st.last_fallback);
    ah_ckpt_catalog_free(cat);

    /* Cloud unreachable and local damaged: a clear error naming every tier's reason. */
    ah_s3_config_t dead = c;
    snprintf(dead.endpoint, sizeof dead.endpoint, "http://127.0.0.1:%d", free_port());
    ah_s3_t *s3dead;
    ah_s3_open(&dead, &s3dead, &err);
    ah_ckpt_sources_t src_dead = {.local_root = ra, .cloud = s3dead, .cloud_url = url, .staging_dir = stage};
    CHECK(ah_ckpt_catalog_open(&src_dead, &cat, &err) == AH_OK, "local still readable: %s", err.msg);
    CHECK(strstr(ah_ckpt_catalog_note(cat, AH_TIER_CLOUD), "cannot reach") != NULL, "cloud note: %s",
          ah_ckpt_catalog_note(cat, AH_TIER_CLOUD));
    CHECK_ERR(ah_ckpt_catalog_fetch(cat, 200, need, 1, paths, &st, &err), AH_ERR_INVALID, err, "no tier has an intact copy");
    ah_ckpt_catalog_free(cat);
    /* its listing retried as asked: told before each retry, the note naming the tries */
    int retries[2] = {0, 0};
    src_dead.cloud_tries = 3;
    src_dead.on_retry = count_retry;
    src_dead.retry_ctx = retries;
    CHECK(ah_ckpt_catalog_open(&src_dead, &cat, &err) == AH_OK, "local still readable: %s", err.msg);
    CHECK(retries[0] == 2 && retries[1] == 2, "2 retries of 2 told, got %d (last k=%d)", retries[0], retries[1]);
    CHECK(strstr(ah_ckpt_catalog_note(cat, AH_TIER_CLOUD), "3 tries, the last: ") != NULL, "note: %s",
          ah_ckpt_catalog_note(cat, AH_TIER_CLOUD));
    ah_ckpt_catalog_forget_tier(cat, AH_TIER_CLOUD, "forgotten");
    CHECK(strcmp(ah_ckpt_catalog_note(cat, AH_TIER_CLOUD), "forgotten") == 0, "forget_tier's note");
    ah_ckpt_catalog_free(cat);
    ah_s3_close(s3dead);

    /* An upload into a missing bucket fails clearly and commits nothing. */
    ah_s3_url_t nob;
    ah_s3_url_parse("s3://no-such-bucket/r", &nob, &err);
    CHECK(ah_ckpt_uploader_start(&c, &nob, &ua, &err) == AH_OK, "uploader");
    ah_ckpt_uploader_submit(ua, ra, 100, NULL, 0, &err);
    CHECK_ERR(ah_ckpt_uploader_wait(ua, &err), AH_ERR_IO, err, "NoSuchBucket");
    ah_ckpt_uploader_stop(ua);
    /* ... and a damaged local file is never uploaded. */
    CHECK_ERR(ah_ckpt_cloud_upload_step(s3, &url, rb, 200, NULL, 0, NULL, &err), AH_ERR_INVALID, err,
              "not uploading a damaged file");

    /* The CLI over both tiers. */
    const char *bin = getenv("AH_BUILD_DIR");
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s/autohet ckpt ls --local-root %s --cloud s3://bkt/runs/r1 --s3-endpoint %s 2>&1",
             bin ? bin : "build", ra, endpoint);
    const char *out = sh(cmd);
    CHECK(strstr(out, "local") && strstr(out, "cloud") && strstr(out, "300") && strstr(out, "incomplete"),
          "ckpt ls shows both tiers:\n%s", out);
    snprintf(cmd, sizeof cmd, "%s/autohet ckpt verify --cloud s3://bkt/runs/r1 --s3-endpoint %s >/dev/null 2>&1",
             bin ? bin : "build", endpoint);
    CHECK(system(cmd) == 0, "ckpt verify: cloud copies intact");
    snprintf(cmd, sizeof cmd, "%s/autohet ckpt verify --local-root %s 2>&1; echo rc=$?", bin ? bin : "build", ra);
    out = sh(cmd);
    CHECK(strstr(out, "step 200: FAILED") && strstr(out, "block-000.tp1-0.safetensors") && strstr(out, "step 100: ok") &&
              strstr(out, "rc=1"), "ckpt verify names the damaged file and fails:\n%s", out);
    free(paths);
    ah_s3_close(s3);
}

int main(void) {
    tmp = mkdtemp(tmp_buf);
    test_xml();
    if (!tmp || !start_server()) {
        fprintf(stderr, "test_ckpt_s3: could not start moto_server on 127.0.0.1 (install it with "
                        "`pip install 'moto[server]'`; it must be on PATH)\n");
        return 1;
    }
    test_round_trips();
    test_credentials();
    test_upload_and_restore();
    return ah_test_finish();
}
