/* config.json -> dsv4_config. Two spellings are accepted: DeepSeek's official
 * keys (compress_ratios, num_hash_layers, qk_rope_head_dim, rope_scaling) and
 * what transformers' DeepseekV4Config.save_pretrained writes (layer_types,
 * compress_rates, mlp_layer_types, partial_rotary_factor, rope_parameters).
 * Defaults and the folding of legacy keys follow DeepseekV4Config.__post_init__
 * (transformers 5.17); where both spellings of one fact are present they must
 * agree. Unknown keys are ignored: checkpoints carry many training-only ones. */
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/strmap.h"
#include "io/fileio.h"
#include "io/json_parse.h"
#include "model/config.h"

/* Larger sizes are not a real model; the bound keeps derived products of two
 * dimensions far from int64 overflow. */
#define DIM_MAX (1 << 24)
#define CONFIG_MAX_BYTES (16u << 20)

/* Where values come from: messages read "<path>: <prefix><key>: <what>",
 * the prefix naming the enclosing object ("rope_parameters.compress."). */
typedef struct {
    const cJSON *root;
    const char *path;
    const char *prefix;
} cfg_src;

static cfg_src nested(const cfg_src *s, const cJSON *obj, const char *prefix)
{
    return (cfg_src){obj, s->path, prefix};
}

/* The value of key in obj, or NULL when absent or JSON null (both mean
 * "use the default", as in transformers). */
static const cJSON *field(const cJSON *obj, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    return cJSON_IsNull(v) ? NULL : v;
}

static dsv4_status bad_key(const cfg_src *s, const char *key, const char *what)
{
    return dsv4_fail(DSV4_ERR_CONFIG, "%s: %s%s: %s", s->path, s->prefix, key, what);
}

/* Integer `name` (already looked up as v) within [lo, hi]. */
static dsv4_status to_int(const cfg_src *s, const char *name, const cJSON *v, int64_t lo,
                          int64_t hi, int *out)
{
    int64_t x;
    if (!json_int_in(v, lo, hi, &x))
        return dsv4_fail(DSV4_ERR_CONFIG, "%s: %s%s: expected an integer in [%lld, %lld]",
                         s->path, s->prefix, name, (long long)lo, (long long)hi);
    *out = (int)x;
    return DSV4_OK;
}

static dsv4_status get_int(const cfg_src *s, const char *key, int64_t lo, int64_t hi, int def,
                           int *out)
{
    const cJSON *v = field(s->root, key);
    if (!v) {
        *out = def;
        return DSV4_OK;
    }
    return to_int(s, key, v, lo, hi, out);
}

/* Every float key has a range (CFG_*_RANGE, model/config.h). */
#define EPS_RANGE CFG_EPS_RANGE
#define SCALE_RANGE CFG_SCALE_RANGE
#define LIMIT_RANGE CFG_LIMIT_RANGE
#define THETA_RANGE CFG_THETA_RANGE
#define FRACTION_RANGE CFG_FRACTION_RANGE
#define YARN_RANGE CFG_YARN_RANGE

/* A number within [lo, hi]. */
static dsv4_status to_num(const cfg_src *s, const char *name, const cJSON *v, double lo, double hi,
                          double *out)
{
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= lo && v->valuedouble <= hi))
        return dsv4_fail(DSV4_ERR_CONFIG, "%s: %s%s: expected a number in [%g, %g]", s->path, s->prefix,
                         name, lo, hi);
    *out = v->valuedouble;
    return DSV4_OK;
}

static dsv4_status get_num(const cfg_src *s, const char *key, double lo, double hi, double def, double *out)
{
    const cJSON *v = field(s->root, key);
    if (!v) {
        *out = def;
        return DSV4_OK;
    }
    return to_num(s, key, v, lo, hi, out);
}

/* String value or NULL when absent. */
static dsv4_status get_str(const cfg_src *s, const char *key, const char **out)
{
    const cJSON *v = field(s->root, key);
    *out = NULL;
    if (!v) return DSV4_OK;
    if (!cJSON_IsString(v)) return bad_key(s, key, "expected a string");
    *out = v->valuestring;
    return DSV4_OK;
}

/* Boolean value (def when absent). */
static dsv4_status get_bool(const cfg_src *s, const char *key, int def, int *out)
{
    const cJSON *v = field(s->root, key);
    *out = def;
    if (!v) return DSV4_OK;
    if (!cJSON_IsBool(v)) return bad_key(s, key, "expected true or false");
    *out = cJSON_IsTrue(v);
    return DSV4_OK;
}

/* ---- plain scalar fields ---- */

