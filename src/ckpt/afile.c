#define _GNU_SOURCE /* O_DIRECT */
#include "ckpt/afile.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
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
    f->n_pending = 0;
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
enum { DIRECT_ALIGN = AH_AFILE_BLOCK, DIRECT_BYTES = 4 << 20 };

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

/* Back to buffered writes (the file system refused an O_DIRECT write, or what is left is not whole
 * blocks): the fd loses O_DIRECT; the buffer stays for the bytes it holds. */
static void direct_off(ah_afile_t *f) {
#ifdef O_DIRECT
    const int fl = fcntl(f->fd, F_GETFL);
    if (fl >= 0) (void)fcntl(f->fd, F_SETFL, fl & ~O_DIRECT);
#endif
}

/* iov[0 .. n) written in order (writev, as often as it takes); the list is consumed. */
static ah_status_t write_iov(ah_afile_t *f, struct iovec *iov, int n, ah_error_t *err) {
    bool refused = false; /* O_DIRECT refused once: buffered from then on */
    while (n > 0) {
        const ssize_t w = writev(f->fd, iov, n);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0 && errno == EINVAL && f->direct && !refused) { /* this file system's O_DIRECT refuses it */
            direct_off(f);
            refused = true;
            continue;
        }
        if (w < 0) return io_error(err, f->path, "cannot write", errno);
        size_t done = (size_t)w;
        for (; n > 0 && done >= iov->iov_len; n--) done -= (iov++)->iov_len;
        if (n > 0 && done > 0) { /* a short write: the rest is no longer aligned */
            iov->iov_base = (char *)iov->iov_base + done;
            iov->iov_len -= done;
            if (f->direct) direct_off(f);
        }
    }
    return AH_OK;
}

static ah_status_t write_all(ah_afile_t *f, const void *buf, size_t n, ah_error_t *err) {
    struct iovec one = {(void *)buf, n};
    return write_iov(f, &one, 1, err);
}

/* Direct I/O: the pending writes, whole blocks each (the last one's partial block only with tail,
 * buffered); the buffer empty again. */
static ah_status_t direct_flush(ah_afile_t *f, bool tail, ah_error_t *err) {
    struct iovec rest = {0};
    if (f->n_pending > 0) {
        struct iovec *last = &f->pending[f->n_pending - 1];
        rest.iov_len = last->iov_len % DIRECT_ALIGN;
        last->iov_len -= rest.iov_len;
        rest.iov_base = (char *)last->iov_base + last->iov_len;
    }
    ah_status_t st = write_iov(f, f->pending, f->n_pending, err);
    if (st == AH_OK && rest.iov_len > 0) {
        if (!tail) st = ah_error_set(err, AH_ERR_INTERNAL, "%s: direct write of a partial block", f->path);
        else direct_off(f);
        if (st == AH_OK) st = write_iov(f, &rest, 1, err);
    }
    f->n_pending = 0;
    f->direct_fill = 0;
    return st;
}

/* Direct I/O: n bytes at p appended to the pending writes, where they are (in_place: p and the bytes
 * pending are whole blocks) or copied into the buffer (n no more than it has room for), with sum
 * into the running CRC. Makes room in the list first (a new stretch begins only where the pending
 * bytes are whole blocks). */
static ah_status_t direct_append(ah_afile_t *f, const char *p, size_t n, bool in_place, bool sum, ah_error_t *err) {
    char *const at = in_place ? (char *)p : f->direct + f->direct_fill;
    struct iovec *last = f->n_pending ? &f->pending[f->n_pending - 1] : NULL;
    if (!last || (char *)last->iov_base + last->iov_len != at) { /* a new stretch */
        if (f->n_pending == AH_AFILE_PENDING && direct_flush(f, false, err) != AH_OK) return err->code;
        last = &f->pending[f->n_pending++];
        *last = (struct iovec){in_place ? at : f->direct + f->direct_fill, 0};
    }
    if (!in_place) {
        memcpy(f->direct + f->direct_fill, p, n);
        f->direct_fill += n;
    }
    last->iov_len += n;
    if (sum) f->crc = ah_crc32c(f->crc, p, n);
    f->bytes += n;
    return AH_OK;
}

/* ah_afile_write, with sum the CRC taken of the bytes, else left to the caller; kept: the caller's
 * bytes stay as they are until the commit or abort, so whole blocks may be written from where they are. */
static ah_status_t write_bytes(ah_afile_t *f, const void *buf, size_t n, bool sum, bool kept, ah_error_t *err) {
    const char *p = buf;
    for (size_t left = n; f->direct && left > 0;) {
        /* p congruent to the file's offset modulo a block: from the next block boundary on, the
         * bytes go to the disk from where they are (the snapshot's layout, ckpt/async.h) */
        const uint64_t off = f->bytes;
        const bool congruent = kept && ((uintptr_t)p - off) % DIRECT_ALIGN == 0;
        size_t take;
        bool in_place = false;
        if (congruent && (uintptr_t)p % DIRECT_ALIGN == 0 && left >= DIRECT_ALIGN) {
            take = left / DIRECT_ALIGN * DIRECT_ALIGN;
            in_place = true;
        } else {
            take = left < DIRECT_BYTES - f->direct_fill ? left : DIRECT_BYTES - f->direct_fill;
            const size_t to_block = DIRECT_ALIGN - (uintptr_t)p % DIRECT_ALIGN;
            if (congruent && take > to_block) take = to_block; /* then in place */
        }
        if (direct_append(f, p, take, in_place, sum, err) != AH_OK) return err->code;
        p += take;
        left -= take;
        if (f->direct_fill == DIRECT_BYTES && direct_flush(f, false, err) != AH_OK) return err->code;
    }
    if (f->direct) return AH_OK;
    ah_status_t st = write_all(f, buf, n, err);
    if (st != AH_OK) return st;
    if (sum) f->crc = ah_crc32c(f->crc, buf, n);
    f->bytes += n;
    return AH_OK;
}

ah_status_t ah_afile_write(ah_afile_t *f, const void *buf, size_t n, ah_error_t *err) {
    return write_bytes(f, buf, n, true, false, err);
}

ah_status_t ah_afile_write_kept(ah_afile_t *f, const void *buf, size_t n, ah_error_t *err) {
    return write_bytes(f, buf, n, true, true, err);
}

ah_status_t ah_afile_write_crc(ah_afile_t *f, const void *buf, size_t n, uint32_t crc, ah_error_t *err) {
    const uint32_t before = f->crc;
    if (write_bytes(f, buf, n, false, true, err) != AH_OK) return err->code;
    f->crc = ah_crc32c_combine(before, crc, n);
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
    f->n_pending = 0;
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
