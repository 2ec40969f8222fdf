/* dsv4 info: model facts, weight bytes, session memory per token. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli/commands.h"
#include "model/model.h"

static void usage(FILE *f) { fprintf(f, "usage: dsv4 info --model DIR\n"); }

int cmd_info(int argc, char **argv)
{
    static const struct option opts[] = {{"model", required_argument, 0, 'm'}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    const char *model = NULL;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "m:h", opts, NULL)) != -1) {
        if (c == 'm') model = optarg;
        else if (c == 'h') { usage(stdout); return 0; }
        else { usage(stderr); return 2; }
    }
    if (!model) { usage(stderr); return 2; }
    dsv4_model *m = cli_load_model("info", model, 1, "cpu");
    if (!m) return 1;
    const dsv4_config *cf = &m->cfg;
    int n_swa = 0, n_csa = 0, n_hca = 0, n_hash = 0;
    for (int l = 0; l < cf->n_layers; l++) {
        n_swa += cf->attn_kind[l] == ATTN_SWA;
        n_csa += cf->attn_kind[l] == ATTN_CSA;
        n_hca += cf->attn_kind[l] == ATTN_HCA;
        n_hash += cf->hash_layer[l];
    }
    dsv4_memory_info mi;
    dsv4_model_memory(m, &mi);
    printf("model:            %s\n", model);
    printf("vocab:            %d\n", cf->vocab);
    printf("hidden:           %d, %d layers (%d sliding, %d CSA ratio %d, %d HCA ratio %d)\n", cf->dim,
           cf->n_layers, n_swa, n_csa, cf->ratio_csa, n_hca, cf->ratio_hca);
    printf("attention:        %d heads x %d (rope %d), q_lora %d, o_groups %d x %d, window %d\n", cf->n_heads,
           cf->head_dim, cf->rope_dim, cf->q_lora, cf->o_groups, cf->o_lora, cf->window);
    printf("indexer:          %d heads x %d, top-%d\n", cf->idx_heads, cf->idx_head_dim, cf->idx_topk);
    printf("moe:              %d experts (top-%d, %d hash layers), inter %d, shared %d\n", cf->n_experts,
           cf->n_active, n_hash, cf->moe_inter, cf->n_shared);
    printf("hyper-connections:%d streams, %d Sinkhorn iterations\n", cf->hc_mult, cf->hc_iters);
    printf("weights:          %.2f MiB mapped\n", (double)mi.weight_bytes / (1 << 20));
    printf("session fixed:    %llu bytes (window rings + compressor buffers)\n", (unsigned long long)mi.fixed_bytes);
    printf("session per token:%.2f bytes (compressed KV + indexer keys, fp32)\n", mi.bytes_per_token);
    printf("mtp head:         %s\n", dsv4_model_has_mtp(m) ? "yes (mtp.0, speculative decoding with --spec mtp)" : "no");
    if (m->n_mtp_tensors) printf("mtp tensors:      %d more, not used (deeper drafters)\n", m->n_mtp_tensors);
    printf("unknown tensors:  %d\n", dsv4_model_unknown_count(m));
    dsv4_model_free(m);
    return 0;
}
