/* dsv4 — DeepSeek-V4 inference engine: public C API.
 *
 * Every function returns a dsv4_status (or a handle that is NULL on failure);
 * dsv4_last_error() then holds a one-line, thread-local message naming what
 * went wrong. The library never prints and never exits. */
#ifndef DSV4_H
#define DSV4_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    DSV4_OK = 0,
    DSV4_ERR_IO,          /* file missing, unreadable, short read */
    DSV4_ERR_FORMAT,      /* corrupt or malformed file contents */
    DSV4_ERR_CONFIG,      /* config.json missing/contradictory/out of range */
    DSV4_ERR_UNSUPPORTED, /* valid input this build cannot handle (e.g. FP8 now) */
    DSV4_ERR_ARG,         /* bad argument from the caller (token id, shape) */
    DSV4_ERR_NOMEM,       /* allocation failed */
    DSV4_ERR_DEVICE,      /* backend/device failure */
    DSV4_ERR_POISONED,    /* session state is unreliable until reset/restore */
    DSV4_ERR_VETO,        /* a commit gate refused the step */
} dsv4_status;

/* Thread-local description of the last failure in this thread. */
const char *dsv4_last_error(void);
const char *dsv4_status_name(dsv4_status s);

typedef struct dsv4_model dsv4_model;
typedef struct dsv4_session dsv4_session;

/* Progress callback for loading: done/total bytes. May be NULL. */
typedef void (*dsv4_progress_fn)(void *user, uint64_t done, uint64_t total);

/* Numerics of the session state (spec §8.3). EXACT: fp32 as transformers
 * computes it. OFFICIAL: as DeepSeek's reference (and training) does it:
 * window KV and main-compressor entries through FP8 e4m3 (rope dims bf16),
 * indexer queries and keys Hadamard-rotated through FP4. AUTO: OFFICIAL for
 * FP8/FP4 checkpoints, EXACT otherwise. */
typedef enum { DSV4_CACHE_AUTO = 0, DSV4_CACHE_EXACT, DSV4_CACHE_OFFICIAL } dsv4_cache_mode;

typedef struct {
    int n_threads;               /* CPU worker threads; 0 = number of cores */
    const char *device;          /* "cpu", "cuda", or NULL = cuda if usable, else cpu */
    dsv4_progress_fn progress;   /* optional */
    void *progress_user;
    dsv4_cache_mode cache;       /* default AUTO */
    int step_rows;               /* most token rows of one forward pass, 0 = 1024: a longer step
                                  * runs as several in order, with the same results (bounds the
                                  * activation memory, about 0.5 MB a row at Flash's sizes; the
                                  * device plan keeps 2 GiB free for 1024) */
} dsv4_load_options;

/* Load a Hugging Face checkpoint directory (config.json + safetensors). */
dsv4_status dsv4_model_load(const char *dir, const dsv4_load_options *opt,
                            dsv4_model **out);
/* A model with the real dimensions of "flash" or "pro", random weights
 * built in memory, `layers` layers and `experts` routed experts (<= 0: the
 * real counts). weights: "fp8-fp4" (NULL: the same), the released
 * checkpoints' formats (FP8 dense, MXFP4 routed experts), "bf16", or
 * "gguf-iq3_xxs" (a GGUF image). drafter: "mtp" (NULL: the same), the MTP
 * head of V4-Flash/Pro, or "dspark", V4-Flash-0731's DSpark drafter
 * (docs/DSPARK.md; not with the GGUF weights). For benchmarks. */
dsv4_status dsv4_model_synthetic(const char *preset, int layers, int experts, const char *weights,
                                 const char *drafter, const dsv4_load_options *opt, dsv4_model **out);
void dsv4_model_free(dsv4_model *m);
/* The cache mode in force (EXACT or OFFICIAL, never AUTO). */
dsv4_cache_mode dsv4_model_cache_mode(const dsv4_model *m);

/* Model facts for callers (sizes of buffers they pass in). */
int dsv4_model_vocab(const dsv4_model *m);
int dsv4_model_n_layers(const dsv4_model *m);
/* max_position_embeddings: the most tokens a session can hold. Evaluating
 * past it fails with DSV4_ERR_ARG and changes nothing. */
int dsv4_model_max_positions(const dsv4_model *m);
/* Checkpoint tensors that were neither bound nor recognized (reported, not fatal). */
int dsv4_model_unknown_count(const dsv4_model *m);
const char *dsv4_model_unknown_name(const dsv4_model *m, int i);

