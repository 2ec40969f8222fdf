/* CLI subcommands: each lives in its own cmd_*.c and returns the process
 * exit status (0 ok, 1 runtime error, 2 usage error). */
#ifndef DSV4_CLI_COMMANDS_H
#define DSV4_CLI_COMMANDS_H
#include <stddef.h>
#include <stdio.h>

#include "dsv4.h"

int cmd_generate(int argc, char **argv);
int cmd_generate_text(int argc, char **argv); /* generate -p: cmd_generate_text.c */
void generate_text_usage(FILE *f);
int cmd_chat(int argc, char **argv);
int cmd_score(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_detokenize(int argc, char **argv);
int cmd_serve(int argc, char **argv);

/* Shared helpers (cli_util.c). */
/* Parse "1,2 3\n4" (commas and/or whitespace) into a malloc'd array. Returns 0
 * on success, -1 with a message on stderr. */
int cli_parse_ids(const char *text, int **ids, int *n, const char *what);
/* Read a whole file into a NUL-terminated malloc'd buffer; NULL on failure
 * (message printed). */
char *cli_read_file(const char *path, size_t *len);
/* Print "dsv4 CMD: msg" for the library's last error. */
void cli_report(const char *cmd, const char *what);
/* Load a checkpoint (progress bar on a terminal, warnings for unknown
 * tensors); NULL after printing the error. cache: --cache exact|official|auto
 * (NULL: auto). */
dsv4_model *cli_load_model(const char *cmd, const char *dir, int threads, const char *device, const char *cache);
/* --cache NAME -> mode; -1 after printing the error. */
int cli_cache_arg(const char *cmd, const char *name, dsv4_cache_mode *out);
/* The usage line every model-running command shares. */
#define CLI_CACHE_USAGE "       [--cache exact|official|auto]  session-state numerics (default auto: official for FP8/FP4\n" \
                        "                                      checkpoints, else exact fp32 as transformers)\n"
/* Token ids from --tokens TEXT or --tokens-file PATH (exactly one). */
int cli_token_arg(const char *cmd, const char *tokens, const char *file, int **ids, int *n);
/* --spec mtp[:K]: speculative decoding with K drafts per step (default 1,
 * the MTP head's trained depth). 0, or -1 with a message. */
int cli_parse_spec(const char *cmd, const char *arg, int *k);

#endif
