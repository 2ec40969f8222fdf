/* A generation request as a state machine, shared by the CLI (`generate -p`,
 * `chat`) and the server: the caller owns the model and the session and
 * hands each row of logits to gen_step(); the request samples the next
 * token, decodes it, checks the stop conditions and keeps the text it may
 * show so far (gen_take: the same for tokens a speculative decoder chose). It never touches the model, so a scheduler can advance many
 * requests from one batched step.
 *
 * Visible text (text[0..visible)) never ends in half a UTF-8 character nor
 * in bytes that may still become a stop string; once the request is done,
 * all of text is visible. The last sampled token is never fed back (nothing
 * needs its logits), so a finished request's session holds the prompt and
 * ids[0..n_fed). */
#ifndef DSV4_TEXT_GENERATE_H
#define DSV4_TEXT_GENERATE_H
#include <stddef.h>
#include <stdint.h>

#include "dsv4.h"
#include "text/sampling.h"
#include "text/tokenizer.h"

#define GEN_MAX_TOP 20

/* What stays the same across requests on one model and tokenizer. */
typedef struct {
    const tok_t *tok;
    int vocab;
    const int32_t *masked; /* ids the tokenizer cannot decode: never sampled */
    int n_masked;
} gen_model;

/* The ids of the vocabulary that the tokenizer cannot decode (unassigned,
 * or beyond the tokenizer's ids): a model must never sample them. *ids is
 * malloc'd (free()). */
dsv4_status gen_masked_ids(const tok_t *tok, int vocab, int32_t **ids, int *n);

/* Per-request limits and stops (the arrays are copied by gen_init). */
typedef struct {
    sampling_params sp;
    int max_tokens;
    const int32_t *stop_ids; /* e.g. EOS; the stop token is not part of the output */
    int n_stop_ids;
    const char *const *stops; /* stop strings matched on the text */
    int n_stops;
    int top_logprobs;        /* 0..GEN_MAX_TOP alternatives reported per token */
    sampler *smp;            /* NULL: a new one from sp; else borrowed (its random
                                sequence continues, as in a chat's later turns) */
} gen_params;

typedef enum {
    GEN_END_NONE = 0,
    GEN_END_LENGTH,  /* max_tokens produced */
    GEN_END_EOS,     /* a stop token */
    GEN_END_STOP,    /* a stop string (the text ends before it) */
    GEN_END_CONTEXT, /* the session is full */
    GEN_END_CANCEL,  /* the caller ended it */
    GEN_END_ERROR,   /* sampling or decoding failed (dsv4_last_error) */
} gen_end;

/* The token one gen_step drew, for logprob reporting. */
typedef struct {
    int32_t id;
    float logprob;
    sampling_logprob top[GEN_MAX_TOP];
    int n_top;
} gen_token;

typedef struct {
    const gen_model *gm;
    int max_tokens, top_logprobs;
    int32_t *stop_ids;
    int n_stop_ids;
    char **stops;
    int n_stops;
    sampler *smp;
    int own_smp;
    tok_stream ts;
    int32_t *ids;   /* sampled tokens (stop token excluded) */
    int n_ids;
    int n_fed;      /* ids the caller has fed to the session */
    char *text;     /* decoded output, NUL-terminated */
    size_t len, cap, visible, checked, hold;
    gen_end end;    /* GEN_END_NONE while running */
    int stop_index; /* GEN_END_STOP: which stop string matched */
} gen_req;

/* Copies the parameters and makes the sampler (DSV4_ERR_ARG for bad
 * sampling parameters). A request with max_tokens 0 is done at once. */
dsv4_status gen_init(gen_req *g, const gen_model *gm, const gen_params *p);
void gen_free(gen_req *g);

/* Samples from logits[vocab] (the row after everything the session holds;
 * scratch: masked ids are overwritten). Returns 1 when the request goes on:
 * the caller feeds ids[n_ids - 1], counts it in n_fed and calls again with
 * the next row; 0 when it is done (g->end says why). tok (may be NULL)
 * receives the drawn token, including a stop token. */
int gen_step(gen_req *g, float *logits, gen_token *tok);
/* The part of gen_step after sampling, for a token chosen elsewhere (e.g.
 * by speculative decoding): a stop token ends the request; else id joins
 * ids, its text is decoded and checked against the stop strings and the
 * length limit. Returns 1 when the request goes on, 0 when it is done. */
int gen_take(gen_req *g, int32_t id);
/* The logprob entry gen_step would report had it drawn id from logits
 * (scratch: masked ids are overwritten), for a token chosen elsewhere. */
void gen_score(gen_req *g, float *logits, int32_t id, gen_token *tok);
/* Ends a running request from outside (GEN_END_CONTEXT, GEN_END_CANCEL):
 * the held-back text becomes visible unless it completes a stop string. */
void gen_finish(gen_req *g, gen_end why);

#endif