static const struct {
    const char *key;
    size_t off;
    int def, lo, hi;
} k_ints[] = {
    {"vocab_size", offsetof(dsv4_config, vocab), 129280, 1, DIM_MAX},
    {"hidden_size", offsetof(dsv4_config, dim), 4096, 1, DIM_MAX},
    {"num_hidden_layers", offsetof(dsv4_config, n_layers), 43, 1, DSV4_MAX_LAYERS},
    {"num_attention_heads", offsetof(dsv4_config, n_heads), 64, 1, DIM_MAX},
    {"head_dim", offsetof(dsv4_config, head_dim), 512, 1, DIM_MAX},
    {"q_lora_rank", offsetof(dsv4_config, q_lora), 1024, 1, DIM_MAX},
    {"o_groups", offsetof(dsv4_config, o_groups), 8, 1, DIM_MAX},
    {"o_lora_rank", offsetof(dsv4_config, o_lora), 1024, 1, DIM_MAX},
    {"sliding_window", offsetof(dsv4_config, window), 128, 1, DIM_MAX},
    {"index_n_heads", offsetof(dsv4_config, idx_heads), 64, 1, DIM_MAX},
    {"index_head_dim", offsetof(dsv4_config, idx_head_dim), 128, 1, DIM_MAX},
    {"index_topk", offsetof(dsv4_config, idx_topk), 512, 1, DIM_MAX},
    {"n_routed_experts", offsetof(dsv4_config, n_experts), 256, 1, DIM_MAX},
    {"num_experts_per_tok", offsetof(dsv4_config, n_active), 6, 1, DIM_MAX},
    {"n_shared_experts", offsetof(dsv4_config, n_shared), 1, 0, DIM_MAX}, /* only 1 is supported (check) */
    {"moe_intermediate_size", offsetof(dsv4_config, moe_inter), 2048, 1, DIM_MAX},
    {"hc_mult", offsetof(dsv4_config, hc_mult), 4, 1, 64},
    {"hc_sinkhorn_iters", offsetof(dsv4_config, hc_iters), 20, 1, 10000},
    {"num_nextn_predict_layers", offsetof(dsv4_config, n_mtp), 1, 0, 16},
    {"max_position_embeddings", offsetof(dsv4_config, max_pos), 1048576, 1, INT_MAX},
};

static const struct {
    const char *key;
    size_t off;
    double def, lo, hi;
} k_nums[] = {
    {"rms_norm_eps", offsetof(dsv4_config, norm_eps), 1e-6, EPS_RANGE},
    {"hc_eps", offsetof(dsv4_config, hc_eps), 1e-6, EPS_RANGE},
    {"routed_scaling_factor", offsetof(dsv4_config, route_scale), 1.5, SCALE_RANGE},
    {"swiglu_limit", offsetof(dsv4_config, swiglu_limit), 10.0, LIMIT_RANGE},
};

static dsv4_status parse_scalars(const cfg_src *s, dsv4_config *c)
{
    dsv4_status st = DSV4_OK;
    for (size_t i = 0; i < sizeof k_ints / sizeof k_ints[0] && !st; i++)
        st = get_int(s, k_ints[i].key, k_ints[i].lo, k_ints[i].hi, k_ints[i].def,
                     (int *)((char *)c + k_ints[i].off));
    for (size_t i = 0; i < sizeof k_nums / sizeof k_nums[0] && !st; i++)
        st = get_num(s, k_nums[i].key, k_nums[i].lo, k_nums[i].hi, k_nums[i].def,
                     (double *)((char *)c + k_nums[i].off));
    if (st) return st;

    /* V4 attention is MQA: one shared KV head. */
    int kvh = 0;
    if ((st = get_int(s, "num_key_value_heads", INT_MIN, INT_MAX, 1, &kvh))) return st;
    if (kvh != 1) return bad_key(s, "num_key_value_heads", "must be 1 (DeepSeek-V4 shares one KV head)");

    const char *str;
    if ((st = get_str(s, "model_type", &str))) return st;
    if (str && strcmp(str, "deepseek_v4") != 0)
        return dsv4_fail(DSV4_ERR_CONFIG, "%s: model_type: '%s' is not deepseek_v4", s->path, str);
    if ((st = get_str(s, "hidden_act", &str))) return st;
    if (str && strcmp(str, "silu") != 0)
        return dsv4_fail(DSV4_ERR_UNSUPPORTED, "%s: hidden_act: '%s' is not supported (silu only)",
                         s->path, str);
    if ((st = get_str(s, "scoring_func", &str))) return st;
    if (!str || strcmp(str, "sqrtsoftplus") == 0) c->score_func = SCORE_SQRTSOFTPLUS;
    else if (strcmp(str, "sigmoid") == 0) c->score_func = SCORE_SIGMOID;
    else if (strcmp(str, "softmax") == 0) c->score_func = SCORE_SOFTMAX;
    else
        return dsv4_fail(DSV4_ERR_CONFIG,
                         "%s: scoring_func: unknown '%s' (sqrtsoftplus, sigmoid or softmax)",
                         s->path, str);

    /* Weights these flags would add are not part of the model we run. */
    static const char *const k_false[] = {"tie_word_embeddings", "attention_bias", "mlp_bias"};
    for (size_t i = 0; i < sizeof k_false / sizeof k_false[0]; i++) {
        int b;
        if ((st = get_bool(s, k_false[i], 0, &b))) return st;
        if (b)
            return dsv4_fail(DSV4_ERR_UNSUPPORTED, "%s: %s: true is not supported", s->path,
                             k_false[i]);
    }
    return DSV4_OK;
}

