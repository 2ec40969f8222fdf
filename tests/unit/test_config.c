/* config.json parsing: the official DeepSeek spelling and the transformers
 * spelling (the tests/data files named ..._transformers.json were written by
 * DeepseekV4Config.save_pretrained, transformers 5.17, from the matching
 * ..._official.json) must give the same dsv4_config; defaults follow
 * DeepseekV4Config; every bad value is refused naming its key. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/ggml_quant.h"
#include "model/config.h"
#include "model/config_gguf.h"
#include "model/model.h"
#include "test.h"

static const char *k_path = "test/config.json";

static dsv4_status parse_file(const char *path, dsv4_config *c)
{
    size_t len;
    char *text = test_read_file(path, &len);
    if (!text) {
        printf("cannot read %s (run from the repository root)\n", path);
        return DSV4_ERR_IO;
    }
    dsv4_status st = config_parse(text, len, path, c);
    free(text);
    return st;
}

static dsv4_status parse_str(const char *json, dsv4_config *c)
{
    return config_parse(json, strlen(json), k_path, c);
}

static int same_rope(const dsv4_rope_params *a, const dsv4_rope_params *b)
{
    return a->theta == b->theta && a->yarn == b->yarn && a->factor == b->factor &&
           a->orig_max_pos == b->orig_max_pos && a->beta_fast == b->beta_fast &&
           a->beta_slow == b->beta_slow;
}

/* Field-by-field equality (padding bytes make memcmp unreliable). */
static void check_same(const dsv4_config *a, const dsv4_config *b)
{
#define EQ(f) CHECKF(a->f == b->f, "%s differs: %.17g vs %.17g", #f, (double)a->f, (double)b->f)
    EQ(vocab); EQ(dim); EQ(n_layers); EQ(n_heads); EQ(head_dim); EQ(rope_dim); EQ(q_lora);
    EQ(o_groups); EQ(o_lora); EQ(window); EQ(mtp_attn_kind); EQ(ratio_csa); EQ(ratio_hca);
    EQ(idx_heads); EQ(idx_head_dim); EQ(idx_topk); EQ(n_experts); EQ(n_active); EQ(n_shared);
    EQ(moe_inter); EQ(score_func); EQ(route_scale); EQ(swiglu_limit); EQ(hc_mult); EQ(hc_iters);
    EQ(hc_eps); EQ(norm_eps); EQ(n_mtp); EQ(weight_format); EQ(expert_format); EQ(quant_blk_r); EQ(quant_blk_c); EQ(max_pos);
    EQ(bos_id); EQ(eos_id);
#undef EQ
    for (int l = 0; l < a->n_layers && l < DSV4_MAX_LAYERS; l++) {
        CHECKF(a->attn_kind[l] == b->attn_kind[l], "attn_kind[%d] differs", l);
        CHECKF(a->hash_layer[l] == b->hash_layer[l], "hash_layer[%d] differs", l);
    }
    CHECK(same_rope(&a->rope_main, &b->rope_main));
    CHECK(same_rope(&a->rope_compress, &b->rope_compress));
}

/* V4-Flash facts (spec section 1): 43 layers, 0-1 SWA, then CSA on even and
 * HCA on odd layers, hash routing on 0-2, YaRN only on the compress rope. */
static void check_flash(const dsv4_config *c)
{
    CHECK(c->vocab == 129280 && c->dim == 4096 && c->n_layers == 43 && c->n_heads == 64);
    CHECK(c->head_dim == 512 && c->rope_dim == 64 && c->q_lora == 1024);
    CHECK(c->o_groups == 8 && c->o_lora == 1024 && c->window == 128);
    int n[3] = {0};
    for (int l = 0; l < 43; l++) {
        int want = l < 2 ? ATTN_SWA : l % 2 == 0 ? ATTN_CSA : ATTN_HCA;
        CHECKF(c->attn_kind[l] == want, "layer %d kind %d", l, c->attn_kind[l]);
        CHECKF(c->hash_layer[l] == (l < 3), "layer %d hash %d", l, c->hash_layer[l]);
        n[c->attn_kind[l]]++;
    }
    CHECK(n[ATTN_SWA] == 2 && n[ATTN_CSA] == 21 && n[ATTN_HCA] == 20);
    CHECK(c->mtp_attn_kind == ATTN_SWA && c->n_mtp == 1);
    CHECK(c->ratio_csa == 4 && c->ratio_hca == 128);
    CHECK(config_ratio(c, 0) == 0 && config_ratio(c, 2) == 4 && config_ratio(c, 3) == 128);
    CHECK(config_ratio(c, 42) == 4 && config_ratio(c, 43) == 0 && config_ratio(c, -1) == 0);
    CHECK(c->idx_heads == 64 && c->idx_head_dim == 128 && c->idx_topk == 512);
    CHECK(c->n_experts == 256 && c->n_active == 6 && c->n_shared == 1 && c->moe_inter == 2048);
    CHECK(c->score_func == SCORE_SQRTSOFTPLUS && c->route_scale == 1.5);
    CHECK(c->swiglu_limit == 10.0 && c->hc_mult == 4 && c->hc_iters == 20);
    CHECK(c->hc_eps == 1e-6 && c->norm_eps == 1e-6);
    CHECK(c->rope_main.theta == 10000 && !c->rope_main.yarn);
    CHECK(c->rope_compress.theta == 160000 && c->rope_compress.yarn);
    CHECK(c->rope_compress.factor == 16 && c->rope_compress.orig_max_pos == 65536);
    CHECK(c->rope_compress.beta_fast == 32 && c->rope_compress.beta_slow == 1);
    CHECK(c->weight_format == WFMT_FP8 && c->expert_format == WFMT_FP4);
    CHECK(c->quant_blk_r == 128 && c->quant_blk_c == 128);
    CHECK(c->max_pos == 1048576 && c->bos_id == 0 && c->eos_id == 1);
}

