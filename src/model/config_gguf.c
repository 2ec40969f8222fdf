/* GGUF metadata (llama.cpp's `deepseek4` architecture) -> dsv4_config.
 *
 * Keys are llama.cpp's (convert_hf_to_gguf.py, DeepseekV4Model):
 *   deepseek4.block_count counts the MTP blocks too (nextn_predict_layers
 *   of them at the end); attention.compress_ratios has one entry per block
 *   (0: sliding window only); the first hash_layer_count layers are
 *   hash-routed; swiglu_clamp_exp/_shexp are per-block arrays (or scalars);
 *   rope.* is the main rope, attention.compress_rope_freq_base plus
 *   rope.scaling.* (YaRN) the compress rope; embedding_length_out is the
 *   width of the hc_mult residual streams (checked, not needed). The
 *   converter writes no vocab_size (the embedding's rows) and copies
 *   config.json's compress_ratios, one entry per block plus one per MTP
 *   layer even when (as in its 0.1.1) it writes no MTP tensors.
 * GGUF stores no attention kind: a compressed layer with an indexer
 * (blk.L.indexer.proj.weight) is CSA, one without is HCA. */
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "base/error.h"
#include "io/fileio.h"
#include "model/config.h"
#include "model/config_gguf.h"

#define DIM_MAX (1 << 24)
#define ARCH "deepseek4"

typedef struct {
    const gguf_file *g;
    const char *path;
} src;

static dsv4_status bad(const src *s, const char *key, const char *what)
{
    return dsv4_fail(DSV4_ERR_CONFIG, "%s: GGUF metadata %s: %s", s->path, key, what);
}

static const gguf_kv *kv_of(const src *s, const char *key, int arch)
{
    char full[128];
    snprintf(full, sizeof full, "%s%s", arch ? ARCH "." : "", key);
    return gguf_find_kv(s->g, full);
}

/* Integer key (scalar of any integer type) within [lo, hi]; absent: def, or
 * an error when def is INT_MIN (required). */
static dsv4_status get_int(const src *s, const char *key, int arch, int64_t lo, int64_t hi, int def, int *out)
{
    const gguf_kv *kv = kv_of(s, key, arch);
    char name[128];
    snprintf(name, sizeof name, "%s%s", arch ? ARCH "." : "", key);
    if (!kv) {
        if (def == INT_MIN) return bad(s, name, "missing");
        *out = def;
        return DSV4_OK;
    }
    int64_t v;
    if (kv->type == GGUF_T_ARRAY || kv->type == GGUF_T_BOOL || !gguf_kv_int(kv, 0, &v))
        return bad(s, name, "expected an integer");
    if (v < lo || v > hi) {
        char w[96];
        snprintf(w, sizeof w, "%lld is outside [%lld, %lld]", (long long)v, (long long)lo, (long long)hi);
        return bad(s, name, w);
    }
    *out = (int)v;
    return DSV4_OK;
}

/* A number (float or integer scalar) in [lo, hi] (the CFG_*_RANGE of
 * model/config.h); absent: def (NAN: required). */
static dsv4_status get_num(const src *s, const char *key, int arch, double lo, double hi, double def, double *out)
{
    const gguf_kv *kv = kv_of(s, key, arch);
    char name[128];
    snprintf(name, sizeof name, "%s%s", arch ? ARCH "." : "", key);
    if (!kv) {
        if (isnan(def)) return bad(s, name, "missing");
        *out = def;
        return DSV4_OK;
    }
    if (kv->type == GGUF_T_ARRAY || !gguf_kv_num(kv, 0, out)) return bad(s, name, "expected a number");
    if (!(*out >= lo && *out <= hi)) {
        char w[96];
        snprintf(w, sizeof w, "%g is outside [%g, %g]", *out, lo, hi);
        return bad(s, name, w);
    }
    return DSV4_OK;
}

