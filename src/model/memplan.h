/* Memory planning for a device: how much context, and how many sessions at
 * a context, fit next to the weights. Pure arithmetic on byte counts (from
 * weights_bytes and dsv4_model_memory), so `dsv4 info` and the load-time
 * check give the same answer. */
#ifndef DSV4_MODEL_MEMPLAN_H
#define DSV4_MODEL_MEMPLAN_H
#include <stdint.h>

/* Token rows of one forward unless the caller says otherwise: a 4096-token
 * prefill ran 1.16x faster than in forwards of 256 rows (the experts are
 * read once a forward; docs/PERFORMANCE.md). */
#define MODEL_STEP_ROWS 1024
/* What a device keeps free beside weights and sessions: a forward of
 * MODEL_STEP_ROWS rows at Flash's sizes holds about 0.5 GB of activations
 * (0.5 GB more when it returns every row's logits), the CUDA backend's
 * attention workspace up to 256 MB, its indexer's scores (rows × entries:
 * 0.25 GB at 256K tokens of context, 1 GB at 1M) and its product
 * preparations about 0.15 GB; then CUDA graphs. */
#define MODEL_DEVICE_RESERVE (2ull << 30)

typedef struct {
    uint64_t weights;      /* bytes of the bound weights on the device */
    uint64_t fixed;        /* per session: window rings, compressor buffers */
    double per_token;      /* per session and token of context: compressed KV, indexer keys */
    uint64_t device;       /* device memory available to the model */
    uint64_t reserve;      /* kept free for activations, scratch and the runtime */
    int64_t max_pos;       /* the model's longest context */
} memplan;

/* Bytes of one session holding ctx tokens. */
uint64_t memplan_session_bytes(const memplan *p, int64_t ctx);
/* Longest context one session can hold (0 when not even an empty session
 * fits; capped at max_pos). */
int64_t memplan_max_context(const memplan *p);
/* Sessions of ctx tokens each that fit together (0 when the weights alone
 * do not fit). */
int64_t memplan_sessions(const memplan *p, int64_t ctx);

#endif
