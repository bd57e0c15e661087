#define _GNU_SOURCE /* O_DIRECT */
#include "ckpt/afile.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ckpt/crc32c.h"

static atomic_uint temp_counter;

/* "DIR" of "DIR/NAME" ("." when there is no slash). */
static void dir_of(const char *path, char *out, size_t cap) {
    const char *slash = strrchr(path, '/');
    if (!slash) snprintf(out, cap, ".");
    else if (slash == path) snprintf(out, cap, "/");
    else snprintf(out, cap, "%.*s", (int)(slash - path), path);
}

static ah_status_t io_error(ah_error_t *err, const char *path, const char *what, int e) {
    if (e == ENOSPC || e == EDQUOT)
        return ah_error_set(err, AH_ERR_IO,
                            "%s: %s: no space left on the device; free space there, keep fewer "
                            "checkpoints (--keep N of autohet train and run, default 2), or point the "
                            "checkpoint root at a larger disk",
                            path, what);
    return ah_error_set(err, AH_ERR_IO, "%s: %s: %s", path, what, strerror(e));
}

ah_status_t ah_afile_open(ah_afile_t *f, const char *path, ah_error_t *err) {
    f->fd = -1;
    f->bytes = 0;
    f->crc = 0;
    f->direct = NULL;
    f->direct_fill = 0;
    f->tmp[0] = '\0';
    if (snprintf(f->path, sizeof f->path, "%s", path) >= (int)sizeof f->path)
        return ah_error_set(err, AH_ERR_IO, "%.200s...: path too long", path);
    char dir[AH_CKPT_PATH_MAX];
    dir_of(path, dir, sizeof dir);
    const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    unsigned n = atomic_fetch_add(&temp_counter, 1);
    if (snprintf(f->tmp, sizeof f->tmp, "%s/.%s.tmp.%ld.%u", dir, base, (long)getpid(), n) >=
        (int)sizeof f->tmp)
        return ah_error_set(err, AH_ERR_IO, "%.200s...: path too long", path);
    f->fd = open(f->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (f->fd < 0) {
        int e = errno;
        f->tmp[0] = '\0';
        return io_error(err, path, "cannot create", e);
    }
    return AH_OK;
}

/* Direct I/O's buffer: a multiple of every block size O_DIRECT asks for, and large enough that
 * one write keeps the disk busy. */
enum { DIRECT_ALIGN = 4096, DIRECT_BYTES = 4 << 20 };

/* The direct-I/O buffer a thread's last file used, kept for its next one (freed at the thread's
 * exit). A fresh 4 MiB allocation per file came back as fresh pages every time, which the kernel
 * zeroed and faulted in for every shard: 1025 minor faults a file, 0.155-0.187 CPU-s of a 306 MB
 * save against 0.094-0.104 with the buffer kept (bench_ckpt_writer, load 13-15). */
static pthread_key_t spare_key;
static pthread_once_t spare_once = PTHREAD_ONCE_INIT;

static void spare_key_make(void) {
    (void)pthread_key_create(&spare_key, free);
}

static char *buffer_take(void) {
    pthread_once(&spare_once, spare_key_make);
    char *b = pthread_getspecific(spare_key);
    if (b) {
        (void)pthread_setspecific(spare_key, NULL);
        return b;
    }
    void *fresh = NULL;
    return posix_memalign(&fresh, DIRECT_ALIGN, DIRECT_BYTES) == 0 ? fresh : NULL;
}

static void buffer_give(char *b) {
    if (!b) return;
    pthread_once(&spare_once, spare_key_make);
    if (pthread_getspecific(spare_key) || pthread_setspecific(spare_key, b) != 0) free(b);
}

bool ah_afile_direct(ah_afile_t *f) {
#ifdef O_DIRECT
    const int fl = fcntl(f->fd, F_GETFL);
    if (f->bytes != 0 || f->direct || fl < 0) return false;
    char *buf = buffer_take();
    if (!buf) return false;
    if (fcntl(f->fd, F_SETFL, fl | O_DIRECT) != 0) {
        buffer_give(buf);
        return false;
    }
    f->direct = buf;
    return true;
#else
    (void)f;
    return false;
#endif
}

/* Back to buffered writes (the file system refused an O_DIRECT write, or the tail is not a whole
 * block): the fd loses O_DIRECT; the buffer stays for the bytes it holds. */
static void direct_off(ah_afile_t *f) {
#ifdef O_DIRECT
    const int fl = fcntl(f->fd, F_GETFL);
    if (fl >= 0) (void)fcntl(f->fd, F_SETFL, fl & ~O_DIRECT);
#endif
}

static ah_status_t write_all(ah_afile_t *f, const void *buf, size_t n, ah_error_t *err) {
    const char *p = buf;
    size_t left = n;
    while (left > 0) {
        ssize_t w = write(f->fd, p, left);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0 && errno == EINVAL && f->direct) { /* this file system's O_DIRECT refuses it */
            direct_off(f);
            w = write(f->fd, p, left);
        }
        if (w < 0) return io_error(err, f->path, "cannot write", errno);
        if ((size_t)w < left && f->direct) direct_off(f); /* the rest is no longer aligned */
        p += w;
        left -= (size_t)w;
    }
    return AH_OK;
}