/* A scalar, or a per-block array whose entries all agree: the one value. */
static dsv4_status get_uniform(const src *s, const char *key, int n_blocks, double *out)
{
    const gguf_kv *kv = kv_of(s, key, 1);
    char name[128];
    snprintf(name, sizeof name, ARCH ".%s", key);
    if (!kv) return bad(s, name, "missing");
    if (kv->type == GGUF_T_ARRAY && kv->count < (uint64_t)n_blocks)
        return bad(s, name, "has fewer entries than block_count");
    for (uint64_t i = 0; i < kv->count; i++) {
        double v;
        if (!gguf_kv_num(kv, i, &v) || !isfinite(v) || v < 0) return bad(s, name, "expected non-negative numbers");
        if (i == 0) *out = v;
        else if (i < (uint64_t)n_blocks && v != *out)
            return dsv4_fail(DSV4_ERR_UNSUPPORTED, "%s: GGUF metadata %s: per-layer values differ (%g at 0, %g at %llu); "
                             "one limit for all layers is supported", s->path, name, *out, v, (unsigned long long)i);
    }
    return DSV4_OK;
}

static int has_tensor(const src *s, const char *fmt, int l)
{
    char name[96];
    snprintf(name, sizeof name, fmt, l);
    return gguf_find_tensor(s->g, name) != NULL;
}

static dsv4_status get_arch(const src *s)
{
    const gguf_kv *a = gguf_find_kv(s->g, "general.architecture");
    if (!a) return bad(s, "general.architecture", "missing");
    if (a->type != GGUF_T_STRING) return bad(s, "general.architecture", "expected a string");
    if (a->strs[0].len != strlen(ARCH) || memcmp(a->strs[0].s, ARCH, strlen(ARCH)))
        return dsv4_fail(DSV4_ERR_UNSUPPORTED, "%s: GGUF architecture '%.*s' is not " ARCH " (DeepSeek-V4)", s->path,
                         (int)(a->strs[0].len > 64 ? 64 : a->strs[0].len), a->strs[0].s);
    return DSV4_OK;
}

/* Per-layer attention kinds and the two compression rates. */
static dsv4_status get_ratios(const src *s, int n_blocks, dsv4_config *c)
{
    const gguf_kv *kv = kv_of(s, "attention.compress_ratios", 1);
    if (!kv) return bad(s, ARCH ".attention.compress_ratios", "missing");
    if (kv->type != GGUF_T_ARRAY || kv->count < (uint64_t)n_blocks)
        return bad(s, ARCH ".attention.compress_ratios", "expected an integer array with one entry per block");
    c->ratio_csa = c->ratio_hca = 0;
    for (int l = 0; l < n_blocks; l++) {
        int64_t r;
        if (!gguf_kv_int(kv, (uint64_t)l, &r) || r < 0 || r > DIM_MAX)
            return bad(s, ARCH ".attention.compress_ratios", "entries must be integers in [0, 16777216]");
        int kind = r == 0 ? ATTN_SWA : has_tensor(s, "blk.%d.indexer.proj.weight", l) ? ATTN_CSA : ATTN_HCA;
        if (r == 1) return bad(s, ARCH ".attention.compress_ratios", "a ratio of 1 is not a compression");
        int *rate = kind == ATTN_CSA ? &c->ratio_csa : kind == ATTN_HCA ? &c->ratio_hca : NULL;
        if (rate && *rate && *rate != r)
            return dsv4_fail(DSV4_ERR_UNSUPPORTED, "%s: GGUF metadata " ARCH ".attention.compress_ratios: %s layers "
                             "with ratios %d and %lld; one ratio per kind is supported", s->path,
                             kind == ATTN_CSA ? "CSA" : "HCA", *rate, (long long)r);
        if (rate) *rate = (int)r;
        if (l < c->n_layers) c->attn_kind[l] = kind;
        else if (l == c->n_layers) c->mtp_attn_kind = kind;
    }
    if (!c->ratio_csa) c->ratio_csa = c->ratio_hca == 4 ? 8 : 4; /* unused; keep the two rates distinct */
    if (!c->ratio_hca) c->ratio_hca = c->ratio_csa == 128 ? 256 : 128;
    if (c->ratio_csa == c->ratio_hca)
        return bad(s, ARCH ".attention.compress_ratios", "CSA and HCA layers have the same ratio");
    return DSV4_OK;
}

