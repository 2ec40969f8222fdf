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
/* The one parser of numeric option values: the whole of `s` must be a
 * decimal integer (cli_int) or a finite number (cli_real) in lo..hi. On
 * failure prints "dsv4 CMD: OPT: 'S' is not an integer in LO..HI" (or "a
 * number") and returns -1; 0 on success. `opt` is the option as the user
 * spells it ("-n", "--chunk"). */
int cli_int(const char *cmd, const char *opt, const char *s, long long lo, long long hi, long long *out);
int cli_real(const char *cmd, const char *opt, const char *s, double lo, double hi, double *out);
/* --threads N: 0 = every core. */
#define CLI_MAX_THREADS 4096
/* cli_int into an int (lo..hi must lie within int). */
int cli_int32(const char *cmd, const char *opt, const char *s, int lo, int hi, int *out);
/* Parse "1,2 3\n4" (commas and/or whitespace) into a malloc'd array. Returns 0
 * on success, -1 with a message on stderr. */
int cli_parse_ids(const char *text, int **ids, int *n, const char *what);
/* Read a whole file (pipes and devices too) into a NUL-terminated malloc'd
 * buffer; more than max bytes is refused: every input is bounded by what
 * its use can take. NULL on failure (message printed). */
char *cli_read_file(const char *cmd, const char *path, size_t max, size_t *len);
/* No input file is read beyond this, whatever a config allows. */
#define CLI_INPUT_MAX ((size_t)1 << 30)
/* 0 if buf[0..len) has no NUL byte, else -1 after "dsv4 CMD: WHAT: NUL byte
 * at offset K" (text that C strings would cut short). */
int cli_no_nul(const char *cmd, const char *what, const char *buf, size_t len);
/* One line of f without its newline (nor a final \r), malloc'd in *line;
 * more than max bytes is refused. 1: a line, 0: end of input, -1: too long
 * (the rest is not read) or a read error. */
int cli_read_line(FILE *f, size_t max, char **line, size_t *len);
/* The context bound of every path: a prompt of n tokens must fit in
 * max_pos (else the message, -1); generation that reaches it stops and
 * says so with cli_context_full. */
int cli_prompt_fits(const char *cmd, const char *what, size_t n, int max_pos);
void cli_context_full(const char *cmd, int max_pos);
/* Bytes of token-id text that one id can take ("128000, "). */
#define CLI_ID_BYTES 16
/* 1 if standard output took everything written to it; else 0 after the
 * message (a full disk, a closed pipe: lost output is a failure). */
int cli_output_ok(const char *cmd);
/* A checkpoint changed under its mapping (SIGBUS): one line naming the
 * file and status 1 instead of a bus error (sigbus.c). */
void cli_catch_sigbus(void);
/* Print "dsv4 CMD: msg" for the library's last error. */
void cli_report(const char *cmd, const char *what);
/* Load a checkpoint (progress bar on a terminal, warnings for unknown
 * tensors); NULL after printing the error. cache: --cache exact|official|auto
 * (NULL: auto). */
dsv4_model *cli_load_model(const char *cmd, const char *dir, int threads, const char *device, const char *cache);
/* --cache NAME -> mode; -1 after printing the error. */
int cli_cache_arg(const char *cmd, const char *name, dsv4_cache_mode *out);
/* The usage line every model-running command shares. */
#define CLI_CACHE_USAGE "       [--cache exact|official|auto]  numerics: exact fp32 as transformers, or DeepSeek's official\n" \
                        "                                      FP8/FP4 roundings of the KV, the indexer and the FP8 matmul\n" \
                        "                                      inputs (default auto: official for FP8/FP4 checkpoints)\n"
/* max_position_embeddings from DIR/config.json (before loading the
 * weights, to bound the inputs); -1 after the message. */
int cli_model_context(const char *cmd, const char *dir);
/* Token ids from --tokens TEXT or --tokens-file PATH (exactly one), at most
 * max_pos of them. */
int cli_token_arg(const char *cmd, const char *tokens, const char *file, int max_pos, int **ids, int *n);
/* --spec mtp[:K]: speculative decoding with K drafts per step (default 1,
 * the MTP head's trained depth); dspark[:K] (dspark non-NULL: the command
 * takes it) with the DSpark drafter, K default CLI_SPEC_BLOCK (as many as
 * its block drafts). 0, or -1 with a message. */
#define CLI_SPEC_BLOCK (-1)
int cli_parse_spec(const char *cmd, const char *arg, int *k, int *dspark);
/* The drafts per step --spec asks of model m: k, or the DSpark block's for
 * CLI_SPEC_BLOCK; -1 with a message when the drafter named is not the
 * checkpoint's (a checkpoint without any is left to spec_lane_init). */
int cli_spec_k(const char *cmd, const dsv4_model *m, int dspark, int k);
/* The --spec statistics line on stderr (verify steps, drafts kept). */
void cli_spec_stats(int dspark, int k, long long steps, long long kept, long long drafted);

#endif
