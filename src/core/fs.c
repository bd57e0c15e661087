/* mkdir -p and rm -r (core/fs.h). */
#include "core/fs.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* One directory, which may exist already as a directory. */
static ah_status_t mkdir_one(const char *path, ah_error_t *err) {
    if (mkdir(path, 0755) == 0) return AH_OK;
    if (errno != EEXIST)
        return ah_error_set(err, AH_ERR_IO, "%s: cannot create the directory: %s", path, strerror(errno));
    struct stat sb;
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) return AH_OK;
    return ah_error_set(err, AH_ERR_IO, "%s: exists and is not a directory", path);
}

ah_status_t ah_fs_mkdirs(const char *path, ah_error_t *err) {
    char buf[AH_FS_PATH_MAX];
    if (!*path) return ah_error_set(err, AH_ERR_IO, "cannot create a directory with an empty path");
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf)
        return ah_error_set(err, AH_ERR_IO, "%.200s...: path too long (at most %d bytes)", path, AH_FS_PATH_MAX - 1);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        const ah_status_t s = mkdir_one(buf, err);
        if (s != AH_OK) return s;
        *p = '/';
    }
    return mkdir_one(buf, err);
}

ah_status_t ah_fs_rm_tree(const char *path, ah_error_t *err) {
    struct stat st;
    if (lstat(path, &st) != 0)
        return errno == ENOENT ? AH_OK : ah_error_set(err, AH_ERR_IO, "%s: %s", path, strerror(errno));
    if (!S_ISDIR(st.st_mode)) {
        if (unlink(path) != 0 && errno != ENOENT)
            return ah_error_set(err, AH_ERR_IO, "%s: cannot remove: %s", path, strerror(errno));
        return AH_OK;
    }
    DIR *d = opendir(path);
    if (!d) return ah_error_set(err, AH_ERR_IO, "%s: cannot open the directory: %s", path, strerror(errno));
    ah_status_t s = AH_OK;
    for (struct dirent *e; s == AH_OK && (e = readdir(d));) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        char child[AH_FS_PATH_MAX];
        if (snprintf(child, sizeof child, "%s/%s", path, e->d_name) >= (int)sizeof child)
            s = ah_error_set(err, AH_ERR_IO, "%.200s/%s: path too long", path, e->d_name);
        else
            s = ah_fs_rm_tree(child, err);
    }
    closedir(d);
    if (s != AH_OK) return s;
    if (rmdir(path) != 0 && errno != ENOENT)
        return ah_error_set(err, AH_ERR_IO, "%s: cannot remove: %s", path, strerror(errno));
    return AH_OK;
}

bool ah_fs_is_dir(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
}
