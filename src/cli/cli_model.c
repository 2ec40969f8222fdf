/* Model loading for the CLI: options shared by the commands that run a model,
 * a progress bar on a terminal, and the report of unknown tensors. */
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <unistd.h>

#include "base/error.h"
#include "base/size.h"
#include "cli/commands.h"
#include "model/config_gguf.h"

/* A bar on stderr; only for checkpoints big enough to take a while. */
static void progress(void *user, uint64_t done, uint64_t total)
{
    (void)user;
    if (total < (256u << 20)) return;
    int pct = (int)(100.0 * (double)done / (double)total), w = pct * 30 / 100;
    fprintf(stderr, "\rloading [%.*s%*s] %3d%% of %.1f GiB", w, "##############################", 30 - w, "", pct,
            (double)total / (1u << 30));
    if (done >= total) fputc('\n', stderr);
}

int cli_cache_arg(const char *cmd, const char *name, dsv4_cache_mode *out)
{
    if (!name || !strcmp(name, "auto")) *out = DSV4_CACHE_AUTO;
    else if (!strcmp(name, "exact")) *out = DSV4_CACHE_EXACT;
    else if (!strcmp(name, "official")) *out = DSV4_CACHE_OFFICIAL;
    else {
        fprintf(stderr, "dsv4 %s: --cache must be exact, official or auto, not '%s'\n", cmd, name);
        return -1;
    }
    return 0;
}

dsv4_model *cli_load_model(const char *cmd, const char *dir, int threads, const char *device, const char *cache)
{
    dsv4_load_options opt = {0};
    opt.n_threads = threads;
    opt.device = device;
    if (cli_cache_arg(cmd, cache, &opt.cache)) return NULL;
    if (isatty(2)) opt.progress = progress;
    dsv4_model *m = NULL;
    if (dsv4_model_load(dir, &opt, &m)) {
        cli_report(cmd, NULL);
        return NULL;
    }
    int nu = dsv4_model_unknown_count(m);
    for (int i = 0; i < nu && i < 8; i++) {
        char name[1024]; /* a name from the file: one line whatever it holds */
        error_escape(dsv4_model_unknown_name(m, i), name, sizeof name);
        fprintf(stderr, "dsv4 %s: warning: unknown tensor '%s' ignored\n", cmd, name);
    }
    if (nu > 8) fprintf(stderr, "dsv4 %s: warning: %d more unknown tensors ignored\n", cmd, nu - 8);
    return m;
}

int cli_model_context(const char *cmd, const char *dir)
{
    dsv4_config cfg;
    if (config_load_model(dir, &cfg, NULL)) { cli_report(cmd, NULL); return -1; }
    return cfg.max_pos;
}

int cli_token_arg(const char *cmd, const char *tokens, const char *file, int max_pos, int **ids, int *n)
{
    if (!!tokens == !!file) {
        fprintf(stderr, "dsv4 %s: give exactly one of --tokens or --tokens-file\n", cmd);
        return -1;
    }
    int r;
    if (tokens) {
        r = cli_parse_ids(tokens, ids, n, "--tokens");
    } else {
        size_t len;
        char *text = cli_read_file(cmd, file, size_mul((size_t)max_pos, CLI_ID_BYTES), &len);
        if (!text) return -1;
        r = cli_no_nul(cmd, file, text, len) ? -1 : cli_parse_ids(text, ids, n, file);
        free(text);
    }
    if (!r && cli_prompt_fits(cmd, tokens ? "--tokens" : file, (size_t)*n, max_pos)) {
        free(*ids);
        *ids = NULL;
        r = -1;
    }
    return r;
}