static dsv4_status get_rope(const src *s, dsv4_config *c)
{
    dsv4_status st;
    c->rope_main = (dsv4_rope_params){0};
    c->rope_compress = (dsv4_rope_params){0};
    if ((st = get_num(s, "rope.freq_base", 1, CFG_THETA_RANGE, 10000.0, &c->rope_main.theta)) ||
        (st = get_num(s, "attention.compress_rope_freq_base", 1, CFG_THETA_RANGE, NAN, &c->rope_compress.theta)))
        return st;
    const gguf_kv *t = kv_of(s, "rope.scaling.type", 1);
    if (!t) return DSV4_OK;
    if (t->type != GGUF_T_STRING) return bad(s, ARCH ".rope.scaling.type", "expected a string");
    const gguf_str *v = &t->strs[0];
    if (v->len == 4 && !memcmp(v->s, "none", 4)) return DSV4_OK;
    if (v->len != 4 || memcmp(v->s, "yarn", 4))
        return dsv4_fail(DSV4_ERR_UNSUPPORTED, "%s: GGUF metadata " ARCH ".rope.scaling.type: '%.*s' is not supported "
                         "(yarn or none)", s->path, (int)(v->len > 32 ? 32 : v->len), v->s);
    dsv4_rope_params *y = &c->rope_compress;
    int omp;
    y->yarn = 1;
    if ((st = get_num(s, "rope.scaling.factor", 1, CFG_YARN_RANGE, NAN, &y->factor)) ||
        (st = get_int(s, "rope.scaling.original_context_length", 1, 1, INT_MAX, INT_MIN, &omp)) ||
        (st = get_num(s, "rope.scaling.yarn_beta_fast", 1, CFG_YARN_RANGE, 32.0, &y->beta_fast)) ||
        (st = get_num(s, "rope.scaling.yarn_beta_slow", 1, CFG_YARN_RANGE, 1.0, &y->beta_slow)))
        return st;
    y->orig_max_pos = omp;
    if (y->beta_fast < y->beta_slow) return bad(s, ARCH ".rope.scaling.yarn_beta_fast", "smaller than yarn_beta_slow");
    return DSV4_OK;
}

