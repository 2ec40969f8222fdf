/* Synthetic checkpoints with the real V4-Flash / V4-Pro dimensions and random
 * weights, built in memory and loaded through the normal path (config or
 * GGUF metadata parser, binder, backend). For benchmarks at real shapes with
 * a reduced number of layers and experts, and a drafter for speculative
 * decoding's speed: the MTP head (mtp.0.*) of V4-Flash/Pro, or the DSpark
 * drafter of V4-Flash-0731 (docs/DSPARK.md §2-3: stages mtp.0..2 over the
 * streams after the last three layers, FP8 main_proj, BF16 Markov and
 * confidence heads; safetensors mixes only, as the loader reads it). Weight
 * mixes, so a decode step reads a real checkpoint's bytes:
 *   "fp8-fp4"       the released checkpoints (spec §7), a safetensors image:
 *                   FP8 e4m3 dense projections (the MTP's e_proj/h_proj and
 *                   DSpark's main_proj too, spec §5.2) and shared experts
 *                   with 128x128 E8M0 scales, MXFP4 routed experts, BF16
 *                   embedding/head/router/compressor/indexer projections;
 *   "bf16"          every matrix BF16 (safetensors);
 *   "gguf-iq3_xxs"  a GGUF image like the community UD-IQ3_XXS files
 *                   (llama.cpp's deepseek4 names and metadata, experts merged
 *                   per layer): IQ3_XXS routed experts, Q8_0 dense, shared
 *                   expert, embedding and compressor/indexer projections, a
 *                   Q6_K head, F32 router; the MTP head as block n_layers
 *                   (nextn.*). Blocks are random valid ones
 *                   (ggml_random_blocks) with the weights' rms. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/ggml_quant.h"
#include "base/threadpool.h"
#include "io/gguf_write.h"
#include "model/catalog.h"
#include "model/config_gguf.h"
#include "model/model.h"
#include "model/names_gguf.h"

typedef struct {
    char name[96];     /* official spelling */
    dsv4_dtype dt;     /* F32/BF16 values; F8_E4M3 codes; I8 packed E2M1 codes; F8_E8M0 scales; U8 GGUF blocks */
    int gg;            /* GGUF block format (dt U8), else -1 */
    int64_t d0, d1;    /* stored shape; d1 = 0: 1-D */
    int64_t n_exp;     /* GGUF merged experts: n_exp matrices [d0, d1]; else 1 */
    float scale;       /* values uniform(-scale, scale) around `center` (GGUF: their rms) */
    float center;
    int exp;           /* quantized formats and their scales: every block's scale is 2^exp */
    uint64_t off;      /* in the data area */
} syn_tensor;

/* Flash-0731's DSpark drafter has three stages (docs/DSPARK.md §1). */
#define SYN_DSPARK_STAGES 3

/* The weight classes of the list; a mix gives each a format. */
enum { C_DENSE, C_EXPERT, C_EMBED, C_HEAD, C_PROJ, C_ROUTER, C_COUNT };

typedef struct {
    const char *name;
    int gguf;                   /* a GGUF image (else safetensors) */
    int quant_config;           /* config.json's FP8/FP4 quantization_config */
    int fmt[C_COUNT];           /* dsv4_wformat per class */
} syn_mix;

static const syn_mix k_mixes[] = {
    {"fp8-fp4", 0, 1, {WF_FP8_E4M3, WF_MXFP4, WF_BF16, WF_BF16, WF_BF16, WF_BF16}},
    {"bf16", 0, 0, {WF_BF16, WF_BF16, WF_BF16, WF_BF16, WF_BF16, WF_BF16}},
    {"gguf-iq3_xxs", 1, 0, {WF_Q8_0, WF_IQ3_XXS, WF_Q8_0, WF_Q6_K, WF_Q8_0, WF_F32}},
};

typedef struct {
    syn_tensor *t;
    int n, cap;
} syn_list;

static int add(syn_list *l, const char *name, dsv4_dtype dt, int64_t d0, int64_t d1, float scale, float center)
{
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 256;
        syn_tensor *g = realloc(l->t, (size_t)cap * sizeof *g);
        if (!g) return -1;
        l->t = g;
        l->cap = cap;
    }
    syn_tensor *t = &l->t[l->n++];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->dt = dt;
    t->gg = -1;
    t->d0 = d0;
    t->d1 = d1;
    t->n_exp = 1;
    t->scale = scale;
    t->center = center;
    return 0;
}

