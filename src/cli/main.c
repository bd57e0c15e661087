/* autohet: one program, one verb per job. Each verb lives in its own file (cli_<verb>.c).
 * `autohet --version` prints "autohet VERSION" (CMakeLists.txt's project version). */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

static const ah_cli_verb_t VERBS[] = {
    {"model", "per-layer parameters, FLOPs and activation bytes of a model", ah_cli_model},
    {"plan", "find the fastest (or cheapest) parallel plan for a model on a mixed cluster", ah_cli_plan},
    {"evaluate", "score a plan: time, memory, breakdown, bottleneck", ah_cli_evaluate},
    {"profile", "measure per-layer time and memory of the CPU runtime, for the planner", ah_cli_profile},
    {"train", "train a plan's model, one MPI rank per device (under mpirun)", ah_cli_train},
    {"run", "the elastic agent: plan, launch, survive preemptions, re-plan, recover", ah_cli_run},
    {"tokenize", "turn a text file into an llm.c token file (byte-level)", ah_cli_tokenize},
    {"ckpt", "list checkpoint steps by tier, verify checksums, export to Hugging Face (GPT-2 or LLaMA)", ah_cli_ckpt},
    {"report", "summarise a metrics JSONL and draw loss, validation loss, throughput and preemptions (--svg)",
     ah_cli_report},
    {"simulate", "replay spot traces at cluster scale and compare policies in tokens, hours, $", ah_cli_simulate},
};

static void usage(FILE *f) {
    fprintf(f, "usage: autohet VERB [flags]   (autohet VERB --help or autohet help VERB: a verb's flags)\n"
               "       autohet --version\n\nverbs:\n");
    for (size_t i = 0; i < sizeof VERBS / sizeof VERBS[0]; i++)
        fprintf(f, "  %-10s %s\n", VERBS[i].name, VERBS[i].summary);
}

int main(int argc, char **argv) {
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
        (strcmp(argv[1], "help") == 0 && argc == 2)) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (strcmp(argv[1], "help") == 0) { /* autohet help VERB [SUB]: `autohet VERB [SUB] --help` */
        char *help_argv[] = {argv[2], argc > 3 ? argv[3] : "--help", "--help", NULL};
        for (size_t i = 0; i < sizeof VERBS / sizeof VERBS[0]; i++)
            if (strcmp(argv[2], VERBS[i].name) == 0) return VERBS[i].run(argc > 3 ? 3 : 2, help_argv);
        fprintf(stderr, "autohet help: unknown verb \"%s\"\n", argv[2]);
        usage(stderr);
        return 2;
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("autohet %s\n", AH_VERSION);
        return 0;
    }
    for (size_t i = 0; i < sizeof VERBS / sizeof VERBS[0]; i++)
        if (strcmp(argv[1], VERBS[i].name) == 0) return VERBS[i].run(argc - 1, argv + 1);
    fprintf(stderr, "autohet: unknown verb \"%s\"\n", argv[1]);
    usage(stderr);
    return 2;
}
