/* dsv4 info: model facts, weight bytes, session memory per token in each
 * state layout and the longest context a memory budget holds. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "model/model.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: dsv4 info (--model DIR | --config FILE) [--memory-gb G]\n"
               "--config reads only a config.json (no weights); --memory-gb: the longest context whose\n"
               "session state fits in G GiB, per state layout.\n");
}

static void print_config(const dsv4_config *cf)
{
    int n_swa = 0, n_csa = 0, n_hca = 0, n_hash = 0;
    for (int l = 0; l < cf->n_layers; l++) {
        n_swa += cf->attn_kind[l] == ATTN_SWA;
        n_csa += cf->attn_kind[l] == ATTN_CSA;
        n_hca += cf->attn_kind[l] == ATTN_HCA;
        n_hash += cf->hash_layer[l];
    }
    static const char *const fmt[] = {"bf16/f32", "fp8 e4m3", "mxfp4"};
    printf("vocab:            %d\n", cf->vocab);
    printf("hidden:           %d, %d layers (%d sliding, %d CSA ratio %d, %d HCA ratio %d)\n", cf->dim,
           cf->n_layers, n_swa, n_csa, cf->ratio_csa, n_hca, cf->ratio_hca);
    printf("attention:        %d heads x %d (rope %d), q_lora %d, o_groups %d x %d, window %d\n", cf->n_heads,
           cf->head_dim, cf->rope_dim, cf->q_lora, cf->o_groups, cf->o_lora, cf->window);
    printf("indexer:          %d heads x %d, top-%d\n", cf->idx_heads, cf->idx_head_dim, cf->idx_topk);
    printf("moe:              %d experts (top-%d, %d hash layers), inter %d, shared %d\n", cf->n_experts,
           cf->n_active, n_hash, cf->moe_inter, cf->n_shared);
    printf("hyper-connections:%d streams, %d Sinkhorn iterations\n", cf->hc_mult, cf->hc_iters);
    printf("weight formats:   dense %s, routed experts %s\n", fmt[cf->weight_format], fmt[cf->expert_format]);
}

/* Bytes per token and fixed bytes of every layout; with a budget, the
 * longest context whose state fits. */
static void print_state(const dsv4_config *cf, double budget_gib)
{
    static const char *const name[STATE_LAYOUTS] = {
        "fp32 (what the engine holds)", "bf16 (reference layout)",
        "official (FP8 KV, FP4 idx keys)", "FlashMLA FP8 + FP8 idx keys"};
    printf("session state:    growing part per token and fixed part, by layout\n");
    for (int k = 0; k < STATE_LAYOUTS; k++) {
        double pt;
        uint64_t fixed;
        config_state_size(cf, k, &pt, &fixed);
        printf("  %-32s %9.2f B/token  fixed %8.2f MiB", name[k], pt, (double)fixed / (1 << 20));
        if (budget_gib > 0) {
            double room = budget_gib * 1073741824.0 - (double)fixed;
            printf("  longest context in %g GiB: %.0f tokens", budget_gib, room > 0 ? room / pt : 0.0);
        }
        printf("\n");
    }
}

int cmd_info(int argc, char **argv)
{
    static const struct option opts[] = {{"model", required_argument, 0, 'm'}, {"config", required_argument, 0, 'c'},
                                         {"memory-gb", required_argument, 0, 'g'}, {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    const char *model = NULL, *config = NULL;
    double budget = 0;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "m:c:g:h", opts, NULL)) != -1) {
        if (c == 'm') model = optarg;
        else if (c == 'c') config = optarg;
        else if (c == 'g') {
            char *end;
            budget = strtod(optarg, &end);
            if (*end || !(budget > 0) || budget > 1e9) {
                fprintf(stderr, "dsv4 info: --memory-gb must be a positive number of GiB\n");
                return 2;
            }
        } else if (c == 'h') { usage(stdout); return 0; }
        else { usage(stderr); return 2; }
    }
    if (!!model == !!config) { usage(stderr); return 2; }
    if (config) {
        size_t len;
        char *text = cli_read_file(config, &len);
        if (!text) return 1;
        static dsv4_config cf;
        dsv4_status st = config_parse(text, len, config, &cf);
        free(text);
        if (st) { cli_report("info", NULL); return 1; }
        printf("config:           %s\n", config);
        print_config(&cf);
        print_state(&cf, budget);
        return 0;
    }
    dsv4_model *m = cli_load_model("info", model, 1, "cpu", NULL);
    if (!m) return 1;
    dsv4_memory_info mi;
    dsv4_model_memory(m, &mi);
    printf("model:            %s\n", model);
    print_config(&m->cfg);
    printf("cache numerics:   %s by default\n", dsv4_model_cache_mode(m) == DSV4_CACHE_OFFICIAL ? "official" : "exact");
    printf("weights:          %.2f MiB mapped\n", (double)mi.weight_bytes / (1 << 20));
    printf("session fixed:    %llu bytes (window rings + compressor buffers)\n", (unsigned long long)mi.fixed_bytes);
    printf("session per token:%.2f bytes (compressed KV + indexer keys, fp32)\n", mi.bytes_per_token);
    print_state(&m->cfg, budget);
    printf("mtp tensors:      %d (kept for speculative decoding)\n", m->n_mtp_tensors);
    printf("unknown tensors:  %d\n", dsv4_model_unknown_count(m));
    dsv4_model_free(m);
    return 0;
}