typedef struct {
    uint64_t fixed_bytes;        /* window rings (the MTP head's too) + compressor buffers */
    double bytes_per_token;      /* growing part (compressed KV + indexer keys, fp32), averaged */
    uint64_t weight_bytes;       /* bytes of mapped weights */
    uint64_t device_weight_bytes; /* weight bytes resident in device memory (CUDA: checkpoint bytes and
                                     scale grids as stored, nothing dequantized; CPU: 0, it reads the map) */
} dsv4_memory_info;
void dsv4_model_memory(const dsv4_model *m, dsv4_memory_info *out);

/* A 64-bit fingerprint of what a session's state depends on: the config's
 * dimensions, the cache mode (its numerics and storage layout) and the
 * tensor table (names, dtypes, shapes and a sample of each tensor's bytes).
 * Two loads of one checkpoint in one cache mode agree; another checkpoint or
 * mode differs (up to hash collisions). For tagging stored state. */
uint64_t dsv4_model_identity(const dsv4_model *m);

dsv4_status dsv4_session_new(dsv4_model *m, dsv4_session **out);
void dsv4_session_free(dsv4_session *s);
/* Forget everything: back to position 0 (also clears poisoning). */
void dsv4_session_reset(dsv4_session *s);
/* Number of tokens the session has consumed. */
int64_t dsv4_session_pos(const dsv4_session *s);

/* Feed n tokens at the session's current position. If logits != NULL it
 * receives n rows of vocab floats (one per input position). On failure the
 * session is unchanged, or poisoned if state was already partly written.
 * Every logit written is checked: a NaN or infinity fails the call
 * (DSV4_ERR_DEVICE, naming lane, position and token; the session is
 * poisoned), here and in dsv4_decode_batch alike. */
dsv4_status dsv4_session_eval(dsv4_session *s, const int32_t *tokens, int n,
                              float *logits);
/* Same, but logits (if not NULL) receives only the row of the last token. */
dsv4_status dsv4_session_eval_last(dsv4_session *s, const int32_t *tokens, int n,
                                   float *logits);

/* ---- the general step: several sessions in one transaction (engine/step.c) ---- */

#define DSV4_MAX_LANES 64

/* Commit gate: called after a step ran and validated, before it is
 * published; return non-zero to veto (e.g. the request was cancelled). */
typedef int (*dsv4_gate_fn)(void *user, int n_lanes, double elapsed_ms);
typedef struct {
    dsv4_gate_fn fn;        /* may be NULL */
    void *user;
    double deadline_ms;     /* > 0: veto a step whose execution took longer */
} dsv4_gate;

/* Which logits rows a lane of a step returns. */
typedef enum {
    DSV4_LOGITS_NONE = 0,
    DSV4_LOGITS_LAST,     /* the row of the lane's last token */
    DSV4_LOGITS_ALL,      /* one row per token */
} dsv4_logits_mode;

typedef struct dsv4_lane dsv4_lane;
/* Partial acceptance: called once per lane that has it, after the step ran,
 * validated and passed the gate, with the lane's outputs filled in; returns
 * how many of its tokens to publish (0..n_tokens). The state is then exactly
 * the one that feeding only those tokens gives. Anything else is refused
 * (DSV4_ERR_ARG) and no lane advances. */
typedef int (*dsv4_accept_fn)(void *user, const dsv4_lane *lane);

struct dsv4_lane {
    dsv4_session *session;
    const int32_t *tokens;       /* n_tokens >= 1 ids fed at the session's position */
    int n_tokens;
    dsv4_logits_mode logits_mode;
    float *logits;               /* host: n_tokens (ALL) or 1 (LAST) rows of vocab floats */
    /* host, optional: every row's final residual streams before the hc head,
     * [n_tokens][hc_mult][dim] (dsv4_model_hidden_size floats a row): what
     * the MTP head reads */
    float *hidden;
    dsv4_accept_fn accept;       /* NULL: publish every token */
    void *accept_user;
    /* non-NULL: the lane runs the session's drafter instead of the model, at
     * its own position (dsv4_session_mtp_pos). MTP head (spec §5.2): row i
     * reads mtp_in[i], the model's final streams ([hc_mult][dim], as
     * `hidden` gives them) of the position the row stands for, and the
     * embedding of tokens[i], the token after that position; logits and
     * hidden are the MTP's (its hidden can be fed back to draft further).
     * DSpark drafter: row i is the context row of position mtp_pos + i,
     * mtp_in[i] its features (as `features` gives them; tokens are not
     * read); no logits, no hidden. */
    const float *mtp_in;
    /* host, optional, model lanes of a model with a DSpark drafter: every
     * row's target-layer features [n_tokens][dsv4_model_feature_size]: what
     * its context rows read */
    float *features;
    int n_published;             /* out: tokens (or drafter rows) the lane advanced by */
};

