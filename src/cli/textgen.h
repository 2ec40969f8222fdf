/* Text generation shared by `dsv4 generate -p` and `dsv4 chat`: the
 * tokenizer and sampling options, stop conditions, and the loop that samples
 * tokens and prints their text as it is produced. */
#ifndef DSV4_CLI_TEXTGEN_H
#define DSV4_CLI_TEXTGEN_H
#include <signal.h>
#include <stdio.h>

#include "dsv4.h"
#include "engine/spec.h"
#include "text/generate.h"
#include "text/sampling.h"
#include "text/tokenizer.h"

/* Long options both commands accept (codes from TG_OPT_BASE on); put
 * TEXTGEN_LONG_OPTIONS inside a struct option table and pass unknown codes
 * to textgen_option(). */
enum {
    TG_OPT_BASE = 1000,
    TG_TEMP = TG_OPT_BASE, TG_TOPK, TG_TOPP, TG_MINP, TG_REP, TG_PRES, TG_FREQ, TG_SEED,
    TG_STOP, TG_STOP_ID, TG_IGNORE_EOS, TG_LOGPROBS, TG_TOKENIZER, TG_THREADS, TG_DEVICE, TG_CACHE,
    TG_SPEC,
};
#define TEXTGEN_LONG_OPTIONS                                                                      \
    {"temperature", required_argument, 0, TG_TEMP}, {"top-k", required_argument, 0, TG_TOPK},     \
    {"top-p", required_argument, 0, TG_TOPP}, {"min-p", required_argument, 0, TG_MINP},           \
    {"repetition-penalty", required_argument, 0, TG_REP},                                         \
    {"presence-penalty", required_argument, 0, TG_PRES},                                          \
    {"frequency-penalty", required_argument, 0, TG_FREQ}, {"seed", required_argument, 0, TG_SEED}, \
    {"stop", required_argument, 0, TG_STOP}, {"stop-id", required_argument, 0, TG_STOP_ID},       \
    {"ignore-eos", no_argument, 0, TG_IGNORE_EOS}, {"logprobs", required_argument, 0, TG_LOGPROBS}, \
    {"tokenizer", required_argument, 0, TG_TOKENIZER}, {"threads", required_argument, 0, TG_THREADS}, \
    {"device", required_argument, 0, TG_DEVICE}, {"cache", required_argument, 0, TG_CACHE},        \
    {"spec", required_argument, 0, TG_SPEC}

/* What the shared options set. */
typedef struct {
    sampling_params sp;
    int seed_given;
    const char **stops; /* --stop, as given */
    int n_stops;
    int *stop_ids;      /* --stop-id */
    int n_stop_ids;
    int ignore_eos;
    int logprobs;       /* top-N per token as JSON lines on stderr; 0 = off */
    const char *tokenizer;
    int threads;
    const char *device;
    const char *cache;  /* --cache exact|official|auto */
    int spec_k;         /* --spec mtp[:K] / dspark[:K]: drafts per step (CLI_SPEC_BLOCK: the block's); 0 = off */
    int spec_dspark;    /* 1: --spec dspark */
} textgen_args;

void textgen_args_init(textgen_args *a);
void textgen_args_free(textgen_args *a);
/* Handles option code c (with optarg). Returns 1 if it was one of ours, 0
 * if not, -1 after printing a usage error for a bad value. */
int textgen_option(const char *cmd, textgen_args *a, int c, const char *optarg);
/* The usage lines of the shared options. */
void textgen_usage(FILE *f);

/* A loaded model with its tokenizer and everything the loop needs. */
typedef struct {
    const char *cmd;
    dsv4_model *model;
    tok_t *tok;
    int vocab;
    int max_pos;        /* config max_position_embeddings */
    int bos_id;         /* -1: none */
    int32_t *stop_ids;  /* EOS ids (unless --ignore-eos), --stop-id and --stop special tokens */
    int n_stop_ids;
    const char **stops; /* the --stop strings matched on text */
    int n_stops;
    int32_t *masked;    /* ids the tokenizer cannot decode: never sampled */
    int n_masked;
    int logprobs;
    sampling_params sp;
} textgen;

/* Loads the tokenizer (--tokenizer, else DIR/tokenizer.json) and reads the
 * model's config (context length, BOS/EOS) without loading the weights, and
 * checks the stop options. Prints a one-line error and returns non-zero on
 * failure. The weights come with textgen_load_model(). */
int textgen_open(textgen *g, const char *cmd, const char *dir, const textgen_args *a);
int textgen_load_model(textgen *g, const char *dir, const textgen_args *a);
void textgen_close(textgen *g);

/* The most bytes of text the context can hold (bounds text inputs). */
size_t textgen_max_text(const textgen *g);

/* Encodes UTF-8 text (special tokens written in it are recognized); prints
 * the error (invalid UTF-8 names the byte offset). */
int textgen_encode(const textgen *g, const char *text, size_t len, int32_t **ids, size_t *n);

typedef struct {
    int32_t *ids;   /* sampled tokens in order (stop token excluded) */
    int n_ids;
    int n_fed;      /* how many of ids the session has consumed */
    char *text;     /* the output text (cut before a stop string) */
    size_t len;
    gen_end end;    /* why it ended */
    int out_failed; /* writing to `out` failed: the run stopped there (main() reports lost output) */
} textgen_result;

/* Samples from `logits` (the row after the last token the session holds),
 * feeds each token back and writes its text to `out` (may be NULL) as soon
 * as it is complete: never half a UTF-8 character, and never the start of
 * what may become a stop string. At most max_tokens tokens; stops early on a
 * stop token, a stop string, a full context or *cancel (checked between
 * tokens; may be NULL). The last sampled token is not fed to the session
 * (nothing needs its logits). Returns 0, or prints the error and returns
 * non-zero (r then holds what was produced before it). logits is scratch. */
int textgen_run(const textgen *g, dsv4_session *s, sampler *smp, float *logits, int max_tokens,
                FILE *out, volatile sig_atomic_t *cancel, textgen_result *r);
/* The same with speculative decoding: l was fed the prompt (spec_feed, its
 * mask and stop ids set by textgen_spec_lane) and holds the first token;
 * each step's tokens go through the same stop checks. Greedy output is the
 * same as textgen_run's; sampled output has the same distribution. */
int textgen_run_spec(const textgen *g, spec_lane *l, int max_tokens, FILE *out, volatile sig_atomic_t *cancel,
                     textgen_result *r);
/* A spec lane on s with --spec's drafter and k (CLI_SPEC_BLOCK: the DSpark
 * block's), the sampler, and g's mask and stop ids; the drafter named must
 * be the checkpoint's. */
int textgen_spec_lane(const textgen *g, spec_lane *l, dsv4_session *s, int dspark, int k, sampler *smp);
void textgen_result_free(textgen_result *r);

#endif