static void test_flash_both_spellings(void)
{
    static dsv4_config a, b;
    dsv4_status st = parse_file("tests/data/config_flash_official.json", &a);
    CHECKF(st == DSV4_OK, "%s", dsv4_last_error());
    if (st) return;
    check_flash(&a);
    st = parse_file("tests/data/config_flash_transformers.json", &b);
    CHECKF(st == DSV4_OK, "%s", dsv4_last_error());
    if (st) return;
    check_flash(&b);
    check_same(&a, &b);
}

/* A small model with no default value left: rates 2/8, hash layers 0-1. */
static void check_tiny(const dsv4_config *c)
{
    CHECK(c->vocab == 512 && c->dim == 64 && c->n_layers == 5 && c->n_heads == 4);
    CHECK(c->head_dim == 32 && c->rope_dim == 8 && c->q_lora == 48 && c->o_groups == 2);
    CHECK(c->o_lora == 16 && c->window == 8);
    static const int kinds[5] = {ATTN_CSA, ATTN_HCA, ATTN_SWA, ATTN_CSA, ATTN_HCA};
    static const int ratios[5] = {2, 8, 0, 2, 8};
    for (int l = 0; l < 5; l++) {
        CHECKF(c->attn_kind[l] == kinds[l], "layer %d kind %d", l, c->attn_kind[l]);
        CHECK(config_ratio(c, l) == ratios[l]);
        CHECK(c->hash_layer[l] == (l < 2));
    }
    CHECK(c->ratio_csa == 2 && c->ratio_hca == 8 && c->mtp_attn_kind == ATTN_SWA);
    CHECK(c->idx_heads == 4 && c->idx_head_dim == 16 && c->idx_topk == 3);
    CHECK(c->n_experts == 8 && c->n_active == 2 && c->n_shared == 1 && c->moe_inter == 32);
    CHECK(c->score_func == SCORE_SIGMOID && c->route_scale == 2.5 && c->swiglu_limit == 7.0);
    CHECK(c->hc_mult == 2 && c->hc_iters == 5 && c->hc_eps == 1e-5 && c->norm_eps == 1e-5);
    CHECK(c->rope_main.theta == 5000 && !c->rope_main.yarn);
    CHECK(c->rope_compress.theta == 40000 && c->rope_compress.yarn);
    CHECK(c->rope_compress.factor == 4 && c->rope_compress.orig_max_pos == 64);
    CHECK(c->rope_compress.beta_fast == 16 && c->rope_compress.beta_slow == 2);
    CHECK(c->weight_format == WFMT_PLAIN && c->expert_format == WFMT_PLAIN);
    CHECK(c->max_pos == 256 && c->bos_id == 3 && c->eos_id == 7 && c->n_mtp == 1);
}

static void test_tiny_both_spellings(void)
{
    static dsv4_config a, b;
    dsv4_status st = parse_file("tests/data/config_tiny_official.json", &a);
    CHECKF(st == DSV4_OK, "%s", dsv4_last_error());
    if (st) return;
    check_tiny(&a);
    st = parse_file("tests/data/config_tiny_transformers.json", &b);
    CHECKF(st == DSV4_OK, "%s", dsv4_last_error());
    if (st) return;
    check_tiny(&b);
    check_same(&a, &b);
}

/* Values of DeepseekV4Config() with no arguments; layer kinds are its default
 * schedule: HCA, HCA, then HCA/CSA alternating starting with HCA. */