/* Advance n_lanes distinct sessions (1..DSV4_MAX_LANES; a session may appear
 * once as a model lane and once as an MTP lane) in one transaction:
 * each lane feeds its tokens at its own position (a prefill chunk, one decode
 * token, a draft to verify). A lane's outputs and state are bit-identical
 * whatever else is in the step and however its tokens are chunked.
 * A lane never passes max_position_embeddings (DSV4_ERR_ARG).
 * plan → prepare → run → validate → gate → accept → publish: an error before
 * the run, an op that ran out of memory (DSV4_ERR_NOMEM) or a veto
 * (DSV4_ERR_VETO) leaves every session exactly as it was; a fault once state
 * was touched (message names lane and layer) or a non-finite logit (names
 * lane and position) poisons every lane of the step. gate may be NULL. */
dsv4_status dsv4_step(dsv4_model *m, dsv4_lane *lanes, int n_lanes, const dsv4_gate *gate);

/* Floats of one row of dsv4_lane.hidden (hc_mult · dim). */
int dsv4_model_hidden_size(const dsv4_model *m);
/* 1 when the checkpoint has an MTP head (mtp.0.*). */
int dsv4_model_has_mtp(const dsv4_model *m);
/* 1 when it has a DSpark drafter (mtp.0 .. mtp.2 and config.json's dspark_*
 * keys, docs/DSPARK.md). */
int dsv4_model_has_dspark(const dsv4_model *m);
/* Floats of one row of dsv4_lane.features: the mean over the residual
 * streams after each DSpark target layer, concatenated (L · dim); 0 without
 * a DSpark drafter. */
int dsv4_model_feature_size(const dsv4_model *m);
/* Rows of a DSpark block = the most drafts one block gives (0 without one). */
int dsv4_model_dspark_block(const dsv4_model *m);
/* MTP rows the session has consumed: row i stands for position i and reads
 * token i + 1, so after the model consumed n tokens the MTP can take rows
 * up to n − 1 (the last one needs the token sampled from the model's last
 * logits) — it drafts token i + 2. With a DSpark drafter: the context rows
 * consumed (row i: position i), at most the session's position. */
int64_t dsv4_session_mtp_pos(const dsv4_session *s);

/* Decode one token for each of n_lanes distinct sessions (1..DSV4_MAX_LANES,
 * any positions before the end of the context) in one step. logits (may be NULL): n_lanes rows of vocab.
 * Each lane's logits and state are bit-identical to decoding it alone.
 * Either every lane advances or none does: a veto (DSV4_ERR_VETO) or an
 * error before the run leaves every session exactly as it was; a fault
 * detected after the run (message names lane and layer) poisons them all. */
dsv4_status dsv4_decode_batch(dsv4_model *m, dsv4_session *const *sessions,
                              const int32_t *tokens, int n_lanes, float *logits,
                              const dsv4_gate *gate);

/* 1 when the session refuses use until dsv4_session_reset/restore. */
int dsv4_session_poisoned(const dsv4_session *s);

/* In-memory snapshot of a session's live state (a canonical byte image:
 * equal images mean equal behaviour). */
typedef struct dsv4_snapshot dsv4_snapshot;
dsv4_status dsv4_session_snapshot(dsv4_session *s, dsv4_snapshot **out);
/* Make s equal to the snapshot (also recovers a poisoned session). */
dsv4_status dsv4_session_restore(dsv4_session *s, const dsv4_snapshot *snap);
void dsv4_snapshot_free(dsv4_snapshot *snap);
const void *dsv4_snapshot_data(const dsv4_snapshot *snap, size_t *len);
int64_t dsv4_snapshot_pos(const dsv4_snapshot *snap);
/* A snapshot from an image that dsv4_snapshot_data returned (e.g. read back
 * from a file): the position it starts with must be in 0..max positions and
 * the length must be exactly the image size of that position for this model,
 * else DSV4_ERR_FORMAT naming what disagrees. The contents are copied. The
 * image carries no identity: callers that store images tag them with
 * dsv4_model_identity. */
dsv4_status dsv4_snapshot_from_data(const dsv4_model *m, const void *data, size_t len,
                                    dsv4_snapshot **out);

#ifdef __cplusplus
}
#endif
#endif