/* bos/eos: null means "none" (-1); eos may be a list, the first is kept.
 * Every id must name a token of the vocabulary (after parse_scalars; the
 * kept ones are checked again by config_check_common, for every source). */
static dsv4_status parse_token_ids(const cfg_src *s, dsv4_config *c)
{
    const cJSON *bos = cJSON_GetObjectItemCaseSensitive(s->root, "bos_token_id");
    const cJSON *eos = cJSON_GetObjectItemCaseSensitive(s->root, "eos_token_id");
    dsv4_status st = DSV4_OK;
    int last = c->vocab - 1;
    c->bos_id = !bos ? 0 : -1;
    c->eos_id = !eos ? 1 : -1;
    if (bos && !cJSON_IsNull(bos)) st = to_int(s, "bos_token_id", bos, 0, last, &c->bos_id);
    if (st || !eos || cJSON_IsNull(eos)) return st;
    if (!cJSON_IsArray(eos)) return to_int(s, "eos_token_id", eos, 0, last, &c->eos_id);
    if (!eos->child) return bad_key(s, "eos_token_id", "empty list");
    int id;
    for (const cJSON *e = eos->child; e && !st; e = e->next)
        st = to_int(s, "eos_token_id", e, 0, last, e == eos->child ? &c->eos_id : &id);
    return st;
}

/* quantization_config as DeepSeek ships it: {"quant_method": "fp8", "fmt":
 * "e4m3", "scale_fmt": "ue8m0", "weight_block_size": [128, 128]}; absent
 * fmt/scale_fmt/block size mean those values. The block size is kept: the
 * scale grids of FP8 tensors are checked against it at load. */
static dsv4_status parse_quant(const cfg_src *s, const cJSON *q, dsv4_config *c)
{
    if (!cJSON_IsObject(q)) return bad_key(s, "quantization_config", "expected an object");
    const char *m, *fmt, *sfmt;
    cfg_src qs = nested(s, q, "quantization_config.");
    dsv4_status st = get_str(&qs, "quant_method", &m);
    if (!st) st = get_str(&qs, "fmt", &fmt);
    if (!st) st = get_str(&qs, "scale_fmt", &sfmt);
    if (st) return st;
    if (!m) return bad_key(&qs, "quant_method", "missing");
    if (strcmp(m, "fp8") != 0)
        return dsv4_fail(DSV4_ERR_UNSUPPORTED,
                         "%s: quantization_config.quant_method: '%s' is not supported (fp8 only)", s->path, m);
    if (fmt && strcmp(fmt, "e4m3") != 0)
        return dsv4_fail(DSV4_ERR_UNSUPPORTED, "%s: quantization_config.fmt: '%s' is not supported (e4m3 only)",
                         s->path, fmt);
    if (sfmt && strcmp(sfmt, "ue8m0") != 0)
        return dsv4_fail(DSV4_ERR_UNSUPPORTED,
                         "%s: quantization_config.scale_fmt: '%s' is not supported (ue8m0 only)", s->path, sfmt);
    c->quant_blk_r = c->quant_blk_c = 128;
    const cJSON *b = field(q, "weight_block_size");
    if (b) {
        if (!cJSON_IsArray(b) || cJSON_GetArraySize(b) != 2)
            return bad_key(&qs, "weight_block_size", "expected [rows, cols]");
        if ((st = to_int(&qs, "weight_block_size", b->child, 1, 1 << 16, &c->quant_blk_r)) ||
            (st = to_int(&qs, "weight_block_size", b->child->next, 1, 1 << 16, &c->quant_blk_c)))
            return st;
    }
    c->weight_format = WFMT_FP8;
    return DSV4_OK;
}

static int format_of(const char *name)
{
    if (strcmp(name, "fp8") == 0) return WFMT_FP8;
    if (strcmp(name, "fp4") == 0) return WFMT_FP4;
    if (strcmp(name, "bf16") == 0 || strcmp(name, "bfloat16") == 0) return WFMT_PLAIN;
    return -1;
}