/* The exponent of the power of two s with v/s within (lim/2, lim]. */
static int exp_for(float v, float lim)
{
    int e;
    float m = frexpf(v / lim, &e);
    return m == 0.5f ? e - 1 : e;
}

/* A weight matrix [out, in] with variance ~1/in (n_exp of them: GGUF's
 * merged experts), stored as `fmt`: BF16/F32 values; FP8 codes plus a
 * [ceil(out/128), ceil(in/128)] scale grid, or MXFP4 (codes drawn uniformly)
 * plus [out, in/32] scales, one scale value throughout; GGUF blocks. */
static int qmat_n(syn_list *l, const char *name, int64_t out, int64_t in, int fmt, int64_t n_exp)
{
    float sc = sqrtf(3.0f / (float)in);
    if (fmt == WF_BF16 || fmt == WF_F32) return add(l, name, fmt == WF_BF16 ? DT_BF16 : DT_F32, out, in, sc, 0);
    if (fmt != WF_FP8_E4M3 && fmt != WF_MXFP4) {
        if (add(l, name, DT_U8, out, in, sc / sqrtf(3.0f), 0)) return -1;
        l->t[l->n - 1].gg = fmt;
        l->t[l->n - 1].n_exp = n_exp;
        return 0;
    }
    char sn[96];
    size_t n = strlen(name);
    snprintf(sn, sizeof sn, "%.*s.scale", (int)(n - 7), name); /* X.weight -> X.scale */
    int r;
    if (fmt == WF_FP8_E4M3) {
        int e = exp_for(sc, 448.0f);
        r = add(l, name, DT_F8_E4M3, out, in, sc, 0) || add(l, sn, DT_F8_E8M0, (out + 127) / 128, (in + 127) / 128, 0, 0);
        l->t[l->n - 2].exp = l->t[l->n - 1].exp = e;
    } else {
        int e = exp_for(sc, 6.0f);
        r = add(l, name, DT_I8, out, in / 2, sc, 0) || add(l, sn, DT_F8_E8M0, out, in / 32, 0, 0);
        l->t[l->n - 2].exp = l->t[l->n - 1].exp = e;
    }
    return r ? -1 : 0;
}

/* A drafter's own hc head and final norm under prefix pre (the MTP's
 * mtp.0., DSpark's last stage). */
static int draft_head(syn_list *l, const dsv4_config *c, const char *pre)
{
    char n[96];
    int r = 0, D = c->dim, hc = c->hc_mult;
#define NM(fmt) (snprintf(n, sizeof n, "%s" fmt, pre), n)
    r |= add(l, NM("norm.weight"), DT_BF16, D, 0, 0.1f, 1.0f);
    r |= add(l, NM("hc_head_fn"), DT_F32, hc, (int64_t)hc * D, 1.0f / sqrtf((float)hc * D), 0);
    r |= add(l, NM("hc_head_base"), DT_F32, hc, 0, 0.5f, 0);
    r |= add(l, NM("hc_head_scale"), DT_F32, 1, 0, 0.1f, 0.5f);
#undef NM
    return r;
}

/* The MTP head's input fusion (FP8 in the released checkpoints, spec §5.2)
 * and own head; its block is layer n_layers. */
static int mtp_head(syn_list *l, const dsv4_config *c, int q8)
{
    int r = 0, D = c->dim;
    r |= qmat_n(l, "mtp.0.e_proj.weight", D, D, q8, 1);
    r |= qmat_n(l, "mtp.0.h_proj.weight", D, D, q8, 1);
    r |= add(l, "mtp.0.enorm.weight", DT_BF16, D, 0, 0.1f, 1.0f);
    r |= add(l, "mtp.0.hnorm.weight", DT_BF16, D, 0, 0.1f, 1.0f);
    return r | draft_head(l, c, "mtp.0.");
}

/* DSpark's context fusion on stage 0 (main_proj FP8 in the release, like
 * the dense projections), and on the last stage the hc head, norm, Markov
 * and confidence heads (BF16 in the release whatever the rest); the shapes
 * are the catalog's. The stages' blocks are layers n_layers ... */