static void test_defaults(void)
{
    static dsv4_config c;
    dsv4_status st = parse_str("{}", &c);
    CHECKF(st == DSV4_OK, "%s", dsv4_last_error());
    CHECK(c.vocab == 129280 && c.dim == 4096 && c.n_layers == 43 && c.n_heads == 64);
    CHECK(c.head_dim == 512 && c.rope_dim == 64 && c.q_lora == 1024 && c.o_groups == 8);
    CHECK(c.o_lora == 1024 && c.window == 128 && c.ratio_csa == 4 && c.ratio_hca == 128);
    CHECK(c.attn_kind[0] == ATTN_HCA && c.attn_kind[1] == ATTN_HCA && c.attn_kind[2] == ATTN_HCA);
    CHECK(c.attn_kind[3] == ATTN_CSA && c.attn_kind[4] == ATTN_HCA && c.attn_kind[42] == ATTN_HCA);
    CHECK(c.attn_kind[41] == ATTN_CSA && c.mtp_attn_kind == ATTN_SWA);
    CHECK(c.hash_layer[2] == 1 && c.hash_layer[3] == 0 && c.hash_layer[0] == 1);
    CHECK(c.idx_heads == 64 && c.idx_head_dim == 128 && c.idx_topk == 512);
    CHECK(c.n_experts == 256 && c.n_active == 6 && c.n_shared == 1 && c.moe_inter == 2048);
    CHECK(c.score_func == SCORE_SQRTSOFTPLUS && c.route_scale == 1.5 && c.swiglu_limit == 10);
    CHECK(c.hc_mult == 4 && c.hc_iters == 20 && c.hc_eps == 1e-6 && c.norm_eps == 1e-6);
    CHECK(c.rope_main.theta == 10000 && !c.rope_main.yarn);
    CHECK(c.rope_compress.theta == 160000 && !c.rope_compress.yarn);
    CHECK(c.n_mtp == 1 && c.weight_format == WFMT_PLAIN && c.expert_format == WFMT_PLAIN);
    CHECK(c.max_pos == 1048576 && c.bos_id == 0 && c.eos_id == 1);

    /* transformers: num_hash_layers beyond the layer count covers all layers;
     * partial_rotary_factor alone sets the rope dimension. */
    st = parse_str("{\"num_hidden_layers\":2,\"num_hash_layers\":5,\"head_dim\":64,"
                   "\"partial_rotary_factor\":0.25,\"index_head_dim\":16}", &c);
    CHECKF(st == DSV4_OK, "%s", dsv4_last_error());
    CHECK(c.hash_layer[0] && c.hash_layer[1] && c.rope_dim == 16);
    CHECK(c.attn_kind[0] == ATTN_HCA && c.attn_kind[1] == ATTN_HCA);
    /* default rope dimension is head_dim / 8 */
    st = parse_str("{\"head_dim\":128}", &c);
    CHECK(st == DSV4_OK && c.rope_dim == 16);
}

static void test_rope_spellings(void)
{
    static dsv4_config a, b, c, d;
    const char *yarn = "\"rope_type\":\"yarn\",\"factor\":8,\"original_max_position_embeddings\":4096";
    char buf[512];
    snprintf(buf, sizeof buf, "{\"rope_scaling\":{%s}, \"rope_theta\":777}", yarn);
    CHECKF(parse_str(buf, &a) == DSV4_OK, "%s", dsv4_last_error());
    /* flat rope_parameters = rope_scaling; a rope_theta inside is ignored */
    snprintf(buf, sizeof buf, "{\"rope_parameters\":{%s,\"rope_theta\":5}, \"rope_theta\":777}",
             yarn);
    CHECKF(parse_str(buf, &b) == DSV4_OK, "%s", dsv4_last_error());
    snprintf(buf, sizeof buf,
             "{\"rope_parameters\":{\"main\":{\"rope_type\":\"default\",\"rope_theta\":777},"
             "\"compress\":{%s,\"attention_factor\":1.0}}}",
             yarn);
    CHECKF(parse_str(buf, &c) == DSV4_OK, "%s", dsv4_last_error());
    for (const dsv4_config *x = &a; x; x = x == &a ? &b : x == &b ? &c : NULL) {
        CHECK(x->rope_main.theta == 777 && !x->rope_main.yarn);
        CHECK(x->rope_compress.theta == 160000 && x->rope_compress.yarn);
        CHECK(x->rope_compress.factor == 8 && x->rope_compress.orig_max_pos == 4096);
        CHECK(x->rope_compress.beta_fast == 32 && x->rope_compress.beta_slow == 1);
    }
    /* a non-yarn rope_scaling leaves both ropes plain */
    CHECK(parse_str("{\"rope_scaling\":{\"type\":\"default\"}}", &d) == DSV4_OK);
    CHECK(!d.rope_compress.yarn && d.rope_compress.theta == 160000);
    /* nested thetas are taken from the sub-dicts */
    CHECK(parse_str("{\"rope_parameters\":{\"main\":{\"rope_theta\":3},\"compress\":"
                    "{\"rope_theta\":4}}}", &d) == DSV4_OK);
    CHECK(d.rope_main.theta == 3 && d.rope_compress.theta == 4 && !d.rope_compress.yarn);
}

