/* Next-token sampling over one row of logits, plus stop-string matching.
 *
 * Order of operations (the usual one of vLLM / Hugging Face):
 *   1. penalties over the `prev` tokens the caller passes:
 *        repetition (CTRL): l = l > 0 ? l / r : l * r, once per distinct token;
 *        then frequency and presence (OpenAI): l -= count * f + (count > 0) * p;
 *   2. temperature: l / T; T == 0 means greedy: the highest penalized logit,
 *      the lowest token id on ties, and steps 3-5 are skipped;
 *   3. top-k: keep the k most likely (ties broken by lower id);
 *   4. top-p: of those, keep the shortest most-likely-first prefix whose
 *      probability (renormalized over the top-k) reaches p;
 *   5. min-p: drop tokens whose probability is below min_p times the top one;
 *   6. draw from what is left, renormalized, with the sampler's own RNG
 *      (xoshiro256** seeded through splitmix64; no global state).
 *
 * Log-probabilities are those of the raw logits (log-softmax before
 * penalties, temperature and truncation): what OpenAI's API and vLLM report
 * by default, so they do not change with the sampling settings.
 *
 * Stop tokens, stop strings (below) and a token budget are the generation
 * loop's to check after each draw.
 *
 * Cost: a few passes over the vocabulary (checks, penalties, max; the
 * normalizer only where top-p without top-k needs it). Truncation first
 * keeps the tokens above a probability threshold, lowered until it provably
 * holds the kept set, so exp() and selection run on few tokens for peaked
 * distributions; then top-k is a size-k heap (O(n log k)) and top-p a
 * weighted quickselect (expected O(n)): nothing is fully sorted. About
 * 1 ms per token at vocabulary 129280 on this 2-core machine. */
#ifndef DSV4_TEXT_SAMPLING_H
#define DSV4_TEXT_SAMPLING_H
#include <stddef.h>
#include <stdint.h>

#include "dsv4.h"

typedef struct {
    float temperature;        /* 0 = greedy; default 1 */
    int top_k;                /* 0 = off */
    float top_p;              /* 1 = off; in (0, 1] */
    float min_p;              /* 0 = off; in [0, 1] */
    float repetition_penalty; /* 1 = off; > 0 */
    float presence_penalty;   /* 0 = off */
    float frequency_penalty;  /* 0 = off */
    uint64_t seed;
} sampling_params;

/* temperature 1, everything else off, seed 0. */
sampling_params sampling_default_params(void);

typedef struct sampler sampler;

/* Checks the parameters (DSV4_ERR_ARG naming the bad one) and seeds. */
dsv4_status sampler_new(const sampling_params *p, int n_vocab, sampler **out);
void sampler_free(sampler *s);
/* Restarts the random sequence as sampler_new with this seed would. */
void sampler_reseed(sampler *s, uint64_t seed);
/* The random sequence's state, to take draws back (a speculative step that
 * did not commit). */
typedef struct {
    uint64_t s[4];
} sampler_rng;
sampler_rng sampler_rng_state(const sampler *s);
void sampler_rng_restore(sampler *s, sampler_rng st);

typedef struct {
    int32_t token;
    float logprob;
} sampling_logprob;

/* Picks the next token from logits[n_vocab]. prev[0..n_prev) are the tokens
 * the penalties count (the caller decides: generated only, or with the
 * prompt). Optional outputs: *logprob of the chosen token, and the n_top
 * most likely tokens (by raw logit, ties by lower id, best first) in
 * top[0..n_top). Fails with DSV4_ERR_ARG on NaN or +inf logits, all-(-inf)
 * logits, or a prev token outside the vocabulary. */
dsv4_status sampler_sample(sampler *s, const float *logits, const int32_t *prev, int n_prev,
                           int32_t *token, float *logprob, sampling_logprob *top, int n_top);

/* The log-probabilities sampler_sample reports, for a token chosen
 * elsewhere (e.g. by speculative decoding) from the same logits. */
void sampler_logprobs(sampler *s, const float *logits, int32_t token, float *logprob, sampling_logprob *top,
                      int n_top);

/* The distribution sampler_sample draws from (steps 1-5), as probabilities
 * over the whole vocabulary in probs[n_vocab] (zero outside the kept set;
 * greedy: 1 on the chosen token). What speculative rejection sampling
 * compares. Same failures as sampler_sample. */
dsv4_status sampler_distribution(sampler *s, const float *logits, const int32_t *prev, int n_prev, float *probs);
/* From the sampler's random sequence: a uniform in [0, 1), and a draw of an
 * index of probs[0..n) with probability probs[i] / sum (the weights need not
 * be normalized; at least one must be > 0). */
double sampler_uniform(sampler *s);
int32_t sampler_draw(sampler *s, const float *probs, int n);
/* The sampler's parameters. */
const sampling_params *sampler_params(const sampler *s);

/* Step 1 alone, in place. counts is scratch of n_vocab zeros, left zeroed. */
void sampling_apply_penalties(const sampling_params *p, float *logits, const int32_t *prev,
                              int n_prev, int32_t *counts);

/* Stop strings. text[0..len) is everything generated so far; checked_len is
 * the length at the previous call (0 the first time), so only matches that
 * end in the new bytes are looked for, and a stop string split across
 * tokens is still found. Returns the index of the stop string that starts
 * first (the first listed on a tie) and sets *cut to where the output ends
 * (the match's start), or returns -1 and sets *hold to how many trailing
 * bytes could still become a stop string and must not be shown yet. Empty
 * stop strings are ignored. */
int sampling_stop_check(const char *text, size_t len, size_t checked_len,
                        const char *const *stops, int n_stops, size_t *cut, size_t *hold);

/* Whether tok is one of stop_ids[0..n). */
int sampling_is_stop_token(const int32_t *stop_ids, int n, int32_t tok);

#endif
