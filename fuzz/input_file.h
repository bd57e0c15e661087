/* For harnesses whose parser takes a path and has no buffer API: the input's bytes written to
 * NAME in a directory private to the process, made on first use under /dev/shm (memory), else
 * $TMPDIR or /tmp, and removed at a normal exit (an abort leaves it, holding the input that
 * failed). Returns the file's path, valid until the next call; aborts when the file cannot be
 * written (a harness that cannot feed its parser must not pass). */
#ifndef AH_FUZZ_INPUT_FILE_H
#define AH_FUZZ_INPUT_FILE_H

#include <stddef.h>
#include <stdint.h>

const char *ah_fuzz_input_file(const char *name, const uint8_t *data, size_t size);
/* The private directory itself (made on first use), for harnesses that need a few fixed files
 * beside the input. */
const char *ah_fuzz_input_dir(void);

#endif