static void test_token_ids(void)
{
    static dsv4_config c;
    CHECK(parse_str("{\"bos_token_id\":null,\"eos_token_id\":[9,2]}", &c) == DSV4_OK);
    CHECK(c.bos_id == -1 && c.eos_id == 9);
    CHECK(parse_str("{\"bos_token_id\":5,\"eos_token_id\":null}", &c) == DSV4_OK);
    CHECK(c.bos_id == 5 && c.eos_id == -1);
}

typedef struct {
    const char *json;
    dsv4_status want;
    const char *frag; /* the key the message must name */
} bad_case;

static const bad_case k_bad[] = {
    {"{\"hidden_size\": -1}", DSV4_ERR_CONFIG, "hidden_size"},
    {"{\"hidden_size\": \"4096\"}", DSV4_ERR_CONFIG, "hidden_size"},
    {"{\"hidden_size\": 4096.5}", DSV4_ERR_CONFIG, "hidden_size"},
    {"{\"hidden_size\": 1e300}", DSV4_ERR_CONFIG, "hidden_size"},
    {"{\"vocab_size\": true}", DSV4_ERR_CONFIG, "vocab_size"},
    {"{\"num_hidden_layers\": 0}", DSV4_ERR_CONFIG, "num_hidden_layers"},
    {"{\"num_hidden_layers\": 300}", DSV4_ERR_CONFIG, "num_hidden_layers"},
    {"{\"head_dim\": 33, \"qk_rope_head_dim\": 8, \"index_head_dim\": 16}", DSV4_ERR_CONFIG,
     "head_dim: must be even"},
    {"{\"qk_rope_head_dim\": 7}", DSV4_ERR_CONFIG, "qk_rope_head_dim"},
    {"{\"qk_rope_head_dim\": 1024}", DSV4_ERR_CONFIG, "qk_rope_head_dim"},
    {"{\"qk_rope_head_dim\": 64, \"partial_rotary_factor\": 0.25}", DSV4_ERR_CONFIG,
     "qk_rope_head_dim"},
    {"{\"partial_rotary_factor\": 2}", DSV4_ERR_CONFIG, "partial_rotary_factor"},
    {"{\"partial_rotary_factor\": 0}", DSV4_ERR_CONFIG, "partial_rotary_factor"},
    {"{\"index_head_dim\": 32}", DSV4_ERR_CONFIG, "index_head_dim"},
    {"{\"o_groups\": 7}", DSV4_ERR_CONFIG, "o_groups"},
    {"{\"num_experts_per_tok\": 300}", DSV4_ERR_CONFIG, "num_experts_per_tok"},
    {"{\"n_shared_experts\": -1}", DSV4_ERR_CONFIG, "n_shared_experts"},
    {"{\"hc_mult\": 0}", DSV4_ERR_CONFIG, "hc_mult"},
    {"{\"hc_sinkhorn_iters\": 0}", DSV4_ERR_CONFIG, "hc_sinkhorn_iters"},
    {"{\"sliding_window\": 0}", DSV4_ERR_CONFIG, "sliding_window"},
    {"{\"rms_norm_eps\": 0}", DSV4_ERR_CONFIG, "rms_norm_eps"},
    {"{\"hc_eps\": -1e-6}", DSV4_ERR_CONFIG, "hc_eps"},
    {"{\"routed_scaling_factor\": \"1.5\"}", DSV4_ERR_CONFIG, "routed_scaling_factor"},
    {"{\"rope_theta\": 0}", DSV4_ERR_CONFIG, "rope_theta"},
    {"{\"scoring_func\": \"relu\"}", DSV4_ERR_CONFIG, "scoring_func"},
    {"{\"scoring_func\": 1}", DSV4_ERR_CONFIG, "scoring_func"},
    {"{\"num_key_value_heads\": 8}", DSV4_ERR_CONFIG, "num_key_value_heads"},
    {"{\"model_type\": \"llama\"}", DSV4_ERR_CONFIG, "model_type"},
    {"{\"hidden_act\": \"gelu\"}", DSV4_ERR_UNSUPPORTED, "hidden_act"},
    {"{\"tie_word_embeddings\": true}", DSV4_ERR_UNSUPPORTED, "tie_word_embeddings"},
    {"{\"tie_word_embeddings\": \"no\"}", DSV4_ERR_CONFIG, "tie_word_embeddings"},
    {"{\"attention_bias\": true}", DSV4_ERR_UNSUPPORTED, "attention_bias"},
    {"{\"eos_token_id\": []}", DSV4_ERR_CONFIG, "eos_token_id"},
    {"{\"eos_token_id\": [1, \"a\"]}", DSV4_ERR_CONFIG, "eos_token_id"},
    {"{\"bos_token_id\": -3}", DSV4_ERR_CONFIG, "bos_token_id"},
    {"{\"hidden_size\": 1, \"hidden_size\": 2}", DSV4_ERR_CONFIG, "hidden_size: duplicate"},
    /* per-layer schedules */
    {"{\"num_hidden_layers\":3,\"layer_types\":[\"sliding_attention\",\"x\",\"sliding_attention\"]}",
     DSV4_ERR_CONFIG, "layer_types[1]"},
    {"{\"num_hidden_layers\":3,\"layer_types\":[\"sliding_attention\"]}", DSV4_ERR_CONFIG,
     "layer_types"},
    {"{\"num_hidden_layers\":2,\"layer_types\":\"sliding_attention\"}", DSV4_ERR_CONFIG,
     "layer_types"},
    {"{\"num_hidden_layers\":3,\"compress_ratios\":[0,4]}", DSV4_ERR_CONFIG, "compress_ratios"},
    {"{\"num_hidden_layers\":2,\"compress_ratios\":[0,4,4,0]}", DSV4_ERR_CONFIG,
     "compress_ratios"},
    {"{\"num_hidden_layers\":2,\"compress_ratios\":[5,4]}", DSV4_ERR_CONFIG, "compress_ratios[0]"},
    {"{\"num_hidden_layers\":2,\"compress_ratios\":[0,-4]}", DSV4_ERR_CONFIG, "compress_ratios[1]"},
    {"{\"num_hidden_layers\":2,\"compress_ratios\":[0,4,0],"
     "\"layer_types\":[\"sliding_attention\",\"heavily_compressed_attention\"]}",
     DSV4_ERR_CONFIG, "compress_ratios[1]"},
    {"{\"num_hidden_layers\":2,\"mlp_layer_types\":[\"moe\",\"dense\"]}", DSV4_ERR_CONFIG,
     "mlp_layer_types[1]"},
    {"{\"num_hidden_layers\":2,\"mlp_layer_types\":[\"moe\",\"moe\"],\"num_hash_layers\":1}",
     DSV4_ERR_CONFIG, "mlp_layer_types[0]"},
    {"{\"num_hash_layers\":-1}", DSV4_ERR_CONFIG, "num_hash_layers"},
    {"{\"compress_rates\":{\"foo\":4}}", DSV4_ERR_CONFIG, "compress_rates.foo"},
    {"{\"compress_rates\":{\"compressed_sparse_attention\":0}}", DSV4_ERR_CONFIG,
     "compress_rates.compressed_sparse_attention"},
    {"{\"compress_rates\":[4,128]}", DSV4_ERR_CONFIG, "compress_rates"},
    {"{\"compress_rate_csa\":128}", DSV4_ERR_CONFIG, "compress_rates"},
    {"{\"compress_rate_csa\":8,\"compress_rates\":{\"compressed_sparse_attention\":4}}",
     DSV4_ERR_CONFIG, "compress_rate_csa"},
    /* rope */
    {"{\"rope_scaling\":{\"type\":\"yarn\",\"original_max_position_embeddings\":4}}",
     DSV4_ERR_CONFIG, "rope_scaling.factor"},
    {"{\"rope_scaling\":{\"type\":\"yarn\",\"factor\":4}}", DSV4_ERR_CONFIG,
     "rope_scaling.original_max_position_embeddings"},
    {"{\"rope_scaling\":{\"type\":\"yarn\",\"factor\":0.5,\"original_max_position_embeddings\":4}}",
     DSV4_ERR_CONFIG, "rope_scaling.factor"},
    {"{\"rope_scaling\":{\"type\":\"yarn\",\"factor\":2,\"original_max_position_embeddings\":4,"
     "\"beta_fast\":1,\"beta_slow\":32}}",
     DSV4_ERR_CONFIG, "rope_scaling.beta_fast"},
    {"{\"rope_scaling\":{\"type\":\"yarn\",\"factor\":2,\"original_max_position_embeddings\":4,"
     "\"attention_factor\":1.2}}",
     DSV4_ERR_UNSUPPORTED, "rope_scaling.attention_factor"},
    {"{\"rope_scaling\":{\"type\":\"yarn\",\"factor\":2,\"original_max_position_embeddings\":4,"
     "\"truncate\":false}}",
     DSV4_ERR_UNSUPPORTED, "rope_scaling.truncate"},
    {"{\"rope_scaling\":{\"type\":\"linear\",\"factor\":2}}", DSV4_ERR_UNSUPPORTED,
     "rope_scaling.rope_type"},
    {"{\"rope_scaling\":{\"type\":\"yarn\",\"rope_type\":\"default\"}}", DSV4_ERR_CONFIG,
     "rope_scaling.type"},
    {"{\"rope_scaling\":[1]}", DSV4_ERR_CONFIG, "rope_scaling"},
    {"{\"rope_parameters\":3}", DSV4_ERR_CONFIG, "rope_parameters"},
    {"{\"rope_parameters\":{\"main\":{}}}", DSV4_ERR_CONFIG, "rope_parameters"},
    {"{\"rope_parameters\":{\"rope_type\":\"default\"},\"rope_scaling\":{\"type\":\"yarn\"}}",
     DSV4_ERR_CONFIG, "rope_scaling"},
    {"{\"rope_parameters\":{\"main\":{},\"compress\":{\"rope_type\":\"yarn\",\"factor\":16,"
     "\"original_max_position_embeddings\":65536}}}",
     DSV4_ERR_UNSUPPORTED, "rope_parameters.compress.attention_factor"},
    {"{\"rope_theta\":10000,\"rope_parameters\":{\"main\":{\"rope_theta\":500},\"compress\":{}}}",
     DSV4_ERR_CONFIG, "rope_parameters.main.rope_theta"},
    {"{\"rope_parameters\":{\"main\":{\"partial_rotary_factor\":0.5},\"compress\":{}}}",
     DSV4_ERR_CONFIG, "rope_parameters.main.partial_rotary_factor"},
    {"{\"rope_parameters\":{\"main\":{\"partial_rotary_factor\":1e300},\"compress\":{}}}",
     DSV4_ERR_CONFIG, "rope_parameters.main.partial_rotary_factor"},
    /* weight formats */
    {"{\"quantization_config\":{\"quant_method\":\"gptq\"}}", DSV4_ERR_UNSUPPORTED,
     "quantization_config.quant_method"},
    {"{\"quantization_config\":{\"fmt\":\"e4m3\"}}", DSV4_ERR_CONFIG,
     "quantization_config.quant_method"},
    {"{\"quantization_config\":\"fp8\"}", DSV4_ERR_CONFIG, "quantization_config"},
    {"{\"expert_dtype\":\"int3\"}", DSV4_ERR_CONFIG, "expert_dtype"},
    {"{\"expert_dtype\":\"fp8\"}", DSV4_ERR_CONFIG, "expert_dtype"},
    {"{\"quantization_config\":{\"quant_method\":\"fp8\",\"fmt\":\"e5m2\"}}", DSV4_ERR_UNSUPPORTED,
     "quantization_config.fmt"},
    {"{\"quantization_config\":{\"quant_method\":\"fp8\",\"scale_fmt\":\"fp32\"}}", DSV4_ERR_UNSUPPORTED,
     "quantization_config.scale_fmt"},
    {"{\"quantization_config\":{\"quant_method\":\"fp8\",\"weight_block_size\":[128]}}", DSV4_ERR_CONFIG,
     "quantization_config.weight_block_size"},
    {"{\"quantization_config\":{\"quant_method\":\"fp8\",\"weight_block_size\":[128,0]}}", DSV4_ERR_CONFIG,
     "quantization_config.weight_block_size"},
};

