/* The file-system helpers of src/elastic/ (the agent's work directory, the local launcher's run
 * directories and host disks). Generic versions are coming to core/; these then go. */
#ifndef AH_ELASTIC_JOB_H
#define AH_ELASTIC_JOB_H

#include "core/status.h"

/* mkdir -p. */
ah_status_t ah_mkdirs(const char *path, ah_error_t *err);
/* rm -r (no error when absent). */
ah_status_t ah_rm_tree(const char *path, ah_error_t *err);

#endif