static dsv4_status parse_formats(const cfg_src *s, dsv4_config *c)
{
    const cJSON *q = field(s->root, "quantization_config");
    c->weight_format = WFMT_PLAIN;
    c->quant_blk_r = c->quant_blk_c = 0;
    dsv4_status st;
    if (q && (st = parse_quant(s, q, c))) return st;
    const char *e;
    if ((st = get_str(s, "expert_dtype", &e))) return st;
    c->expert_format = e ? format_of(e) : c->weight_format;
    if (c->expert_format < 0)
        return dsv4_fail(DSV4_ERR_CONFIG, "%s: expert_dtype: unknown '%s' (fp4, fp8 or bf16)",
                         s->path, e);
    if (c->expert_format == WFMT_FP8 && c->weight_format != WFMT_FP8)
        return dsv4_fail(DSV4_ERR_CONFIG, "%s: expert_dtype: 'fp8' needs a quantization_config (its block size)",
                         s->path);
    return DSV4_OK;
}

/* ---- per-layer schedules ---- */

static const char *const k_attn_names[] = {"sliding_attention", "compressed_sparse_attention",
                                           "heavily_compressed_attention"};

/* compress_rates {type: rate} and the legacy compress_rate_csa/_hca overrides. */
static dsv4_status parse_rates(const cfg_src *s, dsv4_config *c)
{
    c->ratio_csa = 4;
    c->ratio_hca = 128;
    const cJSON *r = field(s->root, "compress_rates");
    dsv4_status st = DSV4_OK;
    if (r) {
        if (!cJSON_IsObject(r)) return bad_key(s, "compress_rates", "expected an object");
        cfg_src rs = nested(s, r, "compress_rates.");
        for (const cJSON *e = r->child; e && !st; e = e->next) {
            int v;
            if (strcmp(e->string, k_attn_names[ATTN_CSA]) == 0)
                st = to_int(&rs, e->string, e, 1, DIM_MAX, &c->ratio_csa);
            else if (strcmp(e->string, k_attn_names[ATTN_HCA]) == 0)
                st = to_int(&rs, e->string, e, 1, DIM_MAX, &c->ratio_hca);
            else if (strcmp(e->string, k_attn_names[ATTN_SWA]) == 0)
                st = to_int(&rs, e->string, e, 0, 0, &v);
            else
                st = bad_key(&rs, e->string, "unknown attention type");
        }
        if (st) return st;
    }
    static const char *const keys[2] = {"compress_rate_csa", "compress_rate_hca"};
    int *dst[2] = {&c->ratio_csa, &c->ratio_hca};
    for (int i = 0; i < 2; i++) {
        const cJSON *v = field(s->root, keys[i]);
        int x = 0;
        if (!v) continue;
        if ((st = to_int(s, keys[i], v, 1, DIM_MAX, &x))) return st;
        if (r && x != *dst[i])
            return dsv4_fail(DSV4_ERR_CONFIG, "%s: %s: %d disagrees with compress_rates (%d)",
                             s->path, keys[i], x, *dst[i]);
        *dst[i] = x;
    }
    if (c->ratio_csa == c->ratio_hca)
        return bad_key(s, "compress_rates", "CSA and HCA rates must differ");
    return DSV4_OK;
}

/* Index of str in names[0..n), or -1. */
static int lookup(const char *str, const char *const *names, int n)
{
    for (int i = 0; i < n; i++)
        if (strcmp(str, names[i]) == 0) return i;
    return -1;
}

/* A list of n strings from names -> kinds. */
static dsv4_status parse_name_list(const cfg_src *s, const char *key, const cJSON *v,
                                   const char *const *names, int n_names, int n, int *kinds)
{
    if (!cJSON_IsArray(v)) return bad_key(s, key, "expected a list");
    int len = cJSON_GetArraySize(v), i = 0;
    if (len != n)
        return dsv4_fail(DSV4_ERR_CONFIG, "%s: %s: %d entries but num_hidden_layers is %d",
                         s->path, key, len, n);
    for (const cJSON *e = v->child; e; e = e->next, i++) {
        int k = cJSON_IsString(e) ? lookup(e->valuestring, names, n_names) : -1;
        if (k < 0)
            return dsv4_fail(DSV4_ERR_CONFIG, "%s: %s[%d]: not one of the known layer types",
                             s->path, key, i);
        kinds[i] = k;
    }
    return DSV4_OK;
}