dsv4_status config_from_gguf(const gguf_file *g, dsv4_config *out)
{
    src s = {g, gguf_label(g)};
    dsv4_config c = {0};
    dsv4_status st;
    int blocks, kvh, head_v, rope_dim, n_hash, gating, norm_w = 1, vocab;
    if ((st = get_arch(&s))) return st;
    if ((st = get_int(&s, "block_count", 1, 1, DSV4_MAX_LAYERS + 16, INT_MIN, &blocks)) ||
        (st = get_int(&s, "nextn_predict_layers", 1, 0, 16, 0, &c.n_mtp)))
        return st;
    if (c.n_mtp >= blocks) return bad(&s, ARCH ".nextn_predict_layers", "not smaller than block_count");
    c.n_layers = blocks - c.n_mtp;
    /* as llama.cpp: MTP blocks count only when their tensors are present
     * (nextn.e_proj and h_proj; a concatenated eh_proj is a block too, not bound) */
    if (c.n_mtp && !has_tensor(&s, "blk.%d.nextn.e_proj.weight", c.n_layers) &&
        !has_tensor(&s, "blk.%d.nextn.eh_proj.weight", c.n_layers)) {
        c.n_layers = blocks;
        c.n_mtp = 0;
    }
    if (c.n_layers > DSV4_MAX_LAYERS) return bad(&s, ARCH ".block_count", "more layers than supported");
    const gguf_tensor *emb = gguf_find_tensor(g, "token_embd.weight");
    int emb_rows = emb && emb->ndim == 2 && emb->shape[0] <= DIM_MAX ? (int)emb->shape[0] : INT_MIN;
    if ((st = get_int(&s, "vocab_size", 1, 1, DIM_MAX, emb_rows, &vocab)) ||
        (st = get_int(&s, "embedding_length", 1, 1, DIM_MAX, INT_MIN, &c.dim)) ||
        (st = get_int(&s, "attention.head_count", 1, 1, DIM_MAX, INT_MIN, &c.n_heads)) ||
        (st = get_int(&s, "attention.head_count_kv", 1, INT_MIN, INT_MAX, 1, &kvh)) ||
        (st = get_int(&s, "attention.key_length", 1, 1, DIM_MAX, INT_MIN, &c.head_dim)) ||
        (st = get_int(&s, "attention.value_length", 1, 1, DIM_MAX, c.head_dim, &head_v)) ||
        (st = get_int(&s, "rope.dimension_count", 1, 2, DIM_MAX, INT_MIN, &rope_dim)) ||
        (st = get_int(&s, "attention.q_lora_rank", 1, 1, DIM_MAX, INT_MIN, &c.q_lora)) ||
        (st = get_int(&s, "attention.output_group_count", 1, 1, DIM_MAX, INT_MIN, &c.o_groups)) ||
        (st = get_int(&s, "attention.output_lora_rank", 1, 1, DIM_MAX, INT_MIN, &c.o_lora)) ||
        (st = get_int(&s, "attention.sliding_window", 1, 1, DIM_MAX, INT_MIN, &c.window)) ||
        (st = get_int(&s, "attention.indexer.head_count", 1, 1, DIM_MAX, INT_MIN, &c.idx_heads)) ||
        (st = get_int(&s, "attention.indexer.key_length", 1, 1, DIM_MAX, INT_MIN, &c.idx_head_dim)) ||
        (st = get_int(&s, "attention.indexer.top_k", 1, 1, DIM_MAX, INT_MIN, &c.idx_topk)) ||
        (st = get_int(&s, "expert_count", 1, 1, DIM_MAX, INT_MIN, &c.n_experts)) ||
        (st = get_int(&s, "expert_used_count", 1, 1, DIM_MAX, INT_MIN, &c.n_active)) ||
        (st = get_int(&s, "expert_shared_count", 1, 0, DIM_MAX, 1, &c.n_shared)) ||
        (st = get_int(&s, "expert_feed_forward_length", 1, 1, DIM_MAX, INT_MIN, &c.moe_inter)) ||
        (st = get_int(&s, "expert_gating_func", 1, 0, 16, 4, &gating)) ||
        (st = get_int(&s, "hash_layer_count", 1, 0, c.n_layers, 0, &n_hash)) ||
        (st = get_int(&s, "hyper_connection.count", 1, 1, 64, INT_MIN, &c.hc_mult)) ||
        (st = get_int(&s, "hyper_connection.sinkhorn_iterations", 1, 1, 10000, INT_MIN, &c.hc_iters)) ||
        (st = get_int(&s, "context_length", 1, 1, INT_MAX, 1048576, &c.max_pos)) ||
        (st = get_num(&s, "hyper_connection.epsilon", 1, CFG_EPS_RANGE, NAN, &c.hc_eps)) ||
        (st = get_num(&s, "attention.layer_norm_rms_epsilon", 1, CFG_EPS_RANGE, NAN, &c.norm_eps)) ||
        (st = get_num(&s, "expert_weights_scale", 1, CFG_SCALE_RANGE, 1.0, &c.route_scale)) ||
        (st = get_uniform(&s, "swiglu_clamp_exp", blocks, &c.swiglu_limit)) ||
        (st = get_int(&s, "tokenizer.ggml.bos_token_id", 0, 0, INT_MAX, -1, &c.bos_id)) ||
        (st = get_int(&s, "tokenizer.ggml.eos_token_id", 0, 0, INT_MAX, -1, &c.eos_id)))
        return st;
    c.vocab = vocab;
    c.rope_dim = rope_dim;
    /* the converter records the width of the hyper-connection streams */
    int emb_out;
    if ((st = get_int(&s, "embedding_length_out", 1, 1, INT_MAX, c.dim * c.hc_mult, &emb_out))) return st;
    if (emb_out != c.dim * c.hc_mult)
        return bad(&s, ARCH ".embedding_length_out", "must be embedding_length x hyper_connection.count");
    double lim[2] = {CFG_LIMIT_RANGE};
    if (!(c.swiglu_limit >= lim[0] && c.swiglu_limit <= lim[1]))
        return bad(&s, ARCH ".swiglu_clamp_exp", "outside the supported range");
    if (kvh != 1) return bad(&s, ARCH ".attention.head_count_kv", "must be 1 (DeepSeek-V4 shares one KV head)");
    if (head_v != c.head_dim) return bad(&s, ARCH ".attention.value_length", "must equal key_length (K = V)");
    /* llama.cpp's gating enum: 1 softmax, 2 sigmoid, 4 sqrt(softplus) */
    if (gating == 4) c.score_func = SCORE_SQRTSOFTPLUS;
    else if (gating == 2) c.score_func = SCORE_SIGMOID;
    else if (gating == 1) c.score_func = SCORE_SOFTMAX;
    else return bad(&s, ARCH ".expert_gating_func", "unknown gating function (1 softmax, 2 sigmoid, 4 sqrtsoftplus)");
    const gguf_kv *nw = kv_of(&s, "expert_weights_norm", 1);
    if (nw && (nw->type != GGUF_T_BOOL || !gguf_kv_int(nw, 0, &(int64_t){0})))
        return bad(&s, ARCH ".expert_weights_norm", "expected a bool");
    if (nw) norm_w = nw->data[0];
    if (!norm_w)
        return dsv4_fail(DSV4_ERR_UNSUPPORTED, "%s: GGUF metadata " ARCH ".expert_weights_norm: false is not supported "
                         "(DeepSeek-V4 renormalizes the selected experts)", s.path);
    if (kv_of(&s, "swiglu_clamp_shexp", 1)) {
        double sh;
        if ((st = get_uniform(&s, "swiglu_clamp_shexp", blocks, &sh))) return st;
        if (sh != c.swiglu_limit)
            return dsv4_fail(DSV4_ERR_UNSUPPORTED, "%s: GGUF metadata " ARCH ".swiglu_clamp_shexp (%g) differs from "
                             "swiglu_clamp_exp (%g); one limit is supported", s.path, sh, c.swiglu_limit);
    }
    for (int l = 0; l < c.n_layers; l++) c.hash_layer[l] = l < n_hash;
    c.weight_format = c.expert_format = WFMT_PLAIN; /* GGUF formats are per tensor */
    if ((st = get_ratios(&s, blocks, &c)) || (st = get_rope(&s, &c))) return st;
    if (c.head_dim % 2) return bad(&s, ARCH ".attention.key_length", "must be even");
    if (c.rope_dim % 2 || c.rope_dim > c.head_dim)
        return bad(&s, ARCH ".rope.dimension_count", "must be even and at most key_length");
    if (c.idx_head_dim < c.rope_dim) return bad(&s, ARCH ".attention.indexer.key_length", "smaller than the rope dimension");
    if ((int64_t)c.n_heads * c.head_dim % c.o_groups)
        return bad(&s, ARCH ".attention.output_group_count", "does not divide head_count x key_length");
    if (c.n_active > c.n_experts) return bad(&s, ARCH ".expert_used_count", "exceeds expert_count");
    if ((st = config_check_common(&c, s.path))) return st;
    *out = c;
    return DSV4_OK;
}