static int dspark_heads(syn_list *l, const dsv4_config *c, int q8, int stages)
{
    char n[96];
    int r = 0;
    int64_t D = c->dim, V = c->vocab, R = catalog_dim(c, 0, DM_MARKOV);
    r |= qmat_n(l, "mtp.0.main_proj.weight", D, catalog_dim(c, 0, DM_DSPARK_CTX), q8, 1);
    r |= add(l, "mtp.0.main_norm.weight", DT_BF16, D, 0, 0.1f, 1.0f);
    char pre[32];
    snprintf(pre, sizeof pre, "mtp.%d.", stages - 1);
#define NM(fmt) (snprintf(n, sizeof n, "%s" fmt, pre), n)
    r |= qmat_n(l, NM("markov_head.markov_w1.weight"), V, R, WF_BF16, 1);
    r |= qmat_n(l, NM("markov_head.markov_w2.weight"), V, R, WF_BF16, 1);
    r |= qmat_n(l, NM("confidence_head.proj.weight"), 1, catalog_dim(c, 0, DM_CONF_IN), WF_BF16, 1);
#undef NM
    return r | draft_head(l, c, pre);
}

/* The checkpoint's tensors under their official names, in the mix's formats
 * (GGUF: the experts merged per layer), with `stages` drafter blocks: the
 * MTP head's one, or DSpark's (config dspark_block_size set). */