static dsv4_status parse_attn_kinds(const cfg_src *s, dsv4_config *c)
{
    const int n = c->n_layers;
    const cJSON *lt = field(s->root, "layer_types");
    const cJSON *cr = field(s->root, "compress_ratios");
    int from_lt[DSV4_MAX_LAYERS];
    dsv4_status st;
    if (lt && (st = parse_name_list(s, "layer_types", lt, k_attn_names, 3, n, from_lt)))
        return st;
    c->mtp_attn_kind = ATTN_SWA;
    if (cr) {
        if (!cJSON_IsArray(cr)) return bad_key(s, "compress_ratios", "expected a list");
        int len = cJSON_GetArraySize(cr), i = 0;
        /* The official list may carry trailing entries for the drafter's
         * layers: one MTP layer, or the DSpark stages; they must agree. */
        if (len < n || len > n + 3)
            return dsv4_fail(DSV4_ERR_CONFIG,
                             "%s: compress_ratios: %d entries, expected num_hidden_layers (%d) "
                             "plus at most 3 for the drafter's layers",
                             s->path, len, n);
        for (const cJSON *e = cr->child; e; e = e->next, i++) {
            char name[48];
            snprintf(name, sizeof name, "compress_ratios[%d]", i);
            int r = 0, k;
            if ((st = to_int(s, name, e, 0, DIM_MAX, &r))) return st;
            if (r == 0) k = ATTN_SWA;
            else if (r == c->ratio_csa) k = ATTN_CSA;
            else if (r == c->ratio_hca) k = ATTN_HCA;
            else
                return dsv4_fail(DSV4_ERR_CONFIG,
                                 "%s: %s: %d is neither 0 nor a compress rate (%d, %d)", s->path,
                                 name, r, c->ratio_csa, c->ratio_hca);
            if (i > n && k != c->mtp_attn_kind)
                return dsv4_fail(DSV4_ERR_CONFIG, "%s: %s: %d differs from compress_ratios[%d]: the drafter's "
                                 "layers share one kind", s->path, name, r, n);
            if (i >= n) c->mtp_attn_kind = k;
            else if (lt && from_lt[i] != k)
                return dsv4_fail(DSV4_ERR_CONFIG,
                                 "%s: compress_ratios[%d]: %d disagrees with layer_types[%d] (%s)",
                                 s->path, i, r, i, k_attn_names[from_lt[i]]);
            else c->attn_kind[i] = k;
        }
    } else if (lt) {
        memcpy(c->attn_kind, from_lt, (size_t)n * sizeof from_lt[0]);
    } else {
        /* transformers' default: two HCA layers, then HCA/CSA alternating. */
        for (int i = 0; i < n; i++)
            c->attn_kind[i] = i < 2 ? ATTN_HCA : ((i - 2) % 2 ? ATTN_CSA : ATTN_HCA);
    }
    return DSV4_OK;
}

static dsv4_status parse_hash_layers(const cfg_src *s, dsv4_config *c)
{
    static const char *const names[] = {"moe", "hash_moe"}; /* index = hash flag */
    const int n = c->n_layers;
    const cJSON *ml = field(s->root, "mlp_layer_types");
    const cJSON *nh = field(s->root, "num_hash_layers");
    int n_hash = 3;
    dsv4_status st;
    if (nh && (st = to_int(s, "num_hash_layers", nh, 0, INT_MAX, &n_hash))) return st;
    if (ml) {
        if ((st = parse_name_list(s, "mlp_layer_types", ml, names, 2, n, c->hash_layer)))
            return st;
        for (int i = 0; nh && i < n; i++)
            if (c->hash_layer[i] != (i < n_hash))
                return dsv4_fail(DSV4_ERR_CONFIG,
                                 "%s: mlp_layer_types[%d]: disagrees with num_hash_layers (%d)",
                                 s->path, i, n_hash);
    } else {
        for (int i = 0; i < n; i++) c->hash_layer[i] = i < n_hash;
    }
    return DSV4_OK;
}

/* ---- the DSpark drafter (docs/DSPARK.md §2) ---- */

static dsv4_status parse_dspark(const cfg_src *s, dsv4_config *c)
{
    static const char *const keys[] = {"dspark_target_layer_ids", "dspark_markov_rank", "dspark_noise_token_id",
                                       "dspark_markov_head_type", "dspark_window_size"};
    dsv4_status st;
    const cJSON *ids = field(s->root, "dspark_target_layer_ids");
    c->dspark_block = 0;
    if (!field(s->root, "dspark_block_size")) {
        for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
            if (field(s->root, keys[i])) return bad_key(s, keys[i], "a DSpark key without dspark_block_size");
        return DSV4_OK;
    }
    if ((st = get_int(s, "dspark_block_size", 1, 64, 0, &c->dspark_block))) return st;
    if (!ids) return bad_key(s, "dspark_target_layer_ids", "missing (dspark_block_size is set)");
    if (!cJSON_IsArray(ids) || cJSON_GetArraySize(ids) < 1 || cJSON_GetArraySize(ids) > DSPARK_MAX_TARGETS)
        return dsv4_fail(DSV4_ERR_CONFIG, "%s: dspark_target_layer_ids: expected a list of 1..%d layer ids", s->path,
                         DSPARK_MAX_TARGETS);
    int n = 0;
    for (const cJSON *e = ids->child; e; e = e->next, n++) {
        char name[48];
        snprintf(name, sizeof name, "dspark_target_layer_ids[%d]", n);
        if ((st = to_int(s, name, e, 0, c->n_layers - 1, &c->dspark_targets[n]))) return st;
        for (int j = 0; j < n; j++)
            if (c->dspark_targets[j] == c->dspark_targets[n]) return bad_key(s, name, "a layer listed twice");
    }
    c->dspark_n_targets = n;
    const cJSON *r = field(s->root, "dspark_markov_rank"), *noise = field(s->root, "dspark_noise_token_id");
    if (!r) return bad_key(s, "dspark_markov_rank", "missing (dspark_block_size is set)");
    if (!noise) return bad_key(s, "dspark_noise_token_id", "missing (dspark_block_size is set)");
    if ((st = to_int(s, "dspark_markov_rank", r, 1, DIM_MAX, &c->dspark_rank))) return st;
    if ((st = to_int(s, "dspark_noise_token_id", noise, 0, c->vocab - 1, &c->dspark_noise))) return st;
    const char *type;
    if ((st = get_str(s, "dspark_markov_head_type", &type))) return st;
    if (type && strcmp(type, "vanilla"))
        return dsv4_fail(DSV4_ERR_UNSUPPORTED, "%s: dspark_markov_head_type: \"%s\" is not supported (only "
                         "\"vanilla\")", s->path, type);
    int win = c->window;
    if ((st = get_int(s, "dspark_window_size", 1, DIM_MAX, c->window, &win))) return st;
    if (win != c->window)
        return dsv4_fail(DSV4_ERR_UNSUPPORTED, "%s: dspark_window_size: %d differs from sliding_window (%d), which "
                         "is not supported", s->path, win, c->window);
    return DSV4_OK;
}

