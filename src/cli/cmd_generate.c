/* dsv4 generate: greedy decoding from token ids. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli/commands.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: dsv4 generate --model DIR (--tokens 1,2,3 | --tokens-file F) [-n N] [--threads N]\n"
            "       [--device cpu|cuda|auto]   (default auto: cuda when a GPU is usable)\n"
            "Prefills the prompt, then decodes N tokens greedily (default 16) and prints\n"
            "the generated ids, comma-separated, on one line.\n");
}

static int argmax(const float *v, int n)
{
    int best = 0;
    for (int i = 1; i < n; i++) if (v[i] > v[best]) best = i; /* ties: lowest id */
    return best;
}

int cmd_generate(int argc, char **argv)
{
    static const struct option opts[] = {
        {"model", required_argument, 0, 'm'}, {"tokens", required_argument, 0, 't'},
        {"tokens-file", required_argument, 0, 'f'}, {"threads", required_argument, 0, 'j'},
        {"device", required_argument, 0, 'd'},
        {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    const char *model = NULL, *tokens = NULL, *file = NULL;
    int n_gen = 16, threads = 0, c;
    const char *device = NULL;
    optind = 1;
    while ((c = getopt_long(argc, argv, "m:t:f:n:j:d:h", opts, NULL)) != -1) {
        switch (c) {
        case 'm': model = optarg; break;
        case 't': tokens = optarg; break;
        case 'f': file = optarg; break;
        case 'n': n_gen = atoi(optarg); if (n_gen < 0) { fprintf(stderr, "dsv4 generate: -n must be >= 0\n"); return 2; } break;
        case 'j': threads = atoi(optarg); break;
        case 'd': device = optarg; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (!model) { usage(stderr); return 2; }
    int *ids = NULL, n = 0;
    if (cli_token_arg("generate", tokens, file, &ids, &n)) return 2;
    dsv4_model *m = cli_load_model("generate", model, threads, device);
    if (!m) { free(ids); return 1; }
    int V = dsv4_model_vocab(m), rc = 1;
    float *logits = malloc((size_t)V * sizeof *logits);
    dsv4_session *s = NULL;
    if (!logits || dsv4_session_new(m, &s)) { cli_report("generate", NULL); goto done; }
    if (dsv4_session_eval_last(s, (const int32_t *)ids, n, logits)) { cli_report("generate", "prompt"); goto done; }
    for (int i = 0; i < n_gen; i++) {
        int32_t next = argmax(logits, V);
        printf("%s%d", i ? "," : "", next);
        fflush(stdout);
        if (i + 1 < n_gen && dsv4_session_eval_last(s, &next, 1, logits)) {
            printf("\n");
            cli_report("generate", NULL);
            goto done;
        }
    }
    printf("\n");
    rc = 0;
done:
    dsv4_session_free(s);
    dsv4_model_free(m);
    free(logits);
    free(ids);
    return rc;
}