static int build_list(const dsv4_config *c, const syn_mix *x, int stages, syn_list *l)
{
    const int *f = x->fmt;
    int q8 = f[C_DENSE];
#define qmat(l, name, out, in, fmt) qmat_n(l, name, out, in, fmt, 1)
#define mat(l, name, out, in) qmat(l, name, out, in, f[C_PROJ])
    char n[96];
    int r = 0, D = c->dim, hc = c->hc_mult, mix = (2 + hc) * hc;
    r |= qmat(l, "embed.weight", c->vocab, D, f[C_EMBED]);
    r |= qmat(l, "head.weight", c->vocab, D, f[C_HEAD]);
    r |= add(l, "norm.weight", DT_BF16, D, 0, 0.1f, 1.0f);
    r |= add(l, "hc_head_fn", DT_F32, hc, (int64_t)hc * D, 1.0f / sqrtf((float)hc * D), 0);
    r |= add(l, "hc_head_base", DT_F32, hc, 0, 0.5f, 0);
    r |= add(l, "hc_head_scale", DT_F32, 1, 0, 0.1f, 0.5f);
    r |= c->dspark_block ? dspark_heads(l, c, q8, stages) : mtp_head(l, c, q8);
    for (int i = 0; i < c->n_layers + stages; i++) {
        char pre[32];
        if (i < c->n_layers) snprintf(pre, sizeof pre, "layers.%d.", i);
        else snprintf(pre, sizeof pre, "mtp.%d.", i - c->n_layers);
#define NM(fmt) (snprintf(n, sizeof n, "%s" fmt, pre), n)
        int kind = config_kind(c, i), ratio = config_ratio(c, i), hd = c->head_dim, cw = hd * (kind == ATTN_CSA ? 2 : 1);
        r |= add(l, NM("attn_norm.weight"), DT_BF16, D, 0, 0.1f, 1.0f);
        r |= add(l, NM("ffn_norm.weight"), DT_BF16, D, 0, 0.1f, 1.0f);
        const char *site[2] = {"attn", "ffn"};
        for (int s = 0; s < 2; s++) {
            snprintf(n, sizeof n, "%shc_%s_fn", pre, site[s]);
            r |= add(l, n, DT_F32, mix, (int64_t)hc * D, 1.0f / sqrtf((float)hc * D), 0);
            snprintf(n, sizeof n, "%shc_%s_base", pre, site[s]);
            r |= add(l, n, DT_F32, mix, 0, 0.5f, 0);
            snprintf(n, sizeof n, "%shc_%s_scale", pre, site[s]);
            r |= add(l, n, DT_F32, 3, 0, 0.1f, 0.5f);
        }
        r |= qmat(l, NM("attn.wq_a.weight"), c->q_lora, D, q8);
        r |= add(l, NM("attn.q_norm.weight"), DT_BF16, c->q_lora, 0, 0.1f, 1.0f);
        r |= qmat(l, NM("attn.wq_b.weight"), (int64_t)c->n_heads * hd, c->q_lora, q8);
        r |= qmat(l, NM("attn.wkv.weight"), hd, D, q8);
        r |= add(l, NM("attn.kv_norm.weight"), DT_BF16, hd, 0, 0.1f, 1.0f);
        r |= qmat(l, NM("attn.wo_a.weight"), (int64_t)c->o_groups * c->o_lora, (int64_t)c->n_heads * hd / c->o_groups, q8);
        r |= qmat(l, NM("attn.wo_b.weight"), D, (int64_t)c->o_groups * c->o_lora, q8);
        r |= add(l, NM("attn.attn_sink"), DT_F32, c->n_heads, 0, 0.5f, 0);
        if (kind != ATTN_SWA) {
            r |= mat(l, NM("attn.compressor.wkv.weight"), cw, D);
            r |= mat(l, NM("attn.compressor.wgate.weight"), cw, D);
            r |= add(l, NM("attn.compressor.ape"), DT_F32, ratio, cw, 0.1f, 0);
            r |= add(l, NM("attn.compressor.norm.weight"), DT_BF16, hd, 0, 0.1f, 1.0f);
        }
        if (kind == ATTN_CSA) {
            int icw = 2 * c->idx_head_dim;
            r |= mat(l, NM("attn.indexer.compressor.wkv.weight"), icw, D);
            r |= mat(l, NM("attn.indexer.compressor.wgate.weight"), icw, D);
            r |= add(l, NM("attn.indexer.compressor.ape"), DT_F32, ratio, icw, 0.1f, 0);
            r |= add(l, NM("attn.indexer.compressor.norm.weight"), DT_BF16, c->idx_head_dim, 0, 0.1f, 1.0f);
            r |= qmat(l, NM("attn.indexer.wq_b.weight"), (int64_t)c->idx_heads * c->idx_head_dim, c->q_lora, q8);
            r |= mat(l, NM("attn.indexer.weights_proj.weight"), c->idx_heads, D);
        }
        r |= qmat(l, NM("ffn.gate.weight"), c->n_experts, D, f[C_ROUTER]);
        if (i < c->n_layers && c->hash_layer[i]) r |= add(l, NM("ffn.gate.tid2eid"), DT_I32, c->vocab, c->n_active, 0, 0);
        else r |= add(l, NM("ffn.gate.bias"), DT_F32, c->n_experts, 0, 0.01f, 0);
        int q4 = f[C_EXPERT], E = c->n_experts;
        if (x->gguf) {
            r |= qmat_n(l, NM(GGUF_EXPERTS_GATE), c->moe_inter, D, q4, E);
            r |= qmat_n(l, NM(GGUF_EXPERTS_DOWN), D, c->moe_inter, q4, E);
            r |= qmat_n(l, NM(GGUF_EXPERTS_UP), c->moe_inter, D, q4, E);
        }
        for (int e = 0; e < E && !x->gguf; e++) {
            snprintf(n, sizeof n, "%sffn.experts.%d.w1.weight", pre, e);
            r |= qmat(l, n, c->moe_inter, D, q4);
            snprintf(n, sizeof n, "%sffn.experts.%d.w2.weight", pre, e);
            r |= qmat(l, n, D, c->moe_inter, q4);
            snprintf(n, sizeof n, "%sffn.experts.%d.w3.weight", pre, e);
            r |= qmat(l, n, c->moe_inter, D, q4);
        }
        r |= qmat(l, NM("ffn.shared_experts.w1.weight"), c->moe_inter, D, q8);
        r |= qmat(l, NM("ffn.shared_experts.w2.weight"), D, c->moe_inter, q8);
        r |= qmat(l, NM("ffn.shared_experts.w3.weight"), c->moe_inter, D, q8);
#undef NM
    }
#undef mat
#undef qmat
    return r;
}

/* Bytes of tensor t's data. */
static uint64_t syn_bytes(const syn_tensor *t)
{
    if (t->gg >= 0) return (uint64_t)(t->n_exp * t->d0 * wformat_row_bytes((dsv4_wformat)t->gg, t->d1));
    return (uint64_t)t->d0 * (uint64_t)(t->d1 ? t->d1 : 1) * (uint64_t)dtype_size(t->dt);
}