/* ---- rotary embeddings ---- */

/* rope_dim from qk_rope_head_dim and/or partial_rotary_factor; transformers
 * derives it as int(head_dim * factor), default factor 64/512. */
static dsv4_status parse_rope_dim(const cfg_src *s, dsv4_config *c)
{
    const cJSON *rd = field(s->root, "qk_rope_head_dim");
    const cJSON *pf = field(s->root, "partial_rotary_factor");
    dsv4_status st;
    int from_rd = 0;
    if (rd && (st = to_int(s, "qk_rope_head_dim", rd, 1, DIM_MAX, &from_rd))) return st;
    if (pf) {
        double f = 0;
        if ((st = to_num(s, "partial_rotary_factor", pf, FRACTION_RANGE, &f))) return st;
        c->rope_dim = (int)(c->head_dim * f);
        if (rd && from_rd != c->rope_dim)
            return dsv4_fail(DSV4_ERR_CONFIG,
                             "%s: qk_rope_head_dim: %d disagrees with partial_rotary_factor "
                             "(%g x head_dim %d = %d)",
                             s->path, from_rd, f, c->head_dim, c->rope_dim);
    } else {
        c->rope_dim = rd ? from_rd : (int)(c->head_dim * (64.0 / 512.0));
    }
    return DSV4_OK;
}

/* One set of rope parameters: a nested "main"/"compress" entry, or the flat
 * rope_scaling/rope_parameters dict that applies to the compress rope. In the
 * flat form transformers overrides rope_theta and partial_rotary_factor with
 * the top-level values, so they are not read from it. theta_set: the
 * top-level theta was given explicitly (a nested one must then agree). */
static dsv4_status parse_rope_obj(const cfg_src *s, int is_nested, double theta, int theta_set,
                                  const dsv4_config *c, dsv4_rope_params *out)
{
    const char *rt, *t;
    const cJSON *v;
    dsv4_status st;
    if ((st = get_str(s, "rope_type", &rt)) || (st = get_str(s, "type", &t))) return st;
    if (rt && t && strcmp(rt, t) != 0) return bad_key(s, "type", "disagrees with rope_type");
    if (!rt) rt = t ? t : "default";
    *out = (dsv4_rope_params){.theta = theta};
    if (strcmp(rt, "yarn") == 0) out->yarn = 1;
    else if (strcmp(rt, "default") != 0)
        return dsv4_fail(DSV4_ERR_UNSUPPORTED, "%s: %srope_type: '%s' is not supported", s->path,
                         s->prefix, rt);
    if (is_nested && (v = field(s->root, "rope_theta"))) {
        if ((st = to_num(s, "rope_theta", v, THETA_RANGE, &out->theta))) return st;
        if (theta_set && out->theta != theta)
            return dsv4_fail(DSV4_ERR_CONFIG, "%s: %srope_theta: %g disagrees with %g at top level",
                             s->path, s->prefix, out->theta, theta);
    }
    if (is_nested && (v = field(s->root, "partial_rotary_factor"))) {
        double f = 0;
        if ((st = to_num(s, "partial_rotary_factor", v, FRACTION_RANGE, &f))) return st;
        if ((int)(c->head_dim * f) != c->rope_dim)
            return bad_key(s, "partial_rotary_factor", "disagrees with the rope dimension");
    }
    if (!out->yarn) return DSV4_OK;

    if (!(v = field(s->root, "factor"))) return bad_key(s, "factor", "missing (yarn needs it)");
    if ((st = to_num(s, "factor", v, YARN_RANGE, &out->factor))) return st;
    if (!(v = field(s->root, "original_max_position_embeddings")))
        return bad_key(s, "original_max_position_embeddings", "missing (yarn needs it)");
    int omp = 0;
    if ((st = to_int(s, "original_max_position_embeddings", v, 1, INT_MAX, &omp))) return st;
    out->orig_max_pos = omp;
    if ((st = get_num(s, "beta_fast", YARN_RANGE, 32, &out->beta_fast)) ||
        (st = get_num(s, "beta_slow", YARN_RANGE, 1, &out->beta_slow)))
        return st;
    if (out->beta_fast < out->beta_slow) return bad_key(s, "beta_fast", "smaller than beta_slow");
    /* We apply no YaRN magnitude scaling (the reference does not). For the
     * flat form transformers forces attention_factor = 1; a nested yarn entry
     * without it would make transformers scale cos/sin, so it is refused. */
    double af = 1;
    if ((v = field(s->root, "attention_factor")) && (st = to_num(s, "attention_factor", v, -1e30, 1e30, &af)))
        return st;
    if (af != 1 || (is_nested && !v && out->factor > 1))
        return dsv4_fail(DSV4_ERR_UNSUPPORTED,
                         "%s: %sattention_factor: YaRN magnitude scaling other than 1.0 is not "
                         "supported",
                         s->path, s->prefix);
    if ((v = field(s->root, "truncate")) && !cJSON_IsTrue(v))
        return dsv4_fail(DSV4_ERR_UNSUPPORTED, "%s: %struncate: only true is supported", s->path,
                         s->prefix);
    return DSV4_OK;
}

