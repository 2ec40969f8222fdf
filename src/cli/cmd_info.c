/* dsv4 info: model facts, weight bytes by type, session memory per token
 * (per state layout), and what fits a GPU of a given size (memplan) or a
 * state budget (--memory-gb). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "model/config_gguf.h"
#include "model/memplan.h"
#include "model/model.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: dsv4 info (--model (DIR | FILE.gguf) | --config FILE) [--gpu-gib G] [--context N]\n"
               "                 [--memory-gb G]\n"
               CLI_CACHE_USAGE
               "  --config FILE  only a config.json's facts and session-state sizes (no weights needed)\n"
               "  --gpu-gib G    device memory to plan for, GiB (default 140: one H200)\n"
               "  --context N    also count sessions of N tokens (default: 4096, 32768, 131072, 1048576)\n"
               "  --memory-gb G  the longest context whose session state fits in G GiB, per state layout\n");
}

/* Bytes per token and fixed bytes of every state layout (spec §6.2); with a
 * budget, the longest context whose state fits. The first two are what
 * sessions hold; the others are other implementations' storage. */
static void print_state(const dsv4_config *cf, double budget_gib)
{
    static const char *const name[STATE_LAYOUTS] = {
        "fp32 (--cache exact)", "bf16 (reference implementations)",
        "official (--cache official: FP8 KV, FP4 idx keys)", "FlashMLA FP8 + FP8 idx keys (deployments)"};
    static const int order[STATE_LAYOUTS] = {STATE_FP32, STATE_OFFICIAL, STATE_BF16, STATE_FLASHMLA};
    printf("state layouts:    growing part per token and fixed part\n");
    for (int i = 0; i < STATE_LAYOUTS; i++) {
        int k = order[i];
        double pt;
        uint64_t fixed;
        config_state_size(cf, k, &pt, &fixed);
        printf("  %-50s %9.2f B/token  fixed %8.2f MiB", name[k], pt, (double)fixed / (1 << 20));
        if (budget_gib > 0) {
            double room = budget_gib * 1073741824.0 - (double)fixed;
            printf("  longest context in %g GiB: %.0f tokens", budget_gib, room > 0 ? room / pt : 0.0);
        }
        printf("\n");
    }
}

/* A config.json alone: its facts and state sizes. */
static int info_config(const char *path, double budget)
{
    size_t len;
    char *text = cli_read_file("info", path, (size_t)16 << 20, &len); /* a config.json is a few KB */
    if (!text) return 1;
    static dsv4_config cf;
    dsv4_status st = config_parse(text, len, path, &cf);
    free(text);
    if (st) { cli_report("info", NULL); return 1; }
    static const char *const fmt[] = {"bf16/f32", "fp8 e4m3", "mxfp4"};
    printf("config:           %s\n", path);
    printf("vocab:            %d\n", cf.vocab);
    printf("hidden:           %d, %d layers, window %d, head_dim %d (rope %d), indexer %d x %d\n", cf.dim,
           cf.n_layers, cf.window, cf.head_dim, cf.rope_dim, cf.idx_heads, cf.idx_head_dim);
    printf("weight formats:   dense %s, routed experts %s\n", fmt[cf.weight_format], fmt[cf.expert_format]);
    print_state(&cf, budget);
    return 0;
}

/* Bytes of the checkpoint's tensors per storage type (every tensor of the
 * files, bound or not). */
static void print_types(const dsv4_model *m)
{
    tensor_source src = {m->st, m->gg};
    const char *names[64];
    uint64_t bytes[64] = {0};
    int count[64] = {0}, n = 0;
    src_tensor t;
    for (int i = 0; tsrc_get(&src, i, &t); i++) {
        int k = 0;
        while (k < n && strcmp(names[k], t.type)) k++;
        if (k == n && n < 64) names[n++] = t.type;
        if (k < 64) { bytes[k] += t.nbytes; count[k]++; }
    }
    printf("weights by type:  ");
    for (int k = 0; k < n; k++)
        printf("%s%s %.2f MiB (%d)", k ? ", " : "", names[k], (double)bytes[k] / (1 << 20), count[k]);
    printf("\n");
}