/* Counter-based random numbers: value i of tensor k depends on (k, i) only,
 * so the image is the same whatever the thread count. */
static uint64_t mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

typedef struct {
    const syn_list *l;
    const dsv4_config *c;
    uint8_t *data;
} fill_job;

static void fill_tensors(void *ctx, int64_t k0, int64_t k1, int tid)
{
    (void)tid;
    fill_job *j = ctx;
    for (int64_t k = k0; k < k1; k++) {
        const syn_tensor *t = &j->l->t[k];
        int64_t n = t->d0 * (t->d1 ? t->d1 : 1);
        uint8_t *p = j->data + t->off;
        if (t->dt == DT_I32) { /* tid2eid: distinct experts per token */
            int32_t *v = (int32_t *)p;
            int K = j->c->n_active, E = j->c->n_experts;
            for (int64_t r = 0; r < t->d0; r++) {
                int first = (int)(mix64((uint64_t)r) % (uint64_t)E);
                for (int q = 0; q < K; q++) v[r * K + q] = (first + q) % E;
            }
            continue;
        }
        if (t->dt == DT_F8_E8M0) { /* a scale grid: 2^exp everywhere */
            memset(p, t->exp + 127, (size_t)n);
            continue;
        }
        if (t->gg >= 0) { /* GGUF blocks */
            int bb = wformat_info((dsv4_wformat)t->gg)->block_bytes;
            ggml_random_blocks(wformat_ggml_type((dsv4_wformat)t->gg), mix64((uint64_t)k), t->scale,
                               (int64_t)(syn_bytes(t) / (uint64_t)bb), p);
            continue;
        }
        float inv = ldexpf(1.0f, -t->exp);
        for (int64_t i = 0; i < n; i++) {
            uint64_t h = mix64(((uint64_t)k << 40) ^ (uint64_t)i);
            float u = (float)((h >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f; /* [-1, 1) */
            float v = t->center + t->scale * u;
            if (t->dt == DT_F32) memcpy(p + 4 * i, &v, 4);
            else if (t->dt == DT_F8_E4M3) p[i] = f32_to_e4m3(v * inv);
            else if (t->dt == DT_I8) p[i] = (uint8_t)h; /* two uniform E2M1 codes */
            else { uint16_t b = f32_to_bf16(v); memcpy(p + 2 * i, &b, 2); }
        }
    }
}

/* Flash-0731's DSpark keys (docs/DSPARK.md §2); its target layers are the
 * last three of 43, here the last three of L (all of them when L < 3);
 * num_nextn_predict_layers stays 1 as in the release. Empty without the
 * drafter. */
static void dspark_keys(int dspark, int L, char *out, size_t len)
{
    out[0] = 0;
    if (!dspark) return;
    char ids[32] = "", *p = ids;
    int first = L > SYN_DSPARK_STAGES ? L - SYN_DSPARK_STAGES : 0;
    for (int i = first; i < L; i++) p += sprintf(p, "%s%d", i > first ? "," : "", i);
    snprintf(out, len, ",\"dspark_block_size\":5,\"dspark_target_layer_ids\":[%s],\"dspark_markov_rank\":256,"
             "\"dspark_noise_token_id\":128799,\"dspark_markov_head_type\":\"vanilla\",\"dspark_window_size\":128",
             ids);
}

static dsv4_status synthetic_config(const char *preset, int layers, int experts, int quant, int dspark, dsv4_config *c)
{
    int flash = !strcmp(preset, "flash"), pro = !strcmp(preset, "pro");
    if (!flash && !pro) return dsv4_fail(DSV4_ERR_ARG, "unknown synthetic preset '%s' (flash or pro)", preset);
    int L = layers > 0 ? layers : (flash ? 43 : 61), E = experts > 0 ? experts : (flash ? 256 : 384);
    if (L > DSV4_MAX_LAYERS) return dsv4_fail(DSV4_ERR_ARG, "--layers %d is above %d", L, DSV4_MAX_LAYERS);
    if (E < 6) return dsv4_fail(DSV4_ERR_ARG, "--experts must be at least 6 (top-6 routing)");
    /* the real per-layer pattern, cut to L layers, plus a trailing 0 per
     * drafter block (SWA-only: the MTP layer, or each DSpark stage) */
    char ratios[8 * DSV4_MAX_LAYERS + 16] = "", *p = ratios, ds[320];
    for (int i = 0; i < L + (dspark ? SYN_DSPARK_STAGES : 1); i++) {
        int r = i >= L ? 0 : i < 2 ? (flash ? 0 : 128) : (i % 2 == 0 ? 4 : 128);
        p += sprintf(p, "%s%d", i ? "," : "", r);
    }
    dspark_keys(dspark, L, ds, sizeof ds);
    char json[9000];
    snprintf(json, sizeof json,
             "{\"vocab_size\":129280,\"hidden_size\":%d,\"num_hidden_layers\":%d,\"num_attention_heads\":%d,"
             "\"num_key_value_heads\":1,\"head_dim\":512,\"qk_rope_head_dim\":64,\"q_lora_rank\":%d,"
             "\"o_groups\":%d,\"o_lora_rank\":1024,\"sliding_window\":128,\"compress_ratios\":[%s],"
             "\"compress_rope_theta\":160000,\"rope_theta\":10000,\"rope_scaling\":{\"type\":\"yarn\",\"factor\":16,"
             "\"original_max_position_embeddings\":65536,\"beta_fast\":32,\"beta_slow\":1},\"index_n_heads\":64,"
             "\"index_head_dim\":128,\"index_topk\":%d,\"n_routed_experts\":%d,\"num_experts_per_tok\":6,"
             "\"n_shared_experts\":1,\"moe_intermediate_size\":%d,\"num_hash_layers\":3,"
             "\"scoring_func\":\"sqrtsoftplus\",\"routed_scaling_factor\":%s,\"swiglu_limit\":10.0,\"hc_mult\":4,"
             "\"hc_sinkhorn_iters\":20,\"hc_eps\":1e-6,\"rms_norm_eps\":1e-6,\"num_nextn_predict_layers\":1,"
             "\"max_position_embeddings\":1048576,\"bos_token_id\":0,\"eos_token_id\":1%s%s}",
             flash ? 4096 : 7168, L, flash ? 64 : 128, flash ? 1024 : 1536, flash ? 8 : 16, ratios,
             flash ? 512 : 1024, E, flash ? 2048 : 3072, flash ? "1.5" : "2.5",
             quant ? ",\"quantization_config\":{\"quant_method\":\"fp8\",\"fmt\":\"e4m3\",\"scale_fmt\":\"ue8m0\","
                     "\"weight_block_size\":[128,128]},\"expert_dtype\":\"fp4\"" : "", ds);
    return config_parse(json, strlen(json), "synthetic config", c);
}

/* The safetensors image: header {"name":{"dtype","shape","data_offsets"}},
 * data 8-byte aligned per tensor (the loader allows gaps); sets each
 * tensor's offset and *data to the data area. */
static dsv4_status st_image(syn_list *l, void **image, size_t *image_len, uint8_t **data)
{
    size_t hcap = (size_t)l->n * 160 + 64, hlen = 0;
    char *hdr = malloc(hcap);
    uint64_t off = 0;
    if (!hdr) return dsv4_fail(DSV4_ERR_NOMEM, "out of memory");
    hdr[hlen++] = '{';
    for (int i = 0; i < l->n; i++) {
        syn_tensor *t = &l->t[i];
        uint64_t nb = syn_bytes(t);
        off = (off + 7) & ~(uint64_t)7;
        t->off = off;
        char shape[64];
        if (t->d1) snprintf(shape, sizeof shape, "%lld,%lld", (long long)t->d0, (long long)t->d1);
        else snprintf(shape, sizeof shape, "%lld", (long long)t->d0);
        hlen += (size_t)snprintf(hdr + hlen, hcap - hlen, "%s\"%s\":{\"dtype\":\"%s\",\"shape\":[%s],\"data_offsets\":[%llu,%llu]}",
                                 i ? "," : "", t->name, dtype_name(t->dt), shape, (unsigned long long)off,
                                 (unsigned long long)(off + nb));
        off += nb;
    }
    hdr[hlen++] = '}';
    while (hlen % 8) hdr[hlen++] = ' ';
    size_t total = 8 + hlen + (size_t)off;
    uint8_t *img = malloc(total);
    if (!img) {
        free(hdr);
        return dsv4_fail(DSV4_ERR_NOMEM, "out of memory for a %.1f GiB synthetic checkpoint", total / 1073741824.0);
    }
    uint64_t hl = hlen;
    memcpy(img, &hl, 8); /* little-endian hosts only, like the rest of the loader */
    memcpy(img + 8, hdr, hlen);
    free(hdr);
    *image = img;
    *image_len = total;
    *data = img + 8 + hlen;
    return DSV4_OK;
}

/* The GGUF image: the config as llama.cpp's metadata, the tensors under
 * their GGUF names (dims innermost first; merged experts [E, rows, cols];
 * the MTP head as block n_layers). */
static dsv4_status gguf_image(const dsv4_config *c, syn_list *l, void **image, size_t *image_len, uint8_t **data)
{
    gguf_writer w = {0};
    dsv4_status st = config_to_gguf(c, c->n_mtp, &w);
    for (int i = 0; i < l->n && !st; i++) {
        syn_tensor *t = &l->t[i];
        char pre[32] = "", name[128];
        const char *rest = t->name;
        int layer, len = 0; /* the prefix: "layers.L." or "mtp.0." */
        if (!strncmp(t->name, "mtp.0.", 6)) len = 6;
        else if (sscanf(t->name, "layers.%d.%n", &layer, &len) != 1) len = 0;
        if (len > 0) {
            snprintf(pre, sizeof pre, "%.*s", len, t->name);
            rest = t->name + len;
        }
        if (!gguf_spelling(pre, rest, c->n_layers, name, sizeof name)) {
            st = dsv4_fail(DSV4_ERR_UNSUPPORTED, "synthetic GGUF: no GGUF name for '%s'", t->name);
            break;
        }
        uint32_t type = t->gg >= 0 ? wformat_ggml_type((dsv4_wformat)t->gg)
                        : t->dt == DT_F32 ? GGML_F32 : t->dt == DT_BF16 ? GGML_BF16 : GGML_I32;
        int64_t ne[3] = {t->d1 ? t->d1 : t->d0, t->d0, t->n_exp};
        t->off = gw_tensor(&w, name, t->n_exp > 1 ? 3 : t->d1 ? 2 : 1, ne, type, syn_bytes(t));
    }
    if (st) {
        gw_discard(&w);
        return st;
    }
    return gw_finish(&w, image, image_len, data);
}

dsv4_status model_synthetic_image(const char *preset, int layers, int experts, const char *weights,
                                  const char *drafter, dsv4_config *cfg, void **image, size_t *image_len, int *is_gguf)
{
    const syn_mix *x = NULL;
    for (size_t i = 0; i < sizeof k_mixes / sizeof k_mixes[0] && !x; i++)
        if (!strcmp(weights ? weights : "fp8-fp4", k_mixes[i].name)) x = &k_mixes[i];
    if (!x) return dsv4_fail(DSV4_ERR_ARG, "unknown synthetic weight format '%s' (fp8-fp4, bf16 or gguf-iq3_xxs)", weights);
    int dspark = drafter && !strcmp(drafter, "dspark");
    if (drafter && !dspark && strcmp(drafter, "mtp"))
        return dsv4_fail(DSV4_ERR_ARG, "unknown synthetic drafter '%s' (mtp or dspark)", drafter);
    if (dspark && x->gguf)
        return dsv4_fail(DSV4_ERR_UNSUPPORTED, "synthetic checkpoint: a DSpark drafter is not read from GGUF, so the "
                         "%s mix cannot have one (fp8-fp4 and bf16 can)", x->name);
    dsv4_status st = synthetic_config(preset, layers, experts, x->quant_config, dspark, cfg);
    if (st) return st;
    syn_list l = {0};
    if (build_list(cfg, x, dspark ? SYN_DSPARK_STAGES : 1, &l)) {
        free(l.t);
        return dsv4_fail(DSV4_ERR_NOMEM, "out of memory");
    }
    uint8_t *data = NULL;
    st = x->gguf ? gguf_image(cfg, &l, image, image_len, &data) : st_image(&l, image, image_len, &data);
    if (st) { free(l.t); return st; }
    fill_job j = {&l, cfg, data};
    dsv4_pool *pool = pool_new(0);
    pool_for(pool, l.n, 1, fill_tensors, &j);
    pool_free(pool);
    free(l.t);
    *is_gguf = x->gguf;
    return DSV4_OK;
}
