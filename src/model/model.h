/* dsv4_model: configuration plus weights bound to named checkpoint tensors.
 * Weight views point into the mmapped safetensors files (no copies). */
#ifndef DSV4_MODEL_MODEL_H
#define DSV4_MODEL_MODEL_H
#include "dsv4.h"
#include "io/gguf.h"
#include "io/safetensors.h"
#include "io/tensor_source.h"
#include "model/config.h"
#include "ops/ops.h"

typedef struct {
    dsv4_mat wkv, wgate;  /* [c·width, D], c = 2 with overlap (CSA), 1 without */
    dsv4_mat ape;         /* [ratio, c·width] added to the gate logits */
    dsv4_mat norm;        /* [width] */
} dsv4_comp_w;

typedef struct {
    dsv4_mat attn_norm, ffn_norm;
    dsv4_mat hc_attn_fn, hc_attn_base, hc_attn_scale;
    dsv4_mat hc_ffn_fn, hc_ffn_base, hc_ffn_scale;
    dsv4_mat wq_a, q_norm, wq_b, wkv, kv_norm, wo_a, wo_b, sinks;
    dsv4_comp_w comp;     /* CSA and HCA layers */
    dsv4_comp_w idx_comp; /* CSA: the indexer's own compressor */
    dsv4_mat idx_wq_b, idx_wproj;
    dsv4_mat gate, gate_bias; /* gate_bias only in routed (non-hash) layers */
    const int32_t *tid2eid;   /* hash layers: [vocab][n_active], validated */
    int tid2eid_on_backend;   /* moved into backend memory by weights_adopt */
    dsv4_mat *w1, *w2, *w3;   /* [n_experts] views (per-expert or merged storage) */
    dsv4_mat sh_w1, sh_w2, sh_w3;
} dsv4_layer_w;

/* The MTP head (spec §5.2): input fusion and its own hc head and final
 * norm; its block is layers[n_layers] (attention of cfg.mtp_attn_kind,
 * routed top-k MoE); embedding and output head are the main model's. A
 * DSpark drafter has the same own hc head and norm (on its last stage) and
 * no input fusion. */
typedef struct {
    dsv4_mat e_proj, h_proj;    /* [D, D] */
    dsv4_mat enorm, hnorm, norm;
    dsv4_mat hc_head_fn, hc_head_base, hc_head_scale;
} dsv4_mtp_w;

/* The row formats of a session's state (state_layout.c): window-ring rows
 * and main-compressor entries, indexer keys. */
typedef struct {
    dsv4_row_fmt kv, idx;
} dsv4_state_layout;

/* ROW_F32 rows (--cache exact), or the packed official ones: ROW_FP8 KV
 * rows and entries, ROW_FP4 indexer keys. */
dsv4_state_layout state_layout(const dsv4_config *c, int official);

/* Drafter blocks a model may have after its main layers (the slots of
 * dsv4_model.layers past n_layers). */
#define DRAFT_MAX_BLOCKS 8

/* The DSpark drafter's own tensors (docs/DSPARK.md §3); its stages are
 * layers[n_layers .. n_layers + n_draft) (SWA attention, routed top-k MoE),
 * its hc head and norm are in dsv4_mtp_w. */
typedef struct {
    dsv4_mat main_proj;         /* [D, L·D]: the target features into one context row (stage 0) */
    dsv4_mat main_norm;         /* [D] */
    dsv4_mat markov_w1;         /* [V, R]: a table, row = the previous token (last stage) */
    dsv4_mat markov_w2;         /* [V, R]: R -> V logit bias */
    dsv4_mat conf;              /* [1, D + R]: confidence logit of [h, markov_w1 row] */
} dsv4_dspark_w;