static void test_bad_values(void)
{
    static dsv4_config c;
    for (size_t i = 0; i < sizeof k_bad / sizeof k_bad[0]; i++) {
        dsv4_status st = parse_str(k_bad[i].json, &c);
        const char *m = dsv4_last_error();
        if (getenv("CFG_SHOW")) printf("  %s\n", m);
        CHECKF(st == k_bad[i].want, "%s: got %s (%s)", k_bad[i].json, dsv4_status_name(st), m);
        CHECKF(strstr(m, k_bad[i].frag) && strncmp(m, k_path, strlen(k_path)) == 0,
               "%s: message '%s' does not name %s", k_bad[i].json, m, k_bad[i].frag);
    }
}

/* Issue 8 #6 and #14: values that passed validation yet overflow float in
 * the forward (all-NaN logits), or were accepted and ignored. */
static const struct { const char *json; dsv4_status want; const char *frag; } k_refused[] = {
    {"{\"rope_theta\":1e-50}", DSV4_ERR_CONFIG, "rope_theta: expected a number in [1, 1e+30]"},
    {"{\"compress_rope_theta\":0.5}", DSV4_ERR_CONFIG, "compress_rope_theta"},
    {"{\"hc_eps\":1e39}", DSV4_ERR_CONFIG, "hc_eps: expected a number in [1e-30, 1]"},
    {"{\"rms_norm_eps\":1e39}", DSV4_ERR_CONFIG, "rms_norm_eps"},
    {"{\"routed_scaling_factor\":1e39}", DSV4_ERR_CONFIG, "routed_scaling_factor"},
    {"{\"swiglu_limit\":1e300}", DSV4_ERR_CONFIG, "swiglu_limit"},
    {"{\"rope_scaling\":{\"type\":\"yarn\",\"factor\":1e300,\"original_max_position_embeddings\":4}}",
     DSV4_ERR_CONFIG, "rope_scaling.factor"},
    {"{\"rope_scaling\":{\"type\":\"yarn\",\"factor\":2,\"original_max_position_embeddings\":4,"
     "\"beta_fast\":1e300}}", DSV4_ERR_CONFIG, "rope_scaling.beta_fast"},
    {"{\"n_shared_experts\":2}", DSV4_ERR_UNSUPPORTED, "n_shared_experts: 2 is not supported (only 1)"},
    {"{\"n_shared_experts\":0}", DSV4_ERR_UNSUPPORTED, "n_shared_experts: 0 is not supported"},
    {"{\"vocab_size\":100,\"bos_token_id\":100}", DSV4_ERR_CONFIG, "bos_token_id: expected an integer in [0, 99]"},
    {"{\"vocab_size\":100,\"eos_token_id\":[1,100]}", DSV4_ERR_CONFIG, "eos_token_id"},
    /* sizes of session state beyond the context */
    {"{\"max_position_embeddings\":64,\"sliding_window\":16777216}", DSV4_ERR_CONFIG,
     "sliding_window: 16777216 is longer than max_position_embeddings (64)"},
    {"{\"max_position_embeddings\":64,\"sliding_window\":8}", DSV4_ERR_CONFIG, "compression rate 128 is longer than"},
};

