/* dsv4 score: logits of every input position, computed in chunks of K. */
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/size.h"
#include "cli/commands.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: dsv4 score --model DIR (--tokens 1,2,3 | --tokens-file F) [--chunk K]\n"
            "                  --logits-out FILE [--threads N]\n"
            "       [--device cpu|cuda|auto]   (default auto: cuda when a GPU is usable)\n"
            CLI_CACHE_USAGE
            "Writes raw little-endian float32 logits, one row of vocab values per input\n"
            "position. --chunk K feeds K tokens per step (1 = pure decode); default: all\n"
            "at once. Token files hold integers separated by commas and/or whitespace.\n");
}

int cmd_score(int argc, char **argv)
{
    static const struct option opts[] = {
        {"model", required_argument, 0, 'm'}, {"tokens", required_argument, 0, 't'},
        {"tokens-file", required_argument, 0, 'f'}, {"chunk", required_argument, 0, 'k'},
        {"logits-out", required_argument, 0, 'o'}, {"threads", required_argument, 0, 'j'},
        {"device", required_argument, 0, 'd'}, {"cache", required_argument, 0, 'c'},
        {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    const char *model = NULL, *tokens = NULL, *file = NULL, *out = NULL;
    int chunk = 0, threads = 0, c;
    const char *device = NULL, *cache = NULL;
    optind = 1;
    while ((c = getopt_long(argc, argv, "m:t:f:k:o:j:d:c:h", opts, NULL)) != -1) {
        switch (c) {
        case 'm': model = optarg; break;
        case 't': tokens = optarg; break;
        case 'f': file = optarg; break;
        case 'k': if (cli_int32("score", "--chunk", optarg, 1, INT_MAX, &chunk)) return 2; break;
        case 'o': out = optarg; break;
        case 'j': if (cli_int32("score", "--threads", optarg, 0, CLI_MAX_THREADS, &threads)) return 2; break;
        case 'd': device = optarg; break;
        case 'c': cache = optarg; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (!model || !out) { usage(stderr); return 2; }
    int *ids = NULL, n = 0, max_pos = cli_model_context("score", model);
    if (max_pos < 0) return 1;
    if (cli_token_arg("score", tokens, file, max_pos, &ids, &n)) return 2;
    dsv4_model *m = cli_load_model("score", model, threads, device, cache);
    if (!m) { free(ids); return 1; }
    int V = dsv4_model_vocab(m), rc = 1;
    float *logits = malloc(size_mul3((size_t)n, (size_t)V, sizeof *logits));
    dsv4_session *s = NULL;
    FILE *fo = NULL;
    if (!logits) { fprintf(stderr, "dsv4 score: out of memory for %d x %d logits\n", n, V); goto done; }
    if (dsv4_session_new(m, &s)) { cli_report("score", NULL); goto done; }
    if (chunk <= 0) chunk = n;
    for (int i = 0; i < n; i += chunk) {
        int k = n - i < chunk ? n - i : chunk;
        if (dsv4_session_eval(s, (const int32_t *)ids + i, k, logits + (size_t)i * (size_t)V)) {
            cli_report("score", NULL);
            goto done;
        }
    }
    if (!(fo = fopen(out, "wb")) || fwrite(logits, sizeof(float), (size_t)n * (size_t)V, fo) != (size_t)n * (size_t)V) {
        fprintf(stderr, "dsv4 score: cannot write %s\n", out);
        goto done;
    }
    rc = 0;
done:
    if (fo && fclose(fo) && !rc) { fprintf(stderr, "dsv4 score: cannot write %s\n", out); rc = 1; }
    dsv4_session_free(s);
    dsv4_model_free(m);
    free(logits);
    free(ids);
    return rc;
}