static dsv4_status parse_rope(const cfg_src *s, dsv4_config *c)
{
    double th_main = 0, th_comp = 0;
    dsv4_status st;
    if ((st = get_num(s, "rope_theta", THETA_RANGE, 10000.0, &th_main)) ||
        (st = get_num(s, "compress_rope_theta", THETA_RANGE, 160000.0, &th_comp)))
        return st;
    const cJSON *rp = field(s->root, "rope_parameters");
    const cJSON *rs = field(s->root, "rope_scaling");
    if (rp && !cJSON_IsObject(rp)) return bad_key(s, "rope_parameters", "expected an object");
    if (rs && !cJSON_IsObject(rs)) return bad_key(s, "rope_scaling", "expected an object");
    if (rp && rs && !cJSON_Compare(rp, rs, 1))
        return bad_key(s, "rope_scaling", "given together with a different rope_parameters");
    c->rope_main = (dsv4_rope_params){.theta = th_main};
    c->rope_compress = (dsv4_rope_params){.theta = th_comp};
    if (rp) {
        const cJSON *m = field(rp, "main"), *k = field(rp, "compress");
        if (m || k) {
            if (!cJSON_IsObject(m) || !cJSON_IsObject(k))
                return bad_key(s, "rope_parameters",
                               "nested form needs both \"main\" and \"compress\" objects");
            cfg_src ms = nested(s, m, "rope_parameters.main.");
            cfg_src ks = nested(s, k, "rope_parameters.compress.");
            if ((st = parse_rope_obj(&ms, 1, th_main, field(s->root, "rope_theta") != NULL, c,
                                     &c->rope_main)))
                return st;
            return parse_rope_obj(&ks, 1, th_comp, field(s->root, "compress_rope_theta") != NULL,
                                  c, &c->rope_compress);
        }
    }
    if (!rp && !rs) return DSV4_OK;
    cfg_src fs = nested(s, rp ? rp : rs, rp ? "rope_parameters." : "rope_scaling.");
    return parse_rope_obj(&fs, 0, th_comp, 1, c, &c->rope_compress);
}

/* ---- cross-field checks ---- */

static dsv4_status check(const cfg_src *s, const dsv4_config *c)
{
    if (c->head_dim % 2) return bad_key(s, "head_dim", "must be even");
    if (c->rope_dim % 2 || c->rope_dim < 2 || c->rope_dim > c->head_dim)
        return dsv4_fail(DSV4_ERR_CONFIG,
                         "%s: qk_rope_head_dim: rope dimension %d must be even and in [2, head_dim %d]",
                         s->path, c->rope_dim, c->head_dim);
    if (c->idx_head_dim < c->rope_dim)
        return dsv4_fail(DSV4_ERR_CONFIG,
                         "%s: index_head_dim: %d is smaller than the rope dimension %d", s->path,
                         c->idx_head_dim, c->rope_dim);
    if ((int64_t)c->n_heads * c->head_dim % c->o_groups)
        return dsv4_fail(DSV4_ERR_CONFIG,
                         "%s: o_groups: %d does not divide num_attention_heads x head_dim (%lld)",
                         s->path, c->o_groups, (long long)c->n_heads * c->head_dim);
    if (c->n_active > c->n_experts)
        return dsv4_fail(DSV4_ERR_CONFIG,
                         "%s: num_experts_per_tok: %d exceeds n_routed_experts (%d)", s->path,
                         c->n_active, c->n_experts);
    return config_check_common(c, s->path);
}