static void test_refused_values(void)
{
    static dsv4_config c;
    for (size_t i = 0; i < sizeof k_refused / sizeof k_refused[0]; i++) {
        dsv4_status st = parse_str(k_refused[i].json, &c);
        const char *m = dsv4_last_error();
        CHECKF(st == k_refused[i].want && strstr(m, k_refused[i].frag), "%s: got %s (%s)", k_refused[i].json,
               dsv4_status_name(st), st ? m : "");
    }
    /* the edges of the ranges load */
    CHECK(parse_str("{\"rope_theta\":1,\"hc_eps\":1,\"vocab_size\":100,\"bos_token_id\":99}", &c) == DSV4_OK);
}

static void test_bad_json(void)
{
    static dsv4_config c;
    CHECK(parse_str("{\"hidden_size\": 12,", &c) == DSV4_ERR_FORMAT);
    CHECKF(strstr(dsv4_last_error(), "test/config.json: invalid JSON near byte 18"), "%s",
           dsv4_last_error());
    CHECK(parse_str("", &c) == DSV4_ERR_FORMAT);
    CHECK(parse_str("{} {}", &c) == DSV4_ERR_FORMAT);
    CHECK(config_parse("{}\0", 3, k_path, &c) == DSV4_ERR_FORMAT);
    CHECK(parse_str("[1]", &c) == DSV4_ERR_CONFIG);
    CHECK(strstr(dsv4_last_error(), "not a JSON object") != NULL);
    /* not NUL-terminated: only len bytes are read */
    CHECK(config_parse("{}xyz", 2, k_path, &c) == DSV4_OK);
}

