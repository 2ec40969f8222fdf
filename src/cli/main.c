/* dsv4 command-line entry: dispatches to the subcommands. */
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"

static const struct {
    const char *name;
    int (*fn)(int, char **);
    const char *help;
} k_cmds[] = {
    {"generate", cmd_generate, "generate text (-p) or greedy token ids (--tokens)"},
    {"chat", cmd_chat, "interactive multi-turn chat"},
    {"score", cmd_score, "write the logits of every input position"},
    {"info", cmd_info, "print model facts and session memory per token"},
    {"bench", cmd_bench, "decode/prefill speed against the bandwidth limit"},
    {"serve", cmd_serve, "OpenAI- and Anthropic-compatible HTTP server"},
    {"tokenize", cmd_tokenize, "text to token ids"},
    {"detokenize", cmd_detokenize, "token ids to text"},
};

static void usage(FILE *f)
{
    fprintf(f, "usage: dsv4 COMMAND [options]   (dsv4 COMMAND --help for details)\n\ncommands:\n");
    for (size_t i = 0; i < sizeof k_cmds / sizeof k_cmds[0]; i++)
        fprintf(f, "  %-11s %s\n", k_cmds[i].name, k_cmds[i].help);
}

int main(int argc, char **argv)
{
    if (argc < 2) { usage(stderr); return 2; }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    for (size_t i = 0; i < sizeof k_cmds / sizeof k_cmds[0]; i++)
        if (!strcmp(argv[1], k_cmds[i].name)) return k_cmds[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "dsv4: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