dsv4_status config_check_common(const dsv4_config *c, const char *path)
{
    /* the FFN has one shared expert's weights (ffn.shared_experts.w1..w3) */
    if (c->n_shared != 1)
        return dsv4_fail(DSV4_ERR_UNSUPPORTED, "%s: n_shared_experts: %d is not supported (only 1)", path,
                         c->n_shared);
    if (c->bos_id >= c->vocab || c->eos_id >= c->vocab)
        return dsv4_fail(DSV4_ERR_CONFIG, "%s: %s_token_id: %d is outside the vocabulary (%d ids)", path,
                         c->bos_id >= c->vocab ? "bos" : "eos", c->bos_id >= c->vocab ? c->bos_id : c->eos_id,
                         c->vocab);
    /* session state is allocated by these (window rows, ratio open rows per
     * layer): longer than the context they are never filled */
    if (c->window > c->max_pos)
        return dsv4_fail(DSV4_ERR_CONFIG, "%s: sliding_window: %d is longer than max_position_embeddings (%d)",
                         path, c->window, c->max_pos);
    int rate = c->ratio_csa > c->ratio_hca ? c->ratio_csa : c->ratio_hca;
    if (rate > c->max_pos)
        return dsv4_fail(DSV4_ERR_CONFIG, "%s: compression rate %d is longer than max_position_embeddings (%d)",
                         path, rate, c->max_pos);
    return DSV4_OK;
}

/* transformers never writes a key twice; a repeated key would be read
 * differently by different parsers, so refuse it. */
static dsv4_status check_unique_keys(const cfg_src *s)
{
    strmap seen = {0};
    dsv4_status st = DSV4_OK;
    for (const cJSON *e = s->root->child; e && !st; e = e->next) {
        int r = strmap_put(&seen, e->string, 0, NULL);
        if (r < 0) st = dsv4_fail(DSV4_ERR_NOMEM, "%s: out of memory", s->path);
        else if (r > 0) st = bad_key(s, e->string, "duplicate key");
    }
    strmap_free(&seen);
    return st;
}

dsv4_status config_parse(const char *json, size_t len, const char *path, dsv4_config *out)
{
    cJSON *root;
    dsv4_status st = json_parse_all(json, len, path, &root);
    if (st) return st;
    cfg_src s = {root, path, ""};
    dsv4_config *c = calloc(1, sizeof *c); /* ~2 KB of arrays; filled fully before copy-out */
    if (!c) st = dsv4_fail(DSV4_ERR_NOMEM, "%s: out of memory", path);
    else if (!cJSON_IsObject(root))
        st = dsv4_fail(DSV4_ERR_CONFIG, "%s: top level is not a JSON object", path);
    if (!st) st = check_unique_keys(&s);
    if (!st) st = parse_scalars(&s, c);
    if (!st) st = parse_token_ids(&s, c);
    if (!st) st = parse_formats(&s, c);
    if (!st) st = parse_rates(&s, c);
    if (!st) st = parse_attn_kinds(&s, c);
    if (!st) st = parse_hash_layers(&s, c);
    if (!st) st = parse_dspark(&s, c);
    if (!st) st = parse_rope_dim(&s, c);
    if (!st) st = parse_rope(&s, c);
    if (!st) st = check(&s, c);
    if (!st) *out = *c;
    free(c);
    cJSON_Delete(root);
    return st;
}

dsv4_status config_load(const char *dir, dsv4_config *out)
{
    char *path = io_join(dir, "config.json");
    if (!path) return dsv4_fail(DSV4_ERR_NOMEM, "%s: out of memory", dir);
    char *text;
    size_t len;
    dsv4_status st = io_read_all(path, CONFIG_MAX_BYTES, &text, &len);
    if (!st) {
        st = config_parse(text, len, path, out);
        free(text);
    }
    free(path);
    return st;
}

int config_kind(const dsv4_config *c, int l)
{
    return l < 0 ? ATTN_SWA : l < c->n_layers ? c->attn_kind[l] : c->mtp_attn_kind;
}

int config_comp_width(const dsv4_config *c, int l, int indexer)
{
    int k = config_kind(c, l);
    if (indexer) return k == ATTN_CSA ? 2 * c->idx_head_dim : 0;
    return k == ATTN_SWA ? 0 : c->head_dim * (k == ATTN_CSA ? 2 : 1);
}

int config_ratio(const dsv4_config *c, int l)
{
    int k = config_kind(c, l);
    return k == ATTN_CSA ? c->ratio_csa : k == ATTN_HCA ? c->ratio_hca : 0;
}

int config_n_hash(const dsv4_config *c)
{
    int n = 0;
    for (int l = 0; l < c->n_layers; l++) n += c->hash_layer[l];
    return n;
}