static void test_load(void)
{
    static dsv4_config c;
    char dir[] = "/tmp/dsv4_cfg_XXXXXX";
    if (!mkdtemp(dir)) { CHECK(0); return; }
    char path[64];
    snprintf(path, sizeof path, "%s/config.json", dir);
    CHECK(config_load(dir, &c) == DSV4_ERR_IO);
    CHECKF(strstr(dsv4_last_error(), path) != NULL, "%s", dsv4_last_error());
    FILE *f = fopen(path, "w");
    fputs("{\"num_hidden_layers\": 4, \"compress_ratios\": [0, 4, 128, 0, 4]}", f);
    fclose(f);
    dsv4_status st = config_load(dir, &c);
    CHECKF(st == DSV4_OK, "%s", dsv4_last_error());
    CHECK(c.n_layers == 4 && c.attn_kind[1] == ATTN_CSA && c.attn_kind[2] == ATTN_HCA);
    CHECK(c.mtp_attn_kind == ATTN_CSA && config_ratio(&c, 4) == 4);
    f = fopen(path, "w");
    fputs("{\"num_hidden_layers\": x}", f);
    fclose(f);
    CHECK(config_load(dir, &c) == DSV4_ERR_FORMAT && strstr(dsv4_last_error(), path));
    unlink(path);
    rmdir(dir);
}