int cmd_info(int argc, char **argv)
{
    static const struct option opts[] = {{"model", required_argument, 0, 'm'}, {"gpu-gib", required_argument, 0, 'g'},
                                         {"context", required_argument, 0, 'c'}, {"config", required_argument, 0, 'C'},
                                         {"memory-gb", required_argument, 0, 'M'}, {"cache", required_argument, 0, 'K'},
                                         {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    const char *model = NULL, *config = NULL, *cache = NULL;
    double gpu_gib = 140.0, budget = 0;
    long long ctx_arg = 0;
    int c;
    char *end;
    optind = 1;
    while ((c = getopt_long(argc, argv, "m:h", opts, NULL)) != -1) {
        if (c == 'm') model = optarg;
        else if (c == 'g') {
            gpu_gib = strtod(optarg, &end);
            if (*end || !(gpu_gib > 0 && gpu_gib < 1e6)) {
                fprintf(stderr, "dsv4 info: --gpu-gib: '%s' is not a positive number of GiB\n", optarg);
                return 2;
            }
        } else if (c == 'c') {
            ctx_arg = strtoll(optarg, &end, 10);
            if (*end || ctx_arg < 1) { fprintf(stderr, "dsv4 info: --context: '%s' is not a positive integer\n", optarg); return 2; }
        } else if (c == 'C') {
            config = optarg;
        } else if (c == 'K') {
            cache = optarg;
        } else if (c == 'M') {
            budget = strtod(optarg, &end);
            if (*end || !(budget > 0 && budget < 1e9)) {
                fprintf(stderr, "dsv4 info: --memory-gb: '%s' is not a positive number of GiB\n", optarg);
                return 2;
            }
        } else if (c == 'h') { usage(stdout); return 0; }
        else { usage(stderr); return 2; }
    }
    if (!!model == !!config) { usage(stderr); return 2; }
    if (config) return info_config(config, budget);
    dsv4_model *m = cli_load_model("info", model, 1, "cpu", cache);
    if (!m) return 1;
    const dsv4_config *cf = &m->cfg;
    int n_swa = 0, n_csa = 0, n_hca = 0;
    for (int l = 0; l < cf->n_layers; l++) {
        n_swa += cf->attn_kind[l] == ATTN_SWA;
        n_csa += cf->attn_kind[l] == ATTN_CSA;
        n_hca += cf->attn_kind[l] == ATTN_HCA;
    }
    dsv4_memory_info mi;
    dsv4_model_memory(m, &mi);
    uint64_t wb = weights_bytes(m);
    const double G = (double)(1u << 30);
    printf("model:            %s\n", model);
    printf("vocab:            %d\n", cf->vocab);
    printf("hidden:           %d, %d layers (%d sliding, %d CSA ratio %d, %d HCA ratio %d)\n", cf->dim,
           cf->n_layers, n_swa, n_csa, cf->ratio_csa, n_hca, cf->ratio_hca);
    printf("attention:        %d heads x %d (rope %d), q_lora %d, o_groups %d x %d, window %d\n", cf->n_heads,
           cf->head_dim, cf->rope_dim, cf->q_lora, cf->o_groups, cf->o_lora, cf->window);
    printf("indexer:          %d heads x %d, top-%d\n", cf->idx_heads, cf->idx_head_dim, cf->idx_topk);
    printf("moe:              %d experts (top-%d, %d hash layers), inter %d, shared %d\n", cf->n_experts,
           cf->n_active, config_n_hash(cf), cf->moe_inter, cf->n_shared);
    printf("hyper-connections:%d streams, %d Sinkhorn iterations\n", cf->hc_mult, cf->hc_iters);
    printf("weights:          %.2f MiB mapped, %.2f MiB bound (what a device holds)\n",
           (double)mi.weight_bytes / (1 << 20), (double)wb / (1 << 20));
    print_types(m);
    int official = dsv4_model_cache_mode(m) == DSV4_CACHE_OFFICIAL;
    printf("cache numerics:   %s%s\n", official ? "official" : "exact", cache ? "" : " by default");
    printf("session fixed:    %llu bytes (window rings + compressor buffers)\n", (unsigned long long)mi.fixed_bytes);
    printf("session per token:%.2f bytes (compressed KV + indexer keys, %s)\n", mi.bytes_per_token,
           official ? "packed FP8 / FP4" : "fp32");
    if (budget > 0) { /* this model's sessions (MTP ring included) */
        double room = budget * 1073741824.0 - (double)mi.fixed_bytes;
        printf("state budget:     one session of up to %.0f tokens in %g GiB\n",
               room > 0 ? room / mi.bytes_per_token : 0.0, budget);
    }
    print_state(cf, budget);
    memplan p = {wb, mi.fixed_bytes, mi.bytes_per_token, (uint64_t)(gpu_gib * G), MODEL_DEVICE_RESERVE, cf->max_pos};
    printf("gpu plan:         %.2f GiB device, %.2f GiB weights, %.2f GiB reserved: ", gpu_gib, (double)wb / G,
           (double)p.reserve / G);
    if (memplan_sessions(&p, 0) < 1) {
        printf("the weights and the reserve do not fit\n");
    } else {
        printf("one session up to %lld tokens (max_position %d)\n", (long long)memplan_max_context(&p), cf->max_pos);
        long long ctxs[] = {4096, 32768, 131072, 1048576};
        int nc = 4;
        if (ctx_arg) { ctxs[0] = ctx_arg; nc = 1; }
        printf("sessions:        ");
        for (int i = 0, first = 1; i < nc; i++) {
            if (ctxs[i] > cf->max_pos && !ctx_arg) continue;
            printf("%s %lld at %lld tokens (%.3f GiB each)", first ? "" : ",", (long long)memplan_sessions(&p, ctxs[i]),
                   ctxs[i], (double)memplan_session_bytes(&p, ctxs[i]) / G);
            first = 0;
        }
        printf("\n");
    }
    if (m->gg) {
        int k = gguf_chat_template_kind(m->gg);
        printf("chat template:    %s\n", k == CHAT_TEMPLATE_V4 ? "DeepSeek-V4 (not executed; the built-in encoder renders chats)"
                                       : k == CHAT_TEMPLATE_OTHER ? "not DeepSeek-V4's (ignored; the built-in V4 encoder renders chats)"
                                       : "none (the built-in V4 encoder renders chats)");
    }
    printf("mtp head:         %s\n", dsv4_model_has_mtp(m) ? "yes (mtp.0, speculative decoding with --spec mtp)" : "no");
    if (dsv4_model_has_dspark(m)) {
        const dsv4_config *c = &m->cfg;
        printf("dspark drafter:   yes (%d stages mtp.0..mtp.%d, B=%d, target layers", m->n_draft, m->n_draft - 1,
               c->dspark_block);
        for (int i = 0; i < c->dspark_n_targets; i++) printf("%s%d", i ? "," : " ", c->dspark_targets[i]);
        printf(", Markov rank %d; speculative decoding with --spec dspark)\n", c->dspark_rank);
    } else {
        printf("dspark drafter:   no\n");
    }
    printf("mtp tensors:      %d known, not bound (GGUF nextn blocks, MTP heads after mtp.0, a DSpark drafter "
           "without its config keys)\n", m->n_mtp_tensors);
    printf("unknown tensors:  %d\n", dsv4_model_unknown_count(m));
    dsv4_model_free(m);
    return 0;
}