dsv4_status config_to_gguf(const dsv4_config *c, int n_mtp, gguf_writer *w)
{
    int blocks = c->n_layers + n_mtp, n_hash = 0;
    while (n_hash < c->n_layers && c->hash_layer[n_hash]) n_hash++;
    for (int l = n_hash; l < c->n_layers; l++)
        if (c->hash_layer[l]) return dsv4_fail(DSV4_ERR_UNSUPPORTED, "GGUF: hash-routed layers must be the first ones");
    if (c->rope_main.yarn) return dsv4_fail(DSV4_ERR_UNSUPPORTED, "GGUF: YaRN on the main rope cannot be written");
    int32_t ratios[DSV4_MAX_LAYERS + 16];
    for (int l = 0; l < blocks; l++) ratios[l] = config_ratio(c, l);
    static const struct { const char *key; size_t off; } ints[] = {
#define INT(k, f) {k, offsetof(dsv4_config, f)}
        INT("vocab_size", vocab), INT("embedding_length", dim), INT("attention.head_count", n_heads),
        INT("attention.key_length", head_dim), INT("attention.value_length", head_dim),
        INT("rope.dimension_count", rope_dim), INT("attention.q_lora_rank", q_lora),
        INT("attention.output_group_count", o_groups), INT("attention.output_lora_rank", o_lora),
        INT("attention.sliding_window", window), INT("attention.indexer.head_count", idx_heads),
        INT("attention.indexer.key_length", idx_head_dim), INT("attention.indexer.top_k", idx_topk),
        INT("expert_count", n_experts), INT("expert_used_count", n_active), INT("expert_shared_count", n_shared),
        INT("expert_feed_forward_length", moe_inter), INT("hyper_connection.count", hc_mult),
        INT("hyper_connection.sinkhorn_iterations", hc_iters), INT("context_length", max_pos),
#undef INT
    };
    char k[128];
    gw_kv_str(w, "general.architecture", ARCH);
#define AK(key) (snprintf(k, sizeof k, ARCH ".%s", key), k)
    gw_kv_u32(w, AK("block_count"), (uint32_t)blocks);
    gw_kv_u32(w, AK("nextn_predict_layers"), (uint32_t)n_mtp);
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
        gw_kv_u32(w, AK(ints[i].key), (uint32_t)*(const int *)((const char *)c + ints[i].off));
    gw_kv_u32(w, AK("attention.head_count_kv"), 1);
    gw_kv_u32(w, AK("embedding_length_out"), (uint32_t)(c->dim * c->hc_mult)); /* as the converter */
    gw_kv_u32(w, AK("expert_gating_func"), c->score_func == SCORE_SIGMOID ? 2 : c->score_func == SCORE_SOFTMAX ? 1 : 4);
    gw_kv_bool(w, AK("expert_weights_norm"), 1);
    gw_kv_u32(w, AK("hash_layer_count"), (uint32_t)n_hash);
    gw_kv_f32(w, AK("hyper_connection.epsilon"), (float)c->hc_eps);
    gw_kv_f32(w, AK("attention.layer_norm_rms_epsilon"), (float)c->norm_eps);
    gw_kv_f32(w, AK("expert_weights_scale"), (float)c->route_scale);
    gw_kv_f32(w, AK("swiglu_clamp_exp"), (float)c->swiglu_limit);
    gw_kv_i32s(w, AK("attention.compress_ratios"), ratios, (uint64_t)blocks);
    gw_kv_f32(w, AK("rope.freq_base"), (float)c->rope_main.theta);
    gw_kv_f32(w, AK("attention.compress_rope_freq_base"), (float)c->rope_compress.theta);
    const dsv4_rope_params *y = &c->rope_compress;
    gw_kv_str(w, AK("rope.scaling.type"), y->yarn ? "yarn" : "none");
    if (y->yarn) {
        gw_kv_f32(w, AK("rope.scaling.factor"), (float)y->factor);
        gw_kv_u32(w, AK("rope.scaling.original_context_length"), (uint32_t)y->orig_max_pos);
        gw_kv_f32(w, AK("rope.scaling.yarn_beta_fast"), (float)y->beta_fast);
        gw_kv_f32(w, AK("rope.scaling.yarn_beta_slow"), (float)y->beta_slow);
    }
#undef AK
    if (c->bos_id >= 0) gw_kv_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)c->bos_id);
    if (c->eos_id >= 0) gw_kv_u32(w, "tokenizer.ggml.eos_token_id", (uint32_t)c->eos_id);
    return DSV4_OK;
}