/* config_to_gguf writes what config_from_gguf reads back (the synthetic
 * GGUF checkpoints rely on it): V4-Flash with its MTP block, as llama.cpp's
 * deepseek4 metadata; the CSA layers marked by an indexer tensor, the MTP
 * block by its e_proj (what a file's tensors say). GGUF stores f32. */
static void test_gguf_round_trip(void)
{
    static dsv4_config a, b;
    dsv4_status st = parse_file("tests/data/config_flash_official.json", &a);
    CHECKF(st == DSV4_OK, "%s", dsv4_last_error());
    if (st) return;
    gguf_writer w = {0};
    CHECKF(config_to_gguf(&a, a.n_mtp, &w) == DSV4_OK, "%s", dsv4_last_error());
    char name[64];
    int64_t ne[1] = {8};
    for (int l = 0; l <= a.n_layers; l++) {
        if (config_kind(&a, l) != ATTN_CSA) continue;
        snprintf(name, sizeof name, "blk.%d.indexer.proj.weight", l);
        gw_tensor(&w, name, 1, ne, GGML_F32, 32);
    }
    snprintf(name, sizeof name, "blk.%d.nextn.e_proj.weight", a.n_layers);
    gw_tensor(&w, name, 1, ne, GGML_F32, 32);
    void *img = NULL;
    size_t len = 0;
    uint8_t *data;
    CHECK(gw_finish(&w, &img, &len, &data) == DSV4_OK);
    gguf_file *g = NULL;
    st = img ? gguf_open_memory(img, len, "round trip", &g) : DSV4_ERR_NOMEM;
    CHECKF(st == DSV4_OK, "%s", dsv4_last_error());
    if (!st) st = config_from_gguf(g, &b);
    CHECKF(st == DSV4_OK, "%s", dsv4_last_error());
    if (!st) {
        /* (GCC 12's vectorizer drops the rounding of a.eps = (float)a.eps pairs, so compare, then copy) */
        CHECK(b.hc_eps == (double)(float)a.hc_eps && b.norm_eps == (double)(float)a.norm_eps);
        a.hc_eps = b.hc_eps;
        a.norm_eps = b.norm_eps;
        a.weight_format = a.expert_format = WFMT_PLAIN; /* GGUF formats are per tensor */
        a.quant_blk_r = a.quant_blk_c = 0;
        check_same(&a, &b);
    }
    gguf_close(g);
    free(img);
}

/* Spec §6.2's table for Flash (21 CSA, 20 HCA): 6880 B/token in bf16,
 * 3850.25 B/token FlashMLA-style (584-byte FP8 entries + 132-byte FP8
 * indexer keys); what official-mode sessions hold (the layout they allocate
 * by, model/state_layout.c): the same entries and FP4 indexer keys of
 * 64 + 4 bytes; exact-mode sessions: fp32, twice bf16. Window rings:
 * 43·128·512·2 bytes in bf16. */
static void test_flash_state_sizes(void)
{
    static dsv4_config c;
    CHECK(parse_file("tests/data/config_flash_official.json", &c) == DSV4_OK);
    double pt[STATE_LAYOUTS];
    uint64_t fx[STATE_LAYOUTS];
    for (int k = 0; k < STATE_LAYOUTS; k++) config_state_size(&c, k, &pt[k], &fx[k]);
    CHECK(pt[STATE_BF16] == 6880.0 && pt[STATE_FP32] == 13760.0);
    CHECK(pt[STATE_FLASHMLA] == 3850.25);
    CHECK(pt[STATE_OFFICIAL] == 21 * (584 + 68) / 4.0 + 20 * 584 / 128.0);
    CHECK(fx[STATE_FP32] - fx[STATE_BF16] == 43ull * 128 * 512 * 2);
}

int main(void)
{
    RUN(test_flash_both_spellings);
    RUN(test_tiny_both_spellings);
    RUN(test_defaults);
    RUN(test_rope_spellings);
    RUN(test_token_ids);
    RUN(test_bad_values);
    RUN(test_refused_values);
    RUN(test_bad_json);
    RUN(test_load);
    RUN(test_flash_state_sizes);
    RUN(test_gguf_round_trip);
    TEST_MAIN_END();
}
