/* The file-system helpers of src/elastic/ (job.h). */
#include "elastic/job.h"

#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

ah_status_t ah_mkdirs(const char *path, ah_error_t *err) {
    char buf[1024];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf)
        return ah_error_set(err, AH_ERR_USAGE, "%s: path too long (at most %zu bytes)", path, sizeof buf - 1);
    for (char *p = buf + 1;; p++) {
        const bool end = *p == 0;
        if (*p != '/' && !end) continue;
        *p = 0;
        if (mkdir(buf, 0755) != 0 && errno != EEXIST)
            return ah_error_set(err, AH_ERR_IO, "%s: cannot create the directory: %s", buf, strerror(errno));
        if (end) return AH_OK;
        *p = '/';
    }
}

ah_status_t ah_rm_tree(const char *path, ah_error_t *err) {
    struct stat st;
    if (lstat(path, &st) != 0)
        return errno == ENOENT ? AH_OK : ah_error_set(err, AH_ERR_IO, "%s: %s", path, strerror(errno));
    if (S_ISDIR(st.st_mode)) {
        DIR *d = opendir(path);
        if (!d) return ah_error_set(err, AH_ERR_IO, "%s: cannot open the directory: %s", path, strerror(errno));
        struct dirent *e;
        ah_status_t s = AH_OK;
        while (s == AH_OK && (e = readdir(d))) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
            char child[1024];
            if (snprintf(child, sizeof child, "%s/%s", path, e->d_name) >= (int)sizeof child)
                s = ah_error_set(err, AH_ERR_IO, "%s/%s: path too long", path, e->d_name);
            else
                s = ah_rm_tree(child, err);
        }
        closedir(d);
        if (s != AH_OK) return s;
        if (rmdir(path) != 0 && errno != ENOENT)
            return ah_error_set(err, AH_ERR_IO, "%s: cannot remove: %s", path, strerror(errno));
        return AH_OK;
    }
    if (unlink(path) != 0 && errno != ENOENT)
        return ah_error_set(err, AH_ERR_IO, "%s: cannot remove: %s", path, strerror(errno));
    return AH_OK;
}