struct dsv4_model {
    dsv4_config cfg;
    st_archive *st;       /* the checkpoint's tensors: a safetensors archive, */
    gguf_file *gg;        /* or a GGUF file (exactly one is set) */
    dsv4_mat embed, head, norm, hc_head_fn, hc_head_base, hc_head_scale;
    dsv4_layer_w *layers; /* n_layers, then the drafter's n_draft blocks */
    int has_mtp;          /* the checkpoint has mtp.0.* (bound into mtp and layers[n_layers]) */
    int has_dspark;       /* or a DSpark drafter (mtp.0 .. mtp.<n_draft-1>, config dspark_*) */
    int n_draft;          /* drafter blocks after the main layers: 0, 1 (MTP) or the DSpark stages */
    dsv4_mtp_w mtp;
    dsv4_dspark_w dspark;
    float *inv_freq_main, *inv_freq_compress; /* [rope_dim/2] each, backend memory */
    dsv4_backend *be;
    char **unknown;       /* tensors neither bound nor recognized (mtp.* is recognized) */
    int n_unknown;
    int n_mtp_tensors;    /* drafter tensors recognized but not bound (deeper MTP heads, GGUF nextn blocks) */
    void *owned_image;    /* synthetic checkpoints: the in-memory safetensors or GGUF image */
    int cache_official;   /* 1: DSV4_CACHE_OFFICIAL numerics in the forward pass */
    int step_rows;        /* most token rows of one forward (dsv4_load_options.step_rows) */
    dsv4_state_layout layout; /* how its sessions store their rows: state_layout(cfg, cache_official) */
};

/* Random checkpoint image with the preset's real dimensions ("flash",
 * "pro"), `layers` layers and `experts` routed experts (<= 0: the real
 * count), weights "fp8-fp4" (the released mix; NULL: the same), "bf16" or
 * "gguf-iq3_xxs", drafter "mtp" (NULL: the same) or "dspark" (not with
 * GGUF) (synthetic.c); fills cfg and returns a malloc'd safetensors image,
 * or a GGUF one (*is_gguf = 1; its metadata says cfg). */
dsv4_status model_synthetic_image(const char *preset, int layers, int experts, const char *weights,
                                  const char *drafter, dsv4_config *cfg, void **image, size_t *image_len, int *is_gguf);

/* Bind every expected tensor of the config: presence, dtype and exact shape.
 * Fills m->embed ... m->layers; records unknown tensor names. */
dsv4_status weights_bind(dsv4_model *m);
/* Hand the bound weights to m->be (after weights_bind), reporting progress
 * in bytes (CUDA: uploads; CPU: read-ahead requests on the mapping). */
dsv4_status weights_adopt(dsv4_model *m, dsv4_progress_fn progress, void *user);
void weights_free(dsv4_model *m);
/* Bytes of every bound weight (what a device backend holds: the views'
 * formats, tid2eid tables as int32). Valid after weights_bind. */
uint64_t weights_bytes(dsv4_model *m);

/* Bytes one decode step reads at context ctx: weights (all dense tensors,
 * `distinct_experts` routed experts per layer, one embedding row) and session
 * state (window, indexer keys, selected/all compressed entries, as m->layout
 * stores them). */
void model_decode_traffic(const dsv4_model *m, int64_t ctx, double distinct_experts, uint64_t *weights,
                          uint64_t *state);
/* Floating-point operations (a multiply and an add count two) of an
 * n-token prompt in one step of a new session, out_rows of its rows with
 * logits: matmul, 2 per weight value a token's row meets (the products,
 * the mHC mixes' and the norms' weights; num_experts_per_tok routed
 * experts; the head and the final mHC only for the output rows);
 * attention, the scores and weighted sums over each row's keys (window,
 * selected or all compressed entries) and the indexer's scores at CSA
 * layers. Softmax, rope and the Sinkhorn iterations are not counted. */
void model_prefill_flops(const dsv4_model *m, int64_t n, int64_t out_rows, double *matmul, double *attention);

/* Session-state bytes of a config per storage layout (state_layout.c): the
 * growing part per token (averaged over the ratios) and the fixed part of
 * the main layers (an MTP layer adds one window ring). STATE_FP32 and
 * STATE_OFFICIAL are what sessions hold (--cache exact, official); the
 * others are other implementations' storage, for comparison. */
enum { STATE_FP32, STATE_BF16, STATE_OFFICIAL, STATE_FLASHMLA, STATE_LAYOUTS };
void config_state_size(const dsv4_config *c, int layout, double *per_token, uint64_t *fixed);

/* RoPE inverse frequencies as transformers computes them (fp32). */
void rope_inv_freq(const dsv4_rope_params *p, int rope_dim, float *out);

#endif
