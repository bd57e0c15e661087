/* autohet tokenize: a text file to an llm.c token file, one token per byte (vocabulary 256, the
 * tiny-gpt2 and demo-gpt2 presets' size). Demo text: /usr/share/common-licenses/GPL-3. */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "runtime/data.h"

int ah_cli_tokenize(int argc, char **argv) {
    const char *out = NULL;
    ah_flag_t flags[] = {
        {"-o", AH_FLAG_STR, &out, "FILE", "token file to write (required)", false},
        {"--output", AH_FLAG_STR, &out, "FILE", "same as -o", false},
    };
    /* The text is the one positional argument; take it out before the flag parser sees it. */
    const char *text = NULL;
    char *rest[8];
    int n = 0;
    for (int i = 0; i < argc; i++) {
        const bool positional = i > 0 && argv[i][0] != '-' && strcmp(argv[i - 1], "-o") != 0 &&
                                strcmp(argv[i - 1], "--output") != 0;
        if (positional && text) {
            fprintf(stderr, "autohet tokenize: one TEXT file expected, got \"%s\" and \"%s\" (tokenize "
                    "each into its own -o FILE)\n", text, argv[i]);
            return 2;
        }
        if (positional) {
            text = argv[i];
        } else if (n == (int)(sizeof rest / sizeof rest[0])) {
            fprintf(stderr, "autohet tokenize: too many arguments (usage: autohet tokenize TEXT -o FILE)\n");
            return 2;
        } else {
            rest[n++] = argv[i];
        }
    }
    int rc = 0;
    if (!ah_cli_parse("tokenize", "TEXT -o FILE",
                      "Writes TEXT as an llm.c token file (magic 20240520, uint16 tokens), one "
                      "token per byte. A text that ships with Debian: /usr/share/common-licenses/GPL-3.",
                      flags, 2, n, rest, &rc))
        return rc;
    ah_error_t err;
    if (!text || !out) {
        ah_error_set(&err, AH_ERR_USAGE, "usage: autohet tokenize TEXT -o FILE");
        return ah_cli_fail("tokenize", &err);
    }
    int64_t count = 0;
    if (ah_tokenize_bytes(text, out, &count, &err) != AH_OK) return ah_cli_fail("tokenize", &err);
    printf("%s: %lld tokens (bytes) -> %s\n", text, (long long)count, out);
    return 0;
}
