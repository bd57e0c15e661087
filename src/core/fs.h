/* Directories: create a path with its parents, remove a tree, ask whether a path is one.
 *
 * Paths are at most AH_FS_PATH_MAX - 1 bytes; a longer one is refused (AH_ERR_IO), never cut.
 * Errors name the path that failed and the system's reason (strerror). */
#ifndef AH_CORE_FS_H
#define AH_CORE_FS_H

#include <stdbool.h>

#include "core/status.h"

#define AH_FS_PATH_MAX 4096 /* as AH_CKPT_PATH_MAX: checkpoint paths are built that long */

/* mkdir -p with mode 0755: creates path and each missing parent. An existing directory is fine;
 * a component that exists but is not a directory is an error (AH_ERR_IO). */
ah_status_t ah_fs_mkdirs(const char *path, ah_error_t *err);

/* rm -r: removes path, a file or a directory with everything under it (symbolic links are removed,
 * not followed). A path that does not exist is fine. Stops at the first entry it cannot remove. */
ah_status_t ah_fs_rm_tree(const char *path, ah_error_t *err);

/* Whether path is a directory (following symbolic links); false when it is not there. */
bool ah_fs_is_dir(const char *path);

#endif
