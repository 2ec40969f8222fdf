/* dsv4_config: the model hyper-parameters, normalized from either spelling of
 * config.json (DeepSeek's official keys or transformers' keys). */
#ifndef DSV4_MODEL_CONFIG_H
#define DSV4_MODEL_CONFIG_H
#include "dsv4.h"
#include "ops/ops.h" /* SCORE_*: the router's score functions are the MoE op's */

enum { ATTN_SWA = 0, ATTN_CSA = 1, ATTN_HCA = 2 };
/* Checkpoint weight families (config.json): plain floats, FP8 e4m3 with 2-D
 * block scales (quantization_config), MXFP4 routed experts (expert_dtype fp4). */
enum { WFMT_PLAIN = 0, WFMT_FP8 = 1, WFMT_FP4 = 2 };

#define DSV4_MAX_LAYERS 256
#define DSPARK_MAX_TARGETS 16

typedef struct {
    double theta;
    int yarn;                  /* 1: YaRN-scaled frequencies */
    double factor;             /* YaRN factor */
    double orig_max_pos;       /* original_max_position_embeddings */
    double beta_fast, beta_slow;
} dsv4_rope_params;

typedef struct {
    int vocab;            /* vocab_size */
    int dim;              /* hidden_size */
    int n_layers;         /* num_hidden_layers (MTP not counted) */
    int n_heads;          /* num_attention_heads */
    int head_dim;         /* 512 */
    int rope_dim;         /* qk_rope_head_dim (partial_rotary_factor * head_dim) */
    int q_lora;           /* q_lora_rank */
    int o_groups, o_lora; /* grouped output projection */
    int window;           /* sliding_window, includes the current token */
    int attn_kind[DSV4_MAX_LAYERS];   /* ATTN_* per layer */
    int mtp_attn_kind;    /* ATTN_* of the drafter layers: trailing compress_ratios entries, else SWA */
    int ratio_csa, ratio_hca;         /* compress rates (4, 128) */
    int hash_layer[DSV4_MAX_LAYERS];  /* 1: routed by tid2eid[token] */
    int idx_heads, idx_head_dim, idx_topk;
    int n_experts, n_active, n_shared, moe_inter;
    int score_func;       /* SCORE_* */
    double route_scale;   /* routed_scaling_factor */
    double swiglu_limit;  /* <= 0: no clamp */
    int hc_mult, hc_iters;
    double hc_eps, norm_eps;
    dsv4_rope_params rope_main;     /* SWA-only layers */
    dsv4_rope_params rope_compress; /* CSA/HCA layers */
    int n_mtp;            /* num_nextn_predict_layers */
    /* The DSpark drafter (docs/DSPARK.md §2), present when config.json has
     * dspark_block_size: B rows per block, the L target layers whose output
     * streams (mean over the hc streams) feed it, Markov rank R, the token id
     * of rows 1..B-1. Its context window is sliding_window. */
    int dspark_block;     /* 0: no DSpark keys */
    int dspark_n_targets;
    int dspark_targets[DSPARK_MAX_TARGETS];
    int dspark_rank;
    int dspark_noise;
    int weight_format;    /* WFMT_*: from quantization_config */
    int expert_format;    /* WFMT_* of routed experts: expert_dtype, else weight_format */
    int quant_blk_r, quant_blk_c; /* FP8 scale blocks: weight_block_size (0 without quantization_config) */
    int max_pos;          /* max_position_embeddings */
    int bos_id, eos_id;   /* -1 when null; eos: first of a list */
} dsv4_config;

/* Ranges of the float values, whichever source (config.json in either
 * spelling, GGUF metadata): passing validation must mean the forward stays
 * finite (an eps of 1e39 or a RoPE base of 1e-50 overflows float). Bounds
 * are generous around real checkpoints' values. */
#define CFG_EPS_RANGE 1e-30, 1.0         /* rms_norm_eps, hc_eps (~1e-6) */
#define CFG_SCALE_RANGE 1e-6, 1e3        /* routed_scaling_factor (1.5, 2.5) */
#define CFG_LIMIT_RANGE -1e6, 1e6        /* swiglu_limit (10; <= 0: off) */
#define CFG_THETA_RANGE 1.0, 1e30        /* rope bases (1e4, 1.6e5): below 1, frequencies above 1 grow */
#define CFG_FRACTION_RANGE 1e-6, 1.0     /* partial_rotary_factor */
#define CFG_YARN_RANGE 1.0, 1e6          /* YaRN factor (>= 1), beta_fast, beta_slow */

/* Checks of the normalized config that every source shares: one shared
 * expert (the weights have one), BOS/EOS ids in the vocabulary, window and
 * compression rates no longer than the context (they size session state).
 * `path` names the source in messages. */
dsv4_status config_check_common(const dsv4_config *c, const char *path);

/* Parse config.json text. `path` is only used in messages. On failure returns
 * DSV4_ERR_CONFIG (or FORMAT for broken JSON) with a message naming the key. */
dsv4_status config_parse(const char *json, size_t len, const char *path,
                         dsv4_config *out);
/* Load and parse DIR/config.json. */
dsv4_status config_load(const char *dir, dsv4_config *out);
/* Compression rate of layer l (0 for SWA-only); l >= n_layers is a drafter
 * layer (the MTP block or a DSpark stage). */
int config_ratio(const dsv4_config *c, int l);
/* ATTN_* of layer l; l >= n_layers is a drafter layer. */
int config_kind(const dsv4_config *c, int l);
/* Width of layer l's compressor projections (wkv, wgate rows: the main
 * compressor's, or with indexer the indexer's), 0 where it has none: CSA
 * windows overlap, so its main compressor emits two series. */
int config_comp_width(const dsv4_config *c, int l, int indexer);
/* Layers routed by the token-id hash table instead of the gate's top-k. */
int config_n_hash(const dsv4_config *c);

#endif