/* A DeepSeek-V4 template (llama.cpp's deepseek-ai-DeepSeek-V4.jinja or the
 * model's own) speaks the V4 chat format: the role markers, DSML tool calls
 * and tool results in the user turn. */
int gguf_chat_template_kind(const gguf_file *g)
{
    const gguf_kv *t = gguf_find_kv(g, "tokenizer.chat_template");
    if (!t || t->type != GGUF_T_STRING) return CHAT_TEMPLATE_NONE;
    static const char *const marks[] = {"<｜User｜>", "<｜Assistant｜>", "｜DSML｜", "tool_result", "</think>"};
    for (size_t i = 0; i < sizeof marks / sizeof marks[0]; i++)
        if (!memmem(t->strs[0].s, (size_t)t->strs[0].len, marks[i], strlen(marks[i]))) return CHAT_TEMPLATE_OTHER;
    return CHAT_TEMPLATE_V4;
}

int model_path_is_gguf(const char *p)
{
    size_t n = strlen(p);
    return n > 5 && !strcmp(p + n - 5, ".gguf") && io_is_file(p);
}

dsv4_status config_load_model(const char *path, dsv4_config *out, int *chat_template)
{
    if (chat_template) *chat_template = -1;
    if (!model_path_is_gguf(path)) return config_load(path, out);
    gguf_file *g;
    dsv4_status st = gguf_open(path, &g);
    if (st) return st;
    st = config_from_gguf(g, out);
    if (!st && chat_template) *chat_template = gguf_chat_template_kind(g);
    gguf_close(g);
    return st;
}