/* Direct I/O: the buffer's whole blocks written; with tail, the rest too (buffered). */
static ah_status_t direct_flush(ah_afile_t *f, bool tail, ah_error_t *err) {
    const size_t whole = f->direct_fill / DIRECT_ALIGN * DIRECT_ALIGN;
    ah_status_t st = whole ? write_all(f, f->direct, whole, err) : AH_OK;
    if (st == AH_OK && whole < f->direct_fill) {
        if (!tail) return ah_error_set(err, AH_ERR_INTERNAL, "%s: direct write of a partial block", f->path);
        direct_off(f);
        st = write_all(f, f->direct + whole, f->direct_fill - whole, err);
    }
    f->direct_fill = 0;
    return st;
}

ah_status_t ah_afile_write(ah_afile_t *f, const void *buf, size_t n, ah_error_t *err) {
    const char *p = buf;
    for (size_t left = n; f->direct && left > 0;) { /* through the aligned buffer */
        const size_t take = left < DIRECT_BYTES - f->direct_fill ? left : DIRECT_BYTES - f->direct_fill;
        memcpy(f->direct + f->direct_fill, p, take);
        f->crc = ah_crc32c(f->crc, p, take);
        f->direct_fill += take;
        f->bytes += take;
        p += take;
        left -= take;
        if (f->direct_fill == DIRECT_BYTES && direct_flush(f, false, err) != AH_OK) return err->code;
    }
    if (f->direct) return AH_OK;
    ah_status_t st = write_all(f, buf, n, err);
    if (st != AH_OK) return st;
    f->crc = ah_crc32c(f->crc, buf, n);
    f->bytes += n;
    return AH_OK;
}

ah_status_t ah_afile_commit(ah_afile_t *f, bool sync_dir, ah_error_t *err) {
    /* Data must be on disk before the rename makes it visible under its final name, or a power
     * loss could leave a complete-looking name over missing blocks. */
    if (f->direct) {
        const ah_status_t st = direct_flush(f, true, err);
        buffer_give(f->direct);
        f->direct = NULL;
        if (st != AH_OK) {
            ah_afile_abort(f);
            return st;
        }
    }
    if (fsync(f->fd) != 0) {
        int e = errno;
        ah_afile_abort(f);
        return io_error(err, f->path, "cannot sync", e);
    }
    int rc = close(f->fd);
    f->fd = -1;
    if (rc != 0) {
        int e = errno;
        ah_afile_abort(f);
        return io_error(err, f->path, "cannot close", e);
    }
    if (rename(f->tmp, f->path) != 0) {
        int e = errno;
        ah_afile_abort(f);
        return io_error(err, f->path, "cannot rename into place", e);
    }
    f->tmp[0] = '\0';
    if (sync_dir) {
        char dir[AH_CKPT_PATH_MAX];
        dir_of(f->path, dir, sizeof dir);
        return ah_ckpt_fsync_dir(dir, err);
    }
    return AH_OK;
}

void ah_afile_abort(ah_afile_t *f) {
    buffer_give(f->direct);
    f->direct = NULL;
    if (f->fd >= 0) close(f->fd);
    f->fd = -1;
    if (f->tmp[0]) unlink(f->tmp);
    f->tmp[0] = '\0';
}

ah_status_t ah_ckpt_fsync_dir(const char *dir, ah_error_t *err) {
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return io_error(err, dir, "cannot open directory", errno);
    int rc = fsync(fd);
    int e = errno;
    close(fd);
    if (rc != 0) return io_error(err, dir, "cannot sync directory", e);
    return AH_OK;
}

ah_status_t ah_ckpt_file_crc(const char *path, uint64_t *bytes, uint32_t *crc, ah_error_t *err) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return io_error(err, path, "cannot open", errno);
    enum { CHUNK = 1 << 20 };
    char *buf = malloc(CHUNK);
    if (!buf) {
        close(fd);
        return ah_error_set(err, AH_ERR_OOM, "%s: out of memory for a read buffer", path);
    }
    uint64_t n = 0;
    uint32_t c = 0;
    ah_status_t st = AH_OK;
    for (;;) {
        ssize_t r = read(fd, buf, CHUNK);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            st = io_error(err, path, "cannot read", errno);
            break;
        }
        if (r == 0) break;
        c = ah_crc32c(c, buf, (size_t)r);
        n += (uint64_t)r;
    }
    free(buf);
    close(fd);
    if (st == AH_OK) {
        *bytes = n;
        *crc = c;
    }
    return st;
}

bool ah_afile_is_temp_name(const char *name) {
    return name[0] == '.' && strstr(name, ".tmp.") != NULL;
}

int ah_ckpt_join(char *buf, size_t cap, const char *dir, const char *name) {
    int n = snprintf(buf, cap, "%s/%s", dir, name);
    return n < 0 || (size_t)n >= cap ? -1 : n;
}
